"""Exceptions, typed by the boundary at which a failure happens.

An agent's mistake is data; a bug in a world, a task or the verifier is ours and
must be loud. The tree::

    MirrorworldError                 base of everything raised by mirrorworld
    ├── ToolError            agent   agent-visible: the agent did something wrong
    │                                (unknown tool, malformed JSON, bad argument,
    │                                missing record, a business rule refused the
    │                                action). Caught by ``Session.call`` and turned
    │                                into ``ToolResult(ok=False, error={code, message})``.
    │                                Never escapes ``Session.call``.
    ├── WorldError           world   a world definition is inconsistent (bad schema,
    │                                a tool declared wrongly, a generator bug), or a
    │                                tool raised something other than ToolError:
    │                                ``Episode.step`` wraps that bug in a WorldError.
    ├── TaskError            world   a task cannot be generated or its gold solution
    │                                fails: the task family is broken.
    ├── VerifierError        verifier  grading could not be carried out.
    ├── SessionClosedError   caller  a closed session was used.
    ├── RegistryError        caller  an unknown world, family or agent name.
    ├── TaskRefError         caller  a task id that is not ``family/seed``.
    ├── AgentError           infrastructure  an agent failed to produce an action (an
    │                                LLM endpoint down, a bad response): the episode is
    │                                recorded as errored, not as an agent failure.
    ├── WorkerError          infrastructure  a scale-out worker (a Ray actor) died or could
    │                                not be reached: its episodes are recorded as errored.
    ├── TwinError            infrastructure  the real system a mirror is measured against
    │                                failed (Tryton missing, its database not built, a
    │                                crash, a gold solution it refuses): a twin episode
    │                                is recorded as errored, never scored.
    └── RunFileError         caller  a run file is missing, corrupt or of another format.

The middle column is each error's :data:`Boundary`: who failed. Only the
``agent`` boundary is the agent's fault and may score 0; an episode that ends
in a ``world``, ``verifier`` or ``infrastructure`` failure is recorded with
that boundary (:class:`Failure`) and is never counted as an agent failure.
:func:`boundary_of` names the boundary of any exception; an exception that is
not a :class:`MirrorworldError` escaping a tool is a world bug.

Any other exception raised inside a tool (``sqlite3.Error``, ``KeyError``…) is a
bug in the world: ``Session.call`` rolls the call back and re-raises it, and
the episode layer re-raises it as a :class:`WorldError` chained to the cause.

Where mirrorworld calls code it does not own (an agent, a world, a verifier), the
call runs inside :func:`boundary`, which attributes whatever escapes to that
boundary; the caller then records the failure once, as a :class:`Failure`
(``Failure.of(err)``): a bad episode is data, not a crash.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "BOUNDARIES",
    "AgentError",
    "Boundary",
    "Failure",
    "MirrorworldError",
    "RegistryError",
    "RunFileError",
    "SessionClosedError",
    "TaskError",
    "TaskRefError",
    "ToolError",
    "TwinError",
    "VerifierError",
    "WorkerError",
    "WorldError",
    "boundary",
    "boundary_of",
    "error_for",
]

Boundary = Literal["agent", "world", "verifier", "infrastructure", "caller"]
"""Who failed: the agent, the world (its tools, tasks or data), the verifier, the
infrastructure (an endpoint, a network, a worker) or the caller of mirrorworld's API."""

BOUNDARIES: tuple[Boundary, ...] = ("agent", "world", "verifier", "infrastructure", "caller")


class MirrorworldError(Exception):
    """Base class of every exception mirrorworld raises on purpose."""

    boundary: Boundary = "caller"
    """Where the failure happened (see the module docstring); an instance may name its own (a remote error)."""


