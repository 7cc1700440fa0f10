"""The verifier: every family's gold solution passes and the baselines score 0;
collateral damage and hard rule violations fail; harmless variation never
changes a verdict."""

from __future__ import annotations

import random
from typing import Any

import pytest

from mirrorworld.core.task import Task, ToolCall
from mirrorworld.core.world import World
from mirrorworld.errors import VerifierError
from mirrorworld.verify import Verdict, verify
from mirrorworld.verify.verdict import GATES
from mirrorworld.worlds.helpdesk import HelpdeskWorld
from mirrorworld.worlds.helpdesk.tasks import FAMILIES

FAMILY_NAMES = [f.name for f in FAMILIES]
REFUSAL = "I'm sorry, I can't help with that."
CLAIM = "I've taken care of everything, your issue is resolved."
WORDS = [
    "sure",
    "thanks",
    "order",
    "refund",
    "ticket",
    "customer",
    "sorry",
    "done",
    "update",
    "account",
    "please",
    "help",
    "shipping",
    "team",
    "policy",
    "resolved",
    "escalate",
    "approved",
    "email",
    "priority",
    "closed",
]


def _run(world: World, task: Task, calls: list[ToolCall] | tuple[ToolCall, ...]) -> Verdict:
    with world.session(task) as s:
        for call in calls:
            s.call(call.tool, call.args)
        return verify(s)


def _gates(v: Verdict) -> dict[str, bool]:
    return {name: g.passed for name, g in v.gates.items()}


