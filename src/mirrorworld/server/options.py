"""What the server's command-line entry points share, importing nothing optional.

``mirrorworld mcp`` (:mod:`mirrorworld.server.cli`) and
``python -m mirrorworld.server.mcp`` take the same options
(:func:`add_mcp_arguments`); ``mirrorworld serve``, ``mcp`` and
``bench --server`` check for their optional extra first (:func:`need_extra`).
Both live here, in a module that imports no optional dependency, so that
``mirrorworld --help`` works on a core install and a missing extra is a
one-line error, not a traceback.
"""

from __future__ import annotations

import argparse
import importlib.util

from mirrorworld.core.registry import Registry
from mirrorworld.errors import MirrorworldError
from mirrorworld.options import world_option

__all__ = ["add_mcp_arguments", "need_extra"]


def add_mcp_arguments(p: argparse.ArgumentParser, registry: Registry | None = None) -> None:
    """Add the options of ``mirrorworld mcp`` to ``p``: the world (of ``registry``) and the task its session plays."""
    world_option(p, registry)
    p.add_argument("--task-id", default=None, help="family/seed")
    p.add_argument("--family", default=None, help="a task family (with --seed)")
    p.add_argument("--seed", type=int, default=None, help="with --family: the task seed; alone: index in --split")
    p.add_argument("--split", choices=("train", "test"), default="test")
    p.add_argument("--max-steps", type=int, default=100)


def need_extra(module: str, extra: str) -> None:
    """Raise :class:`~mirrorworld.errors.MirrorworldError` naming the extra to install if ``module`` is missing."""
    if importlib.util.find_spec(module) is None:
        raise MirrorworldError(f"this command needs {module}: pip install 'mirrorworld[{extra}]'")
