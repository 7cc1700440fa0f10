"""PettingZoo's own conformance tests pass on the helpdesk team environments.

PettingZoo's test utilities also emit advice that does not apply here (agent
names like ``player_0``, Box/Discrete spaces only, every possible agent in
every episode); those ``UserWarning``\\s from ``pettingzoo.test`` are ignored
per test, nothing else is.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from pettingzoo.test import api_test, max_cycles_test, parallel_api_test, parallel_seed_test, seed_test

from mirrorworld.envs.pettingzoo import (
    TEXT_FIELDS,
    HelpdeskTeamAEC,
    HelpdeskTeamParallel,
    decode_text,
    encode_text,
    helpdesk_v0,
)
from mirrorworld.sim import ScriptedCustomer

PZ_ADVICE = pytest.mark.filterwarnings(r"ignore::UserWarning:pettingzoo\.test")
THREE = ("team_refund_approval", "team_verify_identity", "team_wrong_order")


@PZ_ADVICE
def test_api_test() -> None:
    api_test(helpdesk_v0.env(), num_cycles=200)


@PZ_ADVICE
def test_api_test_raw_env_with_tier_two() -> None:
    api_test(helpdesk_v0.raw_env(families=["team_escalation"], max_cycles=20), num_cycles=50)


@PZ_ADVICE
def test_api_test_with_a_simulated_customer() -> None:
    env = helpdesk_v0.env(customer=ScriptedCustomer(), families=THREE)
    api_test(env, num_cycles=100)
    assert env.possible_agents == ["tier1", "supervisor"]


@PZ_ADVICE
def test_parallel_api_test() -> None:
    parallel_api_test(helpdesk_v0.parallel_env(), num_cycles=200)


@PZ_ADVICE
def test_parallel_api_test_with_a_simulated_customer() -> None:
    parallel_api_test(helpdesk_v0.parallel_env(customer=ScriptedCustomer()), num_cycles=100)


@PZ_ADVICE
def test_seed_test() -> None:
    seed_test(helpdesk_v0.env, num_cycles=60)


@PZ_ADVICE
def test_parallel_seed_test() -> None:
    parallel_seed_test(helpdesk_v0.parallel_env, num_cycles=60)


@PZ_ADVICE
def test_max_cycles_test() -> None:
    max_cycles_test(helpdesk_v0)


def test_module_path_and_agents() -> None:
    import mirrorworld.envs.pettingzoo as module

    assert module.helpdesk_v0 is helpdesk_v0
    aec, par = helpdesk_v0.env(), helpdesk_v0.parallel_env()
    assert isinstance(aec.unwrapped, HelpdeskTeamAEC) and isinstance(par, HelpdeskTeamParallel)
    assert aec.possible_agents == par.possible_agents == ["customer", "tier1", "supervisor", "tier2"]
    assert helpdesk_v0.parallel_env(families=THREE).possible_agents == ["customer", "tier1", "supervisor"]
    aec.reset(options={"task_id": "team_escalation/0"})
    assert aec.agents == ["customer", "tier1", "supervisor", "tier2"]
    aec.reset(options={"task_id": "team_wrong_order/0"})
    assert aec.agents == ["customer", "tier1", "supervisor"]


def _leaves(space: Any, value: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    from gymnasium import spaces

    if isinstance(space, spaces.Dict):
        assert isinstance(value, dict) and set(value) == set(space.spaces), path
        return [leaf for key in space.spaces for leaf in _leaves(space[key], value[key], f"{path}/{key}")]
    return [(path, space, value)]


def test_observation_leaves_are_arrays_with_the_declared_dtypes() -> None:
    par = helpdesk_v0.parallel_env(max_cycles=5)
    obs, _ = par.reset(seed=3)
    for _ in range(3):
        for agent, o in obs.items():
            space = par.observation_space(agent)
            assert space.contains(o)
            for path, leaf_space, leaf in _leaves(space, o):
                assert isinstance(leaf, np.ndarray), path
                assert leaf.dtype == leaf_space.dtype, path
        obs, *_ = par.step({a: par.action_space(a).sample() for a in par.agents})
        if not par.agents:
            break


def test_the_spaces_are_typed_per_role() -> None:
    par = helpdesk_v0.parallel_env()
    for agent in par.possible_agents:
        action = par.action_space(agent)
        assert action["tool"].n == len(par.tools(agent)) + 1  # index 0 is wait
        assert set(par.observation_space(agent)["observation"].spaces) == {*TEXT_FIELDS, "cycle", "tool_mask"}
    assert par.tools("customer") == ("check_email", "message_agent", "confirm_change", "leave_chat")
    assert "decide_approval" in par.tools("supervisor") and "decide_approval" not in par.tools("tier1")
    schemas = par.tool_schemas("customer")
    assert [s["function"]["name"] for s in schemas] == list(par.tools("customer"))
    assert schemas[1]["function"]["parameters"]["required"] == ["ticket_id", "message"]


def test_text_round_trips_through_arrays() -> None:
    arr = encode_text('{"a": "b\\u00e9"} caf\u00e9', 32)
    assert arr.dtype == np.uint8 and arr.shape == (32,)
    assert decode_text(arr) == '{"a": "b\\u00e9"} caf?'
    long = encode_text("x" * 100, 40)
    assert decode_text(long).endswith("...[truncated]") and len(decode_text(long)) == 40
