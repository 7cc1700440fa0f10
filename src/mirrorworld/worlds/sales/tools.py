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
from decimal import Decimal
from typing import Annotated, Any, Literal, Protocol

from mirrorworld.core.session import ToolContext
from mirrorworld.core.text import clean_text, like_pattern, search_query
from mirrorworld.core.tools import FREE_TEXT, Ref, ToolSpec, tool
from mirrorworld.errors import ToolError
from mirrorworld.worlds.sales.contacts import normalise_contact
from mirrorworld.worlds.sales.rules import (
    amounts,
    check_approval_request,
    check_lead_amount,
    check_line_discount,
    check_payment_amount,
    check_quantity,
    discount_read_back,
    money,
    price_text,
    unit_price,
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


def tax_rounding(db: Db) -> str:
    """The world's tax rounding (a tool's context reads its world's; the data generator passes its own)."""
    param = getattr(db, "param", None)
    return str(param("tax_rounding")) if param is not None else "document"


def sale_amounts(db: Db, sale_id: int) -> tuple[str, str, str]:
    """(untaxed, tax, total) of a sale, from its lines."""
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
        "INSERT INTO sales (number, party_id, description, state, invoice_state, shipment_state, opportunity_id) "
        "VALUES (NULL, ?, ?, 'draft', 'none', 'none', ?)",
        (opp["party_id"], opp["description"], opportunity_id),
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
    cur = db.execute(
        "INSERT INTO sales (number, party_id, description, state, invoice_state, shipment_state) "
        "VALUES (NULL, ?, ?, 'draft', 'none', 'none')",
        (party_id, description),
    )
    return {"sale_id": int(cur.lastrowid or 0), "state": "draft"}


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


def ops_add_line(db: Db, sale_id: int, product_id: int, quantity: int, discount: Decimal) -> dict[str, Any]:
    sale = _get(db, "sales", "sale", sale_id)
    product = _get(db, "products", "product", product_id)
    check_quantity(quantity)
    check_line_discount(discount, lambda: _best_approval(db, sale_id))
    if sale["state"] != "draft":  # the real system refuses the new line when it saves it
        raise ToolError(
            "invalid_state",
            f'You cannot add lines to sale "{_sale_name(sale)}" because it is no longer in a draft state.',
            rule="sale_workflow",
        )
    list_price = Decimal(product["list_price"])
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


def ops_confirm(db: Db, sale_id: int) -> dict[str, Any]:
    sale = _get(db, "sales", "sale", sale_id)
    if sale["state"] != "quotation":
        raise _refused_click("confirm", _sale_name(sale), "Sale", "sale_workflow")
    lines = _priced_lines(db, sale_id)
    untaxed, tax, total = amounts(lines, tax_rounding(db))
    if lines:
        db.execute(
            "INSERT INTO invoices (sale_id, number, state, untaxed, tax, total, paid) "
            "VALUES (?, NULL, 'draft', ?, ?, ?, '0.00')",
            (sale_id, untaxed, tax, total),
        )
        db.execute("INSERT INTO shipments (sale_id, state) VALUES (?, 'waiting')", (sale_id,))
        db.execute(
            "UPDATE sales SET state='processing', invoice_state='pending', shipment_state='waiting' WHERE id=?",
            (sale_id,),
        )
        state = "processing"
    else:
        db.execute("UPDATE sales SET state='done' WHERE id=?", (sale_id,))
        state = "done"
    _process_opportunity(db, sale_id)
    return {"sale_id": sale_id, "number": sale["number"], "state": state, "total_amount": total}


def ops_cancel(db: Db, sale_id: int) -> dict[str, Any]:
    sale = _get(db, "sales", "sale", sale_id)
    if sale["state"] not in ("draft", "quotation"):
        raise _refused_click("cancel", _sale_name(sale), "Sale", "sale_workflow")
    db.execute("UPDATE sales SET state='cancelled' WHERE id=?", (sale_id,))
    _process_opportunity(db, sale_id)
    return {"sale_id": sale_id, "number": sale["number"], "state": "cancelled"}


def ops_reopen(db: Db, sale_id: int) -> dict[str, Any]:
    """Reset a quotation or a cancelled sale to draft (its number, if any, is kept)."""
    sale = _get(db, "sales", "sale", sale_id)
    if sale["state"] not in ("quotation", "cancelled"):
        raise _refused_click("draft", _sale_name(sale), "Sale", "sale_workflow")
    db.execute("UPDATE sales SET state='draft' WHERE id=?", (sale_id,))
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


def ops_ship(db: Db, shipment_id: int) -> dict[str, Any]:
    shipment = _get(db, "shipments", "shipment", shipment_id)
    if shipment["state"] != "waiting":  # shipments are numbered in the order they are made, as their ids
        raise _refused_click("assign_wizard", str(shipment_id), "Stock Shipment Out", "sale_workflow")
    needs = db.all(
        "SELECT l.product_id, SUM(l.quantity) AS qty, p.on_hand, p.name FROM sale_lines l "
        "JOIN products p ON p.id = l.product_id WHERE l.sale_id=? GROUP BY l.product_id ORDER BY l.product_id",
        (shipment["sale_id"],),
    )
    short = [n for n in needs if n["qty"] > n["on_hand"]]
    if short:
        names = ", ".join(f"{n['name']} ({n['on_hand']} of {n['qty']})" for n in short)
        raise ToolError(
            "validation_error", f"not enough stock to ship shipment {shipment_id}: {names}", rule="stock_availability"
        )
    for n in needs:
        db.execute("UPDATE products SET on_hand=on_hand-? WHERE id=?", (n["qty"], n["product_id"]))
    db.execute("UPDATE shipments SET state='done' WHERE id=?", (shipment_id,))
    db.execute("UPDATE sales SET shipment_state='sent' WHERE id=?", (shipment["sale_id"],))
    _maybe_done(db, shipment["sale_id"])
    return {"shipment_id": shipment_id, "state": "done"}


def ops_post(db: Db, invoice_id: int) -> dict[str, Any]:
    inv = _get(db, "invoices", "invoice", invoice_id)
    if inv["state"] != "draft":
        raise _refused_click("post", _invoice_name(inv), "Account Invoice", "sale_workflow")
    number = _next(db, "invoice")
    db.execute("UPDATE invoices SET state='posted', number=? WHERE id=?", (number, invoice_id))
    db.execute("UPDATE sales SET invoice_state='awaiting payment' WHERE id=?", (inv["sale_id"],))
    return {"invoice_id": invoice_id, "number": number, "state": "posted", "total_amount": inv["total"]}


def ops_pay(db: Db, invoice_id: int, amount: Decimal) -> dict[str, Any]:
    inv = _get(db, "invoices", "invoice", invoice_id)
    check_payment_amount(amount)
    if inv["state"] != "posted":
        raise _refused_click("pay", _invoice_name(inv), "Account Invoice", "sale_workflow")
    due = Decimal(inv["total"]) - Decimal(inv["paid"])
    if amount > due:
        raise ToolError(
            "policy_refused",
            f'You cannot add a partial payment on invoice "{inv["number"]}" with an amount greater than the '
            f'amount to pay "${money(due)}".',
            rule="payment_limit",
        )
    paid = Decimal(inv["paid"]) + amount
    state = "paid" if paid == Decimal(inv["total"]) else "posted"
    db.execute("UPDATE invoices SET paid=?, state=? WHERE id=?", (money(paid), state, invoice_id))
    if state == "paid":
        db.execute("UPDATE sales SET invoice_state='paid' WHERE id=?", (inv["sale_id"],))
        _maybe_done(db, inv["sale_id"])
    return {"invoice_id": invoice_id, "state": state, "amount_due": money(due - amount)}


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
    """Open a customer: address, contact mechanisms, leads and sales.

    Args:
        party_id: The party's id.
    """
    party = _get(ctx, "parties", "party", party_id)
    address = ctx.one("SELECT street, city, postal_code FROM addresses WHERE party_id=? ORDER BY id", (party_id,))
    contacts = ctx.all("SELECT id, type, value FROM contacts WHERE party_id=? ORDER BY id", (party_id,))
    opps = ctx.all("SELECT id, number, state FROM opportunities WHERE party_id=? ORDER BY id", (party_id,))
    sales = ctx.all("SELECT id, number, state FROM sales WHERE party_id=? ORDER BY id", (party_id,))
    ctx.show(f"party:{party_id}", f"party {party_id}: {party['name']}")
    return {
        "party": {"id": party["id"], "code": party["code"], "name": party["name"]},
        "address": address,
        "contacts": contacts,
        "opportunities": opps,
        "sales": sales,
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
    """Open a sale with its lines, amounts, approvals, shipments and invoices.

    Args:
        sale_id: The sale's id.
    """
    sale = _get(ctx, "sales", "sale", sale_id)
    lines = ctx.all(
        "SELECT id, product_id, quantity, unit_price, discount FROM sale_lines WHERE sale_id=? ORDER BY id",
        (sale_id,),
    )
    untaxed, tax, total = amounts(((r["quantity"], r["unit_price"]) for r in lines), ctx.param("tax_rounding"))
    return {
        "sale": {**sale, "untaxed_amount": untaxed, "tax_amount": tax, "total_amount": total},
        "lines": lines,
        "approvals": ctx.all("SELECT id, discount, reason FROM approvals WHERE sale_id=? ORDER BY id", (sale_id,)),
        "shipments": ctx.all("SELECT id, state FROM shipments WHERE sale_id=? ORDER BY id", (sale_id,)),
        "invoices": ctx.all("SELECT id, number, state, total FROM invoices WHERE sale_id=? ORDER BY id", (sale_id,)),
    }


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
    """Open an invoice: number, state, amounts, paid and still due.

    Args:
        invoice_id: The invoice's id.
    """
    inv = _get(ctx, "invoices", "invoice", invoice_id)
    due = Decimal(inv["total"]) - Decimal(inv["paid"])
    return {"invoice": {**inv, "amount_due": money(due)}}


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
    ctx: ToolContext, sale_id: SaleId, product_id: ProductId, quantity: int, discount: Decimal = Decimal(0)
) -> dict[str, Any]:
    """Add a product line to a draft sale; returns the unit price and the sale's new amounts.

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
    """Confirm a quotation as a sales order: creates its shipment and its draft invoice.

    Args:
        sale_id: The quotation's id.
    """
    return ops_confirm(ctx, sale_id)


@tool("write")
def cancel_sale(ctx: ToolContext, sale_id: SaleId) -> dict[str, Any]:
    """Cancel a draft sale or a quotation.

    Args:
        sale_id: The sale's id.
    """
    return ops_cancel(ctx, sale_id)


@tool("write")
def ship_shipment(ctx: ToolContext, shipment_id: ShipmentId) -> dict[str, Any]:
    """Reserve a waiting shipment's products from stock and send it (all or nothing).

    Args:
        shipment_id: The shipment's id.
    """
    return ops_ship(ctx, shipment_id)


@tool("write")
def post_invoice(ctx: ToolContext, invoice_id: InvoiceId) -> dict[str, Any]:
    """Post a draft invoice, giving it its invoice number.

    Args:
        invoice_id: The invoice's id.
    """
    return ops_post(ctx, invoice_id)


@tool("write")
def pay_invoice(ctx: ToolContext, invoice_id: InvoiceId, amount: Decimal) -> dict[str, Any]:
    """Record a customer payment on a posted invoice (at most the amount due).

    Args:
        invoice_id: The invoice's id.
        amount: The amount paid, in dollars.
    """
    return ops_pay(ctx, invoice_id, amount)


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
    convert_opportunity,
    create_quotation,
    request_discount_approval,
    add_line,
    remove_line,
    quote_sale,
    reopen_sale,
    confirm_sale,
    cancel_sale,
    ship_shipment,
    post_invoice,
    pay_invoice,
    respond,
)
