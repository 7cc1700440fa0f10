"""The sales world's task families.

Every family draws its records from the pristine image with the task's seeded
``random.Random`` and needs no setup writes: the pristine history already holds
customers, leads and sales in every state, so a task's initial state is the
pristine state itself (which is also what lets the real twin run any task
unchanged). Ids and numbers of records a task creates are predicted from the
image (next row id, next sequence number), exactly as the real system assigns
them.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from mirrorworld.core.store import Image
from mirrorworld.core.task import Check, EntityRef, Fact, Task, TaskFamily, ToolCall
from mirrorworld.core.tools import json_number
from mirrorworld.errors import TaskError
from mirrorworld.worlds.sales.rules import PARAMETERS, WRITEOFF_MAX, amounts, money, unit_price
from mirrorworld.worlds.sales.tools import ConnDb, credit_amount, price_list_price

WORLD = "sales"


def _credit_room(image: Image) -> dict[int, Decimal]:
    """Customer with a credit limit -> what their limit leaves for new orders (limit less credit amount)."""

    def build(image: Image) -> dict[int, Decimal]:
        conn = image.acquire()
        try:
            db = ConnDb(conn)
            rows = db.all("SELECT id, credit_limit FROM parties WHERE credit_limit IS NOT NULL ORDER BY id")
            return {int(r["id"]): Decimal(r["credit_limit"]) - credit_amount(db, int(r["id"])) for r in rows}
        finally:
            image.release(conn)

    return image.derived("sales/credit_room", build)


def _within_credit(image: Image, party_id: int, untaxed: Decimal) -> bool:
    """Whether confirming an order of ``untaxed`` keeps the customer within their credit limit."""
    room = _credit_room(image).get(party_id)
    return room is None or untaxed <= room


_LIST_PRICE_CUSTOMERS = "SELECT id FROM parties WHERE role='customer' AND price_list_id IS NULL ORDER BY id"
"""The customers buying at list prices (the families that draw any customer leave those on a price list to theirs)."""


def _pick(rng: random.Random, rows: Sequence[tuple[Any, ...]], family: str) -> tuple[Any, ...]:
    if not rows:
        raise TaskError(f"{family}: the world has no candidate records (scale too small?)")
    return rng.choice(rows)


def _next_id(image: Image, table: str) -> int:
    return int(image.query(f"SELECT COALESCE(MAX(id), 0) + 1 FROM {table}")[0][0])


def _next_number(image: Image, name: str) -> str:
    return str(image.query("SELECT next FROM sequences WHERE name=?", (name,))[0][0])


def _party(image: Image, party_id: int) -> str:
    return str(image.query("SELECT name FROM parties WHERE id=?", (party_id,))[0][0])


def _sale_amounts(image: Image, sale_id: int, tax_rounding: str) -> tuple[str, str, str]:
    rows = image.query("SELECT quantity, unit_price FROM sale_lines WHERE sale_id=? ORDER BY id", (sale_id,))
    return amounts([(int(q), Decimal(p)) for q, p in rows], tax_rounding)


def _task(
    family: TaskFamily,
    seed: int,
    instruction: str,
    gold: list[ToolCall],
    scope: tuple[EntityRef, ...],
    targets: tuple[EntityRef, ...],
    checks: list[Check],
    facts: tuple[Fact, ...] = (),
    **hidden: Any,
) -> Task:
    return Task(
        world=WORLD,
        family=family.name,
        seed=seed,
        instruction=instruction,
        setup=(),
        gold=tuple(gold),
        scope=scope,
        targets=targets,
        checks=tuple(checks),
        facts=facts,
        customer_id=next((i for kind, i in scope if kind == "party"), None),
        hidden=dict(hidden),
    )


def _field(name: str, table: str, ident: int, column: str, value: Any) -> Check:
    return Check(name, "field", {"table": table, "id": ident, "field": column, "equals": value})


def _customer_says(image: Image, party_id: int, text: str) -> str:
    return f'Message from {_party(image, party_id)} (party {party_id}):\n"{text}"'


class AddContact(TaskFamily):
    name = "add_contact"
    description = "A customer gives a new email address for their account: add it as a contact."

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        (pid,) = _pick(rng, image.query(_LIST_PRICE_CUSTOMERS), self.name)
        box = rng.choice(("billing", "purchasing", "accounts", "office"))
        email = f"{box}{rng.randint(2, 99)}@{_party(image, pid).split()[0].lower()}-mail.example"
        return _task(
            self,
            seed,
            _customer_says(image, pid, f"Please add {email} as a contact email for our account."),
            [
                ToolCall("add_contact", {"party_id": pid, "kind": "email", "value": email}),
                ToolCall("respond", {"message": f"Done: {email} is now on your account."}),
            ],
            (("party", pid),),
            (("party", pid),),
            [
                Check(
                    "email added",
                    "count",
                    {"table": "contacts", "where": {"party_id": pid, "type": "email", "value": email}, "min": 1},
                )
            ],
        )


class NewLead(TaskFamily):
    name = "new_lead"
    description = "A customer mentions a project with a budget: record it as a lead and give its number."

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        (pid,) = _pick(rng, image.query(_LIST_PRICE_CUSTOMERS), self.name)
        oid, number = _next_id(image, "opportunities"), _next_number(image, "opportunity")
        amount = money(Decimal(rng.randint(4, 120) * 250))
        topic = rng.choice(("new office furniture", "printer replacement", "a warehouse fit-out", "conference rooms"))
        return _task(
            self,
            seed,
            _customer_says(image, pid, f"We are planning {topic}, budget around ${amount}. Can you note it down?"),
            [
                ToolCall(
                    "create_lead", {"party_id": pid, "description": topic.capitalize(), "amount": json_number(amount)}
                ),
                ToolCall("respond", {"message": f"I recorded your project as lead {number}."}),
            ],
            (("party", pid), ("opportunity", oid)),
            (("opportunity", oid),),
            [
                _field("lead created", "opportunities", oid, "state", "lead"),
                _field("lead amount", "opportunities", oid, "amount", amount),
                _field("lead customer", "opportunities", oid, "party_id", pid),
            ],
            (Fact("lead number", number, "id"),),
        )


class QualifyLead(TaskFamily):
    name = "qualify_lead"
    description = "Work order: qualify a lead into an opportunity."

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        rows = image.query("SELECT id, number, party_id FROM opportunities WHERE state='lead' ORDER BY id")
        oid, number, pid = _pick(rng, rows, self.name)
        return _task(
            self,
            seed,
            f"Work order from your sales lead: {_party(image, pid)} confirmed their interest, qualify lead "
            f"{number} (id {oid}) as an opportunity, then report back with respond.",
            [
                ToolCall("qualify_lead", {"opportunity_id": oid}),
                ToolCall("respond", {"message": f"Lead {number} is now an opportunity."}),
            ],
            (("opportunity", oid),),
            (("opportunity", oid),),
            [_field("qualified", "opportunities", oid, "state", "opportunity")],
        )


class LoseOpportunity(TaskFamily):
    name = "lose_opportunity"
    description = "A customer declines: mark their open lead or opportunity lost, with the reason."

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        rows = image.query(
            "SELECT id, number, party_id, state FROM opportunities WHERE state IN ('lead','opportunity') ORDER BY id"
        )
        oid, number, pid, state = _pick(rng, rows, self.name)
        reason = rng.choice(("Budget was cut", "Went with a competitor", "Project postponed indefinitely"))
        return _task(
            self,
            seed,
            _customer_says(image, pid, f"About your {state} {number}: we won't go ahead. {reason}."),
            [
                ToolCall("mark_lost", {"opportunity_id": oid, "reason": reason}),
                ToolCall("respond", {"message": f"Understood, I closed {state} {number} as lost."}),
            ],
            (("party", pid), ("opportunity", oid)),
            (("opportunity", oid),),
            [_field("marked lost", "opportunities", oid, "state", "lost")],
        )


def _products(image: Image) -> list[tuple[int, str, str]]:
    return [
        (int(i), str(n), str(p)) for i, n, p in image.query("SELECT id, name, list_price FROM products ORDER BY id")
    ]


class _QuoteFamily(TaskFamily):
    discounted: bool

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        parties = image.query(
            "SELECT p.id FROM parties p WHERE p.role='customer' AND p.price_list_id IS NULL AND EXISTS "
            "(SELECT 1 FROM addresses a WHERE a.party_id=p.id) ORDER BY p.id"
        )
        (pid,) = _pick(rng, parties, self.name)
        (p1, n1, lp1), (p2, n2, lp2) = rng.sample(_products(image), 2)
        q1, q2 = rng.randint(2, 12), rng.randint(1, 5)
        sid, number = _next_id(image, "sales"), _next_number(image, "sale")
        discount = Decimal(rng.choice((12, 15, 18, 20, 25))) if self.discounted else Decimal(0)
        price1 = unit_price(Decimal(lp1), discount)
        untaxed, tax, total = amounts([(q1, price1), (q2, Decimal(lp2))], self.param("tax_rounding"))
        # The read between creating the draft and filling it keeps the draft's
        # creation ordered before the writes that need it.
        gold = [ToolCall("create_quotation", {"party_id": pid}), ToolCall("get_sale", {"sale_id": sid})]
        ask = f"Please send us a quote for {q1} x {n1} and {q2} x {n2}."
        checks = [
            _field("quoted", "sales", sid, "state", "quotation"),
            _field("numbered", "sales", sid, "number", number),
            Check("two lines", "count", {"table": "sale_lines", "where": {"sale_id": sid}, "min": 2, "max": 2}),
        ]
        if self.discounted:
            gold.append(
                ToolCall(
                    "request_discount_approval",
                    {
                        "sale_id": sid,
                        "discount": json_number(discount),
                        "reason": "Customer asked for a volume discount",
                    },
                )
            )
            ask += f" Our manager agreed a {discount}% discount on the {n1} with your rep."
            checks.append(
                Check("discount approved", "count", {"table": "approvals", "where": {"sale_id": sid}, "min": 1})
            )
        line1: dict[str, Any] = {"sale_id": sid, "product_id": p1, "quantity": q1}
        if self.discounted:
            line1["discount"] = json_number(discount)
        gold += [
            ToolCall("add_line", line1),
            ToolCall("add_line", {"sale_id": sid, "product_id": p2, "quantity": q2}),
            ToolCall("quote_sale", {"sale_id": sid}),
            ToolCall("respond", {"message": f"Your quotation {number} totals ${total} including ${tax} VAT."}),
        ]
        return _task(
            self,
            seed,
            _customer_says(image, pid, ask),
            gold,
            (("party", pid), ("sale", sid)),
            (("sale", sid),),
            checks,
            (
                Fact("quotation number", number, "id"),
                Fact("total", total, "money", (untaxed,)),
            ),
        )


class NewQuotation(_QuoteFamily):
    name = "new_quotation"
    description = "Draft a two-line quotation for a customer, quote it and give its number and total."
    discounted = False


class DiscountQuotation(_QuoteFamily):
    name = "discount_quotation"
    description = "A quotation with a discount above 10%: get the approval first, then quote with it."
    discounted = True


class ConfirmOrder(TaskFamily):
    name = "confirm_order"
    description = "A customer accepts a quotation: confirm it and state the order total."

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        rows = [
            r
            for r in image.query("SELECT id, number, party_id FROM sales WHERE state='quotation' ORDER BY id")
            if _within_credit(image, r[2], Decimal(_sale_amounts(image, r[0], self.param("tax_rounding"))[0]))
        ]
        sid, number, pid = _pick(rng, rows, self.name)
        untaxed, _tax, total = _sale_amounts(image, sid, self.param("tax_rounding"))
        return _task(
            self,
            seed,
            _customer_says(image, pid, f"We accept quotation {number}, please go ahead with the order."),
            [
                ToolCall("confirm_sale", {"sale_id": sid}),
                ToolCall("respond", {"message": f"Order {number} is confirmed, total ${total}."}),
            ],
            (("party", pid), ("sale", sid)),
            (("sale", sid),),
            [_field("confirmed", "sales", sid, "state", "processing")],
            (Fact("order total", total, "money", (untaxed,)),),
        )


class ShipOrder(TaskFamily):
    name = "ship_order"
    description = "Work order: send the waiting shipment of an order whose products are in stock."

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        rows = image.query(
            "SELECT sh.id, s.id, s.number FROM shipments sh JOIN sales s ON s.id = sh.sale_id "
            "WHERE sh.state='waiting' AND NOT EXISTS (SELECT 1 FROM (SELECT product_id, SUM(quantity) AS q "
            "FROM shipment_moves WHERE shipment_id=sh.id GROUP BY product_id) n JOIN products p ON p.id=n.product_id "
            "WHERE p.on_hand < n.q) ORDER BY sh.id"
        )
        shid, sid, number = _pick(rng, rows, self.name)
        return _task(
            self,
            seed,
            f"Work order from the warehouse lead: order {number} is ready to go, send its shipment "
            "and report back with respond.",
            [
                ToolCall("ship_shipment", {"shipment_id": shid}),
                ToolCall("respond", {"message": f"The shipment of order {number} has been sent."}),
            ],
            (("sale", sid),),
            (("sale", sid),),
            [_field("shipment sent", "shipments", shid, "state", "done")],
        )


class PartialShipment(TaskFamily):
    name = "partial_shipment"
    description = "Work order: send what is in stock of a short shipment now and backorder the rest."

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        rows = image.query(
            "SELECT sh.id, s.id, s.number FROM shipments sh JOIN sales s ON s.id = sh.sale_id WHERE sh.state='waiting' "
            "AND EXISTS (SELECT 1 FROM (SELECT product_id, SUM(quantity) AS q FROM shipment_moves "
            "WHERE shipment_id=sh.id GROUP BY product_id) n JOIN products p ON p.id=n.product_id "
            "WHERE p.on_hand < n.q) "
            "AND EXISTS (SELECT 1 FROM shipment_moves m JOIN products p ON p.id=m.product_id "
            "WHERE m.shipment_id=sh.id AND p.on_hand > 0) ORDER BY sh.id"
        )
        shid, sid, number = _pick(rng, rows, self.name)
        backorder = _next_id(image, "shipments")
        moves = image.query(
            "SELECT m.product_id, m.quantity, p.on_hand FROM shipment_moves m JOIN products p ON p.id=m.product_id "
            "WHERE m.shipment_id=? ORDER BY m.line_id, m.id",
            (shid,),
        )
        left = {int(p): int(h) for p, _q, h in moves}
        later: dict[int, int] = {}
        for product, quantity, _h in moves:
            take = min(int(quantity), left[int(product)])
            left[int(product)] -= take
            if take < int(quantity):
                later[int(product)] = later.get(int(product), 0) + int(quantity) - take
        names = {int(i): str(n) for i, n, _p in _products(image)}
        missing = ", ".join(f"{q} x {names[p]}" for p, q in sorted(later.items()))
        return _task(
            self,
            seed,
            f"Work order from the warehouse lead: order {number} cannot wait for the missing stock. Send what is "
            "in stock now, backorder the rest, and report back with respond.",
            [
                ToolCall("ship_shipment", {"shipment_id": shid, "partial": True}),
                ToolCall(
                    "respond",
                    {"message": f"Order {number} went out in part; backorder shipment {backorder} holds {missing}."},
                ),
            ],
            (("sale", sid),),
            (("sale", sid),),
            [
                _field("sent in part", "shipments", shid, "state", "done"),
                _field("backordered", "sales", sid, "shipment_state", "partially shipped"),
                Check(
                    "backorder waiting",
                    "count",
                    {"table": "shipments", "where": {"id": backorder, "sale_id": sid, "state": "waiting"}, "min": 1},
                ),
            ],
            (Fact("backorder shipment", str(backorder), "id"),),
        )


class CollectPayment(TaskFamily):
    name = "collect_payment"
    description = "A customer pays an order in full: post its invoice if needed, record the payment."

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        rows = image.query(
            "SELECT i.id, i.state, i.total, s.id, s.number, s.party_id FROM invoices i JOIN sales s "
            "ON s.id=i.sale_id WHERE i.state IN ('draft','posted') AND i.paid='0.00' ORDER BY i.id"
        )
        iid, state, total, sid, number, pid = _pick(rng, rows, self.name)
        gold = [] if state == "posted" else [ToolCall("post_invoice", {"invoice_id": iid})]
        untaxed = str(image.query("SELECT untaxed FROM invoices WHERE id=?", (iid,))[0][0])
        gold += [
            ToolCall("pay_invoice", {"invoice_id": iid, "amount": json_number(total)}),
            ToolCall("respond", {"message": f"We received your payment of ${total} for order {number}. Thank you!"}),
        ]
        return _task(
            self,
            seed,
            _customer_says(image, pid, f"We just wired the full amount for order {number}. Please record it."),
            gold,
            (("party", pid), ("sale", sid)),
            (("sale", sid),),
            [_field("invoice paid", "invoices", iid, "state", "paid")],
            (Fact("amount paid", total, "money", (untaxed,)),),
        )


def _open_invoices(image: Image) -> Sequence[tuple[Any, ...]]:
    """(invoice id, state, total, untaxed, sale id, sale number, party) of invoices nothing was paid on yet."""
    return image.query(
        "SELECT i.id, i.state, i.total, i.untaxed, s.id, s.number, s.party_id FROM invoices i JOIN sales s "
        "ON s.id=i.sale_id WHERE i.state IN ('draft','posted') AND i.paid='0.00' AND i.credit_of IS NULL ORDER BY i.id"
    )


class ShortPayment(TaskFamily):
    name = "short_payment"
    description = (
        "A customer's payment arrives short by bank charges: write the difference off when the desk's limit "
        "allows, else record a partial payment and say what is still due."
    )

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        iid, state, total, _untaxed, sid, number, pid = _pick(rng, _open_invoices(image), self.name)
        fee = Decimal(rng.choice(("0.35", "1.20", "2.50", "3.80", "4.95", "6.40", "12.00", "27.50")))
        amount = money(Decimal(total) - fee)
        gold = [] if state == "posted" else [ToolCall("post_invoice", {"invoice_id": iid})]
        pay: dict[str, Any] = {"invoice_id": iid, "amount": json_number(amount)}
        if fee <= WRITEOFF_MAX:
            pay["settle"] = "writeoff"
            reply = (
                f"We received your payment of ${amount} for order {number}; the ${fee} bank charge was written off "
                "and the invoice is paid in full."
            )
            checks = [
                _field("invoice paid", "invoices", iid, "state", "paid"),
                _field("charge written off", "invoices", iid, "writeoff", money(fee)),
            ]
            facts = (Fact("amount paid", amount, "money", (total,)),)
        else:
            reply = f"We received your payment of ${amount} for order {number}; ${fee} is still due on the invoice."
            checks = [
                _field("invoice still open", "invoices", iid, "state", "posted"),
                _field("payment recorded", "invoices", iid, "paid", amount),
            ]
            facts = (Fact("still due", money(fee), "money", (total,)),)
        gold += [ToolCall("pay_invoice", pay), ToolCall("respond", {"message": reply})]
        return _task(
            self,
            seed,
            _customer_says(
                image,
                pid,
                f"We paid ${amount} for order {number}; our bank deducted ${fee} in charges on the transfer. "
                "Please record it.",
            ),
            gold,
            (("party", pid), ("sale", sid)),
            (("sale", sid),),
            checks,
            facts,
        )


class RecordOverpayment(TaskFamily):
    name = "record_overpayment"
    description = "A customer pays more than an invoice's total: record the overpayment and state their credit."

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        iid, state, total, untaxed, sid, number, pid = _pick(rng, _open_invoices(image), self.name)
        excess = Decimal(rng.choice(("10.00", "12.50", "25.00", "40.00", "100.00")))
        amount = money(Decimal(total) + excess)
        gold = [] if state == "posted" else [ToolCall("post_invoice", {"invoice_id": iid})]
        gold += [
            ToolCall("pay_invoice", {"invoice_id": iid, "amount": json_number(amount), "settle": "overpayment"}),
            ToolCall(
                "respond",
                {
                    "message": f"We received your payment of ${amount} for order {number}: the invoice is paid and "
                    f"the ${excess} excess is a credit on your account."
                },
            ),
        ]
        return _task(
            self,
            seed,
            _customer_says(
                image, pid, f"We sent ${amount} for order {number} by mistake, more than the invoice. Please record it."
            ),
            gold,
            (("party", pid), ("sale", sid)),
            (("sale", sid),),
            [
                _field("invoice paid", "invoices", iid, "state", "paid"),
                _field("excess kept as credit", "invoices", iid, "overpaid", money(excess)),
            ],
            (Fact("credit", money(excess), "money", (total, untaxed)),),
        )


class CreditInvoice(TaskFamily):
    name = "credit_invoice"
    description = (
        "A customer sends an invoiced order back: credit the invoice in full (refunded when unpaid; a paid one's "
        "credit note is posted as the customer's credit) and give the credit note's number."
    )

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        rows = image.query(
            "SELECT i.id, i.number, i.state, i.total, i.paid, s.id, s.number, s.party_id FROM invoices i "
            "JOIN sales s ON s.id=i.sale_id WHERE i.credit_of IS NULL AND i.state IN ('posted','paid') ORDER BY i.id"
        )
        refunded = [r for r in rows if r[2] == "posted" and Decimal(r[4]) == 0]
        others = [r for r in rows if r not in refunded]
        iid, inum, state, total, paid, sid, snum, pid = _pick(
            rng, refunded if not others or (refunded and rng.random() < 0.5) else others, self.name
        )
        cid, number = _next_id(image, "invoices"), _next_number(image, "invoice")
        gold = [ToolCall("credit_invoice", {"invoice_id": iid})]
        if state == "posted" and Decimal(paid) == 0:
            reply = f"Invoice {inum} is credited in full by credit note {number}; nothing is due on it any more."
            checks = [
                _field("invoice refunded", "invoices", iid, "state", "cancelled"),
                Check(
                    "credit note settles it",
                    "count",
                    {"table": "invoices", "where": {"credit_of": iid, "state": "paid"}, "min": 1, "max": 1},
                ),
            ]
        else:
            # The read between crediting and posting keeps the credit note's creation before its posting.
            gold += [ToolCall("get_invoice", {"invoice_id": iid}), ToolCall("post_invoice", {"invoice_id": cid})]
            reply = (
                f"Invoice {inum} is credited in full by credit note {number}; the ${total} is now a credit on "
                "your account."
            )
            checks = [
                Check(
                    "credit note posted",
                    "count",
                    {"table": "invoices", "where": {"id": cid, "credit_of": iid, "state": "posted"}, "min": 1},
                ),
            ]
        gold.append(ToolCall("respond", {"message": reply}))
        return _task(
            self,
            seed,
            _customer_says(
                image, pid, f"We sent the whole of order {snum} back. Please credit invoice {inum} in full."
            ),
            gold,
            (("party", pid), ("sale", sid)),
            (("sale", sid),),
            checks,
            (Fact("credit note number", number, "id"),),
        )


class CancelQuotation(TaskFamily):
    name = "cancel_quotation"
    description = "A customer withdraws a draft or quoted order: cancel it."

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        rows = image.query(
            "SELECT id, COALESCE(number, ''), party_id FROM sales WHERE state IN ('draft','quotation') ORDER BY id"
        )
        sid, number, pid = _pick(rng, rows, self.name)
        ref = f"quotation {number}" if number else f"our draft order (sale id {sid})"
        return _task(
            self,
            seed,
            _customer_says(image, pid, f"Please cancel {ref}, we no longer need it."),
            [
                ToolCall("cancel_sale", {"sale_id": sid}),
                ToolCall("respond", {"message": f"Sale {number or sid} has been cancelled."}),
            ],
            (("party", pid), ("sale", sid)),
            (("sale", sid),),
            [_field("cancelled", "sales", sid, "state", "cancelled")],
        )


def _sale_lines(image: Image, sale_id: int) -> list[tuple[int, int, int, str, str]]:
    """(line id, product id, quantity, unit price, discount) of a sale's lines, in id order."""
    rows = image.query(
        "SELECT id, product_id, quantity, unit_price, discount FROM sale_lines WHERE sale_id=? ORDER BY id", (sale_id,)
    )
    return [(int(i), int(p), int(q), str(u), str(d)) for i, p, q, u, d in rows]


