"""The multi-agent layer works for any world with seats: a two-seat world defined here (a user who
knows which counter to change, a clerk who changes it) runs through the team episode, the
PettingZoo parallel environment, the generic policies and the multi-agent runner, and its gold
team passes."""

from __future__ import annotations

import argparse
import json
import random
import re
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from conftest import TinyWorld
from mirrorworld.core.registry import Registry
from mirrorworld.core.seats import Seated
from mirrorworld.core.session import Session, ToolContext
from mirrorworld.core.task import Check, EntityRef, Fact, Task, TaskFamily, ToolCall
from mirrorworld.core.tools import ToolSpec, tool
from mirrorworld.core.world import Rule, World
from mirrorworld.episodes import TeamEpisode
from mirrorworld.errors import MirrorworldError, RegistryError, ToolError
from mirrorworld.run.multiagent import (
    add_arguments,
    gold_team,
    make_policies,
    policy_menu,
    run_multi_agent,
    run_team_episode,
    run_team_episodes,
    summarize_team,
    team_world,
)
from mirrorworld.sim.policies import GoldStaff, RoleContext
from mirrorworld.testing import check_world

USER, CLERK = "user", "clerk"


def _post(ctx: ToolContext, sender: str, recipient: str, body: str) -> int:
    if not body.strip():
        raise ToolError("invalid_arguments", "the message must not be empty")
    cur = ctx.execute("INSERT INTO messages (sender, recipient, body) VALUES (?, ?, ?)", (sender, recipient, body))
    return int(cur.lastrowid or 0)


@tool("write")
def ask_user(ctx: ToolContext, question: str) -> dict[str, Any]:
    """Ask the user a question in the chat.

    Args:
        question: The question.
    """
    return {"message_id": _post(ctx, CLERK, USER, question)}


@tool("write")
def tell_clerk(ctx: ToolContext, message: str) -> dict[str, Any]:
    """Write to the clerk in the chat.

    Args:
        message: The message.
    """
    return {"message_id": _post(ctx, USER, CLERK, message)}


@tool("read")
def get_counter(ctx: ToolContext, counter_id: int) -> dict[str, Any]:
    """Read one counter.

    Args:
        counter_id: The counter's id.
    """
    row = ctx.one("SELECT id, value FROM counters WHERE id=?", (counter_id,))
    if row is None:
        raise ToolError("not_found", f"no counter {counter_id}")
    return {"counter": row}


@tool("write")
def set_counter(ctx: ToolContext, counter_id: int, value: int) -> dict[str, Any]:
    """Set a counter to a value.

    Args:
        counter_id: The counter's id.
        value: The new value.
    """
    if ctx.one("SELECT id FROM counters WHERE id=?", (counter_id,)) is None:
        raise ToolError("not_found", f"no counter {counter_id}")
    ctx.execute("UPDATE counters SET value=? WHERE id=?", (value, counter_id))
    return {"counter_id": counter_id, "value": value}


@tool("terminal")
def respond(ctx: ToolContext, message: str) -> dict[str, Any]:
    """Send the final message and end the contact.

    Args:
        message: The final message.
    """
    if not message.strip():
        raise ToolError("invalid_arguments", "message must not be empty")
    ctx.finish(message)
    return {"sent": True}


class RelayFamily(TaskFamily):
    """The user says which counter to set to what; the clerk asks, sets it and confirms."""

    name = "relay"
    description = "Ask the user which counter to change, change it, confirm the new value."

    def generate(self, image: Any, rng: random.Random, seed: int) -> Task:
        counter, value = rng.randint(1, 5), rng.randint(100, 999)
        return Task(
            world="desk",
            family=self.name,
            seed=seed,
            instruction="A user wants one of the counters changed. Ask them which and to what, then do it.",
            setup=(),
            gold=(
                ToolCall("ask_user", {"question": "Which counter, and to what value?"}),
                ToolCall("tell_clerk", {"message": f"Please set counter {counter} to {value}."}),
                ToolCall("set_counter", {"counter_id": counter, "value": value}),
                ToolCall("respond", {"message": f"Counter {counter} is now {value}."}),
            ),
            scope=(("counter", counter),),
            targets=(("counter", counter),),
            checks=(
                Check("value set", "field", {"table": "counters", "id": counter, "field": "value", "equals": value}),
            ),
            facts=(Fact("new value", str(value), "number"),),
            hidden={
                "user": {"counter": counter, "value": value},
                "plan": [
                    {"role": CLERK, "slots": {}},
                    {"role": USER, "slots": {}},
                    {"role": CLERK, "slots": {"counter_id": "counter", "value": "value"}},
                    {"role": CLERK, "slots": {}},
                ],
            },
        )


