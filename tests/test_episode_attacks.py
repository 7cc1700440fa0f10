"""Attacks on the one end (invariant 7) and on failure boundaries (invariant 8), through every adapter.

After an episode ends every call through every adapter gets ``episode_over``,
reward 0.0, no state change, no new verdict and unchanged flags; a crashing
tool is a world failure (a ``WorldError``, a 500 naming the world), never an
agent-visible tool error and never a partial write; every task an adapter
starts can be named again by its id, and no adapter parses task ids more
loosely than :class:`~mirrorworld.core.task.TaskRef`.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import pickle
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from mirrorworld import make_world
from mirrorworld.core.registry import Registry, WorldSpec, default
from mirrorworld.core.task import MAX_SEED, Task, TaskRef
from mirrorworld.core.world import World
from mirrorworld.envs.chat import ChatEnv
from mirrorworld.envs.gymnasium import MirrorEnv
from mirrorworld.episodes import EPISODE_OVER, Episode, TeamEpisode, select_task
from mirrorworld.errors import MirrorworldError, RegistryError, TaskRefError, WorldError, boundary_of
from mirrorworld.worlds.helpdesk import HelpdeskWorld

TASK_ID = "refund_damaged/0"


def _json(args: Any) -> str:
    return args if isinstance(args, str) else json.dumps(args)


def _names_again(world: World, task: Task) -> bool:
    """Whether ``task.id`` is a task id that names ``task`` again."""
    try:
        return world.task_at(task.id).digest() == task.digest()
    except MirrorworldError:
        return False


def _frozen(ep: Episode) -> tuple[Any, ...]:
    """Everything a call after the end must leave as it is."""
    s = ep.session
    return (
        s.state_hash(),
        s.changes(),
        s.steps,
        len(s.events),
        s.final_message,
        ep.total_reward,
        ep.terminated,
        ep.truncated,
        ep.verdict,
    )


# -- the episode layer ------------------------------------------------------------------------------


def test_a_terminal_call_on_the_last_step_terminates_and_does_not_truncate(helpdesk: HelpdeskWorld) -> None:
    """The terminal call that uses up the budget terminates the episode (not truncates) and pays the score once."""
    task = helpdesk.task_at(TASK_ID)
    env = MirrorEnv(helpdesk, max_steps=len(task.gold))
    env.reset(options={"task": task})
    total = 0.0
    for call in task.gold:
        _, reward, terminated, truncated, info = env.step({"tool_name": call.tool, "tool_args": _json(call.args)})
        total += float(reward)
    assert (terminated, truncated) == (True, False) and info["verdict"]["score"] == 1.0
    assert total == pytest.approx(1.0)


def test_a_refused_terminal_call_on_the_last_step_truncates_and_a_retry_changes_nothing(
    helpdesk: HelpdeskWorld,
) -> None:
    """A terminal call refused on the last step truncates the episode; the corrected retry is episode_over."""
    task = helpdesk.task_at(TASK_ID)
    *work, last = task.gold
    env = MirrorEnv(helpdesk, max_steps=len(task.gold))
    env.reset(options={"task": task})
    total = 0.0
    for call in work:
        total += float(env.step({"tool_name": call.tool, "tool_args": _json(call.args)})[1])
    _, reward, terminated, truncated, info = env.step({"tool_name": last.tool, "tool_args": '{"message": " "}'})
    total += float(reward)
    assert (terminated, truncated) == (False, True) and not info["ok"] and "verdict" in info
    assert total == pytest.approx(info["verdict"]["score"])
    ep = env.episode
    assert ep is not None
    before = _frozen(ep)
    obs, reward, terminated, truncated, info = env.step({"tool_name": last.tool, "tool_args": _json(last.args)})
    assert json.loads(obs["last_result"]) == {"error": EPISODE_OVER} and "verdict" not in info
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert _frozen(ep) == before and ep.session.final_message is None


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("<the gold write>", None),
        ("get_policy", {}),
        ("no_such_tool", {}),
        ("get_order", "{not json"),
        ("respond", {"message": "Refunded $35.99 again."}),
        (None, None),
        ("x" * 10_000, {"a": "b" * 10_000}),
    ],
)
def test_after_the_end_every_kind_of_call_changes_nothing(helpdesk: HelpdeskWorld, tool: Any, args: Any) -> None:
    """After termination any call (write, read, unknown, malformed, terminal, junk) is episode_over, changes nothing."""
    task = helpdesk.task_at(TASK_ID)
    with Episode(helpdesk, task) as ep:
        for call in task.gold:
            end = ep.step(call.tool, call.args)
        assert end.terminated and end.verdict is not None
        if tool == "<the gold write>":
            tool, args = task.gold[0].tool, task.gold[0].args
        before = _frozen(ep)
        late = ep.step(tool, args)
        assert late.after_end and late.error == EPISODE_OVER and late.reward == 0.0 and late.verdict is None
        assert (late.terminated, late.truncated) == (True, False) and late.done
        assert _frozen(ep) == before
        assert ep.finish() is end.verdict and ep.total_reward == before[5]


def test_a_fork_of_an_ended_episode_pays_and_writes_nothing(helpdesk: HelpdeskWorld) -> None:
    """A fork of an ended episode is ended too: its calls are episode_over, pay 0 and write nothing."""
    task = helpdesk.task_at(TASK_ID)
    with Episode(helpdesk, task) as ep:
        for call in task.gold:
            ep.step(call.tool, call.args)
        copy = ep.fork()
        try:
            assert copy.over and copy.verdict is ep.verdict
            before = _frozen(copy)
            for call in task.gold:
                late = copy.step(call.tool, call.args)
                assert late.after_end and late.reward == 0.0 and late.verdict is None
            assert _frozen(copy) == before and copy.finish() is ep.verdict
            assert copy.session.state_hash() == ep.session.state_hash()
        finally:
            copy.close()


def test_a_fork_of_a_truncated_episode_stays_truncated(helpdesk: HelpdeskWorld) -> None:
    """A fork of an episode cut short by finish() keeps its flags and refuses every call."""
    task = helpdesk.task_at(TASK_ID)
    with Episode(helpdesk, task) as ep:
        ep.step("get_policy", {})
        verdict = ep.finish()
        copy = ep.fork()
        try:
            assert (copy.terminated, copy.truncated) == (False, True)
            late = copy.step(task.gold[0].tool, task.gold[0].args)
            assert late.after_end and (late.terminated, late.truncated) == (False, True) and late.reward == 0.0
            assert copy.session.changes() == ep.session.changes() and copy.finish() is verdict
        finally:
            copy.close()


def test_a_crashed_tool_leaves_no_trace_in_the_observation(faulty_helpdesk: HelpdeskWorld) -> None:
    """A tool that crashes after putting a record on screen is rolled back whole: screen, records and state."""
    task = faulty_helpdesk.task_at(TASK_ID)
    env = MirrorEnv(faulty_helpdesk)
    env.reset(options={"task": task})
    ep = env.episode
    assert ep is not None
    hash_before = env.state_hash()
    with pytest.raises(WorldError):
        env.step({"tool_name": "refund_then_crash", "tool_args": json.dumps({"order_id": task.targets[0][1]})})
    assert ep.failure is not None and ep.failure.boundary == "world"
    assert env.state_hash() == hash_before and ep.session.changes() == [] and ep.session.final_message is None
    obs, reward, _, _, info = env.step({"tool_name": "get_policy", "tool_args": "{}"})
    assert info["error"] == EPISODE_OVER and reward == 0.0
    assert (ep.session.view, ep.session.viewed) == ("", ())
    assert (obs["view"], obs["records"]) == ("", "")


def test_a_gym_reset_mid_episode_starts_afresh_and_retires_the_old_episode(helpdesk: HelpdeskWorld) -> None:
    """reset() mid-episode closes the old episode and starts a fresh one: step 0, no reward, the pristine state."""
    task = helpdesk.task_at(TASK_ID)
    env = MirrorEnv(helpdesk)
    env.reset(options={"task": task})
    pristine = env.state_hash()
    env.step({"tool_name": task.gold[0].tool, "tool_args": _json(task.gold[0].args)})
    old = env.episode
    assert old is not None and env.state_hash() != pristine
    obs, _ = env.reset(options={"task": task})
    assert old.session.closed and env.episode is not old
    assert env.state_hash() == pristine and int(obs["step"]) == 0 and obs["tool_mask"].all()
    total = sum(float(env.step({"tool_name": c.tool, "tool_args": _json(c.args)})[1]) for c in task.gold)
    assert total == pytest.approx(1.0)


def test_a_chat_final_message_on_the_last_step_terminates(helpdesk: HelpdeskWorld) -> None:
    """ChatEnv: a reply without tool calls on the last step is the final message: terminated, graded once."""
    task = helpdesk.task_at(TASK_ID)
    *work, last = task.gold
    env = ChatEnv(helpdesk, max_steps=len(task.gold))
    env.reset(task=task)
    for i, call in enumerate(work):
        fn = {"name": call.tool, "arguments": _json(call.args)}
        env.step(
            {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}", "type": "function", "function": fn}]}
        )
    assert isinstance(last.args, dict)
    env.step({"role": "assistant", "content": last.args["message"]})
    ep, out = env.episode, env.last_outcome
    assert ep is not None and out is not None and out.verdict is not None and out.verdict.passed
    assert (ep.terminated, ep.truncated) == (True, False) and env.reward == pytest.approx(1.0)
    before = _frozen(ep)
    assert env.verdict() is out.verdict and _frozen(ep) == before
    env.close()


# -- naming tasks -----------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [-1, True, MAX_SEED + 1, "3"], ids=["negative", "bool", "huge", "text"])
def test_a_task_ref_built_directly_is_checked_like_a_parsed_one(helpdesk: HelpdeskWorld, seed: Any) -> None:
    """A TaskRef object is held to the rules TaskRef.parse applies to text (the seed an int in [0, MAX_SEED])."""
    env = MirrorEnv(helpdesk)
    with pytest.raises(TaskRefError):
        env.reset(options={"task_id": TaskRef("refund_damaged", seed)})
    with pytest.raises(TaskRefError):
        helpdesk.task_at(TaskRef("refund_damaged", seed))


def test_select_task_bounds_a_family_seed_like_a_task_id(helpdesk: HelpdeskWorld) -> None:
    """family + seed names no task a task id could not name (seed at most MAX_SEED)."""
    assert select_task(helpdesk, family="refund_damaged", seed=MAX_SEED).id == f"refund_damaged/{MAX_SEED}"
    with pytest.raises(MirrorworldError):
        select_task(helpdesk, family="refund_damaged", seed=MAX_SEED + 1)


def test_every_task_a_seeded_reset_starts_can_be_named_again(helpdesk: HelpdeskWorld) -> None:
    """A gym reset with an int32 seed either refuses it or starts a task whose id names it again."""
    env = MirrorEnv(helpdesk, families=["refund_damaged"])
    try:
        env.reset(seed=MAX_SEED - 1)
    except MirrorworldError:
        return
    assert env.episode is not None
    assert _names_again(helpdesk, env.episode.task), env.episode.task.id


@pytest.mark.parametrize(
    "task_id",
    [
        "../3",
        "refund_damaged/../3",
        "refund_damaged/3\x00",
        "refund_damaged/٣",
        "refund_damaged/99999999999",
        "",
        3,
        b"refund_damaged/3",
        "refund_damaged/-0",
    ],
)
def test_hostile_task_ids_are_refused_by_the_gym_env(helpdesk: HelpdeskWorld, task_id: Any) -> None:
    """options={'task_id': ...} goes through TaskRef.parse: anything but family/seed is a MirrorworldError."""
    env = MirrorEnv(helpdesk)
    with pytest.raises(MirrorworldError):
        env.reset(options={"task_id": task_id})


@pytest.mark.parametrize(
    "row",
    [
        {"family": "refund_damaged", "seed": "٣"},
        {"index": "٣"},
        {"family": "refund_damaged", "seed": 3.7},
        {"family": "refund_damaged"},
        {"family": "refund_damaged", "seed": None},
        {"family": "refund_damaged", "seed": "abc"},
        {"index": float("nan")},
        {"index": 10**30},
        {"family": "refund_damaged", "seed": 2**40},
    ],
    ids=[
        "unicode-seed",
        "unicode-index",
        "float-seed",
        "no-seed",
        "null-seed",
        "text-seed",
        "nan-index",
        "huge-index",
        "huge-seed",
    ],
)
def test_trl_rows_name_tasks_as_strictly_as_task_ids(row: dict[str, Any]) -> None:
    """A TRL dataset row that names no valid task is refused with a MirrorworldError (never coerced, never a crash)."""
    from mirrorworld.integrations.trl import environment_factory

    env = environment_factory("helpdesk")()
    try:
        with pytest.raises(MirrorworldError):
            env.reset(**row)
    finally:
        env._close()


def test_trl_after_the_end_pays_and_writes_nothing(helpdesk: HelpdeskWorld) -> None:
    """TRL: tool methods after respond are episode_over, change nothing, and get_reward stays the verdict's score."""
    from mirrorworld.integrations.trl import environment_factory

    task = helpdesk.task_at(TASK_ID)
    env: Any = environment_factory(helpdesk)()
    try:
        env.reset(task_id=TASK_ID)
        for call in task.gold:
            getattr(env, call.tool)(**call.args)
        ep = env._backend.episode
        score = env.get_reward()
        assert score == 1.0
        before = _frozen(ep)
        late = getattr(env, task.gold[0].tool)(**task.gold[0].args)
        assert json.loads(late) == {"error": EPISODE_OVER}
        assert _frozen(ep) == before and env.get_reward() == score
    finally:
        env._close()


