"""One multi-party episode: several roles acting in one shared session.

A :class:`TeamEpisode` is to a team what :class:`~mirrorworld.envs.episode.Episode`
is to a single agent. The PettingZoo environments and the multi-agent runner
both step it; neither owns logic the other needs.

* **One session.** Every role's tool call goes through the same
  ``Session.call``: one call is one transaction, refused calls change nothing,
  and every call is an event the verifier reads.
* **Seats.** A role may call only its own tools (``world.role_tools``). A call
  of any other tool is refused at the seat with ``{code: "not_permitted"}``
  and never reaches the session. ``None`` (or the tool name ``wait``) passes
  the turn.
* **Turns.** Every action, waits included, is a :class:`Turn` in
  ``episode.turns``: who acted, in which cycle, with which tool and arguments,
  how it ended, and the session step it became. This is how each event is
  attributed to a role.
* **End.** The episode terminates when a final message is sent (the world's
  terminal tool) or the customer leaves the chat, and truncates after
  ``max_cycles`` cycles (a cycle is one turn of every role). It is then graded
  once by the shared verifier.
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

from mirrorworld.core.session import ToolResult, Violation
from mirrorworld.core.task import Task, ToolCall
from mirrorworld.errors import MirrorworldError
from mirrorworld.verify.process import ProcessReward
from mirrorworld.verify.verdict import Verdict
from mirrorworld.verify.verifier import Verifier
from mirrorworld.worlds.helpdesk_team.world import HelpdeskTeamWorld

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
        world: HelpdeskTeamWorld,
        task: Task,
        *,
        max_cycles: int = 40,
        reward: Literal["shaped", "sparse"] = "shaped",
        penalty: float = 1.0,
    ) -> None:
        if max_cycles < 1:
            raise MirrorworldError("max_cycles must be at least 1")
        if reward not in ("shaped", "sparse"):
            raise MirrorworldError(f"reward must be shaped or sparse, not {reward!r}")
        self.world = world
        self.task = task
        self.max_cycles = max_cycles
        self.reward_mode = reward
        self.penalty = penalty
        self.roles: tuple[str, ...] = world.task_roles(task)
        self.session = world.session(task)
        self.process = ProcessReward(self.session)
        self.turns: list[Turn] = []
        self.cycle = 0
        self.verdict: Verdict | None = None
        self.truncated = False
        self._briefings = {r: world.briefing(task, r) for r in self.roles}
        self._last: dict[str, str] = dict.fromkeys(self.roles, "")
        self._step_roles: dict[int, str] = {}
        self._ledger = _Ledger(returns=dict.fromkeys(self.roles, 0.0))

    # -- state -----------------------------------------------------------------

    @property
    def terminated(self) -> bool:
        """The contact ended: a final message was sent or the customer left."""
        return self.session.done or self.world.contact_over(self.session)

    @property
    def over(self) -> bool:
        return self.verdict is not None

    @property
    def customer_left(self) -> bool:
        return self.world.contact_over(self.session)

    def observe(self, role: str) -> RoleObservation:
        """What ``role`` sees now."""
        self._check_role(role)
        return RoleObservation(
            role=role,
            briefing=self._briefings[role],
            inbox=self.world.inbox(self.session, role),
            last_result=self._last[role],
            cycle=self.cycle,
            tools=self.world.role_tools[role],
            done=self.over,
        )

    def tools_of(self, role: str) -> tuple[str, ...]:
        return self.world.role_tools[role]

    # -- stepping ----------------------------------------------------------------

    def act(self, role: str, tool: str | None, args: Mapping[str, Any] | str | None = None) -> ToolResult | None:
        """Play one action of ``role``: a tool call, or a wait (``tool`` None or ``"wait"``).

        Returns the tool's result (None for a wait). Nothing an agent sends
        raises: a tool outside the role's seat is refused with
        ``not_permitted``, everything else is the session's to judge.
        """
        self._check_role(role)
        if self.over:
            raise MirrorworldError("the episode is over")
        index = len(self.turns)
        if tool is None or tool == WAIT:
            self.turns.append(Turn(index, self.cycle, role, None, None, True, None, None))
            return None
        if tool not in self.world.role_tools[role]:
            error = {"code": "not_permitted", "message": f"the {role} has no tool named {_shown(tool)}"}
            self.turns.append(Turn(index, self.cycle, role, tool[:200], None, False, error, None))
            result = ToolResult(False, error=error)
            self._last[role] = result.content()
            return result
        result = self.session.call(tool, args)
        step = self.session.steps
        self._step_roles[step] = role
        event = self.session.events[-1]
        self.turns.append(Turn(index, self.cycle, role, tool, event.args, result.ok, result.error, step))
        self._last[role] = result.content()
        if self.reward_mode == "shaped":
            self._ledger.credit(self.roles, self.process.step(episode_over=False))
        if self.terminated:
            self.finish()
        return result

    def end_cycle(self) -> None:
        """Close a cycle (every role has had its turn); truncate after ``max_cycles``."""
        if self.over:
            return
        self.cycle += 1
        if self.cycle >= self.max_cycles:
            self.truncated = True
            self.finish()

    def finish(self) -> Verdict:
        """Grade the episode now (once) and pay out the final rewards."""
        if self.verdict is not None:
            return self.verdict
        if self.reward_mode == "shaped":
            self._ledger.credit(self.roles, self.process.step(episode_over=True))
        verdict = Verifier()(self.session)
        self.verdict = verdict
        self._ledger.credit(self.roles, verdict.score)
        for role, term in self.role_terms().items():
            self._ledger.credit((role,), term)
        return verdict

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
        self.session.close()

    def _check_role(self, role: str) -> None:
        if role not in self.roles:
            raise MirrorworldError(f"{role!r} is not a party to task {self.task.id} (parties: {', '.join(self.roles)})")
