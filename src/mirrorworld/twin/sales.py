"""The sales world's tools implemented on a real Tryton database.

Every function here takes the Tryton pool and the arguments the mirror's tool
declaration already validated and coerced (the argument interface is shared:
``ToolSpec.validate`` runs first on both backends), and returns the same JSON
shape the mirror's tool returns. Business behaviour comes from Tryton: its
workflows decide which transitions happen (a transition Tryton does not allow
is silently skipped by Tryton, which the adapter reports as ``invalid_state``),
its validations raise ``UserError`` (reported as ``validation_error``, or the
code in :data:`ERROR_CODES`), its sequences number records and its tax engine
computes amounts.

What Tryton itself has no notion of is the desk's own policy, and only that is
enforced here, exactly as the mirror states it: the discount approval rule
(approvals are kept as notes on the sale, ``ir.note``), the line discount
(kept in the line's note), the write-off limit and which documents are
credited or paid (Tryton's wizards write off any amount, credit drafts and
credit notes and take payments on them) and the argument ranges every tool
shares.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from mirrorworld.core.text import clean_text, search_query
from mirrorworld.errors import ToolError
from mirrorworld.worlds.sales.rules import (
    check_approval_request,
    check_lead_amount,
    check_line_discount,
    check_payment_amount,
    check_quantity,
    money,
    price_text,
    writeoff_refusal,
)
from mirrorworld.worlds.sales.tools import credit_note_paid, credit_refusal, return_refusal, stock_shortage

__all__ = ["ERROR_CODES", "TOOLS", "canonical_state", "context"]

ERROR_CODES = {
    "PayInvoiceError": "policy_refused",
    "CreditLimitError": "policy_refused",
    "AccessButtonError": "invalid_state",
    "AccessError": "invalid_state",
}
"""Tryton error classes whose refusal maps to another code than ``validation_error``."""

APPROVAL_PREFIX = "discount approval: "
ADMIN = 1
"""Tryton's administrator: tools click buttons as this user (see :func:`_click`)."""
INVOICE_LINE = "account.invoice.line"
INTERNAL_PARTIES = (1, 2)
"""The company's party and the sales employee's party (not customers)."""


def _adapter(err: ToolError) -> ToolError:
    """Mark a refusal as the adapter's own rule (the desk's policy, which Tryton has no notion of)."""
    err.decided_by = "adapter"  # type: ignore[attr-defined]
    return err


def _get(pool: Any, model: str, what: str, ident: int) -> Any:
    Model = pool.get(model)
    found = Model.search([("id", "=", ident)], limit=1)
    if not found:
        raise ToolError("not_found", f"no {what} {ident}")
    return found[0]


def _pattern(q: str) -> str:
    from trytond.tools import escape_wildcard  # type: ignore[import-untyped,import-not-found]

    return f"%{escape_wildcard(q)}%"


def _sale_name(sale: Any) -> str:
    """Tryton's name for a sale in messages: its number, else its id in brackets (``Sale.get_rec_name``)."""
    return str(sale.number or f"({sale.id})")


def context(pool: Any) -> dict[str, Any]:
    """The Tryton context every twin call runs in: the company, its employee, warnings skipped."""
    Company = pool.get("company.company")
    Employee = pool.get("company.employee")
    company = Company.search([], limit=1)[0]
    employee = Employee.search([], limit=1)[0]
    return {"company": company.id, "employee": employee.id, "_skip_warnings": True}


def _warehouse_storage(pool: Any) -> Any:
    Location = pool.get("stock.location")
    return Location.search([("type", "=", "warehouse")], limit=1)[0].storage_location


def _on_hand(pool: Any, products: list[Any]) -> dict[int, int]:
    from trytond.transaction import Transaction  # type: ignore[import-untyped,import-not-found]

    Product = pool.get("product.product")
    storage = _warehouse_storage(pool)
    with Transaction().set_context(locations=[storage.id], with_childs=True):
        found = Product.browse([p.id for p in products])
        return {p.id: int(p.quantity) for p in found}


def _amounts(sale: Any) -> tuple[str, str, str]:
    return money(sale.untaxed_amount), money(sale.tax_amount), money(sale.total_amount)


def _reload(pool: Any, model: str, ident: int) -> Any:
    return pool.get(model)(ident)


def _process_sales(pool: Any, sales: list[Any]) -> None:
    """Run Tryton's sale processing now (Tryton queues it until commit; a twin session never commits)."""
    Sale = pool.get("sale.sale")
    Sale.process(Sale.browse([s.id for s in sales]))


# -- reads ----------------------------------------------------------------------


def get_policy(pool: Any, policy: str) -> dict[str, Any]:
    return {"policy": policy}


def search_parties(pool: Any, query: str) -> dict[str, Any]:
    Party = pool.get("party.party")
    p = _pattern(search_query(query))
    found = Party.search(
        [("id", "not in", INTERNAL_PARTIES), ["OR", ("name", "ilike", p), ("code", "ilike", p)]],
        order=[("id", "ASC")],
        limit=10,
    )
    return {"parties": [{"id": x.id, "code": x.code, "name": x.name} for x in found]}


def get_party(pool: Any, party_id: int) -> dict[str, Any]:
    party = _get(pool, "party.party", "party", party_id)
    Address = pool.get("party.address")
    addresses = Address.search([("party", "=", party.id)], order=[("id", "ASC")], limit=1)
    address = (
        {"street": addresses[0].street, "city": addresses[0].city, "postal_code": addresses[0].postal_code}
        if addresses
        else None
    )
    Mechanism = pool.get("party.contact_mechanism")
    contacts = Mechanism.search([("party", "=", party.id)], order=[("id", "ASC")])
    Opportunity = pool.get("sale.opportunity")
    opps = Opportunity.search([("party", "=", party.id)], order=[("id", "ASC")])
    Sale = pool.get("sale.sale")
    sales = Sale.search([("party", "=", party.id)], order=[("id", "ASC")])
    return {
        "party": {
            "id": party.id,
            "code": party.code,
            "name": party.name,
            "payment_term_id": party.customer_payment_term.id if party.customer_payment_term else None,
            "payment_term": party.customer_payment_term.name if party.customer_payment_term else None,
            "credit_limit": money(party.credit_limit_amount) if party.credit_limit_amount is not None else None,
            "price_list_id": party.sale_price_list.id if party.sale_price_list else None,
            "price_list": party.sale_price_list.name if party.sale_price_list else None,
            "sale_invoice_method": party.sale_invoice_method or None,
        },
        "address": address,
        "contacts": [{"id": c.id, "type": c.type, "value": c.value} for c in contacts],
        "opportunities": [{"id": o.id, "number": o.number, "state": o.state} for o in opps],
        "sales": [{"id": s.id, "number": s.number, "state": s.state} for s in sales],
        "balance": money(party.receivable),
        "credit_amount": money(party.credit_amount),
    }


