"""Registering every world of a registry as a Gymnasium environment."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mirrorworld.registry import Registry

__all__ = ["register_envs"]


def register_envs(registry: Registry) -> None:
    """Register ``mirrorworld/<Title>-v<version>`` for each world of ``registry``."""
    import gymnasium

    from mirrorworld.worlds.helpdesk.world import HelpdeskWorld

    titles = {"helpdesk": (HelpdeskWorld.title, HelpdeskWorld.version)}
    for name in registry.names():
        title, version = titles.get(name, (name.capitalize(), 0))
        env_id = f"mirrorworld/{title}-v{version}"
        if env_id not in gymnasium.registry:
            gymnasium.register(
                id=env_id,
                entry_point="mirrorworld.envs.gymnasium:MirrorEnv",
                kwargs={"world": name},
            )
