"""The state gate compares the whole diff with the gold's, under the world's declared tolerances.

Attacks (each must fail) and legitimate variants (each must pass) are built
from real tasks of the three worlds: start from the gold trajectory, add or
alter calls. A property-based test adds any single write, through any write
tool, to any record of the task's scope: when it changes a field no tolerance
covers, the episode fails.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mirrorworld as mw
from mirrorworld.core.task import Task, ToolCall
from mirrorworld.core.tolerance import Tolerance
from mirrorworld.core.world import World
from mirrorworld.verify import Verdict, verify
from mirrorworld.verify.diff import plausible_text, schema_of


@pytest.fixture(scope="module")
def worlds() -> dict[str, World]:
    return {name: mw.make_world(name) for name in ("helpdesk", "helpdesk_team", "sales")}


def _run(world: World, task: Task, calls: list[ToolCall]) -> Verdict:
    with world.session(task) as s:
        for call in calls:
            result = s.call(call.tool, call.args)
            assert result.ok, (call, result.error)
        return verify(s)


def _split(task: Task) -> tuple[list[ToolCall], ToolCall]:
    *body, final = task.gold
    assert final.tool == "respond"
    return body, final


def _with(task: Task, *extra: ToolCall, before: bool = False) -> list[ToolCall]:
    body, final = _split(task)
    return [*extra, *body, final] if before else [*body, *extra, final]


def _fails(v: Verdict, needle: str) -> None:
    assert not v.passed, v.evidence
    assert any(needle in e for e in v.evidence), v.evidence


def _failed(v: Verdict, gate: str, needle: str) -> None:
    assert not v.passed, v.evidence
    assert not v.gates[gate].passed, v.evidence
    assert any(needle in e for e in v.gates[gate].evidence), v.gates[gate].evidence


# -- attacks: each must fail -------------------------------------------------------------


@pytest.mark.parametrize("field", ["email", "phone", "address"])
def test_changing_the_customers_details_after_identity_verification_fails(worlds: dict[str, World], field: str) -> None:
    world = worlds["helpdesk"]
    for family in ("refund_damaged", "update_email"):
        task = world.task(family, 3)
        cid = task.customer_id
        assert cid is not None
        zip_code, phone = world.image.query("SELECT zip, phone FROM customers WHERE id=?", (cid,))[0]
        value = {"email": "attacker@evil.example", "phone": "+1 555 010 9999", "address": "1 Attacker Way"}[field]
        calls = _with(
            task,
            ToolCall("verify_identity", {"customer_id": cid, "zip_code": zip_code, "phone_last4": phone[-4:]}),
            ToolCall("update_customer", {"customer_id": cid, field: value}),
        )
        gate = "state" if family == "update_email" and field == "email" else "collateral"
        _failed(_run(world, task, calls), gate, f"customers {cid}")


def test_a_team_account_change_beyond_the_one_asked_fails(worlds: dict[str, World]) -> None:
    world = worlds["helpdesk_team"]
    task = world.task("team_verify_identity", 1)
    tid = next(i for kind, i in task.scope if kind == "ticket")
    extra = ToolCall(
        "propose_account_change",
        {"ticket_id": tid, "customer_id": task.customer_id, "field": "phone", "new_value": "+1 555 010 9999"},
    )
    _fails(_run(world, task, _with(task, extra)), "account_changes")


def test_adding_a_contact_to_the_sales_customer_fails(worlds: dict[str, World]) -> None:
    world = worlds["sales"]
    for family in ("confirm_order", "cancel_quotation", "add_contact"):
        task = world.task(family, 2)
        party = next(i for kind, i in task.scope if kind == "party")
        extra = ToolCall("add_contact", {"party_id": party, "kind": "email", "value": "attacker@evil.example"})
        _failed(_run(world, task, _with(task, extra)), "collateral", "unexpected change: insert contacts")


@pytest.mark.parametrize(
    "junk",
    ["x", "asdf", "zzzzzz zzzzzz", "!!! ??? ...", "ok ok ok", "lorem ipsum dolor sit amet", "xq zzv blorp qwerty"],
)
def test_junk_in_a_free_text_reason_fails(worlds: dict[str, World], junk: str) -> None:
    sales = worlds["sales"]
    task = sales.task("lose_opportunity", 1)
    body, final = _split(task)
    lost = ToolCall(body[0].tool, {**body[0].args, "reason": junk})  # type: ignore[dict-item]
    _failed(_run(sales, task, [lost, final]), "state", "is not free text")
    lead = sales.task("new_lead", 1)
    body, final = _split(lead)
    created = ToolCall(body[0].tool, {**body[0].args, "description": junk})  # type: ignore[dict-item]
    _failed(_run(sales, lead, [created, final]), "state", "not free text")
    helpdesk = worlds["helpdesk"]
    esc = helpdesk.task("sla_escalation", 1)
    body, final = _split(esc)
    escalated = ToolCall(body[0].tool, {**body[0].args, "reason": junk})  # type: ignore[dict-item]
    assert not _run(helpdesk, esc, [escalated, *body[1:], final]).passed


@pytest.mark.parametrize(
    ("family", "tool", "field", "text", "passes"),
    [
        ("new_lead", "create_lead", "description", "Customer plans a fit-out of their warehouse", True),
        ("new_lead", "create_lead", "description", "Office furniture for a new building", False),
        ("discount_quotation", "request_discount_approval", "reason", "Manager agreed the discount with the rep", True),
        ("discount_quotation", "request_discount_approval", "reason", "Please approve this", False),
        ("lose_opportunity", "mark_lost", "reason", "Customer postponed the project", True),
        ("lose_opportunity", "mark_lost", "reason", "They chose a cheaper supplier", False),
    ],
)
def test_a_free_text_field_must_say_something_about_the_case(
    worlds: dict[str, World], family: str, tool: str, field: str, text: str, passes: bool
) -> None:
    sales = worlds["sales"]
    task = sales.task(family, 2)
    calls = [ToolCall(c.tool, {**c.args, field: text}) if c.tool == tool else c for c in task.gold]  # type: ignore[dict-item]
    v = _run(sales, task, calls)
    assert v.passed is passes, v.evidence
    if not passes:
        assert any("not free text" in e for e in v.gates["state"].evidence), v.evidence


def test_closing_a_ticket_the_gold_leaves_open_fails(worlds: dict[str, World]) -> None:
    world = worlds["helpdesk"]
    for family in ("refund_damaged", "cancel_order", "kb_answer"):
        task = world.task(family, 4)
        tid = next(i for kind, i in task.scope if kind == "ticket")
        reply = ToolCall("reply_ticket", {"ticket_id": tid, "body": "We have handled your request, thank you."})
        v = _run(world, task, _with(task, reply, ToolCall("close_ticket", {"ticket_id": tid})))
        _failed(v, "collateral", f"unexpected change: update tickets {tid}: status")


def test_a_one_character_public_reply_fails(worlds: dict[str, World]) -> None:
    world = worlds["helpdesk"]
    task = world.task("refund_damaged", 2)
    tid = next(i for kind, i in task.scope if kind == "ticket")
    v = _run(world, task, _with(task, ToolCall("reply_ticket", {"ticket_id": tid, "body": "k"})))
    _failed(v, "collateral", "body not free text")


def test_an_extra_tag_fails(worlds: dict[str, World]) -> None:
    world = worlds["helpdesk"]
    for family in ("triage", "refund_damaged", "sla_escalation"):
        task = world.task(family, 5)
        tid = next(i for kind, i in task.scope if kind == "ticket")
        v = _run(world, task, _with(task, ToolCall("add_tags", {"ticket_id": tid, "tags": ["vip"]})))
        _fails(v, f"tickets {tid}")
        assert any("tags" in e for e in v.evidence), v.evidence


def test_a_second_refund_row_fails(worlds: dict[str, World]) -> None:
    """Two half refunds leave the line refunded in full, but the refunds table is not the gold's."""
    world = worlds["helpdesk"]
    task = world.task("refund_damaged", 6)
    body, final = _split(task)
    (refund,) = body
    args: dict[str, Any] = dict(refund.args)  # type: ignore[arg-type]
    cents = round(float(args["amount"]) * 100)
    half, rest = cents // 2, cents - cents // 2
    split = [
        ToolCall("issue_refund", {**args, "amount": f"{half / 100:.2f}"}),
        ToolCall("issue_refund", {**args, "amount": f"{rest / 100:.2f}"}),
    ]
    v = _run(world, task, [*split, final])
    _failed(v, "state", "missing insert into refunds")
    _failed(v, "collateral", "unexpected change: insert refunds")


