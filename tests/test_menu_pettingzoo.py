"""Every seat of the team world behind its own action menu, as PettingZoo and RLlib consume it."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from mirrorworld.envs.menu_pettingzoo import MenuParallel
from mirrorworld.envs.pettingzoo import helpdesk_v0
from mirrorworld.sim import ScriptedCustomer

FAMILIES = ("team_refund_approval", "team_verify_identity", "team_wrong_order")


def _env(**kw: object) -> MenuParallel:
    return MenuParallel(helpdesk_v0.parallel_env(families=FAMILIES, customer=ScriptedCustomer(), max_cycles=6), **kw)


def test_pettingzoo_parallel_api_test_passes() -> None:
    from pettingzoo.test import parallel_api_test

    parallel_api_test(_env(), num_cycles=20)


def test_each_agent_acts_from_a_menu_of_its_own_seat() -> None:
    env = _env()
    obs, infos = env.reset(seed=3)
    assert set(obs) == set(env.agents) and env.agents
    rng = np.random.default_rng(0)
    for _ in range(6):
        for agent in env.agents:
            tools = set(env.env.tools(agent))
            assert {c.tool for c in env.menus[agent].calls} <= tools, agent
            assert env.observation_space(agent).contains(obs[agent])
        actions = {a: int(rng.choice(np.flatnonzero(infos[a]["action_mask"]))) for a in env.agents}
        obs, _rewards, _terms, _truncs, infos = env.step(actions)
        if not env.agents:
            break
    assert env.episode is not None


def test_the_mask_can_ride_in_the_observation() -> None:
    env = _env(mask_in_observation=True)
    obs, _ = env.reset(seed=1)
    for agent, o in obs.items():
        assert set(o) == {"observation", "action_mask"} and o["action_mask"][0] == 1
        assert env.observation_space(agent).contains(o)
