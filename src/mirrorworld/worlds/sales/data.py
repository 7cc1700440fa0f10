"""The sales world's seeded data: master data plus a history of tool calls.

The pristine state is built in two steps, both pure functions of the seeded
``random.Random``:

1. **master data** (:func:`master_data`) — the company, a sales employee,
   customers with addresses and contacts, products with list prices and stock
   on hand, inserted in this order so ids follow creation order;
2. **history** (:func:`history`) — a list of ordinary tool calls (leads
   created, qualified and lost; sales drafted, quoted, confirmed, shipped,
   invoiced, paid, cancelled) replayed through the same operations the tools
   use, with two kinds of step that are no tool: the business date of the
   calls that follow (:data:`SET_DATE`: invoices were posted over the past
   weeks) and, last, the customers' credit limits (:data:`SET_CREDIT_LIMIT`)
   and the few customers invoiced on fulfillment (:data:`SET_INVOICE_METHOD`).

The real twin builds its database from exactly these two inputs, through the
real system, so both backends start from the same business state with the
same ids and numbers.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from mirrorworld.core.task import ToolCall
from mirrorworld.errors import ToolError, WorldError
from mirrorworld.worlds.sales import tools as t
from mirrorworld.worlds.sales.rules import SIM_DATE, price_text

SCHEMA = Path(__file__).with_name("schema.sql")

COMPANY = "Mirror Supply Co."
EMPLOYEE = "Dana Reyes"

_FIRMS = (
    "Acme Hardware",
    "Bluebird Cafe",
    "Cobalt Dental",
    "Delta Print Shop",
    "Evergreen Florist",
    "Falcon Logistics",
    "Granite Builders",
    "Harbor Marine",
    "Indigo Studio",
    "Juniper Bakery",
    "Keystone Clinic",
    "Lumen Optics",
    "Maple Schools",
    "Nimbus Labs",
    "Orchid Spa",
    "Pioneer Farms",
    "Quartz Jewelers",
    "Redwood Lodge",
    "Summit Outfitters",
    "Tidewater Books",
    "Union Garage",
    "Vertex Fitness",
    "Willow Daycare",
    "Zephyr Cycles",
)
_SIM_DAY = date.fromisoformat(SIM_DATE)
_CITIES = ("Springfield", "Riverton", "Lakeside", "Fairview", "Hillcrest", "Brookfield")
_STREETS = ("Main St", "Oak Ave", "Pine Rd", "Cedar Ln", "Elm St", "Harbor Way")
_AREA_CODES = ("212", "312", "415", "617", "206", "303", "512", "404")
_PRODUCTS = (
    ("Office chair", "149.99"),
    ("Standing desk", "489.00"),
    ("Monitor 27in", "219.45"),
    ("Keyboard", "38.125"),
    ("Desk lamp", "24.995"),
    ("Printer paper box", "31.5050"),
    ("Toner cartridge", "62.335"),
    ("Whiteboard", "84.00"),
    ("Filing cabinet", "179.50"),
    ("Conference phone", "312.675"),
    ("Label printer", "96.245"),
    ("Shredder", "133.10"),
)
PAYMENT_TERMS = (
    (1, "Upon Receipt", 0),
    (2, "Net 10 days", 10),
    (3, "Net 15 days", 15),
    (4, "Net 30 days", 30),
    (5, "Net 60 days", 60),
)
"""(id, name, days): the payment terms a customer invoice falls due by, days after its invoice date (the standard
terms the real system ships, with its ids; its end-of-month terms are not used)."""
_CUSTOMER_TERMS = (1, 3, 4)
"""The terms customers are on, in turn by party id."""

SET_CREDIT_LIMIT = "set_credit_limit"
"""A history step that is no tool: a customer's credit limit (``{"party_id": 3, "limit": "5000.00"}``), set by
accounts once the history is in (the desk cannot change one)."""

SET_INVOICE_METHOD = "set_invoice_method_default"
"""A history step that is no tool: a customer's invoice method for their new sales (``{"party_id": 3, "method":
"fulfillment"}``), set by accounts once the history is in (the sales already made keep theirs)."""

FULFILLMENT_CUSTOMERS = 3
"""How many customers (with an address) are invoiced on fulfillment: drawn after every other draw of the data."""

SET_DATE = "set_date"
"""A history step that is no tool: the business date of the calls that follow (``{"date": "YYYY-MM-DD"}``)."""

PRICE_LISTS = (
    (
        1,
        "Wholesale",
        ((None, 50, "0.8"), (None, 10, "0.9"), (6, None, "0.95"), (None, None, "1")),
    ),
    (2, "Trade Partner", ((2, None, "0.85"), (None, 20, "0.9"), (None, None, "0.95"))),
)
"""(id, name, lines): the sale price lists, each line ``(product id or None, from quantity or None, factor of the
list price)``, tried in order (the first that matches prices the line; the last matches anything). Wholesale: 20%
off from 50 units, 10% off from 10, 5% off printer paper, else the list price; Trade Partner: 15% off standing
desks, 10% off from 20 units, else 5% off."""

_PRICE_LIST_CUSTOMERS = (
    ("Atlas Office Wholesale", 1, ("410 Commerce Dr", "Springfield", "62704")),
    ("Beacon Trade Partners", 2, ("78 Harbor Way", "Lakeside", "53012")),
)
"""(name, price list id, address): the customers on a price list, created after everyone else (on Net 30)."""

_INTERESTS = (
    "office refurbishment",
    "new branch fit-out",
    "printer fleet renewal",
    "ergonomic seating",
    "meeting room equipment",
    "yearly supplies contract",
)


@dataclass
class Master:
    """The master data: rows of parties, addresses, contacts and products, in creation order."""

    parties: list[tuple[int, str, str, str]] = field(default_factory=list)
    """(id, code, name, role)"""
    addresses: list[tuple[int, int, str, str, str]] = field(default_factory=list)
    """(id, party_id, street, city, postal_code)"""
    contacts: list[tuple[int, int, str, str]] = field(default_factory=list)
    """(id, party_id, type, value)"""
    products: list[tuple[int, str, str, str, int]] = field(default_factory=list)
    """(id, code, name, list_price, on_hand)"""
    payment_terms: tuple[tuple[int, str, int], ...] = PAYMENT_TERMS
    """(id, name, days)"""
    party_terms: dict[int, int] = field(default_factory=dict)
    """customer party id -> payment term id"""
    price_lists: tuple[tuple[int, str], ...] = ()
    """(id, name)"""
    price_list_lines: tuple[tuple[int, int, int, int | None, int | None, str, str], ...] = ()
    """(id, price_list_id, sequence, product_id, quantity, formula, factor)"""
    party_price_lists: dict[int, int] = field(default_factory=dict)
    """customer party id -> sale price list id (customers without one buy at list prices)"""


def master_data(rng: random.Random, scale: float) -> Master:
    m = Master()
    m.parties.append((1, "1", COMPANY, "company"))
    m.parties.append((2, "2", EMPLOYEE, "employee"))
    n = max(8, min(len(_FIRMS), round(len(_FIRMS) * scale)))
    for i, firm in enumerate(_FIRMS[:n]):
        pid = 3 + i
        m.parties.append((pid, str(pid), firm, "customer"))
        m.party_terms[pid] = _CUSTOMER_TERMS[pid % len(_CUSTOMER_TERMS)]
    for pid, _code, _name, role in m.parties:
        if role != "customer" or pid % 6 == 0:  # every sixth customer is a prospect with no address yet
            continue
        m.addresses.append(
            (
                len(m.addresses) + 1,
                pid,
                f"{rng.randint(1, 999)} {rng.choice(_STREETS)}",
                rng.choice(_CITIES),
                f"{rng.randint(10000, 99999)}",
            )
        )
    for pid, _code, name, role in m.parties:
        if role != "customer":
            continue
        slug = "".join(ch for ch in name.lower() if ch.isalpha())[:12]
        m.contacts.append((len(m.contacts) + 1, pid, "email", f"orders@{slug}.example"))
        if rng.random() < 0.5:
            n = rng.randint(1000000, 9999999)  # a fictional 555-01XX line in a real area code
            phone = f"+1 {_AREA_CODES[n % len(_AREA_CODES)]}-555-01{n % 100:02d}"
            m.contacts.append((len(m.contacts) + 1, pid, "phone", phone))
    for i, (name, price) in enumerate(_PRODUCTS):
        on_hand = rng.choice((0, 3, 8, 15, 40, 120, 250))
        m.products.append((i + 1, f"P{i + 1:03d}", name, price_text(Decimal(price)), on_hand))
    return m


def history(rng: random.Random, master: Master) -> list[ToolCall]:
    """The calls that bring the master data to the world's pristine state."""
    calls: list[ToolCall] = []
    customers = [p[0] for p in master.parties if p[3] == "customer"]
    with_address = sorted({a[1] for a in master.addresses})
    stock = {p[0]: p[4] for p in master.products}
    products = [p[0] for p in master.products]
    # Leads and opportunities.
    for k in range(max(10, len(customers) // 2 + 4)):
        opp = k + 1
        amount = f"{rng.randint(5, 400) * 50}.00"
        calls.append(
            ToolCall(
                "create_lead",
                {
                    "party_id": rng.choice(customers),
                    "description": rng.choice(_INTERESTS).capitalize(),
                    "amount": amount,
                },
            )
        )
        if k % 3 == 1:
            calls.append(ToolCall("qualify_lead", {"opportunity_id": opp}))
        elif k % 5 == 4:
            calls.append(ToolCall("mark_lost", {"opportunity_id": opp, "reason": "Chose a cheaper supplier"}))
    # Sales in every state.
    plan = ["draft"] * 6 + ["quotation"] * 7 + ["processing"] * 7 + ["shipped"] * 3 + ["posted"] * 5
    plan += ["done"] * 2 + ["cancelled"] * 2
    sale = shipment = invoice = posted = 0
    for target in plan:
        sale += 1
        party = rng.choice(with_address)
        calls.append(
            ToolCall("create_quotation", {"party_id": party, "description": f"Order {rng.choice(_INTERESTS)}"})
        )
        approved = False
        for _ in range(rng.randint(1, 3)):
            discount = "0"
            roll = rng.random()
            if roll < 0.25:
                discount = str(rng.choice((5, 7.5, 10)))
            elif roll < 0.35:
                discount = str(rng.choice((12, 15, 20)))
                if not approved:
                    calls.append(
                        ToolCall(
                            "request_discount_approval",
                            {"sale_id": sale, "discount": "20", "reason": "Volume customer"},
                        )
                    )
                    approved = True
            quantity = rng.randint(1, 6)
            if target in ("shipped", "done"):
                product = rng.choice([p for p in products if stock[p] >= quantity + 6])
                stock[product] -= quantity
            else:
                product = rng.choice(products)
            calls.append(
                ToolCall(
                    "add_line",
                    {"sale_id": sale, "product_id": product, "quantity": quantity, "discount": discount},
                )
            )
        if target == "draft":
            continue
        if target == "cancelled":
            calls.append(ToolCall("cancel_sale", {"sale_id": sale}))
            continue
        calls.append(ToolCall("quote_sale", {"sale_id": sale}))
        if target == "quotation":
            continue
        calls.append(ToolCall("confirm_sale", {"sale_id": sale}))
        shipment += 1
        invoice += 1
        if target in ("shipped", "done"):
            calls.append(ToolCall("ship_shipment", {"shipment_id": shipment}))
        if target in ("posted", "done"):
            # Invoices were posted over the past weeks, oldest first (an invoice's date follows its number).
            calls.append(ToolCall(SET_DATE, {"date": str(_SIM_DAY - timedelta(days=max(1, 56 - 9 * posted)))}))
            calls.append(ToolCall("post_invoice", {"invoice_id": invoice}))
            calls.append(ToolCall(SET_DATE, {"date": SIM_DATE}))
            posted += 1
        if target == "done":
            calls.append(ToolCall("pay_invoice", {"invoice_id": invoice, "amount": "__due__"}))
    return calls


class _GenDb(t.ConnDb):
    """A :class:`~mirrorworld.worlds.sales.tools.Db` over a bare connection (generation only)."""

    def __init__(self, conn: sqlite3.Connection, parameters: Mapping[str, Any] | None = None) -> None:
        super().__init__(conn)
        self.parameters = dict(parameters or {})
        self.date = SIM_DATE
        """The business date of the history's calls (moved by its :data:`SET_DATE` steps)."""

    def param(self, name: str) -> Any:
        """The generating world's parameter ``name`` (history is written under the world's rules)."""
        return self.parameters.get(name, "document" if name == "tax_rounding" else None)


def resolve(call: ToolCall, due: Any) -> ToolCall:
    """A history call with its ``__due__`` amount filled in from ``due(invoice_id)``."""
    args = dict(call.args) if isinstance(call.args, dict) else {}
    if args.get("amount") == "__due__":
        args["amount"] = str(due(int(args["invoice_id"])))
    return ToolCall(call.tool, args)


def run_history_call(db: t.Db, call: ToolCall) -> None:
    """Apply one history call through the tools' operations (``ToolError`` here is a generator bug)."""
    a = dict(call.args) if isinstance(call.args, dict) else {}
    if call.tool == SET_DATE:
        if not isinstance(db, _GenDb):
            raise WorldError("history dates are set only while the world is generated")
        db.date = str(a["date"])
        return
    if call.tool == SET_CREDIT_LIMIT:
        db.execute("UPDATE parties SET credit_limit=? WHERE id=?", (a["limit"], a["party_id"]))
        return
    if call.tool == SET_INVOICE_METHOD:
        db.execute("UPDATE parties SET sale_invoice_method=? WHERE id=?", (a["method"], a["party_id"]))
        return
    try:
        if call.tool == "create_lead":
            t.ops_create_lead(db, a["party_id"], a["description"], Decimal(a["amount"]))
        elif call.tool == "qualify_lead":
            t.ops_move_opportunity(db, a["opportunity_id"], "opportunity")
        elif call.tool == "mark_lost":
            t.ops_move_opportunity(db, a["opportunity_id"], "lost", a["reason"])
        elif call.tool == "create_quotation":
            t.ops_create_quotation(db, a["party_id"], a["description"])
        elif call.tool == "request_discount_approval":
            t.ops_request_discount_approval(db, a["sale_id"], Decimal(a["discount"]), a["reason"])
        elif call.tool == "add_line":
            t.ops_add_line(db, a["sale_id"], a["product_id"], a["quantity"], Decimal(a["discount"]))
        elif call.tool == "quote_sale":
            t.ops_quote(db, a["sale_id"])
        elif call.tool == "confirm_sale":
            t.ops_confirm(db, a["sale_id"])
        elif call.tool == "cancel_sale":
            t.ops_cancel(db, a["sale_id"])
        elif call.tool == "ship_shipment":
            t.ops_ship(db, a["shipment_id"])
        elif call.tool == "post_invoice":
            t.ops_post(db, a["invoice_id"])
        elif call.tool == "pay_invoice":
            t.ops_pay(db, a["invoice_id"], Decimal(a["amount"]), a.get("settle", "partial"))
        elif call.tool == "credit_invoice":
            t.ops_credit(db, a["invoice_id"])
        else:
            raise WorldError(f"history call {call.tool} has no operation")
    except ToolError as err:
        raise WorldError(f"history call {call.tool}({a}) was refused: {err}") from err


def build(rng: random.Random, scale: float) -> tuple[Master, list[ToolCall]]:
    """The master data and the history for one ``(data_seed, scale)``."""
    master = master_data(rng, scale)
    calls = history(rng, master)
    limits = credit_limits(master, calls)
    methods = invoice_methods(rng, master)  # before the price-list customers: every earlier draw is kept
    price_lists(master)
    return master, calls + limits + methods


def formula(factor: str) -> str:
    """A price list line's formula (the real system's expression) for a factor of the list price."""
    return "unit_price" if Decimal(factor) == 1 else f"unit_price * Decimal('{factor}')"


def price_lists(master: Master) -> None:
    """Add the sale price lists and the customers on them to the master data.

    They come after every draw of the seeded generator and after every other
    customer, address and contact (ids follow), with no history of their own:
    the rest of the world is what it was without them.
    """
    rows: list[tuple[int, str]] = []
    lines: list[tuple[int, int, int, int | None, int | None, str, str]] = []
    for plid, name, rules in PRICE_LISTS:
        rows.append((plid, name))
        for seq, (product, quantity, factor) in enumerate(rules, start=1):
            lines.append((len(lines) + 1, plid, seq, product, quantity, formula(factor), factor))
    master.price_lists, master.price_list_lines = tuple(rows), tuple(lines)
    for name, plid, (street, city, postal) in _PRICE_LIST_CUSTOMERS:
        pid = max(p[0] for p in master.parties) + 1
        master.parties.append((pid, str(pid), name, "customer"))
        master.party_terms[pid] = 4
        master.party_price_lists[pid] = plid
        master.addresses.append((len(master.addresses) + 1, pid, street, city, postal))
        slug = "".join(ch for ch in name.lower() if ch.isalpha())[:12]
        master.contacts.append((len(master.contacts) + 1, pid, "email", f"orders@{slug}.example"))


def invoice_methods(rng: random.Random, master: Master) -> list[ToolCall]:
    """The customers invoiced on fulfillment (their new sales take it): a few with an address, drawn last, so
    every earlier draw (and the history they made) is what it was without them."""
    with_address = sorted({a[1] for a in master.addresses})
    chosen = sorted(rng.sample(with_address, min(FULFILLMENT_CUSTOMERS, len(with_address))))
    return [ToolCall(SET_INVOICE_METHOD, {"party_id": pid, "method": "fulfillment"}) for pid in chosen]


def _hundreds(value: Decimal) -> Decimal:
    return (value / 100).to_integral_value(rounding="ROUND_FLOOR") * 100


def credit_limits(master: Master, calls: list[ToolCall]) -> list[ToolCall]:
    """The credit limits accounts sets once the history is in, from what each customer then owes.

    Every other customer with a quotation open is set just short of it: the
    limit covers what they owe plus half of their smallest quotation (to the
    hundred below, never less than what they owe), so confirming it would be
    refused. Every third other customer gets $5,000 of room above what they
    owe, rounded up to the hundred; the rest have no limit.
    """
    conn = sqlite3.connect(":memory:")
    try:
        _load(conn, master, calls, None)
        db = _GenDb(conn)
        out = []
        for pid in sorted(master.party_terms):
            owed = t.credit_amount(db, pid)
            quotes = [
                Decimal(t.sale_amounts(db, r["id"])[0])
                for r in db.all("SELECT id FROM sales WHERE party_id=? AND state='quotation' ORDER BY id", (pid,))
            ]
            quotes = [q for q in quotes if q > 0]
            if quotes and pid % 2 == 0:
                limit = max(_hundreds(owed + min(quotes) / 2), -_hundreds(-owed))
            elif pid % 3 == 0:
                limit = -_hundreds(-owed) + 5000
            else:
                continue
            out.append(ToolCall(SET_CREDIT_LIMIT, {"party_id": pid, "limit": f"{limit:.2f}"}))
        return out
    finally:
        conn.close()


def generate(
    conn: sqlite3.Connection, rng: random.Random, scale: float, parameters: Mapping[str, Any] | None = None
) -> None:
    _load(conn, *build(rng, scale), parameters)


def _load(
    conn: sqlite3.Connection, master: Master, calls: list[ToolCall], parameters: Mapping[str, Any] | None
) -> None:
    conn.executescript(SCHEMA.read_text(encoding="utf-8"))
    conn.executemany("INSERT INTO payment_terms (id, name, days) VALUES (?,?,?)", master.payment_terms)
    conn.executemany("INSERT INTO price_lists (id, name) VALUES (?,?)", master.price_lists)
    conn.executemany("INSERT INTO price_list_lines VALUES (?,?,?,?,?,?,?)", master.price_list_lines)
    conn.executemany(
        "INSERT INTO parties (id, code, name, role, payment_term_id, price_list_id) VALUES (?,?,?,?,?,?)",
        [(*p, master.party_terms.get(p[0]), master.party_price_lists.get(p[0])) for p in master.parties],
    )
    conn.executemany("INSERT INTO addresses VALUES (?,?,?,?,?)", master.addresses)
    conn.executemany("INSERT INTO contacts VALUES (?,?,?,?)", master.contacts)
    conn.executemany("INSERT INTO products VALUES (?,?,?,?,?)", master.products)
    conn.executemany("INSERT INTO sequences VALUES (?, 1)", [("sale",), ("opportunity",), ("invoice",)])
    conn.execute("INSERT INTO counters VALUES ('sale_line', 1)")
    db = _GenDb(conn, parameters)

    def due(invoice_id: int) -> Decimal:
        row = db.one("SELECT total, paid FROM invoices WHERE id=?", (invoice_id,))
        assert row is not None
        return Decimal(row["total"]) - Decimal(row["paid"])

    for call in calls:
        run_history_call(db, resolve(call, due))
