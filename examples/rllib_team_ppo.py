"""RLlib trains the helpdesk team (tier 1 and the supervisor, one policy each) with multi-agent PPO.

Each seat acts from its own action menu (``MenuParallel``) and RLlib drives
the PettingZoo environment through its ``ParallelPettingZooEnv`` wrapper; the
simulated customer plays the customer. A team contact takes six to eight
calls in the right order by two seats, which uniform exploration never finds
(a random team passes none), so each seat's RLModule is first warm-started by
behaviour cloning on demonstrations of train-split tasks
(:func:`mirrorworld.train.demos.demonstrate_team`: the gold plan played
through the seats' menus), then PPO trains both on the team's reward. The
team return of an episode is its verifier score (the shaping is undiscounted
and sums to 0), so the return printed per iteration is the team's pass rate.
RLlib pins its own Gymnasium, so this runs in the environment of the
``rllib`` extra::

    python3 -m venv .venv-rllib && .venv-rllib/bin/pip install -e '.[rllib]'
    .venv-rllib/bin/python examples/rllib_team_ppo.py --iterations 30
    .venv-rllib/bin/python examples/rllib_team_ppo.py --smoke
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

FAMILIES = ("team_refund_approval", "team_verify_identity", "team_wrong_order")
"""Contacts with one set of parties (RLlib's wrapper takes its agents from the first episode)."""
SLOTS = 48
MAX_CYCLES = 12


def make_menu_env(config: dict[str, Any] | None = None) -> Any:
    """The team world with every seat behind its action menu (a PettingZoo ``ParallelEnv``)."""
    from mirrorworld.envs.menu_pettingzoo import MenuParallel
    from mirrorworld.envs.pettingzoo import helpdesk_v0
    from mirrorworld.sim import ScriptedCustomer

    config = config or {}
    inner = helpdesk_v0.parallel_env(
        families=FAMILIES,
        customer=ScriptedCustomer(),
        max_cycles=int(config.get("max_cycles", MAX_CYCLES)),
    )
    return MenuParallel(inner, slots=int(config.get("slots", SLOTS)))


def make_env(config: dict[str, Any] | None = None) -> Any:
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv

    return ParallelPettingZooEnv(make_menu_env(config))


def demonstrations(tasks: int) -> tuple[dict[str, tuple[Any, Any]], int]:
    """Each seat's (observations, actions) from passing demonstrations of ``tasks`` train tasks; how many passed."""
    import numpy as np

    from mirrorworld.train.demos import demonstrate_team

    env = make_menu_env()
    feats: dict[str, list[Any]] = {a: [] for a in env.possible_agents}
    acts: dict[str, list[int]] = {a: [] for a in env.possible_agents}
    kept = 0
    for seed in range(1 << 20, (1 << 20) + tasks):  # task indices the PPO rollouts (seeded from 0) do not start at
        demo = demonstrate_team(env, seed=seed)
        if demo is None:
            continue
        kept += 1
        for agent, steps in demo.items():
            for features, _mask, action in steps:
                feats[agent].append(features)
                acts[agent].append(action)
    data = {a: (np.stack(feats[a]), np.array(acts[a])) for a in env.possible_agents if acts[a]}
    return data, kept


def clone(algo: Any, data: dict[str, tuple[Any, Any]], epochs: int) -> None:
    """Behaviour cloning of each seat's RLModule, in the learner, on its demonstrations; then the runners sync."""

    def fit(learner: Any) -> None:
        import torch

        for agent, (x_np, y_np) in data.items():
            module = learner.module[agent]
            x, y = torch.from_numpy(x_np).float(), torch.from_numpy(y_np).long()
            optimizer = torch.optim.Adam(module.parameters(), lr=1e-3)
            for _ in range(epochs):
                order = torch.randperm(len(y))
                for lo in range(0, len(y), 128):
                    idx = order[lo : lo + 128]
                    logits = module.forward_train({"obs": x[idx]})["action_dist_inputs"]
                    loss = torch.nn.functional.cross_entropy(logits, y[idx])
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()

    algo.learner_group.foreach_learner(fit)
    algo.env_runner_group.sync_weights(from_worker_or_learner_group=algo.learner_group)


def greedy_pass_rate(algo: Any, episodes: int, *, first: int = 1 << 21) -> float:
    """The team's pass rate over ``episodes`` train tasks no rollout or demonstration started at, each seat
    taking its RLModule's most likely valid action."""
    import numpy as np
    import torch

    env = make_menu_env()
    modules = {agent: algo.get_module(agent) for agent in env.possible_agents}
    passed = 0
    for seed in range(first, first + episodes):
        obs, infos = env.reset(seed=seed)
        while env.agents:
            actions = {}
            for agent in env.agents:
                with torch.no_grad():
                    out = modules[agent].forward_inference({"obs": torch.from_numpy(obs[agent][None]).float()})
                logits = out["action_dist_inputs"][0].numpy()
                actions[agent] = int(np.where(infos[agent]["action_mask"], logits, -np.inf).argmax())
            obs, _rewards, _terms, _truncs, infos = env.step(actions)
        verdict = env.episode.verdict
        passed += bool(verdict is not None and verdict.passed)
    return passed / max(episodes, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--demos", type=int, default=300, help="train tasks demonstrated for the warm start")
    parser.add_argument("--bc-epochs", type=int, default=40)
    parser.add_argument("--batch", type=int, default=1024, help="env steps per PPO iteration")
    parser.add_argument("--lr", type=float, default=5e-5, help="PPO's learning rate (after the warm start)")
    parser.add_argument("--eval", type=int, default=60, help="held-out tasks the greedy team plays, before and after")
    parser.add_argument("--smoke", action="store_true", help="three small iterations, as CI runs it")
    args = parser.parse_args()
    if args.smoke:
        args.iterations, args.demos, args.bc_epochs, args.batch, args.eval = 3, 30, 20, 128, 10
    import ray
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.tune.registry import register_env

    start = time.perf_counter()
    data, kept = demonstrations(args.demos)
    print(f"demonstrations: {kept} of {args.demos} train tasks passed through the menus", flush=True)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    register_env("mirrorworld_team_menu", make_env)
    config = (
        PPOConfig()
        .environment("mirrorworld_team_menu")
        .env_runners(num_env_runners=0)
        .multi_agent(policies={"tier1", "supervisor"}, policy_mapping_fn=lambda agent_id, *a, **k: agent_id)
        .training(
            train_batch_size_per_learner=args.batch,
            minibatch_size=128,
            num_epochs=4,
            lr=args.lr,
            gamma=1.0,
            entropy_coeff=0.0,
        )
        .debugging(seed=0)
    )
    algo = config.build_algo()
    curve = []
    try:
        untrained = greedy_pass_rate(algo, args.eval)
        clone(algo, data, args.bc_epochs)
        cloned = greedy_pass_rate(algo, args.eval)
        print(f"greedy team pass rate: untrained {untrained:.0%}, after cloning {cloned:.0%}", flush=True)
        for i in range(args.iterations):
            result = algo.train()
            runners = result.get("env_runners", {})
            team = float(runners.get("episode_return_mean", float("nan")))
            curve.append(round(team, 3))
            print(f"iteration {i + 1}: team return {team:.3f}", flush=True)
        trained = greedy_pass_rate(algo, args.eval)
    finally:
        algo.stop()
        ray.shutdown()
    print(f"greedy team pass rate after PPO: {trained:.0%}; {time.perf_counter() - start:.0f} s in all", flush=True)
    summary = {"untrained": untrained, "cloned": cloned, "trained": trained, "team_return": curve}
    print(json.dumps({**summary, "demonstrations": kept}))


if __name__ == "__main__":
    main()