class PlainDesk(World):
    """Five counters and a chat, without seats (one agent may call every tool)."""

    name = "plain_desk"
    title = "PlainDesk"
    version = 0
    epoch = "2026-01-01T00:00:00Z"
    source_dir = Path(__file__).resolve()
    owners: ClassVar[dict[str, tuple[str, str]]] = {"counters": ("counter", "id")}

    @property
    def policy(self) -> str:
        return "Only change the counter the user asks you to change."

    def declare_tools(self) -> Sequence[ToolSpec]:
        return (get_counter, ask_user, tell_clerk, set_counter, respond)

    def declare_rules(self) -> Sequence[Rule]:
        return ()

    def declare_families(self) -> Sequence[TaskFamily]:
        return (RelayFamily(),)

    def generate(self, conn: sqlite3.Connection, rng: random.Random, scale: float) -> None:
        conn.execute("CREATE TABLE counters (id INTEGER PRIMARY KEY, value INTEGER NOT NULL)")
        conn.execute(
            "CREATE TABLE messages (id INTEGER PRIMARY KEY, sender TEXT NOT NULL, recipient TEXT NOT NULL, "
            "body TEXT NOT NULL)"
        )
        conn.executemany("INSERT INTO counters VALUES (?, ?)", [(i, rng.randint(0, 50)) for i in range(1, 6)])

    def outcome_view(self, db: sqlite3.Connection, targets: Sequence[EntityRef]) -> dict[str, Any]:
        view: dict[str, Any] = {}
        for kind, ident in targets:
            row = db.execute("SELECT value FROM counters WHERE id=?", (ident,)).fetchone()
            view[f"{kind}:{ident}"] = row[0] if row else None
        return view


_NUMBER = {"counter": re.compile(r"counter (\d+)"), "value": re.compile(r"\bto (\d+)")}


class DeskWorld(PlainDesk, Seated):
    """The desk with two seats: the user (simulated) and the clerk."""

    name = "desk"
    title = "Desk"
    roles: ClassVar[tuple[str, ...]] = (USER, CLERK)
    role_tools: ClassVar[Mapping[str, tuple[str, ...]]] = {
        USER: ("tell_clerk",),
        CLERK: ("get_counter", "ask_user", "set_counter", "respond"),
    }
    simulated_role: ClassVar[str | None] = USER

    def __init__(self, *, scale: float = 1.0, data_seed: int = 0) -> None:
        super().__init__(scale=scale, data_seed=data_seed)
        self.check_seats()

    def briefing(self, task: Task, role: str) -> str:
        if role == USER:
            want = task.hidden.get("user", {})
            return f"You want counter {want.get('counter')} set to {want.get('value')}."
        return task.instruction

    def inbox(self, session: Session, role: str) -> dict[str, Any]:
        rows = session.db.execute(
            "SELECT id, sender, body FROM messages WHERE recipient=? ORDER BY id", (role,)
        ).fetchall()
        return {"now": session.clock, "messages": [{"id": i, "from": s, "body": b} for i, s, b in rows]}

    def extract_slot(self, slot: str, text: str | None) -> Any:
        m = _NUMBER[slot].search(text or "")
        return int(m.group(1)) if m else None


@pytest.fixture(scope="module")
def desk() -> DeskWorld:
    return DeskWorld()


def test_the_seated_world_conforms(desk: DeskWorld) -> None:
    check_world(desk)


def test_the_reference_team_and_menu_are_the_generic_ones(desk: DeskWorld) -> None:
    assert gold_team(desk) == {USER: "gold", CLERK: "gold"}
    assert set(policy_menu(desk)[CLERK]) == {"gold", "idle", "refuse", "claim", "llm"}
    policies = make_policies(desk)
    assert all(isinstance(p, GoldStaff) and p.name == "gold" for p in policies.values())
    assert make_policies(desk, {CLERK: "refuse"}, roles=[CLERK])[CLERK].name == "refuse"
    with pytest.raises(RegistryError, match="no role 'tier1'"):
        make_policies(desk, {"tier1": "gold"})
    with pytest.raises(RegistryError, match="no clerk policy named 'diligent'"):
        make_policies(desk, {CLERK: "diligent"})


def test_a_menu_factory_gets_the_runner_options(desk: DeskWorld) -> None:
    class Menu(DeskWorld):
        def policy_menu(self) -> Mapping[str, Mapping[str, str]]:
            return {USER: {"llm": "mirrorworld.sim.llm:llm_customer", "gold": "mirrorworld.sim.policies:GoldStaff"}}

    world = Menu()
    assert set(policy_menu(world)[CLERK]) == {"gold", "idle", "refuse", "claim", "llm"}  # the baselines, and a model
    with pytest.raises(RegistryError, match="customer-base-url"):
        make_policies(world, {USER: "llm"})
    made = make_policies(world, {USER: "llm"}, customer_base_url="http://127.0.0.1:9/v1", customer_model="m")
    assert made[USER].name == "llm"