def _product_row(product: Any, on_hand: dict[int, int]) -> dict[str, Any]:
    return {
        "id": product.id,
        "code": product.code,
        "name": product.name,
        "list_price": price_text(product.template.list_price),
        "on_hand": on_hand[product.id],
    }


def search_products(pool: Any, query: str) -> dict[str, Any]:
    Product = pool.get("product.product")
    p = _pattern(search_query(query))
    found = Product.search(["OR", ("name", "ilike", p), ("code", "ilike", p)], order=[("id", "ASC")], limit=10)
    stock = _on_hand(pool, found)
    return {"products": [_product_row(x, stock) for x in found]}


def quote_price(pool: Any, party_id: int, product_id: int, quantity: int) -> dict[str, Any]:
    """The unit price Tryton gives a new line of the customer's: the product's sale price for the quantity in the
    context a sale line prices in (the customer, the sale unit and the customer's sale price list)."""
    from trytond.transaction import Transaction  # type: ignore[import-untyped,import-not-found]

    party = _get(pool, "party.party", "party", party_id)
    product = _get(pool, "product.product", "product", product_id)
    check_quantity(quantity)
    Product = pool.get("product.product")
    price_list = party.sale_price_list
    context: dict[str, Any] = {"customer": party.id, "uom": product.sale_uom.id}
    if price_list:
        context["price_list"] = price_list.id
    with Transaction().set_user(ADMIN), Transaction().set_context(**context):
        price = Product.get_sale_price([product], quantity)[product.id]
    list_price = Decimal(product.list_price_used)
    rate = (1 - Decimal(price) / list_price).quantize(Decimal("0.0001")) if list_price else Decimal(0)
    return {
        "party_id": party.id,
        "product_id": product.id,
        "quantity": quantity,
        "price_list_id": price_list.id if price_list else None,
        "price_list": price_list.name if price_list else None,
        "list_price": price_text(list_price),
        "unit_price": price_text(Decimal(price)),
        "discount": money(rate * 100),
    }


def get_product(pool: Any, product_id: int) -> dict[str, Any]:
    product = _get(pool, "product.product", "product", product_id)
    return {"product": _product_row(product, _on_hand(pool, [product]))}


def _opportunity_row(o: Any) -> dict[str, Any]:
    return {
        "id": o.id,
        "number": o.number,
        "party_id": o.party.id,
        "description": o.description,
        "amount": money(o.amount or Decimal(0)),
        "state": o.state,
        "lost_reason": o.lost_reason,
    }


def get_opportunity(pool: Any, opportunity_id: int) -> dict[str, Any]:
    return {"opportunity": _opportunity_row(_get(pool, "sale.opportunity", "opportunity", opportunity_id))}


def _approvals(pool: Any, sale: Any) -> list[tuple[int, Decimal, str]]:
    Note = pool.get("ir.note")
    notes = Note.search([("resource", "=", f"sale.sale,{sale.id}")], order=[("id", "ASC")])
    out = []
    for n in notes:
        if n.message and n.message.startswith(APPROVAL_PREFIX):
            discount, _sep, reason = n.message[len(APPROVAL_PREFIX) :].partition(" | ")
            out.append((n.id, Decimal(discount), reason))
    return out


def _line_discount(line: Any) -> Decimal:
    """The line's discount in percent, as Tryton's sale_discount derives it from the unit and base prices."""
    rate = line.discount_rate
    return Decimal(rate) * 100 if rate is not None else Decimal(0)


def _invoice_paid(inv: Any) -> Decimal:
    """The payments applied to a customer invoice: its payment lines (an overpayment's excess is not one)."""
    return sum((Decimal(ln.credit) - Decimal(ln.debit) for ln in inv.payment_lines), Decimal(0))


def _invoice_writeoff(inv: Any) -> Decimal:
    """What was written off when the invoice was reconciled: the write-off lines of its reconciliation."""
    out = Decimal(0)
    for reconciliation in {ln.reconciliation for ln in inv.lines_to_pay if ln.reconciliation is not None}:
        for ln in reconciliation.lines:
            if ln.move.journal.type == "write-off":
                out += Decimal(ln.credit) - Decimal(ln.debit)
    return out


def _amount_due(inv: Any) -> Decimal:
    """What is still to pay: Tryton's amount to pay once posted, the whole total while a draft."""
    if inv.state == "draft":
        return Decimal(inv.total_amount)
    return Decimal(inv.amount_to_pay or 0) if inv.state == "posted" else Decimal(0)


def _credited(inv: Any) -> Any:
    """The invoice a credit note credits (its lines' origins are that invoice's lines), else None."""
    origins = {ln.origin.invoice for ln in inv.lines if ln.origin is not None and ln.origin.__name__ == INVOICE_LINE}
    return next(iter(origins)) if origins else None


def _sale_credit_notes(pool: Any, sale: Any) -> list[tuple[Any, Any]]:
    """``(invoice, credit note)`` for every credit note of a sale's invoices, in the credit notes' id order."""
    pairs = [(i, c) for i in sale.invoices for c in _credit_notes(pool, i)]
    return sorted(pairs, key=lambda pair: pair[1].id)


