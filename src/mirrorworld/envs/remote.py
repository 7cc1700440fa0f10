"""A world on a session server as a Gymnasium environment.

:class:`RemoteMirrorEnv` has the observation and action spaces, the task
selection, the rewards and the ``info`` of
:class:`~mirrorworld.envs.gymnasium.MirrorEnv`; only the episode runs on a
server. Given the same seeds and actions, the two produce equal observations,
rewards, flags and verdicts, so training code written against one runs
against the other::

    env = RemoteMirrorEnv("http://gpu-box:8765", world="helpdesk", split="train", token=...)
    obs, info = env.reset(seed=7)
    obs, reward, terminated, truncated, info = env.step({"tool_name": 2, "tool_args": '{"customer_id": 3}'})

The environment holds one server session for its lifetime (``reset`` starts a
new episode in it; ``close`` closes it) and talks to the server over a
WebSocket by default (``transport="http"`` for plain HTTP). A request the
server refuses (unknown world, expired session, rate limit) raises
:class:`~mirrorworld.client.RemoteError`; a bad tool call never does.
"""

from __future__ import annotations

from typing import Any, Literal, SupportsFloat

import gymnasium as gym
import numpy as np

from mirrorworld.client import Client, RemoteSession, StepResult, Transport
from mirrorworld.core.task import MAX_INDEX, Split
from mirrorworld.envs.gymnasium import _ascii, _clip, decode_action, env_spaces
from mirrorworld.errors import MirrorworldError

__all__ = ["RemoteMirrorEnv"]


class RemoteMirrorEnv(gym.Env[dict[str, Any], dict[str, Any]]):
    """``MirrorEnv`` with its episodes on a server. See the module docstring."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4}  # noqa: RUF012 - Gymnasium declares it so

    def __init__(
        self,
        base_url: str | Client,
        *,
        world: str = "helpdesk",
        split: Split = "train",
        families: tuple[str, ...] | list[str] | None = None,
        max_steps: int = 30,
        reward: Literal["shaped", "sparse"] = "shaped",
        token: str | None = None,
        transport: Transport = "ws",
        render_mode: str | None = None,
    ) -> None:
        if split not in ("train", "test"):
            raise MirrorworldError(f"split must be train or test, not {split!r}")
        if reward not in ("shaped", "sparse"):
            raise MirrorworldError(f"reward must be shaped or sparse, not {reward!r}")
        self._owns_client = not isinstance(base_url, Client)
        self.client = base_url if isinstance(base_url, Client) else Client(base_url, token=token, transport=transport)
        try:
            detail = self.client.world(world)
        except BaseException:
            if self._owns_client:
                self.client.close()
            raise
        self.world_name = world
        self.world_id: str = detail["id"]
        self.split: Split = split
        self.families = tuple(families) if families else None
        self.max_steps = max_steps
        self.reward_mode = reward
        self.render_mode = render_mode
        self.tool_names: tuple[str, ...] = tuple(t["function"]["name"] for t in detail["tools"])
        n = len(self.tool_names)
        self.observation_space, self.action_space = env_spaces(n, max_steps)
        self._all = np.ones(n, dtype=np.int8)
        self._none = np.zeros(n, dtype=np.int8)
        self.session: RemoteSession | None = None
        self._instruction = ""
        self._obs: dict[str, Any] | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        spec: dict[str, Any] = {
            "split": self.split,
            "families": self.families,
            "max_steps": self.max_steps,
            "reward": self.reward_mode,
        }
        if options.get("task_id") is not None:
            spec["task_id"] = str(options["task_id"])
        else:
            spec["index"] = seed if seed is not None else int(self.np_random.integers(0, MAX_INDEX + 1))
        if self.session is None:
            self.session = self.client.create(self.world_name, **spec)
        else:
            self.session.reset(**spec)
        info = self.session.info
        self._instruction = _ascii(info.instruction)
        obs = self._observe("", info.view, info.records, info.step, False)
        return obs, {"task_id": info.task_id, "family": info.family, "split": info.split}

    def step(self, action: dict[str, Any]) -> tuple[dict[str, Any], SupportsFloat, bool, bool, dict[str, Any]]:
        if self.session is None:
            raise MirrorworldError("call reset() before step()")
        name, args = decode_action(action, self.tool_names)
        r: StepResult = self.session.step(name, args)
        obs = self._observe(_clip(r.content), r.view, r.records, r.step, r.done)
        info: dict[str, Any] = {"tool": name, "ok": r.ok}
        if not r.ok:
            info["error"] = r.error
        if r.verdict is not None:
            info["verdict"] = r.verdict
        return obs, float(r.reward), r.terminated, r.truncated, info

    def state_hash(self) -> str:
        """The canonical hash of the current episode's state (computed by the server)."""
        if self.session is None:
            raise MirrorworldError("call reset() first")
        return self.session.state_hash()

    def render(self) -> str | None:
        if self.render_mode != "ansi" or self._obs is None:
            return None
        o = self._obs
        return f"[step {int(o['step'])}] {o['view']}\n{o['last_result']}"

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None
        if self._owns_client:
            self.client.close()

    def _observe(self, last_result: str, view: str, records: str, step: int, over: bool) -> dict[str, Any]:
        obs = {
            "instruction": self._instruction,
            "view": _ascii(view),
            "records": records,
            "last_result": last_result,
            "tool_mask": (self._none if over else self._all).copy(),
            "step": np.array(min(step, self.max_steps), dtype=np.int64),
        }
        self._obs = obs
        return obs
