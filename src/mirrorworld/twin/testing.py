"""A process-wide twin for test suites: built or found cached once, shared, closed at exit.

Tryton allows one twin backend per process, so every test module that needs the
twin asks :func:`shared_twin` (typically from a session-scoped fixture) instead
of opening its own.
"""

from __future__ import annotations

import atexit

from mirrorworld.twin.backend import TwinBackend
from mirrorworld.worlds.sales import SalesWorld

__all__ = ["shared_twin"]

_SHARED: list[TwinBackend] = []


def shared_twin() -> TwinBackend:
    """The sales world's twin, loaded in this process (the database is built on first use, then cached)."""
    if not _SHARED:
        from mirrorworld.twin.db import ensure

        world = SalesWorld()
        backend = TwinBackend(world, ensure(world))
        _SHARED.append(backend)
        atexit.register(backend.close)
    return _SHARED[0]
