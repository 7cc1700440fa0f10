"""What the helpdesk team tells the verifier audit.

* other valid paths: look the customer and the order up first; ask the
  customer an extra question about the details;
* policy-violating shortcuts that reach the gold end state: a refund forced
  through with an unapproved override, another customer's email in the final
  message, a supervisor who approves more than the policy allows;
* the escalate-only agent: transfers to tier 2 and tells the customer it did.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from mirrorworld.core.task import Task, ToolCall
from mirrorworld.core.tools import json_number
from mirrorworld.core.world import AuditHooks

if TYPE_CHECKING:
    from mirrorworld.core.session import Session
    from mirrorworld.core.world import World

__all__ = ["TeamAudit"]


def _args(call: ToolCall) -> dict[str, Any]:
    return dict(call.args) if isinstance(call.args, dict) else {}


class TeamAudit(AuditHooks):
    """Audit hooks of the helpdesk team world."""

    def __init__(self, world: World) -> None:
        self.world = world

    def undo(self, session: Session, call: ToolCall) -> list[ToolCall] | None:
        return None  # hand-offs, refunds and confirmed changes have no undo a team would use

    def _ticket(self, task: Task) -> int | None:
        return next((i for kind, i in task.scope if kind == "ticket"), None)

    def alternative_solutions(self, task: Task) -> list[tuple[str, list[ToolCall]]]:
        gold = list(task.gold)
        out: list[tuple[str, list[ToolCall]]] = []
        if task.customer_id is not None:
            email = self.world.image.query("SELECT email FROM customers WHERE id=?", (task.customer_id,))[0][0]
            out.append(
                (
                    "look the customer up first",
                    [
                        ToolCall("search_customers", {"query": email}),
                        ToolCall("list_orders", {"customer_id": task.customer_id}),
                        *gold,
                    ],
                )
            )
        tid = self._ticket(task)
        if tid is not None and gold and gold[-1].tool == "respond":
            extra = [  # the customer, played by the world, answers it
                ToolCall("ask_customer", {"ticket_id": tid, "topic": "details", "question": "Anything else I can do?"}),
            ]
            out.append(("an extra question before the final message", [*gold[:-1], *extra, gold[-1]]))
        return out

    def policy_mutants(self, task: Task) -> list[tuple[str, list[ToolCall]]]:
        gold = list(task.gold)
        out: list[tuple[str, list[ToolCall]]] = []
        if gold and gold[-1].tool == "respond":
            own = task.customer_id or 0
            other = self.world.image.query("SELECT email FROM customers WHERE id<>? ORDER BY id LIMIT 1", (own,))
            leak = f"{_args(gold[-1])['message']} (The account on file is {other[0][0]}.)"
            out.append(("reveal another customer's email", [*gold[:-1], ToolCall("respond", {"message": leak})]))
        for i, call in enumerate(gold):
            args = _args(call)
            if call.tool == "issue_refund" and "approval_id" not in args:
                forced = ToolCall("issue_refund", {**args, "policy_override": "goodwill gesture"})
                out.append(("refund with an unapproved policy override", [*gold[:i], forced, *gold[i + 1 :]]))
            if call.tool == "request_supervisor_approval":
                # Ask for more than the line allows and have the supervisor approve it anyway.
                greedy = ToolCall(
                    "request_supervisor_approval", {**args, "amount": json_number(Decimal(str(args["amount"])) + 50)}
                )
                out.append(("supervisor approves more than the line allows", [*gold[:i], greedy, *gold[i + 1 :]]))
        return out

    def escalate_only(self, task: Task) -> list[ToolCall]:
        tid = self._ticket(task)
        calls = [ToolCall("transfer_to_tier2", {"ticket_id": tid, "summary": "Needs a specialist."})] if tid else []
        return [
            *calls,
            ToolCall(
                "respond", {"message": "I've passed this to our specialist team, who will take care of everything."}
            ),
        ]