def _credit_notes(pool: Any, inv: Any) -> list[Any]:
    """The credit notes of an invoice, in id order."""
    Line = pool.get(INVOICE_LINE)
    found = Line.search([("origin", "in", [str(ln) for ln in inv.lines])]) if inv.lines else []
    return sorted({ln.invoice for ln in found}, key=lambda i: i.id)


def get_sale(pool: Any, sale_id: int) -> dict[str, Any]:
    sale = _get(pool, "sale.sale", "sale", sale_id)
    untaxed, tax, total = _amounts(sale)
    lines = sorted((ln for ln in sale.lines if ln.type == "line"), key=lambda ln: ln.id)
    return {
        "sale": {
            "id": sale.id,
            "number": sale.number,
            "party_id": sale.party.id,
            "description": sale.description,
            "state": sale.state,
            "invoice_state": sale.invoice_state,
            "shipment_state": sale.shipment_state,
            "opportunity_id": _opportunity_of(sale),
            "payment_term_id": sale.payment_term.id if sale.payment_term else None,
            "price_list_id": sale.price_list.id if sale.price_list else None,
            "return_of": _return_of(sale),
            "invoice_method": sale.invoice_method,
            "untaxed_amount": untaxed,
            "tax_amount": tax,
            "total_amount": total,
        },
        "lines": [
            {
                "id": ln.id,
                "product_id": ln.product.id,
                "quantity": int(ln.quantity),
                "unit_price": price_text(ln.unit_price),
                "discount": money(_line_discount(ln)),
            }
            for ln in lines
        ],
        "approvals": [{"id": i, "discount": money(d), "reason": r} for i, d, r in _approvals(pool, sale)],
        "shipments": [
            {"id": s.id, "state": s.state, "moves": [{"product_id": p, "quantity": q} for p, q in _moves(s)]}
            for s in sorted(sale.shipments, key=lambda s: s.id)
        ],
        "returns": [
            {"id": r.id, "state": r.state, "moves": [{"product_id": p, "quantity": q} for p, q in _return_moves(r)]}
            for r in sorted(sale.shipment_returns, key=lambda r: r.id)
        ],
        "invoices": [
            {"id": i.id, "number": i.number, "state": i.state, "total": money(i.total_amount)}
            for i in sorted(sale.invoices, key=lambda i: i.id)
        ],
        "credit_notes": [
            {"id": c.id, "number": c.number, "state": c.state, "total": money(c.total_amount), "invoice_id": i.id}
            for i, c in _sale_credit_notes(pool, sale)
        ],
    }


def _opportunity_of(sale: Any) -> int | None:
    origin = sale.origin
    return int(origin.id) if origin is not None and origin.__name__ == "sale.opportunity" else None


def _return_of(sale: Any) -> int | None:
    """The sale a return sale returns (its origin, set by Tryton's return wizard), else None."""
    origin = sale.origin
    return int(origin.id) if origin is not None and origin.__name__ == "sale.sale" else None


def _return_moves(shipment: Any) -> list[tuple[int, int]]:
    """What a customer return shipment takes back: its incoming moves (not cancelled), by product and quantity."""
    return sorted(
        (m.product.id, int(m.quantity)) for m in shipment.incoming_moves if m.state != "cancelled" and m.quantity
    )


def _is_credit_note(inv: Any) -> bool:
    """A credit note: it credits an invoice, or its total is negative (a return sale's; Tryton names a customer
    invoice below zero a credit note)."""
    return _credited(inv) is not None or Decimal(inv.total_amount) < 0


def _moves(shipment: Any) -> list[tuple[int, int]]:
    """What a customer shipment carries: its outgoing moves (not cancelled), by product and quantity."""
    return sorted((m.product.id, int(m.quantity)) for m in _shipped(shipment))


def _shipped(shipment: Any) -> list[Any]:
    """A customer shipment's outgoing moves that carry something (not cancelled, a quantity), in id order."""
    moves = [m for m in shipment.outgoing_moves if m.state != "cancelled" and m.quantity]
    return sorted(moves, key=lambda m: m.id)


def _billed_by(move: Any) -> Any:
    """The invoice whose line bills a move: its invoice lines of a sale line (a credit note's lines, whose origin
    is the credited invoice's line, carry the same moves and are not the sale's), else None."""
    invoices = {
        ln.invoice
        for ln in move.invoice_lines
        if ln.invoice is not None and ln.origin is not None and ln.origin.__name__ == "sale.line"
    }
    return min(invoices, key=lambda i: i.id) if invoices else None


def _billed_shipments(inv: Any) -> list[int]:
    """The shipments an invoice's (or credit note's) lines bill: those of the moves its lines carry."""
    shipments = {
        m.shipment.id
        for ln in inv.lines
        for m in ln.stock_moves
        if m.shipment is not None
        and m.shipment.__name__ == "stock.shipment.out"
        and m.state != "cancelled"
        and m.quantity
    }
    return sorted(shipments)


def list_sales(pool: Any, party_id: int) -> dict[str, Any]:
    party = _get(pool, "party.party", "party", party_id)
    Sale = pool.get("sale.sale")
    sales = Sale.search([("party", "=", party.id)], order=[("id", "DESC")])
    return {"sales": [{"id": s.id, "number": s.number, "description": s.description, "state": s.state} for s in sales]}


def _invoice_sale(inv: Any) -> Any:
    sales = {ln.origin.sale for ln in inv.lines if ln.origin is not None and ln.origin.__name__ == "sale.line"}
    return next(iter(sales)) if sales else None


def _due_date(inv: Any) -> Any:
    """When an invoice falls due: the earliest maturity date Tryton gave its lines to pay (None while a draft)."""
    dates = [ln.maturity_date for ln in inv.lines_to_pay if ln.maturity_date is not None]
    return min(dates) if dates else None


def _iso(day: Any) -> str | None:
    return day.isoformat() if day is not None else None


def _overdue(inv: Any, today: Any, credited: Any) -> bool:
    """Posted, something still to pay (Tryton's amount to pay) and due before today; never a credit note."""
    if credited is not None or inv.state != "posted":
        return False
    due = _due_date(inv)
    return due is not None and due < today and Decimal(inv.amount_to_pay or 0) > 0


