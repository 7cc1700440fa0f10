"""What each role sees: its briefing and its inbox.

A role's observation is built from these and from the results of its own
calls, nothing else (partial observability):

* the **customer** is briefed with their own profile (``task.hidden["customer"]``:
  who they are, what they want, what only they know) and reads the agents'
  questions, confirmation requests and the final message;
* **tier 1** is briefed with the customer's opening chat (the task's
  instruction) and reads the customer's replies and the supervisor's decisions;
* the **supervisor** is briefed with their duty and reads approval requests;
* **tier 2** is briefed with their duty and reads transfers, then the chat.

Nothing else of ``task.hidden`` (the gold plan, grader notes) reaches any
role, and no role sees another's mailbox or inbox.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from mirrorworld.core.session import Session
from mirrorworld.core.task import Task
from mirrorworld.worlds.helpdesk.tools import dollars
from mirrorworld.worlds.helpdesk_team.rules import CUSTOMER, ROLE_TOOLS, SUPERVISOR, TIER1, TIER2

__all__ = ["INBOX_LIMIT", "briefing", "contact_over", "inbox"]

INBOX_LIMIT = 12
"""How many of its latest messages a role's inbox shows."""

_PERSONAS = {
    "polite": "You are friendly and patient in how you write.",
    "terse": "You write as few words as possible.",
    "anxious": "You are worried and say so, but you answer what you are asked.",
}
_HONESTY = {
    "honest": "You answer every question truthfully and directly.",
    "evasive": "You dodge the first question you are asked (without giving any number) and answer when asked again.",
}


def _facts(facts: dict[str, Any]) -> list[str]:
    out = []
    order, wrong = facts.get("order_number"), facts.get("wrong_order_number")
    if wrong is not None:
        out.append(
            f"You remember your order number as #{wrong}, but you are mistaken: when told it is not on your "
            f"account, you check your receipt and find the right one, #{order}."
        )
    elif order is not None:
        out.append(f"Your order number is #{order}.")
    if facts.get("product"):
        out.append(f"The item is the {facts['product']}.")
    if facts.get("new_email"):
        out.append(f"The new email address you want is {facts['new_email']}.")
    known = {"order_number", "wrong_order_number", "product", "new_email"}
    out += [
        f"{key.replace('_', ' ').capitalize()}: {value}" for key, value in sorted(facts.items()) if key not in known
    ]
    return out


def customer_briefing(profile: dict[str, Any]) -> str:
    """The customer's briefing, from their profile."""
    lines = [
        f"You are {profile['name']} ({profile['email']}), a customer of Northwind Goods, "
        f"in live chat #{profile['ticket_id']} with its support team.",
        f"Your goal: {profile['goal']}",
        "What you know:",
        *(f"- {f}" for f in _facts(profile.get("facts", {}))),
        "How you behave:",
        f"- {_PERSONAS.get(profile.get('persona', ''), 'You write naturally.')}",
        f"- {_HONESTY.get(profile.get('honesty', ''), _HONESTY['honest'])}",
        f"- If nobody writes to you for {profile['patience']} turns in a row, you give up and leave the chat.",
        "- Codes Northwind Goods emails you are in your mailbox (check_email); you read them to the agent when asked.",
        "- Confirm a change the agent proposes only if it is what you asked for.",
        f"Your tools: {', '.join(ROLE_TOOLS[CUSTOMER])}. Wait when there is nothing to answer.",
    ]
    return "\n".join(lines)


def briefing(task: Task, role: str) -> str:
    """What ``role`` knows when the contact starts."""
    if role == CUSTOMER:
        profile = task.hidden.get("customer")
        if not isinstance(profile, dict):
            return "You are a customer of Northwind Goods in a live chat with its support team."
        return customer_briefing(profile)
    tools = ", ".join(ROLE_TOOLS[role])
    if role == TIER1:
        return (
            "You are a tier-1 support agent of Northwind Goods, working in a team with the duty supervisor and "
            "tier 2 (Escalations). The team policy (get_policy) governs everything you do.\n"
            f"{task.instruction}\n"
            "Ask the customer what only they know (ask_customer), ask the supervisor for approvals, transfer to "
            "tier 2 what you cannot finish, and end the contact with respond.\n"
            f"Your tools: {tools}."
        )
    if role == SUPERVISOR:
        return (
            "You are the duty supervisor of the Northwind Goods contact center. Refund approval requests from "
            "agents arrive in your inbox; decide each one with decide_approval, approving only what the policy "
            f"(get_policy) allows and denying the rest with a reason.\nYour tools: {tools}."
        )
    if role == TIER2:
        return (
            "You are a tier-2 agent of Northwind Goods (the Escalations team). Contacts tier 1 transfers to you "
            "arrive in your inbox with a summary; take over the chat, resolve it under the policy (get_policy) and "
            f"end it with respond.\nYour tools: {tools}."
        )
    raise ValueError(f"no role {role!r}")


def inbox(session: Session, role: str, limit: int = INBOX_LIMIT) -> dict[str, Any]:
    """The simulated time and the latest messages addressed to ``role``, oldest first."""
    with session.borrow() as db:
        return _inbox(session, db, role, limit)


def _inbox(session: Session, db: sqlite3.Connection, role: str, limit: int) -> dict[str, Any]:
    rows = db.execute(
        "SELECT id, ticket_id, kind, sender, topic, ref_id, body, created_at FROM team_messages WHERE recipient=? "
        "ORDER BY id DESC LIMIT ?",
        (role, limit),
    ).fetchall()
    messages: list[dict[str, Any]] = []
    for mid, ticket_id, kind, sender, topic, ref_id, body, at in reversed(rows):
        item: dict[str, Any] = {"id": mid, "chat": ticket_id, "kind": kind, "from": sender}
        if topic is not None:
            item["topic"] = topic
        if ref_id is not None:
            item["ref"] = ref_id
        item["body"] = body
        item["at"] = at
        if kind == "approval_request" and ref_id is not None:
            req = db.execute(
                "SELECT order_id, line_id, amount_cents, reason, status FROM approval_requests WHERE id=?", (ref_id,)
            ).fetchone()
            if req is not None:
                item["request"] = {
                    "request_id": ref_id,
                    "order_id": req[0],
                    "line_id": req[1],
                    "amount": dollars(req[2]),
                    "reason": req[3],
                    "status": req[4],
                }
        messages.append(item)
    if role == CUSTOMER and session.final_message is not None:
        messages.append({"kind": "final", "from": "agent", "body": session.final_message})
    return {"now": session.clock, "messages": messages}


def contact_over(session: Session) -> bool:
    """Whether the customer has left the chat (the contact ends unresolved)."""
    with session.borrow() as db:
        return db.execute("SELECT 1 FROM team_messages WHERE kind='left' LIMIT 1").fetchone() is not None