# -- actions ----------------------------------------------------------------------------------------

_INTEGERS: list[Callable[[int], Any]] = [np.int64, np.int32, np.uint8, np.array, lambda i: np.array(i, dtype=np.int16)]


@pytest.mark.parametrize("wrap", _INTEGERS, ids=["int64", "int32", "uint8", "0d-array", "0d-int16"])
def test_a_numpy_integer_action_in_the_gym_action_space_names_that_tool(helpdesk: HelpdeskWorld, wrap: Any) -> None:
    """Every tool index the action space contains (NumPy scalars, 0-d integer arrays) names that tool."""
    env = MirrorEnv(helpdesk)
    env.reset(options={"task_id": TASK_ID})
    action = {"tool_name": wrap(env.tool_names.index("get_policy")), "tool_args": "{}"}
    assert env.action_space.contains(action)
    _, _, _, _, info = env.step(action)
    assert info["tool"] == "get_policy" and info["ok"], info


@pytest.mark.parametrize("wrap", _INTEGERS, ids=["int64", "int32", "uint8", "0d-array", "0d-int16"])
def test_a_numpy_integer_action_in_the_pettingzoo_action_space_names_that_tool(wrap: Any) -> None:
    """PettingZoo: every tool index the role's action space contains names that role's tool."""
    pytest.importorskip("pettingzoo")
    from mirrorworld.envs.pettingzoo import env_module

    env = env_module("helpdesk_team").parallel_env()
    env.reset(options={"task_id": "team_refund_approval/1"})
    index = env.tools("tier1").index("get_policy") + 1
    action = {"tool": wrap(index), "args": "{}"}
    assert env.action_space("tier1").contains(action)
    _, _, _, _, infos = env.step({"tier1": action})
    env.close()
    assert infos["tier1"]["tool"] == "get_policy" and infos["tier1"]["ok"], infos["tier1"]