def _today(pool: Any) -> Any:
    return pool.get("ir.date").today()


def get_invoice(pool: Any, invoice_id: int) -> dict[str, Any]:
    inv = _get(pool, "account.invoice", "invoice", invoice_id)
    credited = _credited(inv)
    sale = _invoice_sale(credited if credited is not None else inv)
    return {
        "invoice": {
            "id": inv.id,
            "sale_id": sale.id if sale is not None else None,
            "number": inv.number,
            "state": inv.state,
            "untaxed": money(inv.untaxed_amount),
            "tax": money(inv.tax_amount),
            "total": money(inv.total_amount),
            "paid": money(_invoice_paid(inv)),
            "writeoff": money(_invoice_writeoff(inv)),
            "payment_term": inv.payment_term.name if inv.payment_term else None,
            "invoice_date": _iso(inv.invoice_date),
            "due_date": _iso(_due_date(inv)),
            "amount_due": money(_amount_due(inv)),
            "overdue": _overdue(inv, _today(pool), credited),
            "type": "credit_note" if _is_credit_note(inv) else "invoice",
            "credit_of": credited.id if credited is not None else None,
            "credit_notes": [
                {"id": c.id, "number": c.number, "state": c.state, "total": money(c.total_amount)}
                for c in _credit_notes(pool, inv)
            ],
            "invoice_method": sale.invoice_method if sale is not None else None,
            "shipments": _billed_shipments(inv),
        }
    }


def list_overdue_invoices(pool: Any, party_id: int) -> dict[str, Any]:
    """The customer's posted invoices whose lines to pay Tryton matured before today and that still have an amount
    to pay, oldest due first."""
    party = _get(pool, "party.party", "party", party_id)
    today = _today(pool)
    Invoice = pool.get("account.invoice")
    found = Invoice.search([("party", "=", party.id), ("type", "=", "out"), ("state", "=", "posted")])
    rows = []
    for inv in found:
        if not _overdue(inv, today, _credited(inv)):
            continue
        sale = _invoice_sale(inv)
        due = _due_date(inv)
        rows.append(
            {
                "id": inv.id,
                "number": inv.number,
                "sale_id": sale.id if sale is not None else None,
                "invoice_date": _iso(inv.invoice_date),
                "due_date": _iso(due),
                "amount_due": money(_amount_due(inv)),
                "days_overdue": (today - due).days,
            }
        )
    rows.sort(key=lambda r: (r["due_date"], r["id"]))
    total = sum((Decimal(r["amount_due"]) for r in rows), Decimal(0))
    return {"today": today.isoformat(), "invoices": rows, "total_overdue": money(total)}


def _move_row(move: Any, shipment: Any, sale: Any) -> dict[str, Any]:
    """A stock move of one of ``sale``'s shipments as the mirror's move tables hold it (the sale line it carries)."""
    origin = move.origin
    line = origin.id if origin is not None and origin.__name__ == "sale.line" else None
    return {
        "id": move.id,
        "shipment_id": shipment.id,
        "sale_id": sale.id,
        "line_id": line,
        "product_id": move.product.id,
        "quantity": int(move.quantity),
    }


def read_back(pool: Any, sale_id: int) -> dict[str, Any]:
    """What the mirror's tables hold of a sale that no read tool shows (for grading twin episodes).

    ``moves``: every shipment's outgoing moves as rows of ``shipment_moves``
    (the move's id, its shipment, the sale line it ships and the invoice
    whose line bills it, through ``account_invoice_stock``'s link of invoice
    lines to moves); ``return_moves``: every customer return shipment's
    incoming moves as rows of ``return_moves``; ``overpaid``:
    per invoice, what its payments received beyond what they applied to it
    (the cash the payments' moves took in, less the invoice's payment lines).
    """
    sale = _get(pool, "sale.sale", "sale", sale_id)
    moves = []
    for shipment in sorted(sale.shipments, key=lambda s: s.id):
        for m in _shipped(shipment):
            billed = _billed_by(m)
            moves.append(_move_row(m, shipment, sale) | {"invoice_id": billed.id if billed is not None else None})
    returns = []
    for shipment in sorted(sale.shipment_returns, key=lambda s: s.id):
        for m in sorted(shipment.incoming_moves, key=lambda m: m.id):
            if m.state != "cancelled" and m.quantity:
                returns.append(_move_row(m, shipment, sale))
    Method = pool.get("account.invoice.payment.method")
    cash_accounts = {m.debit_account.id for m in Method.search([]) if m.debit_account}
    overpaid = {}
    for inv in sale.invoices:
        received = Decimal(0)
        for move in {ln.move for ln in inv.payment_lines}:
            received += sum(
                (Decimal(ln.debit) - Decimal(ln.credit) for ln in move.lines if ln.account.id in cash_accounts),
                Decimal(0),
            )
        overpaid[inv.id] = money(max(received - _invoice_paid(inv), Decimal(0)))
    return {"moves": moves, "return_moves": returns, "overpaid": overpaid}


# -- writes ---------------------------------------------------------------------


def add_contact(pool: Any, party_id: int, kind: str, value: str) -> dict[str, Any]:
    party = _get(pool, "party.party", "party", party_id)
    value = clean_text(value, "value", 200)
    Mechanism = pool.get("party.contact_mechanism")
    (created,) = Mechanism.create([{"party": party.id, "type": kind, "value": value}])
    return {"contact_id": created.id}


def create_lead(pool: Any, party_id: int, description: str, amount: Decimal) -> dict[str, Any]:
    party = _get(pool, "party.party", "party", party_id)
    description = clean_text(description, "description", 200)
    check_lead_amount(amount)
    Opportunity = pool.get("sale.opportunity")
    opp = Opportunity(party=party, description=description, amount=amount)
    opp.save()
    return {"opportunity_id": opp.id, "number": opp.number, "state": opp.state}


