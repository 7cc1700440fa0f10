"""The team environments behave: the gold team passes through both of them,
null teams score 0, every role sees only its own seat (canaries), bad actions
from any agent are error observations that change nothing, and episodes are
byte-identical in another process under another hash seed."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from mirrorworld import make_world
from mirrorworld.core.session import Session
from mirrorworld.core.store import Image
from mirrorworld.core.task import Task, TaskFamily, ToolCall
from mirrorworld.envs.pettingzoo import (
    HelpdeskTeamParallel,
    decode_text,
    helpdesk_v0,
    to_role_observation,
)
from mirrorworld.run.multiagent import GOLD_TEAM, make_policies
from mirrorworld.sim import RoleContext, RolePolicy, ScriptedCustomer
from mirrorworld.worlds.helpdesk_team import HelpdeskTeamWorld
from mirrorworld.worlds.helpdesk_team.tasks import TeamFamily

WORLD = make_world("helpdesk_team")
FAMILIES = [f.name for f in WORLD.families]


def _reset(policies: dict[str, RolePolicy], world: HelpdeskTeamWorld, task: Task) -> None:
    for role, policy in policies.items():
        if role in world.task_roles(task):
            policy.reset(RoleContext(world, task, role, task.seed))


def _action(env: Any, agent: str, call: ToolCall | None, by_index: bool) -> Any:
    if call is None:
        return None if by_index else {"tool": 0, "args": ""}
    if by_index:
        return {"tool": env.unwrapped.tools(agent).index(call.tool) + 1, "args": json.dumps(call.args)}
    return {"tool": call.tool, "args": call.args}


def play_aec(
    task: Task,
    names: dict[str, str] | None = None,
    *,
    world: HelpdeskTeamWorld = WORLD,
    max_cycles: int = 40,
    seen: list[tuple[str, str, int]] | None = None,
) -> tuple[Any, dict[str, float]]:
    """Play ``task`` through the AEC env with policies reading decoded observations; return (env, returns)."""
    env = helpdesk_v0.env(world=world, max_cycles=max_cycles)
    policies = make_policies(world, {**GOLD_TEAM, **(names or {})})
    env.reset(options={"task": task})
    _reset(policies, world, task)
    returns = dict.fromkeys(env.agents, 0.0)
    for i, agent in enumerate(env.agent_iter(max_iter=4 * max_cycles * 4)):
        obs, reward, terminated, truncated, _info = env.last()
        returns[agent] += reward
        if seen is not None:
            seen.append((agent, _text(obs), len(env.unwrapped.episode.turns)))
        if terminated or truncated:
            env.step(None)
            continue
        call = policies[agent].act(to_role_observation(obs, agent, env.unwrapped.tools(agent)))
        env.step(_action(env, agent, call, by_index=i % 2 == 0))
    return env, returns


def play_parallel(task: Task, names: dict[str, str] | None = None, max_cycles: int = 40) -> tuple[Any, dict[str, Any]]:
    par = helpdesk_v0.parallel_env(max_cycles=max_cycles)
    policies = make_policies(WORLD, {**GOLD_TEAM, **(names or {})})
    obs, _ = par.reset(options={"task": task})
    _reset(policies, WORLD, task)
    returns = dict.fromkeys(par.agents, 0.0)
    infos: dict[str, Any] = {}
    while par.agents:
        actions = {}
        for agent in par.agents:
            call = policies[agent].act(to_role_observation(obs[agent], agent, par.tools(agent)))
            actions[agent] = _action(par, agent, call, by_index=False)
        obs, rewards, _term, _trunc, infos = par.step(actions)
        for agent, r in rewards.items():
            returns[agent] += r
    return par, {"returns": returns, "infos": infos}


def _text(obs: Any) -> str:
    o = obs["observation"]
    return "\n".join(decode_text(o[k]) for k in ("briefing", "inbox", "last_result"))


# -- the gold team and the null teams ------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_the_gold_team_passes_through_the_aec_env(family: str) -> None:
    for seed in (0, 1):
        task = WORLD.task(family, seed)
        env, returns = play_aec(task)
        ep = env.unwrapped.episode
        assert ep.verdict is not None and ep.verdict.passed, (task.id, ep.verdict.evidence)
        assert returns == pytest.approx(dict.fromkeys(WORLD.task_roles(task), 1.0))
        assert not ep.customer_left and not ep.truncated


@pytest.mark.parametrize("family", FAMILIES)
def test_the_gold_team_passes_through_the_parallel_env(family: str) -> None:
    task = WORLD.task(family, 2)
    par, out = play_parallel(task)
    assert par.episode.verdict.passed, par.episode.verdict.evidence
    assert out["returns"] == pytest.approx(dict.fromkeys(WORLD.task_roles(task), 1.0))
    assert all(info["verdict"]["passed"] for info in out["infos"].values())


def test_a_simulated_customer_inside_the_env() -> None:
    task = WORLD.task("team_verify_identity", 3)
    par = helpdesk_v0.parallel_env(customer=ScriptedCustomer())
    obs, _ = par.reset(options={"task": task})
    assert set(obs) == {"tier1", "supervisor"}
    staff = make_policies(WORLD, GOLD_TEAM)
    _reset({r: staff[r] for r in ("tier1", "supervisor")}, WORLD, task)
    total = dict.fromkeys(par.agents, 0.0)
    while par.agents:
        actions = {a: staff[a].act(par.role_observation(a)) for a in par.agents}
        obs, rewards, *_ = par.step(actions)
        for a, r in rewards.items():
            total[a] += r
    assert par.episode.verdict.passed and total == pytest.approx({"tier1": 1.0, "supervisor": 1.0})
    assert any(t.role == "customer" and t.tool == "check_email" for t in par.episode.turns)


@pytest.mark.parametrize(
    "names",
    [
        {"customer": "idle", "tier1": "idle", "supervisor": "idle", "tier2": "idle"},
        {"tier1": "idle", "supervisor": "idle", "tier2": "idle"},
        {"tier1": "refuse"},
        {"tier1": "claim"},
    ],
    ids=["all-idle", "idle-staff", "refuse", "claim"],
)
def test_null_policies_score_zero(names: dict[str, str]) -> None:
    for family in FAMILIES:
        if family == "team_escalation" and names.get("tier1") in ("refuse", "claim"):
            continue  # tier 1 is not who ends a lost-parcel contact; its null is the idle team
        env, returns = play_aec(WORLD.task(family, 0), names, max_cycles=25)
        assert env.unwrapped.episode.verdict.score == 0.0
        assert all(r == 0.0 for r in returns.values()), (family, returns)


def test_an_idle_team_loses_the_customer_and_terminates() -> None:
    par = helpdesk_v0.parallel_env(customer=ScriptedCustomer(), max_cycles=40)
    par.reset(options={"task_id": "team_refund_approval/0"})
    patience = WORLD.task("team_refund_approval", 0).hidden["customer"]["patience"]
    while par.agents:
        _obs, _rew, term, trunc, infos = par.step({})
    customer_turns = [t for t in par.episode.turns if t.role == "customer"]
    assert len(customer_turns) == patience  # waited patience - 1 turns in silence, then left
    assert customer_turns[-1].tool == "leave_chat" and all(t.tool is None for t in customer_turns[:-1])
    assert all(term.values()) and not any(trunc.values())
    assert all(info["customer_left"] and not info["verdict"]["passed"] for info in infos.values())


def test_truncation_after_max_cycles_for_every_agent() -> None:
    env = helpdesk_v0.env(max_cycles=3)
    env.reset(options={"task_id": "team_escalation/1"})
    counts: dict[str, int] = {}
    for agent in env.agent_iter():
        _obs, _r, terminated, truncated, _info = env.last()
        counts[agent] = counts.get(agent, 0) + 1
        env.step(None if terminated or truncated else {"tool": 0, "args": ""})
        if truncated:
            assert not terminated
    assert counts == dict.fromkeys(["customer", "tier1", "supervisor", "tier2"], 4)


def test_a_rubber_stamp_supervisor_is_penalised_alone() -> None:
    task = WORLD.task("team_refund_approval", 1)
    env, returns = play_aec(task, {"tier1": "overreaching", "supervisor": "rubber-stamp"})
    ep = env.unwrapped.episode
    assert ep.verdict.score == 0.0 and ep.role_terms()["supervisor"] == -1.0
    assert returns == pytest.approx({"customer": 0.0, "tier1": 0.0, "supervisor": -1.0})
    env, returns = play_aec(task, {"tier1": "overreaching", "supervisor": "diligent"})
    assert returns == pytest.approx({"customer": 0.0, "tier1": 0.0, "supervisor": 0.0})


def test_hand_offs_are_recorded_with_their_roles() -> None:
    task = WORLD.task("team_escalation", 4)
    env, _ = play_aec(task)
    ep = env.unwrapped.episode
    roles = {ep.role_of_step(e.step): e.tool for e in ep.session.events if e.tool == "transfer_to_tier2"}
    assert roles == {"tier1": "transfer_to_tier2"}
    by_tool = {t.tool: t.role for t in ep.turns if t.tool}
    assert by_tool["refund_lost_parcel"] == "tier2" and by_tool["respond"] == "tier2"
    kinds = ep.session.db.execute("SELECT kind, sender, recipient FROM team_messages").fetchall()
    assert ("transfer", "tier1", "tier2") in kinds
    assert ep.verdict.breakdown["state"]["checks"]["transfer handed off"] is True


# -- no leakage: each role sees only its own seat ----------------------------------------------

PIN = "CANARY-PIN-"
RISK = 737373737
GRADER = "CANARY-GRADER-5e1d"
SECRET = "CANARY-CUSTOMER-9b2f"


class _CanaryFamily(TeamFamily):
    def __init__(self, inner: TeamFamily) -> None:
        self.inner, self.name, self.description, self.roles = inner, inner.name, inner.description, inner.roles

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        task = self.inner.generate(image, rng, seed)
        customer = dict(task.hidden["customer"])
        customer["facts"] = {**customer["facts"], "secret_phrase": SECRET}
        return dataclasses.replace(task, hidden={**task.hidden, "canary": GRADER, "customer": customer})


class CanaryTeam(HelpdeskTeamWorld):
    """The team world with canaries in hidden columns, grader-only data and the customer's private facts."""

    def generate(self, conn: sqlite3.Connection, rng: random.Random, scale: float) -> None:
        super().generate(conn, rng, scale)
        conn.execute("UPDATE customers SET security_pin = ? || id, risk_score = ?", (PIN, RISK))

    def declare_families(self) -> Sequence[TaskFamily]:
        return [_CanaryFamily(f) for f in super().declare_families()]