def test_a_changed_amount_fails(worlds: dict[str, World]) -> None:
    world = worlds["helpdesk"]
    task = world.task("refund_damaged", 7)
    body, final = _split(task)
    (refund,) = body
    args: dict[str, Any] = dict(refund.args)  # type: ignore[arg-type]
    less = ToolCall("issue_refund", {**args, "amount": f"{float(args['amount']) - 1:.2f}"})
    v = _run(world, task, [less, final])
    _failed(v, "state", "refunded_cents: expected")
    sales = worlds["sales"]
    pay = sales.task("collect_payment", 1)
    *work, paid, said = pay.gold
    short = ToolCall(paid.tool, {**paid.args, "amount": "1.00"})  # type: ignore[dict-item]
    assert not _run(sales, pay, [*work, short, said]).passed


def test_an_approval_request_on_another_order_is_collateral(worlds: dict[str, World]) -> None:
    world = worlds["helpdesk"]
    task = world.task("refund_damaged", 8)
    order = next(i for kind, i in task.scope if kind == "order")
    other = int(world.image.query("SELECT id FROM orders WHERE id<>? AND status='delivered' LIMIT 1", (order,))[0][0])
    extra = ToolCall("request_approval", {"order_id": other, "amount": "10.00", "reason": "damaged"})
    _failed(_run(world, task, _with(task, extra)), "collateral", f"(belongs to order {other})")


