"""Registering every world of a registry as a Gymnasium environment."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mirrorworld.core.registry import Registry

__all__ = ["register_envs"]


def register_envs(registry: Registry) -> None:
    """Register ``mirrorworld/<Title>-v<version>`` for each world of ``registry``."""
    import gymnasium

    for name in registry.names():
        env_id = registry.env_id(name)
        if env_id not in gymnasium.registry:
            gymnasium.register(
                id=env_id,
                entry_point="mirrorworld.envs.gymnasium:MirrorEnv",
                kwargs={"world": name},
                max_episode_steps=None,  # the budget is the env's own max_steps: no outer TimeLimit
            )
