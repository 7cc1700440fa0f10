"""Demonstrations on the action menu, from the train split's gold solutions, for a warm start.

A demonstration plays a train-split task through :class:`~mirrorworld.envs.menu.ActionMenu`
by picking, at each step, the menu slot that makes the gold solution's next
call; when the menu does not offer it yet (the gold calls ``issue_refund``
with a line id it knows, an agent must first open the order), it makes one of
the menu's reads: the first, tried on a fork of the episode, whose result shows
the ids and values the gold's next call needs; else the first in the order an
agent reading the case would take (records the instruction names first, then
those the results showed, searches last). The last call is the first of the menu's that passes when tried on a
fork of the episode. Only demonstrations that the verifier passes are kept.

The task's gold and facts are the *labels* of a training example, used on the
train split only; the policy that learns from them sees observations alone,
and is measured on the test split.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np

from mirrorworld.core.task import Task
from mirrorworld.envs.menu import ActionMenu, call_args

__all__ = ["demonstrate"]

_LOOKAHEAD = 16
"""Reads tried on a fork, at most, per step of a demonstration."""
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
            pick = next((i for i in reads[:_LOOKAHEAD] if _reveals(env, menu[i], want)), reads[0])
        else:
            todo.pop(0)
        opened.add(json.dumps([menu[pick].tool, menu[pick].args], default=str))
        steps.append((np.array(obs, copy=True), info["action_mask"].copy(), pick))
        obs, _reward, done, cut, info = env.step(pick)
        if done or cut:
            verdict = info.get("verdict") or {}
            return steps if verdict.get("passed") else None
    return None


def _reveals(env: ActionMenu, read: Any, want: Any) -> bool:
    """Whether making ``read`` now (on a fork of the episode) shows every id and short text ``want`` needs.

    An id counts as shown where a record of the result holds it as a value (its
    ``id`` or an ``*_id`` field), not where its digits merely occur.
    """
    ids = {v for v in call_args(want).values() if isinstance(v, int) and not isinstance(v, bool)}
    texts = [v for v in call_args(want).values() if isinstance(v, str) and len(v) <= 40]
    if not ids and not texts:
        return False
    episode = env.unwrapped.episode  # type: ignore[attr-defined]
    twin = episode.fork()
    try:
        text = twin.step(read.tool, call_args(read)).result.content()
    finally:
        twin.close()
    try:
        shown = set(_ids_in(json.loads(text)))
    except ValueError:
        return False
    return ids <= shown and all(t in text for t in texts)


def _ids_in(node: Any) -> Iterator[int]:
    if isinstance(node, dict):
        for k, v in node.items():
            if isinstance(v, int) and not isinstance(v, bool) and (k == "id" or k.endswith("_id")):
                yield v
            elif isinstance(v, (dict, list)):
                yield from _ids_in(v)
    elif isinstance(node, list):
        for item in node:
            yield from _ids_in(item)


def _passes(env: ActionMenu, tool: str, args: dict[str, Any]) -> bool:
    """Whether ending the episode now with this call would pass (tried on a fork of the episode)."""
    episode = env.unwrapped.episode  # type: ignore[attr-defined]
    twin = episode.fork()
    try:
        twin.step(tool, args)
        return bool(twin.verdict is not None and twin.verdict.passed)
    finally:
        twin.close()
