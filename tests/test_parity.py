"""Parity: one action sequence, stepped past termination and past ``max_steps``, through every adapter.

Each adapter is a thin encoding of the episode's ``StepOutcome``, so the same
calls give the same tool results, rewards, flags, verdicts and state hashes
through ``MirrorEnv``, ``ChatEnv``, the server over HTTP and WebSocket,
``RemoteMirrorEnv``, the TRL factory and (for a world with seats) the
PettingZoo environments. After the end every adapter answers a call with
``episode_over``, pays 0, keeps its flags and changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from mirrorworld import make_world
from mirrorworld.core.seats import seats_of
from mirrorworld.core.task import ToolCall
from mirrorworld.envs.chat import ChatEnv
from mirrorworld.envs.gymnasium import MirrorEnv


@dataclass(frozen=True)
class Row:
    """What one step looked like through one adapter (None: the adapter does not expose it)."""

    content: str
    reward: float | None
    terminated: bool | None
    truncated: bool | None
    score: float | None
    state_hash: str


Driver = Callable[[str, str, int, list[ToolCall]], list[Row]]


def _args(call: ToolCall) -> Any:
    return call.args if isinstance(call.args, str) else json.dumps(call.args)


def gym_driver(world: str, task_id: str, max_steps: int, calls: list[ToolCall]) -> list[Row]:
    env = MirrorEnv(world, max_steps=max_steps)
    env.reset(options={"task_id": task_id})
    rows = []
    for call in calls:
        obs, reward, terminated, truncated, info = env.step({"tool_name": call.tool, "tool_args": _args(call)})
        score = info["verdict"]["score"] if "verdict" in info else None
        rows.append(Row(obs["last_result"], float(reward), terminated, truncated, score, env.state_hash()))
    env.close()
    return rows


def chat_driver(world: str, task_id: str, max_steps: int, calls: list[ToolCall]) -> list[Row]:
    env = ChatEnv(world, max_steps=max_steps)
    env.reset(task_id=task_id)
    rows = []
    for i, call in enumerate(calls):
        tool_call = {"id": f"c{i}", "type": "function", "function": {"name": call.tool, "arguments": _args(call)}}
        (reply,) = env.step({"role": "assistant", "content": None, "tool_calls": [tool_call]})
        out = env.last_outcome
        assert out is not None and env.episode is not None
        score = out.verdict.score if out.verdict is not None else None
        rows.append(
            Row(reply["content"], out.reward, out.terminated, out.truncated, score, env.episode.session.state_hash())
        )
    env.close()
    return rows


def trl_driver(world: str, task_id: str, max_steps: int, calls: list[ToolCall]) -> list[Row]:
    from mirrorworld.integrations.trl import environment_factory

    env = environment_factory(world, max_steps=max_steps)()
    env.reset(task_id=task_id)
    backend: Any = env._backend
    rows = []
    for call in calls:
        assert isinstance(call.args, dict)
        method = getattr(env, call.tool, None)
        was_over = backend.episode.over
        content = method(**call.args) if method is not None else env._call(call.tool, call.args)
        ep = backend.episode
        score = ep.verdict.score if ep.over and not was_over else None
        rows.append(Row(content, None, ep.terminated, ep.truncated, score, ep.session.state_hash()))
    final = env.get_reward()
    assert final == backend.episode.verdict.score
    env._close()
    return rows


def _server_driver(transport: str) -> Driver:
    def drive(world: str, task_id: str, max_steps: int, calls: list[ToolCall]) -> list[Row]:
        from mirrorworld.client import Client

        with Client(SERVER["url"], transport=transport) as client:  # type: ignore[arg-type]
            s = client.create(world, task_id=task_id, max_steps=max_steps)
            rows = []
            for call in calls:
                r = s.step(call.tool, call.args)
                score = float(r.verdict["score"]) if r.verdict is not None else None
                rows.append(Row(r.content, r.reward, r.terminated, r.truncated, score, s.state_hash()))
            s.close()
        return rows

    return drive


def _remote_env_driver(transport: str) -> Driver:
    def drive(world: str, task_id: str, max_steps: int, calls: list[ToolCall]) -> list[Row]:
        from mirrorworld.envs.remote import RemoteMirrorEnv

        env = RemoteMirrorEnv(SERVER["url"], world=world, max_steps=max_steps, transport=transport)  # type: ignore[arg-type]
        env.reset(options={"task_id": task_id})
        rows = []
        for call in calls:
            obs, reward, terminated, truncated, info = env.step({"tool_name": call.tool, "tool_args": _args(call)})
            score = info["verdict"]["score"] if "verdict" in info else None
            rows.append(Row(obs["last_result"], float(reward), terminated, truncated, score, env.state_hash()))
        env.close()
        return rows

    return drive


SERVER: dict[str, str] = {}


@pytest.fixture(scope="module", autouse=True)
def server() -> Iterator[None]:
    pytest.importorskip("fastapi")
    pytest.importorskip("websockets")
    from mirrorworld.server import BackgroundServer, ServerConfig

    with BackgroundServer(ServerConfig(access_log=False)) as s:
        SERVER["url"] = s.url
        yield
    SERVER.clear()


DRIVERS: dict[str, Driver] = {
    "chat": chat_driver,
    "trl": trl_driver,
    "http": _server_driver("http"),
    "ws": _server_driver("ws"),
    "remote-ws": _remote_env_driver("ws"),
    "remote-http": _remote_env_driver("http"),
}


def _past_termination(world_name: str, task_id: str) -> tuple[int, list[ToolCall]]:
    """The gold solution, then a write and a read after the terminal call."""
    task = make_world(world_name).task_at(task_id)
    gold = list(task.gold)
    writes = [c for c in gold if make_world(world_name).tools_by_name[c.tool].kind == "write"]
    extra = [writes[0] if writes else gold[0], ToolCall("get_policy", {})]
    return 40, [*gold, *extra]


def _past_max_steps(world_name: str, task_id: str) -> tuple[int, list[ToolCall]]:
    """A budget of 4 calls: a read, an unknown tool, a gold call, a read (the end), then the rest of the gold."""
    gold = make_world(world_name).task_at(task_id).gold
    return 4, [ToolCall("get_policy", {}), ToolCall("no_such_tool", {}), gold[0], ToolCall("get_policy", {}), *gold[1:]]


def _compare(reference: list[Row], other: list[Row], name: str) -> None:
    assert len(reference) == len(other), name
    for i, (a, b) in enumerate(zip(reference, other, strict=True)):
        where = f"{name}, call {i}"
        assert a.content == b.content, where
        assert a.state_hash == b.state_hash, where
        for field in ("reward", "terminated", "truncated", "score"):
            theirs = getattr(b, field)
            if theirs is not None or field == "score":
                assert (
                    getattr(a, field) == pytest.approx(theirs) if field == "reward" else getattr(a, field) == theirs
                ), f"{where}: {field}"


def _check_the_end(rows: list[Row]) -> None:
    """The reference trace itself: one verdict, then episode_over with reward 0 and frozen state."""
    ended = [i for i, r in enumerate(rows) if r.terminated or r.truncated]
    assert ended, "the sequence must end the episode"
    end = ended[0]
    assert rows[end].score is not None
    assert [r.score for r in rows if r.score is not None] == [rows[end].score]
    for r in rows[end + 1 :]:
        assert json.loads(r.content)["error"]["code"] == "episode_over"
        assert r.reward == 0.0 and r.score is None
        assert (r.terminated, r.truncated) == (rows[end].terminated, rows[end].truncated)
        assert r.state_hash == rows[end].state_hash


CASES = [
    ("helpdesk", "refund_damaged/0", _past_termination),
    ("helpdesk", "cancel_order/3", _past_max_steps),
    ("sales", None, _past_termination),
    ("sales", None, _past_max_steps),
]


@pytest.mark.parametrize(("world_name", "task_id", "plan"), CASES)
def test_every_adapter_agrees_with_the_gymnasium_env(world_name: str, task_id: str | None, plan: Any) -> None:
    world = make_world(world_name)
    if task_id is None:
        task_id = world.task_for("train", 0).id
    max_steps, calls = plan(world_name, task_id)
    reference = gym_driver(world_name, task_id, max_steps, calls)
    _check_the_end(reference)
    if plan is _past_max_steps:
        assert reference[3].truncated and not reference[3].terminated
    else:
        assert reference[len(world.task_at(task_id).gold) - 1].terminated
    for name, drive in DRIVERS.items():
        _compare(reference, drive(world_name, task_id, max_steps, calls), name)


# -- a world with seats: the PettingZoo environments join the comparison -------------------------------


def _team_plan(task_id: str) -> tuple[list[str], list[ToolCall]]:
    task = make_world("helpdesk_team").task_at(task_id)
    roles = [entry["role"] for entry in task.hidden["plan"]]
    return roles, list(task.gold)


def parallel_driver(task_id: str, max_steps: int, calls: list[tuple[str, ToolCall]]) -> list[Row]:
    pytest.importorskip("pettingzoo")
    from mirrorworld.envs.pettingzoo import decode_text, env_module

    env = env_module("helpdesk_team").parallel_env(max_cycles=1000, max_steps=max_steps)
    env.reset(options={"task_id": task_id})
    ep = env.episode
    assert ep is not None
    rows = []
    for role, call in calls:
        if not env.agents:  # PettingZoo removes every agent at the end: the episode itself answers
            result = ep.act(role, call.tool, call.args)
            assert result is not None
            rows.append(Row(result.content(), 0.0, ep.terminated, ep.truncated, None, ep.session.state_hash()))
            continue
        tools = env.tools(role)
        action = {"tool": tools.index(call.tool) + 1, "args": _args(call)}
        obs, rewards, terms, truncs, infos = env.step({role: action})
        score = infos[role]["verdict"]["score"] if "verdict" in infos[role] else None
        content = decode_text(obs[role]["observation"]["last_result"])
        rows.append(Row(content, rewards[role], terms[role], truncs[role], score, ep.session.state_hash()))
    env.close()
    return rows


def aec_driver(task_id: str, max_steps: int, calls: list[tuple[str, ToolCall]]) -> list[Row]:
    pytest.importorskip("pettingzoo")
    from mirrorworld.envs.pettingzoo import decode_text, env_module

    env = env_module("helpdesk_team").raw_env(max_cycles=1000, max_steps=max_steps)
    env.reset(options={"task_id": task_id})
    ep = env.episode
    assert ep is not None
    rows = []
    for role, call in calls:
        if ep.over:
            result = ep.act(role, call.tool, call.args)
            assert result is not None
            rows.append(Row(result.content(), 0.0, ep.terminated, ep.truncated, None, ep.session.state_hash()))
            continue
        while env.agent_selection != role:
            env.step(None)  # the other seats wait
        tools = env.tools(role)
        env.step({"tool": tools.index(call.tool) + 1, "args": _args(call)})
        info = env.infos[role]
        score = info["verdict"]["score"] if "verdict" in info else None
        content = decode_text(env.observe(role)["observation"]["last_result"])
        rows.append(
            Row(
                content,
                env.rewards[role],
                env.terminations[role],
                env.truncations[role],
                score,
                ep.session.state_hash(),
            )
        )
    env.close()
    return rows


@pytest.mark.parametrize("budget", ["past_termination", "past_max_steps"])
def test_the_pettingzoo_envs_agree_on_a_world_with_seats(budget: str) -> None:
    world = make_world("helpdesk_team")
    seats = seats_of(world)
    # A contact the staff finish alone (tier 1, then tier 2 after a transfer): played by one agent, nobody's
    # part is simulated by the world, so one agent and the seats make the same calls in the same order.
    task_id = next(
        t.id
        for t in (world.task(f.name, 1) for f in world.families)
        if len(t.gold) >= 4 and all(role in seats.solo_roles for role, _, _ in seats.team_plan(t))
    )
    roles, gold = _team_plan(task_id)
    if budget == "past_termination":
        max_steps = 200
        extra = [(roles[0], gold[0]), (roles[-1], gold[-1])]
        plan = [*zip(roles, gold, strict=True), *extra]
    else:
        max_steps = 3
        plan = list(zip(roles, gold, strict=True))
    calls = [c for _, c in plan]
    reference = gym_driver("helpdesk_team", task_id, max_steps, calls)
    _check_the_end(reference)
    for name, drive in {"parallel": parallel_driver, "aec": aec_driver}.items():
        _compare(reference, drive(task_id, max_steps, plan), name)
    for name in ("chat", "http", "ws"):
        _compare(reference, DRIVERS[name]("helpdesk_team", task_id, max_steps, calls), name)
