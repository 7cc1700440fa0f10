"""Where a run's tool calls go: the mirror (the default) or the world's real twin.

``mirrorworld run --backend twin`` plays the same agents, tasks and plan on
the real system the world mirrors (the sales world's Tryton), through the
same chat encoding, and grades every episode with the same verifier contract,
the gold solution replayed on the twin (:mod:`mirrorworld.fidelity.episode`).
The run file records the backend in its meta (``backend``: its name and, for
the twin, the real system's package versions and modules), and ``backend``
is one of the run's options, so ``--resume`` continues a twin run on the twin.
``--twin-option tax_rounding=line`` plays on a changed twin (another
deployment's configuration); the meta records the options too.

What cannot run on the twin is refused before anything is played, in one
line: a world without a twin, Tryton not installed, a world graded by a
fitted verifier version, and the options that play episodes at once
(``--concurrency``, ``--ray``, ``--multi-agent``: Tryton is process-wide, one
twin session at a time). A twin that fails once the run has started (its
database cannot be built, Tryton crashes) errors the episodes it touches;
none is scored.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mirrorworld.core.world import World
from mirrorworld.errors import MirrorworldError

if TYPE_CHECKING:
    from mirrorworld.envs.chat import ChatEnv
    from mirrorworld.fidelity.episode import Twin

__all__ = ["BACKENDS", "Backend", "open_backend", "twin_refusal"]

BACKENDS = ("mirror", "twin")


def twin_refusal(world: World) -> str | None:
    """Why ``world``'s episodes cannot run on a real twin here, in one line; None when they can."""
    from mirrorworld.twin import tryton

    if world.data_name != "sales":  # the sales world, or a version derived from it
        return f"world {world.name} has no real twin (only sales has one)"
    if not tryton.available():
        return "the twin backend needs Tryton: pip install 'mirrorworld[twin]'"
    if world.grader() is not None:
        return f"{world.id} is graded by a fitted verifier version, which grades mirror episodes only"
    return None


class Backend:
    """The backend of one run: how its episodes are played and what its run file says of it."""

    def __init__(self, name: str, twin: Twin | None = None, *, options: dict[str, str] | None = None) -> None:
        self.name = name
        self.twin = twin
        self.options = dict(options or {})
        """How the twin was changed (``--twin-option``; empty: the twin the mirror mirrors)."""

    @property
    def make_env(self) -> Callable[..., ChatEnv]:
        """What ``play_episodes(make_env=...)`` plays the run's episodes through."""
        if self.twin is not None:
            return self.twin.env
        from mirrorworld.envs.chat import ChatEnv

        return ChatEnv

    def meta(self) -> dict[str, Any]:
        """The run file's ``backend`` meta."""
        if self.twin is None:
            return {"name": self.name}
        from mirrorworld.twin import tryton

        return {
            "name": self.name,
            "system": "Tryton",
            "versions": self.twin.versions(),
            "modules": list(tryton.MODULES),
            "options": self.options,
        }

    def close(self) -> None:
        if self.twin is not None:
            self.twin.close()


def open_backend(args: argparse.Namespace, world: World) -> Backend:
    """The backend ``args.backend`` names for ``world``, refused in one line where it cannot run."""
    name = getattr(args, "backend", None) or "mirror"
    if name not in BACKENDS:
        raise MirrorworldError(f"no backend {name!r} (known: {', '.join(BACKENDS)})")
    pairs = [p.strip() for p in str(getattr(args, "twin_option", None) or "").split(",") if p.strip()]
    if name == "mirror":
        if pairs:
            raise MirrorworldError("--twin-option changes the twin: it goes with --backend twin")
        return Backend(name)
    if getattr(args, "multi_agent", False) or getattr(args, "ray", None) is not None:
        raise MirrorworldError("--backend twin plays single-agent runs in this process (no --multi-agent, --ray)")
    if getattr(args, "concurrency", 1) != 1:
        raise MirrorworldError("--backend twin plays one episode at a time (Tryton is process-wide): no --concurrency")
    refusal = twin_refusal(world)
    if refusal is not None:
        raise MirrorworldError(refusal)
    from mirrorworld.fidelity.episode import Twin
    from mirrorworld.twin.db import ensure, parse_options

    options = parse_options(pairs)
    log = lambda m: print(m, file=sys.stderr)  # noqa: E731 - one line, used twice
    database = ensure(world, options=options, log=log) if options else None
    return Backend(name, Twin(world, database=database, log=log), options=options)