class _ConvertFamily(TaskFamily):
    """Convert a qualified opportunity into a quotation for what the customer asks (and confirm it when won)."""

    confirm: bool

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        rows = image.query(
            "SELECT o.id, o.number, o.party_id, o.description FROM opportunities o WHERE o.state='opportunity' "
            "AND EXISTS (SELECT 1 FROM addresses a WHERE a.party_id=o.party_id) ORDER BY o.id"
        )
        if self.confirm:  # the largest order drawn below stays within the customer's credit limit
            largest = 20 * max(Decimal(p) for _i, _n, p in _products(image))
            rows = tuple(r for r in rows if _within_credit(image, r[2], largest))
        oid, onum, pid, description = _pick(rng, rows, self.name)
        (p1, n1, lp1) = rng.choice(_products(image))
        q1 = rng.randint(2, 20)
        sid, number = _next_id(image, "sales"), _next_number(image, "sale")
        untaxed, tax, total = amounts([(q1, Decimal(lp1))], self.param("tax_rounding"))
        if self.confirm:
            ask = f"About opportunity {onum} ({description}): we are going ahead, please order {q1} x {n1} for us."
        else:
            ask = f"About opportunity {onum} ({description}): we'd like a quotation for {q1} x {n1}."
        gold = [
            ToolCall("convert_opportunity", {"opportunity_id": oid}),
            ToolCall("get_sale", {"sale_id": sid}),
            ToolCall("add_line", {"sale_id": sid, "product_id": p1, "quantity": q1}),
            ToolCall("quote_sale", {"sale_id": sid}),
        ]
        checks = [
            _field("from the opportunity", "sales", sid, "opportunity_id", oid),
            _field("numbered", "sales", sid, "number", number),
            Check("one line", "count", {"table": "sale_lines", "where": {"sale_id": sid}, "min": 1, "max": 1}),
        ]
        if self.confirm:
            gold.append(ToolCall("confirm_sale", {"sale_id": sid}))
            reply = f"Order {number} is confirmed, total ${total} including ${tax} VAT."
            checks += [
                _field("ordered", "sales", sid, "state", "processing"),
                _field("won", "opportunities", oid, "state", "won"),
            ]
        else:
            reply = f"Your quotation {number} totals ${total} including ${tax} VAT."
            checks += [
                _field("quoted", "sales", sid, "state", "quotation"),
                _field("converted", "opportunities", oid, "state", "converted"),
            ]
        gold.append(ToolCall("respond", {"message": reply}))
        return _task(
            self,
            seed,
            _customer_says(image, pid, ask),
            gold,
            (("party", pid), ("opportunity", oid), ("sale", sid)),
            (("opportunity", oid), ("sale", sid)),
            checks,
            (Fact("sale number", number, "id"), Fact("total", total, "money", (untaxed,))),
        )


