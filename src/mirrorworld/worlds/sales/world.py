"""The sales world: CRM and order-to-cash of Mirror Supply Co., mirrored on a real ERP."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any, ClassVar

from mirrorworld.core.claims import ClaimRule, CustomerText, ForbiddenPromise, PersonalData
from mirrorworld.core.session import Session, Violation
from mirrorworld.core.task import EntityRef, Task, TaskFamily
from mirrorworld.core.tolerance import Tolerance
from mirrorworld.core.tools import ToolSpec
from mirrorworld.core.world import AuditHooks, Rule, World
from mirrorworld.verify.claims import disclosures
from mirrorworld.worlds.sales import claims, data, macros
from mirrorworld.worlds.sales.audit import SalesAudit
from mirrorworld.worlds.sales.rules import EPOCH, PARAMETERS, RULES
from mirrorworld.worlds.sales.tasks import FAMILIES
from mirrorworld.worlds.sales.tools import TOOLS

__all__ = ["SalesWorld", "canonical_state"]

_OWNERS: dict[str, tuple[str, str]] = {
    # table: (entity kind, column holding the entity id)
    "parties": ("party", "id"),
    "addresses": ("party", "party_id"),
    "contacts": ("party", "party_id"),
    "opportunities": ("opportunity", "id"),
    "sales": ("sale", "id"),
    "sale_lines": ("sale", "sale_id"),
    "approvals": ("sale", "sale_id"),
    "shipments": ("sale", "sale_id"),
    "shipment_moves": ("sale", "sale_id"),
    "return_shipments": ("sale", "sale_id"),
    "return_moves": ("sale", "sale_id"),
    "invoices": ("sale", "sale_id"),
}


def _dec(value: Any) -> str:
    """A decimal as canonical text: the same number always prints the same (``"12.5"``)."""
    d = Decimal(str(value)).normalize()
    return format(d, "f")


def _party_view(db: sqlite3.Connection, ident: int) -> dict[str, Any] | None:
    row = db.execute("SELECT name, price_list_id, sale_invoice_method FROM parties WHERE id=?", (ident,)).fetchone()
    if row is None:
        return None
    contacts = db.execute("SELECT type, value FROM contacts WHERE party_id=? ORDER BY type, value", (ident,))
    return {"name": row[0], "contacts": [list(c) for c in contacts], "price_list": row[1], "invoice_method": row[2]}


def _opportunity_view(db: sqlite3.Connection, ident: int) -> dict[str, Any] | None:
    row = db.execute(
        "SELECT number, party_id, amount, state, lost_reason FROM opportunities WHERE id=?", (ident,)
    ).fetchone()
    if row is None:
        return None
    return {"number": row[0], "party": row[1], "amount": _dec(row[2]), "state": row[3], "reason_given": bool(row[4])}


def _moves(db: sqlite3.Connection, shipment_id: int, billed_by: Mapping[int, int]) -> list[list[Any]]:
    """A shipment's moves: product, quantity and which of its sale's invoices bills it (its position among them,
    ``billed_by``; None: none yet)."""
    rows = db.execute(
        "SELECT product_id, quantity, invoice_id FROM shipment_moves WHERE shipment_id=? "
        "ORDER BY product_id, quantity, invoice_id",
        (shipment_id,),
    ).fetchall()
    return [[p, q, billed_by.get(i) if i is not None else None] for p, q, i in rows]


def _return_moves(db: sqlite3.Connection, shipment_id: int) -> list[list[int]]:
    """A return shipment's moves: product and quantity received back."""
    rows = db.execute(
        "SELECT product_id, quantity FROM return_moves WHERE shipment_id=? ORDER BY product_id, quantity",
        (shipment_id,),
    ).fetchall()
    return [[p, q] for p, q in rows]


