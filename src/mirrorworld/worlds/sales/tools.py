"""The sales world's tools, each declared once with ``@tool``.

The state changes live in plain functions over a :class:`Db` (``ops_*``) so the
data generator can build the world's history with exactly the code the tools
run. Write tools check everything before their first write and raise
:class:`ToolError` for agent mistakes and refused actions; the session rolls a
refused call back whole.

Error codes: ``not_found`` (no such record), ``invalid_arguments`` (a value
out of range), ``invalid_state`` (the state machine does not allow the move),
``validation_error`` (the record would be invalid: bad email, no address,
stock short), ``policy_refused`` (a discount or payment rule).
"""

from __future__ import annotations

import sqlite3
from datetime import date, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Annotated, Any, Literal, Protocol

from mirrorworld.core.session import ToolContext
from mirrorworld.core.text import clean_text, like_pattern, search_query
from mirrorworld.core.tools import FREE_TEXT, Ref, ToolSpec, tool
from mirrorworld.errors import ToolError
from mirrorworld.worlds.sales.contacts import normalise_contact
from mirrorworld.worlds.sales.rules import (
    PRICE_UNIT,
    amounts,
    check_approval_request,
    check_lead_amount,
    check_line_discount,
    check_payment_amount,
    check_quantity,
    currency_text,
    discount_read_back,
    money,
    price_text,
    unit_price,
    writeoff_refusal,
)

PartyId = Annotated[int, Ref("parties")]
ProductId = Annotated[int, Ref("products")]
OpportunityId = Annotated[int, Ref("opportunities")]
SaleId = Annotated[int, Ref("sales")]
LineId = Annotated[int, Ref("sale_lines")]
ShipmentId = Annotated[int, Ref("shipments")]
InvoiceId = Annotated[int, Ref("invoices")]
Prose = Annotated[str, FREE_TEXT]


class Db(Protocol):
    """What the operations need: parameterised queries (a ToolContext is one)."""

    def one(self, sql: str, params: tuple[Any, ...] = ()) -> dict[str, Any] | None: ...

    def all(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]: ...

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Cursor: ...


class ConnDb:
    """A :class:`Db` over a bare connection (data generation, task generation's reads of a clone)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def one(self, sql: str, params: tuple[Any, ...] = ()) -> dict[str, Any] | None:
        cur = self.conn.execute(sql, params)
        row = cur.fetchone()
        return None if row is None else dict(zip([d[0] for d in cur.description], row, strict=True))

    def all(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        cur = self.conn.execute(sql, params)
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, params)


def _get(db: Db, table: str, what: str, ident: int) -> dict[str, Any]:
    row = db.one(f"SELECT * FROM {table} WHERE id=?", (ident,))
    if row is None:
        raise ToolError("not_found", f"no {what} {ident}")
    return row


def _next(db: Db, name: str) -> str:
    row = db.execute("UPDATE sequences SET next=next+1 WHERE name=? RETURNING next-1", (name,)).fetchone()
    if row is None:
        raise RuntimeError(f"sequence {name} missing from the world data")
    return str(row[0])


def _draw_id(db: Db, name: str) -> int:
    """The next id of a record kind whose ids are never reused (``counters``)."""
    row = db.execute("UPDATE counters SET next=next+1 WHERE name=? RETURNING next-1", (name,)).fetchone()
    if row is None:
        raise RuntimeError(f"counter {name} missing from the world data")
    return int(row[0])


def _sale_name(sale: dict[str, Any]) -> str:
    """How the real system names a sale in messages: its number, else its id in brackets."""
    return str(sale["number"] or f"({sale['id']})")


def _invoice_name(inv: dict[str, Any]) -> str:
    """How the real system names an invoice in messages: its number, else its id in brackets."""
    return str(inv["number"] or f"({inv['id']})")


def _refused_click(button: str, record: str, model: str, rule: str) -> ToolError:
    """The real system's refusal of a workflow button its record's state does not offer."""
    return ToolError("invalid_state", f'You can not call "{button}" on "{record}" of "{model}".', rule=rule)


def _party_name(db: Db, party_id: int) -> str:
    row = db.one("SELECT name FROM parties WHERE id=?", (party_id,))
    return str(row["name"]) if row else str(party_id)


def _priced_lines(db: Db, sale_id: int) -> list[tuple[int, str]]:
    """A sale's ``(quantity, unit_price)`` lines."""
    return db.execute("SELECT quantity, unit_price FROM sale_lines WHERE sale_id=?", (sale_id,)).fetchall()


def business_date(db: Db) -> str:
    """Today's business date, ``YYYY-MM-DD``: the session's simulated clock (the data generator keeps its own)."""
    now = getattr(db, "now", None)
    if now is not None:
        return str(now())[:10]
    return str(getattr(db, "date"))  # noqa: B009 - the generator's Db (data._GenDb)


def _term_days(db: Db, sale_id: int) -> int:
    """The days a sale's invoices fall due after their date (its payment term; none: due at once)."""
    row = db.one("SELECT t.days FROM sales s JOIN payment_terms t ON t.id = s.payment_term_id WHERE s.id=?", (sale_id,))
    return int(row["days"]) if row is not None else 0


def _dated(db: Db, sale_id: int) -> tuple[str, str]:
    """(invoice date, due date) of a document of ``sale_id`` posted today."""
    today = business_date(db)
    return today, str(date.fromisoformat(today) + timedelta(days=_term_days(db, sale_id)))


def tax_rounding(db: Db) -> str:
    """The world's tax rounding (a tool's context reads its world's; the data generator passes its own)."""
    param = getattr(db, "param", None)
    return str(param("tax_rounding")) if param is not None else "document"


def sale_amounts(db: Db, sale_id: int) -> tuple[str, str, str]:
    """(untaxed, tax, total) of a sale: from its lines, or as they were when it was cancelled.

    The real system freezes a cancelled sale's amounts (a line removed from it
    afterwards does not change them) until the sale is reset to draft.
    """
    row = db.one("SELECT amounts_cache FROM sales WHERE id=?", (sale_id,))
    if row is not None and row["amounts_cache"]:
        untaxed, tax, total = str(row["amounts_cache"]).split()
        return untaxed, tax, total
    return amounts(_priced_lines(db, sale_id), tax_rounding(db))


# -- operations (shared by tools and the data generator) ---------------------------


def ops_add_contact(db: Db, party_id: int, kind: str, value: str) -> int:
    _get(db, "parties", "party", party_id)
    value = normalise_contact(kind, clean_text(value, "value", 200), _party_name(db, party_id))
    cur = db.execute("INSERT INTO contacts (party_id, type, value) VALUES (?,?,?)", (party_id, kind, value))
    return int(cur.lastrowid or 0)


def ops_create_lead(db: Db, party_id: int, description: str, amount: Decimal) -> dict[str, Any]:
    _get(db, "parties", "party", party_id)
    description = clean_text(description, "description", 200)
    check_lead_amount(amount)
    number = _next(db, "opportunity")
    cur = db.execute(
        "INSERT INTO opportunities (number, party_id, description, amount, state) VALUES (?,?,?,?, 'lead')",
        (number, party_id, description, money(amount)),
    )
    return {"opportunity_id": int(cur.lastrowid or 0), "number": number, "state": "lead"}


def ops_move_opportunity(db: Db, opportunity_id: int, to: str, reason: str | None = None) -> dict[str, Any]:
    opp = _get(db, "opportunities", "opportunity", opportunity_id)
    allowed = {"opportunity": ("lead",), "lost": ("lead", "opportunity")}[to]
    reason = clean_text(reason or "", "reason", 500) if to == "lost" else None
    if opp["state"] not in allowed:
        raise _refused_click(to, str(opp["number"]), "Sale Opportunity", "opportunity_workflow")
    if to == "lost":
        db.execute("UPDATE opportunities SET state='lost', lost_reason=? WHERE id=?", (reason, opportunity_id))
    else:
        db.execute("UPDATE opportunities SET state=? WHERE id=?", (to, opportunity_id))
    return {"opportunity_id": opportunity_id, "number": opp["number"], "state": to}


