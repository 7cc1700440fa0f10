"""RLlib trains the helpdesk team (tier 1 and the supervisor, one policy each) with multi-agent PPO.

Each seat acts from its own action menu (``MenuParallel``) and RLlib drives
the PettingZoo environment through its ``ParallelPettingZooEnv`` wrapper; the
simulated customer plays the customer. The team environment's shaping is
undiscounted, so PPO runs with ``gamma=1.0`` (episodes last a few cycles).
RLlib pins its own Gymnasium, so this
runs in the environment of the ``rllib`` extra::

    python3 -m venv .venv-rllib && .venv-rllib/bin/pip install -e '.[rllib]'
    .venv-rllib/bin/python examples/rllib_team_ppo.py --iterations 40
    .venv-rllib/bin/python examples/rllib_team_ppo.py --smoke
"""

from __future__ import annotations

import argparse
import json

FAMILIES = ("team_refund_approval", "team_verify_identity", "team_wrong_order")
"""Contacts with one set of parties (RLlib's wrapper takes its agents from the first episode)."""


def make_env(config: dict | None = None):  # type: ignore[no-untyped-def]
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv

    from mirrorworld.envs.menu_pettingzoo import MenuParallel
    from mirrorworld.envs.pettingzoo import helpdesk_v0
    from mirrorworld.sim import ScriptedCustomer

    config = config or {}
    inner = helpdesk_v0.parallel_env(
        families=FAMILIES, customer=ScriptedCustomer(), max_cycles=int(config.get("max_cycles", 8))
    )
    return ParallelPettingZooEnv(MenuParallel(inner, slots=int(config.get("slots", 24))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--smoke", action="store_true", help="three small iterations, as CI runs it")
    args = parser.parse_args()
    import ray
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.tune.registry import register_env

    iterations, batch = (3, 128) if args.smoke else (args.iterations, 1024)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    register_env("mirrorworld_team_menu", make_env)
    config = (
        PPOConfig()
        .environment("mirrorworld_team_menu")
        .env_runners(num_env_runners=0)
        .multi_agent(policies={"tier1", "supervisor"}, policy_mapping_fn=lambda agent_id, *a, **k: agent_id)
        .training(train_batch_size_per_learner=batch, minibatch_size=64, num_epochs=4, lr=5e-4, gamma=1.0)
        .debugging(seed=0)
    )
    algo = config.build_algo()
    curve = []
    try:
        for i in range(iterations):
            result = algo.train()
            runners = result.get("env_runners", {})
            team = float(runners.get("episode_return_mean", float("nan")))
            curve.append(round(team, 3))
            print(f"iteration {i + 1}: team return {team:.3f}", flush=True)
    finally:
        algo.stop()
        ray.shutdown()
    print(json.dumps({"team_return": curve}))


if __name__ == "__main__":
    main()