# -- seated worlds ----------------------------------------------------------------------------------

TEAM_TASK = "team_refund_approval/1"


def _leave(world: World) -> dict[str, Any]:
    task = world.task_at(TEAM_TASK)
    ticket = next(ident for kind, ident in task.scope if kind == "ticket")
    return {"ticket_id": ticket, "reason": "I have waited long enough."}


@pytest.mark.parametrize("max_steps", [30, 1])
def test_a_single_agent_cannot_leave_as_the_customer_of_a_seated_world(max_steps: int) -> None:
    """MirrorEnv on helpdesk_team: the agent plays the staff, so leave_chat (the customer's own tool) is refused
    with nothing changed; the episode ends as its budget or a final message says, graded once; then nothing
    changes."""
    world = make_world("helpdesk_team")
    env = MirrorEnv(world, max_steps=max_steps)
    env.reset(options={"task_id": TEAM_TASK})
    ep = env.episode
    assert ep is not None
    hash_before = ep.session.state_hash()
    _, reward, terminated, truncated, info = env.step(
        {"tool_name": "leave_chat", "tool_args": json.dumps(_leave(world))}
    )
    assert not info["ok"] and info["error"]["code"] == "not_permitted"
    assert ep.session.state_hash() == hash_before and not world.contact_over(ep.session)
    if max_steps > 1:
        assert (terminated, truncated) == (False, False) and not ep.over
        _, reward, terminated, truncated, info = env.step(
            {"tool_name": "respond", "tool_args": json.dumps({"message": "Goodbye."})}
        )
        assert (terminated, truncated) == (True, False)
    else:
        assert (terminated, truncated) == (False, True)
    assert ep.over and info["verdict"]["score"] == 0.0
    before = _frozen(ep)
    for tool, args in (
        ("issue_refund", {"order_id": 1, "amount": 1}),
        ("message_agent", {"ticket_id": 1, "message": "hi"}),
    ):
        obs, reward, after_term, after_trunc, info = env.step({"tool_name": tool, "tool_args": json.dumps(args)})
        assert info["error"] == EPISODE_OVER and reward == 0.0 and (after_term, after_trunc) == (terminated, truncated)
        assert not obs["tool_mask"].any() and "verdict" not in info
    assert _frozen(ep) == before


