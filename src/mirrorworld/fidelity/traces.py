"""The traces the fidelity harness replays on both backends.

A :class:`Trace` is a named list of tool calls that starts from the pristine
state. Sources:

* ``gold`` — every task family's gold solution, for seeds ``0 .. seeds-1``;
* ``audit`` — the audit's mutants and variants of those gold solutions (wrong
  targets, wrong values, dropped writes, reordered writes, reformatted
  arguments, a malformed call then the right one): realistic agent mistakes;
* ``random`` — seeded random sequences of *plausible* calls, each drawn from
  the state the previous calls left (a quotation to confirm, a waiting
  shipment to ship...), which walk the state machines far from any task;
* ``invalid`` — seeded random sequences mixing valid calls with bad input:
  mostly well-formed calls the real system refuses (missing records, records
  in the wrong state, invalid e-mails and phone numbers, partial payments
  above what is due, overpayments below it) or the desk's own rules refuse
  (write-offs above its limit, credit notes paid or credited, drafts
  credited), and a fifth (:data:`INTERFACE_SHARE`) that the shared argument
  interface refuses before any backend runs (unknown tools, malformed JSON,
  wrong types, out-of-range values), which tests the interface, not fidelity;
* ``recorded`` — recorded agent trajectories: a run file written by
  ``mirrorworld run``, or a JSONL file whose lines are
  ``{"name": ..., "calls": [{"tool": ..., "args": {...}}, ...]}``.

Random traces are drawn against the mirror as it replays (the next call
depends on the state the previous ones left); the twin then replays exactly the
same calls.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from mirrorworld.core.session import Session
from mirrorworld.core.task import ToolCall
from mirrorworld.core.world import World
from mirrorworld.errors import RunFileError

__all__ = ["Trace", "audit_traces", "gold_traces", "random_call", "recorded_traces"]


@dataclass
class Trace:
    """A named call sequence from the pristine state; ``family`` groups it in reports."""

    kind: str
    name: str
    family: str
    calls: list[ToolCall] = field(default_factory=list)
    seed: int | None = None
    """For random traces: the seed that draws the calls (``calls`` is filled while replaying)."""
    length: int = 0
    """For random traces: how many calls to draw."""


def gold_traces(world: World, seeds: int) -> Iterator[Trace]:
    for family in world.families:
        for seed in range(seeds):
            task = world.task(family.name, seed)
            yield Trace("gold", f"gold {task.id}", family.name, list(task.gold))


def audit_traces(world: World, seeds: int) -> Iterator[Trace]:
    from mirrorworld.audit.cases import mutant_cases, variant_cases

    for family in world.families:
        for seed in range(seeds):
            task = world.task(family.name, seed)
            rng = random.Random(f"fidelity/{task.id}")
            for case in [*mutant_cases(world, task, rng), *variant_cases(world, task)]:
                yield Trace(
                    "audit", f"{case.kind} {case.operator} {task.id}: {case.name}", family.name, list(case.calls)
                )


def recorded_traces(path: Path) -> Iterator[Trace]:
    """Recorded trajectories: a run file of ``mirrorworld run``, or JSONL lines of calls.

    Both are untrusted: a JSONL line must be an object whose ``calls`` is a list
    of ``{"tool": name, "args": object or JSON text}`` (``args`` may be left
    out; ``name``, if given, is text), and a run file is read through
    :class:`~mirrorworld.run.trajectories.RunFile`, which checks its calls the
    same way. Anything else is a one-line :class:`~mirrorworld.errors.RunFileError`
    naming the file and the line or episode.
    """
    if path.suffix not in (".jsonl", ".json"):
        yield from _run_file_traces(path)
        return
    from mirrorworld.run.untrusted import json_lines

    for number, record in json_lines(path):
        where = f"{path}:{number}"
        calls = record.get("calls") if isinstance(record, dict) else None
        if not isinstance(calls, list):
            raise RunFileError(f'{where}: not a trajectory line (expected {{"calls": [{{"tool": ..., "args": ...}}]}})')
        name = record.get("name", f"{path.name}:{number}")
        if not isinstance(name, str):
            raise RunFileError(f"{where}: the trajectory's name is not text")
        checked = [_call(c, f"{where}: call {i + 1}") for i, c in enumerate(calls)]
        yield Trace("recorded", name[:200], "recorded", checked)


def _call(c: Any, where: str) -> ToolCall:
    """One recorded call as a :class:`ToolCall`, checked (see :func:`recorded_traces`)."""
    if not isinstance(c, dict) or not isinstance(c.get("tool"), str):
        raise RunFileError(f"{where}: not a call (expected an object with a tool name)")
    args = c.get("args", {})
    if args is None:
        args = {}
    if not isinstance(args, (dict, str)):
        raise RunFileError(f"{where}: its args are {type(args).__name__}, not an object or JSON text")
    return ToolCall(c["tool"], args)


def _recorded(event: dict[str, Any]) -> ToolCall:
    """A call as a run file recorded it (its tool a name, its args an object or None: checked by ``RunFile``)."""
    args: dict[str, Any] | None = event.get("args")
    # A call whose argument text did not parse was recorded without arguments: replay it as unparsable.
    return ToolCall(event["tool"], "{not json" if args is None else args)


def _run_file_traces(path: Path) -> Iterator[Trace]:
    from mirrorworld.run.trajectories import RunFile

    with RunFile.open(path) as run:
        for ep in run.episodes():
            calls = [_recorded(e) for e in ep.calls]
            yield Trace("recorded", f"{path.name} episode {ep.index} ({ep.agent} on {ep.task_id})", "recorded", calls)


# -- random calls -------------------------------------------------------------------


def _ids(s: Session, sql: str) -> list[int]:
    return [int(r[0]) for r in s.db.execute(sql).fetchall()]


def _pick(rng: random.Random, ids: list[int], fallback: int = 1) -> int:
    return rng.choice(ids) if ids else fallback


_EMAILS_BAD = (
    "not-an-email",
    "sales@@example.com",
    "a b@example.com",
    "x@",
    "@example.com",
    "orders@host",
    "a..b@example.com",
    "buyer@localhost",
    "buyer@shop.test",
    "Buyer <buyer@example.com>",
    ".lead@example.com",
)
_EMAILS_GOOD = (
    "Buyer.{n}@Client{m}.Example",
    "buyer+orders{n}@client{m}.example",
    "ap-{n}@mail.client{m}.example.com",
    "BUYER{n}@CLIENT{m}.EXAMPLE",
    "müller{n}@client{m}.example",
    "o'brien{n}@client{m}.example",
)
_PHONES_GOOD = (
    "+1 212 555 01{n:02d}",
    "+1 (415) 555-01{n:02d}",
    "+1.312.555.01{n:02d}",
    "+44 20 7946 0{n:03d}",
    "+33 1 42 68 53 {n:02d}",
    "+1-617-555-01{n:02d}",
)
_PHONES_BAD = ("212 555 0142", "+1 555 123 4567", "call me", "+1 212", "555-0199", "+999 1234 5678")
_STRINGS_HOSTILE = ("'; DROP TABLE sale_sale; --", "%_\\", "ünïcødé ✓", "\x1b[2J")


def random_call(rng: random.Random, s: Session, invalid: float) -> ToolCall:
    """One call drawn from the mirror session's current state; bad input with probability ``invalid``."""
    if rng.random() < invalid:
        return _invalid_call(rng, s)
    tool = rng.choice(
        (
            "search_parties",
            "get_party",
            "search_products",
            "get_product",
            "get_opportunity",
            "get_sale",
            "list_sales",
            "get_invoice",
            "list_overdue_invoices",
            "add_contact",
            "create_lead",
            "create_lead",
            "qualify_lead",
            "mark_lost",
            "convert_opportunity",
            "create_quotation",
            "request_discount_approval",
            "add_line",
            "add_line",
            "quote_sale",
            "quote_sale",
            "reopen_sale",
            "remove_line",
            "confirm_sale",
            "confirm_sale",
            "cancel_sale",
            "ship_shipment",
            "ship_shipment",
            "post_invoice",
            "post_invoice",
            "pay_invoice",
            "pay_invoice",
            "pay_invoice",
            "credit_invoice",
            "quote_price",
            "quote_price",
            "return_sale",
            "receive_return",
            "receive_return",
            "set_invoice_method",
        )
    )
    parties = _ids(s, "SELECT id FROM parties WHERE role='customer'")
    if tool == "search_parties":
        return ToolCall(tool, {"query": rng.choice(("ac", "Bak", "labs", "o", "Zephyr", "12", "Summit Out"))})
    if tool == "search_products":
        return ToolCall(tool, {"query": rng.choice(("desk", "P00", "er", "Toner", "lamp", "zz"))})
    if tool in ("get_party", "list_sales", "list_overdue_invoices"):
        return ToolCall(tool, {"party_id": _pick(rng, parties)})
    if tool == "quote_price":  # customers on a price list and off one, quantities either side of its rules
        listed = _ids(s, "SELECT id FROM parties WHERE price_list_id IS NOT NULL")
        party = _pick(rng, listed if rng.random() < 0.7 else parties)
        quantity = rng.choice((1, 3, 9, 10, 19, 20, 49, 50, 120))
        return ToolCall(
            tool,
            {"party_id": party, "product_id": _pick(rng, _ids(s, "SELECT id FROM products")), "quantity": quantity},
        )
    if tool == "return_sale":  # mostly a processing or done sale; sometimes one the desk does not return
        returnable = _ids(s, "SELECT id FROM sales WHERE state IN ('processing','done')")
        return ToolCall(
            tool, {"sale_id": _pick(rng, returnable if rng.random() < 0.85 else _ids(s, "SELECT id FROM sales"))}
        )
    if tool == "receive_return":
        drafts_back = _ids(s, "SELECT id FROM return_shipments WHERE state='draft'")
        every = _ids(s, "SELECT id FROM return_shipments")
        return ToolCall(tool, {"shipment_id": _pick(rng, drafts_back if rng.random() < 0.85 else every)})
    if tool == "get_product":
        return ToolCall(tool, {"product_id": _pick(rng, _ids(s, "SELECT id FROM products"))})
    if tool == "get_opportunity":
        return ToolCall(tool, {"opportunity_id": _pick(rng, _ids(s, "SELECT id FROM opportunities"))})
    if tool == "get_sale":
        return ToolCall(tool, {"sale_id": _pick(rng, _ids(s, "SELECT id FROM sales"))})
    if tool == "get_invoice":
        return ToolCall(tool, {"invoice_id": _pick(rng, _ids(s, "SELECT id FROM invoices"))})
    if tool == "add_contact":
        kind = rng.choice(("email", "phone"))
        forms = _EMAILS_GOOD if kind == "email" else _PHONES_GOOD
        value = rng.choice(forms).format(n=rng.randint(1, 99), m=rng.randint(1, 99))
        return ToolCall(tool, {"party_id": _pick(rng, parties), "kind": kind, "value": value})
    if tool == "create_lead":
        return ToolCall(
            tool,
            {
                "party_id": _pick(rng, parties),
                "description": "Random interest",
                "amount": f"{rng.randint(0, 900)}.{rng.randint(0, 99):02d}",
            },
        )
    if tool in ("qualify_lead", "mark_lost"):
        opps = _ids(s, "SELECT id FROM opportunities WHERE state IN ('lead','opportunity')")
        if rng.random() < 0.2:
            opps = _ids(s, "SELECT id FROM opportunities")
        args: dict[str, Any] = {"opportunity_id": _pick(rng, opps)}
        if tool == "mark_lost":
            args["reason"] = "No budget this year"
        return ToolCall(tool, args)
    if tool == "create_quotation":  # a third for customers on a price list: their lines take its prices
        listed = _ids(s, "SELECT id FROM parties WHERE price_list_id IS NOT NULL")
        party = _pick(rng, listed if rng.random() < 0.35 else parties)
        return ToolCall(tool, {"party_id": party, "description": "Random order"})
    if tool == "convert_opportunity":
        opps = _ids(s, "SELECT id FROM opportunities WHERE state='opportunity'")
        return ToolCall(
            tool,
            {"opportunity_id": _pick(rng, opps if rng.random() < 0.85 else _ids(s, "SELECT id FROM opportunities"))},
        )
    if tool == "reopen_sale":
        quotes = _ids(s, "SELECT id FROM sales WHERE state IN ('quotation','cancelled')")
        return ToolCall(
            tool, {"sale_id": _pick(rng, quotes if rng.random() < 0.85 else _ids(s, "SELECT id FROM sales"))}
        )
    if tool == "remove_line":
        rows = s.db.execute(
            "SELECT l.sale_id, l.id FROM sale_lines l JOIN sales s ON s.id = l.sale_id "
            + ("WHERE s.state IN ('draft','cancelled') " if rng.random() < 0.85 else "")
            + "ORDER BY l.id"
        ).fetchall()
        sale, line = rng.choice(rows) if rows else (1, 1)
        return ToolCall(tool, {"sale_id": int(sale), "line_id": int(line)})
    drafts = _ids(s, "SELECT id FROM sales WHERE state='draft'")
    if tool == "set_invoice_method":  # mostly invoiced on fulfillment, which the quotations it makes then ship
        method = rng.choice(("fulfillment", "fulfillment", "order", "manual"))
        sales = drafts if rng.random() < 0.85 else _ids(s, "SELECT id FROM sales")
        return ToolCall(tool, {"sale_id": _pick(rng, sales), "method": method})
    if tool == "request_discount_approval":
        return ToolCall(
            tool,
            {
                "sale_id": _pick(rng, drafts),
                "discount": str(rng.choice((8, 12, 15, 22.5, 30, 35))),
                "reason": "Loyal customer",
            },
        )
    if tool == "add_line":  # without a discount a third of the time: the sale's price list prices the line
        new_line: dict[str, Any] = {
            "sale_id": _pick(rng, drafts if rng.random() < 0.9 else _ids(s, "SELECT id FROM sales")),
            "product_id": _pick(rng, _ids(s, "SELECT id FROM products")),
            "quantity": rng.randint(1, 9) if rng.random() < 0.8 else rng.choice((10, 20, 50)),
        }
        if rng.random() < 0.67:
            new_line["discount"] = str(rng.choice((0, 0, 0, 2.5, 5, 10, 12, 15, 20)))
        return ToolCall(tool, new_line)
    if tool == "quote_sale":
        return ToolCall(
            tool, {"sale_id": _pick(rng, drafts if rng.random() < 0.85 else _ids(s, "SELECT id FROM sales"))}
        )
    if tool == "confirm_sale":
        quotes = _ids(s, "SELECT id FROM sales WHERE state='quotation'")
        return ToolCall(
            tool, {"sale_id": _pick(rng, quotes if rng.random() < 0.85 else _ids(s, "SELECT id FROM sales"))}
        )
    if tool == "cancel_sale":
        return ToolCall(tool, {"sale_id": _pick(rng, _ids(s, "SELECT id FROM sales"))})
    if tool == "ship_shipment":
        waiting = _ids(s, "SELECT id FROM shipments WHERE state='waiting'")
        shipment = _pick(rng, waiting if rng.random() < 0.85 else _ids(s, "SELECT id FROM shipments"))
        if rng.random() < 0.4:
            return ToolCall(tool, {"shipment_id": shipment, "partial": True})
        return ToolCall(tool, {"shipment_id": shipment})
    if tool == "post_invoice":
        drafts_inv = _ids(s, "SELECT id FROM invoices WHERE state='draft'")
        return ToolCall(
            tool, {"invoice_id": _pick(rng, drafts_inv if rng.random() < 0.85 else _ids(s, "SELECT id FROM invoices"))}
        )
    if tool == "credit_invoice":
        issued = _ids(s, "SELECT id FROM invoices WHERE state IN ('posted','paid') AND credit_of IS NULL")
        return ToolCall(
            tool, {"invoice_id": _pick(rng, issued if rng.random() < 0.95 else _ids(s, "SELECT id FROM invoices"))}
        )
    return _payment(rng, s)


