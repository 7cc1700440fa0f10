"""Demonstrations on the action menu, from the train split's gold solutions, for a warm start.

A demonstration plays a train-split task through :class:`~mirrorworld.envs.menu.ActionMenu`
by picking, at each step, the menu slot that makes the gold solution's next
call; when the menu does not offer it yet (the gold calls ``issue_refund``
with a line id it knows, an agent must first open the order), it opens a
record the instruction names that it has not opened, as an agent reading the
case would (records the instruction names first, then those the results showed,
searches last). The last call is the first of the menu's that passes when tried on a
fork of the episode. Only demonstrations that the verifier passes are kept.

The task's gold and facts are the *labels* of a training example, used on the
train split only; the policy that learns from them sees observations alone,
and is measured on the test split.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from mirrorworld.core.task import Task
from mirrorworld.envs.menu import ActionMenu, call_args

__all__ = ["demonstrate"]

_READS = ("get_ticket", "get_order", "get_customer", "search_tickets", "search_articles", "get_article")


def _same(value: Any, gold: Any) -> bool:
    if str(value) == str(gold):
        return True
    try:
        return abs(float(value) - float(gold)) < 1e-9
    except (TypeError, ValueError):
        return False


def demonstrate(env: ActionMenu, task: Task, *, limit: int = 12) -> list[tuple[np.ndarray, np.ndarray, int]] | None:
    """(features, mask, slot) of each step of a passing demonstration of ``task``, or None."""
    obs, info = env.reset(options={"task": task})
    todo = list(task.gold)
    opened: set[str] = set()
    steps: list[tuple[np.ndarray, np.ndarray, int]] = []
    for _ in range(limit):
        if not todo:
            return None
        menu = env.menu
        want = todo[0]
        pick = None
        for i, call in enumerate(menu):
            if call.tool != want.tool:
                continue
            if len(todo) == 1 and call.tool == want.tool and _passes(env, call.tool, call_args(call)):
                pick = i
                break
            if len(todo) > 1 and all(
                _same(call_args(call).get(k), v) for k, v in call_args(want).items() if v is not None
            ):
                pick = i
                break
        if pick is None:
            reads = sorted(
                (
                    i
                    for i, call in enumerate(menu)
                    if call.tool in _READS and json.dumps([call.tool, call.args], default=str) not in opened
                ),
                key=lambda i: (
                    "query" in call_args(menu[i]),
                    not any(str(v) in task.instruction for v in call_args(menu[i]).values()),
                    i,
                ),
            )
            if not reads:
                return None
            pick = reads[0]
        else:
            todo.pop(0)
        opened.add(json.dumps([menu[pick].tool, menu[pick].args], default=str))
        steps.append((np.array(obs, copy=True), info["action_mask"].copy(), pick))
        obs, _reward, done, cut, info = env.step(pick)
        if done or cut:
            verdict = info.get("verdict") or {}
            return steps if verdict.get("passed") else None
    return None


def _passes(env: ActionMenu, tool: str, args: dict[str, Any]) -> bool:
    """Whether ending the episode now with this call would pass (tried on a fork of the episode)."""
    episode = env.unwrapped.episode  # type: ignore[attr-defined]
    twin = episode.fork()
    try:
        twin.step(tool, args)
        return bool(twin.verdict is not None and twin.verdict.passed)
    finally:
        twin.close()