@pytest.fixture(scope="module")
def canary_world() -> CanaryTeam:
    return CanaryTeam()


def _customer_secrets(task: Task) -> list[str]:
    """What only the customer knows at the start: the wrong order number, the code, the secret phrase."""
    out = [SECRET]
    wrong = task.hidden.get("wrong_order")
    if wrong is not None:
        out.append(f"#{wrong}")
    for call in task.gold:
        if call.tool == "verify_code" and isinstance(call.args, dict):
            out.append(str(call.args["code"]))
    return out


def _staff_internal(task: Task) -> list[str]:
    """What staff say only to each other: approval summaries and notes, transfer summaries."""
    keys = {"request_supervisor_approval": "summary", "decide_approval": "note", "transfer_to_tier2": "summary"}
    return [str(c.args[keys[c.tool]]) for c in task.gold if c.tool in keys and isinstance(c.args, dict)]


def _scan(world: HelpdeskTeamWorld, task: Task) -> list[str]:
    """Play the gold team on ``task`` and list every observation that shows what its role must not see."""
    seen: list[tuple[str, str, int]] = []
    env, _ = play_aec(task, world=world, seen=seen)
    turns = env.unwrapped.episode.turns
    final = str(task.gold[-1].args["message"]) if isinstance(task.gold[-1].args, dict) else ""
    found = []
    for agent, text, n_turns in seen:
        for canary in (PIN, str(RISK), GRADER, '"slots"', '"plan"'):
            if canary in text:
                found.append(f"{agent} sees {canary}")
        if agent == "customer":
            for internal in _staff_internal(task):
                if internal in text:
                    found.append(f"the customer sees the staff's {internal[:40]!r}")
            continue
        if SECRET in text:
            found.append(f"{agent} sees the customer's secret")
        if final in text:
            found.append(f"{agent} sees the gold final message")
        for secret in _customer_secrets(task)[1:]:
            # Staff learn what only the customer knows from the customer, in the chat, and only then.
            said = any(
                t.role == "customer" and t.tool == "message_agent" and secret.strip("#") in json.dumps(t.args)
                for t in turns[:n_turns]
            )
            if secret in text and (agent == "supervisor" or not said):
                found.append(f"{agent} sees {secret} the customer has not told it")
    # The canary was really there for the customer, and customer-held facts were really learned by tier 1.
    assert any(agent == "customer" and SECRET in text for agent, text, _ in seen)
    for secret in _customer_secrets(task)[1:]:
        assert any(agent == "tier1" and secret in text for agent, text, _ in seen), (task.id, secret)
    return found


