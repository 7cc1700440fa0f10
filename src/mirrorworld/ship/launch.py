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

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mirrorworld.cache import cache_root
from mirrorworld.errors import MirrorworldError
from mirrorworld.ship.artifact import Artifact
from mirrorworld.ship.manifest import differing_parts
from mirrorworld.ship.store import Store, split_ref

__all__ = ["ENV_DIGEST", "ENV_PARTS", "check_child", "reexec", "resolve", "same_code"]

ENV_DIGEST = "MIRRORWORLD_ARTIFACT"
"""Set in a child run: the digest of the artifact it runs."""
ENV_PARTS = "MIRRORWORLD_ARTIFACT_PARTS"
"""Set in a child run: the artifact's score parts but ``build`` (JSON), for the child to check its code against."""


def same_code(world: Any, art: Artifact) -> list[str]:
    """The score parts (but ``build``) in which ``world`` differs from the artifact's world; empty when the same."""
    differ = differing_parts(_code_parts(world.score_parts()), _code_parts(art.manifest.parts))
    if world.id != art.manifest.env_id:
        differ.insert(0, "world id")
    return differ


def _code_parts(parts: Mapping[str, str]) -> dict[str, str]:
    """The score parts that code decides: every one but ``build`` (the data seed and scale a run chooses)."""
    return {k: v for k, v in parts.items() if k != "build"}


def resolve(ref: str, store: str | Path | None = None) -> tuple[str, Artifact]:
    """``(world name, artifact)`` for ``name@ref`` (or a bare name: its current pin)."""
    name, _ = split_ref(ref)
    return name, Store(store).resolve(ref)


def reexec(art: Artifact, argv: Sequence[str], world: str) -> int:
    """Run ``mirrorworld <argv>`` (its ``--world`` set to ``world``) on the artifact's code; the exit code.

    Refused inside a child this started (an artifact runs one level deep). Any
    spelling argparse accepts for ``--world`` (``--world X``, ``--world=X``,
    an abbreviation such as ``--wor X``) is rewritten.
    """
    if os.environ.get(ENV_DIGEST):
        raise MirrorworldError("this run already runs an artifact; it cannot start another (name the world plainly)")
    root = art.extract(cache_root("artifacts"))
    out: list[str] = []
    args = list(argv)
    i = 0
    while i < len(args):
        a = args[i]
        flag, eq, _value = a.partition("=")
        if len(flag) >= 3 and "--world".startswith(flag) and flag.startswith("--w"):
            if eq:
                out.append(f"--world={world}")
            else:
                out += ["--world", world]
                i += 1  # its value
        else:
            out.append(a)
        i += 1
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root), *filter(None, [env.get("PYTHONPATH")])])
    env[ENV_DIGEST] = art.digest
    env[ENV_PARTS] = json.dumps(_code_parts(art.manifest.parts), sort_keys=True)
    return subprocess.run([sys.executable, "-m", "mirrorworld", *out], env=env, check=False).returncode


def check_child(world: Any) -> str | None:
    """In a child :func:`reexec` started: the artifact digest, after checking the imported code is the artifact's.

    The imported package must be the unpacked artifact, and the world it
    builds must have the artifact's score parts (all but ``build``, which
    ``--scale`` sets), at any scale.
    """
    digest = os.environ.get(ENV_DIGEST)
    if not digest:
        return None
    import mirrorworld

    art_root = Path(mirrorworld.__file__).resolve().parent.parent
    if art_root.name != digest:
        raise MirrorworldError("the artifact's code was not the code imported (is mirrorworld on PYTHONPATH twice?)")
    try:
        expected = json.loads(os.environ.get(ENV_PARTS, ""))
    except ValueError:
        raise MirrorworldError("the artifact's parts were not handed to this run") from None
    differ = differing_parts(_code_parts(world.score_parts()), expected)
    if differ:
        raise MirrorworldError(
            f"the artifact's code does not give the parts it was packed with (it differs in {', '.join(differ)})"
        )
    return digest