def _payment(rng: random.Random, s: Session) -> ToolCall:
    """A payment on a posted invoice: the amount due, part of it, a little less or more, settled every way."""
    posted = s.db.execute("SELECT id, total, paid FROM invoices WHERE state='posted' AND credit_of IS NULL").fetchall()
    if not posted or rng.random() < 0.1:
        return ToolCall(
            "pay_invoice", {"invoice_id": _pick(rng, _ids(s, "SELECT id FROM invoices")), "amount": "10.00"}
        )
    iid, total, paid = rng.choice(posted)
    due = Decimal(total) - Decimal(paid)
    cents = Decimal(rng.randint(1, 499)).scaleb(-2)
    roll = rng.random()
    if roll < 0.4:
        amount, settle = due, rng.choice((None, "partial", "writeoff", "overpayment"))
    elif roll < 0.6:
        amount, settle = (due / 2).quantize(Decimal("0.01")), "partial"
    elif roll < 0.75:
        amount, settle = due - cents, "writeoff"
    elif roll < 0.9:
        amount, settle = due + rng.choice((cents, Decimal("25.00"), Decimal("250.00"))), "overpayment"
    else:
        amount, settle = due + cents, "writeoff"
    args: dict[str, Any] = {"invoice_id": int(iid), "amount": str(max(amount, Decimal("0.01")))}
    if settle is not None:
        args["settle"] = settle
    return ToolCall("pay_invoice", args)


