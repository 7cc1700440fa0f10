"""TorchRL drives a world's action menu: its spec checker, its ActionMask transform, a masked policy, a collector.

``ActionMenu(mask_in_observation=True)`` puts the mask in the observation as
``action_mask``, which TorchRL's ``ActionMask`` transform turns into the action
spec's mask, so a ``MaskedCategorical`` actor only ever picks a slot that holds
a call.

    python examples/torchrl_rollout.py --frames 512
"""

from __future__ import annotations

import argparse

import torch
from tensordict.nn import TensorDictModule, TensorDictSequential
from torchrl.collectors import Collector
from torchrl.envs import ActionMask, GymWrapper, TransformedEnv
from torchrl.envs.utils import check_env_specs
from torchrl.modules import MaskedCategorical, ProbabilisticActor

from mirrorworld.envs.gymnasium import MirrorEnv
from mirrorworld.envs.menu import ActionMenu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=512)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    frames = 128 if args.smoke else args.frames
    menu = ActionMenu(MirrorEnv("helpdesk", max_steps=8), mask_in_observation=True)
    env = TransformedEnv(GymWrapper(menu, categorical_action_encoding=True), ActionMask())
    check_env_specs(env)
    width = menu.layout.size
    net = TensorDictModule(torch.nn.Linear(width, menu.slots), in_keys=["observation"], out_keys=["logits"])
    as_bool = TensorDictModule(lambda m: m.bool(), in_keys=["action_mask"], out_keys=["mask"])
    actor = TensorDictSequential(
        as_bool,
        ProbabilisticActor(
            net,
            in_keys={"logits": "logits", "mask": "mask"},
            out_keys=["action"],
            distribution_class=MaskedCategorical,
            spec=env.action_spec,
        ),
    )
    collector = Collector(
        env, actor, frames_per_batch=frames // 2, total_frames=frames, auto_register_policy_transforms=False
    )
    calls = episodes = 0
    for batch in collector:
        calls += batch.numel()
        episodes += int(batch["next", "done"].sum())
        assert bool(batch["action_mask"].gather(-1, batch["action"].unsqueeze(-1)).all()), "a masked slot was picked"
    collector.shutdown()
    print(f"{calls} steps collected over {episodes} finished episodes, every action a slot holding a call")


if __name__ == "__main__":
    main()
