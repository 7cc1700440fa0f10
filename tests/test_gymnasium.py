"""The Gymnasium adapter: ``check_env`` over every registered environment, and
the episode contract (termination, truncation, rewards, verdict in ``info``)."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import mirrorworld  # noqa: F401 - registers the environments
from mirrorworld.core.task import Task
from mirrorworld.envs.gymnasium import CHARSET, MAX_TEXT, MirrorEnv
from mirrorworld.errors import MirrorworldError
from mirrorworld.worlds.helpdesk import HelpdeskWorld

ENV_IDS = sorted(k for k in gym.registry if k.startswith("mirrorworld/"))


def test_the_reference_environment_is_registered() -> None:
    assert "mirrorworld/Helpdesk-v0" in ENV_IDS


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_check_env(env_id: str) -> None:
    env = gym.make(env_id)
    try:
        check_env(env.unwrapped)
    finally:
        env.close()


def _step(env: MirrorEnv, tool: str, args: Any) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
    obs, reward, terminated, truncated, info = env.step({"tool_name": tool, "tool_args": json.dumps(args)})
    assert env.observation_space.contains(obs)
    return obs, float(reward), terminated, truncated, info


def _play(env: MirrorEnv, task: Task, calls: list[tuple[str, Any]]) -> tuple[list[float], dict[str, Any], bool]:
    obs, _ = env.reset(options={"task": task})
    assert env.observation_space.contains(obs)
    rewards = []
    info: dict[str, Any] = {}
    terminated = False
    for tool, args in calls:
        _, reward, terminated, truncated, info = _step(env, tool, args)
        rewards.append(reward)
        if terminated or truncated:
            break
    return rewards, info, terminated


@pytest.fixture
def env(helpdesk: HelpdeskWorld) -> Any:
    e = MirrorEnv(helpdesk)
    yield e
    e.close()


def _gold(task: Task) -> list[tuple[str, Any]]:
    return [(c.tool, c.args) for c in task.gold]


def test_gold_episode_terminates_with_a_passing_verdict(env: MirrorEnv, helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("refund_with_approval", 2)
    rewards, info, terminated = _play(env, task, _gold(task))
    assert terminated and len(rewards) == len(task.gold)
    assert info["verdict"]["passed"] is True and info["verdict"]["score"] == 1.0
    assert sum(rewards) == pytest.approx(1.0)  # shaping terms sum to zero; the return is the score
    obs = env._obs
    assert obs is not None and not obs["tool_mask"].any() and int(obs["step"]) == len(task.gold)


def test_shaping_cannot_be_farmed(env: MirrorEnv, helpdesk: HelpdeskWorld) -> None:
    """Undo-and-redo earns nothing, trying values is no answer key: the return is still the score."""
    task = helpdesk.task("triage", 6)
    *work, respond = _gold(task)
    tool, args = next((t, a) for t, a in work if t == "set_priority" and a["priority"] != "urgent")
    flip = [("set_priority", {**args, "priority": "urgent"}), (tool, args)] * 3
    rewards, info, _ = _play(env, task, [*work, *flip, respond])
    assert info["verdict"]["passed"] is True
    assert sum(rewards) == pytest.approx(1.0)
    assert rewards[len(work) : len(work) + len(flip)] == [0.0] * len(flip)  # a right or wrong value pays nothing
    assert any(0 < r < 1 for r in rewards)  # opening the tickets was paid, and taken back at the end


def test_a_failed_episode_returns_zero(env: MirrorEnv, helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("triage", 6)
    *work, respond = _gold(task)
    rewards, info, terminated = _play(env, task, [*work[:4], respond])
    assert terminated and info["verdict"]["passed"] is False
    assert sum(rewards) == pytest.approx(0.0)


def test_sparse_reward_pays_the_score_only_at_the_end(helpdesk: HelpdeskWorld) -> None:
    env = MirrorEnv(helpdesk, reward="sparse")
    task = helpdesk.task("cancel_order", 3)
    rewards, _, _ = _play(env, task, _gold(task))
    assert rewards == [0.0] * (len(rewards) - 1) + [1.0]
    env.close()


def test_truncation_at_max_steps(helpdesk: HelpdeskWorld) -> None:
    env = MirrorEnv(helpdesk, max_steps=3)
    task = helpdesk.task("cancel_order", 3)
    env.reset(options={"task": task})
    outcomes = [_step(env, "get_policy", {})[2:] for _ in range(3)]
    assert [o[:2] for o in outcomes] == [(False, False), (False, False), (False, True)]
    assert outcomes[-1][2]["verdict"]["passed"] is False
    assert "verdict" not in outcomes[0][2]
    env.close()


def test_actions_by_index_and_by_name_are_equivalent(env: MirrorEnv, helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("cancel_order", 3)
    oid = task.targets[0][1]
    env.reset(options={"task": task})
    by_name = env.step({"tool_name": "get_order", "tool_args": json.dumps({"order_id": oid})})[0]["last_result"]
    by_index = env.step({"tool_name": np.int64(env.tool_names.index("get_order")), "tool_args": {"order_id": oid}})
    assert by_index[0]["last_result"] == by_name and by_index[4]["tool"] == "get_order"


def test_errors_are_observations(env: MirrorEnv, helpdesk: HelpdeskWorld) -> None:
    env.reset(seed=1)
    before = env.state_hash()
    for action in [{"tool_name": 999, "tool_args": "{}"}, {"tool_name": "get_order", "tool_args": "{"}, "junk"]:
        obs, _, terminated, truncated, info = env.step(action)  # type: ignore[arg-type]
        assert not info["ok"] and json.loads(obs["last_result"]) == {"error": info["error"]}
        assert not terminated and not truncated
    assert env.state_hash() == before


def test_observations_are_printable_ascii_and_bounded(env: MirrorEnv, helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("cancel_order", 3)
    tid = task.scope[0][1]
    env.reset(options={"task": task})
    for _ in range(5):
        assert _step(env, "reply_ticket", {"ticket_id": tid, "body": "ünïcødé ✓ " + "y" * 3900})[4]["ok"]
    obs = _step(env, "get_ticket", {"ticket_id": tid})[0]
    assert len(obs["last_result"]) == MAX_TEXT and obs["last_result"].endswith("[truncated]")
    assert all(set(obs[k]) <= CHARSET for k in ("instruction", "view", "records", "last_result"))
    assert "\\u00fcn\\u00efc\\u00f8d\\u00e9" in obs["last_result"]  # JSON escapes, not replacement characters
    assert f"ticket:{tid}" in obs["records"]


def test_reset_options_pick_the_task(env: MirrorEnv, helpdesk: HelpdeskWorld) -> None:
    _, info = env.reset(options={"task_id": "merge_duplicates/4"})
    assert info["task_id"] == "merge_duplicates/4" and env.episode is not None
    assert env.episode.task == helpdesk.task("merge_duplicates", 4)
    task = helpdesk.task("kb_answer", 7)
    obs, info = env.reset(options={"task": task})
    assert info == {"task_id": "kb_answer/7", "family": "kb_answer", "split": "train"}
    assert obs["instruction"] == task.instruction.encode("ascii", "replace").decode()
    with pytest.raises(MirrorworldError):
        env.reset(options={"task": "kb_answer/7"})


def test_splits_never_share_tasks(helpdesk: HelpdeskWorld) -> None:
    train, test = MirrorEnv(helpdesk, split="train"), MirrorEnv(helpdesk, split="test")
    train_ids = {train.reset(seed=i)[1]["task_id"] for i in range(40)}
    test_ids = {test.reset(seed=i)[1]["task_id"] for i in range(40)}
    assert not train_ids & test_ids
    assert {t.split("/")[0] for t in train_ids} == {f.name for f in helpdesk.families}
    train.close()
    test.close()


def test_render_and_misuse(helpdesk: HelpdeskWorld) -> None:
    env = MirrorEnv(helpdesk, render_mode="ansi")
    with pytest.raises(MirrorworldError):
        env.step({"tool_name": 0, "tool_args": "{}"})
    with pytest.raises(MirrorworldError):
        env.state_hash()
    env.reset(seed=0)
    env.step({"tool_name": "list_teams", "tool_args": ""})
    text = env.render()
    assert isinstance(text, str) and text.startswith("[step 1]") and "Escalations" in text
    env.close()
    with pytest.raises(MirrorworldError):
        MirrorEnv(helpdesk, split="validation")  # type: ignore[arg-type]
    with pytest.raises(MirrorworldError):
        MirrorEnv(helpdesk, reward="dense")  # type: ignore[arg-type]
