"""A Gymnasium vector environment whose sub-environments live on Ray actors.

``RayVectorEnv(env_fn, num_envs, num_actors=k)`` builds ``num_envs``
environments, ``num_envs / k`` on each of ``k`` actors
(:class:`~mirrorworld.distributed.worker.VectorWorker`), from ``env_fn``, a
picklable factory: an :class:`EnvFactory` (a world's plain environment or its
action menu), a registered environment id, or any picklable callable. Each
actor builds its worlds from their specs and keeps them; nothing but actions
and results crosses the network.

**It is a SyncVectorEnv, placed elsewhere.** Observations, rewards,
terminations, truncations and infos are those Gymnasium's ``SyncVectorEnv``
returns over the same environments with the same seeds and actions: the
same seeding (``reset(seed=s)`` seeds environment ``i`` with ``s + i``), the
same autoreset modes (``next_step`` by default: the step after an episode
ends resets that environment and returns its first observation with reward 0;
``same_step``: the reset happens in the ending step, the last observation and
info under ``final_obs``/``final_info``; ``disabled``), the same batching of
observations (``gymnasium.vector.utils.concatenate``) and of infos
(``VectorEnv._add_info``), in environment order.

**One round trip per actor per step.** :meth:`RayVectorEnv.step` sends each
actor its slice of the actions in one call, and waits for every actor's
results together: per step, ``num_actors`` calls in flight at once, each
carrying its actions in and its environments' observations, rewards, flags
and infos out. A dead actor makes ``step`` raise
:class:`~mirrorworld.errors.WorkerError` (infrastructure): the vector cannot
go on without its environments, and a trainer should not read it as a return.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from copy import deepcopy
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from mirrorworld.distributed.cluster import last_line, require_ray
from mirrorworld.distributed.worker import VectorWorker
from mirrorworld.errors import MirrorworldError, WorkerError

__all__ = ["EnvFactory", "RayVectorEnv"]


@dataclass(frozen=True)
class EnvFactory:
    """A picklable recipe for one mirrorworld environment, built where it is called.

    ``world`` is a registered world's name (looked up in the installed
    worlds on the worker); ``env`` holds :class:`~mirrorworld.envs.gymnasium.MirrorEnv`'s
    keyword arguments (``split``, ``families``, ``max_steps``, ``gamma``...).
    With ``menu=True`` the environment is wrapped in the
    :class:`~mirrorworld.envs.menu.ActionMenu` RL trainers use, with ``menu_options``
    (``slots``, ``mask_in_observation``...). ``gym_id`` (a registered Gymnasium
    id such as ``mirrorworld/Helpdesk-v0``) builds through ``gymnasium.make``
    instead of ``world``.
    """

    world: str = "helpdesk"
    env: dict[str, Any] = field(default_factory=dict)
    menu: bool = False
    menu_options: dict[str, Any] = field(default_factory=dict)
    gym_id: str | None = None

    def __call__(self) -> gym.Env[Any, Any]:
        from mirrorworld.envs.gymnasium import MirrorEnv

        base: gym.Env[Any, Any]
        if self.gym_id is not None:
            import mirrorworld  # noqa: F401 - registers the worlds' Gymnasium ids

            base = gym.make(self.gym_id, **self.env)
        else:
            base = MirrorEnv(self.world, **self.env)
        if not self.menu:
            return base
        from mirrorworld.envs.menu import ActionMenu

        return ActionMenu(base, **self.menu_options)


_MODES = {**{m.value: m for m in AutoresetMode}, **{m.name.lower(): m for m in AutoresetMode}}
"""Gymnasium's values (``NextStep``) and their snake-case names (``next_step``)."""