def ops_convert_opportunity(db: Db, opportunity_id: int) -> dict[str, Any]:
    """Convert an opportunity into a draft sale for its customer, as the real system's *convert* does."""
    opp = _get(db, "opportunities", "opportunity", opportunity_id)
    if opp["state"] != "opportunity":
        raise _refused_click("convert", str(opp["number"]), "Sale Opportunity", "opportunity_workflow")
    cur = db.execute(
        "INSERT INTO sales (number, party_id, description, state, invoice_state, shipment_state, opportunity_id, "
        "payment_term_id, price_list_id, invoice_method) SELECT NULL, ?, ?, 'draft', 'none', 'none', ?, "
        "payment_term_id, price_list_id, COALESCE(sale_invoice_method, 'order') FROM parties WHERE id=?",
        (opp["party_id"], opp["description"], opportunity_id, opp["party_id"]),
    )
    db.execute("UPDATE opportunities SET state='converted' WHERE id=?", (opportunity_id,))
    return {
        "opportunity_id": opportunity_id,
        "number": opp["number"],
        "state": "converted",
        "sale_id": int(cur.lastrowid or 0),
    }


_OPPORTUNITY_MOVES = {("converted", "won"), ("converted", "lost"), ("won", "converted"), ("lost", "converted")}


def _process_opportunity(db: Db, sale_id: int) -> None:
    """Bring the opportunity a sale was converted from up to date, as the real system does whenever the sale is
    quoted, confirmed, cancelled, processed or done: its amount becomes the untaxed total of its sales still
    alive; it is ``won`` once every sale is confirmed or later or cancelled and one is not cancelled, ``lost``
    once every sale is cancelled, ``converted`` otherwise (a move its state machine does not allow is skipped)."""
    row = db.one("SELECT opportunity_id FROM sales WHERE id=?", (sale_id,))
    if row is None or row["opportunity_id"] is None:
        return
    oid = row["opportunity_id"]
    sales = db.all("SELECT id, state FROM sales WHERE opportunity_id=? ORDER BY id", (oid,))
    alive = [r for r in sales if r["state"] != "cancelled"]
    amount = sum((Decimal(sale_amounts(db, r["id"])[0]) for r in alive), Decimal(0))
    won_states = ("confirmed", "processing", "done")
    if all(r["state"] in (*won_states, "cancelled") for r in sales) and alive:
        target = "won"
    elif not alive:
        target = "lost"
    else:
        target = "converted"
    state = db.one("SELECT state FROM opportunities WHERE id=?", (oid,))["state"]  # type: ignore[index]
    if (state, target) in _OPPORTUNITY_MOVES:
        state = target
    db.execute("UPDATE opportunities SET amount=?, state=? WHERE id=?", (money(amount), state, oid))


def ops_create_quotation(db: Db, party_id: int, description: str) -> dict[str, Any]:
    _get(db, "parties", "party", party_id)
    description = clean_text(description, "description", 200)
    cur = db.execute(  # the sale takes the customer's payment term, price list and invoice method (on_change_party)
        "INSERT INTO sales (number, party_id, description, state, invoice_state, shipment_state, payment_term_id, "
        "price_list_id, invoice_method) SELECT NULL, ?, ?, 'draft', 'none', 'none', payment_term_id, price_list_id, "
        "COALESCE(sale_invoice_method, 'order') FROM parties WHERE id=?",
        (party_id, description, party_id),
    )
    return {"sale_id": int(cur.lastrowid or 0), "state": "draft"}


INVOICE_METHODS = ("manual", "order", "fulfillment")
"""How a sale is invoiced (the real system's methods): ``order`` — one invoice for the whole order when it is
confirmed (the company's default); ``fulfillment`` — an invoice for what each shipment sends, when it is sent;
``manual`` — no invoice made by the system."""


def ops_set_invoice_method(db: Db, sale_id: int, method: str) -> dict[str, Any]:
    """Set a draft sale's invoice method; the real system's field is read-only once the sale left draft."""
    sale = _get(db, "sales", "sale", sale_id)
    if sale["state"] != "draft":
        raise ToolError(
            "invalid_state",
            f'You are not allowed to modify the field "Invoice Method" in record "{_sale_name(sale)}" of "Sale".',
            rule="sale_workflow",
        )
    db.execute("UPDATE sales SET invoice_method=? WHERE id=?", (method, sale_id))
    return {"sale_id": sale_id, "number": sale["number"], "state": "draft", "invoice_method": method}


def _draft_sale(db: Db, sale_id: int, action: str) -> dict[str, Any]:
    sale = _get(db, "sales", "sale", sale_id)
    if sale["state"] != "draft":
        raise ToolError(
            "invalid_state",
            f"sale {_sale_name(sale)} is {sale['state']}; {action} only a draft sale",
            rule="sale_workflow",
        )
    return sale


def ops_request_discount_approval(db: Db, sale_id: int, discount: Decimal, reason: str) -> dict[str, Any]:
    _draft_sale(db, sale_id, "discounts are approved for")
    reason = clean_text(reason, "reason", 500)
    check_approval_request(discount)
    cur = db.execute(
        "INSERT INTO approvals (sale_id, discount, reason) VALUES (?,?,?)", (sale_id, money(discount), reason)
    )
    return {"approval_id": int(cur.lastrowid or 0), "sale_id": sale_id, "discount": money(discount)}


def _best_approval(db: Db, sale_id: int) -> Decimal | None:
    rows = db.execute("SELECT discount FROM approvals WHERE sale_id=?", (sale_id,)).fetchall()
    return max((Decimal(r[0]) for r in rows), default=None)


def price_list_price(db: Db, price_list_id: int | None, product: dict[str, Any], quantity: int) -> Decimal:
    """A product's unit price for ``quantity`` on a price list, as the real system's price list computes it: the
    first line by sequence whose product (if any) is this one and whose quantity (if any) is at most ``quantity``
    gives the list price times its factor, rounded half-to-even to 4 decimals; no price list: the list price."""
    list_price = Decimal(product["list_price"])
    if price_list_id is None:
        return list_price
    row = db.one(
        "SELECT factor FROM price_list_lines WHERE price_list_id=? AND (product_id IS NULL OR product_id=?) "
        "AND (quantity IS NULL OR quantity<=?) ORDER BY sequence, id LIMIT 1",
        (price_list_id, product["id"], quantity),
    )
    if row is None:  # pragma: no cover - every price list of the world ends with a line matching anything
        raise RuntimeError(f"price list {price_list_id} has no line for product {product['id']}")
    return (list_price * Decimal(row["factor"])).quantize(PRICE_UNIT, rounding=ROUND_HALF_EVEN)


def ops_add_line(
    db: Db, sale_id: int, product_id: int, quantity: int, discount: Decimal | None = None
) -> dict[str, Any]:
    """Add a line priced as the real system prices it: its sale's price list price for the product and quantity
    (the list price without a price list); a ``discount`` given replaces that price with the list price less the
    discount (sale_discount's rate is always taken off the base price, the list price)."""
    sale = _get(db, "sales", "sale", sale_id)
    product = _get(db, "products", "product", product_id)
    check_quantity(quantity)
    if discount is not None:
        check_line_discount(discount, lambda: _best_approval(db, sale_id))
    if sale["state"] != "draft":  # the real system refuses the new line when it saves it
        raise ToolError(
            "invalid_state",
            f'You cannot add lines to sale "{_sale_name(sale)}" because it is no longer in a draft state.',
            rule="sale_workflow",
        )
    list_price = Decimal(product["list_price"])
    if discount is None:
        price = price_list_price(db, sale["price_list_id"], product, quantity)
    else:
        price = unit_price(list_price, discount)
    line_id = _draw_id(db, "sale_line")
    db.execute(
        "INSERT INTO sale_lines (id, sale_id, product_id, quantity, unit_price, discount) VALUES (?,?,?,?,?,?)",
        (line_id, sale_id, product_id, quantity, price_text(price), money(discount_read_back(list_price, price))),
    )
    untaxed, tax, total = sale_amounts(db, sale_id)
    return {
        "line_id": line_id,
        "unit_price": price_text(price),
        "untaxed_amount": untaxed,
        "tax_amount": tax,
        "total_amount": total,
    }


