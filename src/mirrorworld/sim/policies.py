"""Policies for the roles of a team: the interface and the generic baselines.

A :class:`RolePolicy` plays one role of a world with seats
(:class:`~mirrorworld.core.seats.Seated`). At each of its turns it gets that
role's :class:`~mirrorworld.episodes.team.RoleObservation` and answers with one
tool call or ``None`` (wait). ``reset`` hands it a :class:`RoleContext` whose
``task`` is privileged: only gold policies and test doubles may read it (the
gold staff read the task's gold plan; a simulated customer reads only its own
profile).

The baselines here work in any seated world; policies that only make sense in
one world live with it and are named by its
:meth:`~mirrorworld.core.seats.Seated.policy_menu`:

* :class:`GoldStaff` — plays its role's share of the task's gold trajectory,
  waiting for the other parties' hand-offs and taking what only another party
  knows (order numbers, codes) from what that party actually wrote; when an
  answer lacks it, it asks again;
* :class:`IdlePolicy`, :class:`RefusePolicy`, :class:`ClaimPolicy` — null
  baselines: wait forever, refuse at once, claim success without acting.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from mirrorworld.core.seats import seats_of
from mirrorworld.core.task import Task, ToolCall
from mirrorworld.core.world import World
from mirrorworld.episodes.team import Action, RoleObservation
from mirrorworld.errors import WorldError

__all__ = [
    "CLAIM",
    "REFUSAL",
    "ClaimPolicy",
    "GoldStaff",
    "IdlePolicy",
    "RefusePolicy",
    "RoleContext",
    "RolePolicy",
]

REFUSAL = "I'm sorry, but I can't help with that request."
CLAIM = "All done! I've taken care of everything you asked for and your issue is fully resolved."


@dataclass(frozen=True)
class RoleContext:
    """What a policy is told when an episode starts. ``task`` is privileged (see the module docstring)."""

    world: World
    """A world with seats (:class:`~mirrorworld.core.seats.Seated`)."""
    task: Task
    role: str
    seed: int


class RolePolicy(ABC):
    """Base class of the policies of one role. One instance plays one episode at a time."""

    name: str = "policy"

    def reset(self, context: RoleContext) -> None:  # noqa: B027 - optional hook
        """Prepare for a new episode."""

    @abstractmethod
    def act(self, obs: RoleObservation) -> Action:
        """The role's next action: a tool call, or None to wait."""


class IdlePolicy(RolePolicy):
    """Waits forever (a null policy)."""

    name = "idle"

    def act(self, obs: RoleObservation) -> Action:
        return None


class _SayOnce(RolePolicy):
    """Ends the contact at once with ``text``, through the role's terminal tool (waits if its seat has none)."""

    text = ""

    def reset(self, context: RoleContext) -> None:
        self._said = False
        self._call: ToolCall | None = None
        world = context.world
        for name in seats_of(world).role_tools.get(context.role, ()):
            spec = world.tools_by_name[name]
            required = [p for p in spec.params if p.required]
            if spec.kind == "terminal" and len(required) == 1 and required[0].schema.get("type") == "string":
                self._call = ToolCall(name, {required[0].name: self.text})
                break

    def act(self, obs: RoleObservation) -> Action:
        if self._said or self._call is None or self._call.tool not in obs.tools:
            return None
        self._said = True
        return self._call


class RefusePolicy(_SayOnce):
    """Refuses at once (a null policy)."""

    name = "refuse"
    text = REFUSAL


class ClaimPolicy(_SayOnce):
    """Claims success at once without acting (a null policy)."""

    name = "claim"
    text = CLAIM


@dataclass
class _Step:
    call: ToolCall
    slots: dict[str, str]
    wait_for: frozenset[str]
    asks: bool = False
    """Whether another party answers this call with what a later step's slots need (a question)."""


class GoldStaff(RolePolicy):
    """Plays one role's share of the gold trajectory, reacting to what the others write (privileged).

    The world says who makes each call of the team's gold
    (:meth:`~mirrorworld.core.seats.Seated.team_plan`: by default
    ``task.hidden["plan"]``, one entry ``{"role": ..., "slots": {arg: slot}}``
    per call of ``task.gold``), where ``slots`` names the arguments whose values another party states
    (an order number the customer gives). Before each of its calls the policy
    waits until every other party whose write comes first in the plan has sent
    it a message; it fills the slots from the latest message of the party who
    knows them (the world's ``simulated_role``, or any other party when there
    is none), read with the world's :meth:`~mirrorworld.core.seats.Seated.extract_slot`.
    When that message does not state a value (an evasive customer), it repeats
    the question: its last call that the party answers before a step with
    slots, at most ``max_reasks`` times.
    """

    name = "gold"
    max_reasks = 3

    def reset(self, context: RoleContext) -> None:
        task, world, role = context.task, context.world, context.role
        self.seats = seats_of(world)
        self.source = self.seats.simulated_role if self.seats.simulated_role != role else None
        try:
            plan = self.seats.team_plan(task)
        except WorldError as err:
            raise ValueError(str(err)) from err
        self.steps: list[_Step] = []
        prev = -1
        for i, (who, call, slots) in enumerate(plan):
            if who != role:
                continue
            others = {
                plan[j][0]
                for j in range(prev + 1, i)
                if plan[j][0] != role and world.tools_by_name[plan[j][1].tool].kind != "read"
            }
            self.steps.append(_Step(call, slots, frozenset(others)))
            prev = i
        for step, after in zip(self.steps, self.steps[1:], strict=False):
            step.asks = bool(after.slots) and self._from_source(after.wait_for)
        self._k = 0
        self._seen = 0
        self._fresh: list[dict[str, Any]] = []
        self._said: str | None = None
        self._question: ToolCall | None = None
        self._reasks = 0

    def _from_source(self, roles: frozenset[str] | set[Any]) -> bool:
        """Whether ``roles`` include the party whose messages fill the slots."""
        return self.source in roles if self.source is not None else bool(roles)

    def transform(self, call: ToolCall) -> ToolCall:
        """A hook for test doubles: the call actually made for a gold call."""
        return call

    def act(self, obs: RoleObservation) -> Action:
        new = [m for m in obs.inbox.get("messages", []) if isinstance(m.get("id"), int) and m["id"] > self._seen]
        if new:
            self._seen = max(m["id"] for m in new)
            self._fresh += new
            for m in new:
                sender = m.get("from")
                if sender != obs.role and self._from_source({sender}):
                    self._said = str(m.get("body", ""))
        if obs.done or self._k >= len(self.steps):
            return None
        step = self.steps[self._k]
        if step.wait_for and not any(m.get("from") in step.wait_for for m in self._fresh):
            return None
        args = dict(step.call.args) if isinstance(step.call.args, dict) else {}
        for name, slot in step.slots.items():
            value = self.seats.extract_slot(slot, self._said)
            if value is None:
                if self._question is None or self._reasks >= self.max_reasks:
                    return None
                self._reasks += 1
                self._fresh = []
                return self._question
            args[name] = value
        self._k += 1
        self._fresh = []
        call = self.transform(ToolCall(step.call.tool, args))
        if step.asks:
            self._question = call
        return call
