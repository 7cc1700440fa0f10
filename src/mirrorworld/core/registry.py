"""The registry of worlds: world specs, found through entry points, and the worlds built from them.

A world is a plugin. Its package declares a :class:`WorldSpec` (name, versioned
id, the import path of its factory) and names it in the ``mirrorworld.worlds``
entry-point group of its distribution::

    [project.entry-points."mirrorworld.worlds"]
    helpdesk = "mirrorworld.worlds.helpdesk:SPEC"

:meth:`Registry.discover` reads that group; nothing else in mirrorworld lists
worlds. The spec is light (importing it builds nothing), so every command can
name every world, and Gymnasium ids are registered, without building one.

A :class:`Registry` is passed explicitly to whatever needs worlds (the CLI, the
server, the audit, the review app, the fidelity harness, TRL). :data:`default`
is the registry of the installed worlds, discovered on first use: the one
place where the process-wide set of worlds is loaded.

A registry keeps one built world per ``(name, scale, data_seed)`` so each image
is generated once per process. Worlds pickle as their spec (see
``World.__reduce__``), so a worker process or machine rebuilds the same world
from its factory path instead of receiving a database.
"""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mirrorworld.errors import RegistryError, WorldError

if TYPE_CHECKING:
    from mirrorworld.core.world import World

__all__ = ["ENTRY_POINT_GROUP", "Registry", "WorldSpec", "default", "load_object"]

ENTRY_POINT_GROUP = "mirrorworld.worlds"
"""The entry-point group in which distributions declare their worlds."""

_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}\Z")
_ENV_ID = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+-v\d+\Z")
_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*\Z")


def load_object(path: str) -> Any:
    """The object an import path ``package.module:attribute`` names."""
    if not isinstance(path, str) or not _PATH.match(path):
        raise RegistryError(f"{path!r} is not an import path (package.module:attribute)")
    module_name, _, attr = path.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as err:
        raise RegistryError(f"cannot load {path}: {err}") from err
    return obj


@dataclass(frozen=True, slots=True)
class WorldSpec:
    """What a registry knows about a world before building it.

    ``factory`` is the import path of a callable ``factory(scale=..., data_seed=...)
    -> World`` (usually the world's class). ``env_id`` is the versioned id
    (``mirrorworld/Helpdesk-v0``) under which the world is registered with
    Gymnasium; a built world must report the same id.
    """

    name: str
    env_id: str
    factory: str
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise RegistryError(f"world name {self.name!r} must be lowercase letters, digits and _")
        if not isinstance(self.env_id, str) or not _ENV_ID.match(self.env_id):
            raise RegistryError(f"world {self.name}: env id {self.env_id!r} must look like 'ns/Name-v0'")
        if not isinstance(self.factory, str) or not _PATH.match(self.factory):
            raise RegistryError(f"world {self.name}: factory {self.factory!r} must be 'package.module:attribute'")

    @property
    def version(self) -> int:
        """The version number the env id carries."""
        return int(self.env_id.rsplit("-v", 1)[1])

    def build(self, *, scale: float = 1.0, data_seed: int = 0) -> World:
        """A new world from the factory (not cached: see :meth:`Registry.get`)."""
        factory = load_object(self.factory)
        return self.check(factory(scale=scale, data_seed=data_seed), self.factory)

    def check(self, world: object, source: str) -> World:
        """``world`` if it is the World this spec declares: a World, with this name and env id."""
        from mirrorworld.core.world import World

        if not isinstance(world, World):
            raise WorldError(f"world {self.name}: {source} built a {type(world).__name__}, not a World")
        if world.id != self.env_id:
            raise WorldError(f"world {self.name}: the spec says {self.env_id} but the world says {world.id}")
        if world.name != self.name:
            raise WorldError(f"world {self.name}: the spec's name is {self.name} but the world's is {world.name}")
        return world

    @classmethod
    def of(cls, world_class: type[World], *, description: str = "") -> WorldSpec:
        """The spec of a ``World`` subclass importable by its module and name."""
        return cls(
            world_class.name,
            f"mirrorworld/{world_class.title}-v{world_class.version}",
            f"{world_class.__module__}:{world_class.__qualname__}",
            description,
        )