def ops_quote(db: Db, sale_id: int) -> dict[str, Any]:
    sale = _get(db, "sales", "sale", sale_id)
    if sale["state"] != "draft" or db.one("SELECT id FROM sale_lines WHERE sale_id=? LIMIT 1", (sale_id,)) is None:
        raise _refused_click("quote", _sale_name(sale), "Sale", "sale_workflow")  # a sale needs lines to be quoted
    if db.one("SELECT id FROM addresses WHERE party_id=?", (sale["party_id"],)) is None:
        raise ToolError(
            "validation_error",
            f'To get a quote for sale "{_sale_name(sale)}" you must enter an invoice address.',
            rule="quotation_address",
        )
    number = sale["number"] or _next(db, "sale")  # a re-opened quotation keeps its number
    db.execute("UPDATE sales SET state='quotation', number=? WHERE id=?", (number, sale_id))
    _process_opportunity(db, sale_id)
    total = sale_amounts(db, sale_id)[2]
    return {"sale_id": sale_id, "number": number, "state": "quotation", "total_amount": total}


def credit_amount(db: Db, party_id: int) -> Decimal:
    """What counts against a customer's credit limit, as the real system's credit-limit modules count it: their
    balance on the books plus, for every sale confirmed or processing, the untaxed value of what of each line no
    posted invoice carries yet (an order invoiced in one document: all its lines until that invoice is posted;
    invoiced on fulfillment: what each posted invoice of a shipment billed is off; returned lines, with negative
    quantities, do not count), summed unrounded per sale and rounded half-to-even to the cent as each sale is
    added."""
    total = party_balance(db, party_id)
    sales = db.all(
        "SELECT id, invoice_method FROM sales WHERE party_id=? AND state IN ('confirmed', 'processing') ORDER BY id",
        (party_id,),
    )
    for sale in sales:
        open_value = Decimal(0)
        for line in db.all(
            "SELECT l.quantity, l.unit_price, (SELECT COALESCE(SUM(m.quantity), 0) FROM shipment_moves m "
            "JOIN invoices i ON i.id = m.invoice_id WHERE m.line_id = l.id AND i.number IS NOT NULL) AS posted "
            "FROM sale_lines l WHERE l.sale_id=? ORDER BY l.id",
            (sale["id"],),
        ):
            left = int(line["quantity"]) - int(line["posted"])
            if left > 0:
                open_value += left * Decimal(line["unit_price"])
        total = Decimal(money(total + open_value))
    return total


def check_credit_limit(db: Db, sale: dict[str, Any], untaxed: Decimal) -> None:
    """Tryton's refusal to confirm a sale whose untaxed amount would take its customer past their credit limit."""
    party = _get(db, "parties", "party", sale["party_id"])
    if untaxed <= 0 or party["credit_limit"] is None:
        return
    limit = Decimal(party["credit_limit"])
    if credit_amount(db, party["id"]) + untaxed - limit > 0:
        raise ToolError(
            "policy_refused",
            f'The party "{party["name"]}" will exceed their {currency_text(limit)} credit limit by '
            f"{currency_text(untaxed)}.",
            rule="credit_limit",
        )


def ops_confirm(db: Db, sale_id: int) -> dict[str, Any]:
    sale = _get(db, "sales", "sale", sale_id)
    if sale["state"] != "quotation":
        raise _refused_click("confirm", _sale_name(sale), "Sale", "sale_workflow")
    lines = _priced_lines(db, sale_id)
    untaxed, tax, total = amounts(lines, tax_rounding(db))
    check_credit_limit(db, sale, Decimal(untaxed))
    if lines:
        invoice = None
        if sale["invoice_method"] == "order":  # one invoice for the order (a credit note, negative, for a return)
            invoice = db.execute(
                "INSERT INTO invoices (sale_id, number, state, untaxed, tax, total, paid) "
                "VALUES (?, NULL, 'draft', ?, ?, ?, '0.00')",
                (sale_id, untaxed, tax, total),
            ).lastrowid
        if any(q > 0 for q, _u in lines):
            shipment = db.execute("INSERT INTO shipments (sale_id, state) VALUES (?, 'waiting')", (sale_id,)).lastrowid
            db.execute(  # an order's invoice bills the moves of its lines
                "INSERT INTO shipment_moves (shipment_id, sale_id, line_id, product_id, quantity, invoice_id) "
                "SELECT ?, sale_id, id, product_id, quantity, ? FROM sale_lines WHERE sale_id=? AND quantity > 0 "
                "ORDER BY id",
                (shipment, invoice, sale_id),
            )
        if any(q < 0 for q, _u in lines):  # returned lines come back on a customer return shipment
            back = db.execute("INSERT INTO return_shipments (sale_id, state) VALUES (?, 'draft')", (sale_id,)).lastrowid
            db.execute(
                "INSERT INTO return_moves (shipment_id, sale_id, line_id, product_id, quantity) "
                "SELECT ?, sale_id, id, product_id, -quantity FROM sale_lines WHERE sale_id=? AND quantity < 0 "
                "ORDER BY id",
                (back, sale_id),
            )
        db.execute(
            "UPDATE sales SET state='processing', invoice_state=?, shipment_state='waiting' WHERE id=?",
            ("pending" if invoice is not None else "none", sale_id),
        )
        state = "processing"
    else:
        db.execute("UPDATE sales SET state='done' WHERE id=?", (sale_id,))
        state = "done"
    _process_opportunity(db, sale_id)
    return {"sale_id": sale_id, "number": sale["number"], "state": state, "total_amount": total}


RETURNABLE = ("processing", "done")
"""The states of a sale the desk returns (the real system's return wizard copies a sale in any state)."""


def return_refusal(name: str, state: str, invoice_method: str) -> ToolError | None:
    """The desk's refusal to return a sale that is not processing or done, or that is not invoiced on order (its
    return would be credited as its goods come back: accounts handle those). Shared by the mirror and the twin."""
    if state not in RETURNABLE:
        return ToolError(
            "invalid_state", f"sale {name} is {state}; only a processing or done sale is returned", rule="sale_return"
        )
    if invoice_method != "order":
        return ToolError(
            "policy_refused",
            f"sale {name} is invoiced on {invoice_method}; only a sale invoiced on order is returned at the desk",
            rule="sale_return",
        )
    return None


def ops_return(db: Db, sale_id: int) -> dict[str, Any]:
    """Return a sale as the real system's return wizard does: a draft copy of it (its customer, description,
    payment term and price list) whose lines are the sale's with their quantities negated, at the same prices."""
    sale = _get(db, "sales", "sale", sale_id)
    refusal = return_refusal(_sale_name(sale), sale["state"], sale["invoice_method"])
    if refusal is not None:
        raise refusal
    cur = db.execute(
        "INSERT INTO sales (number, party_id, description, state, invoice_state, shipment_state, payment_term_id, "
        "price_list_id, return_of) SELECT NULL, party_id, description, 'draft', 'none', 'none', payment_term_id, "
        "price_list_id, id FROM sales WHERE id=?",
        (sale_id,),
    )
    new = int(cur.lastrowid or 0)
    for line in db.all(
        "SELECT product_id, quantity, unit_price, discount FROM sale_lines WHERE sale_id=? ORDER BY id", (sale_id,)
    ):
        db.execute(
            "INSERT INTO sale_lines (id, sale_id, product_id, quantity, unit_price, discount) VALUES (?,?,?,?,?,?)",
            (
                _draw_id(db, "sale_line"),
                new,
                line["product_id"],
                -line["quantity"],
                line["unit_price"],
                line["discount"],
            ),
        )
    untaxed, tax, total = sale_amounts(db, new)
    return {
        "sale_id": new,
        "return_of": sale_id,
        "state": "draft",
        "untaxed_amount": untaxed,
        "tax_amount": tax,
        "total_amount": total,
    }


