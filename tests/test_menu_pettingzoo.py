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


def test_supersuit_pads_the_seats_and_vectorises_them() -> None:
    """SuperSuit's multi-agent wrappers: pad the seats' differing spaces, then run them as one vector env."""
    ss = pytest.importorskip("supersuit")
    env = _env()
    sizes = {a: env.observation_space(a).shape for a in env.possible_agents}
    assert len(set(sizes.values())) > 1, "the seats' features differ in size (each has its own tools)"
    padded = ss.pad_action_space_v0(ss.pad_observations_v0(env))
    shapes = {padded.observation_space(a).shape for a in padded.possible_agents}
    assert len(shapes) == 1
    vec = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(padded), 2, num_cpus=0, base_class="gymnasium")
    obs, _ = vec.reset(seed=0)
    assert obs.shape == (2 * len(env.possible_agents), *shapes.pop())
    rng = np.random.default_rng(0)
    for _ in range(8):
        obs, rewards, _terms, _truncs, _infos = vec.step(rng.integers(0, 3, size=obs.shape[0]))
        assert np.isfinite(obs).all() and rewards.shape == (obs.shape[0],)
    vec.close()


@pytest.mark.parametrize("family", FAMILIES)
def test_the_seats_menus_can_express_the_team_gold(family: str) -> None:
    """The gold plan, played through each seat's menu (reads first where an id is not yet known), passes."""
    from mirrorworld.train.demos import demonstrate_team

    env = MenuParallel(
        helpdesk_v0.parallel_env(families=(family,), customer=ScriptedCustomer(), max_cycles=12), slots=48
    )
    demos = [demonstrate_team(env, seed=seed) for seed in range(6)]
    assert all(d is not None for d in demos), [d is not None for d in demos]
    for demo in demos:
        assert demo is not None
        for agent, steps in demo.items():
            for features, mask, action in steps:
                assert env.observation_space(agent).contains(features) and mask[action]