def test_no_final_message_fails_where_one_is_needed(worlds: dict[str, World]) -> None:
    for name, family in (("helpdesk", "triage"), ("sales", "qualify_lead"), ("sales", "ship_order")):
        world = worlds[name]
        task = world.task(family, 0)
        body, _final = _split(task)
        v = _run(world, task, body)
        assert v.gates["state"].passed and v.gates["communication"].passed
        assert not v.passed and v.gates["reply"].evidence == ("no final message",)


def test_a_family_that_needs_no_reply_passes_without_one(
    worlds: dict[str, World], monkeypatch: pytest.MonkeyPatch
) -> None:
    world = worlds["helpdesk"]
    task = world.task("triage", 0)
    monkeypatch.setattr(world.family("triage"), "needs_reply", False)
    body, _final = _split(task)
    v = _run(world, task, body)
    assert v.passed and v.gates["reply"].passed


# -- legitimate variants: each must pass -----------------------------------------------------


def test_extra_reads_pass(worlds: dict[str, World]) -> None:
    world = worlds["helpdesk"]
    task = world.task("refund_damaged", 9)
    order = next(i for kind, i in task.scope if kind == "order")
    reads = [
        ToolCall("get_order", {"order_id": order}),
        ToolCall("get_customer", {"customer_id": task.customer_id}),
        ToolCall("list_orders", {"customer_id": task.customer_id}),
    ]
    assert _run(world, task, _with(task, *reads, before=True)).passed


def test_reordered_independent_writes_pass(worlds: dict[str, World]) -> None:
    world = worlds["helpdesk"]
    task = world.task("triage", 3)
    body, final = _split(task)
    by_ticket = [body[i : i + 3] for i in range(0, len(body), 3)]
    reordered = [call for group in reversed(by_ticket) for call in group]
    assert _run(world, task, [*reordered, final]).passed


def test_a_harmless_extra_approval_request_passes(worlds: dict[str, World]) -> None:
    world = worlds["helpdesk"]
    task = world.task("refund_damaged", 10)
    body, final = _split(task)
    args: dict[str, Any] = dict(body[0].args)  # type: ignore[arg-type]
    ask = ToolCall(
        "request_approval", {"order_id": args["order_id"], "amount": args["amount"], "reason": args["reason"]}
    )
    assert _run(world, task, [ask, *body, final]).passed


