"""The real twin: a Tryton database behind the sales world's tool interface.

Needs Tryton (``pip install 'mirrorworld[twin]'``); skipped when it is not
importable. The twin database is built once (about a minute) and cached under
``$MIRRORWORLD_CACHE`` (default ``~/.cache/mirrorworld``); every test shares
one loaded twin.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from mirrorworld.twin import tryton
from mirrorworld.worlds.sales import SalesWorld
from mirrorworld.worlds.sales.world import canonical_state

pytestmark = pytest.mark.skipif(not tryton.available(), reason="Tryton (trytond, proteus) is not installed")

WORLD = SalesWorld()


@pytest.fixture(scope="session")
def twin() -> Iterator[Any]:
    from mirrorworld.twin.testing import shared_twin

    yield shared_twin()


def _file_hash(twin: Any) -> str:
    path = twin._dir / "twin.sqlite"
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_pristine_twin_equals_pristine_mirror(twin: Any) -> None:
    with WORLD.session() as m, twin.session() as t:
        assert t.canonical_state() == canonical_state(m.db)


def test_gold_solutions_reach_the_same_state(twin: Any) -> None:
    for family in WORLD.families:
        task = WORLD.task(family.name, 0)
        with WORLD.session(task) as m, twin.session() as t:
            for call in task.gold:
                a, b = m.call(call.tool, call.args), t.call(call.tool, call.args)
                assert a.ok and b.ok, (task.id, call, a.error, b.error)
            assert t.canonical_state() == canonical_state(m.db), task.id


BAD_CALLS: list[tuple[str, Any]] = [
    ("no_such_tool", {}),
    ("get_sale", "{not json"),
    ("get_sale", {"sale_id": "abc"}),
    ("get_sale", {"sale_id": 99999}),
    ("add_line", {"sale_id": 1, "product_id": 1}),
    ("add_line", {"sale_id": 1, "product_id": 1, "quantity": 1, "bogus": 2}),
    ("add_line", {"sale_id": 1, "product_id": 1, "quantity": 0}),
    ("add_line", {"sale_id": 1, "product_id": 1, "quantity": 1, "discount": "45"}),
    ("add_contact", {"party_id": 3, "kind": "email", "value": "not-an-email"}),
    ("add_contact", {"party_id": 3, "kind": "fax", "value": "1"}),
    ("create_lead", {"party_id": 3, "description": "x", "amount": "-5"}),
    ("confirm_sale", {"sale_id": 1}),
    ("cancel_sale", {"sale_id": 30}),
    ("request_discount_approval", {"sale_id": 1, "discount": "35", "reason": "x"}),
    ("qualify_lead", {"opportunity_id": 5}),
    ("search_parties", {"query": "'; DROP TABLE party_party; --"}),
    ("pay_invoice", {"invoice_id": 11, "amount": "99999.00"}),
    ("ship_shipment", {"shipment_id": 999}),
]


@pytest.mark.parametrize(("tool", "args"), BAD_CALLS)
def test_bad_input_gets_the_mirrors_error_and_changes_nothing(twin: Any, tool: str, args: Any) -> None:
    before_file = _file_hash(twin)
    with WORLD.session() as m, twin.session() as t:
        before = t.canonical_state()
        a, b = m.call(tool, args), t.call(tool, args)
        assert (a.ok, (a.error or {}).get("code")) == (b.ok, (b.error or {}).get("code")), (a.error, b.error)
        if not b.ok:
            assert isinstance(b.error, dict) and set(b.error) >= {"code", "message"}
            assert t.canonical_state() == before
    assert _file_hash(twin) == before_file


def test_a_session_never_changes_the_twin_database(twin: Any) -> None:
    before_file = _file_hash(twin)
    with twin.session() as t:
        sale = t.call("create_quotation", {"party_id": 3}).data["sale_id"]
        assert t.call("add_line", {"sale_id": sale, "product_id": 2, "quantity": 1}).ok
        assert t.call("quote_sale", {"sale_id": sale}).ok
    with twin.session() as t, WORLD.session() as m:
        assert t.canonical_state() == canonical_state(m.db)
    assert _file_hash(twin) == before_file


def test_refused_call_inside_a_session_is_rolled_back(twin: Any) -> None:
    with twin.session() as t:
        before = t.canonical_state()
        # Shipping needs more stock than exists: Tryton reserves part, the savepoint undoes it.
        sale = t.call("create_quotation", {"party_id": 25}).data["sale_id"]
        t.call("add_line", {"sale_id": sale, "product_id": 1, "quantity": 5000})
        t.call("quote_sale", {"sale_id": sale})
        confirmed = t.call("confirm_sale", {"sale_id": sale}).data
        assert confirmed["state"] == "processing"
        shipment = t.call("get_sale", {"sale_id": sale}).data["shipments"][0]["id"]
        mid = t.canonical_state()
        result = t.call("ship_shipment", {"shipment_id": shipment})
        assert not result.ok and result.error["code"] == "validation_error"
        assert t.canonical_state() == mid
        assert mid != before


def test_twin_cache_key_tracks_versions_and_world() -> None:
    from mirrorworld.twin.db import twin_key

    assert twin_key(WORLD) == twin_key(SalesWorld())
    assert twin_key(WORLD) != twin_key(SalesWorld(data_seed=1))


# Calls only Tryton decides: button states refuse workflow moves, a saved line refuses a quoted sale, the pay
# wizard refuses an overpayment, the party module validates contacts. Same code and same message on both sides.
TRYTON_DECIDES: list[tuple[str, Any, str]] = [
    ("add_line", {"sale_id": 11, "product_id": 1, "quantity": 1, "discount": 0}, "invalid_state"),
    ("quote_sale", {"sale_id": 31}, "invalid_state"),
    ("confirm_sale", {"sale_id": 1}, "invalid_state"),
    ("cancel_sale", {"sale_id": 14}, "invalid_state"),
    ("ship_shipment", {"shipment_id": 8}, "invalid_state"),
    ("post_invoice", {"invoice_id": 11}, "invalid_state"),
    ("pay_invoice", {"invoice_id": 1, "amount": "10.00"}, "invalid_state"),
    ("pay_invoice", {"invoice_id": 11, "amount": "940.47"}, "policy_refused"),
    ("pay_invoice", {"invoice_id": 11, "amount": "940.00", "settle": "overpayment"}, "validation_error"),
    ("pay_invoice", {"invoice_id": 16, "amount": "5.00", "settle": "writeoff"}, "invalid_state"),
    ("mark_lost", {"opportunity_id": 10, "reason": "late"}, "invalid_state"),
    ("qualify_lead", {"opportunity_id": 2}, "invalid_state"),
    ("add_contact", {"party_id": 3, "kind": "email", "value": "buyer@localhost"}, "validation_error"),
    ("add_contact", {"party_id": 3, "kind": "email", "value": "a..b@example.com"}, "validation_error"),
    ("add_contact", {"party_id": 3, "kind": "phone", "value": "212 555 0142"}, "validation_error"),
    ("add_contact", {"party_id": 3, "kind": "phone", "value": "+1 555 123 4567"}, "validation_error"),
    ("get_sale", {"sale_id": 99999}, "not_found"),
]


@pytest.mark.parametrize(("tool", "args", "code"), TRYTON_DECIDES)
def test_tryton_decides_the_refusal_and_the_mirror_says_the_same(twin: Any, tool: str, args: Any, code: str) -> None:
    with WORLD.session() as m, twin.session() as t:
        a, b = m.call(tool, args), t.call(tool, args)
        assert t.decided_by == "real"
        assert not a.ok and not b.ok
        assert a.error["code"] == b.error["code"] == code  # type: ignore[index]
        assert a.error["message"] == b.error["message"]  # type: ignore[index]


CONTACTS = [
    ("email", "Buyer.7@Client3.Example", "Buyer.7@client3.example"),
    ("email", "BUYER@CLIENT.EXAMPLE", "BUYER@client.example"),
    ("email", "müller@bücher.example", "müller@bücher.example"),
    ("phone", "+1 (415) 555-0142", "+1 415-555-0142"),
    ("phone", "+1.312.555.0188", "+1 312-555-0188"),
    ("phone", "+44 20 7946 0958", "+44 20 7946 0958"),
]


@pytest.mark.parametrize(("kind", "value", "stored"), CONTACTS)
def test_contacts_are_stored_as_tryton_stores_them(twin: Any, kind: str, value: str, stored: str) -> None:
    with WORLD.session() as m, twin.session() as t:
        args = {"party_id": 3, "kind": kind, "value": value}
        assert m.call("add_contact", args).ok and t.call("add_contact", args).ok
        assert t.decided_by == "real"
        mine = m.call("get_party", {"party_id": 3}).data["contacts"][-1]
        theirs = t.call("get_party", {"party_id": 3}).data["contacts"][-1]
        assert mine == theirs and mine["value"] == stored
        assert t.canonical_state() == canonical_state(m.db)


def test_each_call_is_attributed_to_who_decided_it(twin: Any) -> None:
    with twin.session() as t:
        t.call("get_policy", {})
        assert t.decided_by == "shared"  # the session answers it
        t.call("get_sale", {"sale_id": "abc"})
        assert t.decided_by == "shared"  # the argument interface refuses it
        t.call("add_line", {"sale_id": 1, "product_id": 1, "quantity": 0, "discount": 0})
        assert t.decided_by == "shared"  # the desk's quantity rule in rules.py
        t.call("request_discount_approval", {"sale_id": 1, "discount": "15", "reason": "Loyal customer"})
        assert t.decided_by == "adapter"  # approvals are the desk's, kept as notes
        t.call("add_line", {"sale_id": 1, "product_id": 1, "quantity": 1, "discount": "15"})
        assert t.decided_by == "real"  # Tryton's sale_discount prices the line
        t.call("quote_sale", {"sale_id": 31})
        assert t.decided_by == "real"  # Tryton's button states refuse it


def test_discounted_lines_are_priced_by_tryton_and_read_back_alike(twin: Any) -> None:
    with WORLD.session() as m, twin.session() as t:
        for s in (m, t):
            assert s.call("request_discount_approval", {"sale_id": 1, "discount": "22.5", "reason": "Volume"}).ok
        for product, discount in ((1, "7.77"), (4, "22.5"), (5, "0.01"), (12, "10")):
            args = {"sale_id": 1, "product_id": product, "quantity": 3, "discount": discount}
            a, b = m.call("add_line", args), t.call("add_line", args)
            assert a.ok and b.ok and a.data == b.data, (a.data, b.data)
        assert m.call("get_sale", {"sale_id": 1}).data["lines"] == t.call("get_sale", {"sale_id": 1}).data["lines"]
        assert t.canonical_state() == canonical_state(m.db)


# The wider surface, call by call on both backends: conversion (converted, won, lost and back), reopening and
# amending, partial shipments and their backorders, a cancelled sale's frozen amounts.
SURFACE_TRACES: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "convert_reopen_amend": [
        ("convert_opportunity", {"opportunity_id": 2}),
        ("get_sale", {"sale_id": 33}),
        ("add_line", {"sale_id": 33, "product_id": 1, "quantity": 2, "discount": 0}),
        ("quote_sale", {"sale_id": 33}),
        ("get_opportunity", {"opportunity_id": 2}),
        ("convert_opportunity", {"opportunity_id": 2}),
        ("convert_opportunity", {"opportunity_id": 1}),
        ("reopen_sale", {"sale_id": 33}),
        ("remove_line", {"sale_id": 33, "line_id": 62}),
        ("remove_line", {"sale_id": 33, "line_id": 62}),
        ("add_line", {"sale_id": 33, "product_id": 4, "quantity": 3, "discount": 0}),
        ("quote_sale", {"sale_id": 33}),
        ("get_opportunity", {"opportunity_id": 2}),
        ("remove_line", {"sale_id": 33, "line_id": 63}),
        ("confirm_sale", {"sale_id": 33}),
        ("get_opportunity", {"opportunity_id": 2}),
        ("reopen_sale", {"sale_id": 33}),
        ("convert_opportunity", {"opportunity_id": 5}),
        ("cancel_sale", {"sale_id": 34}),
        ("get_opportunity", {"opportunity_id": 5}),
        ("reopen_sale", {"sale_id": 34}),
        ("quote_sale", {"sale_id": 34}),
        ("get_opportunity", {"opportunity_id": 5}),
        ("reopen_sale", {"sale_id": 31}),
        ("remove_line", {"sale_id": 33, "line_id": 1}),
        ("remove_line", {"sale_id": 33, "line_id": 9999}),
        ("get_sale", {"sale_id": 34}),
    ],
    "partial_shipment_backorder": [
        ("create_quotation", {"party_id": 3}),
        ("add_line", {"sale_id": 33, "product_id": 7, "quantity": 3}),
        ("add_line", {"sale_id": 33, "product_id": 1, "quantity": 5}),
        ("add_line", {"sale_id": 33, "product_id": 1, "quantity": 6}),
        ("add_line", {"sale_id": 33, "product_id": 4, "quantity": 2}),
        ("quote_sale", {"sale_id": 33}),
        ("confirm_sale", {"sale_id": 33}),
        ("get_sale", {"sale_id": 33}),
        ("ship_shipment", {"shipment_id": 18}),
        ("ship_shipment", {"shipment_id": 18, "partial": True}),
        ("get_sale", {"sale_id": 33}),
        ("ship_shipment", {"shipment_id": 19, "partial": True}),
        ("ship_shipment", {"shipment_id": 19}),
        ("get_product", {"product_id": 1}),
        ("ship_shipment", {"shipment_id": 1, "partial": True}),
        ("get_sale", {"sale_id": 14}),
        ("post_invoice", {"invoice_id": 18}),
        ("get_invoice", {"invoice_id": 18}),
    ],
    "cancelled_sale_amounts_frozen": [
        ("get_sale", {"sale_id": 33}),
        ("remove_line", {"sale_id": 32, "line_id": 60}),
        ("get_sale", {"sale_id": 33}),
        ("reopen_sale", {"sale_id": 32}),
        ("get_sale", {"sale_id": 33}),
        ("cancel_sale", {"sale_id": 32}),
        ("remove_line", {"sale_id": 32, "line_id": 59}),
        ("get_sale", {"sale_id": 33}),
    ],
}


@pytest.mark.parametrize("name", sorted(SURFACE_TRACES))
def test_the_wider_surface_agrees_with_tryton_call_by_call(twin: Any, name: str) -> None:
    from mirrorworld.fidelity.harness import compare, response

    with WORLD.session() as m, twin.session() as t:
        for tool, args in SURFACE_TRACES[name]:
            a, b = response(m.call(tool, args)), response(t.call(tool, args))
            assert compare(a, b) is None, (tool, args, a, b)
            if not a["ok"]:
                assert a["message"] == b["message"], (tool, args)
        assert t.canonical_state() == canonical_state(m.db)


# Payments settled every way Tryton's pay wizard offers, and credit notes through its credit wizard: the same
# responses (data, or code and message) call by call and the same books at the end.
SETTLEMENTS: dict[str, list[tuple[str, Any]]] = {
    "short payment written off": [
        ("pay_invoice", {"invoice_id": 11, "amount": "938.00", "settle": "writeoff"}),
        ("get_invoice", {"invoice_id": 11}),
        ("get_party", {"party_id": 3}),
    ],
    "excess written off": [("pay_invoice", {"invoice_id": 13, "amount": "2410.00", "settle": "writeoff"})],
    "partial payments, then the rest written off": [
        ("pay_invoice", {"invoice_id": 14, "amount": "1000.00"}),
        ("pay_invoice", {"invoice_id": 14, "amount": "2225.00", "settle": "writeoff"}),
        ("get_invoice", {"invoice_id": 14}),
    ],
    "overpayment left as credit": [
        ("pay_invoice", {"invoice_id": 12, "amount": "1000.00", "settle": "overpayment"}),
        ("get_party", {"party_id": 14}),
        ("get_sale", {"sale_id": 25}),
    ],
    "a partial payment, then an overpayment": [
        ("pay_invoice", {"invoice_id": 15, "amount": "500.00"}),
        ("pay_invoice", {"invoice_id": 15, "amount": "480.00", "settle": "overpayment"}),
    ],
    "the exact amount due, settled any way": [
        ("pay_invoice", {"invoice_id": 11, "amount": "940.46", "settle": "overpayment"}),
        ("pay_invoice", {"invoice_id": 13, "amount": "2407.59", "settle": "writeoff"}),
    ],
    "refusals": [
        ("pay_invoice", {"invoice_id": 11, "amount": "900.00", "settle": "overpayment"}),
        ("pay_invoice", {"invoice_id": 11, "amount": "930.00", "settle": "writeoff"}),
        ("pay_invoice", {"invoice_id": 11, "amount": "950.00", "settle": "writeoff"}),
        ("pay_invoice", {"invoice_id": 11, "amount": "950.00", "settle": "partial"}),
        ("pay_invoice", {"invoice_id": 16, "amount": "1.00", "settle": "overpayment"}),
    ],
    "a posted invoice refunded": [
        ("credit_invoice", {"invoice_id": 15}),
        ("get_invoice", {"invoice_id": 15}),
        ("get_invoice", {"invoice_id": 18}),
        ("get_sale", {"sale_id": 28}),
        ("credit_invoice", {"invoice_id": 15}),
        ("credit_invoice", {"invoice_id": 18}),
    ],
    "a paid invoice credited, its credit note posted": [
        ("credit_invoice", {"invoice_id": 16}),
        ("get_invoice", {"invoice_id": 18}),
        ("pay_invoice", {"invoice_id": 18, "amount": "10.00"}),
        ("post_invoice", {"invoice_id": 18}),
        ("pay_invoice", {"invoice_id": 18, "amount": "10.00"}),
        ("get_invoice", {"invoice_id": 16}),
        ("get_sale", {"sale_id": 29}),
        ("get_party", {"party_id": 3}),
    ],
    "a partly paid invoice credited": [
        ("pay_invoice", {"invoice_id": 14, "amount": "100.00"}),
        ("credit_invoice", {"invoice_id": 14}),
        ("post_invoice", {"invoice_id": 18}),
        ("get_party", {"party_id": 5}),
        ("credit_invoice", {"invoice_id": 1}),
    ],
}


@pytest.mark.parametrize("name", list(SETTLEMENTS))
def test_settlements_and_credit_notes_agree_with_tryton(twin: Any, name: str) -> None:
    from mirrorworld.fidelity.harness import response

    with WORLD.session() as m, twin.session() as t:
        for tool, args in SETTLEMENTS[name]:
            a, b = response(m.call(tool, args)), response(t.call(tool, args))
            assert a == b, (tool, args, a, b)
        assert t.canonical_state() == canonical_state(m.db)


def test_the_books_after_a_writeoff_an_overpayment_and_a_refund(twin: Any) -> None:
    with twin.session() as t:
        before = t.canonical_state()["ledger"]
        assert t.call("pay_invoice", {"invoice_id": 11, "amount": "938.00", "settle": "writeoff"}).ok
        assert t.call("pay_invoice", {"invoice_id": 12, "amount": "1000.00", "settle": "overpayment"}).ok
        assert t.call("credit_invoice", {"invoice_id": 15}).ok
        after = t.canonical_state()["ledger"]
    assert after["writeoff"] == "2.46"  # the expense Tryton's write-off method booked
    assert after["receivable"]["14"] == "-93.89"  # the overpaid excess is the customer's credit
    assert after["receivable"]["22"] == "0"  # the refund cancels what invoice 15 put on the books
    assert Decimal(after["revenue"]) == Decimal(before["revenue"]) - Decimal("883.84")
    assert Decimal(after["cash"]) == Decimal(before["cash"]) + Decimal("1938.00")


# Who decides: Tryton's wizards refuse an overpayment below what is due; the desk's rules (which Tryton has no
# notion of) limit write-offs, keep credit notes unpaid and credit only posted or paid invoices.
DECIDED: list[tuple[str, Any, str, str]] = [
    ("pay_invoice", {"invoice_id": 11, "amount": "900.00", "settle": "overpayment"}, "real", "validation_error"),
    ("pay_invoice", {"invoice_id": 11, "amount": "930.00", "settle": "writeoff"}, "adapter", "policy_refused"),
    ("pay_invoice", {"invoice_id": 11, "amount": "938.00", "settle": "writeoff"}, "real", ""),
    ("credit_invoice", {"invoice_id": 1}, "adapter", "invalid_state"),
    ("credit_invoice", {"invoice_id": 16}, "real", ""),
]


@pytest.mark.parametrize(("tool", "args", "decider", "code"), DECIDED)
def test_settlements_are_attributed_to_who_decided_them(
    twin: Any, tool: str, args: Any, decider: str, code: str
) -> None:
    with twin.session() as t:
        result = t.call(tool, args)
        assert t.decided_by == decider
        assert (result.error or {}).get("code", "") == code


# Payment terms: Tryton's standard terms on the customers, its maturity dates on the invoices' lines to pay (from
# invoice dates the history set), and what it still has to be paid: the same due dates and overdue lists.
OVERDUE: dict[str, list[tuple[str, Any]]] = {
    "every customer's overdue invoices": [
        *(("list_overdue_invoices", {"party_id": p}) for p in (3, 5, 14, 22, 26, 999)),
        *(("get_invoice", {"invoice_id": i}) for i in (1, 11, 12, 13, 14, 15, 16)),
        ("get_party", {"party_id": 16}),
    ],
    "paid in part, then in full": [
        ("pay_invoice", {"invoice_id": 12, "amount": "900.00"}),
        ("list_overdue_invoices", {"party_id": 14}),
        ("pay_invoice", {"invoice_id": 12, "amount": "6.11"}),
        ("list_overdue_invoices", {"party_id": 14}),
    ],
    "posted today, refunded": [
        ("post_invoice", {"invoice_id": 1}),
        ("get_invoice", {"invoice_id": 1}),
        ("credit_invoice", {"invoice_id": 11}),
        ("get_invoice", {"invoice_id": 18}),
        ("list_overdue_invoices", {"party_id": 3}),
    ],
    "a new sale takes its customer's term": [
        ("create_quotation", {"party_id": 15, "description": "Chairs"}),
        ("get_sale", {"sale_id": 33}),
    ],
}


@pytest.mark.parametrize("name", list(OVERDUE))
def test_due_dates_and_overdue_invoices_agree_with_tryton(twin: Any, name: str) -> None:
    from mirrorworld.fidelity.harness import response

    with WORLD.session() as m, twin.session() as t:
        for tool, args in OVERDUE[name]:
            a, b = response(m.call(tool, args)), response(t.call(tool, args))
            assert a == b, (tool, args, a, b)
        assert t.canonical_state() == canonical_state(m.db)


def test_tryton_matures_a_net_30_invoice_thirty_days_after_its_date(twin: Any) -> None:
    with twin.session() as t:
        inv = t.call("get_invoice", {"invoice_id": 12}).data["invoice"]
        assert (inv["payment_term"], inv["invoice_date"], inv["due_date"]) == (
            "Net 30 days",
            "2026-01-28",
            "2026-02-27",
        )
        listed = t.call("list_overdue_invoices", {"party_id": 14}).data
        assert [(i["id"], i["days_overdue"]) for i in listed["invoices"]] == [(12, 17)]
        assert t.decided_by == "real"


# Credit limits: sale_credit_limit refuses the confirmation (CreditLimitError, its own message) and counts what the
# mirror counts: the receivable plus confirmed orders' lines no posted invoice carries.
CREDIT: dict[str, list[tuple[str, Any]]] = {
    "held, paid, confirmed, invoiced": [
        ("get_party", {"party_id": 22}),
        ("confirm_sale", {"sale_id": 8}),
        ("pay_invoice", {"invoice_id": 15, "amount": "500.00"}),
        ("get_party", {"party_id": 22}),
        ("confirm_sale", {"sale_id": 8}),
        ("pay_invoice", {"invoice_id": 15, "amount": "472.22"}),
        ("confirm_sale", {"sale_id": 8}),
        ("get_party", {"party_id": 22}),
        ("post_invoice", {"invoice_id": 18}),
        ("get_party", {"party_id": 22}),
    ],
    "every limited customer": [
        *(("get_party", {"party_id": p}) for p in (3, 6, 15, 16, 22)),
        ("confirm_sale", {"sale_id": 12}),
        ("confirm_sale", {"sale_id": 11}),
        ("get_party", {"party_id": 3}),
    ],
}


@pytest.mark.parametrize("name", list(CREDIT))
def test_credit_limits_agree_with_tryton(twin: Any, name: str) -> None:
    from mirrorworld.fidelity.harness import response

    with WORLD.session() as m, twin.session() as t:
        for tool, args in CREDIT[name]:
            a, b = response(m.call(tool, args)), response(t.call(tool, args))
            assert a == b, (tool, args, a, b)
        assert t.canonical_state() == canonical_state(m.db)


def test_tryton_decides_the_credit_limit(twin: Any) -> None:
    with twin.session() as t:
        result = t.call("confirm_sale", {"sale_id": 8})
        assert t.decided_by == "real"
        assert result.error is not None and result.error["code"] == "policy_refused"
        assert "credit limit" in result.error["message"]


# Price lists: Tryton's product_price_list prices a price-list customer's new lines (the first matching line's
# formula, rounded to 4 decimals); sale_discount's rate is taken off the base (list) price, replacing it.
PRICES: list[tuple[str, Any]] = [
    *(
        ("quote_price", {"party_id": p, "product_id": prod, "quantity": q})
        for p in (27, 28, 5)
        for prod in (2, 4, 6, 10)
        for q in (1, 9, 10, 20, 50)
    ),
    ("get_party", {"party_id": 27}),
    ("get_party", {"party_id": 28}),
    ("create_quotation", {"party_id": 28}),
    ("add_line", {"sale_id": 33, "product_id": 2, "quantity": 1}),
    ("add_line", {"sale_id": 33, "product_id": 7, "quantity": 25}),
    ("add_line", {"sale_id": 33, "product_id": 10, "quantity": 3, "discount": 10}),
    ("add_line", {"sale_id": 33, "product_id": 4, "quantity": 3, "discount": 0}),
    ("get_sale", {"sale_id": 33}),
    ("quote_sale", {"sale_id": 33}),
    ("confirm_sale", {"sale_id": 33}),
    ("get_sale", {"sale_id": 33}),
]


def test_price_lists_agree_with_tryton(twin: Any) -> None:
    from mirrorworld.fidelity.harness import response

    with WORLD.session() as m, twin.session() as t:
        for tool, args in PRICES:
            a, b = response(m.call(tool, args)), response(t.call(tool, args))
            assert a == b, (tool, args, a, b)
        assert t.canonical_state() == canonical_state(m.db)


def test_tryton_prices_the_line(twin: Any) -> None:
    with twin.session() as t:
        sale = t.call("create_quotation", {"party_id": 27}).data["sale_id"]
        line = t.call("add_line", {"sale_id": sale, "product_id": 4, "quantity": 50})
        assert t.decided_by == "real"
        assert line.data["unit_price"] == "30.5000"
        assert t.call("quote_price", {"party_id": 27, "product_id": 4, "quantity": 10}).data["unit_price"] == "34.3125"


# Returns: Tryton's return wizard copies the sale with negated quantities; confirming it makes a customer return
# shipment and a negative invoice (sale's invoice method); receive and done put the goods back in stock.
RETURNS: list[tuple[str, Any]] = [
    ("return_sale", {"sale_id": 1}),
    ("return_sale", {"sale_id": 21}),
    ("get_sale", {"sale_id": 33}),
    ("remove_line", {"sale_id": 33, "line_id": 62}),
    ("quote_sale", {"sale_id": 33}),
    ("confirm_sale", {"sale_id": 33}),
    ("get_sale", {"sale_id": 33}),
    ("get_party", {"party_id": 8}),
    ("receive_return", {"shipment_id": 1}),
    ("receive_return", {"shipment_id": 1}),
    ("receive_return", {"shipment_id": 7}),
    ("post_invoice", {"invoice_id": 18}),
    ("get_invoice", {"invoice_id": 18}),
    ("pay_invoice", {"invoice_id": 18, "amount": "5.00"}),
    ("credit_invoice", {"invoice_id": 18}),
    ("get_sale", {"sale_id": 33}),
    ("get_party", {"party_id": 8}),
    ("get_product", {"product_id": 9}),
]


def test_returns_agree_with_tryton(twin: Any) -> None:
    from mirrorworld.fidelity.harness import response
    from mirrorworld.twin.sales import read_back

    with WORLD.session() as m, twin.session() as t:
        for tool, args in RETURNS:
            a, b = response(m.call(tool, args)), response(t.call(tool, args))
            assert a == b, (tool, args, a, b)
        assert t.canonical_state() == canonical_state(m.db)
        back = read_back(t.pool, 33)["return_moves"]
        assert [(r["line_id"], r["product_id"], r["quantity"]) for r in back] == [
            tuple(r) for r in m.db.execute("SELECT line_id, product_id, quantity FROM return_moves ORDER BY id")
        ]


def test_tryton_makes_the_return(twin: Any) -> None:
    with twin.session() as t:
        sale = t.call("return_sale", {"sale_id": 29})
        assert t.decided_by == "real" and sale.data["total_amount"].startswith("-")
        refused = t.call("return_sale", {"sale_id": 1})
        assert t.decided_by == "adapter" and refused.error is not None and refused.error["rule"] == "sale_return"


# Invoicing on fulfillment: Tryton's sale processing invoices what each shipment sent (one invoice per processing),
# links the invoice lines to the moves they bill, and derives the sale's invoice state and the credit amount from
# all the sale's invoices, as the mirror does.
FULFILLMENT: dict[str, list[tuple[str, Any]]] = {
    "partial, paid, backorder invoiced, credited": [
        ("create_quotation", {"party_id": 14}),
        ("add_line", {"sale_id": 33, "product_id": 11, "quantity": 10}),
        ("add_line", {"sale_id": 33, "product_id": 4, "quantity": 2}),
        ("set_invoice_method", {"sale_id": 33, "method": "fulfillment"}),
        ("quote_sale", {"sale_id": 33}),
        ("set_invoice_method", {"sale_id": 33, "method": "order"}),
        ("confirm_sale", {"sale_id": 33}),
        ("ship_shipment", {"shipment_id": 18, "partial": True}),
        ("get_sale", {"sale_id": 33}),
        ("get_invoice", {"invoice_id": 18}),
        ("post_invoice", {"invoice_id": 18}),
        ("get_party", {"party_id": 14}),
        ("pay_invoice", {"invoice_id": 18, "amount": "930.83"}),
        ("restock", {"product_id": 11, "quantity": 5}),
        ("ship_shipment", {"shipment_id": 19}),
        ("get_sale", {"sale_id": 33}),
        ("get_party", {"party_id": 14}),
        ("post_invoice", {"invoice_id": 19}),
        ("pay_invoice", {"invoice_id": 19, "amount": "100.00"}),
        ("credit_invoice", {"invoice_id": 18}),
        ("get_invoice", {"invoice_id": 20}),
        ("pay_invoice", {"invoice_id": 19, "amount": "111.74"}),
        ("get_sale", {"sale_id": 33}),
    ],
    "a draft set to fulfillment, refunded; manual": [
        ("set_invoice_method", {"sale_id": 6, "method": "fulfillment"}),
        ("quote_sale", {"sale_id": 6}),
        ("confirm_sale", {"sale_id": 6}),
        ("ship_shipment", {"shipment_id": 18}),
        ("post_invoice", {"invoice_id": 18}),
        ("credit_invoice", {"invoice_id": 18}),
        ("get_invoice", {"invoice_id": 19}),
        ("get_sale", {"sale_id": 6}),
        ("set_invoice_method", {"sale_id": 5, "method": "manual"}),
        ("quote_sale", {"sale_id": 5}),
        ("confirm_sale", {"sale_id": 5}),
        ("ship_shipment", {"shipment_id": 19}),
        ("get_sale", {"sale_id": 5}),
        ("get_invoice", {"invoice_id": 1}),
    ],
}


def _restock(m: Any, t: Any, product_id: int, quantity: int) -> None:
    """Stock comes in (no desk tool does it): on the mirror's table, and as a supplier move done in Tryton."""
    m.db.execute("UPDATE products SET on_hand = on_hand + ? WHERE id = ?", (quantity, product_id))
    pool = t.pool
    Location, Move, Company = pool.get("stock.location"), pool.get("stock.move"), pool.get("company.company")
    company, today = Company(1), pool.get("ir.date").today()
    supplier = Location.search([("type", "=", "supplier")], limit=1)[0]
    storage = Location.search([("type", "=", "warehouse")], limit=1)[0].storage_location
    product = pool.get("product.product")(product_id)
    move = {"product": product_id, "unit": product.default_uom.id, "quantity": float(quantity)}
    move |= {"from_location": supplier.id, "to_location": storage.id, "planned_date": today, "effective_date": today}
    move |= {"company": company.id, "unit_price": Decimal(1), "currency": company.currency.id}
    Move.do(Move.create([move]))


@pytest.mark.parametrize("name", list(FULFILLMENT))
def test_invoicing_on_fulfillment_agrees_with_tryton(twin: Any, name: str) -> None:
    from mirrorworld.fidelity.harness import response

    with WORLD.session() as m, twin.session() as t:
        for tool, args in FULFILLMENT[name]:
            if tool == "restock":
                _restock(m, t, args["product_id"], args["quantity"])
                continue
            a, b = response(m.call(tool, args)), response(t.call(tool, args))
            assert a == b, (tool, args, a, b)
        assert t.canonical_state() == canonical_state(m.db)
        from mirrorworld.twin.sales import read_back

        billed = {
            (mv["shipment_id"], mv["invoice_id"]) for mv in read_back(t.pool, 33 if "partial" in name else 6)["moves"]
        }
        assert billed == ({(18, 18), (19, 19)} if "partial" in name else {(18, 18)})


def test_tryton_refuses_the_invoice_method_of_a_quotation(twin: Any) -> None:
    with twin.session() as t:
        result = t.call("set_invoice_method", {"sale_id": 8, "method": "fulfillment"})
        assert t.decided_by == "real"
        assert result.error is not None and result.error["code"] == "invalid_state"
        assert 'modify the field "Invoice Method"' in result.error["message"]
