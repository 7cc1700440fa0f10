"""Shipping worlds like code: artifacts, a version store, comparability guards, a regression gate, images.

* :mod:`~mirrorworld.ship.manifest` — what an artifact says about its world
  (identity, score-relevant part hashes, dependencies, promises);
* :mod:`~mirrorworld.ship.artifact` — ``mirrorworld pack``: one reproducible
  wheel per world build, read back and checked;
* :mod:`~mirrorworld.ship.store` — a version store a team shares
  (``mirrorworld env publish|list|show|pin|rollback``) and name resolution
  (``helpdesk@1``, ``helpdesk@<hash>``);
* :mod:`~mirrorworld.ship.verify` — an artifact's code checked against its manifest (at publish);
* :mod:`~mirrorworld.ship.launch` — ``run --world helpdesk@1``: exactly that artifact's code;
* :mod:`~mirrorworld.ship.compare` — whether two runs may be compared, and why not;
* :mod:`~mirrorworld.ship.gate` — the regression gate between two versions;
* :mod:`~mirrorworld.ship.image` and :mod:`~mirrorworld.ship.oci` — ``mirrorworld image build``:
  a reproducible OCI image serving an artifact;
* :mod:`~mirrorworld.ship.hub` — ``mirrorworld export``: OpenEnv and verifiers packages.
"""

from mirrorworld.ship.artifact import Artifact, ArtifactError, pack
from mirrorworld.ship.manifest import Manifest, differing_parts, manifest_for

__all__ = ["Artifact", "ArtifactError", "Manifest", "differing_parts", "manifest_for", "pack"]
