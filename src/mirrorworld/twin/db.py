"""Creating and caching the twin's Tryton database (``mirrorworld twin up``).

The database is built by a child process (:mod:`mirrorworld.twin.build`), so
Tryton's process-wide state never leaks into the caller, in two cached stages:

* ``modules-<key>.sqlite`` — Tryton's modules activated; keyed by the installed
  Tryton versions and the module list (about 35 s to build);
* ``<world>-<key>.sqlite`` — the world's twin on top of it; keyed additionally
  by the world's content hash, its scale and data seed, and the twin adapter's
  own source, so any change to the mirror or the adapter builds a new one.

The cache folder is ``$MIRRORWORLD_CACHE/twin`` (default
``~/.cache/mirrorworld/twin``); CI keeps it between runs to skip the build.
Files are written under a temporary name and renamed, so a crash never leaves a
half-built database behind, and cached files are only ever read.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from mirrorworld.core.world import World
from mirrorworld.errors import MirrorworldError, WorldError
from mirrorworld.twin import tryton
from mirrorworld.twin.backend import copy_database

__all__ = ["cache_dir", "ensure", "parse_options", "twin_key"]

_TWIN_DIR = Path(__file__).resolve().parent
BUILD_TIMEOUT = 1800


def cache_dir() -> Path:
    """Where twin databases are cached."""
    from mirrorworld.cache import cache_root

    return cache_root("twin")


def _modules_key() -> str:
    blob = json.dumps({"versions": tryton.versions(), "modules": tryton.MODULES}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def parse_options(pairs: list[str] | None) -> dict[str, str]:
    """``["tax_rounding=line"]`` as a validated options dict (see ``build.TWIN_OPTIONS``)."""
    from mirrorworld.twin.build import TWIN_OPTIONS

    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or key not in TWIN_OPTIONS or value not in TWIN_OPTIONS[key]:
            known = "; ".join(f"{k}={'|'.join(v)}" for k, v in TWIN_OPTIONS.items())
            raise MirrorworldError(f"bad twin option {pair!r} (known: {known})")
        out[key] = value
    return out


def twin_key(world: World, options: dict[str, str] | None = None) -> str:
    """The cache key of a world's twin database (built with ``options``)."""
    h = hashlib.sha256(_modules_key().encode())
    h.update(json.dumps(options or {}, sort_keys=True).encode())
    h.update(f"{world.content_hash}|{world.scale}|{world.data_seed}".encode())
    for path in sorted(_TWIN_DIR.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _run_build(args: list[str], log: Callable[[str], None]) -> None:
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "mirrorworld.twin.build", *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-12:]
        raise MirrorworldError(f"building the twin ({args[0]}) failed: " + " | ".join(tail))
    log(f"built twin stage {args[0]} in {time.perf_counter() - started:.1f}s")


def _publish(src: Path, dst: Path) -> None:
    tmp = dst.with_name(dst.name + f".tmp{os.getpid()}")
    copy_database(src, tmp)
    conn = sqlite3.connect(tmp)
    try:
        # A rollback journal, not Tryton's write-ahead log: readers of the cache then never write beside it.
        conn.execute("PRAGMA journal_mode=DELETE")
    finally:
        conn.close()
    os.replace(tmp, dst)


def ensure(
    world: World,
    *,
    options: dict[str, str] | None = None,
    cache: Path | None = None,
    log: Callable[[str], None] = lambda _m: None,
) -> Path:
    """The path of ``world``'s cached twin database (built with ``options``), building it first if needed."""
    if world.data_name != "sales":  # the sales world, or a version derived from it
        raise WorldError(f"world {world.name} has no real twin (only sales has one)")
    if not tryton.available():
        raise MirrorworldError("Tryton is not installed: pip install 'mirrorworld[twin]'")
    folder = cache or cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{world.name}-{twin_key(world, options)}.sqlite"
    if target.exists():
        log(f"twin database cached at {target}")
        return target
    modules = folder / f"modules-{_modules_key()}.sqlite"
    with tempfile.TemporaryDirectory(prefix="mw-twin-build-") as tmp:
        work = Path(tmp)
        if not modules.exists():
            log("activating Tryton modules (about 35 s)...")
            _run_build(["modules", str(work)], log)
            _publish(work / "twin.sqlite", modules)
            for extra in work.iterdir():
                extra.unlink()
        copy_database(modules, work / "twin.sqlite")
        log("creating the sales world in Tryton...")
        args = ["world", str(work), repr(world.scale), str(world.data_seed), json.dumps(options or {})]
        _run_build(args, log)
        _publish(work / "twin.sqlite", target)
    log(f"twin database cached at {target}")
    return target