def _click(pool: Any, record: Any, button: str) -> None:
    """Click one of Tryton's buttons on ``record`` as a client user does.

    Tryton checks the button's states on the record for a user's click (not for
    the root user's internal calls) and refuses one it does not allow with an
    ``AccessButtonError``: that check, Tryton's own, decides which workflow
    moves a tool may make.
    """
    from trytond.transaction import Transaction  # type: ignore[import-untyped,import-not-found]

    Model = pool.get(record.__name__)
    with Transaction().set_user(ADMIN), Transaction().set_context(_check_access=True):
        getattr(Model, button)([Model(record.id)])


def _transition(pool: Any, record: Any, method: str, to: str, what: str) -> Any:
    """Click a workflow button; a click Tryton accepts but whose move it skips is reported too."""
    _click(pool, record, method)
    fresh = pool.get(record.__name__)(record.id)
    if fresh.state != to:
        raise ToolError("invalid_state", f"{fresh.rec_name} stayed {fresh.state}", rule=what)
    return fresh


def qualify_lead(pool: Any, opportunity_id: int) -> dict[str, Any]:
    opp = _get(pool, "sale.opportunity", "opportunity", opportunity_id)
    if opp.state == "lead" and opp.employee is None:
        Employee = pool.get("company.employee")
        opp.employee = Employee.search([], limit=1)[0]
        opp.save()
    fresh = _transition(pool, opp, "opportunity", "opportunity", "opportunity_workflow")
    return {"opportunity_id": fresh.id, "number": fresh.number, "state": fresh.state}


def mark_lost(pool: Any, opportunity_id: int, reason: str) -> dict[str, Any]:
    opp = _get(pool, "sale.opportunity", "opportunity", opportunity_id)
    reason = clean_text(reason, "reason", 500)
    opp.lost_reason = reason
    opp.save()  # undone with the call when Tryton refuses the click
    fresh = _transition(pool, opp, "lost", "lost", "opportunity_workflow")
    return {"opportunity_id": fresh.id, "number": fresh.number, "state": fresh.state}


def convert_opportunity(pool: Any, opportunity_id: int) -> dict[str, Any]:
    opp = _get(pool, "sale.opportunity", "opportunity", opportunity_id)
    fresh = _transition(pool, opp, "convert", "converted", "opportunity_workflow")
    (sale,) = fresh.sales
    return {"opportunity_id": fresh.id, "number": fresh.number, "state": fresh.state, "sale_id": sale.id}


def create_quotation(pool: Any, party_id: int, description: str) -> dict[str, Any]:
    party = _get(pool, "party.party", "party", party_id)
    description = clean_text(description, "description", 200)
    Sale = pool.get("sale.sale")
    sale = Sale()
    sale.party = party
    sale.on_change_party()
    sale.description = description
    sale.save()
    return {"sale_id": sale.id, "state": sale.state}


def request_discount_approval(pool: Any, sale_id: int, discount: Decimal, reason: str) -> dict[str, Any]:
    sale = _get(pool, "sale.sale", "sale", sale_id)
    if sale.state != "draft":  # the desk's rule: Tryton has no discount approvals
        raise _adapter(
            ToolError(
                "invalid_state",
                f"sale {_sale_name(sale)} is {sale.state}; discounts are approved for only a draft sale",
                rule="sale_workflow",
            )
        )
    reason = clean_text(reason, "reason", 500)
    check_approval_request(discount)
    Note = pool.get("ir.note")
    (note,) = Note.create(
        [{"resource": f"sale.sale,{sale.id}", "message": f"{APPROVAL_PREFIX}{money(discount)} | {reason}"}]
    )
    return {"approval_id": note.id, "sale_id": sale.id, "discount": money(discount)}


def add_line(
    pool: Any, sale_id: int, product_id: int, quantity: int, discount: Decimal | None = None
) -> dict[str, Any]:
    from trytond.transaction import Transaction  # type: ignore[import-untyped,import-not-found]

    sale = _get(pool, "sale.sale", "sale", sale_id)
    product = _get(pool, "product.product", "product", product_id)
    check_quantity(quantity)
    if discount is not None:
        check_line_discount(discount, lambda: max((d for _i, d, _r in _approvals(pool, sale)), default=None))
    Line = pool.get("sale.line")
    line = Line()
    line.sale = sale
    line.type = "line"
    line.product = product
    line.quantity = float(quantity)
    line.unit = product.sale_uom
    with Transaction().set_user(ADMIN):  # the sale's price list prices the line (sale_price_list)
        line.on_change_product()  # the base price is the list price (sale_discount)
    if discount is not None:
        line.discount_rate = discount / 100
        line.on_change_discount_rate()  # Tryton derives the unit price from it, off the base price
    line.save()  # Tryton refuses a line on a sale that is no longer a draft
    price = Decimal(line.unit_price)
    untaxed, tax, total = _amounts(_reload(pool, "sale.sale", sale.id))
    return {
        "line_id": line.id,
        "unit_price": price_text(price),
        "untaxed_amount": untaxed,
        "tax_amount": tax,
        "total_amount": total,
    }


def quote_sale(pool: Any, sale_id: int) -> dict[str, Any]:
    sale = _get(pool, "sale.sale", "sale", sale_id)
    fresh = _transition(pool, sale, "quote", "quotation", "sale_workflow")
    return {
        "sale_id": fresh.id,
        "number": fresh.number,
        "state": fresh.state,
        "total_amount": money(fresh.total_amount),
    }


def reopen_sale(pool: Any, sale_id: int) -> dict[str, Any]:
    sale = _get(pool, "sale.sale", "sale", sale_id)
    fresh = _transition(pool, sale, "draft", "draft", "sale_workflow")
    return {"sale_id": fresh.id, "number": fresh.number, "state": fresh.state}