def ops_receive_return(db: Db, shipment_id: int) -> dict[str, Any]:
    """Receive a draft customer return shipment and put it away, as the real system's receive then done: its
    products are back on hand and its sale counts them as shipped back."""
    shipment = _get(db, "return_shipments", "return shipment", shipment_id)
    if shipment["state"] != "draft":
        raise _refused_click("receive", str(shipment_id), "Stock Shipment Out Return", "sale_workflow")
    for m in db.all("SELECT product_id, quantity FROM return_moves WHERE shipment_id=? ORDER BY id", (shipment_id,)):
        db.execute("UPDATE products SET on_hand=on_hand+? WHERE id=?", (m["quantity"], m["product_id"]))
    db.execute("UPDATE return_shipments SET state='done' WHERE id=?", (shipment_id,))
    sale_id = shipment["sale_id"]
    db.execute("UPDATE sales SET shipment_state=? WHERE id=?", (shipment_state(db, sale_id), sale_id))
    _maybe_done(db, sale_id)
    return {"shipment_id": shipment_id, "state": "done", "sale_id": sale_id}


def ops_cancel(db: Db, sale_id: int) -> dict[str, Any]:
    sale = _get(db, "sales", "sale", sale_id)
    if sale["state"] not in ("draft", "quotation"):
        raise _refused_click("cancel", _sale_name(sale), "Sale", "sale_workflow")
    frozen = " ".join(sale_amounts(db, sale_id))
    db.execute("UPDATE sales SET state='cancelled', amounts_cache=? WHERE id=?", (frozen, sale_id))
    _process_opportunity(db, sale_id)
    return {"sale_id": sale_id, "number": sale["number"], "state": "cancelled"}


def ops_reopen(db: Db, sale_id: int) -> dict[str, Any]:
    """Reset a quotation or a cancelled sale to draft (its number, if any, is kept)."""
    sale = _get(db, "sales", "sale", sale_id)
    if sale["state"] not in ("quotation", "cancelled"):
        raise _refused_click("draft", _sale_name(sale), "Sale", "sale_workflow")
    db.execute("UPDATE sales SET state='draft', amounts_cache=NULL WHERE id=?", (sale_id,))
    return {"sale_id": sale_id, "number": sale["number"], "state": "draft"}


def ops_remove_line(db: Db, sale_id: int, line_id: int) -> dict[str, Any]:
    """Delete a line of a draft or cancelled sale."""
    sale = _get(db, "sales", "sale", sale_id)
    line = db.one("SELECT * FROM sale_lines WHERE id=? AND sale_id=?", (line_id, sale_id))
    if line is None:
        raise ToolError("not_found", f"no sale line {line_id} on sale {sale_id}")
    if sale["state"] not in ("draft", "cancelled"):
        product = _get(db, "products", "product", line["product_id"])
        name = f"{line['quantity']}\u00a0u [{product['code']}] {product['name']} @ {_sale_name(sale)}"
        raise ToolError(
            "invalid_state",
            f'To delete line "{name}" you must cancel or reset to draft sale "{_sale_name(sale)}".',
            rule="sale_workflow",
        )
    db.execute("DELETE FROM sale_lines WHERE id=?", (line_id,))
    untaxed, tax, total = sale_amounts(db, sale["id"])
    return {"sale_id": sale["id"], "untaxed_amount": untaxed, "tax_amount": tax, "total_amount": total}


def _maybe_done(db: Db, sale_id: int) -> None:
    """A processing sale whose invoice is paid and whose shipment is sent is done."""
    db.execute(
        "UPDATE sales SET state='done' WHERE id=? AND state='processing' AND invoice_state='paid' "
        "AND shipment_state='sent'",
        (sale_id,),
    )
    _process_opportunity(db, sale_id)


def ops_ship(db: Db, shipment_id: int, partial: bool = False) -> dict[str, Any]:
    """Reserve a waiting shipment's moves from stock and send it, as the real system's assign, pick, pack, done.

    Stock is reserved move by move in order (the lines' order), each taking
    what is left of its product. Reserved in full, everything is sent. Short,
    the shipment is sent only when ``partial``: with what could be reserved
    (a move reserving nothing is dropped), and a backorder shipment (``waiting``)
    takes what is left of each line; the sale is then ``partially shipped``.
    Short and not ``partial``, or with nothing reservable at all, nothing
    changes (the desk's all-or-nothing rule). A sale invoiced on fulfillment
    then gets a draft invoice for what was sent (:func:`_invoice_sent`).
    """
    shipment = _get(db, "shipments", "shipment", shipment_id)
    if shipment["state"] != "waiting":  # shipments are numbered in the order they are made, as their ids
        raise _refused_click("assign_wizard", str(shipment_id), "Stock Shipment Out", "sale_workflow")
    moves = db.all(
        "SELECT m.id, m.line_id, m.product_id, m.quantity, m.invoice_id, p.on_hand, p.name FROM shipment_moves m "
        "JOIN products p ON p.id = m.product_id WHERE m.shipment_id=? ORDER BY m.line_id, m.id",
        (shipment_id,),
    )
    left = {m["product_id"]: m["on_hand"] for m in moves}
    reserved = []
    for m in moves:
        take = min(m["quantity"], left[m["product_id"]])
        left[m["product_id"]] -= take
        reserved.append(take)
    if any(r < m["quantity"] for r, m in zip(reserved, moves, strict=True)) and (not partial or not any(reserved)):
        raise ToolError("validation_error", stock_shortage(shipment_id, moves, partial), rule="stock_availability")
    backorder = None
    for r, m in zip(reserved, moves, strict=True):
        if r < m["quantity"]:
            if backorder is None:
                backorder = int(
                    db.execute(
                        "INSERT INTO shipments (sale_id, state) VALUES (?, 'waiting')", (shipment["sale_id"],)
                    ).lastrowid
                    or 0
                )
            db.execute(  # an order's invoice bills the backorder's move too
                "INSERT INTO shipment_moves (shipment_id, sale_id, line_id, product_id, quantity, invoice_id) "
                "VALUES (?,?,?,?,?,?)",
                (backorder, shipment["sale_id"], m["line_id"], m["product_id"], m["quantity"] - r, m["invoice_id"]),
            )
        if r:
            db.execute("UPDATE shipment_moves SET quantity=? WHERE id=?", (r, m["id"]))
            db.execute("UPDATE products SET on_hand=on_hand-? WHERE id=?", (r, m["product_id"]))
        else:
            db.execute("DELETE FROM shipment_moves WHERE id=?", (m["id"],))
    db.execute("UPDATE shipments SET state='done' WHERE id=?", (shipment_id,))
    db.execute(
        "UPDATE sales SET shipment_state=? WHERE id=?", (shipment_state(db, shipment["sale_id"]), shipment["sale_id"])
    )
    _invoice_sent(db, shipment["sale_id"])
    _maybe_done(db, shipment["sale_id"])
    out: dict[str, Any] = {"shipment_id": shipment_id, "state": "done"}
    if partial:
        out["backorder_id"] = backorder
    return out


def shipment_state(db: Db, sale_id: int) -> str:
    """A sale's shipment state from its lines' moves, as the real system derives it: ``sent`` once every line's
    quantity has moved (shipped out, or received back for a returned line), ``partially shipped`` while only some
    has, ``waiting`` before."""
    done = dict(
        db.execute(
            "SELECT m.line_id, SUM(m.quantity) FROM shipment_moves m JOIN shipments sh ON sh.id = m.shipment_id "
            "WHERE m.sale_id=? AND sh.state='done' GROUP BY m.line_id UNION ALL "
            "SELECT m.line_id, SUM(m.quantity) FROM return_moves m JOIN return_shipments r ON r.id = m.shipment_id "
            "WHERE m.sale_id=? AND r.state='done' GROUP BY m.line_id",
            (sale_id, sale_id),
        ).fetchall()
    )
    lines = db.execute("SELECT id, quantity FROM sale_lines WHERE sale_id=?", (sale_id,)).fetchall()
    moved = [done.get(i, 0) / abs(q) for i, q in lines]
    if all(p >= 1 for p in moved):
        return "sent"
    return "partially shipped" if any(moved) else "waiting"


