"""Running exactly a published artifact: ``mirrorworld run --world helpdesk@<version or hash>``.

:func:`resolve` looks the reference up in the version store. When the
installed world has the same score parts as the artifact (every part but
``build``, which the run's ``--scale`` sets), the installed code *is* the
artifact's, file for file, and the run goes on in this process. Otherwise
:func:`reexec` unpacks the artifact's ``mirrorworld`` package once into
``$MIRRORWORLD_CACHE/artifacts/<digest>/`` and runs the same command in a
child process with that package first on ``sys.path``, so the child imports
the artifact's code, not the installed one. Either way the run file records
the artifact's digest (``artifact``) next to the world's hash and parts; the
child checks that the code it imported reproduces the artifact's parts and
refuses to run otherwise.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mirrorworld.errors import MirrorworldError
from mirrorworld.ship.artifact import Artifact
from mirrorworld.ship.manifest import differing_parts
from mirrorworld.ship.store import Store, split_ref

__all__ = ["ENV_DIGEST", "ENV_PARTS", "check_child", "reexec", "resolve", "same_code"]

ENV_DIGEST = "MIRRORWORLD_ARTIFACT"
"""Set in a child run: the digest of the artifact it runs."""
ENV_PARTS = "MIRRORWORLD_ARTIFACT_HASH"
"""Set in a child run: the artifact's content hash, for the child to check its code against."""


def same_code(world: Any, art: Artifact) -> list[str]:
    """The score parts (but ``build``) in which ``world`` differs from the artifact's world; empty when the same."""
    mine = {k: v for k, v in world.score_parts().items() if k != "build"}
    theirs = {k: v for k, v in art.manifest.parts.items() if k != "build"}
    differ = differing_parts(mine, theirs)
    if world.id != art.manifest.env_id:
        differ.insert(0, "world id")
    return differ


def resolve(ref: str, store: str | Path | None = None) -> tuple[str, Artifact]:
    """``(world name, artifact)`` for ``name@ref`` (or a bare name: its current pin)."""
    name, _ = split_ref(ref)
    return name, Store(store).resolve(ref)


def _cache() -> Path:
    cache = os.environ.get("MIRRORWORLD_CACHE") or str(Path.home() / ".cache" / "mirrorworld")
    return Path(cache) / "artifacts"


def reexec(art: Artifact, argv: Sequence[str], world: str) -> int:
    """Run ``mirrorworld <argv>`` (its ``--world`` set to ``world``) on the artifact's code; the exit code."""
    root = art.extract(_cache())
    args = list(argv)
    out: list[str] = []
    skip = False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a == "--world" and i + 1 < len(args):
            out += ["--world", world]
            skip = True
        elif a.startswith("--world="):
            out.append(f"--world={world}")
        else:
            out.append(a)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root), *filter(None, [env.get("PYTHONPATH")])])
    env[ENV_DIGEST] = art.digest
    env[ENV_PARTS] = art.manifest.content_hash
    return subprocess.run([sys.executable, "-m", "mirrorworld", *out], env=env, check=False).returncode


def check_child(world: Any) -> str | None:
    """In a child :func:`reexec` started: the artifact digest, after checking the imported code is the artifact's."""
    digest = os.environ.get(ENV_DIGEST)
    if not digest:
        return None
    import mirrorworld

    expected = os.environ.get(ENV_PARTS, "")
    art_root = Path(mirrorworld.__file__).resolve().parent.parent
    if art_root.name != digest:
        raise MirrorworldError("the artifact's code was not the code imported (is mirrorworld on PYTHONPATH twice?)")
    if world.scale == 1.0 and world.data_seed == 0 and world.content_hash != expected:
        raise MirrorworldError(
            f"the artifact's code gives content hash {world.content_hash}, not the {expected} it was packed with"
        )
    return digest
