"""The ``export`` command: a world artifact as an OpenEnv environment or a verifiers environment package.

``mirrorworld export --format openenv|verifiers WORLD_OR_WHEEL --out DIR``
writes the export (:mod:`mirrorworld.ship.hub`) into ``DIR``. ``WORLD_OR_WHEEL``
is an artifact wheel (``mirrorworld pack`` made it), or the name of an
installed world, which is packed first into a temporary directory: the export
then holds that fresh artifact. ``DIR`` must be new, empty or a previous
export, which is replaced whole.

Wire it in with::

    from mirrorworld.ship.hub_cli import register as register_export

    handlers.update(register_export(sub))

The handler takes the parsed ``argparse.Namespace`` and returns an exit code; a
user error raises :class:`~mirrorworld.errors.MirrorworldError` (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from mirrorworld.errors import MirrorworldError
from mirrorworld.options import registry_of

__all__ = ["cmd_export", "main", "register"]

_NEXT = {
    "openenv": "run it: docker build -t {dist} {out} (or: openenv push --no-interface {out})",
    "verifiers": "install it: uv pip install -e {out} (or: pip install --find-links {out}/wheels -e {out})",
}


def register(sub: Any) -> dict[str, Any]:
    """Add ``export`` to an argparse subparsers object; return its handler by name."""
    from mirrorworld.ship.hub import FORMATS

    e = sub.add_parser("export", help="export a world artifact as an OpenEnv environment or a verifiers package")
    e.add_argument("source", metavar="WORLD_OR_WHEEL", help="an artifact wheel, or a world to pack first")
    e.add_argument("--format", choices=FORMATS, required=True, help="the target hub format")
    e.add_argument("--out", required=True, metavar="DIR", help="the export directory (new, empty or a past export)")
    e.add_argument("--json", action="store_true", help="print the export's manifest as JSON")
    return {"export": cmd_export}


def cmd_export(args: argparse.Namespace) -> int:
    """``mirrorworld export``: write the export and say what it holds."""
    from mirrorworld.ship.artifact import Artifact, pack
    from mirrorworld.ship.hub import EXPORT_FILE, export

    source = str(args.source)
    path = Path(source)
    if path.suffix == ".whl" or path.is_file():
        if not path.is_file():
            raise MirrorworldError(f"no artifact at {source}")
        out = export(args.format, Artifact.open(path), args.out)
    else:
        registry = registry_of(args)
        name = registry.spec(source).name  # an unknown world is one line, before anything is written
        with tempfile.TemporaryDirectory(prefix="mirrorworld-export-") as tmp:
            out = export(args.format, Artifact.open(pack(name, tmp, registry=registry)), args.out)
    facts = json.loads((out / EXPORT_FILE).read_text(encoding="utf-8"))
    if args.json:
        print(json.dumps(facts, indent=2, sort_keys=True))
        return 0
    print(
        f"wrote the {args.format} export of {facts['env_id']} (content hash {facts['content_hash']},"
        f" artifact sha256 {facts['artifact']['sha256'][:16]}) to {out}"
    )
    print(_NEXT[args.format].format(out=out, dist=facts["name"].replace("_", "-")))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m mirrorworld.ship.hub_cli export ...``: the command without the main CLI."""
    parser = argparse.ArgumentParser(prog="mirrorworld")
    sub = parser.add_subparsers(dest="command", required=True)
    handlers = register(sub)
    args = parser.parse_args(argv)
    try:
        return int(handlers[args.command](args))
    except MirrorworldError as err:
        print(f"mirrorworld: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
