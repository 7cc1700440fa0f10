"""What a Ray actor hosts: a world rebuilt on the worker, and many episodes or environments of it.

The classes here are plain Python (importable without Ray); the pool and the
vector environment turn them into actors with ``ray.remote`` when they start.

**Worlds travel as their spec, never their state.** A :class:`~mirrorworld.core.world.World`
pickles as its class and parameters (``World.__reduce__``): what reaches a
worker is a fresh world, which builds its own pristine image once, when the
actor starts (:meth:`EpisodeWorker.__init__`), and keeps it, with its task and
gold caches, for every chunk the actor plays. No database, session or
episode ever crosses the network; an episode's record (messages, calls,
verdict) comes back when it is finished.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from mirrorworld.agents.base import Agent
from mirrorworld.core.task import Split
from mirrorworld.core.world import World
from mirrorworld.episodes import Faults
from mirrorworld.run.runner import EpisodeRecord, Planned, play_episodes
from mirrorworld.verify.judge import TextJudge

__all__ = ["EpisodeWorker", "Packed", "VectorWorker", "WorkerInfo"]

WorkerInfo = dict[str, Any]
"""What a worker says about itself: ``pid``, ``node``, ``world``, ``world_hash``,
``arrived_with_image`` (whether the world it was sent held a built image: never)."""


def _node() -> str | None:
    try:
        import ray

        return str(ray.get_runtime_context().get_node_id())
    except Exception:  # pragma: no cover - outside a Ray worker
        return None


class EpisodeWorker:
    """Plays chunks of planned episodes of one world with one agent (see the module docstring).

    The agent arrives pickled (its state between episodes is its own
    ``reset``'s business, as in a local run) and plays every chunk this actor
    is given, through :func:`~mirrorworld.run.runner.play_episodes`: the code of
    a local run, so a record does not depend on where it was played.
    """

    def __init__(
        self,
        world: World,
        agent: Agent,
        *,
        split: Split = "test",
        families: Sequence[str] | None = None,
        max_steps: int = 30,
        judge: TextJudge | None = None,
        faults: Faults | None = None,
    ) -> None:
        self._arrived_with_image = "image" in vars(world)
        self.faults = faults
        self.world = world
        self.agent = agent
        self.split: Split = split
        self.families = list(families) if families else None
        self.max_steps = max_steps
        self.judge = judge
        world.image  # noqa: B018 - built once per actor, kept for every chunk

    def info(self) -> WorkerInfo:
        return {
            "pid": os.getpid(),
            "node": _node(),
            "world": self.world.id,
            "world_hash": self.world.content_hash,
            "arrived_with_image": self._arrived_with_image,
        }

    def spin(self, n: int) -> float:
        """Seconds a fixed pure-Python loop of ``n`` additions takes here (the benchmark's CPU ceiling)."""
        started = time.perf_counter()
        x = 0
        for i in range(n):
            x += i
        return time.perf_counter() - started

    def play(self, planned: list[Planned]) -> Packed:
        """Play a chunk; its records come back in the chunk's order, packed (:class:`Packed`)."""
        return Packed.of(self._play(planned))

    def _play(self, planned: list[Planned]) -> list[EpisodeRecord]:
        return play_episodes(
            self.world,
            self.agent,
            planned,
            split=self.split,
            families=self.families,
            max_steps=self.max_steps,
            judge=self.judge,
            faults=self.faults,
        )


@dataclass
class Packed:
    """A chunk's records as they cross the network: each system prompt sent once.

    Every episode's first message is the system prompt (the world's policy:
    about 5 kB of a 7 kB record), the same text for every episode of a world.
    A chunk carries each distinct system text once, in ``texts``, and each
    record's system message with an empty content and its text's index in
    ``system``; :meth:`unpack` puts the texts back. It cuts what a chunk
    weighs on the wire, and what the driver unpickles, by about two thirds.
    """

    texts: list[str]
    system: list[int | None]
    records: list[EpisodeRecord]

    @classmethod
    def of(cls, records: list[EpisodeRecord]) -> Packed:
        texts: dict[str, int] = {}
        system: list[int | None] = []
        for r in records:
            first = r.messages[0] if r.messages else None
            content = first.get("content") if isinstance(first, dict) and first.get("role") == "system" else None
            if isinstance(content, str) and first is not None:
                system.append(texts.setdefault(content, len(texts)))
                r.messages[0] = {**first, "content": ""}
            else:
                system.append(None)
        return cls(list(texts), system, records)

    def unpack(self) -> list[EpisodeRecord]:
        for r, k in zip(self.records, self.system, strict=True):
            if k is not None:
                r.messages[0] = {**r.messages[0], "content": self.texts[k]}
        return self.records


Step = tuple[Any, float, bool, bool, list[dict[str, Any]]]
"""One sub-environment's step as a vector worker returns it: observation, reward,
terminated, truncated, and the info dicts to add in order (``final_obs``/``final_info`` first in same-step mode)."""


class VectorWorker:
    """Hosts a slice of a vector environment's sub-environments; one call steps them all.

    ``step`` runs, for each of its environments, exactly what Gymnasium's
    ``SyncVectorEnv.step`` runs for one environment in the given autoreset
    mode; the driver (:class:`~mirrorworld.distributed.vector.RayVectorEnv`)
    keeps which environments are due for a reset and batches the results, so
    the whole vector behaves as a ``SyncVectorEnv`` over the same environments.
    """

    def __init__(self, env_fn: Callable[[], gym.Env[Any, Any]], count: int) -> None:
        self.envs = [env_fn() for _ in range(count)]

    def spaces(self) -> tuple[gym.Space[Any], gym.Space[Any], dict[str, Any], str | None]:
        """The first environment's observation and action spaces, metadata and render mode."""
        env = self.envs[0]
        for other in self.envs[1:]:
            if other.observation_space != env.observation_space or other.action_space != env.action_space:
                raise RuntimeError("the sub-environments of one vector have different spaces")
        return env.observation_space, env.action_space, dict(env.metadata), env.render_mode

    def reset(
        self, seeds: list[int | None], options: dict[str, Any] | None, mask: list[bool] | None = None
    ) -> list[tuple[Any, dict[str, Any]] | None]:
        """Reset the environments (those ``mask`` selects); None for one left alone."""
        out: list[tuple[Any, dict[str, Any]] | None] = []
        for i, env in enumerate(self.envs):
            if mask is not None and not mask[i]:
                out.append(None)
                continue
            out.append(env.reset(seed=seeds[i], options=options))
        return out

    def step(self, actions: list[Any], due: list[bool], mode: str) -> list[Step]:
        """Step every environment once; ``due[i]``: environment ``i`` ended last step (see the class docstring)."""
        out: list[Step] = []
        for env, action, reset_now in zip(self.envs, actions, due, strict=True):
            infos: list[dict[str, Any]] = []
            if mode == "next_step" and reset_now:
                obs, info = env.reset()
                reward, terminated, truncated = 0.0, False, False
            else:
                if mode == "disabled" and reset_now:
                    raise RuntimeError("autoreset is disabled: reset the environments that ended before stepping them")
                obs, raw, terminated, truncated, info = env.step(action)
                reward = float(raw)
                if mode == "same_step" and (terminated or truncated):
                    infos.append({"final_obs": obs, "final_info": info})
                    obs, info = env.reset()
            infos.append(info)
            out.append((obs, float(reward), bool(terminated), bool(truncated), infos))
        return out

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        """``name`` called (or read, when it is not callable) on each environment, as ``SyncVectorEnv.call``."""
        out = []
        for env in self.envs:
            value = env.get_wrapper_attr(name)
            out.append(value(*args, **kwargs) if callable(value) else value)
        return out

    def set_attr(self, name: str, values: list[Any]) -> None:
        for env, value in zip(self.envs, values, strict=True):
            env.set_wrapper_attr(name, value)

    def close(self) -> None:
        for env in self.envs:
            env.close()