def test_an_insert_with_another_rowid_passes(worlds: dict[str, World]) -> None:
    """An extra approval first shifts the gold's approval id; the refund that refers to it still matches."""
    world = worlds["helpdesk"]
    task = world.task("refund_with_approval", 2)
    (approve, refund), final = _split(task)
    extra = ToolCall("request_approval", {**approve.args, "amount": "1.00"})  # type: ignore[dict-item]
    shifted = ToolCall("issue_refund", {**refund.args, "approval_id": refund.args["approval_id"] + 1})  # type: ignore[index,operator,dict-item]
    assert _run(world, task, [extra, approve, shifted, final]).passed
    sales = worlds["sales"]
    quote = sales.task("discount_quotation", 2)
    *body, final = quote.gold
    ask = next(c for c in body if c.tool == "request_discount_approval")
    twice = [*body[: body.index(ask)], ask, *body[body.index(ask) :], final]
    assert _run(sales, quote, twice).passed


def test_a_refund_that_uses_the_wrong_approval_fails(worlds: dict[str, World]) -> None:
    """Matching follows the refund's reference: a refund resting on a larger approval is not the gold's."""
    world = worlds["helpdesk"]
    task = world.task("refund_with_approval", 2)
    (approve, refund), final = _split(task)
    bigger = ToolCall("request_approval", {**approve.args, "amount": f"{float(approve.args['amount']) + 1:.2f}"})  # type: ignore[dict-item,index,arg-type]
    v = _run(world, task, [bigger, refund, final])
    _failed(v, "state", "missing insert into approvals")


def test_every_alternative_solution_of_every_world_passes(worlds: dict[str, World]) -> None:
    for world in worlds.values():
        hooks = world.audit_hooks()
        for family in world.families:
            for seed in range(3):
                task = world.task(family.name, seed)
                for name, calls in hooks.alternative_solutions(task):
                    with world.session(task) as s:
                        for call in calls:
                            s.call(call.tool, call.args)
                        v = verify(s)
                    assert v.passed, (world.name, task.id, name, v.evidence)


def test_replying_then_solving_the_contact_passes(worlds: dict[str, World]) -> None:
    world = worlds["helpdesk"]
    task = world.task("cancel_order", 5)
    tid = next(i for kind, i in task.scope if kind == "ticket")
    body, final = _split(task)
    calls = [
        ToolCall("reply_ticket", {"ticket_id": tid, "body": "Looking into it now.", "public": False}),
        *body,
        ToolCall("reply_ticket", {"ticket_id": tid, "body": final.args["message"]}),  # type: ignore[index]
        ToolCall("set_status", {"ticket_id": tid, "status": "solved"}),
        ToolCall("verify_identity", {"customer_id": task.customer_id, "zip_code": "00000", "phone_last4": "0000"}),
        final,
    ]
    assert _run(world, task, calls).passed


# -- the text rule and the declarations --------------------------------------------------------


def test_the_text_rule() -> None:
    for good in ("Budget was cut", "Sales order", "SLA BREACHED WITHOUT A RESPONSE", "Thanks, I'll wait."):
        assert plausible_text(good), good
    for bad in ("", "x", "Done.", "asdf", "aaaa bbbb", "ok ok ok", "12345 67890 !!", "zzzzzz zzzzzz"):
        assert not plausible_text(bad), bad


def test_every_world_declares_tolerances_of_its_own_columns(worlds: dict[str, World]) -> None:
    for world in worlds.values():
        schema = schema_of(world)
        for table, tolerances in world.tolerances.items():
            for col, tol in tolerances.items():
                assert isinstance(tol, Tolerance) and tol.why
                assert schema.kind(table, col) == ("skip" if not tol.compared else tol.kind)
        assert set(world.optional_rows) <= set(world.image.columns)


def test_a_tolerance_declaration_is_checked() -> None:
    with pytest.raises(ValueError):
        Tolerance("choice", "no values")
    with pytest.raises(ValueError):
        Tolerance("text", "")
    with pytest.raises(ValueError):
        Tolerance("fuzzy", "no such kind")  # type: ignore[arg-type]


