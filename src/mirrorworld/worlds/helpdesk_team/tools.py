"""The helpdesk team's tools: the hand-off protocol and the customer's side of the contact.

Hand-offs are tool calls that write a ``team_messages`` row, so each one is an
event of the session and a row the verifier can count:

* ``ask_customer`` / ``message_agent`` — a question to the customer and the
  customer's reply;
* ``request_supervisor_approval`` / ``decide_approval`` — an approval request
  and the supervisor's decision (which creates the ``approvals`` row that
  ``issue_refund`` consumes);
* ``transfer_to_tier2`` — a transfer with a summary; tier 2 takes over the chat;
* ``propose_account_change`` / ``confirm_change`` — dual control: an agent
  proposes, only the customer's confirmation applies the change.

Who is speaking follows from the caller's role and the state, never from an
argument an agent could forge. The role is the caller's seat
(``ToolContext.role``, set by the team episode); the customer's own tools and
the supervisor's are refused to every other caller with ``not_permitted``
(rule ``party_tools``), a single agent (no role) included, and nobody decides
their own approval request (``separation_of_duties``). A staff message comes
from the caller's seat, or, for a single agent, from whoever holds the contact
(tier 2 once the ticket sits with the Escalations team, tier 1 before).

A single agent plays the staff only; the customer and the supervisor it does
not play answer inside its own calls (:mod:`.simulated`).

The customer's mailbox (``check_email``) is the only place a verification code
is shown; agents learn it only when the customer reads it back.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Annotated, Any, Literal

from mirrorworld.core.session import TIME_FORMAT, ToolContext
from mirrorworld.core.text import clean_text
from mirrorworld.core.tools import FREE_TEXT, Ref, ToolSpec, tool
from mirrorworld.errors import ToolError
from mirrorworld.worlds.helpdesk import tools as hd
from mirrorworld.worlds.helpdesk_team import simulated
from mirrorworld.worlds.helpdesk_team.rules import (
    CODE_VALID_MINUTES,
    CUSTOMER,
    LOST_PARCEL_DAYS,
    SUPERVISOR,
    TIER1,
    TIER2,
)

__all__ = ["TOOLS", "holder", "verification_code"]

TicketId = Annotated[int, Ref("tickets")]
CustomerId = Annotated[int, Ref("customers")]
OrderId = Annotated[int, Ref("orders")]
LineId = Annotated[int, Ref("order_lines")]
RequestId = Annotated[int, Ref("approval_requests")]
ChangeId = Annotated[int, Ref("account_changes")]
Prose = Annotated[str, FREE_TEXT]
Topic = Literal["order_number", "verification_code", "details", "other"]


def verification_code(image_digest: str, customer_id: int, verification_id: int) -> str:
    """The six-digit code emailed as verification ``verification_id``: a pure function of the state."""
    digest = hashlib.sha256(f"{image_digest}/otp/{customer_id}/{verification_id}".encode()).hexdigest()
    return f"{int(digest[:12], 16) % 1_000_000:06d}"


def holder(ctx: ToolContext, ticket: dict[str, Any]) -> str:
    """The role holding a contact: tier 2 once the ticket is with Escalations, tier 1 before."""
    esc = ctx.one("SELECT id FROM teams WHERE queue='escalations'")
    return TIER2 if esc is not None and ticket["team_id"] == esc["id"] else TIER1


def _only(ctx: ToolContext, role: str, tool_name: str) -> None:
    """Refuse the call unless ``role`` makes it (a party's own tool: nobody acts for that party)."""
    if ctx.role != role:
        who = f"the {ctx.role}" if ctx.role is not None else "an agent"
        raise ToolError("not_permitted", f"only the {role} may call {tool_name}, not {who}", rule="party_tools")


def _speaker(ctx: ToolContext, ticket: dict[str, Any]) -> str:
    """Who sends a staff message: the caller's seat, or for a single agent whoever holds the contact.

    Only tier 1 and tier 2 send them: a supervisor asks no customer and requests no approval of its own.
    """
    if ctx.role is None:
        return holder(ctx, ticket)
    if ctx.role not in (TIER1, TIER2):
        raise ToolError("not_permitted", f"only tier 1 and tier 2 send this, not the {ctx.role}", rule="party_tools")
    return ctx.role


def _open_chat(ctx: ToolContext, ticket_id: int) -> dict[str, Any]:
    """The ticket of a live chat: it exists, is not closed, and the customer has not left."""
    ticket = hd.load_ticket(ctx, ticket_id)
    left = ctx.one("SELECT 1 AS x FROM team_messages WHERE ticket_id=? AND kind='left' LIMIT 1", (ticket_id,))
    if left is not None:
        raise ToolError("policy_refused", f"the customer has left chat #{ticket_id}", rule="chat_closed")
    return ticket


def _say(
    ctx: ToolContext,
    ticket_id: int,
    kind: str,
    sender: str,
    recipient: str,
    body: str,
    *,
    topic: str | None = None,
    ref_id: int | None = None,
) -> int:
    cur = ctx.execute(
        "INSERT INTO team_messages (ticket_id, kind, sender, recipient, topic, ref_id, body, created_at) "
        "VALUES (?,?,?,?,?,?,?,?)",
        (ticket_id, kind, sender, recipient, topic, ref_id, body, ctx.now()),
    )
    return int(cur.lastrowid or 0)


def _since(ctx: ToolContext, minutes: int) -> str:
    return (ctx.now_dt() - timedelta(minutes=minutes)).strftime(TIME_FORMAT)


# -- the customer's side -----------------------------------------------------------


@tool("read")
def check_email(ctx: ToolContext, ticket_id: TicketId) -> dict[str, Any]:
    """Open your own mailbox (customer side): the latest emails Northwind Goods sent you.

    Args:
        ticket_id: The chat you are in.
    """
    _only(ctx, CUSTOMER, "check_email")
    return _mailbox(ctx, hd.load_ticket(ctx, ticket_id, writable=False))


def _mailbox(ctx: ToolContext, ticket: dict[str, Any]) -> dict[str, Any]:
    rows = ctx.all(
        "SELECT code, email, created_at FROM verification_codes WHERE customer_id=? ORDER BY id DESC LIMIT 5",
        (ticket["customer_id"],),
    )
    emails = [
        {
            "to": r["email"],
            "subject": "Your Northwind Goods verification code",
            "body": f"Your verification code is {r['code']}. It expires in {CODE_VALID_MINUTES} minutes.",
            "sent_at": r["created_at"],
        }
        for r in rows
    ]
    return {"emails": emails}


@tool("write")
def message_agent(ctx: ToolContext, ticket_id: TicketId, message: Prose) -> dict[str, Any]:
    """Say something in the chat to the support agent handling your request (customer side).

    Args:
        ticket_id: The chat you are in.
        message: What you say.
    """
    _only(ctx, CUSTOMER, "message_agent")
    return _customer_says(ctx, _open_chat(ctx, ticket_id), message)


def _customer_says(ctx: ToolContext, ticket: dict[str, Any], message: str) -> dict[str, Any]:
    to = holder(ctx, ticket)
    mid = _say(ctx, ticket["id"], "reply", CUSTOMER, to, clean_text(message, "message"))
    return {"message_id": mid, "delivered_to": to}


@tool("write")
def confirm_change(ctx: ToolContext, ticket_id: TicketId, change_id: ChangeId, confirm: bool = True) -> dict[str, Any]:
    """Confirm (or decline) a change to your account that the agent asked you to confirm (customer side).

    Args:
        ticket_id: The chat you are in.
        change_id: The change the agent asked you to confirm.
        confirm: True to apply the change, false to decline it.
    """
    _only(ctx, CUSTOMER, "confirm_change")
    return _decide_change(ctx, _open_chat(ctx, ticket_id), change_id, confirm)


def _decide_change(ctx: ToolContext, ticket: dict[str, Any], change_id: int, confirm: bool) -> dict[str, Any]:
    ticket_id = ticket["id"]
    change = ctx.one(
        "SELECT id, customer_id, field, new_value, status FROM account_changes WHERE id=? AND ticket_id=?",
        (change_id, ticket_id),
    )
    if change is None:
        raise ToolError("not_found", f"no change {change_id} was proposed in chat #{ticket_id}")
    if change["status"] != "pending":
        raise ToolError("conflict", f"change {change_id} was already {change['status']}")
    status = "confirmed" if confirm else "declined"
    if confirm:
        field, value = change["field"], change["new_value"]
        if field == "email":
            clash = ctx.one("SELECT id FROM customers WHERE email=? AND id<>?", (value, change["customer_id"]))
            if clash is not None:
                raise ToolError("conflict", "that email address belongs to another account")
        if field not in ("email", "phone", "address"):  # the schema's CHECK admits no other
            raise RuntimeError(f"account change {change_id} names unknown field {field}")
        ctx.execute(f"UPDATE customers SET {field}=? WHERE id=?", (value, change["customer_id"]))
    ctx.execute("UPDATE account_changes SET status=?, decided_at=? WHERE id=?", (status, ctx.now(), change_id))
    word = "confirmed" if confirm else "declined"
    _say(
        ctx,
        ticket_id,
        "confirmation",
        CUSTOMER,
        holder(ctx, ticket),
        f"The customer {word} change {change_id}.",
        ref_id=change_id,
    )
    return {"change_id": change_id, "status": status}


@tool("write")
def leave_chat(ctx: ToolContext, ticket_id: TicketId, reason: Prose) -> dict[str, Any]:
    """Leave the chat without waiting any longer (customer side); the contact ends unresolved.

    Args:
        ticket_id: The chat you are in.
        reason: Why you are leaving.
    """
    _only(ctx, CUSTOMER, "leave_chat")
    ticket = _open_chat(ctx, ticket_id)
    _say(ctx, ticket_id, "left", CUSTOMER, holder(ctx, ticket), clean_text(reason, "reason"))
    return {"ticket_id": ticket_id, "left": True}


# -- agents: talking to the customer -----------------------------------------------


@tool("write")
def ask_customer(ctx: ToolContext, ticket_id: TicketId, topic: Topic, question: Prose) -> dict[str, Any]:
    """Ask the customer a question in the chat; the answer arrives in your inbox.

    Args:
        ticket_id: The chat (ticket) you are handling.
        topic: What you ask for: order_number, verification_code, details or other.
        question: The question as the customer reads it.
    """
    ticket = _open_chat(ctx, ticket_id)
    text = clean_text(question, "question")
    sender = _speaker(ctx, ticket)
    mid = _say(ctx, ticket_id, "question", sender, CUSTOMER, text, topic=topic)
    if ctx.role is None:
        _simulated_customer(
            ctx,
            ticket,
            {"id": mid, "chat": ticket_id, "kind": "question", "from": sender, "topic": topic, "body": text},
        )
    return {"message_id": mid, "ticket_id": ticket_id}


def _simulated_customer(ctx: ToolContext, ticket: dict[str, Any], message: dict[str, Any]) -> None:
    """For a single agent: the task's customer answers ``message`` now (see :mod:`.simulated`)."""
    answered = ctx.one(
        "SELECT COUNT(*) AS n FROM team_messages WHERE ticket_id=? AND kind='question' AND topic='order_number' "
        "AND id<?",
        (ticket["id"], message["id"]),
    )
    action = simulated.customer_answer(
        ctx.session.world,
        ctx.session.task,
        message,
        answered_order_questions=int(answered["n"]) if answered else 0,
        read_mailbox=lambda: _mailbox(ctx, ticket),
    )
    if action is None or not isinstance(action.args, dict):
        return
    if action.tool == "message_agent":
        _customer_says(ctx, ticket, str(action.args.get("message", "")))
    elif action.tool == "confirm_change":
        change_id = action.args.get("change_id")
        if isinstance(change_id, int):
            _decide_change(ctx, ticket, change_id, bool(action.args.get("confirm")))


# -- agents: identity and dual control ---------------------------------------------


@tool("write")
def send_verification_code(ctx: ToolContext, customer_id: CustomerId) -> dict[str, Any]:
    """Email a one-time code to the customer's address on file; ask the customer to read it back to you.

    Args:
        customer_id: The customer's id.
    """
    row = ctx.one("SELECT email FROM customers WHERE id=?", (customer_id,))
    if row is None:
        raise ToolError("not_found", f"no customer {customer_id}")
    nxt = ctx.one("SELECT COALESCE(MAX(id), 0) + 1 AS n FROM verification_codes")
    vid = int(nxt["n"]) if nxt else 1
    code = verification_code(ctx.session.image.digest, customer_id, vid)
    ctx.execute(
        "INSERT INTO verification_codes (id, customer_id, email, code, used, created_at) VALUES (?,?,?,?,0,?)",
        (vid, customer_id, row["email"], code, ctx.now()),
    )
    local, _, domain = str(row["email"]).partition("@")
    return {"verification_id": vid, "sent_to": f"{local[:1]}***@{domain}", "expires_in_minutes": CODE_VALID_MINUTES}


@tool("write")
def verify_code(ctx: ToolContext, customer_id: CustomerId, code: str) -> dict[str, Any]:
    """Check the code the customer read back; a match verifies their identity for 60 minutes.

    Args:
        customer_id: The customer's id.
        code: The code as the customer gave it.
    """
    if ctx.one("SELECT id FROM customers WHERE id=?", (customer_id,)) is None:
        raise ToolError("not_found", f"no customer {customer_id}")
    sent = ctx.one(
        "SELECT id, code FROM verification_codes WHERE customer_id=? AND used=0 AND created_at>=? "
        "ORDER BY id DESC LIMIT 1",
        (customer_id, _since(ctx, CODE_VALID_MINUTES)),
    )
    if sent is None:
        raise ToolError("not_found", f"no unused code was sent to customer {customer_id} in the last 30 minutes")
    digits = "".join(ch for ch in code if ch.isdigit())
    passed = digits == sent["code"]
    if passed:
        ctx.execute("UPDATE verification_codes SET used=1 WHERE id=?", (sent["id"],))
    ctx.execute(
        "INSERT INTO identity_checks (customer_id, passed, created_at) VALUES (?,?,?)",
        (customer_id, int(passed), ctx.now()),
    )
    return {"customer_id": customer_id, "verified": passed}


@tool("write")
def propose_account_change(
    ctx: ToolContext,
    ticket_id: TicketId,
    customer_id: CustomerId,
    field: Literal["email", "phone", "address"],
    new_value: str,
) -> dict[str, Any]:
    """Propose a change to a verified customer's email, phone or address; it applies when the customer confirms.

    Args:
        ticket_id: The chat (ticket) you are handling.
        customer_id: The customer's id.
        field: email, phone or address.
        new_value: The new email address, phone number or street address.
    """
    ticket = _open_chat(ctx, ticket_id)
    if ticket["customer_id"] != customer_id:
        raise ToolError("invalid_arguments", f"chat #{ticket_id} is not with customer {customer_id}")
    value = new_value.strip()
    if field == "email":
        value = value.lower()
        local, _, domain = value.partition("@")
        if not local or "." not in domain or " " in value or len(value) > 254:
            raise ToolError("invalid_arguments", "email is not a valid address")
        if ctx.one("SELECT id FROM customers WHERE email=? AND id<>?", (value, customer_id)) is not None:
            raise ToolError("conflict", "that email address belongs to another account")
    elif field == "phone":
        if not 10 <= sum(ch.isdigit() for ch in value) <= 15:
            raise ToolError("invalid_arguments", "phone must have 10 to 15 digits")
    else:
        value = " ".join(value.split())
        if not value or len(value) > 200:
            raise ToolError("invalid_arguments", "address must be 1 to 200 characters")
    check = ctx.one(
        "SELECT id FROM identity_checks WHERE customer_id=? AND passed=1 AND created_at>=? LIMIT 1",
        (customer_id, _since(ctx, ctx.param("identity_valid_minutes"))),
    )
    if check is None:
        raise ToolError(
            "policy_refused",
            "verify the customer's identity with an emailed code (send_verification_code, verify_code) first",
            rule="identity_verification",
        )
    cur = ctx.execute(
        "INSERT INTO account_changes (customer_id, ticket_id, field, new_value, status, created_at) "
        "VALUES (?,?,?,?,'pending',?)",
        (customer_id, ticket_id, field, value, ctx.now()),
    )
    change_id = int(cur.lastrowid or 0)
    sender = _speaker(ctx, ticket)
    body = f"Please confirm change {change_id}: set the {field} on your account to {value}."
    mid = _say(ctx, ticket_id, "confirmation_request", sender, CUSTOMER, body, ref_id=change_id)
    if ctx.role is None:
        request = {
            "id": mid,
            "chat": ticket_id,
            "kind": "confirmation_request",
            "from": sender,
            "ref": change_id,
            "body": body,
        }
        _simulated_customer(ctx, ticket, request)
        status = ctx.one("SELECT status FROM account_changes WHERE id=?", (change_id,))
        return {"change_id": change_id, "status": status["status"] if status else "pending"}
    return {"change_id": change_id, "status": "pending"}


# -- agents and supervisor: approvals ------------------------------------------------


@tool("write")
def request_supervisor_approval(
    ctx: ToolContext,
    ticket_id: TicketId,
    order_id: OrderId,
    line_id: LineId,
    amount: Decimal,
    reason: hd.RefundReason,
    summary: Prose,
) -> dict[str, Any]:
    """Ask the duty supervisor to approve a refund on one order line; the decision arrives in your inbox.

    Args:
        ticket_id: The chat (ticket) the refund is for.
        order_id: The order to refund.
        line_id: The order line to refund.
        amount: The refund amount in dollars.
        reason: damaged, defective, wrong_item, not_received or changed_mind.
        summary: What the supervisor needs to know to decide.
    """
    ticket = hd.load_ticket(ctx, ticket_id)
    hd.load_order(ctx, order_id)
    line = ctx.one("SELECT id FROM order_lines WHERE id=? AND order_id=?", (line_id, order_id))
    if line is None:
        raise ToolError("not_found", f"order {order_id} has no line {line_id}")
    cents = hd.to_cents(amount)
    by = _speaker(ctx, ticket)
    cur = ctx.execute(
        "INSERT INTO approval_requests (ticket_id, order_id, line_id, amount_cents, reason, summary, requested_by, "
        "status, created_at) VALUES (?,?,?,?,?,?,?,'pending',?)",
        (ticket_id, order_id, line_id, cents, reason, clean_text(summary, "summary"), by, ctx.now()),
    )
    request_id = int(cur.lastrowid or 0)
    _say(ctx, ticket_id, "approval_request", by, SUPERVISOR, " ".join(summary.split()), ref_id=request_id)
    if ctx.role is None:  # a single agent: the duty supervisor decides now, by the policy
        request = ctx.one("SELECT * FROM approval_requests WHERE id=?", (request_id,))
        assert request is not None
        why = _breaks_policy(ctx, request)
        note = "Within the refund policy." if why is None else f"Denied: {why}."
        decided = _decide(ctx, request, "approved" if why is None else "denied", note)
        return {**decided, "amount": hd.dollars(cents)}
    return {"request_id": request_id, "status": "pending", "amount": hd.dollars(cents)}


@tool("read")
def list_approval_requests(
    ctx: ToolContext, status: Literal["pending", "approved", "denied"] | None = None
) -> dict[str, Any]:
    """List refund approval requests (supervisor), oldest first.

    Args:
        status: Only requests in this status.
    """
    _only(ctx, SUPERVISOR, "list_approval_requests")
    rows = ctx.all(
        "SELECT id, ticket_id, order_id, line_id, amount_cents, reason, summary, requested_by, status, "
        "approval_id, note FROM approval_requests WHERE (? IS NULL OR status=?) ORDER BY id LIMIT 20",
        (status, status),
    )
    for r in rows:
        r["amount"] = hd.dollars(r.pop("amount_cents"))
    return {"requests": rows}


def _breaks_policy(ctx: ToolContext, request: dict[str, Any]) -> str | None:
    """Why approving ``request`` would break the refund policy (None: it would not)."""
    order = hd.load_order(ctx, request["order_id"])
    if order["status"] != "delivered":
        return f"order {order['id']} is {order['status']}, not delivered"
    line = ctx.one(
        "SELECT l.quantity, l.unit_price_cents, l.refunded_cents, p.return_window_days FROM order_lines l "
        "JOIN products p ON p.id=l.product_id WHERE l.id=?",
        (request["line_id"],),
    )
    if line is None:
        return f"line {request['line_id']} does not exist"
    remaining = line["quantity"] * line["unit_price_cents"] - line["refunded_cents"]
    if request["amount_cents"] > remaining:
        return f"{hd.dollars(request['amount_cents']):.2f} exceeds the {hd.dollars(remaining):.2f} still refundable"
    end = datetime.fromisoformat(order["delivered_at"]) + timedelta(days=line["return_window_days"])
    if ctx.now_dt() > end:
        return f"the return window ended {end.strftime(TIME_FORMAT)[:10]}"
    return None


@tool("write")
def decide_approval(
    ctx: ToolContext, request_id: RequestId, order_id: OrderId, decision: Literal["approve", "deny"], note: Prose
) -> dict[str, Any]:
    """Approve or deny a pending refund approval request (supervisor); the requester is told at once.

    Args:
        request_id: The approval request.
        order_id: The order the request is about (a guard against deciding the wrong request).
        decision: approve or deny.
        note: The reason for the decision, as the requester reads it.
    """
    _only(ctx, SUPERVISOR, "decide_approval")
    request = ctx.one("SELECT * FROM approval_requests WHERE id=?", (request_id,))
    if request is None:
        raise ToolError("not_found", f"no approval request {request_id}")
    if request["order_id"] != order_id:
        raise ToolError("invalid_arguments", f"approval request {request_id} is not about order {order_id}")
    if request["status"] != "pending":
        raise ToolError("conflict", f"approval request {request_id} was already {request['status']}")
    if request["requested_by"] == ctx.role:
        raise ToolError(
            "not_permitted", f"the {ctx.role} cannot decide its own request {request_id}", rule="separation_of_duties"
        )
    status = "approved" if decision == "approve" else "denied"
    if status == "approved":
        why = _breaks_policy(ctx, request)
        if why is not None:
            ctx.violation("approval_policy", f"approved request {request_id} although {why}")
    return _decide(ctx, request, status, clean_text(note, "note"))


def _decide(ctx: ToolContext, request: dict[str, Any], status: str, text: str) -> dict[str, Any]:
    """Record the supervisor's decision on ``request``: the approval, the request's status, the requester's message."""
    request_id, order_id = request["id"], request["order_id"]
    supervisor = ctx.one("SELECT id FROM agents WHERE role='supervisor' ORDER BY team_id LIMIT 1")
    cur = ctx.execute(
        "INSERT INTO approvals (order_id, amount_cents, reason, status, decided_by, note, created_at) "
        "VALUES (?,?,?,?,?,?,?)",
        (
            order_id,
            request["amount_cents"],
            request["reason"],
            status,
            supervisor["id"] if supervisor else None,
            text,
            ctx.now(),
        ),
    )
    approval_id = int(cur.lastrowid or 0)
    ctx.execute(
        "UPDATE approval_requests SET status=?, approval_id=?, note=?, decided_at=? WHERE id=?",
        (status, approval_id, text, ctx.now(), request_id),
    )
    _say(
        ctx,
        request["ticket_id"],
        "approval_decision",
        SUPERVISOR,
        request["requested_by"],
        f"Request {request_id} {status} (approval {approval_id}): {text}",
        ref_id=request_id,
    )
    return {"request_id": request_id, "approval_id": approval_id, "status": status}


# -- tier 1 to tier 2 ------------------------------------------------------------------


@tool("write")
def transfer_to_tier2(ctx: ToolContext, ticket_id: TicketId, summary: Prose) -> dict[str, Any]:
    """Transfer the contact to tier 2 (the Escalations team) with a hand-off summary; tier 2 takes over the chat.

    Args:
        ticket_id: The chat (ticket) to transfer.
        summary: What tier 2 needs to know: the customer's problem, the order and what you found.
    """
    ticket = _open_chat(ctx, ticket_id)
    sender = _speaker(ctx, ticket)
    team = hd.load_team(ctx, "escalations")
    if ticket["team_id"] == team["id"]:
        raise ToolError("conflict", f"ticket {ticket_id} is already with tier 2")
    text = clean_text(summary, "summary")
    tags = sorted(set(hd.split_tags(ticket["tags"])) | {"transferred"})
    hd.touch_ticket(
        ctx,
        ticket_id,
        team_id=team["id"],
        assignee_id=None,
        tags=",".join(tags),
        status="open" if ticket["status"] in ("new", "pending", "solved") else ticket["status"],
    )
    _say(ctx, ticket_id, "transfer", sender, TIER2, text)
    return {"ticket_id": ticket_id, "transferred_to": TIER2}


@tool("write")
def refund_lost_parcel(ctx: ToolContext, ticket_id: TicketId, order_id: OrderId) -> dict[str, Any]:
    """Refund every line of a shipped order that never arrived (tier 2, after a transfer).

    Args:
        ticket_id: The transferred chat (ticket) the refund is for.
        order_id: The lost order.
    """
    ticket = _open_chat(ctx, ticket_id)
    transferred = ctx.one(
        "SELECT 1 AS x FROM team_messages WHERE ticket_id=? AND kind='transfer' LIMIT 1", (ticket_id,)
    )
    if transferred is None or holder(ctx, ticket) != TIER2:
        raise ToolError(
            "policy_refused",
            "lost parcels are refunded by tier 2 after a transfer (transfer_to_tier2)",
            rule="lost_parcel",
        )
    order = hd.load_order(ctx, order_id)
    if order["customer_id"] != ticket["customer_id"]:
        raise ToolError("policy_refused", f"order {order_id} is not on this customer's account", rule="lost_parcel")
    if order["status"] != "shipped" or order["delivered_at"] is not None or order["shipped_at"] is None:
        raise ToolError(
            "policy_refused", f"order {order_id} is {order['status']}, not a lost parcel", rule="lost_parcel"
        )
    due = datetime.fromisoformat(order["shipped_at"]) + timedelta(days=LOST_PARCEL_DAYS)
    if ctx.now_dt() < due:
        raise ToolError(
            "policy_refused",
            f"order {order_id} shipped less than {LOST_PARCEL_DAYS} days ago; it is not lost yet",
            rule="lost_parcel",
        )
    lines = ctx.all(
        "SELECT id, quantity * unit_price_cents - refunded_cents AS left FROM order_lines WHERE order_id=? ORDER BY id",
        (order_id,),
    )
    total = 0
    for ln in lines:
        if ln["left"] <= 0:
            continue
        total += ln["left"]
        ctx.execute(
            "INSERT INTO refunds (order_id, order_line_id, amount_cents, reason, approval_id, override_reason, "
            "created_at) VALUES (?,?,?,?,?,?,?)",
            (order_id, ln["id"], ln["left"], "not_received", None, None, ctx.now()),
        )
        ctx.execute("UPDATE order_lines SET refunded_cents = refunded_cents + ? WHERE id=?", (ln["left"], ln["id"]))
    ctx.execute("UPDATE orders SET status='refunded' WHERE id=?", (order_id,))
    return {"order_id": order_id, "status": "refunded", "refunded": hd.dollars(total)}


TOOLS: tuple[ToolSpec, ...] = (
    hd.get_policy,
    hd.search_customers,
    hd.get_customer,
    hd.list_orders,
    hd.get_order,
    hd.get_ticket,
    hd.search_articles,
    hd.get_article,
    check_email,
    list_approval_requests,
    message_agent,
    confirm_change,
    leave_chat,
    ask_customer,
    send_verification_code,
    verify_code,
    propose_account_change,
    request_supervisor_approval,
    decide_approval,
    transfer_to_tier2,
    refund_lost_parcel,
    hd.issue_refund,
    hd.cancel_order,
    hd.respond,
)
"""The team world's tools: the helpdesk's reads, refunds and ``respond``, plus the hand-off protocol."""