def _invoice_sent(db: Db, sale_id: int) -> None:
    """Invoice what a sale invoiced on fulfillment has sent and no invoice bills yet, as the real system's sale
    processing does once a shipment is done: a new draft invoice (one per processing, never one reused) with a
    line per sale line for the quantity its sent moves add, billing those moves; its amounts are the lines'
    (the same tax rounding as an order's invoice). The sale's invoice state follows all its invoices."""
    sale = _get(db, "sales", "sale", sale_id)
    if sale["invoice_method"] != "fulfillment":
        return
    moves = db.all(
        "SELECT m.id, m.line_id, m.quantity, l.unit_price FROM shipment_moves m JOIN shipments s "
        "ON s.id = m.shipment_id JOIN sale_lines l ON l.id = m.line_id "
        "WHERE m.sale_id=? AND s.state='done' AND m.invoice_id IS NULL ORDER BY m.line_id, m.id",
        (sale_id,),
    )
    if not moves:
        return
    per_line: dict[int, list[Any]] = {}
    for m in moves:
        per_line.setdefault(m["line_id"], [0, m["unit_price"]])[0] += m["quantity"]
    untaxed, tax, total = amounts([(q, u) for q, u in per_line.values()], tax_rounding(db))
    invoice = db.execute(
        "INSERT INTO invoices (sale_id, number, state, untaxed, tax, total, paid) VALUES (?, NULL, 'draft', ?, ?, ?, "
        "'0.00')",
        (sale_id, untaxed, tax, total),
    ).lastrowid
    for m in moves:
        db.execute("UPDATE shipment_moves SET invoice_id=? WHERE id=?", (invoice, m["id"]))
    db.execute("UPDATE sales SET invoice_state=? WHERE id=?", (sale_invoice_state(db, sale_id), sale_id))


def stock_shortage(shipment_id: int, moves: list[dict[str, Any]], partial: bool) -> str:
    """The refusal of a shipment that cannot go (shared by the mirror and the twin's adapter)."""
    need: dict[str, int] = {}
    on_hand: dict[str, int] = {}
    for m in moves:
        need[m["name"]] = need.get(m["name"], 0) + int(m["quantity"])
        on_hand[m["name"]] = int(m["on_hand"])
    short = ", ".join(f"{n} ({on_hand[n]} of {q})" for n, q in need.items() if q > on_hand[n])
    if partial:
        return f"nothing in stock to ship shipment {shipment_id}: {short}"
    return f"not enough stock to ship shipment {shipment_id}: {short}"


def sale_invoice_state(db: Db, sale_id: int) -> str:
    """A sale's invoice state from its invoices (credit notes are not the sale's), as the real system derives it:
    ``paid`` once every invoice is paid or refunded (cancelled by a credit note), ``partially paid`` while only
    some are, ``awaiting payment`` once one is posted, ``pending`` while all are drafts, ``none`` without any."""
    rows = db.all("SELECT state, number FROM invoices WHERE sale_id=? AND credit_of IS NULL", (sale_id,))
    if not rows:
        return "none"
    settled = [r["state"] == "paid" or (r["state"] == "cancelled" and r["number"] is not None) for r in rows]
    if all(settled):
        return "paid"
    if any(settled):
        return "partially paid"
    if any(r["state"] == "posted" for r in rows):
        return "awaiting payment"
    return "pending"


def _invoice_settled(db: Db, sale_id: int) -> None:
    """Bring a sale up to date after one of its invoices moved (done once paid and sent)."""
    db.execute("UPDATE sales SET invoice_state=? WHERE id=?", (sale_invoice_state(db, sale_id), sale_id))
    _maybe_done(db, sale_id)


def amount_due(inv: dict[str, Any]) -> Decimal:
    """What is still to pay on an invoice: its total less payments while it is a draft or posted, else nothing
    (a credit note's is negative: what the company owes the customer)."""
    if inv["state"] not in ("draft", "posted"):
        return Decimal(0)
    return Decimal(inv["total"]) - Decimal(inv["paid"]) - Decimal(inv["writeoff"])


def party_balance(db: Db, party_id: int) -> Decimal:
    """What a customer owes on the books (negative: the customer's credit): every posted document's total less
    what was paid or written off on it, less what was received beyond it."""
    rows = db.all(
        "SELECT i.total, i.paid, i.writeoff, i.overpaid FROM invoices i JOIN sales s ON s.id = i.sale_id "
        "WHERE s.party_id=? AND i.number IS NOT NULL",
        (party_id,),
    )
    return sum(
        (Decimal(r["total"]) - Decimal(r["paid"]) - Decimal(r["writeoff"]) - Decimal(r["overpaid"]) for r in rows),
        Decimal(0),
    )


def ops_post(db: Db, invoice_id: int) -> dict[str, Any]:
    inv = _get(db, "invoices", "invoice", invoice_id)
    if inv["state"] != "draft":
        raise _refused_click("post", _invoice_name(inv), "Account Invoice", "sale_workflow")
    number = _next(db, "invoice")  # invoices and credit notes share one sequence
    dated, due = _dated(db, inv["sale_id"])
    db.execute(
        "UPDATE invoices SET state='posted', number=?, invoice_date=?, due_date=? WHERE id=?",
        (number, dated, due, invoice_id),
    )
    if inv["credit_of"] is None:
        _invoice_settled(db, inv["sale_id"])
    return {"invoice_id": invoice_id, "number": number, "state": "posted", "total_amount": inv["total"]}


SETTLEMENTS = ("partial", "writeoff", "overpayment")
"""How a payment that is not the exact amount due settles an invoice (the real system's pay wizard asks)."""


def ops_pay(db: Db, invoice_id: int, amount: Decimal, settle: str = "partial") -> dict[str, Any]:
    """Record a payment through the real system's pay wizard (see ``pay_invoice``).

    The exact amount due pays the invoice whatever ``settle`` says. Less than
    due: ``partial`` leaves the rest due, ``writeoff`` writes it off (the desk's
    limit) and ``overpayment`` is refused (the remainder would need a write-off
    method). More than due: ``partial`` is refused, ``overpayment`` leaves the
    excess on the customer's account as credit, ``writeoff`` writes the excess
    off (a negative write-off, within the desk's limit).
    """
    inv = _get(db, "invoices", "invoice", invoice_id)
    check_payment_amount(amount)
    name = _invoice_name(inv)
    if inv["state"] != "posted":
        raise _refused_click("pay", name, "Account Invoice", "sale_workflow")
    if is_credit_note(inv):
        raise credit_note_paid(name)
    due = amount_due(inv)
    if settle == "writeoff" and amount != due:
        refusal = writeoff_refusal(name, due - amount)
        if refusal is not None:
            raise refusal
    if amount > due and settle == "partial":
        raise ToolError(
            "policy_refused",
            f'You cannot add a partial payment on invoice "{name}" with an amount greater than the '
            f'amount to pay "{currency_text(due)}".',
            rule="payment_limit",
        )
    if amount < due and settle == "overpayment":
        raise ToolError(
            "validation_error",
            f'To reconcile lines with "{currency_text(due - amount)}" write-off, you must select a write-off method.',
            rule="payment_limit",
        )
    paid = Decimal(inv["paid"]) + min(amount, due)
    overpaid = Decimal(inv["overpaid"]) + max(amount - due, Decimal(0))
    writeoff = due - amount if settle == "writeoff" else Decimal(0)
    state = "posted" if amount < due and settle == "partial" else "paid"
    db.execute(
        "UPDATE invoices SET paid=?, writeoff=?, overpaid=?, state=? WHERE id=?",
        (money(paid), money(writeoff), money(overpaid), state, invoice_id),
    )
    if state == "paid":
        _invoice_settled(db, inv["sale_id"])
    party = _get(db, "sales", "sale", inv["sale_id"])["party_id"]
    return {
        "invoice_id": invoice_id,
        "state": state,
        "amount_due": money(due - amount) if state == "posted" else "0.00",
        "writeoff": money(writeoff),
        "customer_balance": money(party_balance(db, party)),
    }


def credit_note_paid(name: str) -> ToolError:
    """The desk's refusal to pay a credit note (refunds are not paid at the desk)."""
    return ToolError(
        "policy_refused",
        f'"{name}" is a credit note: the desk records customer payments, not refunds',
        rule="credit_note",
    )


def credit_refusal(inv_name: str, state: str, is_credit_note: bool) -> ToolError | None:
    """The desk's refusal to credit a draft or cancelled invoice, or a credit note."""
    if is_credit_note:
        return ToolError(
            "invalid_state", f'"{inv_name}" is a credit note; only an invoice is credited', rule="credit_note"
        )
    if state not in ("posted", "paid"):
        return ToolError(
            "invalid_state",
            f'invoice "{inv_name}" is {state}; only a posted or paid invoice is credited',
            rule="credit_note",
        )
    return None