class ConvertOpportunity(_ConvertFamily):
    name = "convert_opportunity"
    description = "A customer asks for a quote on their opportunity: convert it into a quotation and quote it."
    confirm = False


class WinOpportunity(_ConvertFamily):
    name = "win_opportunity"
    description = "A customer orders on their opportunity: convert it, quote and confirm the sale (the deal is won)."
    confirm = True


class AmendQuotation(TaskFamily):
    name = "amend_quotation"
    description = "A customer changes a quantity on their quotation: reopen it, replace the line, quote it again."

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        rows = image.query(
            "SELECT s.id, s.number, s.party_id FROM sales s WHERE s.state='quotation' "
            "AND EXISTS (SELECT 1 FROM sale_lines l WHERE l.sale_id=s.id) ORDER BY s.id"
        )
        sid, number, pid = _pick(rng, rows, self.name)
        lines = _sale_lines(image, sid)
        lid, product, quantity, _price, discount = rng.choice(lines)
        name, list_price = image.query("SELECT name, list_price FROM products WHERE id=?", (product,))[0]
        new_quantity = rng.choice([q for q in range(1, 25) if q != quantity])
        price = unit_price(Decimal(list_price), Decimal(discount))
        kept = [(q, Decimal(u)) for i, _p, q, u, _d in lines if i != lid]
        untaxed, tax, total = amounts([*kept, (new_quantity, price)], self.param("tax_rounding"))
        line: dict[str, Any] = {"sale_id": sid, "product_id": product, "quantity": new_quantity}
        if Decimal(discount):
            line["discount"] = json_number(Decimal(discount))
        return _task(
            self,
            seed,
            _customer_says(
                image, pid, f"On quotation {number}, please make it {new_quantity} x {name} instead of {quantity}."
            ),
            [
                ToolCall("reopen_sale", {"sale_id": sid}),
                ToolCall("remove_line", {"sale_id": sid, "line_id": lid}),
                ToolCall("add_line", line),
                ToolCall("quote_sale", {"sale_id": sid}),
                ToolCall("respond", {"message": f"Quotation {number} now totals ${total} including ${tax} VAT."}),
            ],
            (("party", pid), ("sale", sid)),
            (("sale", sid),),
            [
                _field("quoted again", "sales", sid, "state", "quotation"),
                Check(
                    "new quantity",
                    "count",
                    {
                        "table": "sale_lines",
                        "where": {"sale_id": sid, "product_id": product, "quantity": new_quantity},
                        "min": 1,
                    },
                ),
            ],
            (Fact("new total", total, "money", (untaxed,)),),
        )


