"""Where mirrorworld keeps what it builds once and reuses: ``$MIRRORWORLD_CACHE``, else ``~/.cache/mirrorworld``.

Each user of the cache takes a folder of its own under :func:`cache_root`:
``twin`` (real-ERP databases), ``image`` (container layers), ``artifacts``
(unpacked world artifacts) and ``store`` (the default version store).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_root"]


def cache_root(*parts: str) -> Path:
    """The cache folder (``MIRRORWORLD_CACHE``, else ``~/.cache/mirrorworld``), joined with ``parts``."""
    root = os.environ.get("MIRRORWORLD_CACHE") or str(Path.home() / ".cache" / "mirrorworld")
    return Path(root).joinpath(*parts)