def ops_credit(db: Db, invoice_id: int) -> dict[str, Any]:
    """Credit an invoice through the real system's credit wizard, with a refund where the wizard offers one.

    The credit note negates the invoice (same lines, negative quantities). A
    posted invoice nothing was paid on is refunded: the credit note is posted
    (numbered from the invoice sequence) and settles it, the invoice is
    cancelled and counts as settled for its sale. Otherwise (paid, or partly
    paid) the credit note is a draft, to be posted with ``post_invoice``.
    """
    inv = _get(db, "invoices", "invoice", invoice_id)
    refusal = credit_refusal(_invoice_name(inv), inv["state"], is_credit_note(inv))
    if refusal is not None:
        raise refusal
    refund = inv["state"] == "posted" and Decimal(inv["paid"]) == 0
    number = _next(db, "invoice") if refund else None
    negated = [money(-Decimal(inv[k])) for k in ("untaxed", "tax", "total")]
    dated, due = _dated(db, inv["sale_id"]) if refund else (None, None)
    cur = db.execute(
        "INSERT INTO invoices (sale_id, number, state, untaxed, tax, total, paid, credit_of, invoice_date, due_date) "
        "VALUES (?, ?, ?, ?, ?, ?, '0.00', ?, ?, ?)",
        (inv["sale_id"], number, "paid" if refund else "draft", *negated, invoice_id, dated, due),
    )
    if refund:
        db.execute("UPDATE invoices SET state='cancelled' WHERE id=?", (invoice_id,))
        _invoice_settled(db, inv["sale_id"])
    return {
        "invoice_id": invoice_id,
        "invoice_state": "cancelled" if refund else inv["state"],
        "credit_note_id": int(cur.lastrowid or 0),
        "number": number,
        "state": "paid" if refund else "draft",
        "total_amount": negated[2],
    }


# -- read tools -------------------------------------------------------------------


@tool("read")
def get_policy(ctx: ToolContext) -> dict[str, Any]:
    """Read the sales desk policy that governs every action."""
    return {"policy": ctx.session.world.policy}


@tool("read")
def search_parties(ctx: ToolContext, query: str) -> dict[str, Any]:
    """Find customers whose name or code contains the query (at most 10).

    Args:
        query: Part of a customer's name or code.
    """
    q = like_pattern(search_query(query))
    rows = ctx.all(
        "SELECT id, code, name FROM parties WHERE role='customer' AND (name LIKE ? ESCAPE '\\' "
        "OR code LIKE ? ESCAPE '\\') ORDER BY id LIMIT 10",
        (q, q),
    )
    return {"parties": rows}


@tool("read")
def get_party(ctx: ToolContext, party_id: PartyId) -> dict[str, Any]:
    """Open a customer: payment term, credit limit, sale price list, invoice method of their new sales (null:
    the company's, ``order``), address, contact mechanisms, leads, sales, balance (what they owe; negative:
    credit) and credit amount (the balance plus confirmed orders not yet invoiced: what counts against the credit
    limit).

    Args:
        party_id: The party's id.
    """
    party = _get(ctx, "parties", "party", party_id)
    term = ctx.one("SELECT name FROM payment_terms WHERE id=?", (party["payment_term_id"],))
    address = ctx.one("SELECT street, city, postal_code FROM addresses WHERE party_id=? ORDER BY id", (party_id,))
    contacts = ctx.all("SELECT id, type, value FROM contacts WHERE party_id=? ORDER BY id", (party_id,))
    opps = ctx.all("SELECT id, number, state FROM opportunities WHERE party_id=? ORDER BY id", (party_id,))
    sales = ctx.all("SELECT id, number, state FROM sales WHERE party_id=? ORDER BY id", (party_id,))
    ctx.show(f"party:{party_id}", f"party {party_id}: {party['name']}")
    return {
        "party": {
            "id": party["id"],
            "code": party["code"],
            "name": party["name"],
            "payment_term_id": party["payment_term_id"],
            "payment_term": term["name"] if term else None,
            "credit_limit": party["credit_limit"],
            "price_list_id": party["price_list_id"],
            "price_list": _price_list_name(ctx, party["price_list_id"]),
            "sale_invoice_method": party["sale_invoice_method"],
        },
        "address": address,
        "contacts": contacts,
        "opportunities": opps,
        "sales": sales,
        "balance": money(party_balance(ctx, party_id)),
        "credit_amount": money(credit_amount(ctx, party_id)),
    }


def _price_list_name(db: Db, price_list_id: int | None) -> str | None:
    row = db.one("SELECT name FROM price_lists WHERE id=?", (price_list_id,)) if price_list_id is not None else None
    return str(row["name"]) if row is not None else None


@tool("read")
def quote_price(ctx: ToolContext, party_id: PartyId, product_id: ProductId, quantity: int) -> dict[str, Any]:
    """The unit price a customer's new sale line gets for a product and quantity, from their price list.

    Returns the list price, the customer's price list (null: none, they buy at
    list prices), the unit price it gives for that quantity and the discount
    that price is off the list price, in percent.

    Args:
        party_id: The customer's party id.
        product_id: The product's id.
        quantity: How many units (a whole number, at least 1).
    """
    party = _get(ctx, "parties", "party", party_id)
    product = _get(ctx, "products", "product", product_id)
    check_quantity(quantity)
    list_price = Decimal(product["list_price"])
    price = price_list_price(ctx, party["price_list_id"], product, quantity)
    return {
        "party_id": party_id,
        "product_id": product_id,
        "quantity": quantity,
        "price_list_id": party["price_list_id"],
        "price_list": _price_list_name(ctx, party["price_list_id"]),
        "list_price": price_text(list_price),
        "unit_price": price_text(price),
        "discount": money(discount_read_back(list_price, price)),
    }


@tool("read")
def search_products(ctx: ToolContext, query: str) -> dict[str, Any]:
    """Find products whose name or code contains the query, with price and stock (at most 10).

    Args:
        query: Part of a product name or code.
    """
    q = like_pattern(search_query(query))
    rows = ctx.all(
        "SELECT id, code, name, list_price, on_hand FROM products WHERE name LIKE ? ESCAPE '\\' "
        "OR code LIKE ? ESCAPE '\\' ORDER BY id LIMIT 10",
        (q, q),
    )
    return {"products": rows}


@tool("read")
def get_product(ctx: ToolContext, product_id: ProductId) -> dict[str, Any]:
    """Open a product: list price and quantity on hand in the warehouse.

    Args:
        product_id: The product's id.
    """
    p = _get(ctx, "products", "product", product_id)
    return {"product": {k: p[k] for k in ("id", "code", "name", "list_price", "on_hand")}}


@tool("read")
def get_opportunity(ctx: ToolContext, opportunity_id: OpportunityId) -> dict[str, Any]:
    """Open a lead or opportunity.

    Args:
        opportunity_id: The opportunity's id.
    """
    o = _get(ctx, "opportunities", "opportunity", opportunity_id)
    return {"opportunity": o}


@tool("read")
def get_sale(ctx: ToolContext, sale_id: SaleId) -> dict[str, Any]:
    """Open a sale with its invoice method, lines, amounts, approvals, shipments and all its invoices.

    ``invoice_method`` ``order``: confirming makes one invoice for the whole
    order; ``fulfillment``: each shipment sent makes an invoice for what it
    sent (a sale shipped in two parts has two invoices); ``manual``: none.

    Args:
        sale_id: The sale's id.
    """
    sale = _get(ctx, "sales", "sale", sale_id)
    sale.pop("amounts_cache")
    lines = ctx.all(
        "SELECT id, product_id, quantity, unit_price, discount FROM sale_lines WHERE sale_id=? ORDER BY id",
        (sale_id,),
    )
    untaxed, tax, total = sale_amounts(ctx, sale_id)
    return {
        "sale": {**sale, "untaxed_amount": untaxed, "tax_amount": tax, "total_amount": total},
        "lines": lines,
        "approvals": ctx.all("SELECT id, discount, reason FROM approvals WHERE sale_id=? ORDER BY id", (sale_id,)),
        "shipments": _shipments(ctx, sale_id),
        "returns": _returns(ctx, sale_id),
        "invoices": ctx.all(
            "SELECT id, number, state, total FROM invoices WHERE sale_id=? AND credit_of IS NULL ORDER BY id",
            (sale_id,),
        ),
        "credit_notes": ctx.all(
            "SELECT id, number, state, total, credit_of AS invoice_id FROM invoices "
            "WHERE sale_id=? AND credit_of IS NOT NULL ORDER BY id",
            (sale_id,),
        ),
    }