def _overdue_alone(image: Image) -> list[tuple[Any, ...]]:
    """(invoice id, number, due, due date, invoice date, total, sale id, party) of every overdue invoice whose customer
    has no other overdue invoice, as of the image's business date."""
    today = str(image.query("SELECT now FROM sim_clock WHERE id=1")[0][0])[:10]
    rows = image.query(
        "SELECT i.id, i.number, i.total, i.paid, i.writeoff, i.due_date, i.invoice_date, s.id, s.party_id "
        "FROM invoices i JOIN sales s ON s.id = i.sale_id WHERE i.state='posted' AND i.credit_of IS NULL "
        "AND i.due_date < ? ORDER BY i.id",
        (today,),
    )
    out = []
    for iid, number, total, paid, writeoff, due_date, dated, sid, pid in rows:
        due = Decimal(total) - Decimal(paid) - Decimal(writeoff)
        if due > 0:
            out.append((int(iid), str(number), money(due), str(due_date), str(dated), str(total), int(sid), int(pid)))
    parties = [r[7] for r in out]
    return [r for r in out if parties.count(r[7]) == 1]


class ChaseOverdue(TaskFamily):
    name = "chase_overdue"
    description = (
        "A customer asks what they owe past its due date: find their overdue invoice, state amount and due date."
    )

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        _iid, number, due, due_date, dated, total, sid, pid = _pick(rng, _overdue_alone(image), self.name)
        distractors = tuple(x for x in (total,) if x != due)
        return _task(
            self,
            seed,
            _customer_says(
                image,
                pid,
                "We had a reminder that something of ours is overdue with you, but we can't find the invoice. "
                "Which invoice is it, how much is still owed on it and when was it due?",
            ),
            [
                ToolCall("list_overdue_invoices", {"party_id": pid}),
                ToolCall(
                    "respond",
                    {"message": f"Invoice {number} is overdue: ${due} is still owed on it; it was due on {due_date}."},
                ),
            ],
            (("party", pid), ("sale", sid)),
            (("sale", sid),),
            [],  # nothing to change: the state gate holds the invoice as it was
            (Fact("amount overdue", due, "money", distractors), Fact("due date", due_date, "date", (dated,))),
        )


