"""Evaluating a trained menu policy on the test split, per family, against random and the oracle.

The test split's task seeds are disjoint from the train split's
(:func:`mirrorworld.core.task.split_seed`), so a pass here is a pass on tasks
the learner never saw. Each family's figure is the fraction of ``episodes``
test tasks passed by

* the **trained** policy, acting greedily;
* **random**: a uniform choice among the menu's valid slots at every step;
* the **oracle**: the task's gold solution, replayed and graded.

:func:`trajectories_jsonl` writes the trained policy's test episodes in the
format ``mirrorworld audit-run`` reads, so the same reward-hacking scan that
runs on recorded runs runs on them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from mirrorworld.agents.base import assistant, tool_call
from mirrorworld.core.registry import default
from mirrorworld.episodes import Episode, EpisodeOptions
from mirrorworld.train.ppo import Args, make_env, run_greedy, run_random

__all__ = ["evaluate", "trajectories_jsonl"]


def _oracle(world: Any, task: Any) -> bool:
    episode = Episode(world, task, EpisodeOptions(max_steps=len(task.gold) + 1))
    try:
        for call in task.gold:
            episode.step(call.tool, call.args)
        return bool(episode.verdict is not None and episode.verdict.passed)
    finally:
        episode.close()


def evaluate(
    policy: Any, args: Args, families: Sequence[str], *, episodes: int = 30, seed: int = 0
) -> tuple[dict[str, dict[str, float]], list[dict[str, Any]]]:
    """Per-family pass rates on the test split (see the module docstring) and the trained policy's episodes."""
    rng = np.random.default_rng(seed)
    world = default.get(args.world)
    table: dict[str, dict[str, float]] = {}
    played: list[dict[str, Any]] = []
    for family in families:
        env = make_env(replace(args, families=(family,)), "test")
        trained = random = oracle = 0
        for index in range(episodes):
            passed, calls = run_greedy(policy, env, seed=index)
            task = env.unwrapped.episode.task  # type: ignore[attr-defined]
            trained += passed
            played.append({"task_id": task.id, "family": family, "passed": passed, "calls": calls})
            random += run_random(env, rng, options={"task": task})
            oracle += _oracle(world, task)
        env.close()
        table[family] = {
            "trained": trained / episodes,
            "random": random / episodes,
            "oracle": oracle / episodes,
            "episodes": float(episodes),
        }
    return table, played


def trajectories_jsonl(played: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Write ``played`` (from :func:`evaluate`) as OpenAI-format messages, one episode a line."""
    path = Path(path)
    with path.open("w", encoding="utf-8") as f:
        for ep in played:
            messages = [assistant(None, [tool_call(f"c{i}", tool, args)]) for i, (tool, args) in enumerate(ep["calls"])]
            f.write(json.dumps({"task_id": ep["task_id"], "messages": messages}) + "\n")
    return path
