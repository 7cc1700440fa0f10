"""The ``export`` command: a run as a dataset, or a world artifact as an OpenEnv or verifiers package.

``mirrorworld export RUN --format jsonl|parquet|hf [--out PATH]`` writes a run
file's episodes as a dataset (:mod:`mirrorworld.run.export`); ``PATH``
defaults to the run's name with the format's suffix (a folder for ``hf``).

``mirrorworld export --format openenv|verifiers WORLD_OR_WHEEL --out DIR``
writes the world export (:mod:`mirrorworld.ship.hub`) into ``DIR``. ``WORLD_OR_WHEEL``
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
    from mirrorworld.run.export import FORMATS as RUN_FORMATS
    from mirrorworld.ship.hub import FORMATS

    e = sub.add_parser(
        "export",
        help="export a run as a dataset (jsonl, parquet, hf), or a world as an OpenEnv or verifiers package",
        description="With a run format, SOURCE is a run file and every episode becomes a row: OpenAI messages with "
        "tool-call arguments as objects, the world's tool schemas, the verdict and the run's metadata. With openenv "
        "or verifiers, SOURCE is an artifact wheel or a world to pack first.",
    )
    e.add_argument("source", metavar="RUN_OR_WORLD", help="a run file (jsonl, parquet, hf); a wheel or a world name")
    e.add_argument("--format", choices=(*RUN_FORMATS, *FORMATS), required=True, help="the dataset or hub format")
    e.add_argument(
        "--out",
        metavar="PATH",
        help="where to write (for a run: default RUN.jsonl, RUN.parquet or the folder RUN-hf; for a world: required,"
        " a directory that is new, empty or a past export)",
    )
    e.add_argument("--json", action="store_true", help="print the export's manifest as JSON")
    return {"export": cmd_export}


def cmd_export(args: argparse.Namespace) -> int:
    """``mirrorworld export``: write the export and say what it holds."""
    from mirrorworld.run.export import FORMATS as RUN_FORMATS

    if args.format in RUN_FORMATS:
        return _export_run(args)
    if not args.out:
        raise MirrorworldError(f"--format {args.format} needs --out DIR")
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


def _export_run(args: argparse.Namespace) -> int:
    from mirrorworld.run.export import export_run

    source = Path(args.source)
    if not source.is_file():
        raise MirrorworldError(f"no run file at {args.source}")
    suffix = {"jsonl": ".jsonl", "parquet": ".parquet", "hf": "-hf"}[args.format]
    out = Path(args.out) if args.out else source.with_name(source.stem + suffix)
    path, rows, with_tools = export_run(source, args.format, out, registry=registry_of(args))
    size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size
    if args.json:
        print(json.dumps({"path": str(path), "format": args.format, "rows": rows, "bytes": size, "tools": with_tools}))
        return 0
    print(f"wrote {rows} episodes of {ascii(str(source))[1:-1]} as {args.format} to {path} ({_size(size)})")
    if not with_tools:
        print(
            "note: the run's world build is not installed here, so the rows carry no tool schemas"
            " (tools is null; export where the run's world is installed to include them)"
        )
    return 0


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB"):
        if n < 1024 or unit == "MB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


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
