"""The reward channel's invariants (``verify/process.py``), property-tested.

* with γ = 1 an episode's return is its score (1 passed, 0 failed), whatever its length and however it ends;
* with γ < 1 the discounted return is the discounted score;
* nothing is paid after the end;
* the step reward is no answer key: a right and a wrong value of a graded field pay the same;
* ``gym.make`` adds no outer ``TimeLimit``: the env's own ``max_steps`` ends the episode on the step that grades it.
"""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mirrorworld  # noqa: F401 - registers the Gymnasium ids
from mirrorworld import make_world
from mirrorworld.core.task import ToolCall
from mirrorworld.episodes import Episode, EpisodeOptions

WORLD = make_world("helpdesk")
FAMILIES = [f.name for f in WORLD.families]
JUNK = [
    ToolCall("get_policy", {}),
    ToolCall("search_customers", {"query": "Brown"}),
    ToolCall("no_such_tool", {}),
    ToolCall("get_order", "{not json"),
    ToolCall("get_ticket", {"ticket_id": 801}),
]


@st.composite
def episodes(draw: st.DrawFn) -> tuple[Any, list[ToolCall], EpisodeOptions, bool]:
    """A task, a sequence of calls mixing its gold with junk (dropped, repeated or reordered), options, finish."""
    task = WORLD.task(draw(st.sampled_from(FAMILIES)), draw(st.integers(0, 40)))
    pool = list(task.gold) + JUNK
    calls = draw(st.lists(st.sampled_from(pool), max_size=14))
    if draw(st.booleans()):
        calls = [*calls, *task.gold]  # often a full solution at the end
    options = EpisodeOptions(
        max_steps=draw(st.integers(1, 25)),
        reward="shaped",
        gamma=draw(st.sampled_from([1.0, 0.99, 0.9, 0.5])),
    )
    return task, calls, options, draw(st.booleans())


def _play(task: Any, calls: list[ToolCall], options: EpisodeOptions, finish: bool) -> tuple[list[float], Any]:
    rewards: list[float] = []
    with Episode(WORLD, task, options) as ep:
        for call in calls:
            out = ep.step(call.tool, call.args)
            if out.after_end:
                assert out.reward == 0.0 and out.verdict is None
                continue
            rewards.append(out.reward)
        if not ep.over:
            if not finish:
                rewards.append(0.0)  # an unended episode has its potential outstanding...
                before = ep.total_reward
                ep.finish()  # ...until it ends, however that happens
                rewards[-1] = ep.total_reward - before
            else:
                before = ep.total_reward
                ep.finish()
                rewards.append(ep.total_reward - before)
        assert ep.verdict is not None
        return rewards, ep.verdict


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(episodes())
def test_the_return_is_the_score_whatever_the_length_and_ending(case: Any) -> None:
    task, calls, options, finish = case
    rewards, verdict = _play(task, calls, options, finish)
    gamma = options.gamma
    discounted = sum(r * gamma**t for t, r in enumerate(rewards))
    assert discounted == pytest.approx(verdict.score * gamma ** (len(rewards) - 1), abs=1e-9)
    if gamma == 1.0:
        assert sum(rewards) == pytest.approx(1.0 if verdict.passed else 0.0, abs=1e-9)
    if not verdict.passed:
        assert discounted <= 1e-9


@pytest.mark.parametrize("family", ["triage", "refund_damaged", "cancel_order", "update_email"])
def test_a_graded_value_is_not_revealed_by_the_step_reward(family: str) -> None:
    """Every write of the gold, with each field swapped for another allowed value, pays what the gold call pays."""
    for seed in range(6):
        task = WORLD.task(family, seed)
        for i, call in enumerate(task.gold):
            spec = WORLD.tools_by_name[call.tool]
            if spec.kind != "write" or not isinstance(call.args, dict):
                continue
            for p in spec.params:
                choices = p.schema.get("enum")
                if not choices or p.name not in call.args:
                    continue
                paid = set()
                for value in choices:
                    with Episode(WORLD, task) as ep:
                        for prev in task.gold[:i]:
                            ep.step(prev.tool, prev.args)
                        out = ep.step(call.tool, {**call.args, p.name: value})
                        if out.ok:
                            paid.add(round(out.reward, 12))
                assert len(paid) <= 1, f"{task.id}: {call.tool}.{p.name} pays {paid}"


def test_the_registered_step_limit_is_the_envs_own() -> None:
    assert gym.spec("mirrorworld/Helpdesk-v0").max_episode_steps is None
    env = gym.make("mirrorworld/Helpdesk-v0", max_steps=3)
    assert not isinstance(env, gym.wrappers.TimeLimit)
    env.reset(seed=0)
    total, info, truncated = 0.0, {}, False
    for _ in range(3):
        _, reward, terminated, truncated, info = env.step({"tool_name": "get_policy", "tool_args": "{}"})
        total += float(reward)
    assert truncated and not terminated
    assert "verdict" in info and total == pytest.approx(info["verdict"]["score"])
    env.close()


def test_gamma_is_checked_and_reaches_the_shaping() -> None:
    from mirrorworld.errors import MirrorworldError

    for bad in (0.0, 1.5, True, "0.9"):
        with pytest.raises(MirrorworldError):
            EpisodeOptions(gamma=bad)  # type: ignore[arg-type]
    task = WORLD.task("refund_damaged", 0)
    with Episode(WORLD, task, EpisodeOptions(gamma=0.5)) as ep:
        assert ep.process.gamma == 0.5
        rewards = [ep.step(c.tool, c.args).reward for c in task.gold]
    assert sum(r * 0.5**t for t, r in enumerate(rewards)) == pytest.approx(0.5 ** (len(rewards) - 1))


def test_opening_the_right_records_is_paid_and_taken_back() -> None:
    task = WORLD.task("refund_damaged", 0)
    (kind, ident) = task.targets[0]
    tool = {"order": "get_order", "ticket": "get_ticket", "customer": "get_customer"}[kind]
    with Episode(WORLD, task) as ep:
        first = ep.step(tool, json.dumps({f"{kind}_id": ident}))
        again = ep.step(tool, json.dumps({f"{kind}_id": ident}))
        assert first.ok and first.reward > 0 and again.reward == 0.0
        verdict = ep.finish()
        assert ep.total_reward == pytest.approx(verdict.score)


@pytest.mark.parametrize("family", ["refund_with_approval", "update_email", "triage"])
def test_a_fork_keeps_the_potential_of_its_parent(family: str) -> None:
    """A fork taken mid-episode (after progress was paid) still returns exactly the score, as does its parent."""
    task = WORLD.task(family, 1)
    *work, last = task.gold
    with Episode(WORLD, task) as ep:
        rewards = [ep.step(c.tool, c.args).reward for c in work]
        assert any(r > 0 for r in rewards)  # progress was paid before the fork
        copy = ep.fork()
        try:
            end = copy.step(last.tool, last.args)
            assert end.verdict is not None and end.verdict.passed
            assert sum(rewards) + end.reward == pytest.approx(1.0)
            assert copy.total_reward == pytest.approx(1.0)
        finally:
            copy.close()
        assert ep.step(last.tool, last.args).verdict is not None and ep.total_reward == pytest.approx(1.0)