class Registry:
    """Named world specs and the worlds built from them. See the module docstring."""

    def __init__(self, specs: Iterable[WorldSpec] = (), *, discover: bool = False) -> None:
        self._specs: dict[str, WorldSpec] = {}
        self._factories: dict[str, Callable[..., World]] = {}
        self._built: dict[tuple[str, float, int], World] = {}
        self._lock = threading.RLock()
        self._broken: dict[str, str] = {}
        self._pending_discovery = discover
        for spec in specs:
            self.add(spec)

    @classmethod
    def discover(cls) -> Registry:
        """A registry of every world the installed distributions declare (entry points)."""
        return cls(discover=True)

    def _discover(self) -> None:
        from importlib.metadata import entry_points

        for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            if ep.name in self._specs or ep.name in self._broken:
                continue
            try:
                spec = ep.load()
            except Exception as err:  # a broken plug-in takes only itself down
                self._broken[ep.name] = f"the world entry point {ep.name} = {ep.value} cannot be loaded: {err}"
                continue
            if not isinstance(spec, WorldSpec):
                self._broken[ep.name] = f"the world entry point {ep.name} = {ep.value} is not a WorldSpec"
            elif spec.name != ep.name:
                self._broken[ep.name] = f"the world entry point {ep.name} names a spec called {spec.name}"
            else:
                self._specs[spec.name] = spec
        self._pending_discovery = False

    def broken(self) -> dict[str, str]:
        """The world entry points that could not be loaded, by name, with the reason (they are not listed)."""
        self._ensure()
        return dict(self._broken)

    def _ensure(self) -> None:
        if self._pending_discovery:
            with self._lock:
                if self._pending_discovery:
                    self._discover()

    # -- declaring ---------------------------------------------------------------

    def add(self, spec: WorldSpec) -> None:
        """Add a world spec (a name may be added once)."""
        self._ensure()
        if spec.name in self._specs:
            raise RegistryError(f"world {spec.name!r} is already registered")
        self._specs[spec.name] = spec

    def register(self, name: str, factory: Callable[..., World], *, env_id: str | None = None) -> None:
        """Register an in-process ``factory(scale=..., data_seed=...)`` under ``name`` (tests, notebooks).

        Worlds registered so exist only in this process; a worker that must rebuild
        one needs a :class:`WorldSpec` with an import path instead.
        """
        from mirrorworld.core.world import World

        if env_id is None and isinstance(factory, type) and issubclass(factory, World):
            env_id = f"mirrorworld/{factory.title}-v{factory.version}"
        path = f"{getattr(factory, '__module__', 'local')}:{getattr(factory, '__qualname__', 'factory')}"
        if not _PATH.match(path):
            path = "local:factory"
        self.add(WorldSpec(name, env_id or f"mirrorworld/{name.capitalize()}-v0", path))
        self._factories[name] = factory

    # -- looking up ----------------------------------------------------------------

    def names(self) -> list[str]:
        self._ensure()
        return sorted(self._specs)

    def specs(self) -> list[WorldSpec]:
        self._ensure()
        return [self._specs[n] for n in sorted(self._specs)]

    def spec(self, name: str) -> WorldSpec:
        """The spec of world ``name``: its name or its versioned env id, with or without the namespace
        (``helpdesk``, ``mirrorworld/Helpdesk-v0``, ``Helpdesk-v0``), in any case."""
        self._ensure()
        key = name.lower() if isinstance(name, str) else ""
        spec = self._specs.get(key)
        if spec is None and isinstance(name, str):
            spec = next(
                (s for s in self._specs.values() if key in (s.env_id.lower(), s.env_id.lower().rpartition("/")[2])),
                None,
            )
        if spec is None:
            if key in self._broken:
                raise RegistryError(self._broken[key])
            raise RegistryError(f"no world named {str(name)[:80]!r} (known: {', '.join(self.names())})")
        return spec

    def env_id(self, name: str) -> str:
        """The versioned id of world ``name``."""
        return self.spec(name).env_id

    def __contains__(self, name: object) -> bool:
        self._ensure()
        return isinstance(name, str) and name.lower() in self._specs

    def get(self, name: str, *, scale: float = 1.0, data_seed: int = 0) -> World:
        """The world ``name`` at this scale and data seed (built once, then shared)."""
        spec = self.spec(name)
        key = (spec.name, float(scale), int(data_seed))
        with self._lock:
            world = self._built.get(key)
            if world is None:
                factory = self._factories.get(spec.name)
                if factory is not None:
                    world = spec.check(factory(scale=scale, data_seed=data_seed), f"the factory of {spec.name}")
                else:
                    world = spec.build(scale=scale, data_seed=data_seed)
                self._built[key] = world
        return world


default = Registry.discover()
"""The installed worlds (entry points of the ``mirrorworld.worlds`` group), discovered on first use."""
