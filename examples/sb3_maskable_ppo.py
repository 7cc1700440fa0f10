"""sb3-contrib's MaskablePPO on a world's action menu, out of the box.

``ActionMenu`` gives a ``Discrete`` action over candidate calls, a ``Box`` of
features and ``action_masks()``, which MaskablePPO reads by itself.

    python examples/sb3_maskable_ppo.py --families cancel_order --steps 20000
    python examples/sb3_maskable_ppo.py --smoke
"""

from __future__ import annotations

import argparse

import numpy as np
from sb3_contrib import MaskablePPO

from mirrorworld.envs.gymnasium import MirrorEnv
from mirrorworld.envs.menu import ActionMenu


def make(split: str, families: tuple[str, ...], gamma: float) -> ActionMenu:
    return ActionMenu(MirrorEnv("helpdesk", split=split, families=families or None, max_steps=8, gamma=gamma))  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default="cancel_order")
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--episodes", type=int, default=20, help="test tasks per family")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    families = tuple(f for f in args.families.split(",") if f)
    steps, episodes = (256, 2) if args.smoke else (args.steps, args.episodes)
    gamma = 0.99  # the shaping is discounted with the learner's own gamma
    model = MaskablePPO("MlpPolicy", make("train", families, gamma), gamma=gamma, n_steps=256, batch_size=64, seed=0)
    model.learn(total_timesteps=steps)
    for family in families:
        env = make("test", (family,), gamma)
        passed = 0
        for seed in range(episodes):
            obs, info = env.reset(seed=seed)
            done = False
            while not done:
                action, _ = model.predict(obs, action_masks=env.action_masks(), deterministic=True)
                obs, _, term, trunc, info = env.step(int(np.asarray(action)))
                done = term or trunc
            passed += bool((info.get("verdict") or {}).get("passed"))
        print(f"{family}: {passed}/{episodes} test tasks passed")


if __name__ == "__main__":
    main()