def _refused_settlement(rng: random.Random, s: Session, kind: int) -> ToolCall:
    """A payment or credit the real system (13) or the desk's rules (14) refuse: an "overpayment" below the
    amount due (the remainder needs a write-off method); a write-off above the desk's limit, a credit note paid,
    a draft, cancelled or credit-note document credited."""
    posted = s.db.execute("SELECT id, total, paid FROM invoices WHERE state='posted' AND credit_of IS NULL").fetchall()
    iid, total, paid = rng.choice(posted) if posted else (1, "100.00", "0.00")
    due = Decimal(total) - Decimal(paid)
    if kind == 13:
        amount = max(due - Decimal(rng.choice(("0.01", "3.00", "100.00"))), Decimal("0.01"))
        return ToolCall("pay_invoice", {"invoice_id": int(iid), "amount": str(amount), "settle": "overpayment"})
    desk = rng.randrange(3)
    if desk == 0:
        gap = Decimal(rng.choice(("5.01", "12.00", "80.00")))
        amount = due + gap if rng.random() < 0.3 else max(due - gap, Decimal("0.01"))
        return ToolCall("pay_invoice", {"invoice_id": int(iid), "amount": str(amount), "settle": "writeoff"})
    notes = _ids(s, "SELECT id FROM invoices WHERE state='posted' AND credit_of IS NOT NULL")
    if desk == 1 and notes:
        return ToolCall("pay_invoice", {"invoice_id": _pick(rng, notes), "amount": "10.00"})
    others = _ids(s, "SELECT id FROM invoices WHERE state NOT IN ('posted','paid') OR credit_of IS NOT NULL")
    return ToolCall("credit_invoice", {"invoice_id": _pick(rng, others)})