class PayOverdue(TaskFamily):
    name = "pay_overdue"
    description = "A customer pays what is overdue without naming the invoice: find it, record the payment in full."

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        iid, number, due, _due_date, _dated, _total, sid, pid = _pick(rng, _overdue_alone(image), self.name)
        return _task(
            self,
            seed,
            _customer_says(
                image,
                pid,
                f"Sorry for the delay: we have just wired ${due}, everything we owe you that is past due. "
                "Please record it.",
            ),
            [
                ToolCall("list_overdue_invoices", {"party_id": pid}),
                ToolCall("pay_invoice", {"invoice_id": iid, "amount": json_number(due)}),
                ToolCall(
                    "respond",
                    {"message": f"We received your payment of ${due} for invoice {number}; nothing is overdue now."},
                ),
            ],
            (("party", pid), ("sale", sid)),
            (("sale", sid),),
            [_field("overdue invoice paid", "invoices", iid, "state", "paid")],
            (Fact("invoice paid", number, "id"),),
        )


def _over_limit(image: Image, tax_rounding: str) -> list[tuple[int, str, int, str, str, Decimal]]:
    """(sale id, number, party, untaxed, total, room) of every quotation that confirming would take past its
    customer's credit limit."""
    out = []
    for sid, number, pid in image.query("SELECT id, number, party_id FROM sales WHERE state='quotation' ORDER BY id"):
        untaxed, _tax, total = _sale_amounts(image, sid, tax_rounding)
        room = _credit_room(image).get(int(pid))
        if room is not None and Decimal(untaxed) > room:
            out.append((int(sid), str(number), int(pid), untaxed, total, room))
    return out


