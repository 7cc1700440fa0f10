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

_LOOKAHEAD = 48
"""Reads tried on a fork, at most, per step of a demonstration."""


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
    reads_of = {t.name: t.kind == "read" and bool(t.params) for t in env.world.tools}
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
                    if reads_of.get(call.tool) and json.dumps([call.tool, call.args], default=str) not in opened
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


def demonstrate_team(
    env: Any, *, seed: int, limit: int = 24
) -> dict[str, list[tuple[np.ndarray, np.ndarray, int]]] | None:
    """Each seat's (features, mask, action) of a passing team demonstration of task ``seed``, or None.

    ``env`` is a :class:`~mirrorworld.envs.menu_pettingzoo.MenuParallel`. Each
    staff seat follows its share of the gold plan (:class:`~mirrorworld.sim.policies.GoldStaff`,
    reading the seat's own observations): when its next call is on its menu it
    takes that slot; when not yet (an id it has not been shown), it makes a read
    from its menu first, records the instruction or its inbox names first; with
    nothing to do it waits (action 0).
    """
    from mirrorworld.envs.pettingzoo import decode_text, to_role_observation
    from mirrorworld.run.multiagent import gold_team, make_policies
    from mirrorworld.sim import RoleContext

    inner = env.env
    features, infos = env.reset(seed=seed)
    task = inner.episode.task
    staff = make_policies(inner.world, gold_team(inner.world))
    for role in env.agents:
        staff[role].reset(RoleContext(inner.world, task, role, task.seed))
    pending: dict[str, Any] = {}
    opened: dict[str, set[str]] = {a: set() for a in env.agents}
    steps: dict[str, list[tuple[np.ndarray, np.ndarray, int]]] = {a: [] for a in env.possible_agents}
    for _ in range(limit):
        if not env.agents:
            break
        actions: dict[str, int] = {}
        for agent in env.agents:
            if pending.get(agent) is None:
                raw = env.raw_observations[agent]
                pending[agent] = staff[agent].act(to_role_observation(raw, agent, inner.tools(agent)))
            want = pending[agent]
            menu = env.menus[agent].calls
            action = 0
            if want is not None:
                spec = inner.world.tools_by_name.get(want.tool)
                free = frozenset(p.name for p in spec.params if p.free_text) if spec is not None else frozenset()
                hits = [i for i, c in enumerate(menu) if c.tool == want.tool and _same_args(c, want, free)]
                hit = max(hits, key=lambda i: _likeness(menu[i], want, free)) if hits else None
                if hit is not None:
                    action, pending[agent] = hit + 1, None
                else:
                    said = decode_text(env.raw_observations[agent]["observation"]["inbox"]) + task.instruction
                    reads = sorted(
                        (
                            i
                            for i, c in enumerate(menu)
                            if c.tool.startswith(("get_", "search_", "list_", "check_"))
                            and json.dumps([c.tool, c.args], default=str) not in opened[agent]
                        ),
                        key=lambda i: (
                            not any(str(v) in said for v in call_args(menu[i]).values()),
                            "query" in call_args(menu[i]),
                            i,
                        ),
                    )
                    if reads:
                        action = reads[0] + 1
                        opened[agent].add(json.dumps([menu[reads[0]].tool, menu[reads[0]].args], default=str))
            steps[agent].append((np.array(features[agent], copy=True), infos[agent]["action_mask"].copy(), action))
            actions[agent] = action
        features, _rewards, _terms, _truncs, infos = env.step(actions)
    verdict = inner.episode.verdict
    return steps if verdict is not None and verdict.passed else None


def _likeness(call: Any, want: Any, free: frozenset[str]) -> float:
    """How alike a menu call's free texts are to the gold call's (shared words over all words)."""
    mine, gold = call_args(call), call_args(want)
    score = 0.0
    for k in free & set(mine):
        a, b = set(str(mine[k]).casefold().split()), set(str(gold.get(k, "")).casefold().split())
        score += len(a & b) / max(len(a | b), 1)
    return score


def _same_args(call: Any, want: Any, free: frozenset[str]) -> bool:
    """Whether a menu call makes the gold call ``want``: the same arguments, a macro standing in for free text."""
    mine, gold = call_args(call), call_args(want)
    return set(mine) == {k for k, v in gold.items() if v is not None} and all(
        k in free or _same(mine[k], gold[k]) for k in mine
    )