def _sale_view(db: sqlite3.Connection, ident: int) -> dict[str, Any] | None:
    row = db.execute(
        "SELECT number, party_id, state, invoice_state, shipment_state, opportunity_id, price_list_id, return_of, "
        "invoice_method FROM sales WHERE id=?",
        (ident,),
    ).fetchone()
    if row is None:
        return None
    lines = db.execute(
        "SELECT product_id, quantity, unit_price FROM sale_lines WHERE sale_id=? ORDER BY product_id, quantity, id",
        (ident,),
    ).fetchall()
    approvals = db.execute("SELECT discount FROM approvals WHERE sale_id=? ORDER BY id", (ident,)).fetchall()
    shipments = db.execute("SELECT id, state FROM shipments WHERE sale_id=? ORDER BY id", (ident,)).fetchall()
    returns = db.execute("SELECT id, state FROM return_shipments WHERE sale_id=? ORDER BY id", (ident,)).fetchall()
    invoices = db.execute(
        "SELECT number, state, untaxed, tax, total, paid, writeoff, due_date, credit_of IS NOT NULL, id FROM invoices "
        "WHERE sale_id=? ORDER BY id",
        (ident,),
    ).fetchall()
    billed_by = {i[9]: k for k, i in enumerate(i for i in invoices if not i[8])}
    return {
        "number": row[0],
        "party": row[1],
        "state": row[2],
        "invoice_state": row[3],
        "shipment_state": row[4],
        "opportunity": row[5],
        "price_list": row[6],
        "return_of": row[7],
        "invoice_method": row[8],
        "lines": [[p, q, _dec(u)] for p, q, u in lines],
        "approvals": sorted(_dec(a[0]) for a in approvals),
        "shipments": [[s[1], _moves(db, s[0], billed_by)] for s in shipments],
        "returns": [[r[1], _return_moves(db, r[0])] for r in returns],
        "invoices": [_document(i) for i in invoices if not i[8]],
        "credit_notes": [_document(i) for i in invoices if i[8]],
    }


def _document(row: tuple[Any, ...]) -> list[Any]:
    """An invoice or credit note: number, state, untaxed, tax, total, paid, written off, due date."""
    number, state, *figures = row[:7]
    return [number, state, *(_dec(f) for f in figures), row[7]]


def canonical_state(db: sqlite3.Connection) -> dict[str, Any]:
    """The whole business state in the canonical form both backends export.

    Keys are ``kind:id``; values are the outcome views of every party,
    opportunity and sale plus each product's stock on hand. Bookkeeping that
    only says *when* or *who* (dates, employees, free-text reasons) is left
    out; amounts are normalised decimals.
    """
    out: dict[str, Any] = {}
    for (pid,) in db.execute("SELECT id FROM parties ORDER BY id").fetchall():
        out[f"party:{pid}"] = _party_view(db, pid)
    for (oid,) in db.execute("SELECT id FROM opportunities ORDER BY id").fetchall():
        out[f"opportunity:{oid}"] = _opportunity_view(db, oid)
    for (sid,) in db.execute("SELECT id FROM sales ORDER BY id").fetchall():
        out[f"sale:{sid}"] = _sale_view(db, sid)
    shipped = dict(
        db.execute(
            "SELECT m.product_id, SUM(m.quantity) FROM shipment_moves m JOIN shipments s ON s.id = m.shipment_id "
            "WHERE s.state = 'done' GROUP BY m.product_id"
        ).fetchall()
    )
    returned = dict(
        db.execute(
            "SELECT m.product_id, SUM(m.quantity) FROM return_moves m JOIN return_shipments r ON r.id = m.shipment_id "
            "WHERE r.state = 'done' GROUP BY m.product_id"
        ).fetchall()
    )
    for pid, on_hand in db.execute("SELECT id, on_hand FROM products ORDER BY id").fetchall():
        out[f"product:{pid}"] = {"on_hand": on_hand, "shipped": shipped.get(pid, 0), "returned": returned.get(pid, 0)}
    out["ledger"] = _ledger(db)
    return out


