"""Which task an episode plays: one resolution of every way a caller can name one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mirrorworld.core.task import Split, Task, TaskRef
from mirrorworld.core.world import World
from mirrorworld.errors import MirrorworldError, RegistryError

__all__ = ["check_split", "select_task"]


def check_split(split: Any) -> Split:
    """``split`` if it is ``train`` or ``test`` (a :class:`MirrorworldError` otherwise)."""
    if split not in ("train", "test"):
        raise MirrorworldError(f"split must be train or test, not {str(split)[:40]!r}")
    out: Split = split
    return out


def select_task(
    world: World,
    *,
    split: Split = "train",
    families: Sequence[str] | None = None,
    task: Task | None = None,
    task_id: TaskRef | str | None = None,
    family: str | None = None,
    seed: int | None = None,
    index: int | None = None,
) -> Task:
    """The task a caller names, in this order of precedence:

    1. ``task`` — a :class:`Task` of this world, as it is;
    2. ``task_id`` — ``family/seed`` (:class:`~mirrorworld.core.task.TaskRef`);
    3. ``family`` with ``seed`` — that family's task for that seed;
    4. ``index`` — the ``index``-th task of ``split``, cycling through
       ``families`` (all of the world's when None); seeds never cross splits.

    Unknown families raise :class:`~mirrorworld.errors.RegistryError`, a
    malformed id :class:`~mirrorworld.errors.TaskRefError`.
    """
    if task is not None:
        if not isinstance(task, Task):
            raise MirrorworldError("task must be a Task")
        if task.world != world.name:
            raise MirrorworldError(f"task {task.id} belongs to world {task.world}, not {world.name}")
        return task
    if task_id is not None:
        return world.task_at(TaskRef.parse(task_id))
    if family is not None:
        if seed is None:
            raise MirrorworldError("a family needs a seed")
        return world.task(family, _non_negative(seed, "seed"))
    names = tuple(families) if families else None
    for f in names or ():
        world.family(f)
    if names is not None and not names:
        raise RegistryError("families must name at least one task family")
    return world.task_for(check_split(split), _non_negative(index or 0, "index"), names)


def _non_negative(value: Any, what: str) -> int:
    """``value`` as an int if it is a non-negative integer (an int or a NumPy integer; never a bool or a string)."""
    if isinstance(value, (bool, str, bytes)):
        raise MirrorworldError(f"{what} must be a non-negative integer")
    if not isinstance(value, int) or value < 0:
        try:
            number = int(value)
        except (TypeError, ValueError, OverflowError):
            raise MirrorworldError(f"{what} must be a non-negative integer") from None
        if number < 0 or number != value:
            raise MirrorworldError(f"{what} must be a non-negative integer")
        return number
    return value
