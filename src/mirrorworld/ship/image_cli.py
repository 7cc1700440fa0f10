"""The ``image`` command: ``mirrorworld image build WORLD [--out PATH] [--cache DIR] [--json]``.

``WORLD`` is a world name (its installed code is packed into an artifact
first, as ``mirrorworld pack`` would) or the path of an artifact wheel. The
image is written as an ``oci-archive`` when ``--out`` ends in ``.tar`` (the
default: ``mirrorworld-<world>-<content hash>.oci.tar``), else as an OCI image
layout folder; see :mod:`mirrorworld.ship.image` for what it holds and why
the same inputs give the same digest.

Wire it in with ``handlers.update(image_cli.register(sub))``; the handler takes
the parsed ``argparse.Namespace`` (with ``args.registry`` when the main CLI
set it) and returns an exit code; a user error raises
:class:`~mirrorworld.errors.MirrorworldError`.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from mirrorworld.progress import wants_progress

__all__ = ["cmd_image", "register"]


def register(sub: Any) -> dict[str, Any]:
    """Add the ``image`` command to an argparse subparsers object; return its handler by name."""
    image = sub.add_parser("image", help="container images that serve a world artifact")
    isub = image.add_subparsers(dest="image_command", required=True, parser_class=type(image))
    b = isub.add_parser(
        "build",
        help="build a reproducible OCI image running `mirrorworld serve` for one world artifact",
        description="Build a reproducible OCI image that runs `mirrorworld serve --host 0.0.0.0 --port 8000` "
        "for one world artifact. Run it with a bearer token: "
        "podman run -p 8000:8000 -e MIRRORWORLD_TOKEN=... oci-archive:PATH",
    )
    b.add_argument("world", metavar="WORLD", help="a world name (packed first) or the path of an artifact wheel")
    b.add_argument("--out", default=None, metavar="PATH", help="PATH.tar for an oci-archive, else an OCI layout folder")
    b.add_argument("--cache", default=None, metavar="DIR", help="layer cache (default: $MIRRORWORLD_CACHE/image)")
    b.add_argument(
        "--mirror",
        action="append",
        default=[],
        metavar="MIRROR",
        help="Debian mirror for the base, as mmdebstrap takes it (repeat; a snapshot mirror pins the base)",
    )
    b.add_argument("--json", action="store_true", help="print the result as JSON")
    b.add_argument("--no-progress", action="store_true", help="draw no progress bars")
    return {"image": cmd_image}


def cmd_image(args: argparse.Namespace) -> int:
    """``mirrorworld image build``: pack (when given a world name), build, print digest, size and time."""
    if args.image_command == "build":
        return _build(args)
    raise AssertionError(args.image_command)  # argparse allows no other


def _is_path(world: str) -> bool:
    return world.endswith(".whl") or "/" in world or Path(world).exists()


def _build(args: argparse.Namespace) -> int:
    from mirrorworld.ship.artifact import Artifact, pack
    from mirrorworld.ship.image import BaseSpec, build_image

    base = BaseSpec(mirrors=tuple(args.mirror))
    progress = wants_progress(json_output=args.json, disabled=args.no_progress)
    cache = Path(args.cache) if args.cache else None
    with tempfile.TemporaryDirectory(prefix="mirrorworld-image-") as tmp:
        wheel = Path(args.world) if _is_path(args.world) else pack(args.world, tmp, registry=_registry(args))
        manifest = Artifact.open(wheel).manifest
        out = Path(args.out) if args.out else Path(f"mirrorworld-{manifest.world}-{manifest.content_hash}.oci.tar")
        result = build_image(wheel, out, cache_dir=cache, base=base, progress=progress)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return 0
    layers = ", ".join(
        f"{layer.name} {_mb(layer.size)}{' (cached)' if layer.cached else ''}" for layer in result.layers
    )
    unpacked = sum(layer.unpacked for layer in result.layers)
    print(f"image   {result.path} ({result.format}) {result.ref}")
    print(f"digest  {result.digest}")
    print(f"size    {_mb(result.size)} compressed, {_mb(unpacked)} unpacked; layers: {layers}")
    print(f"built   in {result.seconds:.1f} s")
    where = f"oci-archive:{result.path}" if result.format == "oci-archive" else f"oci:{result.path}"
    print(f"run     podman run --rm -p 8000:8000 -e MIRRORWORLD_TOKEN=<token> {where}")
    return 0


def _registry(args: argparse.Namespace) -> Any:
    return getattr(args, "registry", None)


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"
