"""The helpdesk team world as a world: it conforms, its verifiers meet every audit
quality bar, its hand-off tools keep the helpdesk's promises (atomic, refused
calls change nothing), and it leaves the single-agent helpdesk untouched."""

from __future__ import annotations

from typing import Any

import pytest

from mirrorworld import make_world
from mirrorworld.audit import audit_verifiers
from mirrorworld.core.session import Session
from mirrorworld.core.task import Task
from mirrorworld.testing import check_world
from mirrorworld.verify import verify
from mirrorworld.worlds.helpdesk import HelpdeskWorld
from mirrorworld.worlds.helpdesk_team import ROLE_TOOLS, ROLES, HelpdeskTeamWorld
from mirrorworld.worlds.helpdesk_team.tools import verification_code

WORLD = make_world("helpdesk_team")
FAMILIES = [f.name for f in WORLD.families]


def _play(session: Session, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    return [session.call(tool, args) for tool, args in calls]


def _replay_until(session: Session, task: Task, tool: str) -> None:
    """Replay the team's gold, each call by its role, up to (not including) the first call of ``tool``."""
    for role, call, _slots in WORLD.team_plan(task):
        if call.tool == tool:
            return
        assert session.call(call.tool, call.args, role=role).ok, call


def _team_gold(task: Task) -> dict[str, dict[str, Any]]:
    """The arguments of each tool's (first) call in the team's gold."""
    out: dict[str, dict[str, Any]] = {}
    for _role, call, _slots in WORLD.team_plan(task):
        if isinstance(call.args, dict):
            out.setdefault(call.tool, dict(call.args))
    return out


def test_the_team_world_conforms() -> None:
    check_world(WORLD, seeds=3)


def test_the_team_world_meets_every_audit_quality_bar() -> None:
    report = audit_verifiers(WORLD, seeds=2, cross_process=False)
    assert report.failed_bars() == []
    for name, fam in report.to_dict()["families"].items():
        assert fam["mutants_total"] - fam["mutants_equivalent"] >= 10, name
        assert fam["null_passes"] == 0, name


def test_identity_and_families() -> None:
    assert WORLD.id == "mirrorworld/HelpdeskTeam-v0"
    assert set(FAMILIES) == {"team_refund_approval", "team_escalation", "team_verify_identity", "team_wrong_order"}
    assert WORLD.task_roles(WORLD.task("team_escalation", 0)) == ("customer", "tier1", "supervisor", "tier2")
    for family in ("team_refund_approval", "team_verify_identity", "team_wrong_order"):
        assert WORLD.task_roles(WORLD.task(family, 0)) == ("customer", "tier1", "supervisor")
    # The content hash covers the helpdesk folder it builds on, so it differs from the helpdesk's.
    assert WORLD.content_hash != HelpdeskWorld().content_hash


def test_role_tools_are_data_covering_every_tool_once_declared() -> None:
    assert tuple(ROLE_TOOLS) == ROLES
    declared = set(WORLD.tool_names)
    seated = {name for names in ROLE_TOOLS.values() for name in names}
    assert seated == declared
    assert "check_email" in ROLE_TOOLS["customer"] and "check_email" not in ROLE_TOOLS["tier1"]
    assert "decide_approval" in ROLE_TOOLS["supervisor"] and "decide_approval" not in ROLE_TOOLS["tier1"]
    assert "refund_lost_parcel" in ROLE_TOOLS["tier2"] and "refund_lost_parcel" not in ROLE_TOOLS["tier1"]
    assert [t.name for t in WORLD.tools if t.kind == "terminal"] == ["respond"]


def test_the_single_agent_helpdesk_is_unchanged() -> None:
    helpdesk = HelpdeskWorld()
    assert "team_messages" not in helpdesk.image.tables
    assert "request_approval" in helpdesk.tool_names and "request_approval" not in WORLD.tool_names
    assert [f.name for f in helpdesk.families][:2] == ["refund_damaged", "refund_with_approval"]


@pytest.mark.parametrize("family", FAMILIES)
def test_every_gold_write_is_needed(family: str) -> None:
    """Dropping any write of the gold (a hand-off included) fails the task: the verifier sees hand-offs."""
    task = WORLD.task(family, 1)
    writes = [i for i, c in enumerate(task.gold) if WORLD.tools_by_name[c.tool].kind == "write"]
    assert writes
    for i in writes:
        with WORLD.session(task) as s:
            for j, call in enumerate(task.gold):
                if j != i:
                    s.call(call.tool, call.args)
            assert not verify(s).passed, f"{family}: dropping {task.gold[i].tool} still passes"


def test_verification_codes_are_seeded_and_only_in_the_customers_mailbox() -> None:
    task = WORLD.task("team_verify_identity", 2)
    cid = task.customer_id
    assert cid is not None
    tid = next(i for kind, i in task.scope if kind == "ticket")
    code = verification_code(WORLD.image.digest, cid, 1)
    with WORLD.session(task) as s:
        sent = s.call("send_verification_code", {"customer_id": cid})
        assert sent.ok and code not in sent.content()
        mailbox = s.call("check_email", {"ticket_id": tid}, role="customer")
        assert code in mailbox.content()
        before = s.state_hash()
        wrong = s.call(
            "propose_account_change",
            {"ticket_id": tid, "customer_id": cid, "field": "email", "new_value": "x@y.example"},
        )
        assert not wrong.ok and wrong.error is not None and wrong.error["rule"] == "identity_verification"
        assert s.state_hash() == before
        bad = s.call("verify_code", {"customer_id": cid, "code": "000000" if code != "000000" else "111111"})
        assert bad.ok and bad.data["verified"] is False
        good = s.call("verify_code", {"customer_id": cid, "code": f" {code} "})
        assert good.ok and good.data["verified"] is True
        # A used code does not verify twice.
        again = s.call("verify_code", {"customer_id": cid, "code": code})
        assert not again.ok and again.error is not None and again.error["code"] == "not_found"


def test_a_change_applies_only_when_the_customer_confirms() -> None:
    task = WORLD.task("team_verify_identity", 0)
    cid = task.customer_id
    with WORLD.session(task) as s:
        _replay_until(s, task, "confirm_change")
        email = s.db.execute("SELECT email FROM customers WHERE id=?", (cid,)).fetchone()[0]
        tid = next(i for kind, i in task.scope if kind == "ticket")
        declined = s.call("confirm_change", {"ticket_id": tid, "change_id": 1, "confirm": False}, role="customer")
        assert declined.ok and declined.data["status"] == "declined"
        assert s.db.execute("SELECT email FROM customers WHERE id=?", (cid,)).fetchone()[0] == email
        twice = s.call("confirm_change", {"ticket_id": tid, "change_id": 1}, role="customer")
        assert not twice.ok and twice.error is not None and twice.error["code"] == "conflict"


def test_lost_parcels_need_a_transfer_and_tier_two() -> None:
    task = WORLD.task("team_escalation", 3)
    order = next(i for kind, i in task.targets if kind == "order")
    tid = next(i for kind, i in task.scope if kind == "ticket")
    with WORLD.session(task) as s:
        before = s.state_hash()
        early = s.call("refund_lost_parcel", {"ticket_id": tid, "order_id": order})
        assert not early.ok and early.error is not None and early.error["rule"] == "lost_parcel"
        refused = s.call("issue_refund", {"order_id": order, "line_id": 1, "amount": "1", "reason": "not_received"})
        assert not refused.ok
        assert s.state_hash() == before
        assert s.call("transfer_to_tier2", {"ticket_id": tid, "summary": "Lost parcel."}).ok
        again = s.call("transfer_to_tier2", {"ticket_id": tid, "summary": "Lost parcel."})
        assert not again.ok and again.error is not None and again.error["code"] == "conflict"
        done = s.call("refund_lost_parcel", {"ticket_id": tid, "order_id": order})
        assert done.ok and done.data["status"] == "refunded"


def test_a_supervisor_approving_a_policy_breaking_refund_breaks_a_hard_rule() -> None:
    task = WORLD.task("team_refund_approval", 0)
    gold = _team_gold(task)
    request = gold["request_supervisor_approval"]
    greedy = {**request, "amount": f"{float(request['amount']) + 50:.2f}"}
    with WORLD.session(task) as s:
        assert s.call("request_supervisor_approval", greedy, role="tier1").ok
        approved = s.call("decide_approval", {**gold["decide_approval"], "decision": "approve"}, role="supervisor")
        assert approved.ok
        assert [v.rule for v in s.events[-1].violations] == ["approval_policy"]
        assert s.events[-1].violations[0].hard
    with WORLD.session(task) as s:
        assert s.call("request_supervisor_approval", greedy, role="tier1").ok
        denied = s.call("decide_approval", {**gold["decide_approval"], "decision": "deny"}, role="supervisor")
        assert denied.ok and s.events[-1].violations == ()
        refund = s.call("issue_refund", gold["issue_refund"])
        assert not refund.ok  # a denied approval refunds nothing


def test_decisions_guard_against_the_wrong_request() -> None:
    task = WORLD.task("team_refund_approval", 1)
    gold = _team_gold(task)
    decide = gold["decide_approval"]
    with WORLD.session(task) as s:
        assert s.call("request_supervisor_approval", gold["request_supervisor_approval"], role="tier1").ok
        before = s.state_hash()
        wrong = s.call("decide_approval", {**decide, "order_id": decide["order_id"] + 1}, role="supervisor")
        assert not wrong.ok and s.state_hash() == before
        assert s.call("decide_approval", decide, role="supervisor").ok
        twice = s.call("decide_approval", decide, role="supervisor")
        assert not twice.ok and twice.error is not None and twice.error["code"] == "conflict"


def test_nothing_is_said_in_a_chat_the_customer_left() -> None:
    task = WORLD.task("team_wrong_order", 0)
    tid = next(i for kind, i in task.scope if kind == "ticket")
    with WORLD.session(task) as s:
        assert s.call("leave_chat", {"ticket_id": tid, "reason": "Too slow."}, role="customer").ok
        assert WORLD.contact_over(s)
        before = s.state_hash()
        for role, tool, args in (
            ("tier1", "ask_customer", {"ticket_id": tid, "topic": "other", "question": "Still there?"}),
            ("customer", "message_agent", {"ticket_id": tid, "message": "Hello?"}),
            ("customer", "leave_chat", {"ticket_id": tid, "reason": "again"}),
        ):
            result = s.call(tool, args, role=role)
            assert not result.ok and result.error is not None and result.error["rule"] == "chat_closed"
        assert s.state_hash() == before


def test_messages_come_from_whoever_holds_the_contact() -> None:
    task = WORLD.task("team_escalation", 0)
    tid = next(i for kind, i in task.scope if kind == "ticket")
    with WORLD.session(task) as s:
        _play(s, [("ask_customer", {"ticket_id": tid, "topic": "details", "question": "Which parcel?"})])
        s.call("message_agent", {"ticket_id": tid, "message": "The one I ordered."})
        s.call("transfer_to_tier2", {"ticket_id": tid, "summary": "Lost parcel."})
        s.call("ask_customer", {"ticket_id": tid, "topic": "details", "question": "Tier 2 here, any news?"})
        s.call("message_agent", {"ticket_id": tid, "message": "Nothing."})
        rows = s.db.execute("SELECT kind, sender, recipient FROM team_messages ORDER BY id").fetchall()
    assert rows == [
        ("question", "tier1", "customer"),
        ("reply", "customer", "tier1"),
        ("transfer", "tier1", "tier2"),
        ("question", "tier2", "customer"),
        ("reply", "customer", "tier2"),
    ]


def test_team_tables_belong_to_the_task_entities() -> None:
    assert WORLD.owner("team_messages", {"ticket_id": 5}) == ("ticket", 5)
    assert WORLD.owner("approval_requests", {"order_id": 7}) == ("order", 7)
    assert WORLD.owner("verification_codes", {"customer_id": 3}) == ("customer", 3)
    assert WORLD.owner("account_changes", {"customer_id": 3}) == ("customer", 3)
    assert WORLD.owner("orders", {"id": 9}) == ("order", 9)


def test_a_second_build_is_identical() -> None:
    twin = HelpdeskTeamWorld()
    assert twin.image.digest == WORLD.image.digest
    for family in FAMILIES:
        assert twin.task(family, 4).digest() == WORLD.task(family, 4).digest()


def test_the_gymnasium_id_of_the_team_world_is_its_world_id() -> None:
    import gymnasium

    from mirrorworld.core.registry import Registry, default

    registry = Registry()
    registry.register("helpdesk_team", HelpdeskTeamWorld)
    assert registry.env_id("helpdesk_team") == WORLD.id == default.env_id("helpdesk_team")
    assert WORLD.id in gymnasium.registry