class ToolError(MirrorworldError):
    """An agent-visible refusal of a tool call.

    ``code`` is a short stable identifier (``not_found``, ``invalid_arguments``,
    ``policy_refused`` …) an agent or a grader can branch on; ``message`` is the
    human-readable explanation the agent sees. ``rule`` names the business rule
    that refused the call, when one did.
    """

    boundary: Boundary = "agent"

    def __init__(self, code: str, message: str, *, rule: str | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.rule = rule

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.rule is not None:
            out["rule"] = self.rule
        return out


class WorldError(MirrorworldError):
    """A world's definition is wrong, or one of its tools crashed: a bug in mirrorworld or in a user's world."""

    boundary: Boundary = "world"


class TaskError(MirrorworldError):
    """A task cannot be generated, or its gold solution does not solve it."""

    boundary: Boundary = "world"


class VerifierError(MirrorworldError):
    """An episode could not be graded."""

    boundary: Boundary = "verifier"


class SessionClosedError(MirrorworldError):
    """A session was used after ``close()``."""


class RegistryError(MirrorworldError):
    """A name (world, task family, agent) is not registered."""


class TaskRefError(MirrorworldError, ValueError):
    """A task id that is not ``family/seed`` with a non-negative integer seed."""


class RunFileError(MirrorworldError):
    """A run file is missing, unreadable or not a mirrorworld run file."""


class AgentError(MirrorworldError):
    """An agent could not produce an action (infrastructure, not behaviour)."""

    boundary: Boundary = "infrastructure"


class WorkerError(MirrorworldError):
    """A scale-out worker died or could not be reached (infrastructure, not behaviour).

    :mod:`mirrorworld.distributed` records the episodes such a worker held as
    errored with this failure; the vector environment raises it from ``step``.
    """

    boundary: Boundary = "infrastructure"


class TwinError(MirrorworldError):
    """The real twin failed (infrastructure, not behaviour): raised by :mod:`mirrorworld.fidelity.episode`
    out of a twin episode's step or grading, which the runner records as an errored episode."""

    boundary: Boundary = "infrastructure"


def boundary_of(exc: BaseException) -> Boundary:
    """The boundary an exception crossed: its own for mirrorworld's errors; network and
    OS errors are infrastructure; anything else (a ``KeyError`` out of a tool) is a world bug."""
    if isinstance(exc, MirrorworldError):
        return exc.boundary
    if isinstance(exc, (OSError, TimeoutError, ConnectionError)):
        return "infrastructure"
    return "world"


@dataclass(frozen=True, slots=True)
class Failure:
    """A failure recorded with an episode instead of a score: who failed, and how."""

    boundary: Boundary
    kind: str
    """The exception's class name (``WorldError``, ``AgentError``...)."""
    message: str

    @classmethod
    def of(cls, exc: BaseException) -> Failure:
        message = str(exc) or type(exc).__name__
        cause = exc.__cause__
        if cause is not None and str(cause) and str(cause) not in message:
            message = f"{message}: {type(cause).__name__}: {cause}"
        return cls(boundary_of(exc), type(exc).__name__, message[:2000])

    def to_dict(self) -> dict[str, str]:
        return {"boundary": self.boundary, "kind": self.kind, "message": self.message}

    @classmethod
    def from_dict(cls, d: Any) -> Failure:
        """A failure as stored in a run file (untrusted: anything malformed is an infrastructure failure)."""
        if not isinstance(d, dict):
            return cls("infrastructure", "unknown", str(d)[:2000])
        b = d.get("boundary")
        boundary: Boundary = b if b in BOUNDARIES else "infrastructure"
        return cls(boundary, str(d.get("kind", "unknown"))[:200], str(d.get("message", ""))[:2000])


_RAISED_AT: dict[Boundary, type[MirrorworldError]] = {
    "world": WorldError,
    "verifier": VerifierError,
    "infrastructure": AgentError,
    "caller": MirrorworldError,
}


def error_for(crossed: Boundary) -> type[MirrorworldError]:
    """The error class that reports a failure at ``crossed`` (``WorldError`` for ``world``...)."""
    return _RAISED_AT.get(crossed, MirrorworldError)


@contextmanager
def boundary(crossed: Boundary, what: str = "") -> Iterator[None]:
    """Run code behind the ``crossed`` boundary, attributing whatever escapes it to that boundary.

    A :class:`MirrorworldError` passes through unchanged: it was attributed at a
    more specific boundary first (an :class:`AgentError` an agent raised, the
    :class:`WorldError` the episode layer raises for a crashed tool). Any other
    exception is re-raised as the error of ``crossed`` (:class:`WorldError`,
    :class:`VerifierError`, :class:`AgentError` for ``infrastructure``, or
    :class:`MirrorworldError` for ``caller``), chained to it, its message
    prefixed by ``what`` (the code that failed). ``KeyboardInterrupt`` and ``SystemExit`` are
    not failures and propagate as they are. The ``agent`` boundary is not one a
    block can cross: an agent's mistakes are refused tool calls, never exceptions.
    """
    error = _RAISED_AT.get(crossed)
    if error is None:
        raise ValueError(f"no boundary {crossed!r} to attribute failures to")
    try:
        yield
    except MirrorworldError:
        raise
    except Exception as err:
        prefix = f"{what}: " if what else ""
        raise error(f"{prefix}{type(err).__name__}: {err}"[:2000]) from err