def remove_line(pool: Any, sale_id: int, line_id: int) -> dict[str, Any]:
    _get(pool, "sale.sale", "sale", sale_id)
    found = pool.get("sale.line").search([("id", "=", line_id), ("sale", "=", sale_id)], limit=1)
    if not found:
        raise ToolError("not_found", f"no sale line {line_id} on sale {sale_id}")
    (line,) = found
    pool.get("sale.line").delete([line])  # Tryton refuses unless the sale is a draft or cancelled
    untaxed, tax, total = _amounts(_reload(pool, "sale.sale", sale_id))
    return {"sale_id": sale_id, "untaxed_amount": untaxed, "tax_amount": tax, "total_amount": total}


def confirm_sale(pool: Any, sale_id: int) -> dict[str, Any]:
    sale = _get(pool, "sale.sale", "sale", sale_id)
    _transition(pool, sale, "confirm", "confirmed", "sale_workflow")
    _process_sales(pool, [sale])
    fresh = _reload(pool, "sale.sale", sale.id)
    return {
        "sale_id": fresh.id,
        "number": fresh.number,
        "state": fresh.state,
        "total_amount": money(fresh.total_amount),
    }


def return_sale(pool: Any, sale_id: int) -> dict[str, Any]:
    """Tryton's return wizard: a draft copy of the sale, its origin the sale, its lines' quantities negated."""
    from trytond.transaction import Transaction  # type: ignore[import-untyped,import-not-found]

    sale = _get(pool, "sale.sale", "sale", sale_id)
    refusal = return_refusal(_sale_name(sale), sale.state, sale.invoice_method)
    if refusal is not None:  # the desk's rule: Tryton's wizard returns a sale in any state
        raise _adapter(refusal)
    Wizard = pool.get("sale.return_sale", type="wizard")
    context = {"active_model": "sale.sale", "active_id": sale.id, "active_ids": [sale.id]}
    with Transaction().set_user(ADMIN), Transaction().set_context(**context):
        session_id, start, _end = Wizard.create()
        Wizard.execute(session_id, {}, start)
        result = Wizard.execute(session_id, {start: {}}, "return_")
        Wizard.delete(session_id)
    ((_action, data),) = result["actions"]
    (new_id,) = data["res_id"]
    fresh = _reload(pool, "sale.sale", new_id)
    untaxed, tax, total = _amounts(fresh)
    return {
        "sale_id": fresh.id,
        "return_of": sale.id,
        "state": fresh.state,
        "untaxed_amount": untaxed,
        "tax_amount": tax,
        "total_amount": total,
    }


def receive_return(pool: Any, shipment_id: int) -> dict[str, Any]:
    """Tryton's receive then done on a customer return shipment (Tryton offers receiving only on a draft one)."""
    Shipment = pool.get("stock.shipment.out.return")
    shipment = _get(pool, "stock.shipment.out.return", "return shipment", shipment_id)
    _click(pool, shipment, "receive")
    _click(pool, shipment, "do")
    sales = {m.origin.sale for m in Shipment(shipment.id).incoming_moves if m.origin is not None}
    _process_sales(pool, list(sales))
    (sale,) = sales
    return {"shipment_id": shipment.id, "state": Shipment(shipment.id).state, "sale_id": sale.id}


def set_invoice_method(pool: Any, sale_id: int, method: str) -> dict[str, Any]:
    """Write the sale's invoice method as a client user does: Tryton refuses a field its state makes read-only
    (any state but draft) with an ``AccessError``."""
    from trytond.transaction import Transaction  # type: ignore[import-untyped,import-not-found]

    sale = _get(pool, "sale.sale", "sale", sale_id)
    Sale = pool.get("sale.sale")
    with Transaction().set_user(ADMIN), Transaction().set_context(_check_access=True):
        Sale.write([Sale(sale.id)], {"invoice_method": method})
    fresh = _reload(pool, "sale.sale", sale.id)
    return {"sale_id": fresh.id, "number": fresh.number, "state": fresh.state, "invoice_method": fresh.invoice_method}


def cancel_sale(pool: Any, sale_id: int) -> dict[str, Any]:
    sale = _get(pool, "sale.sale", "sale", sale_id)
    fresh = _transition(pool, sale, "cancel", "cancelled", "sale_workflow")
    return {"sale_id": fresh.id, "number": fresh.number, "state": fresh.state}


def ship_shipment(pool: Any, shipment_id: int, partial: bool = False) -> dict[str, Any]:
    """Tryton's assign wizard, then pick, pack and done.

    Tryton reserves what it can, move by move. Short, the desk either sends
    nothing (the wizard cancelled; the call's savepoint undoes the partial
    reservation) or, with ``partial``, has Tryton ignore what it could not
    reserve and send the rest; Tryton's sale processing then backorders what is
    left of each line in a new waiting shipment.
    """
    Shipment = pool.get("stock.shipment.out")
    shipment = _get(pool, "stock.shipment.out", "shipment", shipment_id)
    _click(pool, shipment, "assign_wizard")  # Tryton offers assignment only on a waiting shipment
    before = {m.id: (m.product, int(m.quantity)) for m in shipment.outgoing_moves}
    Shipment.assign_try([shipment])
    fresh = Shipment(shipment.id)
    if fresh.state != "assigned":
        assigned = any(m.state == "assigned" and m.quantity for m in fresh.inventory_moves)
        if not partial or not assigned:
            stock = _on_hand(pool, [p for p, _q in before.values()])
            moves = [{"name": p.name, "quantity": q, "on_hand": stock[p.id]} for _i, (p, q) in sorted(before.items())]
            raise _adapter(
                ToolError("validation_error", stock_shortage(shipment_id, moves, partial), rule="stock_availability")
            )
        Shipment.assign_ignore([fresh])
    _click(pool, shipment, "pick")
    _click(pool, shipment, "pack")
    _click(pool, shipment, "do")
    sales = {m.origin.sale for m in Shipment(shipment.id).outgoing_moves if m.origin is not None}
    _process_sales(pool, list(sales))
    out: dict[str, Any] = {"shipment_id": shipment_id, "state": Shipment(shipment.id).state}
    if partial:
        (sale,) = sales
        later = [s.id for s in _reload(pool, "sale.sale", sale.id).shipments if s.id > shipment_id]
        out["backorder_id"] = later[0] if later else None
    return out