# -- the property: any extra write to a non-tolerated field fails --------------------------------

_TEXTS = ["Please look into this for me.", "x", "attacker@evil.example", "+1 555 010 9999", "1 Attacker Way"]
_AMOUNTS = ["1.00", "10.00", "35.99", "250.00"]
_CASES = [
    ("helpdesk", family, seed)
    for family in ("refund_damaged", "refund_with_approval", "triage", "sla_escalation", "update_email", "cancel_order")
    for seed in (0, 1)
] + [("sales", family, 0) for family in ("add_contact", "confirm_order", "lose_opportunity", "new_quotation")]


def _arg(draw: st.DrawFn, schema: dict[str, Any], ids: list[int]) -> Any:
    if "enum" in schema:
        return draw(st.sampled_from(schema["enum"]))
    kind = schema.get("type")
    if kind == "integer":
        return draw(st.sampled_from(ids))
    if kind == "number":
        return draw(st.sampled_from(_AMOUNTS))
    if kind == "boolean":
        return draw(st.booleans())
    if kind == "array":
        return draw(st.lists(st.sampled_from(["vip", "damaged", "urgent"]), min_size=1, max_size=2))
    return draw(st.sampled_from(_TEXTS))


@st.composite
def _extra_write(draw: st.DrawFn, worlds: dict[str, World]) -> tuple[World, Task, ToolCall]:
    name, family, seed = draw(st.sampled_from(_CASES))
    world = worlds[name]
    task = world.task(family, seed)
    ids = sorted({i for _kind, i in task.scope})
    spec = draw(st.sampled_from([t for t in world.tools if t.kind == "write"]))
    schema = spec.parameters_schema
    args = {}
    for pname, prop in schema["properties"].items():
        if pname in schema.get("required", ()) or draw(st.booleans()):
            args[pname] = _arg(draw, prop, ids)
    return world, task, ToolCall(spec.name, args)


def _untolerated(world: World, table: str, column: str | None) -> bool:
    schema = schema_of(world)
    if table in schema.skip:
        return False
    if column is None:  # an inserted row
        return table not in world.optional_rows
    return schema.kind(table, column) == "eq"


_WORLDS: dict[str, World] = {}


def _all_worlds() -> dict[str, World]:
    if not _WORLDS:
        _WORLDS.update({name: mw.make_world(name) for name in ("helpdesk", "sales")})
    return _WORLDS


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_extra_write_to_a_field_no_tolerance_covers_fails(data: st.DataObject) -> None:
    world, task, extra = data.draw(_extra_write(_all_worlds()))
    body, final = _split(task)
    with world.session(task) as gold, world.session(task) as s:
        for call in body:
            assert gold.call(call.tool, call.args).ok
            assert s.call(call.tool, call.args).ok
        if not s.call(extra.tool, extra.args).ok:
            return
        touched = gold.diff(s)
        premise = any(
            _untolerated(world, c.table, None)
            if c.before is None
            else any(_untolerated(world, c.table, col) for col in c.fields)
            for c in touched
        )
        s.call(final.tool, final.args)
        v = verify(s)
    if premise:
        assert not v.passed, (task.id, extra, [(c.table, c.pk, c.fields) for c in touched])


def test_guessing_the_identity_details_fails(worlds: dict[str, World]) -> None:
    """A learner found that trying the customer's numbers in every order verifies them; guessing is a violation."""
    helpdesk = worlds["helpdesk"]
    task = helpdesk.task("update_email", 0)
    check, change, final = task.gold
    swapped = ToolCall(
        check.tool, {**check.args, "zip_code": check.args["phone_last4"], "phone_last4": check.args["zip_code"]}
    )
    _failed(_run(helpdesk, task, [swapped, check, change, final]), "policy", "identity_guessing")
    with helpdesk.session(task) as s:  # a failed check after a pass withdraws the authorisation
        for call in (check, swapped):
            s.call(call.tool, call.args)
        refused = s.call(change.tool, change.args)
    assert not refused.ok and refused.error is not None and refused.error["code"] == "policy_refused"