INTERFACE_SHARE = 0.2
"""The share of bad calls that the argument interface refuses (mirror code both backends share);
the rest are refusals the real system makes (states, missing records, invalid contacts, amounts)."""


def _invalid_call(rng: random.Random, s: Session) -> ToolCall:
    if rng.random() < INTERFACE_SHARE:
        return _interface_call(rng, s)
    return _refused_call(rng, s)


def _interface_call(rng: random.Random, s: Session) -> ToolCall:
    """Bad input the shared argument interface refuses before any backend runs."""
    kind = rng.randrange(8)
    parties = _ids(s, "SELECT id FROM parties WHERE role='customer'")
    if kind == 0:
        return ToolCall(rng.choice(("delete_everything", "get_sales", "")), {})
    if kind == 1:
        return ToolCall(
            rng.choice(("get_sale", "add_line", "quote_sale")), rng.choice(("{not json", "[1, 2]", '{"sale_id": '))
        )
    if kind == 2:
        return ToolCall("get_sale", {"sale_id": rng.choice(("abc", True, 1.5, None, [1], 0, -4))})
    if kind == 3:
        return ToolCall("add_contact", {"party_id": _pick(rng, parties), "kind": "fax", "value": "123"})
    if kind == 4:
        return ToolCall(
            "create_lead",
            {"party_id": _pick(rng, parties), "description": "x", "amount": rng.choice(("-5", "1.234", "lots"))},
        )
    if kind == 5:
        sale = _pick(rng, _ids(s, "SELECT id FROM sales WHERE state='draft'"))
        return ToolCall(
            "add_line", {"sale_id": sale, "product_id": 1, "quantity": rng.choice((0, -2, 10**6)), "discount": "0"}
        )
    if kind == 6:
        sale = _pick(rng, _ids(s, "SELECT id FROM sales WHERE state='draft'"))
        return ToolCall(
            "add_line",
            {"sale_id": sale, "product_id": 2, "quantity": 1, "discount": rng.choice(("45", "101", "-3", "12.345"))},
        )
    return ToolCall(
        rng.choice(("search_parties", "search_products")),
        {"query": rng.choice(("", " x ", "y" * 300, *_STRINGS_HOSTILE))},
    )