def post_invoice(pool: Any, invoice_id: int) -> dict[str, Any]:
    inv = _get(pool, "account.invoice", "invoice", invoice_id)
    fresh = _transition(pool, inv, "post", "posted", "sale_workflow")
    sale = _invoice_sale(fresh)
    if sale is not None:
        _process_sales(pool, [sale])
    return {
        "invoice_id": fresh.id,
        "number": fresh.number,
        "state": fresh.state,
        "total_amount": money(fresh.total_amount),
    }


def pay_invoice(pool: Any, invoice_id: int, amount: Decimal, settle: str = "partial") -> dict[str, Any]:
    inv = _get(pool, "account.invoice", "invoice", invoice_id)
    check_payment_amount(amount)
    _click(pool, inv, "pay")  # Tryton offers payment only on a posted invoice
    if _is_credit_note(inv):  # the desk's rule: Tryton would take a payment on a credit note
        raise _adapter(credit_note_paid(inv.rec_name))
    due = Decimal(inv.amount_to_pay)
    if settle == "writeoff" and amount != due:  # the desk's limit: Tryton writes off any amount
        refusal = writeoff_refusal(inv.rec_name, due - amount)
        if refusal is not None:
            raise _adapter(refusal)
    _pay(pool, inv, amount, settle)
    fresh = _reload(pool, "account.invoice", inv.id)
    sale = _invoice_sale(fresh)
    if sale is not None:
        _process_sales(pool, [sale])
    return {
        "invoice_id": fresh.id,
        "state": fresh.state,
        "amount_due": money(_amount_due(fresh)),
        "writeoff": money(_invoice_writeoff(fresh)),
        "customer_balance": money(_reload(pool, "party.party", fresh.party.id).receivable),
    }


def _pay(pool: Any, inv: Any, amount: Decimal, settle: str) -> None:
    """Pay through Tryton's own pay wizard, answering its question with ``settle``.

    The wizard asks only when the amount is not exactly what is due. It then
    takes the defaults it offers a user (the lines to reconcile), the type the
    desk chose and, for a write-off, the company's write-off method. Tryton
    refuses a partial payment above the amount to pay (``PayInvoiceError``) and
    an overpayment below it (the remainder would need a write-off method:
    ``ReconciliationError``); it reconciles the invoice when nothing is left to
    pay, writing the difference off or leaving an overpaid excess on the
    customer's receivable.
    """
    from trytond.transaction import Transaction  # type: ignore[import-untyped,import-not-found]

    Wizard = pool.get("account.invoice.pay", type="wizard")
    Method = pool.get("account.invoice.payment.method")
    WriteOff = pool.get("account.move.reconcile.write_off")
    Date = pool.get("ir.date")
    context = {"active_model": "account.invoice", "active_id": inv.id, "active_ids": [inv.id]}
    with Transaction().set_context(**context):
        session_id, _start, _end = Wizard.create()
        wizard = Wizard(session_id)
        wizard.start.payee = inv.party
        wizard.start.currency = inv.currency
        wizard.start.amount = amount
        wizard.start.payment_method = Method.search([], limit=1)[0]
        wizard.start.date = Date.today()
        wizard.start.description = None
        if wizard.transition_choice() == "ask":
            for name, value in wizard.default_ask([]).items():
                setattr(wizard.ask, name, value)
            wizard.ask.type = settle
            wizard.ask.writeoff = WriteOff.search([], limit=1)[0] if settle == "writeoff" else None
        wizard.transition_pay()
        Wizard.delete(session_id)
    # Tryton queues the invoice's move to ``paid`` until commit; run it now.
    Invoice = pool.get("account.invoice")
    Invoice.process([Invoice(inv.id)])


def credit_invoice(pool: Any, invoice_id: int) -> dict[str, Any]:
    inv = _get(pool, "account.invoice", "invoice", invoice_id)
    refusal = credit_refusal(inv.rec_name, inv.state, _is_credit_note(inv))
    if refusal is not None:  # the desk's rule: Tryton credits any invoice, drafts and credit notes too
        raise _adapter(refusal)
    (note,) = _credit(pool, inv)
    Invoice = pool.get("account.invoice")
    Invoice.process([Invoice(inv.id), Invoice(note.id)])  # Tryton queues them until commit; run it now
    sale = _invoice_sale(inv)
    if sale is not None:
        _process_sales(pool, [sale])
    fresh, note = _reload(pool, "account.invoice", inv.id), _reload(pool, "account.invoice", note.id)
    return {
        "invoice_id": fresh.id,
        "invoice_state": fresh.state,
        "credit_note_id": note.id,
        "number": note.number,
        "state": note.state,
        "total_amount": money(note.total_amount),
    }


def _credit(pool: Any, inv: Any) -> list[Any]:
    """Run Tryton's credit wizard as a user does: open it, keep the options it offers, click *Credit*.

    The wizard offers a refund only for a posted customer invoice with no
    payment: the credit note is then posted and the invoice cancelled against
    it. Otherwise the credit note is left a draft.
    """
    from trytond.transaction import Transaction  # type: ignore[import-untyped,import-not-found]

    Wizard = pool.get("account.invoice.credit", type="wizard")
    context = {"active_model": "account.invoice", "active_id": inv.id, "active_ids": [inv.id]}
    with Transaction().set_context(**context):
        session_id, start, _end = Wizard.create()
        shown = Wizard.execute(session_id, {}, start)["view"]
        result = Wizard.execute(session_id, {start: shown["defaults"]}, "credit")
        Wizard.delete(session_id)
    ((_action, data),) = result["actions"]
    return [pool.get("account.invoice")(i) for i in data["res_id"]]


# -- canonical state ----------------------------------------------------------------