def _ledger(db: sqlite3.Connection) -> dict[str, Any]:
    """The accounting side effects: what posted invoices, credit notes and payments put on the books.

    Every numbered document is on the books (a refunded invoice too: its
    credit note's entry cancels it). ``receivable`` per customer (invoiced
    and not yet paid or written off, less credit notes and what was received
    beyond an invoice) and, for the company, ``revenue`` (untaxed amounts),
    ``tax`` collected, ``cash`` received and ``writeoff`` (the expense of what
    was written off, negative for an excess kept); the twin reads the same
    figures off Tryton's account move lines.
    """
    rows = db.execute(
        "SELECT s.party_id, i.untaxed, i.tax, i.total, i.paid, i.writeoff, i.overpaid FROM invoices i "
        "JOIN sales s ON s.id = i.sale_id WHERE i.number IS NOT NULL ORDER BY i.id"
    ).fetchall()
    receivable: dict[int, Decimal] = {}
    revenue = tax = cash = writeoff = Decimal(0)
    for party, untaxed, taxed, total, paid, written, over in rows:
        due = Decimal(total) - Decimal(paid) - Decimal(written) - Decimal(over)
        receivable[party] = receivable.get(party, Decimal(0)) + due
        revenue += Decimal(untaxed)
        tax += Decimal(taxed)
        cash += Decimal(paid) + Decimal(over)
        writeoff += Decimal(written)
    return {
        "receivable": {str(p): _dec(v) for p, v in sorted(receivable.items())},
        "revenue": _dec(revenue),
        "tax": _dec(tax),
        "cash": _dec(cash),
        "writeoff": _dec(writeoff),
    }


class SalesWorld(World):
    """Customers, leads, quotations, orders, shipments, invoices, payments and credit notes (see ``policy.md``).

    ``scale`` (at most 1.0 matters) trims the number of customers; the history
    of leads and sales is the same shape at every scale.
    """

    name = "sales"
    title = "Sales"
    version = 0
    epoch = EPOCH
    source_dir = Path(__file__).resolve().parent
    owners = _OWNERS
    tolerances: ClassVar[Mapping[str, Mapping[str, Tolerance]]] = {
        "opportunities": {
            "description": Tolerance.text("the customer's project, in the salesperson's words"),
            "lost_reason": Tolerance.text("why the customer declined, in the salesperson's words"),
        },
        "sales": {"description": Tolerance.text("a sale's label, in the salesperson's words")},
        "approvals": {"reason": Tolerance.text("why a discount is asked for, in the salesperson's words")},
        "counters": {"next": Tolerance.id("ids the system draws for sale lines; the lines themselves are compared")},
    }
    optional_rows: ClassVar[Mapping[str, str]] = {
        "approvals": "a discount approval asked for and not used: a line's discount still needs its own",
    }

    def declare_tools(self) -> Sequence[ToolSpec]:
        return TOOLS

    def declare_rules(self) -> Sequence[Rule]:
        return RULES

    def declare_parameters(self) -> Mapping[str, Any]:
        return PARAMETERS

    def declare_families(self) -> Sequence[TaskFamily]:
        return FAMILIES

    def generate(self, conn: sqlite3.Connection, rng: random.Random, scale: float) -> None:
        data.generate(conn, rng, scale, self.parameters)

    def outcome_view(self, db: sqlite3.Connection, targets: Sequence[EntityRef]) -> dict[str, Any]:
        view: dict[str, Any] = {}
        for kind, ident in targets:
            if kind == "party":
                view[f"party:{ident}"] = _party_view(db, ident)
            elif kind == "opportunity":
                view[f"opportunity:{ident}"] = _opportunity_view(db, ident)
            elif kind == "sale":
                view[f"sale:{ident}"] = _sale_view(db, ident)
            else:
                raise ValueError(f"sales has no outcome view for {kind}")
        return view

    def audit_hooks(self) -> AuditHooks:
        return SalesAudit(self)

    def guards(self, session: Session) -> list[Violation]:
        return disclosures(session, "data_disclosure")

    def customer_texts(self, session: Session) -> list[CustomerText]:
        return claims.customer_texts(session)

    def menu_macros(self) -> Mapping[str, Sequence[str]]:
        return macros.MACROS

    def claim_rules(self) -> Sequence[ClaimRule]:
        return claims.claim_rules(tuple(t.name for t in self.tools if t.kind == "write"))

    def forbidden_promises(self) -> Sequence[ForbiddenPromise]:
        return claims.PROMISES

    def customer_data(self, task: Task | None = None) -> Sequence[PersonalData]:
        return claims.customer_data(self.image, task)