def _limit(image: Image, party_id: int) -> str:
    return str(image.query("SELECT credit_limit FROM parties WHERE id=?", (party_id,))[0][0])


class CreditHold(TaskFamily):
    name = "credit_hold"
    description = (
        "A customer accepts a quotation that would take them past their credit limit: do not confirm it; tell "
        "them the limit and that a payment of what they owe lets the order go ahead."
    )

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        sid, number, pid, untaxed, total, _room = _pick(rng, _over_limit(image, self.param("tax_rounding")), self.name)
        limit = _limit(image, pid)
        return _task(
            self,
            seed,
            _customer_says(image, pid, f"We accept quotation {number}, please go ahead with the order."),
            [
                ToolCall("get_party", {"party_id": pid}),
                ToolCall(
                    "respond",
                    {
                        "message": f"Quotation {number} (${untaxed} before tax) would take your account past its "
                        f"${limit} credit limit, so it is on hold; once a payment of what you owe comes in we can "
                        "go ahead with it."
                    },
                ),
            ],
            (("party", pid), ("sale", sid)),
            (("sale", sid),),
            [],  # nothing to change: the state gate holds the quotation as it was
            (Fact("credit limit", money(Decimal(limit)), "money", (total,)),),
        )


class PayThenConfirm(TaskFamily):
    name = "pay_then_confirm"
    description = (
        "A customer over their credit limit pays an open invoice and accepts a quotation: record the payment "
        "first, which frees the credit, then confirm the order."
    )

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        rows = []
        for sid, number, pid, untaxed, total, room in _over_limit(image, self.param("tax_rounding")):
            for iid, inum, owed in image.query(
                "SELECT i.id, i.number, i.total FROM invoices i JOIN sales s ON s.id = i.sale_id "
                "WHERE s.party_id=? AND i.state='posted' AND i.paid='0.00' AND i.credit_of IS NULL ORDER BY i.id",
                (pid,),
            ):
                if room + Decimal(owed) >= Decimal(untaxed):
                    rows.append((sid, number, pid, untaxed, total, int(iid), str(inum), str(owed)))
        sid, number, pid, untaxed, total, iid, inum, owed = _pick(rng, rows, self.name)
        return _task(
            self,
            seed,
            _customer_says(
                image,
                pid,
                f"We have just wired ${owed} to pay invoice {inum}. We also accept quotation {number}: "
                "please go ahead with the order.",
            ),
            [
                ToolCall("pay_invoice", {"invoice_id": iid, "amount": json_number(owed)}),
                # The read between paying and confirming keeps the payment before the order that needs its credit.
                ToolCall("get_party", {"party_id": pid}),
                ToolCall("confirm_sale", {"sale_id": sid}),
                ToolCall(
                    "respond",
                    {
                        "message": f"We received your payment of ${owed} for invoice {inum}, and order {number} is "
                        f"confirmed, total ${total}."
                    },
                ),
            ],
            (("party", pid), ("sale", sid)),
            (("sale", sid),),
            [
                _field("invoice paid", "invoices", iid, "state", "paid"),
                _field("confirmed", "sales", sid, "state", "processing"),
            ],
            (Fact("order total", total, "money", (untaxed,)),),
        )


def _on_price_list(image: Image) -> Sequence[tuple[Any, ...]]:
    """(party id, price list id, price list name) of every customer on a price list with an address."""
    return image.query(
        "SELECT p.id, l.id, l.name FROM parties p JOIN price_lists l ON l.id = p.price_list_id "
        "WHERE EXISTS (SELECT 1 FROM addresses a WHERE a.party_id=p.id) ORDER BY p.id"
    )


def _list_price(image: Image, price_list_id: int, product_id: int, quantity: int) -> Decimal:
    """The unit price a price list gives a product for a quantity (the mirror's own computation, on the image)."""
    conn = image.acquire()
    try:
        db = ConnDb(conn)
        product = db.one("SELECT id, list_price FROM products WHERE id=?", (product_id,))
        assert product is not None
        return price_list_price(db, price_list_id, product, quantity)
    finally:
        image.release(conn)


_TIERS = (3, 8, 10, 12, 20, 24, 50, 60)
"""Quantities the price-list families ask for (either side of the lists' quantity rules)."""


class PriceListQuotation(TaskFamily):
    name = "price_list_quotation"
    description = (
        "A customer on a price list asks for a quotation and for a further discount on top: quote at their price "
        "list's prices (lines without a discount), add no discount the manager did not approve, give the total."
    )

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        pid, plid, plname = _pick(rng, _on_price_list(image), self.name)
        (p1, n1, _lp1), (p2, n2, _lp2) = rng.sample(_products(image), 2)
        q1, q2 = rng.choice(_TIERS), rng.randint(1, 6)
        u1, u2 = _list_price(image, plid, p1, q1), _list_price(image, plid, p2, q2)
        sid, number = _next_id(image, "sales"), _next_number(image, "sale")
        untaxed, tax, total = amounts([(q1, u1), (q2, u2)], self.param("tax_rounding"))
        extra = rng.choice((5, 8, 10))
        return _task(
            self,
            seed,
            _customer_says(
                image,
                pid,
                f"Please send us a quote for {q1} x {n1} and {q2} x {n2}. Could you also take another {extra}% off "
                "on top of our usual prices?",
            ),
            [
                ToolCall("get_party", {"party_id": pid}),
                ToolCall("create_quotation", {"party_id": pid}),
                ToolCall("get_sale", {"sale_id": sid}),
                ToolCall("add_line", {"sale_id": sid, "product_id": p1, "quantity": q1}),
                ToolCall("add_line", {"sale_id": sid, "product_id": p2, "quantity": q2}),
                ToolCall("quote_sale", {"sale_id": sid}),
                ToolCall(
                    "respond",
                    {
                        "message": f"Your quotation {number} is at your {plname} prices and totals ${total} "
                        f"including ${tax} VAT; your price list already gives your agreed prices, so no further "
                        "discount can be added on top of it."
                    },
                ),
            ],
            (("party", pid), ("sale", sid)),
            (("sale", sid),),
            [
                _field("quoted", "sales", sid, "state", "quotation"),
                _field("numbered", "sales", sid, "number", number),
                _field("on the price list", "sales", sid, "price_list_id", plid),
                Check("two lines", "count", {"table": "sale_lines", "where": {"sale_id": sid}, "min": 2, "max": 2}),
                Check(
                    "price list prices",
                    "count",
                    {
                        "table": "sale_lines",
                        "where": {"sale_id": sid, "product_id": p1, "unit_price": str(u1)},
                        "min": 1,
                    },
                ),
            ],
            (Fact("quotation number", number, "id"), Fact("total", total, "money", (untaxed,))),
        )


