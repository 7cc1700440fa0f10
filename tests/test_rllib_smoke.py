"""RLlib drives the team environment through its ``ParallelPettingZooEnv`` wrapper.

Needs the ``rllib`` extra (Ray RLlib pins its own Gymnasium, so it lives in its
own environment); skipped without it. RLlib's environment checker passes, random
joint actions run to the end, and the gold staff, reading observations as RLlib
hands them over, still pass the task.
"""

from __future__ import annotations

import pytest

RLLIB_NOISE = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::PendingDeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    pytest.mark.filterwarnings(r"ignore::UserWarning:ray\."),
]
pytestmark = RLLIB_NOISE

FAMILIES = ("team_refund_approval", "team_verify_identity", "team_wrong_order")
"""Contacts with one set of parties: RLlib's wrapper takes its agents from the first episode."""


def _wrapper() -> type:
    module = pytest.importorskip("ray.rllib.env.wrappers.pettingzoo_env")
    return module.ParallelPettingZooEnv  # type: ignore[no-any-return]


def test_rllib_checks_and_runs_the_parallel_env() -> None:
    parallel_pettingzoo_env = _wrapper()
    from ray.rllib.env.multi_agent_env import MultiAgentEnv
    from ray.rllib.utils.pre_checks.env import check_multiagent_environments

    from mirrorworld.envs.pettingzoo import helpdesk_v0
    from mirrorworld.sim import ScriptedCustomer

    env = parallel_pettingzoo_env(
        helpdesk_v0.parallel_env(families=FAMILIES, customer=ScriptedCustomer(), max_cycles=6)
    )
    assert isinstance(env, MultiAgentEnv)
    check_multiagent_environments(env)
    obs, infos = env.reset(seed=3)
    assert set(obs) == {"tier1", "supervisor"} and set(infos) <= set(obs)
    for agent in obs:
        assert env.observation_space[agent].contains(obs[agent])
    for _ in range(10):
        actions = {agent: env.action_space[agent].sample() for agent in obs}
        obs, rewards, terminateds, truncateds, _infos = env.step(actions)
        assert set(rewards) <= {"tier1", "supervisor"}
        if terminateds["__all__"] or truncateds["__all__"]:
            break
    assert terminateds["__all__"] or truncateds["__all__"]
    env.close()


def test_the_gold_staff_pass_through_rllib() -> None:
    parallel_pettingzoo_env = _wrapper()
    from mirrorworld.envs.pettingzoo import helpdesk_v0, to_role_observation
    from mirrorworld.run.multiagent import GOLD_TEAM, make_policies
    from mirrorworld.sim import RoleContext, ScriptedCustomer

    par = helpdesk_v0.parallel_env(families=FAMILIES, customer=ScriptedCustomer())
    env = parallel_pettingzoo_env(par)
    policies = make_policies(par.world, GOLD_TEAM)
    returns = {"tier1": 0.0, "supervisor": 0.0}
    obs, _ = env.reset(seed=5)
    task = par.episode.task
    for role in obs:
        policies[role].reset(RoleContext(par.world, task, role, task.seed))
    done = False
    while not done:
        actions = {}
        for agent, o in obs.items():
            call = policies[agent].act(to_role_observation(o, agent, par.tools(agent)))
            actions[agent] = None if call is None else {"tool": call.tool, "args": call.args}
        obs, rewards, terminateds, truncateds, _ = env.step(actions)
        for agent, r in rewards.items():
            returns[agent] += r
        done = terminateds["__all__"] or truncateds["__all__"]
    assert par.episode.verdict is not None and par.episode.verdict.passed
    assert returns == pytest.approx({"tier1": 1.0, "supervisor": 1.0})


def _run_example(name: str) -> dict:  # type: ignore[type-arg]
    pytest.importorskip("ray.rllib")
    pytest.importorskip("torch")
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, str(root / "examples" / name), "--smoke"],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONWARNINGS": "ignore", "RAY_DEDUP_LOGS": "0"},
        cwd=root,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_rllib_trains_the_team_with_multi_agent_ppo() -> None:
    """The multi-agent PPO example trains (a warm start, three small iterations) on every seat's action menu."""
    summary = _run_example("rllib_team_ppo.py")
    assert len(summary["team_return"]) == 3 and summary["demonstrations"] > 0
    # an untrained team passes nothing; the cloned and PPO-trained one passes held-out tasks
    assert summary["untrained"] == 0.0 and summary["trained"] > summary["untrained"], summary


def test_rllib_trains_single_agent_ppo_on_the_menu() -> None:
    """The single-agent example: RLlib's default model on the menu's Box features and Discrete action."""
    curve = _run_example("rllib_ppo.py")["episode_return"]
    assert len(curve) == 2
