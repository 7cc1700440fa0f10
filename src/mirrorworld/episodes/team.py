"""One multi-party episode: several roles acting in one shared :class:`~mirrorworld.episodes.episode.Episode`.

A :class:`TeamEpisode` is to a team what an :class:`Episode` is to a single
agent, for any world that declares seats (:class:`~mirrorworld.core.seats.Seated`).
The PettingZoo environments and the multi-agent runner both step it; neither
owns logic the other needs, and none of them imports a world.

* **One episode.** Every role's tool call goes through the same
  ``Episode.step``: one call is one transaction, refused calls change nothing,
  every call is an event the verifier reads, and the end is the episode's.
* **Seats.** A role may call only its own tools (``world.role_tools``). A call
  of any other tool is refused at the seat with ``{code: "not_permitted"}``
  and never reaches the session. ``None`` (or the tool name ``wait``) passes
  the turn.
* **Roles on the record.** Every call reaches the session with the caller's
  role (``Session.call(..., role=)``), recorded on its event, so the world's
  guards can hold each party to its part (who speaks for the customer, who
  approves, who holds the chat after a transfer).
* **Turns.** Every action, waits included, is a :class:`Turn` in
  ``episode.turns``: who acted, in which cycle, with which tool and arguments,
  how it ended, and the session step it became. This is how each event is
  attributed to a role.
* **End.** The episode terminates when a final message is sent (the world's
  terminal tool) or the contact ends (``world.contact_over``: the customer
  left), and truncates after ``max_cycles`` cycles (a cycle is one turn of
  every role) or ``max_steps`` calls. It is then graded once by the shared
  verifier. After the end every action, waits included, is refused with
  ``episode_over`` and changes nothing, as in every other adapter.
* **Rewards.** Every role gets the team's reward: the verdict's score at the
  end and, with ``reward="shaped"``, the potential-based process reward as it
  is earned (its terms sum to zero over an episode, so returns equal the
  score). On top, each role is charged ``penalty`` for every hard rule its own
  calls broke: a supervisor who approves a refund the policy forbids loses
  ``penalty`` even when the team never uses the approval.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mirrorworld.core.seats import Seated, seats_of
from mirrorworld.core.session import Session, ToolResult, Violation
from mirrorworld.core.task import Task, ToolCall
from mirrorworld.core.world import World
from mirrorworld.episodes.episode import Episode, EpisodeOptions
from mirrorworld.episodes.outcome import EPISODE_OVER
from mirrorworld.errors import MirrorworldError
from mirrorworld.verify.verdict import Verdict

__all__ = ["WAIT", "Action", "RoleObservation", "TeamEpisode", "Turn"]

WAIT = "wait"
"""The name of the pass action (index 0 of every role's action space)."""

Action = ToolCall | None
"""What a role does on its turn: one tool call, or ``None`` to wait."""


@dataclass(frozen=True)
class RoleObservation:
    """What one role sees: its briefing, its inbox, the result of its own last call."""

    role: str
    briefing: str
    inbox: dict[str, Any]
    """``{"now": simulated time, "messages": [...]}``: the latest messages addressed to this role."""
    last_result: str
    """The JSON result of this role's last call (an error is ``{"error": {code, message}}``); "" before any."""
    cycle: int
    tools: tuple[str, ...]
    done: bool

    def result(self) -> Any:
        """``last_result`` parsed (None when there is none)."""
        return json.loads(self.last_result) if self.last_result else None


@dataclass(frozen=True)
class Turn:
    """One action of one role, as it happened."""

    index: int
    cycle: int
    role: str
    tool: str | None
    """None for a wait."""
    args: Any
    ok: bool
    error: dict[str, Any] | None
    step: int | None
    """The session step the call became (None: a wait, or refused at the seat)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "cycle": self.cycle,
            "role": self.role,
            "tool": self.tool,
            "args": self.args if isinstance(self.args, (dict, str)) or self.args is None else repr(self.args),
            "ok": self.ok,
            "error": self.error,
            "step": self.step,
        }


def _shown(name: str) -> str:
    return json.dumps(name if len(name) <= 60 else name[:57] + "...")


@dataclass
class _Ledger:
    pending: dict[str, float] = field(default_factory=dict)
    returns: dict[str, float] = field(default_factory=dict)

    def credit(self, roles: tuple[str, ...], amount: float) -> None:
        if amount == 0:
            return
        for r in roles:
            self.pending[r] = self.pending.get(r, 0.0) + amount
            self.returns[r] = self.returns.get(r, 0.0) + amount


class TeamEpisode:
    """A running multi-party episode. See the module docstring."""

    def __init__(
        self,
        world: World,
        task: Task,
        *,
        max_cycles: int = 40,
        reward: Literal["shaped", "sparse"] = "shaped",
        penalty: float = 1.0,
        max_steps: int | None = None,
    ) -> None:
        if max_cycles < 1:
            raise MirrorworldError("max_cycles must be at least 1")
        seats = seats_of(world)
        self.world = world
        self.seats: Seated = seats
        self.task = task
        self.max_cycles = max_cycles
        self.penalty = penalty
        self.episode = Episode(world, task, EpisodeOptions(max_steps=max_steps, reward=reward))
        self.roles: tuple[str, ...] = seats.task_roles(task)
        self.turns: list[Turn] = []
        self.cycle = 0
        self._briefings = {r: seats.briefing(task, r) for r in self.roles}
        self._last: dict[str, str] = dict.fromkeys(self.roles, "")
        self._step_roles: dict[int, str] = {}
        self._ledger = _Ledger(returns=dict.fromkeys(self.roles, 0.0))

    # -- state -----------------------------------------------------------------

    @property
    def session(self) -> Session:
        return self.episode.session

    @property
    def reward_mode(self) -> str:
        return self.episode.options.reward

    @property
    def verdict(self) -> Verdict | None:
        return self.episode.verdict

    @property
    def terminated(self) -> bool:
        """The contact ended: a final message was sent or the customer left."""
        return self.episode.terminated

    @property
    def truncated(self) -> bool:
        """The cycle or step budget ran out first."""
        return self.episode.truncated

    @property
    def over(self) -> bool:
        return self.episode.over

    @property
    def customer_left(self) -> bool:
        return self.seats.contact_over(self.session)

    def observe(self, role: str) -> RoleObservation:
        """What ``role`` sees now."""
        self._check_role(role)
        return RoleObservation(
            role=role,
            briefing=self._briefings[role],
            inbox=self.seats.inbox(self.session, role),
            last_result=self._last[role],
            cycle=self.cycle,
            tools=self.seats.role_tools[role],
            done=self.over,
        )

    def tools_of(self, role: str) -> tuple[str, ...]:
        return self.seats.role_tools[role]

    # -- stepping ----------------------------------------------------------------

    def act(self, role: str, tool: str | None, args: Mapping[str, Any] | str | None = None) -> ToolResult | None:
        """Play one action of ``role``: a tool call, or a wait (``tool`` None or ``"wait"``).

        Returns the tool's result (None for a wait). Nothing an agent sends
        raises: a tool outside the role's seat is refused with
        ``not_permitted``, everything else is the episode's to judge. After the
        end every action, a wait included, gets the ``episode_over`` error and
        changes nothing (no turn is recorded).
        """
        self._check_role(role)
        if self.over:
            return ToolResult(False, error=dict(EPISODE_OVER), done=True)
        index = len(self.turns)
        if tool is None or tool == WAIT:
            self.turns.append(Turn(index, self.cycle, role, None, None, True, None, None))
            return None
        if not isinstance(tool, str) or tool not in self.seats.role_tools[role]:
            name = tool if isinstance(tool, str) else f"<{type(tool).__name__}>"
            error = {"code": "not_permitted", "message": f"the {role} has no tool named {_shown(name)}"}
            self.turns.append(Turn(index, self.cycle, role, name[:200], None, False, error, None))
            result = ToolResult(False, error=error)
            self._last[role] = result.content()
            return result
        outcome = self.episode.step(tool, args, role=role)
        step = outcome.step
        self._step_roles[step] = role
        event = self.session.events[-1]
        self.turns.append(Turn(index, self.cycle, role, tool, event.args, outcome.ok, outcome.error, step))
        self._last[role] = outcome.content()
        self._ledger.credit(self.roles, outcome.reward)
        if outcome.verdict is not None:
            self._settle_roles()
        return outcome.result

    def end_cycle(self) -> None:
        """Close a cycle (every role has had its turn); truncate after ``max_cycles``."""
        if self.over:
            return
        self.cycle += 1
        if self.cycle >= self.max_cycles:
            self._end(self.episode.truncate)

    def finish(self) -> Verdict:
        """Grade the episode now (once) and pay out the final rewards."""
        if self.episode.verdict is not None:
            return self.episode.verdict
        return self._end(self.episode.finish)

    def _end(self, how: Any) -> Verdict:
        before = self.episode.total_reward
        verdict: Verdict = how()
        self._ledger.credit(self.roles, self.episode.total_reward - before)
        self._settle_roles()
        return verdict

    def _settle_roles(self) -> None:
        for role, term in self.role_terms().items():
            self._ledger.credit((role,), term)

    def pop_rewards(self) -> dict[str, float]:
        """Rewards earned by each role since the last call (0.0 for none)."""
        out = {r: self._ledger.pending.get(r, 0.0) for r in self.roles}
        self._ledger.pending.clear()
        return out

    # -- attribution ---------------------------------------------------------------

    def role_of_step(self, step: int) -> str | None:
        """The role whose call became session step ``step``."""
        return self._step_roles.get(step)

    def violations_by_role(self) -> dict[str, list[Violation]]:
        """Every rule broken in the episode (by committed calls and found by guards), by the role that broke it."""
        found = [v for e in self.session.events for v in e.violations] + list(self.world.guards(self.session))
        out: dict[str, list[Violation]] = {r: [] for r in self.roles}
        for v in found:
            role = self._step_roles.get(v.step)
            if role is not None:
                out.setdefault(role, []).append(v)
        return out

    def role_terms(self) -> dict[str, float]:
        """Each role's own reward term: ``-penalty`` per hard rule its calls broke."""
        return {role: -self.penalty * sum(1 for v in vs if v.hard) for role, vs in self.violations_by_role().items()}

    @property
    def returns(self) -> dict[str, float]:
        """Each role's return so far."""
        return dict(self._ledger.returns)

    def close(self) -> None:
        self.episode.close()

    def _check_role(self, role: str) -> None:
        if role not in self.roles:
            raise MirrorworldError(f"{role!r} is not a party to task {self.task.id} (parties: {', '.join(self.roles)})")