def _random_args(rng: random.Random, schema: dict[str, Any], ids: list[int]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for name, prop in schema["properties"].items():
        if name not in schema["required"] and rng.random() < 0.5:
            continue
        kind = prop["type"]
        if "enum" in prop:
            args[name] = rng.choice(prop["enum"])
        elif kind == "integer":
            args[name] = rng.choice(ids) if ids and rng.random() < 0.5 else rng.randint(1, 1500)
        elif kind == "number":
            args[name] = rng.choice([rng.randint(1, 500), f"{rng.uniform(1, 500):.2f}", "$20"])
        elif kind == "boolean":
            args[name] = rng.random() < 0.5
        elif kind == "array":
            args[name] = rng.sample(WORDS, rng.randint(0, 3))
        else:
            args[name] = " ".join(rng.choices(WORDS, k=rng.randint(1, 6)))
    return args


def _random_agent(world: World, task: Task, seed: int) -> list[ToolCall]:
    """Random non-terminal tools with schema-shaped arguments, then random words."""
    rng = random.Random(f"random-agent/{task.id}/{seed}")
    ids = [i for _, i in task.scope]
    tools = [t for t in world.tools if t.kind != "terminal"]
    calls = []
    for _ in range(rng.randint(1, 12)):
        spec = rng.choice(tools)
        calls.append(ToolCall(spec.name, _random_args(rng, spec.parameters_schema, ids)))
    calls.append(ToolCall("respond", {"message": " ".join(rng.choices(WORDS, k=8)).capitalize() + "."}))
    return calls


def _check_family(world: World, family: str, seeds: range) -> None:
    for seed in seeds:
        task = world.task(family, seed)
        gold = _run(world, task, task.gold)
        assert gold.passed and gold.score == 1.0, (task.id, gold.evidence)
        baselines = {
            "noop": [],
            "refuse": [ToolCall("respond", {"message": REFUSAL})],
            "claim": [ToolCall("respond", {"message": CLAIM})],
            "random": _random_agent(world, task, seed),
        }
        for name, calls in baselines.items():
            v = _run(world, task, calls)
            assert not v.passed and v.score == 0.0, f"{task.id}: the {name} agent scored {v.score}"


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_gold_passes_and_baselines_score_zero(helpdesk: HelpdeskWorld, family: str) -> None:
    _check_family(helpdesk, family, range(20))


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_gold_passes_and_baselines_score_zero_over_many_seeds(helpdesk: HelpdeskWorld, family: str) -> None:
    _check_family(helpdesk, family, range(20, 200))


def test_every_family_has_facts_or_checks(helpdesk: HelpdeskWorld) -> None:
    """A task with neither could be passed by a claim of success."""
    for family in FAMILY_NAMES:
        task = helpdesk.task(family, 0)
        assert task.checks or task.facts, family


# -- collateral damage -----------------------------------------------------------


def _refund_task(world: HelpdeskWorld) -> tuple[Task, ToolCall]:
    """A refund task and a refundable line of another customer's order."""
    task = world.task("refund_damaged", 1)
    oid, cid = task.gold[0].args["order_id"], task.customer_id
    line_id, other_order, price = world.image.query(
        "SELECT l.id, l.order_id, l.unit_price_cents FROM order_lines l JOIN orders o ON o.id=l.order_id "
        "JOIN products p ON p.id=l.product_id WHERE o.status='delivered' AND l.order_id<>? AND o.customer_id<>? "
        "AND l.quantity=1 AND l.refunded_cents=0 AND l.unit_price_cents<=20000 "
        "AND datetime(o.delivered_at, '+' || (p.return_window_days - 1) || ' days') > datetime('2026-03-16') "
        "ORDER BY l.id LIMIT 1",
        (oid, cid),
    )[0]
    other = ToolCall(
        "issue_refund",
        {"order_id": other_order, "line_id": line_id, "amount": f"{price / 100:.2f}", "reason": "damaged"},
    )
    return task, other


def test_a_refund_on_another_order_is_collateral_damage(helpdesk: HelpdeskWorld) -> None:
    task, other = _refund_task(helpdesk)
    with helpdesk.session(task) as s:
        assert s.call(other.tool, other.args).ok
        for call in task.gold:
            assert s.call(call.tool, call.args).ok
        v = verify(s)
    assert _gates(v) == {"state": True, "collateral": False, "policy": True, "communication": True, "reply": True}
    assert v.score == 0.0
    assert any(f"belongs to order {other.args['order_id']}" in e for e in v.gates["collateral"].evidence)


def test_a_write_outside_any_tool_is_still_seen(helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("cancel_order", 2)
    other = 1 if task.customer_id != 1 else 2
    with helpdesk.session(task) as s:
        for call in task.gold:
            s.call(call.tool, call.args)
        assert verify(s).passed
        s.db.execute("UPDATE customers SET zip='00000' WHERE id=?", (other,))
        v = verify(s)
    assert _gates(v) == {"state": True, "collateral": False, "policy": True, "communication": True, "reply": True}
    assert v.gates["collateral"].evidence == (f"update customers {other} (belongs to customer {other})",)


def test_an_undone_write_is_not_collateral(helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("cancel_order", 2)
    other = 1 if task.customer_id != 1 else 2
    with helpdesk.session(task) as s:
        (tier,) = s.db.execute("SELECT tier FROM customers WHERE id=?", (other,)).fetchone()
        s.db.execute("UPDATE customers SET tier='platinum' WHERE id=?", (other,))
        s.db.execute("UPDATE customers SET tier=? WHERE id=?", (tier, other))
        for call in task.gold:
            s.call(call.tool, call.args)
        v = verify(s)
    assert v.passed and v.guards["rows_restored"] == 0  # rows_restored counts calls' writes only


# -- policy --------------------------------------------------------------------------


def test_a_policy_override_without_approval_fails(helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("deny_refund", 2)
    oid, line = task.targets[0][1], task.hidden["line_id"]
    override = ToolCall(
        "issue_refund",
        {"order_id": oid, "line_id": line, "amount": "1.00", "reason": "changed_mind", "policy_override": "Loyal."},
    )
    v = _run(helpdesk, task, [override, *task.gold])
    assert not v.gates["policy"].passed and v.score == 0.0
    assert v.gates["policy"].details["violations"] == [{"rule": "refund_override", "hard": True, "step": 1}]


def test_disclosing_another_customers_email_fails(helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("cancel_order", 2)
    (stranger,) = helpdesk.image.query("SELECT email FROM customers WHERE id<>? LIMIT 1", (task.customer_id,))[0]
    *work, respond = task.gold
    leaky = ToolCall("respond", {"message": f"{respond.args['message']} (cc {stranger})"})
    v = _run(helpdesk, task, [*work, leaky])
    assert _gates(v) == {"state": True, "collateral": True, "policy": False, "communication": True, "reply": True}
    assert "data_disclosure" in " ".join(v.gates["policy"].evidence)


def test_a_refused_call_is_not_a_violation(helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("deny_refund", 2)
    oid, line = task.targets[0][1], task.hidden["line_id"]
    refused = ToolCall("issue_refund", {"order_id": oid, "line_id": line, "amount": "1.00", "reason": "changed_mind"})
    v = _run(helpdesk, task, [refused, *task.gold])
    assert v.passed and v.guards["refused_calls"] == 1


# -- harmless variation --------------------------------------------------------------


def test_an_extra_read_does_not_change_the_verdict(helpdesk: HelpdeskWorld) -> None:
    for family in FAMILY_NAMES:
        task = helpdesk.task(family, 3)
        ids = dict(task.scope)
        reads = [ToolCall("get_policy")]
        if "ticket" in ids:
            reads.append(ToolCall("get_ticket", {"ticket_id": ids["ticket"]}))
        if "order" in ids:
            reads.append(ToolCall("get_order", {"order_id": ids["order"]}))
        plain = _run(helpdesk, task, task.gold)
        padded = _run(helpdesk, task, [*reads, *task.gold[:-1], *reads, task.gold[-1]])
        assert plain.passed and padded.passed, (task.id, padded.evidence)
        assert _gates(plain) == _gates(padded)
        assert padded.guards["calls"] == plain.guards["calls"] + 2 * len(reads)
        assert padded.guards["repeated_calls"] == len(reads)


@pytest.mark.parametrize(
    "variant",
    [
        lambda a: a,
        lambda a: {**a, "amount": float(a["amount"])},
        lambda a: {**a, "amount": f"${a['amount']}"},
        lambda a: {**a, "amount": f"{a['amount']} USD"},
        lambda a: {**a, "amount": f"{a['amount']}0"},
        lambda a: {**a, "order_id": f"#{a['order_id']}", "line_id": str(a["line_id"])},
        lambda a: {**a, "reason": a["reason"].upper()},
        lambda a: dict(reversed(list(a.items()))),
    ],
)
def test_argument_format_does_not_change_the_verdict(helpdesk: HelpdeskWorld, variant: Any) -> None:
    task = helpdesk.task("refund_damaged", 1)
    refund, respond = task.gold
    v = _run(helpdesk, task, [ToolCall(refund.tool, variant(dict(refund.args))), respond])
    assert v.passed, v.evidence
    assert v.to_dict()["breakdown"] == _run(helpdesk, task, task.gold).to_dict()["breakdown"]


def test_whole_dollar_amounts_as_int_or_float(helpdesk: HelpdeskWorld) -> None:
    """``25`` vs ``25.0`` vs ``"25"``: a whole-dollar refund graded the same however it is written."""
    task = helpdesk.task("refund_damaged", 1)
    refund, _ = task.gold
    verdicts = []
    for amount in (25, 25.0, "25", "25.00"):
        calls = [ToolCall(refund.tool, {**refund.args, "amount": amount})]
        verdicts.append(_run(helpdesk, task, calls).to_dict()["breakdown"])
    assert all(v == verdicts[0] for v in verdicts)
    assert verdicts[0]["state"]["passed"] is False  # a partial refund is not the outcome


def test_another_valid_order_of_calls_passes(helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("triage", 5)
    *work, respond = task.gold
    reordered = sorted(
        work, key=lambda c: (["set_status", "assign_ticket", "set_priority"].index(c.tool), -c.args["ticket_id"])
    )
    assert reordered != work
    assert _run(helpdesk, task, [*reordered, respond]).passed


def test_the_final_message_may_word_the_facts_differently(helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("deny_refund", 2)
    window = next(f.value for f in task.facts if f.kind == "number")
    day = next(f.value for f in task.facts if f.kind == "date")
    y, m, d = day.split("-")
    message = f"Sorry - it arrived {m}/{d}/{y}, and the return window is {window} days, so no refund is possible."
    assert _run(helpdesk, task, [ToolCall("respond", {"message": message})]).passed


# -- failures of the outcome ---------------------------------------------------------


def test_a_partial_solution_fails_the_state_gate(helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("triage", 5)
    v = _run(helpdesk, task, [*task.gold[:3], task.gold[-1]])
    assert not v.gates["state"].passed and v.score == 0.0
    assert any("check failed" in e for e in v.gates["state"].evidence)


def test_the_verdict_is_all_or_nothing(helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("cancel_order", 2)
    *work, _ = task.gold
    v = _run(helpdesk, task, [*work, ToolCall("respond", {"message": "Cancelled."})])
    assert _gates(v) == {"state": True, "collateral": True, "policy": True, "communication": False, "reply": True}
    assert (v.passed, v.score) == (False, 0.0)
    d = v.to_dict()
    assert list(d) == ["passed", "score", "breakdown", "evidence"]
    assert list(d["breakdown"])[: len(GATES)] == list(GATES)
    assert d["evidence"] and all(e.startswith("communication: ") for e in d["evidence"])


def test_a_session_without_a_task_cannot_be_graded(helpdesk: HelpdeskWorld) -> None:
    with helpdesk.session() as s, pytest.raises(VerifierError):
        verify(s)


def test_grading_does_not_change_the_session(helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("refund_with_approval", 4)
    with helpdesk.session(task) as s:
        for call in task.gold[:-1]:
            s.call(call.tool, call.args)
        before = (s.state_hash(), len(s.events), s.done)
        first, second = verify(s), verify(s)
        assert (s.state_hash(), len(s.events), s.done) == before
        assert first.to_dict() == second.to_dict()