class RayVectorEnv(VectorEnv[Any, Any, Any]):
    """``num_envs`` environments from ``env_fn`` on ``num_actors`` Ray actors. See the module docstring.

    Needs Ray initialised (``ray.init`` or :func:`~mirrorworld.distributed.cluster.connected`).
    ``num_actors`` defaults to ``min(num_envs, cluster CPUs)``; environments
    are dealt to actors in contiguous slices (environment ``i`` on actor
    ``i * num_actors // num_envs``). Each actor asks for ``num_cpus``.
    """

    def __init__(
        self,
        env_fn: Callable[[], gym.Env[Any, Any]] | str,
        num_envs: int,
        *,
        num_actors: int | None = None,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        copy: bool = True,
        num_cpus: float = 1.0,
        ready_timeout: float = 300.0,
    ) -> None:
        ray = require_ray()
        if not ray.is_initialized():
            raise MirrorworldError("RayVectorEnv needs Ray initialised: call ray.init(...) first")
        if num_envs < 1:
            raise MirrorworldError("num_envs must be at least 1")
        if isinstance(env_fn, str):
            env_fn = EnvFactory(gym_id=env_fn)
        mode = autoreset_mode if isinstance(autoreset_mode, AutoresetMode) else _MODES.get(str(autoreset_mode))
        if mode is None:
            raise MirrorworldError(f"no autoreset mode {autoreset_mode!r} (known: {', '.join(_MODES)})")
        self._ray = ray
        self.num_envs = num_envs
        self.autoreset_mode = mode
        self.copy = copy
        k = num_actors if num_actors is not None else int(ray.cluster_resources().get("CPU", 1))
        k = max(1, min(num_envs, k))
        bounds = [i * num_envs // k for i in range(k + 1)]
        self._slices = [range(bounds[j], bounds[j + 1]) for j in range(k)]
        actor = ray.remote(num_cpus=num_cpus, max_restarts=0)(VectorWorker)
        self.actors = [actor.remote(env_fn, len(s)) for s in self._slices]
        try:
            spaces = ray.get([a.spaces.remote() for a in self.actors], timeout=ready_timeout)
        except ray.exceptions.RayError as err:
            self._kill()
            raise WorkerError(f"the vector's Ray actors failed to start: {last_line(err)}") from None
        obs_space, act_space, metadata, render_mode = spaces[0]
        for other in spaces[1:]:
            if other[0] != obs_space or other[1] != act_space:
                self._kill()
                raise MirrorworldError("the vector's actors built environments with different spaces")
        self.single_observation_space = obs_space
        self.single_action_space = act_space
        self.observation_space = batch_space(obs_space, num_envs)
        self.action_space = batch_space(act_space, num_envs)
        self.metadata = {**metadata, "autoreset_mode": mode}
        self.render_mode = render_mode
        self._env_obs: list[Any] = [None] * num_envs
        self._observations: Any = create_empty_array(obs_space, n=num_envs, fn=np.zeros)
        self._rewards = np.zeros((num_envs,), dtype=np.float64)
        self._terminations = np.zeros((num_envs,), dtype=np.bool_)
        self._truncations = np.zeros((num_envs,), dtype=np.bool_)
        self._autoreset_envs = np.zeros((num_envs,), dtype=np.bool_)

    @property
    def num_actors(self) -> int:
        return len(self.actors)

    def _gather(self, refs: list[Any]) -> list[Any]:
        try:
            return list(self._ray.get(refs))
        except self._ray.exceptions.RayActorError as err:
            raise WorkerError(f"a Ray actor of the vector died: {last_line(err)}") from None

    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every environment (or those ``options["reset_mask"]`` selects), as ``SyncVectorEnv.reset``."""
        n = self.num_envs
        seeds: list[int | None]
        if seed is None:
            seeds = [None] * n
        elif isinstance(seed, (int, np.integer)):
            seeds = [int(seed) + i for i in range(n)]
        else:
            seeds = list(seed)
        if len(seeds) != n:
            raise ValueError(f"seed lists must have num_envs={n} entries, got {len(seeds)}")
        mask: np.ndarray | None = None
        if options is not None and "reset_mask" in options:
            options = dict(options)
            mask = options.pop("reset_mask")
            if not isinstance(mask, np.ndarray) or mask.shape != (n,) or mask.dtype != np.bool_ or not mask.any():
                raise ValueError(f"options['reset_mask'] must be a boolean array of shape ({n},) with a True value")
            self._terminations[mask] = False
            self._truncations[mask] = False
            self._autoreset_envs[mask] = False
        else:
            self._terminations = np.zeros((n,), dtype=np.bool_)
            self._truncations = np.zeros((n,), dtype=np.bool_)
            self._autoreset_envs = np.zeros((n,), dtype=np.bool_)
        refs = [
            a.reset.remote([seeds[i] for i in s], options, None if mask is None else [bool(mask[i]) for i in s])
            for a, s in zip(self.actors, self._slices, strict=True)
        ]
        infos: dict[str, Any] = {}
        for s, results in zip(self._slices, self._gather(refs), strict=True):
            for i, result in zip(s, results, strict=True):
                if result is not None:
                    self._env_obs[i], info = result
                    infos = self._add_info(infos, info, i)
        self._observations = concatenate(self.single_observation_space, self._env_obs, self._observations)
        return (deepcopy(self._observations) if self.copy else self._observations), infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every environment once: one call per actor, all in flight together."""
        per_env = list(iterate(self.action_space, actions))
        if len(per_env) != self.num_envs:
            raise ValueError(f"expected {self.num_envs} actions, got {len(per_env)}")
        due = self._autoreset_envs
        mode = self.autoreset_mode.name.lower()
        refs = [
            a.step.remote([per_env[i] for i in s], [bool(due[i]) for i in s], mode)
            for a, s in zip(self.actors, self._slices, strict=True)
        ]
        infos: dict[str, Any] = {}
        for s, results in zip(self._slices, self._gather(refs), strict=True):
            for i, (obs, reward, terminated, truncated, env_infos) in zip(s, results, strict=True):
                self._env_obs[i] = obs
                self._rewards[i] = reward
                self._terminations[i] = terminated
                self._truncations[i] = truncated
                for info in env_infos:
                    infos = self._add_info(infos, info, i)
        self._observations = concatenate(self.single_observation_space, self._env_obs, self._observations)
        self._autoreset_envs = np.logical_or(self._terminations, self._truncations)
        return (
            deepcopy(self._observations) if self.copy else self._observations,
            np.copy(self._rewards),
            np.copy(self._terminations),
            np.copy(self._truncations),
            infos,
        )

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """``name`` called on (or read from) every environment, in order (``call("action_masks")``)."""
        refs = [a.call.remote(name, args, kwargs) for a in self.actors]
        return tuple(v for values in self._gather(refs) for v in values)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return self.call(name)

    def set_attr(self, name: str, values: list[Any] | tuple[Any, ...] | object) -> None:
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(f"expected {self.num_envs} values, got {len(values)}")
        refs = [a.set_attr.remote(name, [values[i] for i in s]) for a, s in zip(self.actors, self._slices, strict=True)]
        self._gather(refs)

    def render(self) -> tuple[Any, ...] | None:
        return self.call("render")

    def close_extras(self, **kwargs: Any) -> None:
        """Close the environments and stop their actors."""
        if not self.actors:
            return
        if not self._ray.is_initialized():  # Ray shut down first: the actors went with it
            self.actors = []
            return
        with contextlib.suppress(self._ray.exceptions.RayError):
            self._ray.get([a.close.remote() for a in self.actors], timeout=30)
        self._kill()

    def _kill(self) -> None:
        for a in self.actors:
            self._ray.kill(a)
        self.actors = []