def test_a_single_agent_cannot_leave_as_the_customer_in_a_chat_episode() -> None:
    """ChatEnv on helpdesk_team: leave_chat is the customer's, refused to the agent; the contact goes on."""
    world = make_world("helpdesk_team")
    env = ChatEnv(world)
    env.reset(task_id=TEAM_TASK)
    call = {"id": "c0", "type": "function", "function": {"name": "leave_chat", "arguments": json.dumps(_leave(world))}}
    env.step({"role": "assistant", "content": None, "tool_calls": [call]})
    ep = env.episode
    assert ep is not None and not ep.over and env.last_outcome is not None
    assert env.last_outcome.error is not None and env.last_outcome.error["code"] == "not_permitted"
    assert not world.contact_over(ep.session)
    env.close()


def test_the_team_episode_after_the_end_refuses_everything_and_pays_nothing() -> None:
    """TeamEpisode: after the end every action (tool, wait, foreign tool) is episode_over; turns and returns freeze."""
    world = make_world("helpdesk_team")
    task = world.task_at(TEAM_TASK)
    team = TeamEpisode(world, task)
    try:
        assert team.act("customer", "leave_chat", _leave(world)) is not None
        assert team.over and team.terminated and team.verdict is not None
        team.pop_rewards()
        turns, returns, before = len(team.turns), team.returns, _frozen(team.episode)
        for role, tool, args in (
            ("tier1", "get_policy", {}),
            ("supervisor", None, None),
            ("customer", "issue_refund", {}),
        ):
            result = team.act(role, tool, args)
            assert result is not None and result.error == EPISODE_OVER
        team.end_cycle()
        assert team.finish() is team.verdict
        assert len(team.turns) == turns and team.returns == returns and _frozen(team.episode) == before
        assert set(team.pop_rewards().values()) == {0.0}
    finally:
        team.close()