class PriceQuestion(TaskFamily):
    name = "price_question"
    description = "A customer on a price list asks what unit price they would pay for a quantity: answer from it."

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        pid, plid, plname = _pick(rng, _on_price_list(image), self.name)
        p1, n1, lp1 = rng.choice(_products(image))
        q1 = rng.choice(_TIERS)
        price = _list_price(image, plid, p1, q1)
        return _task(
            self,
            seed,
            _customer_says(image, pid, f"If we ordered {q1} x {n1}, what unit price would we pay?"),
            [
                ToolCall("quote_price", {"party_id": pid, "product_id": p1, "quantity": q1}),
                ToolCall(
                    "respond",
                    {"message": f"For {q1} x {n1} your {plname} price is ${price} per unit (list price ${lp1})."},
                ),
            ],
            (("party", pid),),
            (("party", pid),),
            [],  # a question: nothing changes
            (Fact("unit price", str(price), "money"),),
        )


class ReturnOrder(TaskFamily):
    name = "return_order"
    description = (
        "A customer sends back a delivered order: return the sale, quote and confirm the return, receive the "
        "return shipment into stock, post the credit note and give its number and amount."
    )

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        rows = image.query(
            "SELECT s.id, s.number, s.party_id FROM sales s WHERE s.state IN ('processing', 'done') "
            "AND s.shipment_state='sent' AND s.return_of IS NULL AND s.invoice_method='order' "
            "AND NOT EXISTS (SELECT 1 FROM sales r WHERE r.return_of=s.id) ORDER BY s.id"
        )
        sid, number, pid = _pick(rng, rows, self.name)
        lines = image.query("SELECT quantity, unit_price FROM sale_lines WHERE sale_id=? ORDER BY id", (sid,))
        untaxed, _tax, total = amounts([(-int(q), Decimal(u)) for q, u in lines], self.param("tax_rounding"))
        rsid, rnumber = _next_id(image, "sales"), _next_number(image, "sale")
        shipment, invoice = _next_id(image, "return_shipments"), _next_id(image, "invoices")
        note = _next_number(image, "invoice")
        credit = money(-Decimal(total))
        reason = rng.choice(("it arrived damaged", "we ordered the wrong models", "the project was cancelled"))
        return _task(
            self,
            seed,
            _customer_says(
                image,
                pid,
                f"We are sending back everything we received on order {number}: {reason}. Please take the return "
                "and credit us.",
            ),
            [
                ToolCall("return_sale", {"sale_id": sid}),
                # The read between the return and its quotation keeps the return's creation first.
                ToolCall("get_sale", {"sale_id": rsid}),
                ToolCall("quote_sale", {"sale_id": rsid}),
                ToolCall("confirm_sale", {"sale_id": rsid}),
                # The confirmation makes the return shipment and the credit note: read them before using them.
                ToolCall("get_sale", {"sale_id": rsid}),
                ToolCall("receive_return", {"shipment_id": shipment}),
                ToolCall("post_invoice", {"invoice_id": invoice}),
                ToolCall(
                    "respond",
                    {
                        "message": f"We have received your return of order {number} (return {rnumber}); credit note "
                        f"{note} for ${credit} has been posted to your account."
                    },
                ),
            ],
            (("party", pid), ("sale", sid), ("sale", rsid)),
            (("sale", rsid),),
            [
                _field("returns the order", "sales", rsid, "return_of", sid),
                _field("return confirmed", "sales", rsid, "state", "processing"),
                _field("return received", "return_shipments", shipment, "state", "done"),
                _field("credit note posted", "invoices", invoice, "state", "posted"),
                _field("credit note amount", "invoices", invoice, "total", total),
            ],
            (
                Fact("credit note number", note, "id"),
                Fact("credit amount", credit, "money", (money(-Decimal(untaxed)),)),
            ),
        )


def _in_stock(image: Image, sale_id: int) -> bool:
    """Whether every product of a sale's lines is on hand for all the sale orders of it."""
    short = image.query(
        "SELECT 1 FROM (SELECT product_id, SUM(quantity) AS q FROM sale_lines WHERE sale_id=? GROUP BY product_id) n "
        "JOIN products p ON p.id = n.product_id WHERE p.on_hand < n.q LIMIT 1",
        (sale_id,),
    )
    return not short


