"""The helpdesk world: the contact center of Northwind Goods, an online retailer."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from mirrorworld.core.claims import ClaimRule, CustomerText, ForbiddenPromise, PersonalData
from mirrorworld.core.session import Session, Violation
from mirrorworld.core.task import EntityRef, Task, TaskFamily
from mirrorworld.core.tolerance import Tolerance
from mirrorworld.core.tools import ToolSpec
from mirrorworld.core.world import AuditHooks, Rule, World
from mirrorworld.worlds.helpdesk import claims, data, guards, macros
from mirrorworld.worlds.helpdesk.audit import HelpdeskAudit
from mirrorworld.worlds.helpdesk.rules import EPOCH, PARAMETERS, RULES
from mirrorworld.worlds.helpdesk.tasks import FAMILIES
from mirrorworld.worlds.helpdesk.tools import TOOLS

__all__ = ["HelpdeskWorld"]

_OWNERS: dict[str, tuple[str, str]] = {
    # table: (entity kind, column holding the entity id)
    "customers": ("customer", "id"),
    "identity_checks": ("customer", "customer_id"),
    "orders": ("order", "id"),
    "order_lines": ("order", "order_id"),
    "refunds": ("order", "order_id"),
    "approvals": ("order", "order_id"),
    "tickets": ("ticket", "id"),
    "ticket_messages": ("ticket", "ticket_id"),
    "products": ("product", "id"),
    "teams": ("team", "id"),
    "agents": ("agent", "id"),
    "articles": ("article", "id"),
}


class HelpdeskWorld(World):
    """Customers, orders, tickets, refunds and a knowledge base; 24 tools; 9 task families.

    ``scale`` multiplies the number of customers, orders and tickets (1.0 is
    about tau-bench retail's size); ``data_seed`` draws another world of the
    same shape.
    """

    name = "helpdesk"
    title = "Helpdesk"
    version = 0
    epoch = EPOCH
    source_dir = Path(__file__).resolve().parent
    owners = _OWNERS

    def declare_tools(self) -> Sequence[ToolSpec]:
        return TOOLS

    def declare_rules(self) -> Sequence[Rule]:
        return RULES

    def declare_parameters(self) -> Mapping[str, Any]:
        return PARAMETERS

    def declare_families(self) -> Sequence[TaskFamily]:
        return FAMILIES

    def generate(self, conn: sqlite3.Connection, rng: random.Random, scale: float) -> None:
        data.generate(conn, rng, scale)

    def outcome_view(self, db: sqlite3.Connection, targets: Sequence[EntityRef]) -> dict[str, Any]:
        view: dict[str, Any] = {}
        for kind, ident in targets:
            key = f"{kind}:{ident}"
            if kind == "ticket":
                row = db.execute(
                    "SELECT status, priority, team_id, assignee_id, merged_into FROM tickets WHERE id=?", (ident,)
                ).fetchone()
                view[key] = (
                    dict(zip(("status", "priority", "team_id", "assignee_id", "merged_into"), row, strict=True))
                    if row
                    else None
                )
            elif kind == "order":
                row = db.execute("SELECT status FROM orders WHERE id=?", (ident,)).fetchone()
                lines = db.execute(
                    "SELECT id, refunded_cents FROM order_lines WHERE order_id=? ORDER BY id", (ident,)
                ).fetchall()
                refunds = db.execute(
                    "SELECT COALESCE(order_line_id, 0), amount_cents, reason FROM refunds WHERE order_id=? "
                    "ORDER BY 1, 2, 3",
                    (ident,),
                ).fetchall()
                approvals = db.execute(
                    "SELECT DISTINCT amount_cents, reason, status FROM approvals WHERE order_id=? ORDER BY 1, 2, 3",
                    (ident,),
                ).fetchall()
                view[key] = (
                    {
                        "status": row[0],
                        "refunded": {str(i): c for i, c in lines},
                        "refunds": [list(r) for r in refunds],
                        "approvals": [list(a) for a in approvals],
                    }
                    if row
                    else None
                )
            elif kind == "customer":
                cols = ("email", "phone", "address", "city", "zip", "tier")
                row = db.execute(f"SELECT {', '.join(cols)} FROM customers WHERE id=?", (ident,)).fetchone()
                view[key] = dict(zip(cols, row, strict=True)) if row else None
            else:
                raise ValueError(f"helpdesk has no outcome view for {kind}")
        return view

    hidden_columns = {"customers": ("security_pin", "risk_score")}  # noqa: RUF012 - read-only by convention
    volatile_columns = {  # noqa: RUF012 - read-only by convention
        "tickets": ("updated_at",),
        "ticket_messages": ("created_at",),
        "refunds": ("created_at",),
        "approvals": ("created_at",),
        "identity_checks": ("created_at",),
    }
    tolerances: ClassVar[Mapping[str, Mapping[str, Tolerance]]] = {
        "tickets": {
            "status": Tolerance.choice(
                ("open", "pending", "solved"),
                "a reply opens a new ticket, and a contact answered may be left pending or solved; "
                "closing is final and is never a variant",
            ),
        },
        "ticket_messages": {
            "body": Tolerance.text(
                "a reply or an internal note in the agent's words (an escalation note adds one word of its own)",
                words=3,
            ),
        },
        "refunds": {
            "override_reason": Tolerance.text("the justification of an override, in the agent's words"),
        },
    }
    optional_rows: ClassVar[Mapping[str, str]] = {
        "ticket_messages": "a public reply or an internal note on a ticket of the contact",
        "approvals": "a supervisor approval asked for and not needed: a refund still needs its own",
        "identity_checks": "an identity check proves who is calling and changes nothing",
    }

    def progress_marks(self, session: Session) -> tuple[bool, ...]:
        """Identity verified and approval obtained, for the tasks whose solution needs them.

        Both are what the tool's own result already tells the agent
        (``verified``, the approval's ``status``), so they reveal nothing graded.
        """
        task = session.task
        if task is None:
            return ()
        tools = {c.tool for c in task.gold}
        identity, approval = "verify_identity" in tools, "request_approval" in tools
        if not (identity or approval):
            return ()
        marks: list[bool] = []
        with session.borrow() as db:
            if identity and task.customer_id is not None:
                row = db.execute(
                    "SELECT 1 FROM identity_checks WHERE customer_id=? AND passed=1 LIMIT 1", (task.customer_id,)
                ).fetchone()
                marks.append(row is not None)
            if approval:
                orders = [ident for kind, ident in task.targets if kind == "order"]
                row = (
                    db.execute(
                        "SELECT 1 FROM approvals WHERE status='approved' "
                        f"AND order_id IN ({','.join('?' * len(orders))}) LIMIT 1",
                        orders,
                    ).fetchone()
                    if orders
                    else None
                )
                marks.append(row is not None)
        return tuple(marks)

    def guards(self, session: Session) -> list[Violation]:
        return guards.disclosed(session)

    def audit_hooks(self) -> AuditHooks:
        return HelpdeskAudit(self)

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
