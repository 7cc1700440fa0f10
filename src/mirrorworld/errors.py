"""Exceptions, typed by the boundary at which a failure happens.

An agent's mistake is data; a bug in a world, a task or the verifier is ours and
must be loud. The tree::

    MirrorworldError                 base of everything raised by mirrorworld
    ├── ToolError                    agent-visible: the agent did something wrong
    │                                (unknown tool, malformed JSON, bad argument,
    │                                missing record, a business rule refused the
    │                                action). Caught by ``Session.call`` and turned
    │                                into ``ToolResult(ok=False, error={code, message})``.
    │                                Never escapes ``Session.call``.
    ├── WorldError                   a world definition is inconsistent (bad schema,
    │                                a tool declared wrongly, a generator bug).
    ├── TaskError                    a task cannot be generated or its gold solution
    │                                fails: the task family is broken.
    ├── VerifierError                grading could not be carried out.
    ├── SessionClosedError           a closed session was used.
    ├── RegistryError                an unknown world, family or agent name.
    ├── AgentError                   an agent failed to produce an action (an LLM
    │                                endpoint down, a bad response): the episode is
    │                                recorded as errored, not as an agent failure.
    └── RunFileError                 a run file is missing, corrupt or of another format.

Any other exception raised inside a tool (``sqlite3.Error``, ``KeyError``…) is a
bug in the world: ``Session.call`` rolls the call back and re-raises it.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AgentError",
    "MirrorworldError",
    "RegistryError",
    "RunFileError",
    "SessionClosedError",
    "TaskError",
    "ToolError",
    "VerifierError",
    "WorldError",
]


class MirrorworldError(Exception):
    """Base class of every exception mirrorworld raises on purpose."""


class ToolError(MirrorworldError):
    """An agent-visible refusal of a tool call.

    ``code`` is a short stable identifier (``not_found``, ``invalid_arguments``,
    ``policy_refused`` …) an agent or a grader can branch on; ``message`` is the
    human-readable explanation the agent sees. ``rule`` names the business rule
    that refused the call, when one did.
    """

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
    """A world's definition is wrong: a bug in mirrorworld or in a user's world."""


class TaskError(MirrorworldError):
    """A task cannot be generated, or its gold solution does not solve it."""


class VerifierError(MirrorworldError):
    """An episode could not be graded."""


class SessionClosedError(MirrorworldError):
    """A session was used after ``close()``."""


class RegistryError(MirrorworldError):
    """A name (world, task family, agent) is not registered."""


class RunFileError(MirrorworldError):
    """A run file is missing, unreadable or not a mirrorworld run file."""


class AgentError(MirrorworldError):
    """An agent could not produce an action (infrastructure, not behaviour)."""
