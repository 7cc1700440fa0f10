"""The sales world: conformance, verifier audit, interfaces and its documented semantics."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorworld.audit import audit_verifiers
from mirrorworld.core.registry import Registry
from mirrorworld.envs.chat import ChatEnv
from mirrorworld.envs.gymnasium import MirrorEnv
from mirrorworld.testing import check_world
from mirrorworld.worlds.sales import SalesWorld
from mirrorworld.worlds.sales.rules import CENT, TAX_RATE, amounts, money, price_text, unit_price
from mirrorworld.worlds.sales.world import canonical_state

WORLD = SalesWorld()


def _registry() -> Registry:
    registry = Registry()
    registry.register("sales", lambda **kw: SalesWorld(**kw))
    return registry


def test_sales_world_conforms() -> None:
    check_world(WORLD, seeds=3)


def test_sales_world_shape() -> None:
    assert WORLD.id == "mirrorworld/Sales-v0"
    assert len(WORLD.tools) >= 15
    assert len(WORLD.families) >= 8
    assert sum(t.kind == "write" for t in WORLD.tools) >= 10


def test_sales_audit_meets_every_bar() -> None:
    from mirrorworld.core.registry import default

    report = audit_verifiers(WORLD, seeds=2, cross_process="sales" in default.names())
    assert report.failed_bars() == []


def test_sales_gymnasium_and_chat_interfaces() -> None:
    registry = _registry()
    env = MirrorEnv("sales", registry=registry)
    obs, _info = env.reset(seed=3)
    assert isinstance(obs, dict)
    chat = ChatEnv("sales", registry=registry)
    assert {t["function"]["name"] for t in chat.tools} == set(WORLD.tool_names)


def test_tax_is_rounded_once_per_document_half_even() -> None:
    # 3 x 24.995 = 74.985 -> 74.98 (half-even); tax 7.4985 + 0.10*38.125 = 11.311 -> 11.31
    assert amounts([(3, Decimal("24.995")), (1, Decimal("38.125"))]) == ("113.10", "11.31", "124.41")
    assert unit_price(Decimal("149.99"), Decimal(15)) == Decimal("127.4915")


_PRICES = st.integers(0, 10**8).map(lambda units: Decimal(units).scaleb(-4))


def test_a_document_rounds_the_tax_of_its_positive_and_negative_lines_apart() -> None:
    # As Tryton groups taxable lines by the sign of their amount: 0.005 -> 0.00 and -0.015 -> -0.02 (half-even),
    # where the tax of the sum, -0.01, would round to -0.01.
    assert amounts([(1, Decimal("0.05")), (-1, Decimal("0.15"))]) == ("-0.10", "-0.02", "-0.12")
    assert amounts([(1, Decimal("0.05")), (-1, Decimal("0.15"))], "line") == ("-0.10", "-0.02", "-0.12")
    assert money(Decimal("-0.001")) == money(Decimal("-0")) == "0.00"


_QUANTITIES = st.integers(-100_000, 100_000).filter(bool)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_QUANTITIES, _PRICES), max_size=6))
def test_amounts_equal_the_decimal_computation(lines: list[tuple[int, Decimal]]) -> None:
    """The integer arithmetic gives what Decimal gives with the documented roundings (the tax of each sign's
    lines rounded apart, as the real system groups them)."""
    line_sum = sum(((q * p).quantize(CENT, rounding=ROUND_HALF_EVEN) for q, p in lines), Decimal(0))
    tax = sum(
        (
            sum((q * p * TAX_RATE for q, p in lines if (q * p < 0) == negative), Decimal(0)).quantize(
                CENT, rounding=ROUND_HALF_EVEN
            )
            for negative in (False, True)
        ),
        Decimal(0),
    )
    expected = (money(line_sum), money(tax), money(line_sum + tax))
    assert amounts(lines) == expected
    assert amounts([(q, price_text(p)) for q, p in lines]) == expected  # prices as stored text


def _call(session: object, tool: str, **args: object) -> dict[str, object]:
    result = session.call(tool, args)  # type: ignore[attr-defined]
    return {"ok": result.ok, "data": result.data, "error": result.error}


def test_quotation_numbering_and_workflow() -> None:
    with WORLD.session() as s:
        sale = _call(s, "create_quotation", party_id=3)["data"]["sale_id"]  # type: ignore[index]
        assert _call(s, "confirm_sale", sale_id=sale)["error"]["code"] == "invalid_state"  # type: ignore[index]
        assert _call(s, "add_line", sale_id=sale, product_id=1, quantity=2)["ok"]
        before = s.state_hash()
        refused = _call(s, "add_line", sale_id=sale, product_id=1, quantity=1, discount="15")
        assert refused["error"]["code"] == "policy_refused"  # type: ignore[index]
        assert s.state_hash() == before
        assert _call(s, "request_discount_approval", sale_id=sale, discount="31", reason="big")["error"]
        assert _call(s, "request_discount_approval", sale_id=sale, discount="15", reason="big")["ok"]
        assert _call(s, "add_line", sale_id=sale, product_id=1, quantity=1, discount="15")["ok"]
        quoted = _call(s, "quote_sale", sale_id=sale)["data"]
        next_number = WORLD.image.query("SELECT next FROM sequences WHERE name='sale'")[0][0]
        assert quoted["number"] == str(next_number)  # type: ignore[index]
        confirmed = _call(s, "confirm_sale", sale_id=sale)["data"]
        assert confirmed["state"] == "processing"  # type: ignore[index]
        view = canonical_state(s.db)[f"sale:{sale}"]
        assert [state for state, _moves in view["shipments"]] == ["waiting"] and view["invoices"][0][1] == "draft"


def test_quote_needs_an_address() -> None:
    prospect = WORLD.image.query(
        "SELECT id FROM parties p WHERE role='customer' AND NOT EXISTS "
        "(SELECT 1 FROM addresses a WHERE a.party_id=p.id) ORDER BY id LIMIT 1"
    )[0][0]
    with WORLD.session() as s:
        sale = _call(s, "create_quotation", party_id=prospect)["data"]["sale_id"]  # type: ignore[index]
        empty = _call(s, "quote_sale", sale_id=sale)["error"]
        assert empty["code"] == "invalid_state"  # a sale without lines cannot be quoted at all  # type: ignore[index]
        assert _call(s, "add_line", sale_id=sale, product_id=1, quantity=1)["ok"]
        error = _call(s, "quote_sale", sale_id=sale)["error"]
        assert error["code"] == "validation_error"  # type: ignore[index]
        assert "invoice address" in error["message"]  # type: ignore[index]


@pytest.mark.parametrize("bad", ["not-an-email", "a@@b.example", "x@host"])
def test_invalid_email_is_refused(bad: str) -> None:
    with WORLD.session() as s:
        error = _call(s, "add_contact", party_id=3, kind="email", value=bad)["error"]
        assert error["code"] == "validation_error"  # type: ignore[index]
        assert s.changes() == []


def test_canonical_state_is_deterministic() -> None:
    other = SalesWorld()
    with WORLD.session() as a, other.session() as b:
        assert canonical_state(a.db) == canonical_state(b.db)


def test_the_twin_adapter_implements_every_tool_the_session_does_not_answer_itself() -> None:
    from mirrorworld.twin.sales import TOOLS as TWIN_TOOLS

    answered_by_the_session = {"get_policy", "respond"}
    assert set(TWIN_TOOLS) == set(WORLD.tool_names) - answered_by_the_session
    assert all(fn.__name__ == name for name, fn in TWIN_TOOLS.items())


def test_a_writeoff_settles_a_short_payment_within_the_desks_limit() -> None:
    with WORLD.session() as s:
        before = canonical_state(s.db)["ledger"]
        # Invoice 11 is posted for $940.46: $10.46 short is above the $5.00 the desk writes off.
        refused = _call(s, "pay_invoice", invoice_id=11, amount="930.00", settle="writeoff")["error"]
        assert refused["code"] == "policy_refused" and refused["rule"] == "writeoff_limit"  # type: ignore[index]
        paid = _call(s, "pay_invoice", invoice_id=11, amount="938.00", settle="writeoff")["data"]
        assert paid["state"] == "paid" and paid["writeoff"] == "2.46"  # type: ignore[index]
        invoice = _call(s, "get_invoice", invoice_id=11)["data"]["invoice"]  # type: ignore[index]
        assert (invoice["paid"], invoice["writeoff"], invoice["amount_due"]) == ("938.00", "2.46", "0.00")
        after = canonical_state(s.db)["ledger"]
        assert after["writeoff"] == "2.46"
        assert Decimal(before["receivable"]["3"]) - Decimal(after["receivable"]["3"]) == Decimal("940.46")
        assert Decimal(after["cash"]) - Decimal(before["cash"]) == Decimal("938.00")


def test_an_overpayment_leaves_the_excess_as_the_customers_credit() -> None:
    with WORLD.session() as s:
        below = _call(s, "pay_invoice", invoice_id=12, amount="900.00", settle="overpayment")["error"]
        assert below["message"] == (  # type: ignore[index]
            'To reconcile lines with "$6.11" write-off, you must select a write-off method.'
        )
        over = _call(s, "pay_invoice", invoice_id=12, amount="1000.00")["error"]
        assert over["code"] == "policy_refused"  # type: ignore[index]  # a partial payment is at most what is due
        paid = _call(s, "pay_invoice", invoice_id=12, amount="1000.00", settle="overpayment")["data"]
        assert paid["state"] == "paid" and paid["customer_balance"] == "-93.89"  # type: ignore[index]
        assert _call(s, "get_party", party_id=14)["data"]["balance"] == "-93.89"  # type: ignore[index]
        assert canonical_state(s.db)["sale:25"]["invoice_state"] == "paid"


def test_a_posted_invoice_is_refunded_by_a_credit_note_from_the_invoice_sequence() -> None:
    next_number = str(WORLD.image.query("SELECT next FROM sequences WHERE name='invoice'")[0][0])
    with WORLD.session() as s:
        credit = _call(s, "credit_invoice", invoice_id=15)["data"]
        assert credit == {  # the invoice was posted and nothing was paid on it
            "invoice_id": 15,
            "invoice_state": "cancelled",
            "credit_note_id": 18,
            "number": next_number,
            "state": "paid",
            "total_amount": "-972.22",
        }
        sale = _call(s, "get_sale", sale_id=28)["data"]
        assert [i["id"] for i in sale["invoices"]] == [15]  # type: ignore[index]
        assert sale["credit_notes"][0]["invoice_id"] == 15  # type: ignore[index]
        assert sale["sale"]["invoice_state"] == "paid"  # type: ignore[index]  # a refunded invoice is settled
        assert canonical_state(s.db)["ledger"]["receivable"]["22"] == "0"
        assert _call(s, "credit_invoice", invoice_id=15)["error"]["code"] == "invalid_state"  # type: ignore[index]
        assert _call(s, "credit_invoice", invoice_id=18)["error"]["rule"] == "credit_note"  # type: ignore[index]


def test_a_paid_invoices_credit_note_is_a_draft_that_posting_turns_into_credit() -> None:
    with WORLD.session() as s:
        credit = _call(s, "credit_invoice", invoice_id=16)["data"]
        assert (credit["state"], credit["number"], credit["invoice_state"]) == ("draft", None, "paid")  # type: ignore[index]
        posted = _call(s, "post_invoice", invoice_id=credit["credit_note_id"])["data"]  # type: ignore[index]
        assert posted["total_amount"] == "-187.14"  # type: ignore[index]
        view = canonical_state(s.db)["sale:29"]
        assert (view["state"], view["invoice_state"]) == ("done", "paid")  # the sale is not the credit note's
        assert view["credit_notes"] == [
            [posted["number"], "posted", "-170.13", "-17.01", "-187.14", "0", "0", "2026-03-16"]
        ]  # type: ignore[index]
        refused = _call(s, "pay_invoice", invoice_id=credit["credit_note_id"], amount="10.00")["error"]  # type: ignore[index]
        assert refused["rule"] == "credit_note"  # type: ignore[index]


# -- payment terms and overdue invoices ----------------------------------------------


def test_an_invoice_falls_due_by_its_customers_payment_term() -> None:
    with WORLD.session() as s:
        party = _call(s, "get_party", party_id=16)["data"]["party"]  # type: ignore[index]
        assert (party["payment_term_id"], party["payment_term"]) == (3, "Net 15 days")
        draft = _call(s, "get_invoice", invoice_id=1)["data"]["invoice"]  # type: ignore[index]
        assert (draft["payment_term"], draft["invoice_date"], draft["due_date"]) == ("Net 15 days", None, None)
        assert _call(s, "post_invoice", invoice_id=1)["ok"]
        posted = _call(s, "get_invoice", invoice_id=1)["data"]["invoice"]  # type: ignore[index]
        assert (posted["invoice_date"], posted["due_date"], posted["overdue"]) == ("2026-03-16", "2026-03-31", False)
        sale = _call(s, "create_quotation", party_id=15)["data"]["sale_id"]  # type: ignore[index]
        assert _call(s, "get_sale", sale_id=sale)["data"]["sale"]["payment_term_id"] == 1  # type: ignore[index]


def test_overdue_invoices_are_posted_still_due_and_past_their_due_date() -> None:
    with WORLD.session() as s:
        listed = _call(s, "list_overdue_invoices", party_id=14)["data"]
        assert listed == {
            "today": "2026-03-16",
            "invoices": [
                {
                    "id": 12,
                    "number": "2",
                    "sale_id": 25,
                    "invoice_date": "2026-01-28",
                    "due_date": "2026-02-27",
                    "amount_due": "906.11",
                    "days_overdue": 17,
                }
            ],
            "total_overdue": "906.11",
        }
        assert _call(s, "get_invoice", invoice_id=12)["data"]["invoice"]["overdue"] is True  # type: ignore[index]
        # Due tomorrow (Net 30 days from 2026-02-15) is not overdue yet.
        assert _call(s, "list_overdue_invoices", party_id=5)["data"]["invoices"] == []  # type: ignore[index]
        # A partial payment leaves the rest overdue; paying it off clears it.
        assert _call(s, "pay_invoice", invoice_id=12, amount="900.00")["ok"]
        still = _call(s, "list_overdue_invoices", party_id=14)["data"]
        assert [(i["id"], i["amount_due"]) for i in still["invoices"]] == [(12, "6.11")]  # type: ignore[index]
        assert _call(s, "pay_invoice", invoice_id=12, amount="6.11")["ok"]
        assert _call(s, "list_overdue_invoices", party_id=14)["data"]["total_overdue"] == "0.00"  # type: ignore[index]
        # A refunded invoice is no longer overdue, and its credit note never is.
        assert _call(s, "credit_invoice", invoice_id=11)["ok"]
        assert _call(s, "list_overdue_invoices", party_id=3)["data"]["invoices"] == []  # type: ignore[index]
        note = _call(s, "get_invoice", invoice_id=18)["data"]["invoice"]  # type: ignore[index]
        assert (note["type"], note["due_date"], note["overdue"]) == ("credit_note", "2026-03-16", False)
        assert _call(s, "list_overdue_invoices", party_id=999)["error"]["code"] == "not_found"  # type: ignore[index]


def test_the_overdue_families_name_the_invoice_its_amount_and_due_date() -> None:
    chase = WORLD.task("chase_overdue", 0)
    assert [c.tool for c in chase.gold] == ["list_overdue_invoices", "respond"]
    facts = {f.label: f for f in chase.facts}
    assert facts["due date"].kind == "date" and facts["amount overdue"].kind == "money"
    pay = WORLD.task("pay_overdue", 0)
    assert [c.tool for c in pay.gold] == ["list_overdue_invoices", "pay_invoice", "respond"]
    with WORLD.session(pay) as s:
        listed = _call(s, "list_overdue_invoices", party_id=pay.customer_id)["data"]
        (only,) = listed["invoices"]  # type: ignore[index]
        assert pay.gold[1].args == {"invoice_id": only["id"], "amount": pytest.approx(float(only["amount_due"]))}


# -- credit limits ---------------------------------------------------------------------


def test_confirming_past_the_credit_limit_is_refused_with_trytons_message() -> None:
    with WORLD.session() as s:
        party = _call(s, "get_party", party_id=22)["data"]
        assert (party["party"]["credit_limit"], party["credit_amount"]) == ("1200.00", "972.22")  # type: ignore[index]
        refused = _call(s, "confirm_sale", sale_id=8)["error"]
        assert refused == {
            "code": "policy_refused",
            "message": 'The party "Tidewater Books" will exceed their $1200.00 credit limit by $577.47.',
            "rule": "credit_limit",
        }
        assert _call(s, "get_sale", sale_id=8)["data"]["sale"]["state"] == "quotation"  # type: ignore[index]
        # A payment frees the credit: the same order then goes ahead.
        assert _call(s, "pay_invoice", invoice_id=15, amount="972.22")["ok"]
        assert _call(s, "get_party", party_id=22)["data"]["credit_amount"] == "0.00"  # type: ignore[index]
        assert _call(s, "confirm_sale", sale_id=8)["data"]["state"] == "processing"  # type: ignore[index]
        # A confirmed order counts untaxed until its invoice is posted, then as the invoice's total.
        assert _call(s, "get_party", party_id=22)["data"]["credit_amount"] == "577.47"  # type: ignore[index]
        invoice = _call(s, "get_sale", sale_id=8)["data"]["invoices"][0]["id"]  # type: ignore[index]
        assert _call(s, "post_invoice", invoice_id=invoice)["ok"]
        assert _call(s, "get_party", party_id=22)["data"]["credit_amount"] == "635.22"  # type: ignore[index]


def test_a_customer_without_a_limit_is_never_held_and_families_confirm_within_it() -> None:
    with WORLD.session() as s:
        assert _call(s, "get_party", party_id=25)["data"]["party"]["credit_limit"] is None  # type: ignore[index]
        assert _call(s, "confirm_sale", sale_id=7)["ok"]
    for seed in range(6):
        for family in ("confirm_order", "win_opportunity", "pay_then_confirm"):
            task = WORLD.task(family, seed)
            with WORLD.session(task) as s:
                assert all(s.call(c.tool, c.args).ok for c in task.gold), task.id
    hold = WORLD.task("credit_hold", 0)
    assert [c.tool for c in hold.gold] == ["get_party", "respond"]
    assert {f.label for f in hold.facts} == {"credit limit"}


# -- price lists -----------------------------------------------------------------------


def test_a_price_list_prices_new_lines_by_product_and_quantity() -> None:
    with WORLD.session() as s:
        party = _call(s, "get_party", party_id=27)["data"]["party"]  # type: ignore[index]
        assert (party["price_list_id"], party["price_list"]) == (1, "Wholesale")
        quote = _call(s, "quote_price", party_id=27, product_id=4, quantity=10)["data"]
        assert (quote["list_price"], quote["unit_price"], quote["discount"]) == ("38.1250", "34.3125", "10.00")  # type: ignore[index]
        assert _call(s, "quote_price", party_id=27, product_id=4, quantity=9)["data"]["unit_price"] == "38.1250"  # type: ignore[index]
        assert _call(s, "quote_price", party_id=27, product_id=6, quantity=3)["data"]["unit_price"] == "29.9298"  # type: ignore[index]
        assert _call(s, "quote_price", party_id=5, product_id=4, quantity=50)["data"]["price_list"] is None  # type: ignore[index]
        sale = _call(s, "create_quotation", party_id=27)["data"]["sale_id"]  # type: ignore[index]
        assert _call(s, "get_sale", sale_id=sale)["data"]["sale"]["price_list_id"] == 1  # type: ignore[index]
        # Without a discount the price list prices the line; a discount is taken off the list price instead.
        assert _call(s, "add_line", sale_id=sale, product_id=4, quantity=50)["data"]["unit_price"] == "30.5000"  # type: ignore[index]
        assert _call(s, "add_line", sale_id=sale, product_id=4, quantity=50, discount=5)["data"]["unit_price"] == (  # type: ignore[index]
            "36.2188"
        )
        lines = _call(s, "get_sale", sale_id=sale)["data"]["lines"]  # type: ignore[index]
        assert [ln["discount"] for ln in lines] == ["20.00", "5.00"]  # type: ignore[index]
        # A sale made before its customer was on a price list, or for one off any, is at list prices.
        assert _call(s, "get_sale", sale_id=1)["data"]["sale"]["price_list_id"] is None  # type: ignore[index]


def test_the_price_list_families_quote_at_the_lists_prices() -> None:
    for seed in range(6):
        task = WORLD.task("price_list_quotation", seed)
        assert all("discount" not in c.args for c in task.gold if c.tool == "add_line")  # type: ignore[operator]
        with WORLD.session(task) as s:
            assert all(s.call(c.tool, c.args).ok for c in task.gold), task.id
        question = WORLD.task("price_question", seed)
        assert [c.tool for c in question.gold] == ["quote_price", "respond"]
        with WORLD.session(question) as s:
            got = s.call("quote_price", question.gold[0].args).data
            assert got is not None and question.facts[0].value == got["unit_price"]


# -- returns ---------------------------------------------------------------------------


def test_a_return_takes_the_goods_back_and_credits_the_customer() -> None:
    with WORLD.session() as s:
        assert _call(s, "return_sale", sale_id=1)["error"]["rule"] == "sale_return"  # type: ignore[index]
        back = _call(s, "return_sale", sale_id=21)["data"]
        assert (back["return_of"], back["state"], back["total_amount"]) == (21, "draft", "-1294.68")  # type: ignore[index]
        sale = back["sale_id"]  # type: ignore[index]
        assert all(ln["quantity"] < 0 for ln in _call(s, "get_sale", sale_id=sale)["data"]["lines"])  # type: ignore[index]
        assert _call(s, "quote_sale", sale_id=sale)["ok"] and _call(s, "confirm_sale", sale_id=sale)["ok"]
        got = _call(s, "get_sale", sale_id=sale)["data"]
        (shipment,) = got["returns"]  # type: ignore[index]
        assert (shipment["state"], got["shipments"]) == ("draft", [])  # type: ignore[index]
        on_hand = _call(s, "get_product", product_id=9)["data"]["product"]["on_hand"]  # type: ignore[index]
        assert _call(s, "receive_return", shipment_id=shipment["id"])["data"]["state"] == "done"  # type: ignore[index]
        assert _call(s, "get_product", product_id=9)["data"]["product"]["on_hand"] == on_hand + 7  # type: ignore[index]
        assert _call(s, "receive_return", shipment_id=shipment["id"])["error"]["code"] == "invalid_state"  # type: ignore[index]
        (note,) = got["invoices"]  # type: ignore[index]
        assert _call(s, "post_invoice", invoice_id=note["id"])["ok"]
        inv = _call(s, "get_invoice", invoice_id=note["id"])["data"]["invoice"]  # type: ignore[index]
        assert (inv["type"], inv["total"], inv["state"]) == ("credit_note", "-1294.68", "posted")
        assert _call(s, "pay_invoice", invoice_id=note["id"], amount="1.00")["error"]["rule"] == "credit_note"  # type: ignore[index]
        assert _call(s, "get_sale", sale_id=sale)["data"]["sale"]["shipment_state"] == "sent"  # type: ignore[index]


def test_the_return_family_gold_reaches_its_checks() -> None:
    for seed in range(5):
        task = WORLD.task("return_order", seed)
        with WORLD.session(task) as s:
            assert all(s.call(c.tool, c.args).ok for c in task.gold), task.id


# -- invoice methods: invoicing on fulfillment -------------------------------------------


def test_a_sale_takes_its_customers_invoice_method_and_changes_it_only_as_a_draft() -> None:
    with WORLD.session() as s:
        assert _call(s, "get_party", party_id=14)["data"]["party"]["sale_invoice_method"] == "fulfillment"  # type: ignore[index]
        assert _call(s, "get_party", party_id=3)["data"]["party"]["sale_invoice_method"] is None  # type: ignore[index]
        sale = _call(s, "create_quotation", party_id=14)["data"]["sale_id"]  # type: ignore[index]
        assert _call(s, "get_sale", sale_id=sale)["data"]["sale"]["invoice_method"] == "fulfillment"  # type: ignore[index]
        assert _call(s, "get_sale", sale_id=1)["data"]["sale"]["invoice_method"] == "order"  # type: ignore[index]
        assert _call(s, "set_invoice_method", sale_id=1, method="fulfillment")["data"]["invoice_method"] == (  # type: ignore[index]
            "fulfillment"
        )
        refused = _call(s, "set_invoice_method", sale_id=8, method="fulfillment")["error"]
        assert refused == {
            "code": "invalid_state",
            "message": 'You are not allowed to modify the field "Invoice Method" in record "2" of "Sale".',
            "rule": "sale_workflow",
        }
        assert _call(s, "set_invoice_method", sale_id=1, method="shipment")["error"]["code"] == "invalid_arguments"  # type: ignore[index]


def test_invoiced_on_fulfillment_each_shipment_sent_makes_its_own_invoice() -> None:
    with WORLD.session() as s:
        sale = _call(s, "create_quotation", party_id=14)["data"]["sale_id"]  # type: ignore[index]
        _call(s, "add_line", sale_id=sale, product_id=11, quantity=10)  # 8 on hand: 2 backordered
        _call(s, "add_line", sale_id=sale, product_id=4, quantity=2)
        _call(s, "quote_sale", sale_id=sale)
        assert _call(s, "confirm_sale", sale_id=sale)["ok"]
        got = _call(s, "get_sale", sale_id=sale)["data"]
        assert got["invoices"] == [] and got["sale"]["invoice_state"] == "none"  # type: ignore[index]
        (shipment,) = got["shipments"]  # type: ignore[index]
        backorder = _call(s, "ship_shipment", shipment_id=shipment["id"], partial=True)["data"]["backorder_id"]  # type: ignore[index]
        got = _call(s, "get_sale", sale_id=sale)["data"]
        (first,) = got["invoices"]  # type: ignore[index]
        # The invoice bills what was sent: 8 label printers and 2 keyboards, not the backorder.
        assert amounts([(8, Decimal("96.245")), (2, Decimal("38.125"))])[2] == first["total"]
        assert got["sale"]["invoice_state"] == "pending"  # type: ignore[index]
        inv = _call(s, "get_invoice", invoice_id=first["id"])["data"]["invoice"]  # type: ignore[index]
        assert (inv["invoice_method"], inv["shipments"]) == ("fulfillment", [shipment["id"]])
        _call(s, "post_invoice", invoice_id=first["id"])
        # Only what no posted invoice billed counts against credit: the two backordered label printers.
        before = Decimal(_call(s, "get_party", party_id=14)["data"]["balance"])  # type: ignore[index,arg-type]
        credit = Decimal(_call(s, "get_party", party_id=14)["data"]["credit_amount"])  # type: ignore[index,arg-type]
        others = credit - before - 2 * Decimal("96.245")
        assert _call(s, "pay_invoice", invoice_id=first["id"], amount=first["total"])["ok"]
        got = _call(s, "get_sale", sale_id=sale)["data"]["sale"]  # type: ignore[index]
        assert (got["state"], got["invoice_state"], got["shipment_state"]) == (
            "processing",
            "paid",
            "partially shipped",
        )
        s.db.execute("UPDATE products SET on_hand = on_hand + 5 WHERE id = 11")  # stock comes in
        assert _call(s, "ship_shipment", shipment_id=backorder)["ok"]
        got = _call(s, "get_sale", sale_id=sale)["data"]
        first_row, second = got["invoices"]  # type: ignore[index]
        assert second["total"] == amounts([(2, Decimal("96.245"))])[2] and second["state"] == "draft"
        assert got["sale"]["invoice_state"] == "partially paid"  # type: ignore[index]
        party = _call(s, "get_party", party_id=14)["data"]
        assert Decimal(party["credit_amount"]) - Decimal(party["balance"]) == others + 2 * Decimal("96.245")  # type: ignore[index,arg-type]
        _call(s, "post_invoice", invoice_id=second["id"])
        assert _call(s, "pay_invoice", invoice_id=second["id"], amount=second["total"])["ok"]
        got = _call(s, "get_sale", sale_id=sale)["data"]["sale"]  # type: ignore[index]
        assert (got["state"], got["invoice_state"]) == ("done", "paid")
        moves = s.db.execute(
            "SELECT shipment_id, invoice_id FROM shipment_moves WHERE sale_id=? ORDER BY id", (sale,)
        ).fetchall()
        assert sorted(set(moves)) == [(shipment["id"], first_row["id"]), (backorder, second["id"])]


def test_an_orders_invoice_bills_every_move_and_the_families_invoice_what_ships() -> None:
    with WORLD.session() as s:
        assert s.db.execute("SELECT COUNT(*) FROM shipment_moves WHERE invoice_id IS NULL").fetchone() == (0,)
    task = WORLD.task("partial_invoice", 0)
    with WORLD.session(task) as s:
        assert all(s.call(c.tool, c.args).ok for c in task.gold)
        iid = task.gold[-2].args["invoice_id"]
        pay = s.db.execute("SELECT state, total FROM invoices WHERE id=?", (iid,)).fetchone()
        assert pay == ("paid", str(task.gold[-2].args["amount"]))
    ship = WORLD.task("invoice_on_shipment", 0)
    assert [c.tool for c in ship.gold][:3] == ["set_invoice_method", "quote_sale", "confirm_sale"]