def test_pettingzoo_parallel_after_termination_changes_nothing() -> None:
    """Parallel env: once the customer leaves every agent is done, and later steps change nothing."""
    pytest.importorskip("pettingzoo")
    from mirrorworld.envs.pettingzoo import env_module

    world = make_world("helpdesk_team")
    env = env_module("helpdesk_team").parallel_env()
    env.reset(options={"task_id": TEAM_TASK})
    leave = {"tool": env.tools("customer").index("leave_chat") + 1, "args": json.dumps(_leave(world))}
    _, _, terms, truncs, infos = env.step({"customer": leave})
    assert all(terms.values()) and not any(truncs.values()) and env.agents == []
    assert all("verdict" in i for i in infos.values())
    team = env.episode
    assert team is not None
    before = _frozen(team.episode)
    assert env.step({"tier1": {"tool": 1, "args": "{}"}}) == ({}, {}, {}, {}, {})
    assert _frozen(team.episode) == before
    env.close()


def test_pettingzoo_aec_an_action_for_a_terminated_agent_is_refused_not_raised() -> None:
    """AEC env: after termination a terminated agent's action is refused (episode_over), never an exception."""
    pytest.importorskip("pettingzoo")
    from mirrorworld.envs.pettingzoo import env_module

    world = make_world("helpdesk_team")
    env = env_module("helpdesk_team").env()
    env.reset(options={"task_id": TEAM_TASK})
    assert env.agent_selection == "customer"
    env.step({"tool": env.unwrapped.tools("customer").index("leave_chat") + 1, "args": json.dumps(_leave(world))})
    assert all(env.terminations.values())
    team = env.unwrapped.episode
    before = _frozen(team.episode)
    env.step({"tool": 1, "args": "{}"})  # the next agent, terminated, sends a real action
    assert _frozen(team.episode) == before
    env.close()


# -- the server -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(faulty_helpdesk: HelpdeskWorld) -> Iterator[Any]:
    """A server whose ``helpdesk`` is the faulty helpdesk (the same tasks, plus two tools that fail halfway)."""
    pytest.importorskip("fastapi")
    pytest.importorskip("websockets")
    from mirrorworld.server import BackgroundServer, ServerConfig

    registry = Registry()
    registry.register("helpdesk", lambda **_: faulty_helpdesk, env_id=faulty_helpdesk.id)
    registry.add(default.spec("helpdesk_team"))
    with BackgroundServer(ServerConfig(access_log=False), registry) as s:
        yield s


def _crash_args(world: HelpdeskWorld) -> dict[str, Any]:
    return {"order_id": world.task_at(TASK_ID).targets[0][1]}


@pytest.mark.parametrize("transport", ["http", "ws"])
def test_server_verdict_then_step_changes_nothing(server: Any, faulty_helpdesk: HelpdeskWorld, transport: str) -> None:
    """After the verdict endpoint ends an episode, a step is episode_over, pays 0, and the verdict does not change."""
    from mirrorworld.client import Client

    task = faulty_helpdesk.task_at(TASK_ID)
    with Client(server.url, transport=transport) as client:  # type: ignore[arg-type]
        s = client.create("helpdesk", task_id=TASK_ID)
        s.step("get_policy", {})
        verdict = s.verdict()
        state = s.state()
        assert (state.terminated, state.truncated, state.done) == (False, True, True)
        for call in task.gold:
            r = s.step(call.tool, call.args)
            assert r.error == EPISODE_OVER and r.reward == 0.0 and r.verdict is None
            assert (r.terminated, r.truncated, r.done) == (False, True, True)
        assert s.state() == state and s.verdict() == verdict
        s.close()


@pytest.mark.parametrize("transport", ["http", "ws"])
def test_server_fork_of_an_ended_session_pays_and_writes_nothing(
    server: Any, faulty_helpdesk: HelpdeskWorld, transport: str
) -> None:
    """The fork endpoint on an ended session gives an ended session: episode_over, reward 0, same state and verdict."""
    from mirrorworld.client import Client

    task = faulty_helpdesk.task_at(TASK_ID)
    with Client(server.url, transport=transport) as client:  # type: ignore[arg-type]
        s = client.create("helpdesk", task_id=TASK_ID)
        for call in task.gold:
            last = s.step(call.tool, call.args)
        assert last.terminated and last.verdict is not None
        fork = s.fork()
        assert fork.info.done
        state = fork.state()
        for call in task.gold:
            r = fork.step(call.tool, call.args)
            assert r.error == EPISODE_OVER and r.reward == 0.0 and r.verdict is None and r.terminated
        after = fork.state()
        assert after.state_hash == state.state_hash == s.state_hash() and after.total_reward == state.total_reward
        assert fork.verdict().to_dict() == last.verdict
        fork.close()
        s.close()