def _returns(db: Db, sale_id: int) -> list[dict[str, Any]]:
    """A return sale's customer return shipments with what each takes back (moves by product and quantity)."""
    out = []
    for sh in db.all("SELECT id, state FROM return_shipments WHERE sale_id=? ORDER BY id", (sale_id,)):
        moves = db.all(
            "SELECT product_id, quantity FROM return_moves WHERE shipment_id=? ORDER BY product_id, quantity",
            (sh["id"],),
        )
        out.append({**sh, "moves": moves})
    return out


def _shipments(db: Db, sale_id: int) -> list[dict[str, Any]]:
    """A sale's shipments with what each carries (moves by product and quantity)."""
    out = []
    for sh in db.all("SELECT id, state FROM shipments WHERE sale_id=? ORDER BY id", (sale_id,)):
        moves = db.all(
            "SELECT product_id, quantity FROM shipment_moves WHERE shipment_id=? ORDER BY product_id, quantity",
            (sh["id"],),
        )
        out.append({**sh, "moves": moves})
    return out


@tool("read")
def list_sales(ctx: ToolContext, party_id: PartyId) -> dict[str, Any]:
    """List a customer's sales, newest first.

    Args:
        party_id: The party's id.
    """
    _get(ctx, "parties", "party", party_id)
    rows = ctx.all("SELECT id, number, description, state FROM sales WHERE party_id=? ORDER BY id DESC", (party_id,))
    return {"sales": rows}


@tool("read")
def get_invoice(ctx: ToolContext, invoice_id: InvoiceId) -> dict[str, Any]:
    """Open an invoice or credit note: number, state, dates, amounts, paid, written off, still due, credit notes,
    its sale's invoice method and the shipments it bills.

    Once posted it has its ``invoice_date`` and its ``due_date`` (the invoice
    date plus its ``payment_term``); it is ``overdue`` while something is still
    due after its due date. A credit note has ``type`` ``credit_note``,
    negative amounts and the invoice it credits in ``credit_of``; an invoice
    lists its credit notes.

    Args:
        invoice_id: The invoice's id.
    """
    inv = _get(ctx, "invoices", "invoice", invoice_id)
    notes = ctx.all("SELECT id, number, state, total FROM invoices WHERE credit_of=? ORDER BY id", (invoice_id,))
    keys = ("id", "sale_id", "number", "state", "untaxed", "tax", "total", "paid", "writeoff")
    term = ctx.one(
        "SELECT t.name FROM sales s JOIN payment_terms t ON t.id = s.payment_term_id WHERE s.id=?", (inv["sale_id"],)
    )
    method = ctx.one("SELECT invoice_method FROM sales WHERE id=?", (inv["sale_id"],))
    billed = ctx.all(  # a credit note's lines bill the moves of the invoice it credits
        "SELECT DISTINCT shipment_id FROM shipment_moves WHERE invoice_id=? ORDER BY shipment_id",
        (inv["credit_of"] or invoice_id,),
    )
    due = amount_due(inv)
    return {
        "invoice": {
            **{k: inv[k] for k in keys},
            "payment_term": term["name"] if term else None,
            "invoice_date": inv["invoice_date"],
            "due_date": inv["due_date"],
            "amount_due": money(due),
            "overdue": is_overdue(inv, business_date(ctx)),
            "type": "credit_note" if is_credit_note(inv) else "invoice",
            "credit_of": inv["credit_of"],
            "credit_notes": notes,
            "invoice_method": method["invoice_method"] if method else None,
            "shipments": [r["shipment_id"] for r in billed],
        }
    }


def is_credit_note(inv: dict[str, Any]) -> bool:
    """A credit note: one crediting an invoice, or a return sale's document (negative, as the real system names a
    customer invoice whose total is below zero)."""
    return inv["credit_of"] is not None or Decimal(inv["total"]) < 0


def is_overdue(inv: dict[str, Any], today: str) -> bool:
    """Whether an invoice (not a credit note) is overdue: posted, something still due, its due date past."""
    return (
        inv["credit_of"] is None
        and inv["state"] == "posted"
        and inv["due_date"] is not None
        and inv["due_date"] < today
        and amount_due(inv) > 0
    )


@tool("read")
def list_overdue_invoices(ctx: ToolContext, party_id: PartyId) -> dict[str, Any]:
    """List a customer's overdue invoices (posted, still due after their due date), oldest due first.

    Each shows its number, sale, invoice and due dates, the amount still due
    and how many days it is overdue; ``total_overdue`` sums what is due on
    them, as of ``today``.

    Args:
        party_id: The party's id.
    """
    _get(ctx, "parties", "party", party_id)
    today = business_date(ctx)
    rows = ctx.all(
        "SELECT i.* FROM sales s JOIN invoices i ON i.sale_id = s.id WHERE s.party_id=? AND i.state='posted' "
        "AND i.credit_of IS NULL AND i.due_date < ? ORDER BY i.due_date, i.id",
        (party_id, today),
    )
    day = date.fromisoformat(today)
    out = [
        {
            "id": r["id"],
            "number": r["number"],
            "sale_id": r["sale_id"],
            "invoice_date": r["invoice_date"],
            "due_date": r["due_date"],
            "amount_due": money(amount_due(r)),
            "days_overdue": (day - date.fromisoformat(r["due_date"])).days,
        }
        for r in rows
        if is_overdue(r, today)
    ]
    total = sum((Decimal(r["amount_due"]) for r in out), Decimal(0))
    return {"today": today, "invoices": out, "total_overdue": money(total)}


# -- write tools ------------------------------------------------------------------


@tool("write")
def add_contact(ctx: ToolContext, party_id: PartyId, kind: Literal["email", "phone"], value: str) -> dict[str, Any]:
    """Add a contact mechanism (email or phone) to a customer.

    Args:
        party_id: The party's id.
        kind: email or phone.
        value: The email address or phone number.
    """
    return {"contact_id": ops_add_contact(ctx, party_id, kind, value)}


@tool("write")
def create_lead(ctx: ToolContext, party_id: PartyId, description: Prose, amount: Decimal) -> dict[str, Any]:
    """Record a new lead for a customer, with its estimated revenue.

    Args:
        party_id: The party's id.
        description: What the customer is interested in.
        amount: Estimated revenue in dollars (zero or more).
    """
    return ops_create_lead(ctx, party_id, description, amount)


@tool("write")
def qualify_lead(ctx: ToolContext, opportunity_id: OpportunityId) -> dict[str, Any]:
    """Qualify a lead: it becomes an opportunity.

    Args:
        opportunity_id: The lead's id.
    """
    return ops_move_opportunity(ctx, opportunity_id, "opportunity")


@tool("write")
def mark_lost(ctx: ToolContext, opportunity_id: OpportunityId, reason: Prose) -> dict[str, Any]:
    """Mark a lead or opportunity as lost, recording why.

    Args:
        opportunity_id: The lead or opportunity's id.
        reason: Why it was lost, as the customer said.
    """
    return ops_move_opportunity(ctx, opportunity_id, "lost", reason)


@tool("write")
def convert_opportunity(ctx: ToolContext, opportunity_id: OpportunityId) -> dict[str, Any]:
    """Convert a qualified opportunity into a draft sale (quotation) for its customer.

    The sale takes the opportunity's description; the opportunity becomes
    ``converted``, then ``won`` once the sale is confirmed (``lost`` if it is
    cancelled), and its amount follows the sale's untaxed total.

    Args:
        opportunity_id: The opportunity's id (state ``opportunity``).
    """
    return ops_convert_opportunity(ctx, opportunity_id)