@pytest.mark.parametrize("family", FAMILIES)
def test_no_role_sees_another_roles_hidden_facts(canary_world: CanaryTeam, family: str) -> None:
    for seed in (0, 1, 2):
        task = canary_world.task(family, seed)
        assert _scan(canary_world, task) == [], task.id


class LeakyTeam(CanaryTeam):
    """A canary team whose inboxes show every message to everyone: the scan must catch it."""

    def inbox(self, session: Session, role: str) -> dict[str, Any]:
        out = super().inbox(session, role)
        out["debug"] = {
            "codes": [r[0] for r in session.db.execute("SELECT code FROM verification_codes")],
            "all": [r[0] for r in session.db.execute("SELECT body FROM team_messages")],
        }
        return out


def test_the_scan_catches_a_leaky_seat() -> None:
    world = LeakyTeam()
    found = _scan(world, world.task("team_verify_identity", 0))
    assert any("tier1 sees" in f and "has not told it" in f for f in found)
    assert any("supervisor sees" in f for f in found)
    found = _scan(world, world.task("team_refund_approval", 0))
    assert any("the customer sees the staff's" in f for f in found)


def test_staff_reads_never_show_hidden_columns(canary_world: CanaryTeam) -> None:
    """Every read tool of every seat, on every record of the task: no pin, no risk score, no grader data,
    and the customer's private facts only in the customer's own observation."""
    for family in FAMILIES:
        task = canary_world.task(family, 0)
        par = helpdesk_v0.parallel_env(world=canary_world, max_cycles=200)
        par.reset(options={"task": task})
        email = canary_world.image.query("SELECT email FROM customers WHERE id=?", (task.customer_id,))[0][0]
        ids: dict[str, Any] = {"customer_id": task.customer_id, "ticket_id": task.scope[0][1], "query": email}
        ids["article_id"] = 1
        ids["order_id"] = canary_world.image.query(
            "SELECT MIN(id) FROM orders WHERE customer_id=?", (task.customer_id,)
        )[0][0]
        for kind, i in task.scope:
            if kind == "order":
                ids["order_id"] = i
        texts = []
        for agent in par.agents:
            for name in par.tools(agent):
                spec = canary_world.tools_by_name[name]
                if spec.kind != "read":
                    continue
                args = {p.name: ids[p.name] for p in spec.params if p.name in ids}
                obs, *_ = par.step({agent: {"tool": name, "args": args}})
                texts.append((agent, _text(obs[agent])))
                assert json.loads(decode_text(obs[agent]["observation"]["last_result"])).get("error") is None, name
        for agent, text in texts:
            for canary in (PIN, str(RISK), GRADER):
                assert canary not in text
            assert agent == "customer" or SECRET not in text
        assert any(email in text for agent, text in texts if agent != "customer")  # the reads opened the records


