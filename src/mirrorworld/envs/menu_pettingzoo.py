"""The action menu for seated worlds: a PettingZoo ``ParallelEnv`` every agent of which acts from a menu.

:class:`MenuParallel` wraps a :class:`~mirrorworld.envs.pettingzoo.SeatedParallel`
so that each agent has what :class:`~mirrorworld.envs.menu.ActionMenu` gives a
single agent, over the tools of its own seat:

* **action** ``Discrete(slots + 1)``: ``0`` waits this cycle, ``i`` makes the
  call in slot ``i - 1`` of the agent's menu; ``infos[agent]["action_mask"]``
  (and :meth:`MenuParallel.action_mask`) says which hold one;
* **observation** the agent's features (a ``Box``), or with
  ``mask_in_observation=True`` a ``Dict`` of ``observation`` and
  ``action_mask``, as RLlib's action-masking models read it.

An agent's menu is built from its briefing, the results of its own calls and
the messages in its inbox: what its seat shows it, and nothing else.
Rewards, terminations and the verdict are the wrapped environment's.

    from mirrorworld.envs.menu_pettingzoo import MenuParallel
    from mirrorworld.envs.pettingzoo import helpdesk_v0
    from mirrorworld.sim import ScriptedCustomer

    env = MenuParallel(helpdesk_v0.parallel_env(customer=ScriptedCustomer()))
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from mirrorworld.envs.menu import Menu, _slot
from mirrorworld.envs.pettingzoo import SeatedParallel, decode_text

try:
    from pettingzoo import ParallelEnv  # type: ignore[import-untyped]
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "mirrorworld.envs.menu_pettingzoo needs PettingZoo: pip install 'mirrorworld[multiagent]'"
    ) from exc

__all__ = ["MenuParallel"]


class MenuParallel(ParallelEnv[str, Any, int]):  # type: ignore[misc]  # PettingZoo is untyped
    """Every agent of a seated world behind its own action menu. See the module docstring."""

    def __init__(self, env: SeatedParallel, *, slots: int = 32, mask_in_observation: bool = False) -> None:
        self.env = env
        self.slots = slots
        self.mask_in_observation = mask_in_observation
        world = env.world
        self.metadata = dict(env.metadata)
        self.render_mode = getattr(env, "render_mode", None)
        self.possible_agents = list(env.possible_agents)
        self.agents: list[str] = []
        specs = world.tools_by_name
        max_steps = int(getattr(env, "max_cycles", 30))
        self.menus: dict[str, Menu] = {
            agent: Menu(
                [specs[name] for name in env.tools(agent) if name in specs], world.menu_macros(), slots, max_steps
            )
            for agent in self.possible_agents
        }
        self._inbox_seen: dict[str, int] = {}
        self.raw_observations: dict[str, Any] = {}
        """The wrapped environment's last observations (what a text policy of the seat would read)."""
        self._spaces = {agent: self._observation_space(agent) for agent in self.possible_agents}
        self._actions = {agent: spaces.Discrete(slots + 1) for agent in self.possible_agents}

    def _observation_space(self, agent: str) -> spaces.Space[Any]:
        box = self.menus[agent].layout.space()
        if self.mask_in_observation:
            return spaces.Dict({"observation": box, "action_mask": spaces.MultiBinary(self.slots + 1)})
        return box

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        return self._spaces[agent]

    def action_space(self, agent: str) -> spaces.Discrete:
        return self._actions[agent]

    @property
    def world(self) -> Any:
        return self.env.world

    @property
    def episode(self) -> Any:
        return self.env.episode

    def action_mask(self, agent: str) -> np.ndarray:
        """Which actions hold something for ``agent``: wait, and the slots with a call."""
        return np.concatenate([[True], self.menus[agent].mask() if self.menus[agent].items else [False] * self.slots])

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        obs, infos = self.env.reset(seed=seed, options=options)
        self.raw_observations = obs
        self.agents = list(self.env.agents)
        self._inbox_seen = {}
        for agent in self.agents:
            o = obs[agent]["observation"]
            self.menus[agent].start(decode_text(o["briefing"]))
            self._read_inbox(agent, o)
        return self._observe(obs, infos)

    def step(
        self, actions: Mapping[str, Any]
    ) -> tuple[dict[str, Any], dict[str, float], dict[str, bool], dict[str, bool], dict[str, dict[str, Any]]]:
        inner: dict[str, Any] = {}
        acted: set[str] = set()
        for agent in self.agents:
            slot = _slot(actions.get(agent, 0))
            call = self.menus[agent].choose(slot - 1) if slot > 0 else None
            if call is not None:
                inner[agent] = {"tool": call.tool, "args": call.args}
                acted.add(agent)
            elif slot > 0:
                inner[agent] = {"tool": f"empty-slot-{slot - 1}", "args": {}}
                acted.add(agent)
            else:
                inner[agent] = None
        obs, rewards, terms, truncs, infos = self.env.step(inner)
        self.raw_observations = obs
        for agent in acted:
            if agent in obs:
                self.menus[agent].shown(decode_text(obs[agent]["observation"]["last_result"]))
        for agent in obs:
            self._read_inbox(agent, obs[agent]["observation"])
        self.agents = list(self.env.agents)
        features, infos = self._observe(obs, infos)
        return features, rewards, terms, truncs, infos

    def _read_inbox(self, agent: str, o: Mapping[str, Any]) -> None:
        try:
            inbox = json.loads(decode_text(o["inbox"]) or "{}")
        except ValueError:
            return
        messages = inbox.get("messages", []) if isinstance(inbox, dict) else []
        fresh = messages[self._inbox_seen.get(agent, 0) :]
        self._inbox_seen[agent] = len(messages)
        for message in fresh:
            self.menus[agent].note(json.dumps(message))

    def _observe(
        self, obs: Mapping[str, Any], infos: Mapping[str, dict[str, Any]]
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        over = self.env.episode is None or self.env.episode.over
        out: dict[str, Any] = {}
        info_out: dict[str, dict[str, Any]] = {}
        for agent in obs:
            menu = self.menus[agent]
            menu.refresh(over=over)
            mask = self.action_mask(agent)
            features = menu.features()
            out[agent] = (
                {"observation": features, "action_mask": mask.astype(np.int8)} if self.mask_in_observation else features
            )
            info_out[agent] = {**infos.get(agent, {}), "action_mask": mask}
        return out, info_out

    def render(self) -> str | None:
        return self.env.render()  # type: ignore[no-any-return]

    def close(self) -> None:
        self.env.close()