class InvoiceOnShipment(TaskFamily):
    name = "invoice_on_shipment"
    description = (
        "A customer wants their draft order invoiced on shipment: set the sale's invoice method to fulfillment, "
        "quote and confirm it, send its shipment and post the invoice the shipment made."
    )

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        rounding = self.param("tax_rounding")
        rows = [
            (int(sid), int(pid))
            for sid, pid in image.query(
                "SELECT s.id, s.party_id FROM sales s WHERE s.state='draft' AND s.invoice_method='order' "
                "AND EXISTS (SELECT 1 FROM sale_lines l WHERE l.sale_id=s.id) "
                "AND EXISTS (SELECT 1 FROM addresses a WHERE a.party_id=s.party_id) ORDER BY s.id"
            )
            if _in_stock(image, sid) and _within_credit(image, pid, Decimal(_sale_amounts(image, sid, rounding)[0]))
        ]
        sid, pid = _pick(rng, rows, self.name)
        untaxed, _tax, total = _sale_amounts(image, sid, rounding)
        number, shid = _next_number(image, "sale"), _next_id(image, "shipments")
        iid, inum = _next_id(image, "invoices"), _next_number(image, "invoice")
        return _task(
            self,
            seed,
            _customer_says(
                image,
                pid,
                f"Please go ahead with our draft order (sale {sid}) and ship it now. We want it invoiced on "
                "shipment, for what you actually send rather than on order: send us that invoice once it ships.",
            ),
            [
                ToolCall("set_invoice_method", {"sale_id": sid, "method": "fulfillment"}),
                ToolCall("quote_sale", {"sale_id": sid}),
                ToolCall("confirm_sale", {"sale_id": sid}),
                # The reads keep each record's creation before the write that needs it.
                ToolCall("get_sale", {"sale_id": sid}),
                ToolCall("ship_shipment", {"shipment_id": shid}),
                ToolCall("get_sale", {"sale_id": sid}),
                ToolCall("post_invoice", {"invoice_id": iid}),
                ToolCall(
                    "respond",
                    {
                        "message": f"Order {number} is confirmed and shipped, invoiced on shipment: invoice {inum} "
                        f"bills what was sent, total ${total}."
                    },
                ),
            ],
            (("party", pid), ("sale", sid)),
            (("sale", sid),),
            [
                _field("invoiced on fulfillment", "sales", sid, "invoice_method", "fulfillment"),
                _field("shipment sent", "shipments", shid, "state", "done"),
                _field("invoice posted", "invoices", iid, "state", "posted"),
                Check(
                    "the invoice bills the shipment",
                    "count",
                    {"table": "shipment_moves", "where": {"shipment_id": shid, "invoice_id": iid}, "min": 1},
                ),
            ],
            (Fact("invoice number", inum, "id"), Fact("invoice total", total, "money", (untaxed,))),
        )


class PartialInvoice(TaskFamily):
    name = "partial_invoice"
    description = (
        "A customer invoiced on fulfillment orders more than is in stock and pays for what ships today: send what "
        "is in stock, backorder the rest, post the invoice of the part sent and record its payment (the backorder "
        "is invoiced when it ships)."
    )

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        rounding = self.param("tax_rounding")
        stock = {int(i): int(h) for i, h in image.query("SELECT id, on_hand FROM products ORDER BY id")}
        products = _products(image)
        short = [p for p in products if 1 <= stock[p[0]] <= 40]
        (pa, na, lpa) = _pick(rng, short, self.name)
        (pb, nb, lpb) = _pick(rng, [p for p in products if p[0] != pa and stock[p[0]] >= 4], self.name)
        extra, qb = rng.randint(2, 6), rng.randint(1, 4)
        qa, sent = stock[pa] + extra, stock[pa]
        untaxed_all = Decimal(amounts([(qa, Decimal(lpa)), (qb, Decimal(lpb))], rounding)[0])
        parties = [
            int(pid)
            for (pid,) in image.query(
                "SELECT p.id FROM parties p WHERE p.role='customer' AND p.sale_invoice_method='fulfillment' "
                "AND EXISTS (SELECT 1 FROM addresses a WHERE a.party_id=p.id) ORDER BY p.id"
            )
            if _within_credit(image, int(pid), untaxed_all)
        ]
        (pid,) = _pick(rng, [(p,) for p in parties], self.name)
        untaxed, _tax, total = amounts([(sent, Decimal(lpa)), (qb, Decimal(lpb))], rounding)
        sid, number = _next_id(image, "sales"), _next_number(image, "sale")
        shid = _next_id(image, "shipments")
        backorder = shid + 1
        iid, inum = _next_id(image, "invoices"), _next_number(image, "invoice")
        return _task(
            self,
            seed,
            _customer_says(
                image,
                pid,
                f"Please order {qa} x {na} and {qb} x {nb} for us. Ship whatever you have in stock today and the "
                "rest when it comes in. We pay for what arrives: we have wired the amount of the invoice for "
                "today's part, please record it against that invoice.",
            ),
            [
                ToolCall("create_quotation", {"party_id": pid}),
                ToolCall("get_sale", {"sale_id": sid}),
                ToolCall("add_line", {"sale_id": sid, "product_id": pa, "quantity": qa}),
                ToolCall("add_line", {"sale_id": sid, "product_id": pb, "quantity": qb}),
                ToolCall("quote_sale", {"sale_id": sid}),
                ToolCall("confirm_sale", {"sale_id": sid}),
                # The reads keep each record's creation before the write that needs it.
                ToolCall("get_sale", {"sale_id": sid}),
                ToolCall("ship_shipment", {"shipment_id": shid, "partial": True}),
                ToolCall("get_sale", {"sale_id": sid}),
                ToolCall("post_invoice", {"invoice_id": iid}),
                ToolCall("pay_invoice", {"invoice_id": iid, "amount": json_number(total)}),
                ToolCall(
                    "respond",
                    {
                        "message": f"Order {number}: {sent} x {na} and {qb} x {nb} went out today. We received your "
                        f"payment of ${total} for invoice {inum}, which bills that part. The other {extra} x {na} "
                        f"are backordered (shipment {backorder}) and will be invoiced when they ship."
                    },
                ),
            ],
            (("party", pid), ("sale", sid)),
            (("sale", sid),),
            [
                _field("invoiced on fulfillment", "sales", sid, "invoice_method", "fulfillment"),
                _field("sent in part", "shipments", shid, "state", "done"),
                _field("backordered", "sales", sid, "shipment_state", "partially shipped"),
                _field("invoice of the part sent", "invoices", iid, "untaxed", untaxed),
                _field("invoice paid", "invoices", iid, "state", "paid"),
                Check(
                    "backorder waiting",
                    "count",
                    {"table": "shipments", "where": {"id": backorder, "sale_id": sid, "state": "waiting"}, "min": 1},
                ),
            ],
            (
                Fact("invoice number", inum, "id"),
                Fact("amount paid", total, "money", (untaxed,)),
                Fact("backorder shipment", str(backorder), "id"),
            ),
        )


FAMILIES: tuple[TaskFamily, ...] = (  # append only: a family's index decides which task reset(seed=i) plays
    AddContact(),
    NewLead(),
    QualifyLead(),
    LoseOpportunity(),
    NewQuotation(),
    DiscountQuotation(),
    ConfirmOrder(),
    ShipOrder(),
    CollectPayment(),
    CancelQuotation(),
    PartialShipment(),
    ShortPayment(),
    RecordOverpayment(),
    CreditInvoice(),
    ConvertOpportunity(),
    WinOpportunity(),
    AmendQuotation(),
    ChaseOverdue(),
    PayOverdue(),
    CreditHold(),
    PayThenConfirm(),
    PriceListQuotation(),
    PriceQuestion(),
    ReturnOrder(),
    InvoiceOnShipment(),
    PartialInvoice(),
)
for _family in FAMILIES:  # the sales desk's figures until a world binds its own (World.parameters)
    _family.parameters = PARAMETERS