def test_server_reset_mid_episode_starts_afresh(server: Any, faulty_helpdesk: HelpdeskWorld) -> None:
    """A reset mid-episode discards the old episode: step 0, no reward, no flags, the pristine task state."""
    from mirrorworld.client import Client

    task = faulty_helpdesk.task_at(TASK_ID)
    with Client(server.url) as client:
        s = client.create("helpdesk", task_id=TASK_ID)
        pristine = s.state()
        s.step(task.gold[0].tool, task.gold[0].args)
        assert s.state().state_hash != pristine.state_hash
        info = s.reset(task_id=TASK_ID)
        assert info.step == 0 and not info.done
        assert s.state() == pristine
        for call in task.gold:
            last = s.step(call.tool, call.args)
        assert (
            last.verdict is not None and last.verdict["score"] == 1.0 and s.state().total_reward == pytest.approx(1.0)
        )
        s.close()


def _mcp_call(url: str, body: dict[str, Any]) -> Any:
    import httpx

    response = httpx.post(url, json=body, headers={"Accept": "application/json, text/event-stream"}, timeout=30)
    return response.status_code, response.json()


def test_mcp_and_openenv_after_the_end_change_nothing(server: Any, faulty_helpdesk: HelpdeskWorld) -> None:
    """MCP (per session and OpenEnv's /mcp) and OpenEnv's /step answer episode_over after the end, with reward 0."""
    import httpx

    from mirrorworld.client import Client

    task = faulty_helpdesk.task_at(TASK_ID)
    write = task.gold[0]
    with Client(server.url) as client:
        s = client.create("helpdesk", task_id=TASK_ID)
        for call in task.gold:
            s.step(call.tool, call.args)
        state = s.state()
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": write.tool, "arguments": write.args},
        }
        for url, body in (
            (f"{server.url}/v1/sessions/{s.id}/mcp", call),
            (f"{server.url}/mcp", {**call, "params": {**call["params"], "session_id": s.id}}),
        ):
            status, out = _mcp_call(url, body)
            result = out["result"]
            assert status == 200 and result["isError"] and result["structuredContent"] == {"error": EPISODE_OVER}
            assert result["_meta"]["mirrorworld"] == {"step": state.step, "done": True, "reward": 0.0}
        step = httpx.post(
            f"{server.url}/step", json={"session_id": s.id, "action": {"tool": write.tool, "args": write.args}}
        ).json()
        assert step["reward"] == 0.0 and step["done"] and step["observation"]["result"] == {"error": EPISODE_OVER}
        assert "verdict" not in step["observation"]
        assert s.state() == state
        s.close()


@pytest.mark.parametrize("transport", ["http", "ws"])
def test_a_crashing_tool_over_the_server_is_a_500_naming_the_world(
    server: Any, faulty_helpdesk: HelpdeskWorld, transport: str
) -> None:
    """A crashing tool is a 500 that names the world boundary on every transport, and writes nothing."""
    from mirrorworld.client import Client, RemoteError

    with Client(server.url, transport=transport) as client:  # type: ignore[arg-type]
        s = client.create("helpdesk", task_id=TASK_ID)
        before = s.state()
        with pytest.raises(RemoteError) as info:
            s.step("refund_then_crash", _crash_args(faulty_helpdesk))
        assert info.value.status == 500 and info.value.code == "internal_error"
        assert "KeyError" not in info.value.message and "a bug in the world" not in info.value.message
        assert info.value.message == "the world failed: WorldError"
        after = s.state()
        assert after.state_hash == before.state_hash and after.total_reward == 0.0
        assert s.step("get_policy", {}).error == EPISODE_OVER
        s.close()


def test_openenv_websocket_names_the_world_boundary_as_its_http_route_does(
    server: Any, faulty_helpdesk: HelpdeskWorld
) -> None:
    """OpenEnv: a crashing tool gives the same boundary-naming message over /ws as over POST /step."""
    import httpx
    from websockets.sync.client import connect

    action = {"tool": "refund_then_crash", "args": _crash_args(faulty_helpdesk)}
    sid = httpx.post(f"{server.url}/reset", json={"task_id": TASK_ID}).json()["metadata"]["session_id"]
    http = httpx.post(f"{server.url}/step", json={"session_id": sid, "action": action})
    assert http.status_code == 500 and http.json()["error"]["message"] == "the world failed: WorldError"
    with connect(server.url.replace("http://", "ws://") + "/ws") as ws:
        ws.send(json.dumps({"type": "reset", "data": {"task_id": TASK_ID}}))
        assert json.loads(ws.recv())["type"] == "observation"
        ws.send(json.dumps({"type": "step", "data": action}))
        frame = json.loads(ws.recv())
    assert frame["type"] == "error" and frame["data"]["message"] == "the world failed: WorldError"


