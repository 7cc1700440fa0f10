"""The registry of worlds.

A :class:`Registry` maps world names to factories and keeps one built world per
``(name, scale, data_seed)`` so its image is generated once per process.
``mirrorworld.registry.default`` holds the reference worlds; pass another
``Registry`` wherever you need a different set (tests, plug-ins).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from mirrorworld.core.world import World
from mirrorworld.errors import RegistryError

__all__ = ["Registry", "default"]


class Registry:
    """Named world factories and the worlds built from them."""

    def __init__(self) -> None:
        self._factories: dict[str, Callable[..., World]] = {}
        self._built: dict[tuple[str, float, int], World] = {}
        self._lock = threading.Lock()

    def register(self, name: str, factory: Callable[..., World]) -> None:
        if name in self._factories:
            raise RegistryError(f"world {name!r} is already registered")
        self._factories[name] = factory

    def names(self) -> list[str]:
        return sorted(self._factories)

    def get(self, name: str, *, scale: float = 1.0, data_seed: int = 0) -> World:
        """The world ``name`` at this scale and data seed (built once, then shared)."""
        key = (name.lower(), float(scale), int(data_seed))
        with self._lock:
            world = self._built.get(key)
            if world is None:
                factory = self._factories.get(key[0])
                if factory is None:
                    raise RegistryError(f"no world named {name!r} (known: {', '.join(self.names())})")
                world = factory(scale=scale, data_seed=data_seed)
                self._built[key] = world
        return world


def _helpdesk(**kwargs: float) -> World:
    from mirrorworld.worlds.helpdesk import HelpdeskWorld

    return HelpdeskWorld(**kwargs)  # type: ignore[arg-type]


default = Registry()
default.register("helpdesk", _helpdesk)