# -- bad actions are error observations, never exceptions or state changes ---------------------


def _bad_actions(par: HelpdeskTeamParallel, agent: str) -> list[Any]:
    others = [t for a in par.possible_agents if a != agent for t in par.tools(a) if t not in par.tools(agent)]
    n = len(par.tools(agent))
    out: list[Any] = [
        {"tool": "no_such_tool", "args": "{}"},
        {"tool": others[0], "args": {"ticket_id": 1}},
        {"tool": n + 1, "args": "{}"},
        {"tool": -3, "args": "{}"},
        {"tool": True, "args": "{}"},
        {"tool": np.int64(1), "args": "{not json"},
        {"tool": 1, "args": "[1, 2, 3]"},
        {"tool": 1, "args": {"__no_such_argument__": 1}},
        {"tool": 1, "args": "x" * 100_000},
        {"tool": 1, "args": 12345},
        {"tool": 1, "args": '{"ticket_id": 1e308, "order_id": -1, "customer_id": true}'},
        "'; DROP TABLE customers; --",
        12.5,
        [1, 2],
        ToolCall("respond", {}),
    ]
    for i, name in enumerate(par.tools(agent), start=1):
        spec = WORLD.tools_by_name[name]
        required = [p for p in spec.params if p.required]
        if required:
            out.append({"tool": i, "args": {}})  # missing arguments
            wrong = {p.name: {"nested": ["object"]} for p in required}
            out.append({"tool": name, "args": wrong})  # wrong types
            absent = {p.name: 10**12 if p.schema.get("type") == "integer" else "" for p in required}
            out.append({"tool": name, "args": absent})  # records that do not exist, empty values
    return out


