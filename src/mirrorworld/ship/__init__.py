"""Shipping worlds like code: artifacts, a version store, comparability guards, a regression gate, images.

* :mod:`~mirrorworld.ship.manifest` — what an artifact says about its world
  (identity, score-relevant part hashes, dependencies, promises);
* :mod:`~mirrorworld.ship.artifact` — ``mirrorworld pack``: one reproducible
  wheel per world build, read back and checked;
* :mod:`~mirrorworld.ship.store` — a version store a team shares
  (``mirrorworld env publish|list|show|pin|rollback``) and name resolution
  (``helpdesk@1``, ``helpdesk@<hash>``);
* :mod:`~mirrorworld.ship.compare` — whether two runs may be compared, and why not;
* :mod:`~mirrorworld.ship.gate` — the regression gate between two versions.
"""

from mirrorworld.ship.artifact import Artifact, ArtifactError, pack
from mirrorworld.ship.manifest import Manifest, differing_parts, manifest_for

__all__ = ["Artifact", "ArtifactError", "Manifest", "differing_parts", "manifest_for", "pack"]
