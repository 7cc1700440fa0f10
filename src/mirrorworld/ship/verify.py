"""Checking that an artifact's code is what its manifest says: run once, in a child process, at publish time.

A manifest is data: it can say anything. :func:`verify_code` unpacks the
artifact into a fresh folder, builds its world there with the artifact's own
code (nothing of the installed package is imported) and compares the manifest
that code computes with the declared one, field by field.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from mirrorworld.errors import MirrorworldError
from mirrorworld.ship.artifact import Artifact, ArtifactError
from mirrorworld.ship.manifest import Manifest, differing_parts

__all__ = ["verify_code"]

_ARTIFACT_ENV = "MIRRORWORLD_ARTIFACT"


def verify_code(art: Artifact) -> None:
    """Check, in a child process running the artifact's own code, that it gives the manifest it declares.

    The artifact is unpacked into a fresh temporary folder and its world is
    built there; every score-relevant field of the manifest it computes (id,
    version, content hash, parts, families, tools, build) must equal the
    declared one. A manifest that lies about its code, or code altered under
    a genuine manifest with a recomputed RECORD, is refused.
    """
    with tempfile.TemporaryDirectory(prefix="mirrorworld-verify-") as tmp:
        root = art.extract(tmp)
        env = dict(os.environ)
        env["PYTHONPATH"] = str(root)
        env.pop(_ARTIFACT_ENV, None)
        code = (
            "import sys\n"
            "from mirrorworld.core.registry import default\n"
            "from mirrorworld.ship.manifest import manifest_for\n"
            "sys.stdout.write(manifest_for(default.get(sys.argv[1])).to_json().decode())\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code, art.manifest.world],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp,
            stdin=subprocess.DEVNULL,
            timeout=600,
            check=False,
        )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise ArtifactError(f"the artifact's code cannot build its world {art.manifest.world}: {last[:200]}")
    try:
        computed = Manifest.from_json(done.stdout.encode())
    except MirrorworldError as err:
        raise ArtifactError(f"the artifact's code gives no manifest ({err})") from None
    declared = art.manifest
    fields = ("env_id", "world", "version", "content_hash", "data_seed", "scale", "families", "tools")
    wrong = [f for f in fields if getattr(computed, f) != getattr(declared, f)]
    wrong += [f"parts.{p}" for p in differing_parts(computed.parts, declared.parts)]
    if wrong:
        raise ArtifactError(
            f"the artifact's code does not give the manifest it declares (it differs in {', '.join(wrong[:6])})"
        )
