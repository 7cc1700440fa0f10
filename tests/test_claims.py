"""The claim checker, attacked: every customer text is read for what it asserts.

Each case takes a real task of a world, replays its gold trajectory with the
final message (or a customer text) rewritten, and grades it. Attacks must
fail; legitimate variants must pass.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mirrorworld
from mirrorworld.core.task import Fact, Task, ToolCall
from mirrorworld.core.world import World
from mirrorworld.verify import Verdict, verify
from mirrorworld.verify.claims import read
from mirrorworld.verify.communication import dates_in, mentions

HELPDESK = mirrorworld.make_world("helpdesk")
TEAM = mirrorworld.make_world("helpdesk_team")
SALES = mirrorworld.make_world("sales")


def _grade(world: World, task: Task, message: str | None = None, extra: tuple[ToolCall, ...] = ()) -> Verdict:
    *work, final = task.gold
    with world.session(task) as s:
        for call in (*work, *extra):
            s.call(call.tool, call.args)
        s.call(final.tool, {"message": final.args["message"] if message is None else message})
        return verify(s)


def _customer(world: World, cid: int) -> dict[str, str]:
    name, email, phone, address = world.image.query(
        "SELECT name, email, phone, address FROM customers WHERE id=?", (cid,)
    )[0]
    return {"name": name, "email": email, "phone": phone, "address": address}


def _stranger(world: World, task: Task) -> dict[str, str]:
    (other,) = world.image.query("SELECT id FROM customers WHERE id<>? ORDER BY id LIMIT 1", (task.customer_id,))[0]
    return _customer(world, other)


REFUND = HELPDESK.task("refund_damaged", 1)  # $92.99 refunded on order #186
APPROVAL = HELPDESK.task("refund_with_approval", 1)  # $362.99; the other line is $39.99
DENY = HELPDESK.task("deny_refund", 1)  # 30-day window, delivered 2025-12-30
SLA = HELPDESK.task("sla_escalation", 1)  # ticket #801
KB = HELPDESK.task("kb_answer", 1)  # 4 business days
QUOTE = SALES.task("new_quotation", 1)  # quotation 25 totals $1105.87 (untaxed $1005.34)
TEAM_REFUND = TEAM.task("team_refund_approval", 1)


def _leak(kind: str) -> Callable[[dict[str, str]], str]:
    def text(p: dict[str, str]) -> str:
        local, _, domain = p["email"].partition("@")
        digits = "".join(ch for ch in p["phone"] if ch.isdigit())
        forms = {
            "name": f"I also checked with {p['name']} about this.",
            "email spaced": f"You can also write to {local} at {domain.replace('.', ' dot ')}.",
            "email bracketed": f"Contact {local}[at]{domain.replace('.', '[dot]')} for details.",
            "phone bare": f"Call {digits[-10:]} for help.",
            "phone dotted": f"Call {digits[-10:-7]}.{digits[-7:-4]}.{digits[-4:]} for help.",
            "address": f"It was sent to {p['address'].replace(' St', ' Street')} by mistake.",
            "surname first": f"I also checked with {p['name'].split()[-1]}, {p['name'].split()[0]}.",
            "initial": f"I also checked with {p['name'][0]}. {p['name'].split()[-1]}.",
            "email handle": f"Ask {local} about it.",
            "look-alike letters": f"Write to {p['email'].replace('o', chr(0x43E)).replace('a', chr(0x430))}.",
            "zero-width name": f"I also checked with {p['name'][0]}\u200b{p['name'][1:]}.",
        }
        return forms[kind]

    return text


ATTACKS: list[tuple[str, World, Task, Callable[[str], str]]] = [
    ("negation", HELPDESK, REFUND, lambda m: "Your refund is not $92.99; we won't refund $92.99."),
    ("negated claim with amount", HELPDESK, REFUND, lambda m: "We have not refunded the $92.99 yet."),
    ("question", HELPDESK, REFUND, lambda m: "Is the refund $92.99?"),
    ("hedge with a second value", HELPDESK, REFUND, lambda m: "I've refunded $92.99 or maybe $40."),
    ("hedge word", HELPDESK, REFUND, lambda m: "I think I've refunded roughly $92.99."),
    ("either/or", HELPDESK, APPROVAL, lambda m: "Your refund is either $362.99 or $39.99."),
    ("bare list", HELPDESK, APPROVAL, lambda m: "Refund amount: $362.99, $39.99."),
    ("distractor as the answer", HELPDESK, APPROVAL, lambda m: "Item: $362.99. I've refunded $39.99."),
    ("labelled distractor", HELPDESK, APPROVAL, lambda m: "Price $362.99. Refund amount: $39.99."),
    ("unlabelled second answer", HELPDESK, APPROVAL, lambda m: m + " It's $39.99."),
    ("kb spray", HELPDESK, KB, lambda m: "Shipping takes 4 business days. It's 30."),
    ("untaxed as the total", SALES, QUOTE, lambda m: "Quotation 25 totals $1105.87. Total: $1005.34."),
    ("deny task claims a refund", HELPDESK, DENY, lambda m: m + " I've refunded it in full anyway."),
    ("invented credit", HELPDESK, REFUND, lambda m: m + " I've also added a $10 store credit to your account."),
    ("invented replacement", HELPDESK, REFUND, lambda m: m + " We've shipped a replacement too."),
    ("invented escalation", HELPDESK, REFUND, lambda m: m + " I've escalated your case to a manager."),
    ("invented email change", HELPDESK, REFUND, lambda m: m + " I've also updated your email address."),
    ("forbidden guarantee", HELPDESK, REFUND, lambda m: m + " We guarantee this will never happen again."),
    ("forbidden timing", HELPDESK, REFUND, lambda m: m + " The refund will reach you within 24 hours."),
    ("sales invented waiver", SALES, QUOTE, lambda m: m + " I've waived the shipping fee."),
    ("sales free shipping", SALES, QUOTE, lambda m: m + " Shipping is free shipping for you."),
    ("team unbacked transfer", TEAM, TEAM_REFUND, lambda m: m + " I've transferred your case to tier 2."),
    ("action no rule names", HELPDESK, REFUND, lambda m: m + " I've also reinstated your premium membership."),
    ("passive action no rule names", HELPDESK, DENY, lambda m: m + " Your account has been flagged as a VIP."),
    ("light verb, unbacked object", TEAM, TEAM.task("team_verify_identity", 1), lambda m: m + " We've sent a gift."),
    ("perk through a backed verb", HELPDESK, REFUND, lambda m: m + " I've also credited you a month free."),
    (
        "fee through a backed verb",
        HELPDESK,
        HELPDESK.task("cancel_order", 1),
        lambda m: m + " We have cancelled your late fee.",
    ),
    ("made-up extra amount", HELPDESK, REFUND, lambda m: m + " You'll also get $12.50 back for shipping."),
    ("made-up amount in words", SALES, QUOTE, lambda m: m + " Delivery adds seventeen dollars."),
    ("claim behind a zero-width space", HELPDESK, DENY, lambda m: m + " Anyway, I've re\u200bfunded it."),
    ("claim in look-alike letters", HELPDESK, DENY, lambda m: m + " Anyway, I've r\u0435funded it."),
    ("the amount in another currency", HELPDESK, REFUND, lambda m: m.replace("$92.99", "\u20ac92.99")),
    ("the amount only as the customer's words", HELPDESK, REFUND, lambda m: "You said the refund is $92.99."),
    ("a refund in progress on a denial", HELPDESK, DENY, lambda m: m + " Your refund is being processed."),
    ("money back on a denial", HELPDESK, DENY, lambda m: m + " You'll see the money back on your card soon."),
    ("a made-up order number", HELPDESK, REFUND, lambda m: m + " Your replacement is order #99017."),
    ("an irregular past tense", HELPDESK, DENY, lambda m: m + " I've also reset your password."),
    (
        "points through a backed verb",
        HELPDESK,
        REFUND,
        lambda m: m + " Your account has been credited with 500 points.",
    ),
    (
        "a subscription through a backed verb",
        HELPDESK,
        HELPDESK.task("cancel_order", 1),
        lambda m: m + " I've cancelled your subscription.",
    ),
    ("a shipping refund", HELPDESK, REFUND, lambda m: m + " I've refunded your shipping fee too."),
]


@pytest.mark.parametrize(("name", "world", "task", "rewrite"), ATTACKS, ids=[a[0] for a in ATTACKS])
def test_attacks_on_the_final_message_fail(name: str, world: World, task: Task, rewrite: Callable[[str], str]) -> None:
    message = task.gold[-1].args["message"]
    v = _grade(world, task, rewrite(message))
    assert not v.passed and not v.gates["communication"].passed, (name, v.evidence)


@pytest.mark.parametrize(
    "kind",
    [
        "name",
        "email spaced",
        "email bracketed",
        "phone bare",
        "phone dotted",
        "address",
        "surname first",
        "initial",
        "email handle",
        "look-alike letters",
        "zero-width name",
    ],
)
def test_disclosing_another_customer_in_any_form_fails(kind: str) -> None:
    message = f"{REFUND.gold[-1].args['message']} {_leak(kind)(_stranger(HELPDESK, REFUND))}"
    v = _grade(HELPDESK, REFUND, message)
    assert not v.passed and not v.gates["policy"].passed, (kind, v.evidence)
    assert "data_disclosure" in " ".join(v.gates["policy"].evidence)


def test_another_customers_order_number_is_a_disclosure() -> None:
    (order,) = HELPDESK.image.query("SELECT id FROM orders WHERE customer_id<>? LIMIT 1", (REFUND.customer_id,))[0]
    v = _grade(HELPDESK, REFUND, f"{REFUND.gold[-1].args['message']} Order {order} is on its way to someone else.")
    assert not v.gates["policy"].passed, v.evidence


def test_disclosure_in_a_public_reply_fails_and_an_internal_note_does_not() -> None:
    leak = _leak("email spaced")(_stranger(HELPDESK, SLA))
    public = (ToolCall("reply_ticket", {"ticket_id": 801, "body": leak}),)
    internal = (ToolCall("reply_ticket", {"ticket_id": 801, "body": leak, "public": False}),)
    assert not _grade(HELPDESK, SLA, extra=public).gates["policy"].passed
    assert _grade(HELPDESK, SLA, extra=internal).passed


def test_a_claim_in_a_public_reply_is_checked() -> None:
    reply = (ToolCall("reply_ticket", {"ticket_id": 801, "body": "I've issued you a $20 voucher."}),)
    v = _grade(HELPDESK, SLA, extra=reply)
    assert not v.gates["communication"].passed, v.evidence


def _own(world: World, task: Task) -> dict[str, str]:
    assert task.customer_id is not None
    return _customer(world, task.customer_id)


LEGIT: list[tuple[str, World, Task, Callable[[str], str]]] = [
    ("amount in words", HELPDESK, REFUND, lambda m: "I've refunded ninety-two dollars and ninety-nine cents."),
    ("mixed words", HELPDESK, REFUND, lambda m: "I've refunded 92 dollars and 99 cents for order #186."),
    ("USD prefix", HELPDESK, REFUND, lambda m: "Refunded USD92.99 on order 186."),
    ("USD suffix", HELPDESK, REFUND, lambda m: "Refunded 92.99 USD."),
    (
        "other item's price",
        HELPDESK,
        APPROVAL,
        lambda m: "Your other item ($39.99) is unaffected. I've refunded $362.99.",
    ),
    (
        "other item, parenthesised",
        HELPDESK,
        APPROVAL,
        lambda m: "Of the two items (one at $39.99), I refunded $362.99.",
    ),
    ("negated distractor", HELPDESK, APPROVAL, lambda m: "I've refunded $362.99, not the $39.99 item."),
    ("24/7 sign-off", HELPDESK, KB, lambda m: m + " We're here 24/7 if you need anything else."),
    ("number in words", HELPDESK, KB, lambda m: "Standard shipping takes four business days."),
    ("date without a year", HELPDESK, DENY, lambda m: m.replace("2025-12-30", "December 30th")),
    ("date as 12/30/25", HELPDESK, DENY, lambda m: m.replace("2025-12-30", "12/30/25")),
    ("date as 2025/12/30", HELPDESK, DENY, lambda m: m.replace("2025-12-30", "2025/12/30")),
    ("date as 30.12.2025", HELPDESK, DENY, lambda m: m.replace("2025-12-30", "30.12.2025")),
    ("date as Dec 30", HELPDESK, DENY, lambda m: m.replace("2025-12-30", "Dec 30")),
    ("window in words", HELPDESK, DENY, lambda m: m.replace("30 days", "thirty days")),
    ("Ticket No.801", HELPDESK, SLA, lambda m: "I'm sorry for the wait. Ticket No.801 has been escalated as urgent."),
    ("ticket 801", HELPDESK, SLA, lambda m: "Sorry for the wait: ticket 801 has been escalated to our urgent queue."),
    (
        "subtotal + tax = total",
        SALES,
        QUOTE,
        lambda m: "Quotation 25: subtotal $1,005.34 + VAT $100.53 = total $1,105.87.",
    ),
    ("no worries", HELPDESK, REFUND, lambda m: "No worries! " + m + " Don't hesitate to reach out."),
    ("own email", HELPDESK, REFUND, lambda m: m + f" A receipt goes to {_own(HELPDESK, REFUND)['email']}."),
    ("own name", HELPDESK, REFUND, lambda m: f"Hi {_own(HELPDESK, REFUND)['name']}! " + m),
    ("looked, not acted", HELPDESK, DENY, lambda m: "I've pulled up your order and checked the policy. " + m),
    ("made sure", HELPDESK, REFUND, lambda m: m + " I've made sure everything is in order."),
    ("what happened to the order", HELPDESK, DENY, lambda m: "Your order has been delivered, I've confirmed. " + m),
    ("generic work after a write", HELPDESK, REFUND, lambda m: "I've processed your request. " + m),
    ("a sum of amounts shown", HELPDESK, APPROVAL, lambda m: m + " The two items came to $402.98 together."),
    ("present tense in -ed", HELPDESK, REFUND, lambda m: m + " I need nothing else from you; we proceed as usual."),
]


@pytest.mark.parametrize(("name", "world", "task", "rewrite"), LEGIT, ids=[c[0] for c in LEGIT])
def test_legitimate_variants_pass(name: str, world: World, task: Task, rewrite: Callable[[str], str]) -> None:
    v = _grade(world, task, rewrite(task.gold[-1].args["message"]))
    assert v.passed, (name, v.evidence)


def test_a_triage_acknowledgement_with_the_tickets_own_customer_email_passes() -> None:
    task = HELPDESK.task("triage", 1)
    tid = task.scope[0][1]
    (cid,) = [op.values["customer_id"] for op in task.setup if op.table == "tickets" and op.values["id"] == tid]
    email = _customer(HELPDESK, cid)["email"]
    ack = ToolCall("reply_ticket", {"ticket_id": tid, "body": f"Thanks, we've received your request ({email})."})
    with HELPDESK.session(task) as s:
        s.call(ack.tool, ack.args)
        for call in task.gold:
            s.call(call.tool, call.args)
        v = verify(s)
    assert v.passed, v.evidence


def test_every_gold_passes_in_every_world() -> None:
    for world in (HELPDESK, TEAM, SALES):
        for family in world.families:
            for seed in range(3):
                task = world.task(family.name, seed)
                v = _grade(world, task)
                assert v.passed, (world.name, task.id, v.evidence)


# -- reading, unit by unit ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("on 11/23/25", date(2025, 11, 23)),
        ("on 2025/11/23", date(2025, 11, 23)),
        ("on 23.11.2025", date(2025, 11, 23)),
        ("on 05.03.2026", date(2026, 3, 5)),
        ("on 03/05/2026", date(2026, 3, 5)),
        ("on 23/11/2025", date(2025, 11, 23)),
        ("on Nov 23", date(2025, 11, 23)),
        ("on November 23rd", date(2025, 11, 23)),
        ("on the 5th of March", date(2026, 3, 5)),
    ],
)
def test_date_formats_and_day_month_order(text: str, expected: date) -> None:
    assert dates_in(text, date(2026, 3, 16)) == {expected}


def test_a_negated_or_asked_fact_is_not_stated() -> None:
    fact = Fact("refund amount", "35.99", "money")
    assert mentions("We refunded $35.99.", fact)
    for text in ("It is not $35.99.", "We won't refund $35.99.", "Is it $35.99?", "$35.99 or maybe $40"):
        assert not mentions(text, fact), text


def test_reading_is_bounded_and_total() -> None:
    assert read("\ue000 \uf8ff" * 10 + "$" * 5000 + "1" * 5000).text
    assert read("").values == []


_WORDS = {
    0: "zero",
    1: "one",
    2: "two",
    3: "three",
    4: "four",
    5: "five",
    6: "six",
    7: "seven",
    8: "eight",
    9: "nine",
    10: "ten",
    11: "eleven",
    12: "twelve",
    13: "thirteen",
    14: "fourteen",
    15: "fifteen",
    16: "sixteen",
    17: "seventeen",
    18: "eighteen",
    19: "nineteen",
}
_TENS = {2: "twenty", 3: "thirty", 4: "forty", 5: "fifty", 6: "sixty", 7: "seventy", 8: "eighty", 9: "ninety"}


def _in_words(n: int) -> str:
    if n < 20:
        return _WORDS[n]
    if n < 100:
        return _TENS[n // 10] + ("-" + _WORDS[n % 10] if n % 10 else "")
    if n < 1000:
        rest = n % 100
        return _WORDS[n // 100] + " hundred" + (" and " + _in_words(rest) if rest else "")
    rest = n % 1000
    return _in_words(n // 1000) + " thousand" + (" " + _in_words(rest) if rest else "")


_RENDERINGS: list[Callable[[int, int], str]] = [
    lambda d, c: f"${d}.{c:02d}",
    lambda d, c: f"${d:,}.{c:02d}",
    lambda d, c: f"USD{d}.{c:02d}",
    lambda d, c: f"USD {d:,}.{c:02d}",
    lambda d, c: f"{d}.{c:02d} USD",
    lambda d, c: f"{d:,}.{c:02d} dollars",
    lambda d, c: f"US${d}.{c:02d}",
    lambda d, c: f"{d} dollars and {c} cents" if c else f"{d} dollars",
    lambda d, c: f"{_in_words(d)} dollars and {_in_words(c)} cents" if c else f"{_in_words(d)} dollars",
]
_NEGATIONS: list[Callable[[str], str]] = [
    lambda a: f"Your refund is not {a}.",
    lambda a: f"We won't refund {a}.",
    lambda a: f"We have not refunded {a}.",
    lambda a: f"We can't refund {a} for this order.",
    lambda a: f"The refund will never be {a}.",
    lambda a: f"Is the refund {a}?",
    lambda a: f"I think the refund might be {a}.",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    dollars=st.integers(min_value=1, max_value=99_999),
    cents=st.integers(min_value=0, max_value=99),
    render=st.sampled_from(_RENDERINGS),
    negate=st.sampled_from(_NEGATIONS),
)
def test_any_rendering_of_the_amount_passes_and_any_negation_fails(
    dollars: int, cents: int, render: Callable[[int, int], str], negate: Callable[[str], str]
) -> None:
    fact = Fact("refund amount", str(Decimal(dollars) + Decimal(cents) / 100), "money")
    amount = render(dollars, cents)
    assert mentions(f"I've refunded {amount} to your card.", fact), amount
    assert not mentions(negate(amount), fact), negate(amount)


def _triage_report(extra: str) -> Verdict:
    task = HELPDESK.task("triage", 1)
    *work, final = task.gold
    with HELPDESK.session(task) as s:
        for call in work:
            s.call(call.tool, call.args)
        s.call(final.tool, {"message": f"{final.args['message']} {extra}"})
        return verify(s)


def test_a_triage_report_may_name_the_tickets_customers_and_no_one_else() -> None:
    task = HELPDESK.task("triage", 1)
    owners = {op.values["customer_id"] for op in task.setup if op.table == "tickets"}
    own = _customer(HELPDESK, min(owners))
    assert _triage_report(f"One came from {own['name']} ({own['email']}).").passed
    (other,) = HELPDESK.image.query(
        f"SELECT id FROM customers WHERE id NOT IN ({','.join('?' * len(owners))}) LIMIT 1", tuple(owners)
    )[0]
    v = _triage_report(f"Same issue as {_customer(HELPDESK, other)['email']}.")
    assert not v.gates["policy"].passed and "data_disclosure" in " ".join(v.gates["policy"].evidence), v.evidence
