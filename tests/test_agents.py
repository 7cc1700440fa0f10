"""Agents: the scripted baselines, replay, and the OpenAI-compatible client against a local endpoint."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mirrorworld import make_world
from mirrorworld.agents import OpenAIAgent, ReplayAgent, make_agent
from mirrorworld.agents.endpoint import ScriptedEndpoint
from mirrorworld.envs.chat import ChatEnv
from mirrorworld.errors import AgentError, MirrorworldError, RegistryError
from mirrorworld.run import RunFile, run_episode, run_episodes, summarize

WORLD = make_world("helpdesk")


def _tasks(n: int) -> list[Any]:
    return [WORLD.task_for("test", i) for i in range(n)]


@pytest.fixture
def endpoint() -> Iterator[ScriptedEndpoint]:
    with ScriptedEndpoint(_tasks(9), record_bodies=True) as ep:
        yield ep


def test_openai_agent_solves_tasks_through_a_local_endpoint(endpoint: ScriptedEndpoint) -> None:
    agent = OpenAIAgent(base_url=endpoint.url, model="scripted", api_key="sk-test")
    records = run_episodes(WORLD, agent, episodes=9, split="test")
    assert [r.passed for r in records] == [True] * 9
    first = endpoint.requests[0]
    assert first["path"] == "/v1/chat/completions"
    assert first["auth"] == "Bearer sk-test"
    body = first["body"]
    assert body["model"] == "scripted"
    assert body["messages"][0]["role"] == "system" and "policy" in body["messages"][0]["content"].lower()
    assert {t["function"]["name"] for t in body["tools"]} == set(WORLD.tool_names)
    # Tool results are sent back as role=tool messages answering the call ids.
    later = endpoint.requests[1]["body"]["messages"]
    assert later[-1]["role"] == "tool" and later[-1]["tool_call_id"] == later[-2]["tool_calls"][0]["id"]


def test_the_scripted_model_tells_apart_tasks_that_open_alike() -> None:
    """triage/0 and triage/5 send the same instruction; a probe read tells them apart, so both pass."""
    alike = [WORLD.task("triage", 0), WORLD.task("triage", 5)]
    assert alike[0].instruction == alike[1].instruction and alike[0].gold != alike[1].gold
    with ScriptedEndpoint(alike, world=WORLD, faults={alike[1].id: "http500"}) as ep:
        assert list(ep.probes) == [alike[0].instruction]
        agent = OpenAIAgent(base_url=ep.url, model="scripted", api_key="k", retries=0)
        env = ChatEnv(WORLD)
        first = run_episode(env, agent, alike[0])
        assert first.passed and first.calls[0]["tool"] == "get_ticket"  # the probe, then the gold
        second = run_episode(env, agent, alike[1])
        assert second.errored and "HTTP 500" in str(second.error)  # the fault of the task the probe named
        ep.faults.clear()
        assert run_episode(env, agent, alike[1]).passed
    with ScriptedEndpoint(alike) as blind:  # without the world: the first of them is played
        agent = OpenAIAgent(base_url=blind.url, model="scripted", api_key="k", retries=0)
        assert not run_episode(env, agent, alike[1]).passed
    env.close()


def test_openai_agent_failure_is_an_errored_episode_not_a_crash() -> None:
    tasks = _tasks(1)
    with ScriptedEndpoint(tasks, faults={tasks[0].id: "http500"}) as ep:
        agent = OpenAIAgent(base_url=ep.url, model="scripted", retries=1)
        records = run_episodes(WORLD, agent, episodes=1, split="test")
    assert records[0].error is not None and "HTTP 500" in records[0].error
    assert not records[0].passed and records[0].score == 0.0
    assert len(ep.requests) == 2  # one retry
    assert summarize(records)["errors"] == 1


def test_openai_agent_unreachable_endpoint_raises_agent_error() -> None:
    agent = OpenAIAgent(base_url="http://127.0.0.1:9/v1", model="m", retries=0, timeout=2)
    with pytest.raises(AgentError, match="cannot reach"):
        agent.act([{"role": "user", "content": "hi"}], [])


def test_openai_agent_rejects_a_non_http_url() -> None:
    with pytest.raises(MirrorworldError, match="must start with http"):
        OpenAIAgent(base_url="ftp://example", model="m")


@pytest.mark.parametrize("name", ["noop", "refuse", "claim", "random"])
def test_null_agents_score_zero_on_every_family(name: str) -> None:
    n = len(WORLD.families) * 3
    records = run_episodes(WORLD, make_agent(name), episodes=n, split="test")
    assert {r.family for r in records} == {f.name for f in WORLD.families}
    assert all(r.score == 0.0 and r.reward == 0.0 for r in records), [r.task_id for r in records if r.score]


def test_oracle_passes_every_family_on_both_splits() -> None:
    for split in ("train", "test"):
        records = run_episodes(WORLD, make_agent("oracle"), episodes=len(WORLD.families) * 2, split=split)
        assert all(r.passed and r.reward == pytest.approx(1.0) for r in records)
        assert all(r.split == split for r in records)


def test_replay_agent_reproduces_a_recorded_run(tmp_path: Path) -> None:
    path = tmp_path / "run.sqlite"
    with RunFile.create(path, {"world": WORLD.id}) as run:
        original = run_episodes(WORLD, make_agent("oracle"), episodes=9, split="test", on_record=run.add)
    replayed = run_episodes(WORLD, ReplayAgent.from_run(path), episodes=9, split="test")
    assert [r.passed for r in replayed] == [r.passed for r in original] == [True] * 9
    assert [r.calls for r in replayed] == [r.calls for r in original]


def test_replay_agent_without_the_task_is_an_errored_episode() -> None:
    records = run_episodes(WORLD, ReplayAgent({}), episodes=1, split="test")
    assert records[0].error is not None and "no episode of task" in records[0].error


def test_random_agent_is_seeded() -> None:
    a = run_episodes(WORLD, make_agent("random", seed=3), episodes=4, split="train")
    b = run_episodes(WORLD, make_agent("random", seed=3), episodes=4, split="train")
    assert [r.messages for r in a] == [r.messages for r in b]


def test_make_agent_errors_are_clear() -> None:
    with pytest.raises(RegistryError, match="no agent named"):
        make_agent("nope")
    with pytest.raises(RegistryError, match="--replay"):
        make_agent("replay")
    with pytest.raises(RegistryError, match="--base-url"):
        make_agent("openai")