@pytest.mark.parametrize("family", ["team_escalation", "team_verify_identity"])
def test_bad_actions_are_error_observations_that_change_nothing(family: str) -> None:
    task = WORLD.task(family, 0)
    par = helpdesk_v0.parallel_env(max_cycles=10_000)
    par.reset(options={"task": task})
    session = par.episode.session
    for agent in list(par.agents):
        for bad in _bad_actions(par, agent):
            before, touched = session.state_hash(), session.touched()
            obs, rewards, term, trunc, infos = par.step({agent: bad})
            assert session.state_hash() == before and session.touched() == touched, (agent, bad)
            assert infos[agent]["ok"] is False and infos[agent]["error"]["code"], (agent, bad)
            result = json.loads(decode_text(obs[agent]["observation"]["last_result"]))
            assert set(result["error"]) >= {"code", "message"}
            assert not any(term.values()) and not any(trunc.values())
            assert all(r == 0.0 for r in rewards.values())
    # Seats hold: nothing an agent was not allowed to call reached the session.
    assert all(ep.tool in par.tools(ep.role) for ep in par.episode.turns if ep.step is not None)


def test_a_bad_action_in_the_aec_env_is_an_error_observation() -> None:
    env = helpdesk_v0.env(max_cycles=10)
    env.reset(options={"task_id": "team_wrong_order/3"})
    session = env.unwrapped.episode.session
    before = session.state_hash()
    for _ in range(3):
        agent = env.agent_selection
        env.step({"tool": "decide_approval" if agent != "supervisor" else "refund_lost_parcel", "args": {}})
        assert env.infos[agent]["error"]["code"] == "not_permitted"
        obs = env.observe(agent)
        assert "not_permitted" in decode_text(obs["observation"]["last_result"])
    assert session.state_hash() == before


# -- determinism across processes -----------------------------------------------------------


def digest() -> str:
    """A hash of random-action and gold-team episodes: observations, rewards, terminations, verdicts."""
    h = hashlib.sha256()
    par = helpdesk_v0.parallel_env(max_cycles=8)
    for seed in (0, 7):
        obs, _ = par.reset(seed=seed)
        for i, agent in enumerate(par.possible_agents):
            par.action_space(agent).seed(100 + i)
        while True:
            for agent in sorted(obs):
                for key, leaf in sorted(obs[agent]["observation"].items()):
                    h.update(f"{agent}/{key}".encode() + np.ascontiguousarray(leaf).tobytes())
            if not par.agents:
                break
            actions = {a: par.action_space(a).sample() for a in par.agents}
            obs, rewards, term, trunc, _ = par.step(actions)
            h.update(json.dumps([rewards, term, trunc], sort_keys=True).encode())
    for family in FAMILIES:
        env, returns = play_aec(WORLD.task(family, 5))
        ep = env.unwrapped.episode
        h.update(json.dumps([returns, ep.verdict.to_dict(), [t.to_dict() for t in ep.turns]], sort_keys=True).encode())
        h.update(ep.session.state_hash().encode())
    return h.hexdigest()


def test_episodes_are_identical_in_another_process_and_hash_seed() -> None:
    here = digest()
    assert digest() == here
    tests = Path(__file__).resolve().parent
    code = f"import sys; sys.path.insert(0, {str(tests)!r}); import test_pettingzoo_team as t; print(t.digest())"
    env = {**os.environ, "PYTHONHASHSEED": "4242" if os.environ.get("PYTHONHASHSEED") != "4242" else "99"}
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        stdin=subprocess.DEVNULL,
        check=True,
    )
    assert out.stdout.strip() == here
