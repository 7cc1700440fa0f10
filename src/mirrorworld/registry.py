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
        self._env_ids: dict[str, str] = {}
        self._built: dict[tuple[str, float, int], World] = {}
        self._lock = threading.Lock()

    def register(self, name: str, factory: Callable[..., World], *, env_id: str | None = None) -> None:
        """Register ``factory(scale=..., data_seed=...)`` under ``name``.

        ``env_id`` is the world's versioned id (``mirrorworld/Helpdesk-v0``), under
        which it is also registered with Gymnasium; it is known without building
        the world. When the factory is a ``World`` class, it defaults to the
        class's own id.
        """
        if name in self._factories:
            raise RegistryError(f"world {name!r} is already registered")
        if env_id is None and isinstance(factory, type) and issubclass(factory, World):
            env_id = f"mirrorworld/{factory.title}-v{factory.version}"
        self._factories[name] = factory
        self._env_ids[name] = env_id or f"mirrorworld/{name.capitalize()}-v0"

    def env_id(self, name: str) -> str:
        """The versioned id of world ``name``."""
        try:
            return self._env_ids[name]
        except KeyError:
            raise RegistryError(f"no world named {name!r} (known: {', '.join(self.names())})") from None

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


def _sales(**kwargs: float) -> World:
    from mirrorworld.worlds.sales import SalesWorld

    return SalesWorld(**kwargs)  # type: ignore[arg-type]


def _helpdesk_team(**kwargs: float) -> World:
    from mirrorworld.worlds.helpdesk_team import HelpdeskTeamWorld

    return HelpdeskTeamWorld(**kwargs)  # type: ignore[arg-type]


default = Registry()
default.register("helpdesk", _helpdesk, env_id="mirrorworld/Helpdesk-v0")
default.register("sales", _sales, env_id="mirrorworld/Sales-v0")
default.register("helpdesk_team", _helpdesk_team, env_id="mirrorworld/HelpdeskTeam-v0")
