"""PPO on the helpdesk's action menu, trained on the train split and measured on the test split.

The algorithm is :mod:`mirrorworld.train.ppo`, written as one CleanRL-style file
(an ``Args`` dataclass, the rollout, the update, read top to bottom); this
script sets its arguments from the command line and prints the per-family
table. ``mirrorworld train`` does the same and also writes the curve, the
episodes and the audit.

    python examples/cleanrl_ppo.py --families refund_damaged,cancel_order --minutes 5
    python examples/cleanrl_ppo.py --smoke        # a few hundred steps, as CI runs it
"""

from __future__ import annotations

import argparse
from dataclasses import fields

from mirrorworld.train.evaluate import evaluate
from mirrorworld.train.ppo import Args, families_of, train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for f in fields(Args):
        if f.name == "families":
            continue
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)
    parser.add_argument("--families", default="", help="comma-separated families (default: all)")
    parser.add_argument("--episodes", type=int, default=30, help="test tasks per family")
    parser.add_argument("--smoke", action="store_true", help="train a few hundred steps and test 2 tasks a family")
    ns = parser.parse_args()
    values = {f.name: getattr(ns, f.name) for f in fields(Args) if f.name != "families"}
    args = Args(**values, families=tuple(x for x in ns.families.split(",") if x))
    episodes = ns.episodes
    if ns.smoke:
        args.total_steps, args.num_envs, args.num_steps, args.curve_episodes = 256, 2, 64, 2
        args.families = args.families or ("cancel_order", "sla_escalation")
        episodes = 2

    def report(step: int, total: int, message: str) -> None:
        print(f"step {step:>7}/{total}: {message}", flush=True)

    policy, history = train(args, progress=report)
    table, _ = evaluate(policy, args, families_of(args), episodes=episodes, seed=args.seed)
    print(f"\ntrained {history.wall_s:.0f} s, {history.episodes} episodes; test split ({episodes} tasks a family):")
    print(f"{'family':<24}{'trained':>9}{'random':>9}{'oracle':>9}")
    for family, row in table.items():
        print(f"{family:<24}{row['trained']:>9.0%}{row['random']:>9.0%}{row['oracle']:>9.0%}")


if __name__ == "__main__":
    main()