def test_mcp_a_crashing_tool_is_not_an_agent_visible_tool_error(server: Any, faulty_helpdesk: HelpdeskWorld) -> None:
    """MCP: a crashing tool is reported as the world's failure (``internal_error``, boundary ``world``), never its text.

    The MCP SDK turns every exception of a tool handler into an ``isError`` result, so the result carries the
    same structured error the HTTP API answers with, which a harness tells apart from an agent's refused call.
    """
    from mirrorworld.client import Client

    with Client(server.url) as client:
        s = client.create("helpdesk", task_id=TASK_ID)
        before = s.state()
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "refund_then_crash", "arguments": _crash_args(faulty_helpdesk)},
        }
        _, out = _mcp_call(f"{server.url}/v1/sessions/{s.id}/mcp", body)
        text = json.dumps(out)
        assert "a bug in the world" not in text and "KeyError" not in text, text
        error = out["result"]["structuredContent"]["error"]
        assert error["code"] == "internal_error" and error["boundary"] == "world", out
        assert "the world failed" in error["message"], out
        assert s.state().state_hash == before.state_hash
        s.close()


def test_a_remote_world_crash_keeps_its_boundary(server: Any, faulty_helpdesk: HelpdeskWorld) -> None:
    """RemoteMirrorEnv: a tool crash on the server raises an error at the world boundary, not the caller's."""
    from mirrorworld.client import RemoteError
    from mirrorworld.envs.remote import RemoteMirrorEnv

    env = RemoteMirrorEnv(server.url, world="helpdesk", transport="http")
    try:
        env.reset(options={"task_id": TASK_ID})
        with pytest.raises(RemoteError) as info:
            env.step({"tool_name": "refund_then_crash", "tool_args": json.dumps(_crash_args(faulty_helpdesk))})
        assert boundary_of(info.value) == "world"
    finally:
        env.close()


def test_a_connection_failure_is_an_infrastructure_failure() -> None:
    """A server that cannot be reached is an infrastructure failure, not the caller's mistake."""
    import socket

    from mirrorworld.client import Client, RemoteError

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with Client(f"http://127.0.0.1:{port}", timeout=5) as client, pytest.raises(RemoteError) as info:
        client.create("helpdesk", task_id=TASK_ID)
    assert info.value.code == "connection_error" and boundary_of(info.value) == "infrastructure"


def test_server_verdict_after_a_world_crash_names_the_world(server: Any, faulty_helpdesk: HelpdeskWorld) -> None:
    """The verdict endpoint of an episode a tool crash ended blames the world, not the verifier (which never ran)."""
    from mirrorworld.client import Client, RemoteError

    with Client(server.url) as client:
        s = client.create("helpdesk", task_id=TASK_ID)
        with pytest.raises(RemoteError):
            s.step("refund_then_crash", _crash_args(faulty_helpdesk))
        with pytest.raises(RemoteError) as info:
            s.verdict()
        assert info.value.status == 500 and info.value.message == "the world failed: WorldError"
        s.close()


@pytest.mark.parametrize("transport", ["http", "ws"])
def test_the_server_accepts_every_task_id_task_ref_accepts(server: Any, transport: str) -> None:
    """The server's task_id accepts exactly what TaskRef.parse does: a ten-digit seed up to MAX_SEED included."""
    from mirrorworld.client import Client

    task_id = f"refund_damaged/{MAX_SEED}"
    assert str(TaskRef.parse(task_id)) == task_id
    with Client(server.url, transport=transport) as client:  # type: ignore[arg-type]
        s = client.create("helpdesk", task_id=task_id)
        assert s.info.task_id == task_id
        s.close()


def test_the_server_never_starts_a_task_it_cannot_name(server: Any, faulty_helpdesk: HelpdeskWorld) -> None:
    """A session created by index either is refused or plays a task whose id the server accepts again."""
    from mirrorworld.client import Client, RemoteError

    with Client(server.url) as client:
        try:
            s = client.create("helpdesk", families=["refund_damaged"], split="test", index=MAX_SEED)
        except RemoteError as err:
            assert 400 <= err.status < 500
            return
        task_id = s.info.task_id
        try:
            again = s.reset(task_id=task_id)
        except RemoteError as err:
            pytest.fail(f"the server started {task_id} but refuses to name it again: {err}")
        finally:
            s.close()
        assert again.task_id == task_id


