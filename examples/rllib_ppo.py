"""RLlib PPO on one agent's action menu of the helpdesk (train split), with its default MLP model.

``ActionMenu`` gives RLlib what its default encoders take (a ``Box`` of
features, a ``Discrete`` action) so ``PPOConfig().environment(...)`` needs no
custom model; the menu's action mask is in ``info`` (an empty slot is a
refused call, the agent's mistake). The families default to the two a policy
learns from scratch on this budget (``cancel_order``: read the order, cancel
it, tell the customer; ``sla_escalation``). RLlib pins its own Gymnasium, so
this runs in the environment of the ``rllib`` extra::

    .venv-rllib/bin/python examples/rllib_ppo.py --iterations 20
    .venv-rllib/bin/python examples/rllib_ppo.py --smoke

On a Ray cluster (``docs/scale-out.md``), ``--address auto --env-runners 8``
samples on eight env runners: RLlib's env runners are Ray actors that call
``make_env`` (registered under ``mirrorworld_menu``) where they run, so each
rebuilds the world from its name on its own node; only observations,
actions and rewards travel, in sample batches.
"""

from __future__ import annotations

import argparse
import json
from typing import Any


def make_env(config: dict[str, Any] | None = None) -> Any:
    from mirrorworld.envs.gymnasium import MirrorEnv
    from mirrorworld.envs.menu import ActionMenu

    config = config or {}
    families = tuple(config.get("families", ("cancel_order", "sla_escalation")))
    base = MirrorEnv("helpdesk", split="train", families=families, max_steps=8, gamma=0.99)
    return ActionMenu(base, slots=48)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--families", default="cancel_order,sla_escalation")
    parser.add_argument("--smoke", action="store_true", help="two small iterations, as CI runs it")
    parser.add_argument("--address", default=None, help="a running Ray cluster (auto, HOST:6379); default: local")
    parser.add_argument("--env-runners", type=int, default=0, help="remote env runners (0: sample in the driver)")
    args = parser.parse_args()
    import ray
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.tune.registry import register_env

    iterations, batch = (2, 256) if args.smoke else (args.iterations, 2048)
    if args.address:
        ray.init(address=args.address, include_dashboard=False, log_to_driver=False)
    else:
        ray.init(num_cpus=max(2, args.env_runners + 1), include_dashboard=False, log_to_driver=False)
    register_env("mirrorworld_menu", make_env)
    config = (
        PPOConfig()
        .environment("mirrorworld_menu", env_config={"families": args.families.split(",")})
        .env_runners(num_env_runners=args.env_runners)
        .training(train_batch_size_per_learner=batch, minibatch_size=128, num_epochs=4, lr=3e-4, gamma=0.99)
        .debugging(seed=0)
    )
    algo = config.build_algo()
    curve = []
    try:
        for i in range(iterations):
            result = algo.train()
            ret = float(result.get("env_runners", {}).get("episode_return_mean", float("nan")))
            curve.append(round(ret, 3))
            print(f"iteration {i + 1}: mean episode return {ret:.3f}", flush=True)
    finally:
        algo.stop()
        ray.shutdown()
    print(json.dumps({"episode_return": curve}))


if __name__ == "__main__":
    main()
