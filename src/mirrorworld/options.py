"""What the command line's subcommands share: the ``--world`` option and the registry it names.

``mirrorworld.cli.main`` parses with the registry it is given (by default the
installed worlds, :data:`mirrorworld.core.registry.default`) and puts it on the
parsed arguments as ``args.registry``; every handler looks its world up there
(:func:`registry_of`), so a world registered any way (an entry point, an
in-process ``Registry``) works in every command. Nothing here imports a
command module or an optional dependency.
"""

from __future__ import annotations

import argparse

from mirrorworld.core.registry import Registry, default
from mirrorworld.errors import MirrorworldError

__all__ = ["PREFERRED_WORLD", "registry_of", "world_option"]

PREFERRED_WORLD = "helpdesk"
"""The world a command uses when none is named, if the registry has it (else its first world)."""


def world_option(
    parser: argparse.ArgumentParser,
    registry: Registry | None = None,
    *,
    preferred: str | None = PREFERRED_WORLD,
    repeat: bool = False,
    what: str = "the world",
) -> None:
    """Add ``--world`` to ``parser``, its help listing every world of ``registry``.

    The value is checked when the command looks the world up (an unknown name is
    a one-line error naming the known worlds), so a world is any name or
    versioned id the registry knows. ``preferred`` is the default when the
    registry has it, else the registry's first world; None leaves no default.
    ``repeat`` makes the option repeatable (a list, default None).
    """
    registry = registry or default
    try:
        names = registry.names()
        known = ", ".join(names) or "none installed"
    except MirrorworldError as err:
        names, known = [], f"the registry cannot list them: {err}"
    if repeat:
        parser.add_argument("--world", action="append", default=None, help=f"{what} (repeatable; one of: {known})")
        return
    fallback = preferred if preferred is None or preferred in names or not names else names[0]
    shown = "" if fallback is None else " (default: %(default)s)"
    parser.add_argument("--world", default=fallback, help=f"{what}, one of: {known}{shown}")


def registry_of(args: argparse.Namespace) -> Registry:
    """The registry ``mirrorworld.cli.main`` put on the parsed arguments (the installed worlds when none is there)."""
    registry: Registry | None = getattr(args, "registry", None)
    return registry or default