def test_the_team_episode_plays_the_gold_team(desk: DeskWorld) -> None:
    task = desk.task("relay", 3)
    ep = TeamEpisode(desk, task)
    assert ep.roles == (USER, CLERK)
    refused = ep.act(USER, "set_counter", {"counter_id": 1, "value": 1})
    assert refused is not None and refused.error is not None and refused.error["code"] == "not_permitted"
    policies = make_policies(desk)
    for role in ep.roles:
        policies[role].reset(RoleContext(desk, task, role, task.seed))
    while not ep.over:
        for role in ep.roles:
            if not ep.over:
                action = policies[role].act(ep.observe(role))
                ep.act(role, None if action is None else action.tool, None if action is None else action.args)
        ep.end_cycle()
    assert ep.terminated and ep.verdict is not None and ep.verdict.passed, ep.verdict
    assert ep.returns == pytest.approx({USER: 1.0, CLERK: 1.0})
    events = len(ep.session.events)
    after = ep.act(CLERK, "respond", {"message": "again"})
    assert after is not None and after.error is not None and after.error["code"] == "episode_over"
    assert len(ep.session.events) == events
    ep.close()


def test_the_parallel_env_plays_the_gold_team(desk: DeskWorld) -> None:
    pytest.importorskip("pettingzoo")
    from mirrorworld.envs.pettingzoo import SeatedParallel

    par = SeatedParallel(world=desk)
    assert par.possible_agents == [USER, CLERK]
    par.reset(seed=4)
    task = par.episode.task
    policies = make_policies(desk)
    for role in par.agents:
        policies[role].reset(RoleContext(desk, task, role, task.seed))
    returns = dict.fromkeys(par.agents, 0.0)
    infos: dict[str, Any] = {}
    while par.agents:
        actions = {a: policies[a].act(par.role_observation(a)) for a in par.agents}
        _obs, rewards, _term, _trunc, infos = par.step(actions)
        for agent, r in rewards.items():
            returns[agent] += r
    assert all(info["verdict"]["passed"] for info in infos.values())
    assert returns == pytest.approx({USER: 1.0, CLERK: 1.0})
    par.close()

    simulated = SeatedParallel(world=desk, customer=GoldStaff())  # the user simulated inside the env
    assert simulated.possible_agents == [CLERK]
    simulated.reset(seed=4)
    clerk = make_policies(desk, roles=[CLERK])[CLERK]
    clerk.reset(RoleContext(desk, simulated.episode.task, CLERK, task.seed))
    while simulated.agents:
        _obs, _rewards, _term, _trunc, infos = simulated.step({CLERK: clerk.act(simulated.role_observation(CLERK))})
    assert infos[CLERK]["verdict"]["passed"]
    simulated.close()


def test_run_team_episodes_grades_the_gold_team_as_passed(desk: DeskWorld) -> None:
    records = run_team_episodes(desk, make_policies(desk), episodes=4, split="test")
    assert [r.passed for r in records] == [True] * 4, [r.verdict["evidence"] for r in records]
    assert all(r.returns == pytest.approx({USER: 1.0, CLERK: 1.0}) for r in records)
    summary = summarize_team(records)
    assert summary["pass_rate"] == 1.0 and summary["roles"] == {USER: 1.0, CLERK: 1.0}
    assert summary["policies"] == {USER: "gold", CLERK: "gold"}
    refused = run_team_episode(desk, desk.task("relay", 0), make_policies(desk, {CLERK: "refuse"}))
    assert not refused.passed and refused.returns == {USER: 0.0, CLERK: 0.0}
    with pytest.raises(MirrorworldError, match="no policy for role"):
        run_team_episode(desk, desk.task("relay", 0), make_policies(desk, roles=[USER]))


def _args(registry: Registry, tmp_path: Path, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--world", default="plain_desk")
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--out", default=str(tmp_path / f"team-{len(list(tmp_path.iterdir()))}.sqlite"))
    parser.add_argument("--json", action="store_true")
    add_arguments(parser)
    args = parser.parse_args(["--multi-agent", "--json", *argv])
    args.registry = registry
    return args


def test_the_runner_runs_any_seated_world_from_a_registry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    registry = Registry()
    registry.register("plain_desk", PlainDesk)
    registry.register("desk", DeskWorld)
    registry.register("tiny", TinyWorld)
    assert team_world(registry, "plain_desk").name == "desk"  # the seated world built on it
    assert run_multi_agent(_args(registry, tmp_path)) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["pass_rate"] == 1.0 and summary["roles"] == {USER: 1.0, CLERK: 1.0}
    assert run_multi_agent(_args(registry, tmp_path, "--world", "desk", "--policy", "clerk=claim")) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["pass_rate"] == 0.0 and summary["policies"] == {USER: "gold", CLERK: "claim"}
    with pytest.raises(MirrorworldError, match="tiny has none"):
        run_multi_agent(_args(registry, tmp_path, "--world", "tiny"))
    with pytest.raises(RegistryError, match="no role 'tier1'"):
        run_multi_agent(_args(registry, tmp_path, "--tier1", "gold"))
    with pytest.raises(MirrorworldError, match="ROLE=NAME"):
        run_multi_agent(_args(registry, tmp_path, "--policy", "clerk"))
    with pytest.raises(MirrorworldError, match="already given"):
        run_multi_agent(_args(registry, tmp_path, "--policy", "clerk=gold", "--policy", "clerk=idle"))