def _refused_call(rng: random.Random, s: Session) -> ToolCall:
    """A well-formed call the real system refuses: a record that is missing or in the wrong state, an invalid
    contact, an amount above what is due, an order past the customer's credit limit, an invoice method changed
    once the sale left draft."""
    kind = rng.randrange(17)
    parties = _ids(s, "SELECT id FROM parties WHERE role='customer'")
    if kind == 16:  # Tryton's invoice method is read-only outside draft
        not_draft = _ids(s, "SELECT id FROM sales WHERE state<>'draft'")
        method = rng.choice(("order", "fulfillment", "manual"))
        return ToolCall("set_invoice_method", {"sale_id": _pick(rng, not_draft), "method": method})
    if kind == 15:  # a quotation of a customer with a credit limit (Tryton refuses those that would pass it)
        limited = _ids(
            s,
            "SELECT s.id FROM sales s JOIN parties p ON p.id = s.party_id "
            "WHERE s.state='quotation' AND p.credit_limit IS NOT NULL",
        )
        return ToolCall("confirm_sale", {"sale_id": _pick(rng, limited)})
    if kind >= 13:
        return _refused_settlement(rng, s, kind)
    if kind == 10:
        not_open = _ids(s, "SELECT id FROM opportunities WHERE state<>'opportunity'")
        return ToolCall("convert_opportunity", {"opportunity_id": _pick(rng, not_open)})
    if kind == 11:
        others = _ids(s, "SELECT id FROM sales WHERE state NOT IN ('quotation','cancelled')")
        return ToolCall("reopen_sale", {"sale_id": _pick(rng, others)})
    if kind == 12:
        rows = s.db.execute(
            "SELECT l.sale_id, l.id FROM sale_lines l JOIN sales s ON s.id = l.sale_id "
            "WHERE s.state NOT IN ('draft','cancelled') ORDER BY l.id"
        ).fetchall()
        sale, line = rng.choice(rows) if rows else (1, 1)
        if rng.random() < 0.3:
            sale = int(sale) + 1  # a line of another sale
        return ToolCall("remove_line", {"sale_id": int(sale), "line_id": int(line)})
    if kind == 0:
        tool, key = rng.choice(
            (
                ("confirm_sale", "sale_id"),
                ("get_sale", "sale_id"),
                ("get_invoice", "invoice_id"),
                ("ship_shipment", "shipment_id"),
                ("get_opportunity", "opportunity_id"),
                ("get_party", "party_id"),
            )
        )
        return ToolCall(tool, {key: rng.choice((999, 4321, 99999))})
    if kind == 1:
        return ToolCall(
            "add_contact", {"party_id": _pick(rng, parties), "kind": "email", "value": rng.choice(_EMAILS_BAD)}
        )
    if kind == 2:
        return ToolCall(
            "add_contact", {"party_id": _pick(rng, parties), "kind": "phone", "value": rng.choice(_PHONES_BAD)}
        )
    if kind == 3:
        sale = _pick(rng, _ids(s, "SELECT id FROM sales WHERE state<>'draft'"))
        tool = rng.choice(("quote_sale", "add_line", "request_discount_approval"))
        args: dict[str, Any] = {"sale_id": sale}
        if tool == "add_line":
            args |= {"product_id": _pick(rng, _ids(s, "SELECT id FROM products")), "quantity": 1, "discount": "0"}
        elif tool == "request_discount_approval":
            args |= {"discount": "15", "reason": "Loyal customer"}
        return ToolCall(tool, args)
    if kind == 4:
        posted = s.db.execute("SELECT id, total, paid FROM invoices WHERE state='posted'").fetchall()
        iid, total, paid = rng.choice(posted) if posted else (1, "1.00", "0.00")
        over = Decimal(total) - Decimal(paid) + Decimal(rng.choice(("0.01", "1.00", "250.00")))
        return ToolCall("pay_invoice", {"invoice_id": int(iid), "amount": str(over)})
    if kind == 5:
        done = _ids(s, "SELECT id FROM opportunities WHERE state NOT IN ('lead','opportunity')")
        tool = rng.choice(("qualify_lead", "mark_lost"))
        args = {"opportunity_id": _pick(rng, done)}
        if tool == "mark_lost":
            args["reason"] = "late"
        return ToolCall(tool, args)
    if kind == 6:
        not_draft = _ids(s, "SELECT id FROM invoices WHERE state<>'draft'")
        return ToolCall("post_invoice", {"invoice_id": _pick(rng, not_draft)})
    if kind == 7:
        not_posted = _ids(s, "SELECT id FROM invoices WHERE state<>'posted'")
        return ToolCall("pay_invoice", {"invoice_id": _pick(rng, not_posted), "amount": "10.00"})
    if kind == 8:
        tool, state = rng.choice((("confirm_sale", "quotation"), ("cancel_sale", "draft','quotation")))
        others = _ids(s, f"SELECT id FROM sales WHERE state NOT IN ('{state}')")
        return ToolCall(tool, {"sale_id": _pick(rng, others)})
    done = _ids(s, "SELECT id FROM shipments WHERE state<>'waiting'")
    return ToolCall("ship_shipment", {"shipment_id": _pick(rng, done)})
