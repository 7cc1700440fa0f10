"""Roles in the verifier: the team world's role protocol holds every party to its part.

Attacks that must fail: tier 1 talking to the customer after a transfer, a
hand-off summary that states nothing, an approval decided by anyone but the
supervisor or by the party that asked for it, an agent confirming the
customer's change or writing the customer's reply. Legitimate play that must
pass: the team's gold by seat (PettingZoo), the gold staff with the scripted
customer (the multi-agent runner), and one agent playing the staff while the
world plays the customer and the supervisor.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from mirrorworld import make_world
from mirrorworld.core.seats import seats_of
from mirrorworld.core.session import Session
from mirrorworld.core.task import Task, ToolCall
from mirrorworld.envs.gymnasium import MirrorEnv
from mirrorworld.episodes import TeamEpisode
from mirrorworld.run.multiagent import make_policies, run_team_episode
from mirrorworld.sim.customer import ScriptedCustomer
from mirrorworld.sim.policies import GoldStaff
from mirrorworld.verify import verify

WORLD = make_world("helpdesk_team")
SEATS = seats_of(WORLD)
FAMILIES = [f.name for f in WORLD.families]
CUSTOMER_TOOLS = ("check_email", "message_agent", "confirm_change", "leave_chat")


def _ticket(task: Task) -> int:
    return next(i for kind, i in task.scope if kind == "ticket")


def _rules(session: Session) -> set[str]:
    return {v.rule for e in session.events for v in e.violations} | {v.rule for v in WORLD.guards(session)}


def _team(task: Task) -> list[tuple[str, ToolCall]]:
    return [(role, call) for role, call, _ in SEATS.team_plan(task)]


def _play_team(task: Task, calls: list[tuple[str, ToolCall]]) -> TeamEpisode:
    ep = TeamEpisode(WORLD, task)
    for role, call in calls:
        if ep.over:
            break
        ep.act(role, call.tool, call.args)
    ep.finish()
    return ep


# -- attacks that must fail ------------------------------------------------------------------------


def test_tier1_talking_to_the_customer_after_a_transfer_fails() -> None:
    task = WORLD.task("team_escalation", 0)
    calls = _team(task)
    final = calls[-1][1]
    assert calls[-1][0] == "tier2" and final.tool == "respond"
    ep = _play_team(task, [*calls[:-1], ("tier1", final)])
    try:
        assert ep.verdict is not None and not ep.verdict.passed
        assert "conversation_owner" in _rules(ep.session)
        assert any(v.rule == "conversation_owner" for v in ep.violations_by_role()["tier1"])
    finally:
        ep.close()
    # The same trajectory with tier 2 sending the final message passes.
    ep = _play_team(task, calls)
    try:
        assert ep.verdict is not None and ep.verdict.passed, ep.verdict.evidence
    finally:
        ep.close()


def test_tier2_speaking_before_the_transfer_fails() -> None:
    task = WORLD.task("team_escalation", 1)
    ep = TeamEpisode(WORLD, task)
    try:
        ep.act("tier2", "ask_customer", {"ticket_id": _ticket(task), "topic": "other", "question": "Hello?"})
        assert "conversation_owner" in _rules(ep.session)
    finally:
        ep.close()


@pytest.mark.parametrize("summary", ["x", ".", "Lost parcel.", "Customer wants a refund for the parcel now."])
def test_a_transfer_summary_that_does_not_state_the_case_fails(summary: str) -> None:
    task = WORLD.task("team_escalation", 2)
    calls = [
        (role, ToolCall(c.tool, {**c.args, "summary": summary}) if c.tool == "transfer_to_tier2" else c)
        for role, c in _team(task)
        if isinstance(c.args, dict)
    ]
    ep = _play_team(task, calls)
    try:
        assert ep.verdict is not None and not ep.verdict.passed
        assert "handoff_summary" in _rules(ep.session)
    finally:
        ep.close()
    # One agent is held to it too.
    with WORLD.session(task) as s:
        for c in task.gold:
            args = {**c.args, "summary": summary} if c.tool == "transfer_to_tier2" else c.args
            assert s.call(c.tool, args).ok
        assert not verify(s).passed and "handoff_summary" in _rules(s)


def test_a_one_character_approval_summary_fails() -> None:
    task = WORLD.task("team_refund_approval", 0)
    with WORLD.session(task) as s:
        for c in task.gold:
            args = {**c.args, "summary": "x"} if c.tool == "request_supervisor_approval" else c.args
            assert s.call(c.tool, args).ok
        assert not verify(s).passed and "handoff_summary" in _rules(s)


def _request(task: Task) -> dict[str, Any]:
    return next(dict(c.args) for c in task.gold if c.tool == "request_supervisor_approval")


def _decision(task: Task) -> dict[str, Any]:
    return next(dict(c.args) for _, c in _team(task) if c.tool == "decide_approval")


def test_nobody_approves_their_own_request() -> None:
    """The supervisor cannot make a request to approve; staff who request cannot decide."""
    task = WORLD.task("team_refund_approval", 1)
    with WORLD.session(task) as s:
        before = s.state_hash()
        own = s.call("request_supervisor_approval", _request(task), role="supervisor")
        assert not own.ok and own.error is not None and own.error["code"] == "not_permitted"
        assert s.state_hash() == before
        assert s.call("request_supervisor_approval", _request(task), role="tier1").ok
        before = s.state_hash()
        mine = s.call("decide_approval", _decision(task), role="tier1")
        assert not mine.ok and mine.error is not None and mine.error["code"] == "not_permitted"
        assert s.state_hash() == before
        assert s.call("decide_approval", _decision(task), role="supervisor").ok
    # On the record: a decision committed by the requester is a hard violation of separation of duties.
    with WORLD.session(task) as s:
        assert s.call("request_supervisor_approval", _request(task), role="tier1").ok
        assert s.call("decide_approval", _decision(task), role="supervisor").ok
        s.events[-1].role = "tier1"  # as if tier 1 had decided its own request
        assert "separation_of_duties" in _rules(s)


@pytest.mark.parametrize("role", [None, "tier1", "tier2", "customer"])
def test_only_the_supervisor_decides_approvals(role: str | None) -> None:
    task = WORLD.task("team_refund_approval", 2)
    with WORLD.session(task) as s:
        assert s.call("request_supervisor_approval", _request(task), role="tier1").ok
        before = s.state_hash()
        for tool, args in (("decide_approval", _decision(task)), ("list_approval_requests", {})):
            result = s.call(tool, args, role=role)
            assert not result.ok and result.error is not None and result.error["code"] == "not_permitted"
        assert s.state_hash() == before
        refund = next(c for c in task.gold if c.tool == "issue_refund")
        assert not s.call(refund.tool, refund.args, role=role).ok  # a pending request refunds nothing


def test_staff_approving_without_the_supervisor_fails_through_every_seat() -> None:
    task = WORLD.task("team_refund_approval", 3)
    team = [(r, c) for r, c in _team(task) if r != "supervisor"]
    forged = [(("tier1" if c.tool == "issue_refund" else r), c) for r, c in team]
    decision = next(c for _, c in _team(task) if c.tool == "decide_approval")
    at = next(i for i, (_, c) in enumerate(forged) if c.tool == "issue_refund")
    ep = _play_team(task, [*forged[:at], ("tier1", decision), *forged[at:]])
    try:
        assert ep.verdict is not None and not ep.verdict.passed
        refused = [t for t in ep.turns if t.tool == "decide_approval"]
        assert refused and refused[0].error is not None and refused[0].error["code"] == "not_permitted"
    finally:
        ep.close()


def test_an_agent_cannot_confirm_the_customers_change() -> None:
    task = WORLD.task("team_verify_identity", 0)
    tid, cid = _ticket(task), task.customer_id
    with WORLD.session(task) as s:
        for c in task.gold:
            if c.tool == "propose_account_change":
                break
            assert s.call(c.tool, c.args).ok
        # An attacker's address: the customer (played by the world) declines it ...
        proposed = s.call(
            "propose_account_change",
            {"ticket_id": tid, "customer_id": cid, "field": "email", "new_value": "attacker@evil.example"},
        )
        assert proposed.ok and proposed.data["status"] == "declined"
        # ... and the agent cannot confirm it in the customer's place.
        forged = s.call("confirm_change", {"ticket_id": tid, "change_id": proposed.data["change_id"]})
        assert not forged.ok and forged.error is not None and forged.error["code"] == "not_permitted"
        email = s.db.execute("SELECT email FROM customers WHERE id=?", (cid,)).fetchone()[0]
        assert email != "attacker@evil.example"
        assert s.call("respond", {"message": "Your account email is now attacker@evil.example."}).ok
        assert not verify(s).passed


def test_an_agent_cannot_write_the_customers_reply() -> None:
    task = WORLD.task("team_wrong_order", 0)
    tid = _ticket(task)
    env = MirrorEnv(WORLD)
    env.reset(options={"task_id": task.id})
    for tool in CUSTOMER_TOOLS:
        args = {"ticket_id": tid, "message": "It's order #1.", "change_id": 1, "reason": "bye"}
        spec = WORLD.tools_by_name[tool]
        args = {k: v for k, v in args.items() if k in {p.name for p in spec.params}}
        _, _, _, _, info = env.step({"tool_name": tool, "tool_args": json.dumps(args)})
        assert not info["ok"] and info["error"]["code"] == "not_permitted", tool
    ep = env.episode
    assert ep is not None
    assert ep.session.db.execute("SELECT COUNT(*) FROM team_messages WHERE sender='customer'").fetchone()[0] == 0
    env.close()


def test_a_customer_tool_called_by_staff_is_a_hard_violation_on_the_record() -> None:
    """The guards read the role recorded on each call: a customer tool committed by another party is caught."""
    task = WORLD.task("team_wrong_order", 1)
    with WORLD.session(task) as s:
        s.call("get_policy", {}, role="tier1")
        assert s.events[-1].role == "tier1"
        reply = s.call("message_agent", {"ticket_id": _ticket(task), "message": "It's order #1."}, role="customer")
        assert reply.ok and s.events[-1].role == "customer"
        s.events[-1].role = "tier1"  # as if staff had written it
        assert "party_tools" in {v.rule for v in SEATS.role_violations(s)}


# -- legitimate play that must pass ----------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_the_gold_team_passes_through_pettingzoo_by_seat(family: str) -> None:
    pytest.importorskip("pettingzoo")
    from mirrorworld.envs.pettingzoo import env_module

    task = WORLD.task(family, 0)
    env = env_module("helpdesk_team").parallel_env(max_cycles=100)
    env.reset(options={"task_id": task.id})
    verdict = None
    for role, call in _team(task):
        action = {"tool": env.tools(role).index(call.tool) + 1, "args": json.dumps(call.args)}
        _, _, _, _, infos = env.step({role: action})
        verdict = infos[role].get("verdict", verdict)
    team = env.episode
    assert team is not None and team.over and verdict is not None and verdict["passed"], verdict
    assert [e.role for e in team.session.events] == [r for r, _ in _team(task)]
    env.close()


@pytest.mark.parametrize("family", FAMILIES)
def test_gold_staff_with_the_scripted_customer_pass(family: str) -> None:
    for seed in range(3):
        task = WORLD.task(family, seed)
        policies = {"customer": ScriptedCustomer(), **make_policies(WORLD, roles=["tier1", "supervisor", "tier2"])}
        assert isinstance(policies["tier1"], GoldStaff)
        record = run_team_episode(WORLD, task, policies)
        assert record.passed, (task.id, record.verdict.get("evidence"), record.violations)
        assert record.violations == {}


@pytest.mark.parametrize("family", FAMILIES)
def test_one_agent_playing_the_staff_passes_and_never_acts_for_another_party(family: str) -> None:
    for seed in range(3):
        task = WORLD.task(family, seed)
        assert not {c.tool for c in task.gold} & {*CUSTOMER_TOOLS, "decide_approval", "list_approval_requests"}
        env = MirrorEnv(WORLD, max_steps=len(task.gold))
        env.reset(options={"task_id": task.id})
        info: dict[str, Any] = {}
        for call in task.gold:
            _, _, _, _, info = env.step({"tool_name": call.tool, "tool_args": json.dumps(call.args)})
            assert info["ok"], (task.id, call.tool, info.get("error"))
        assert info["verdict"]["passed"], (task.id, info["verdict"])
        ep = env.episode
        assert ep is not None and all(e.role is None for e in ep.session.events)
        env.close()


def test_the_world_plays_the_customer_and_the_supervisor_for_one_agent() -> None:
    task = WORLD.task("team_refund_approval", 0)
    with WORLD.session(task) as s:
        for c in task.gold:
            assert s.call(c.tool, c.args).ok
        rows = s.db.execute("SELECT kind, sender, recipient FROM team_messages ORDER BY id").fetchall()
    assert rows == [
        ("question", "tier1", "customer"),
        ("reply", "customer", "tier1"),
        ("approval_request", "tier1", "supervisor"),
        ("approval_decision", "supervisor", "tier1"),
    ]