@pytest.mark.parametrize(
    "spec",
    [
        {"task_id": "../3"},
        {"task_id": "refund_damaged/3\x00"},
        {"task_id": "refund_damaged/٣"},
        {"task_id": "refund_damaged/99999999999"},
        {"task_id": "refund_damaged/3\n"},
        {"family": "../etc", "seed": 1},
        {"family": "refund_damaged", "seed": MAX_SEED + 1},
        {"family": "refund_damaged", "seed": True},
        {"index": -1},
    ],
)
def test_the_server_refuses_hostile_task_names_with_a_4xx(server: Any, spec: dict[str, Any]) -> None:
    """Hostile task ids, families and seeds are 4xx request errors over HTTP and WebSocket, never a session."""
    from mirrorworld.client import Client, RemoteError

    for transport in ("http", "ws"):
        with Client(server.url, transport=transport) as client:  # type: ignore[arg-type]
            with pytest.raises(RemoteError) as info:
                client.request("create", None, {"world": "helpdesk", **spec})
            assert 400 <= info.value.status < 500, (transport, info.value)


def test_the_remote_env_selects_tasks_as_the_gym_env_does(server: Any, faulty_helpdesk: HelpdeskWorld) -> None:
    """RemoteMirrorEnv.reset reads options={'task_id': None} as MirrorEnv does: no task id, the seed's task."""
    from mirrorworld.envs.remote import RemoteMirrorEnv

    local = MirrorEnv(faulty_helpdesk)
    _, expected = local.reset(seed=7, options={"task_id": None})
    env = RemoteMirrorEnv(server.url, world="helpdesk", transport="http")
    try:
        _, info = env.reset(seed=7, options={"task_id": None})
    finally:
        env.close()
    assert info == expected


# -- the registry and pickled worlds ----------------------------------------------------------------


def test_a_broken_world_plugin_does_not_take_the_others_down(monkeypatch: pytest.MonkeyPatch) -> None:
    """A world entry point that cannot be loaded leaves every other world usable, and names() answers consistently."""
    real = list(importlib.metadata.entry_points(group="mirrorworld.worlds"))
    broken = importlib.metadata.EntryPoint("aaa_broken", "no_such_module_for_mirrorworld:SPEC", "mirrorworld.worlds")

    def entry_points(**_: Any) -> importlib.metadata.EntryPoints:
        return importlib.metadata.EntryPoints([broken, *real])

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    registry = Registry.discover()
    first = registry.names()
    assert {"helpdesk", "helpdesk_team", "sales"} <= set(first)
    assert registry.names() == first
    assert registry.get("helpdesk").name == "helpdesk"
    with pytest.raises(RegistryError):
        registry.get("aaa_broken")


def test_a_registered_factory_is_checked_against_its_env_id() -> None:
    """Registry.register holds a factory to its env id as WorldSpec.build does: a disagreeing world is a WorldError."""
    registry = Registry()
    registry.register("liar", lambda **_: make_world("sales"), env_id="mirrorworld/Liar-v0")
    with pytest.raises(WorldError):
        registry.get("liar")


def test_a_spec_name_agrees_with_the_world_it_builds() -> None:
    """A spec whose name is not the built world's name is a WorldError (tasks, trajectories and seats use that name)."""
    registry = Registry(
        [WorldSpec("alias", "mirrorworld/Helpdesk-v0", "mirrorworld.worlds.helpdesk.world:HelpdeskWorld")]
    )
    with pytest.raises(WorldError):
        registry.get("alias")


_REPLAY = r"""
import json, pickle, sys
from mirrorworld.envs.gymnasium import MirrorEnv
out = []
for blob in pickle.loads(sys.stdin.buffer.read()):
    world = pickle.loads(blob)
    task = world.task_for("test", 1)
    env = MirrorEnv(world)
    obs, info = env.reset(options={"task": task})
    hashes = [env.state_hash()]
    for call in task.gold:
        args = call.args if isinstance(call.args, str) else json.dumps(call.args)
        env.step({"tool_name": call.tool, "tool_args": args})
        hashes.append(env.state_hash())
    out.append([world.content_hash, info["task_id"], obs["instruction"], hashes])
print(json.dumps(out))
"""


def test_worlds_rebuilt_under_another_hash_seed_give_the_same_state_hashes() -> None:
    """A pickled world rebuilt in a process with another PYTHONHASHSEED replays a task to the same state hashes."""
    worlds = [default.get("helpdesk_team"), default.get("sales"), default.get("helpdesk", scale=0.5, data_seed=3)]
    expected = []
    for world in worlds:
        task = world.task_for("test", 1)
        env = MirrorEnv(world)
        obs, info = env.reset(options={"task": task})
        hashes = [env.state_hash()]
        for call in task.gold:
            env.step({"tool_name": call.tool, "tool_args": _json(call.args)})
            hashes.append(env.state_hash())
        expected.append([world.content_hash, info["task_id"], obs["instruction"], hashes])
        env.close()
    blob = pickle.dumps([pickle.dumps(w) for w in worlds])
    for seed in ("0", "987654"):
        done = subprocess.run(
            [sys.executable, "-c", _REPLAY],
            input=blob,
            capture_output=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
            timeout=120,
            check=True,
        )
        assert json.loads(done.stdout) == expected, seed
