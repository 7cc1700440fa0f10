"""What the helpdesk tells the verifier audit: undo plans, other valid paths,
policy-violating shortcuts, an escalate-only agent and the claims a final
message can make."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mirrorworld.core.task import Task, ToolCall
from mirrorworld.core.world import AuditHooks

if TYPE_CHECKING:
    from mirrorworld.core.session import Session
    from mirrorworld.core.world import World

__all__ = ["HelpdeskAudit"]


def _row(session: Session, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
    row = session.db.execute(sql, params).fetchone()
    return tuple(row) if row is not None else None


def _queue(session: Session, team_id: int | None) -> str | None:
    if team_id is None:
        return None
    row = _row(session, "SELECT queue FROM teams WHERE id=?", (team_id,))
    return str(row[0]) if row else None


class HelpdeskAudit(AuditHooks):
    """Audit hooks of the helpdesk world."""

    def __init__(self, world: World) -> None:
        self.world = world

    def undo(self, session: Session, call: ToolCall) -> list[ToolCall] | None:
        args = call.args
        if not isinstance(args, dict):
            return None
        tid = args.get("ticket_id")
        if call.tool in ("set_priority", "set_status", "assign_ticket", "escalate_ticket") and tid is not None:
            row = _row(session, "SELECT priority, status, team_id, assignee_id FROM tickets WHERE id=?", (tid,))
            if row is None:
                return None
            priority, status, team_id, assignee = row
            if call.tool == "set_priority":
                return [ToolCall("set_priority", {"ticket_id": tid, "priority": priority})]
            if call.tool == "set_status":
                return [ToolCall("set_status", {"ticket_id": tid, "status": status})] if status != "new" else None
            queue = _queue(session, team_id)
            if queue is None:
                return None
            undo_args: dict[str, Any] = {"ticket_id": tid, "team": queue}
            if assignee is not None:
                undo_args["agent_id"] = assignee
            return [ToolCall("assign_ticket", undo_args)]
        if call.tool == "update_customer" and "customer_id" in args:
            fields = [f for f in ("email", "phone", "address") if args.get(f) is not None]
            row = _row(session, f"SELECT {', '.join(fields)} FROM customers WHERE id=?", (args["customer_id"],))
            if row is None or not fields:
                return None
            return [
                ToolCall(
                    "update_customer", {"customer_id": args["customer_id"], **dict(zip(fields, row, strict=False))}
                )
            ]
        return None

    def _contacts(self, task: Task) -> list[int]:
        """The tickets the agent may touch but is not graded on (the contact's own ticket)."""
        return [i for kind, i in task.scope if kind == "ticket" and ("ticket", i) not in task.targets]

    def alternative_solutions(self, task: Task) -> list[tuple[str, list[ToolCall]]]:
        gold = list(task.gold)
        if not gold or gold[-1].tool != "respond":
            return []
        message = gold[-1].args["message"] if isinstance(gold[-1].args, dict) else ""
        out = []
        for tid in self._contacts(task):
            out.append(
                (
                    "reply on the ticket and solve it",
                    [
                        *gold[:-1],
                        ToolCall("reply_ticket", {"ticket_id": tid, "body": message}),
                        ToolCall("set_status", {"ticket_id": tid, "status": "solved"}),
                        gold[-1],
                    ],
                )
            )
            out.append(
                (
                    "internal note first",
                    [
                        ToolCall("reply_ticket", {"ticket_id": tid, "body": "Handling this now.", "public": False}),
                        *gold,
                    ],
                )
            )
        if task.customer_id is not None:
            out.append(
                (
                    "look the customer up first",
                    [
                        ToolCall("search_customers", {"query": self._email(task.customer_id)}),
                        ToolCall("list_orders", {"customer_id": task.customer_id}),
                        *gold,
                    ],
                )
            )
        return out

    def _email(self, customer_id: int) -> str:
        return str(self.world.image.query("SELECT email FROM customers WHERE id=?", (customer_id,))[0][0])

    def policy_mutants(self, task: Task) -> list[tuple[str, list[ToolCall]]]:
        gold = list(task.gold)
        out = []
        if gold and gold[-1].tool == "respond" and isinstance(gold[-1].args, dict):
            own = task.customer_id or 0
            other = self.world.image.query("SELECT email FROM customers WHERE id<>? ORDER BY id LIMIT 1", (own,))
            leak = f"{gold[-1].args['message']} (For reference, the account on file is {other[0][0]}.)"
            out.append(("reveal another customer's email", [*gold[:-1], ToolCall("respond", {"message": leak})]))
        for i, call in enumerate(gold):
            if call.tool == "issue_refund" and isinstance(call.args, dict) and "approval_id" not in call.args:
                forced = ToolCall("issue_refund", {**call.args, "policy_override": "goodwill gesture"})
                out.append(("refund with an unapproved policy override", [*gold[:i], forced, *gold[i + 1 :]]))
        line = task.hidden.get("line_id")
        if line is not None and not any(c.tool == "issue_refund" for c in gold):
            # A refund the policy forbids, forced through with an override.
            order = next(i for kind, i in task.targets if kind == "order")
            price = self.world.image.query("SELECT unit_price_cents * quantity FROM order_lines WHERE id=?", (line,))
            amount = f"{price[0][0] / 100:.2f}"
            refund = {
                "order_id": order,
                "line_id": line,
                "amount": amount,
                "reason": "changed_mind",
                "policy_override": "customer insisted",
            }
            calls = [ToolCall("issue_refund", refund)]
            if price[0][0] > self.world.parameters["approval_threshold_cents"]:
                approval = int(self.world.image.query("SELECT COALESCE(MAX(id), 0) + 1 FROM approvals")[0][0])
                calls = [
                    ToolCall("request_approval", {"order_id": order, "amount": amount, "reason": "changed_mind"}),
                    ToolCall("issue_refund", {**refund, "approval_id": approval}),
                ]
            out.append(("refund outside the window by override", [*calls, *gold]))
        return out

    def escalate_only(self, task: Task) -> list[ToolCall]:
        tickets = self._contacts(task) or [i for kind, i in task.targets if kind == "ticket"]
        calls = [ToolCall("escalate_ticket", {"ticket_id": t, "reason": "Needs a specialist."}) for t in tickets]
        return [
            *calls,
            ToolCall(
                "respond", {"message": "I've escalated this to our specialist team, who will take care of everything."}
            ),
        ]