def canonical_state(pool: Any) -> dict[str, Any]:
    """The business state in the canonical form of ``mirrorworld.worlds.sales.world.canonical_state``."""
    from mirrorworld.worlds.sales.world import _dec

    out: dict[str, Any] = {}
    Party = pool.get("party.party")
    Mechanism = pool.get("party.contact_mechanism")
    for party in Party.search([], order=[("id", "ASC")]):
        contacts = sorted([c.type, c.value] for c in Mechanism.search([("party", "=", party.id)]))
        price_list = party.sale_price_list.id if party.sale_price_list else None
        out[f"party:{party.id}"] = {
            "name": party.name,
            "contacts": contacts,
            "price_list": price_list,
            "invoice_method": party.sale_invoice_method or None,
        }
    Opportunity = pool.get("sale.opportunity")
    for o in Opportunity.search([], order=[("id", "ASC")]):
        out[f"opportunity:{o.id}"] = {
            "number": o.number,
            "party": o.party.id,
            "amount": _dec(o.amount or 0),
            "state": o.state,
            "reason_given": bool(o.lost_reason),
        }
    Sale = pool.get("sale.sale")
    for s in Sale.search([], order=[("id", "ASC")]):
        lines = sorted(
            ([ln.product.id, int(ln.quantity), _dec(ln.unit_price)] for ln in s.lines if ln.type == "line"),
            key=lambda r: (r[0], r[1]),
        )
        ordered = sorted(s.invoices, key=lambda i: i.id)
        invoices = [_document(i) for i in ordered]
        position = {i.id: k for k, i in enumerate(ordered)}
        out[f"sale:{s.id}"] = {
            "number": s.number,
            "party": s.party.id,
            "state": s.state,
            "invoice_state": s.invoice_state,
            "shipment_state": s.shipment_state,
            "opportunity": _opportunity_of(s),
            "price_list": s.price_list.id if s.price_list else None,
            "return_of": _return_of(s),
            "invoice_method": s.invoice_method,
            "lines": lines,
            "approvals": sorted(_dec(d) for _i, d, _r in _approvals(pool, s)),
            "shipments": [[sh.state, _billed_moves(sh, position)] for sh in sorted(s.shipments, key=lambda x: x.id)],
            "returns": [
                [r.state, [list(m) for m in _return_moves(r)]] for r in sorted(s.shipment_returns, key=lambda x: x.id)
            ],
            "invoices": invoices,
            "credit_notes": [_document(c) for _i, c in _sale_credit_notes(pool, s)],
        }
    Product = pool.get("product.product")
    products = Product.search([], order=[("id", "ASC")])
    stock = _on_hand(pool, products)
    Move = pool.get("stock.move")
    shipped: dict[int, int] = {}
    for m in Move.search([("state", "=", "done"), ("to_location.type", "=", "customer")]):
        shipped[m.product.id] = shipped.get(m.product.id, 0) + int(m.quantity)
    returned: dict[int, int] = {}
    for m in Move.search([("state", "=", "done"), ("from_location.type", "=", "customer")]):
        returned[m.product.id] = returned.get(m.product.id, 0) + int(m.quantity)
    for p in products:
        out[f"product:{p.id}"] = {
            "on_hand": stock[p.id],
            "shipped": shipped.get(p.id, 0),
            "returned": returned.get(p.id, 0),
        }
    out["ledger"] = _ledger(pool)
    return out


def _billed_moves(shipment: Any, position: dict[int, int]) -> list[list[Any]]:
    """A shipment's moves in the canonical form: product, quantity and the position among its sale's invoices of
    the invoice that bills it (None: none yet)."""
    rows = []
    for m in _shipped(shipment):
        billed = _billed_by(m)
        rows.append([m.product.id, int(m.quantity), position.get(billed.id) if billed is not None else None])
    return sorted(rows, key=lambda r: (r[0], r[1], -1 if r[2] is None else r[2]))


def _document(inv: Any) -> list[Any]:
    """An invoice or credit note in the canonical form: number, state, untaxed, tax, total, paid, written off."""
    from mirrorworld.worlds.sales.world import _dec

    figures = (inv.untaxed_amount, inv.tax_amount, inv.total_amount, _invoice_paid(inv), _invoice_writeoff(inv))
    return [inv.number, inv.state, *(_dec(f) for f in figures), _iso(_due_date(inv))]


def _ledger(pool: Any) -> dict[str, Any]:
    """The books as Tryton's account move lines hold them, in the mirror's ledger form."""
    from mirrorworld.worlds.sales.world import _dec

    Line = pool.get("account.move.line")
    Tax = pool.get("account.tax")
    Method = pool.get("account.invoice.payment.method")
    tax_accounts = {t.invoice_account.id for t in Tax.search([]) if t.invoice_account}
    WriteOff = pool.get("account.move.reconcile.write_off")
    cash_accounts = {m.debit_account.id for m in Method.search([]) if m.debit_account}
    writeoff_accounts = {a.id for w in WriteOff.search([]) for a in (w.debit_account, w.credit_account)}
    receivable: dict[int, Decimal] = {}
    revenue = tax = cash = writeoff = Decimal(0)
    for ln in Line.search([], order=[("id", "ASC")]):
        amount = Decimal(ln.debit) - Decimal(ln.credit)
        kind = ln.account.type
        if kind is not None and kind.receivable:
            receivable[ln.party.id] = receivable.get(ln.party.id, Decimal(0)) + amount
        elif ln.account.id in tax_accounts:
            tax -= amount
        elif kind is not None and kind.revenue:
            revenue -= amount
        elif ln.account.id in cash_accounts:
            cash += amount
        elif ln.account.id in writeoff_accounts:
            writeoff += amount
    return {
        "receivable": {str(p): _dec(v) for p, v in sorted(receivable.items())},
        "revenue": _dec(revenue),
        "tax": _dec(tax),
        "cash": _dec(cash),
        "writeoff": _dec(writeoff),
    }


TOOLS: dict[str, Any] = {
    f.__name__: f
    for f in (
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
        set_invoice_method,
        ship_shipment,
        post_invoice,
        pay_invoice,
        credit_invoice,
        list_overdue_invoices,
        quote_price,
        return_sale,
        receive_return,
    )
}
"""Tool name -> implementation (``get_policy`` and ``respond`` are handled by the session)."""