@tool("write")
def create_quotation(ctx: ToolContext, party_id: PartyId, description: Prose = "Sales order") -> dict[str, Any]:
    """Start a new draft sale for a customer (add lines, then quote it).

    Args:
        party_id: The customer's party id.
        description: A short description of the order.
    """
    return ops_create_quotation(ctx, party_id, description)


@tool("write")
def request_discount_approval(ctx: ToolContext, sale_id: SaleId, discount: Decimal, reason: Prose) -> dict[str, Any]:
    """Ask the sales manager to approve a discount above 10% on a draft sale (approved up to 30%).

    Args:
        sale_id: The draft sale's id.
        discount: The discount percentage to approve (e.g. 15 for 15%).
        reason: Why the customer should get it.
    """
    return ops_request_discount_approval(ctx, sale_id, discount, reason)


@tool("write")
def add_line(
    ctx: ToolContext, sale_id: SaleId, product_id: ProductId, quantity: int, discount: Decimal | None = None
) -> dict[str, Any]:
    """Add a product line to a draft sale; returns the unit price and the sale's new amounts.

    Without a discount the unit price is the sale's price list price for the
    product and quantity (see quote_price), or the list price when the sale
    has no price list. A discount replaces it: the unit price is then the list
    price less the discount, whatever the price list gives.

    Args:
        sale_id: The draft sale's id.
        product_id: The product's id.
        quantity: How many units (a whole number, at least 1).
        discount: Discount off the list price in percent (0 to 100); above 10% needs an approval.
    """
    return ops_add_line(ctx, sale_id, product_id, quantity, discount)


@tool("write")
def quote_sale(ctx: ToolContext, sale_id: SaleId) -> dict[str, Any]:
    """Turn a draft sale into a quotation, giving it its sale number.

    Args:
        sale_id: The draft sale's id.
    """
    return ops_quote(ctx, sale_id)


@tool("write")
def reopen_sale(ctx: ToolContext, sale_id: SaleId) -> dict[str, Any]:
    """Reset a quotation or a cancelled sale to draft so its lines can be changed (it keeps its number).

    Args:
        sale_id: The sale's id.
    """
    return ops_reopen(ctx, sale_id)


@tool("write")
def remove_line(ctx: ToolContext, sale_id: SaleId, line_id: LineId) -> dict[str, Any]:
    """Delete a line from a draft (or cancelled) sale.

    Args:
        sale_id: The sale's id.
        line_id: The id of one of its lines (from get_sale).
    """
    return ops_remove_line(ctx, sale_id, line_id)


@tool("write")
def confirm_sale(ctx: ToolContext, sale_id: SaleId) -> dict[str, Any]:
    """Confirm a quotation as a sales order: creates its shipment and, invoiced on order, its draft invoice.

    Refused when its untaxed amount would take the customer's credit amount
    past their credit limit (see get_party).

    Args:
        sale_id: The quotation's id.
    """
    return ops_confirm(ctx, sale_id)


@tool("write")
def set_invoice_method(
    ctx: ToolContext, sale_id: SaleId, method: Literal["manual", "order", "fulfillment"]
) -> dict[str, Any]:
    """Set how a draft sale is invoiced (it starts with its customer's method, else ``order``).

    ``order``: confirming it makes one invoice for the whole order.
    ``fulfillment`` (invoice on shipment): confirming makes no invoice; each
    shipment sent makes a draft invoice for what it sent. ``manual``: the
    system makes none. Refused once the sale is no longer a draft (reopen a
    quotation first).

    Args:
        sale_id: The draft sale's id.
        method: order, fulfillment or manual.
    """
    return ops_set_invoice_method(ctx, sale_id, method)


@tool("write")
def cancel_sale(ctx: ToolContext, sale_id: SaleId) -> dict[str, Any]:
    """Cancel a draft sale or a quotation.

    Args:
        sale_id: The sale's id.
    """
    return ops_cancel(ctx, sale_id)


@tool("write")
def ship_shipment(ctx: ToolContext, shipment_id: ShipmentId, partial: bool = False) -> dict[str, Any]:
    """Reserve a waiting shipment's products from stock and send it (a sale invoiced on fulfillment then gets a
    draft invoice for what was sent).

    Without ``partial`` it goes only when everything is in stock. With
    ``partial`` it goes with what is in stock, and a backorder shipment takes
    the rest (``backorder_id``; null when nothing was short).

    Args:
        shipment_id: The shipment's id.
        partial: Send what is in stock now and backorder the rest.
    """
    return ops_ship(ctx, shipment_id, partial)


@tool("write")
def post_invoice(ctx: ToolContext, invoice_id: InvoiceId) -> dict[str, Any]:
    """Post a draft invoice or credit note, giving it its number (one sequence for both).

    Args:
        invoice_id: The invoice's id.
    """
    return ops_post(ctx, invoice_id)


@tool("write")
def pay_invoice(
    ctx: ToolContext,
    invoice_id: InvoiceId,
    amount: Decimal,
    settle: Literal["partial", "writeoff", "overpayment"] = "partial",
) -> dict[str, Any]:
    """Record a customer payment on a posted invoice.

    The exact amount due pays it. Otherwise ``settle`` says how: ``partial``
    (less than due; the rest stays due), ``writeoff`` (pay it off and write
    the difference off, at most $5.00 either way) or ``overpayment`` (more than
    due; the excess stays on the customer's account as credit). Returns the
    invoice's state, what is still due, the amount written off and the
    customer's balance (negative: credit).

    Args:
        invoice_id: The invoice's id.
        amount: The amount paid, in dollars.
        settle: partial, writeoff or overpayment.
    """
    return ops_pay(ctx, invoice_id, amount, settle)


@tool("write")
def credit_invoice(ctx: ToolContext, invoice_id: InvoiceId) -> dict[str, Any]:
    """Issue a credit note for a posted or paid invoice (the whole invoice, negated).

    A posted invoice nothing was paid on is refunded at once: the credit note
    is posted and numbered, and the invoice is cancelled. Otherwise the credit
    note is a draft: post it with post_invoice, which leaves its amount as the
    customer's credit.

    Args:
        invoice_id: The invoice's id.
    """
    return ops_credit(ctx, invoice_id)


@tool("write")
def return_sale(ctx: ToolContext, sale_id: SaleId) -> dict[str, Any]:
    """Start a customer return of a processing or done sale: a new draft sale with the same lines at negative
    quantities (remove the lines not returned). Quote and confirm it: confirming creates the customer return
    shipment to receive (receive_return) and the credit note (a negative invoice) to post.

    Args:
        sale_id: The id of the sale the customer returns goods from.
    """
    return ops_return(ctx, sale_id)


@tool("write")
def receive_return(ctx: ToolContext, shipment_id: Annotated[int, Ref("return_shipments")]) -> dict[str, Any]:
    """Receive a customer return shipment (draft) into the warehouse: its products are back in stock.

    Args:
        shipment_id: The return shipment's id (get_sale of the return sale lists it under returns).
    """
    return ops_receive_return(ctx, shipment_id)


@tool("terminal")
def respond(ctx: ToolContext, message: Prose) -> dict[str, Any]:
    """Send the final message to the customer (or report to your lead) and end the conversation.

    Args:
        message: What you tell them: what was done, with numbers and amounts.
    """
    if not message.strip():
        raise ToolError("invalid_arguments", "message must not be empty")
    ctx.finish(message)
    return {"sent": True}


# Append only: a tool's index is its action in the menu environments (tests/test_world_pins.py).
TOOLS: tuple[ToolSpec, ...] = (
    get_policy,
    search_parties,
    get_party,
    search_products,
    get_product,
    get_opportunity,
    get_sale,
    list_sales,
    get_invoice,
    add_contact,
    create_lead,
    qualify_lead,
    mark_lost,
    create_quotation,
    request_discount_approval,
    add_line,
    quote_sale,
    confirm_sale,
    cancel_sale,
    ship_shipment,
    post_invoice,
    pay_invoice,
    respond,
    convert_opportunity,
    remove_line,
    reopen_sale,
    credit_invoice,
    list_overdue_invoices,
    quote_price,
    return_sale,
    receive_return,
    set_invoice_method,
)
