"""mirrorworld: mirror worlds of enterprise software for training tool-using agents.

A world (``mirrorworld/Helpdesk-v0``) is a seeded SQLite replica of an
enterprise system with typed tools, business rules, a written policy and task
families. Step it directly through a :class:`Session`, or through the
Gymnasium environment registered on import; grade episodes with
:func:`grade`.
"""

from mirrorworld.core.registry import Registry, WorldSpec
from mirrorworld.core.seats import Seated
from mirrorworld.core.session import Event, Session, ToolResult
from mirrorworld.core.task import Check, Fact, Task, TaskFamily, TaskRef, ToolCall
from mirrorworld.core.tools import ToolSpec, tool
from mirrorworld.core.world import Rule, World
from mirrorworld.episodes import Episode, EpisodeOptions, StepOutcome, TeamEpisode
from mirrorworld.errors import (
    Failure,
    MirrorworldError,
    RegistryError,
    TaskError,
    ToolError,
    VerifierError,
    WorldError,
)
from mirrorworld.verify import Verdict, Verifier
from mirrorworld.verify import verify as grade

__version__ = "0.1.0"

__all__ = [
    "Check",
    "Episode",
    "EpisodeOptions",
    "Event",
    "Fact",
    "Failure",
    "MirrorworldError",
    "Registry",
    "RegistryError",
    "Rule",
    "Seated",
    "Session",
    "StepOutcome",
    "Task",
    "TaskError",
    "TaskFamily",
    "TaskRef",
    "TeamEpisode",
    "ToolCall",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "Verdict",
    "Verifier",
    "VerifierError",
    "World",
    "WorldError",
    "WorldSpec",
    "__version__",
    "grade",
    "make_world",
    "tool",
]


def make_world(name: str, *, scale: float = 1.0, data_seed: int = 0) -> World:
    """The installed world ``name``, built once per process and shared (:data:`mirrorworld.core.registry.default`)."""
    from mirrorworld.core.registry import default

    return default.get(name, scale=scale, data_seed=data_seed)


def _register_gymnasium() -> None:
    from mirrorworld.core.registry import default
    from mirrorworld.envs.registration import register_envs

    register_envs(default)


_register_gymnasium()
