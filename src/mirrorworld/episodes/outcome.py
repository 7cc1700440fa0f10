"""What one step of an episode returns: the :class:`StepOutcome` every adapter encodes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mirrorworld.core.session import ToolResult

if TYPE_CHECKING:
    from mirrorworld.errors import Boundary
    from mirrorworld.verify.verdict import Verdict

__all__ = ["EPISODE_OVER", "StepOutcome"]

EPISODE_OVER: dict[str, str] = {
    "code": "episode_over",
    "message": "the episode has ended; start a new one (reset)",
}
"""The error every call after the end gets, through every adapter (copy it before changing it)."""


@dataclass(slots=True)
class StepOutcome:
    """One step, as the episode decided it (treat as read-only). Adapters encode it; none adds to it.

    (Not a frozen dataclass: a frozen one costs a microsecond more to build, on every step.)

    * ``tool`` — the tool name as called (cut to 200 characters);
    * ``result`` — the tool's :class:`~mirrorworld.core.session.ToolResult`; its
      ``content()`` is the JSON text the agent reads;
    * ``reward`` — what this step pays under the episode's reward mode: the
      process-reward term (``shaped`` only) plus, on the step that ends the
      episode, the verdict's score. Always 0.0 after the end;
    * ``terminated`` / ``truncated`` — the episode's flags after this step.
      ``terminated``: the task reached an end of its own (the terminal tool was
      called, the customer left). ``truncated``: the step budget ran out (or
      the caller cut the episode short) first. At most one is true, and once
      one is true it stays true;
    * ``verdict`` — the verdict, on the one step that ended the episode; None
      on every other step, after-the-end calls included (nothing is graded twice);
    * ``after_end`` — the call came after the end: it was refused with
      :data:`EPISODE_OVER`, changed nothing and counted no step;
    * ``step`` — calls made so far (the session's step counter);
    * ``view`` and ``viewed`` — the record on screen and the records opened so far.

    The ``boundary`` of a refused call is ``"agent"``: a tool error is the
    agent's mistake. A failure of the world or the verifier is never a
    ``StepOutcome``: it raises (:class:`~mirrorworld.errors.WorldError`,
    :class:`~mirrorworld.errors.VerifierError`) and is recorded on the episode.
    """

    tool: str
    result: ToolResult
    reward: float
    terminated: bool
    truncated: bool
    step: int
    view: str
    viewed: tuple[str, ...]
    verdict: Verdict | None = None
    after_end: bool = False

    @property
    def ok(self) -> bool:
        return self.result.ok

    @property
    def error(self) -> dict[str, Any] | None:
        return self.result.error

    @property
    def done(self) -> bool:
        """The episode is over (terminated or truncated)."""
        return self.terminated or self.truncated

    @property
    def boundary(self) -> Boundary | None:
        """``"agent"`` for a refused call, None for a call that succeeded."""
        return None if self.result.ok else "agent"

    def content(self) -> str:
        """The tool result as the JSON text an agent reads."""
        return self.result.content()

    def info(self) -> dict[str, Any]:
        """The step's facts as plain data: ``tool``, ``ok``, ``error`` (refused), ``verdict`` (the ending step)."""
        out: dict[str, Any] = {"tool": self.tool, "ok": self.result.ok}
        if not self.result.ok:
            out["error"] = self.result.error
        if self.verdict is not None:
            out["verdict"] = self.verdict.to_dict()
        return out
