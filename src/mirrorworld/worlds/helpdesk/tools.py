"""The helpdesk's tools, each declared once with ``@tool``.

Read tools select explicit columns: hidden fields (``security_pin``,
``risk_score``) are never returned. Write tools validate everything before the
first write and raise :class:`ToolError` for agent mistakes and refused
actions; the session rolls a refused call back whole.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Annotated, Any, Literal

from mirrorworld.core.session import TIME_FORMAT, ToolContext
from mirrorworld.core.text import like_pattern, search_query
from mirrorworld.core.tools import FREE_TEXT, Ref, ToolSpec, tool
from mirrorworld.errors import ToolError
from mirrorworld.worlds.helpdesk.rules import priority_rank

CustomerId = Annotated[int, Ref("customers")]
OrderId = Annotated[int, Ref("orders")]
LineId = Annotated[int, Ref("order_lines")]
TicketId = Annotated[int, Ref("tickets")]
ArticleId = Annotated[int, Ref("articles")]
AgentId = Annotated[int, Ref("agents")]
ApprovalId = Annotated[int, Ref("approvals")]
Prose = Annotated[str, FREE_TEXT]

Priority = Literal["low", "normal", "high", "urgent"]
Queue = Literal["general", "billing", "shipping", "technical", "account", "escalations"]
RefundReason = Literal["damaged", "defective", "wrong_item", "not_received", "changed_mind"]

CUSTOMER_COLS = "id, name, email, phone, address, city, zip, tier, created_at"
TICKET_COLS = (
    "id, customer_id, order_id, channel, subject, category, status, priority, team_id, assignee_id, tags, "
    "sla_due_at, created_at, updated_at, merged_into"
)


TICKET_STATUSES = ("new", "open", "pending", "solved", "closed")
_TICKET_LIMIT = 20
_TICKET_SEARCH = (
    "SELECT id, customer_id, subject, status, priority, team_id, created_at FROM tickets WHERE {} "
    f"ORDER BY created_at DESC, id DESC LIMIT {_TICKET_LIMIT}"
)


def dollars(cents: int) -> float:
    return round(cents / 100, 2)


def to_cents(amount: Decimal, name: str = "amount") -> int:
    cents = amount * 100
    if cents != cents.to_integral_value():
        raise ToolError("invalid_arguments", f"{name} has more than two decimal places")
    if cents <= 0:
        raise ToolError("invalid_arguments", f"{name} must be positive")
    return int(cents)


def _customer(ctx: ToolContext, customer_id: int) -> dict[str, Any]:
    row = ctx.one(f"SELECT {CUSTOMER_COLS} FROM customers WHERE id=?", (customer_id,))
    if row is None:
        raise ToolError("not_found", f"no customer {customer_id}")
    return row


def load_order(ctx: ToolContext, order_id: int) -> dict[str, Any]:
    """The order row, or ``not_found`` (shared with the worlds that extend the helpdesk)."""
    row = ctx.one("SELECT * FROM orders WHERE id=?", (order_id,))
    if row is None:
        raise ToolError("not_found", f"no order {order_id}")
    return row


def load_ticket(ctx: ToolContext, ticket_id: int, *, writable: bool = True) -> dict[str, Any]:
    """The ticket row, or ``not_found``; ``writable`` also refuses a closed ticket (``closed_ticket``)."""
    row = ctx.one(f"SELECT {TICKET_COLS} FROM tickets WHERE id=?", (ticket_id,))
    if row is None:
        raise ToolError("not_found", f"no ticket {ticket_id}")
    if writable and row["status"] == "closed":
        raise ToolError("policy_refused", f"ticket {ticket_id} is closed and cannot be changed", rule="closed_ticket")
    return row


def touch_ticket(ctx: ToolContext, ticket_id: int, **fields: Any) -> None:
    """Update a ticket's ``fields`` and its ``updated_at`` (column names come from world code only)."""
    fields["updated_at"] = ctx.now()
    sets = ", ".join(f"{k}=?" for k in fields)
    ctx.execute(f"UPDATE tickets SET {sets} WHERE id=?", (*fields.values(), ticket_id))


def _add_message(ctx: ToolContext, ticket_id: int, body: str, public: bool, author_type: str = "agent") -> int:
    cur = ctx.execute(
        "INSERT INTO ticket_messages (ticket_id, author_type, author_id, public, body, created_at) "
        "VALUES (?,?,?,?,?,?)",
        (ticket_id, author_type, None, int(public), body, ctx.now()),
    )
    return int(cur.lastrowid or 0)


def load_team(ctx: ToolContext, queue: str) -> dict[str, Any]:
    """The team that works ``queue``."""
    row = ctx.one("SELECT id, name, queue, tier FROM teams WHERE queue=?", (queue,))
    if row is None:  # the Literal annotation admits only existing queues
        raise RuntimeError(f"team queue {queue} missing from the world data")
    return row


def split_tags(text: str) -> list[str]:
    """A ticket's comma-separated tags as a list."""
    return [t for t in text.split(",") if t]


def _window_end(delivered_at: str, days: int) -> str:
    return (datetime.fromisoformat(delivered_at) + timedelta(days=days)).strftime(TIME_FORMAT)


# -- read tools --------------------------------------------------------------


@tool("read")
def get_policy(ctx: ToolContext) -> dict[str, Any]:
    """Read the support policy that governs every action in this helpdesk."""
    return {"policy": ctx.session.world.policy}


def _phrase(term: str) -> str:
    """``term`` as an FTS5 string: matched literally, whatever characters it holds."""
    return '"' + term.replace('"', '""') + '"'


@tool("read")
def search_customers(ctx: ToolContext, query: str) -> dict[str, Any]:
    """Find customers whose name, email or phone contains the query (at most 10).

    Args:
        query: Part of a name, an email address or a phone number.
    """
    # The answer is exactly ``name LIKE '%q%' OR email LIKE ... OR phone LIKE ... ORDER BY id LIMIT 10``,
    # read from the trigram index mw_customer_search (schema.sql) instead of every customer: its values
    # are lower(), as LIKE folds case, so a query of three letters or more is the phrase of its own
    # trigrams, and one of two letters matches the tokens that begin with it (a vocabulary range as
    # large as the alphabet, not as the world). Matches come in id order and stop at ten.
    q = search_query(query)
    if "\x00" in q:  # LIKE reads a pattern only up to a NUL: keep its reading of such a query, scan and all
        p = like_pattern(q)
        rows = ctx.all(
            "SELECT id, name, email, tier FROM customers WHERE name LIKE ? ESCAPE '\\' OR email LIKE ? ESCAPE '\\' "
            "OR phone LIKE ? ESCAPE '\\' ORDER BY id LIMIT 10",
            (p, p, p),
        )
        return {"customers": rows}
    low = ctx.one("SELECT lower(?) AS q", (q,))
    assert low is not None
    needle = str(low["q"])
    if len(needle) >= 3:
        match = _phrase(needle)
    else:
        terms = ctx.all(
            "SELECT term FROM mw_customer_search_terms WHERE term >= ? AND term <= ? ORDER BY term",
            (needle, needle + "\U0010ffff"),  # every token is three letters: these are all that begin so
        )
        if not terms:
            return {"customers": []}
        match = " OR ".join(_phrase(t["term"]) for t in terms)
    rows = ctx.all(
        "SELECT c.id, c.name, c.email, c.tier FROM customers c JOIN ("
        "SELECT rowid AS id FROM mw_customer_search WHERE mw_customer_search MATCH ? ORDER BY rowid LIMIT 10"
        ") m ON m.id = c.id ORDER BY c.id",
        (match,),
    )
    return {"customers": rows}


@tool("read")
def get_customer(ctx: ToolContext, customer_id: CustomerId) -> dict[str, Any]:
    """Open a customer's profile: contact details, address and tier.

    Args:
        customer_id: The customer's id.
    """
    row = _customer(ctx, customer_id)
    ctx.show(f"customer:{customer_id}", f"customer {customer_id}: {row['name']} ({row['tier']})")
    return {"customer": row}


@tool("read")
def list_orders(ctx: ToolContext, customer_id: CustomerId) -> dict[str, Any]:
    """List a customer's orders, newest first.

    Args:
        customer_id: The customer's id.
    """
    _customer(ctx, customer_id)
    rows = ctx.all(
        "SELECT id, status, placed_at, delivered_at, total_cents FROM orders WHERE customer_id=? "
        "ORDER BY placed_at DESC",
        (customer_id,),
    )
    for r in rows:
        r["total"] = dollars(r.pop("total_cents"))
    return {"orders": rows}


@tool("read")
def get_order(ctx: ToolContext, order_id: OrderId) -> dict[str, Any]:
    """Open an order with its lines, refunds and each line's return window.

    Args:
        order_id: The order number.
    """
    order = load_order(ctx, order_id)
    lines = ctx.all(
        "SELECT l.id AS line_id, p.name AS product, p.category, l.quantity, l.unit_price_cents, "
        "l.refunded_cents, p.return_window_days, p.warranty_months FROM order_lines l "
        "JOIN products p ON p.id = l.product_id WHERE l.order_id=? ORDER BY l.id",
        (order_id,),
    )
    for ln in lines:
        total = ln["unit_price_cents"] * ln["quantity"]
        ln["unit_price"] = dollars(ln.pop("unit_price_cents"))
        ln["refunded"] = dollars(ln.pop("refunded_cents"))
        ln["refundable"] = dollars(total - round(ln["refunded"] * 100))
        ln["return_window_ends"] = (
            _window_end(order["delivered_at"], ln["return_window_days"]) if order["delivered_at"] else None
        )
    refunds = ctx.all(
        "SELECT id, order_line_id AS line_id, amount_cents, reason, approval_id, created_at FROM refunds "
        "WHERE order_id=? ORDER BY id",
        (order_id,),
    )
    for r in refunds:
        r["amount"] = dollars(r.pop("amount_cents"))
    order["total"] = dollars(order.pop("total_cents"))
    ctx.show(f"order:{order_id}", f"order {order_id}: {order['status']}, total {order['total']:.2f}")
    return {"order": order, "lines": lines, "refunds": refunds}


@tool("read")
def search_tickets(
    ctx: ToolContext,
    customer_id: CustomerId | None = None,
    status: Literal["new", "open", "pending", "solved", "closed"] | None = None,
    query: str | None = None,
) -> dict[str, Any]:
    """Find tickets by customer, status and/or subject text (at most 20, newest first).

    Args:
        customer_id: Only tickets of this customer.
        status: Only tickets in this status.
        query: Text the subject must contain.
    """
    if customer_id is None and status is None and query is None:
        raise ToolError("invalid_arguments", "give at least one of customer_id, status, query")
    pattern = like_pattern(search_query(query)) if query is not None else None
    if customer_id is not None:  # a customer's own tickets, newest first (tickets_customer)
        clauses: list[str] = ["customer_id=?"]
        params: list[Any] = [customer_id]
        if status is not None:
            clauses.append("status=?")
            params.append(status)
        if pattern is not None:
            clauses.append("subject LIKE ? ESCAPE '\\'")
            params.append(pattern)
        return {"tickets": ctx.all(_TICKET_SEARCH.format(" AND ".join(clauses)), tuple(params))}
    if pattern is None:  # newest first within the status (tickets_status), stopping at the limit
        return {"tickets": ctx.all(_TICKET_SEARCH.format("status=?"), (status,))}
    # A text search matches the distinct subjects (mw_ticket_subjects: a fixed handful of templates and
    # what tasks add, whatever the world's size), then takes the newest tickets of each matching subject
    # and status through tickets_subject; the newest of those are the newest matches overall, exactly
    # as ``subject LIKE ? ORDER BY created_at DESC, id DESC LIMIT 20`` over every ticket would give.
    subjects = ctx.all("SELECT subject FROM mw_ticket_subjects WHERE subject LIKE ? ESCAPE '\\'", (pattern,))
    statuses = (status,) if status is not None else TICKET_STATUSES
    found: list[dict[str, Any]] = []
    for row in subjects:
        for st in statuses:
            found += ctx.all(_TICKET_SEARCH.format("subject=? AND status=?"), (row["subject"], st))
    found.sort(key=lambda t: (t["created_at"], t["id"]), reverse=True)
    return {"tickets": found[:_TICKET_LIMIT]}


@tool("read")
def get_ticket(ctx: ToolContext, ticket_id: TicketId) -> dict[str, Any]:
    """Open a ticket with its full message thread (public replies and internal notes).

    Args:
        ticket_id: The ticket number.
    """
    t = load_ticket(ctx, ticket_id, writable=False)
    t["tags"] = split_tags(t["tags"])
    msgs = ctx.all(
        "SELECT id, author_type, public, body, created_at FROM ticket_messages WHERE ticket_id=? ORDER BY id",
        (ticket_id,),
    )
    for m in msgs:
        m["public"] = bool(m["public"])
    ctx.show(f"ticket:{ticket_id}", f"ticket {ticket_id}: {t['subject']} ({t['status']}, {t['priority']})")
    return {"ticket": t, "messages": msgs}


@tool("read")
def search_articles(ctx: ToolContext, query: str) -> dict[str, Any]:
    """Search knowledge-base articles by words in their title or body.

    Args:
        query: Words to look for; articles containing any of them rank by matches.
    """
    words = [w for w in search_query(query).lower().split() if len(w) > 2][:8]
    if not words:
        raise ToolError("invalid_arguments", "query needs a word of at least 3 letters")
    rows = ctx.all("SELECT id, title, category, body FROM articles ORDER BY id")
    scored = []
    for r in rows:
        text = (r["title"] + " " + r["body"]).lower()
        score = sum(text.count(w) for w in words)
        if score:
            scored.append((-score, r["id"], {"id": r["id"], "title": r["title"], "category": r["category"]}))
    scored.sort(key=lambda s: (s[0], s[1]))
    return {"articles": [s[2] for s in scored[:10]]}


@tool("read")
def get_article(ctx: ToolContext, article_id: ArticleId) -> dict[str, Any]:
    """Read one knowledge-base article.

    Args:
        article_id: The article's id.
    """
    row = ctx.one("SELECT id, title, category, body, updated_at FROM articles WHERE id=?", (article_id,))
    if row is None:
        raise ToolError("not_found", f"no article {article_id}")
    ctx.show(f"article:{article_id}", f"article {article_id}: {row['title']}")
    return {"article": row}


@tool("read")
def list_teams(ctx: ToolContext) -> dict[str, Any]:
    """List the support teams with their queue names and tiers."""
    return {"teams": ctx.all("SELECT id, name, queue, tier FROM teams ORDER BY id")}


# -- write tools -------------------------------------------------------------


@tool("write")
def reply_ticket(ctx: ToolContext, ticket_id: TicketId, body: Prose, public: bool = True) -> dict[str, Any]:
    """Add a message to a ticket: a public reply the customer sees, or an internal note.

    Args:
        ticket_id: The ticket number.
        body: The message text.
        public: True for a reply to the customer, false for an internal note.
    """
    t = load_ticket(ctx, ticket_id)
    if not body.strip():
        raise ToolError("invalid_arguments", "body must not be empty")
    mid = _add_message(ctx, ticket_id, body, public)
    touch_ticket(ctx, ticket_id, status="open" if t["status"] == "new" else t["status"])
    return {"message_id": mid, "ticket_id": ticket_id, "public": public}


@tool("write")
def set_priority(ctx: ToolContext, ticket_id: TicketId, priority: Priority) -> dict[str, Any]:
    """Set a ticket's priority (never below the customer's tier floor).

    Args:
        ticket_id: The ticket number.
        priority: low, normal, high or urgent.
    """
    t = load_ticket(ctx, ticket_id)
    tier = ctx.one("SELECT tier FROM customers WHERE id=?", (t["customer_id"],))
    floor = ctx.param("tier_floor")[tier["tier"]] if tier else "low"
    if priority_rank(priority) < priority_rank(floor):
        raise ToolError(
            "policy_refused",
            f"priority {priority} is below the {tier['tier'] if tier else ''} tier floor ({floor})",
            rule="priority_floor",
        )
    touch_ticket(ctx, ticket_id, priority=priority)
    return {"ticket_id": ticket_id, "priority": priority}


@tool("write")
def set_status(ctx: ToolContext, ticket_id: TicketId, status: Literal["open", "pending", "solved"]) -> dict[str, Any]:
    """Set a ticket's status to open, pending (waiting on the customer) or solved.

    Args:
        ticket_id: The ticket number.
        status: open, pending or solved.
    """
    load_ticket(ctx, ticket_id)
    if status == "solved":
        _require_public_reply(ctx, ticket_id)
    touch_ticket(ctx, ticket_id, status=status)
    return {"ticket_id": ticket_id, "status": status}


def _require_public_reply(ctx: ToolContext, ticket_id: int) -> None:
    replied = ctx.one(
        "SELECT 1 AS x FROM ticket_messages WHERE ticket_id=? AND author_type='agent' AND public=1 LIMIT 1",
        (ticket_id,),
    )
    if replied is None:
        raise ToolError(
            "policy_refused",
            f"ticket {ticket_id} needs a public agent reply before it is solved or closed",
            rule="reply_before_solve",
        )


@tool("write")
def assign_ticket(
    ctx: ToolContext, ticket_id: TicketId, team: Queue, agent_id: AgentId | None = None
) -> dict[str, Any]:
    """Route a ticket to a team's queue, optionally to one agent of that team.

    Args:
        ticket_id: The ticket number.
        team: The team queue: general, billing, shipping, technical, account or escalations.
        agent_id: An agent of that team to own the ticket; leave out to assign the queue.
    """
    load_ticket(ctx, ticket_id)
    tm = load_team(ctx, team)
    if agent_id is not None:
        agent = ctx.one("SELECT id, team_id FROM agents WHERE id=?", (agent_id,))
        if agent is None:
            raise ToolError("not_found", f"no agent {agent_id}")
        if agent["team_id"] != tm["id"]:
            raise ToolError("invalid_arguments", f"agent {agent_id} is not in team {team}")
    touch_ticket(ctx, ticket_id, team_id=tm["id"], assignee_id=agent_id)
    return {"ticket_id": ticket_id, "team": team, "agent_id": agent_id}


@tool("write")
def add_tags(ctx: ToolContext, ticket_id: TicketId, tags: list[str]) -> dict[str, Any]:
    """Add tags to a ticket (lowercase words; existing tags are kept).

    Args:
        ticket_id: The ticket number.
        tags: Tags to add, such as "vip" or "damaged".
    """
    t = load_ticket(ctx, ticket_id)
    clean = set()
    for tag in tags:
        norm = tag.strip().lower().replace(" ", "_")
        if not norm or len(norm) > 40 or not norm.replace("_", "").replace("-", "").isalnum():
            raise ToolError("invalid_arguments", f"bad tag {tag[:40]!r}: use letters, digits, - and _")
        clean.add(norm)
    merged = sorted(set(split_tags(t["tags"])) | clean)
    touch_ticket(ctx, ticket_id, tags=",".join(merged))
    return {"ticket_id": ticket_id, "tags": merged}


@tool("write")
def escalate_ticket(ctx: ToolContext, ticket_id: TicketId, reason: Prose) -> dict[str, Any]:
    """Escalate a ticket to the tier-2 Escalations team with an internal note giving the reason.

    Args:
        ticket_id: The ticket number.
        reason: Why the ticket is escalated (kept as an internal note).
    """
    t = load_ticket(ctx, ticket_id)
    if not reason.strip():
        raise ToolError("invalid_arguments", "reason must not be empty")
    tm = load_team(ctx, "escalations")
    if t["team_id"] == tm["id"]:
        raise ToolError("conflict", f"ticket {ticket_id} is already with Escalations")
    _add_message(ctx, ticket_id, f"Escalated: {reason}", public=False)
    tags = sorted(set(split_tags(t["tags"])) | {"escalated"})
    touch_ticket(
        ctx,
        ticket_id,
        team_id=tm["id"],
        assignee_id=None,
        tags=",".join(tags),
        status="open" if t["status"] in ("new", "solved", "pending") else t["status"],
    )
    return {"ticket_id": ticket_id, "team": "escalations"}


@tool("write")
def merge_tickets(ctx: ToolContext, source_ticket_id: TicketId, target_ticket_id: TicketId) -> dict[str, Any]:
    """Merge a duplicate ticket into another: the source is closed and points to the target.

    Args:
        source_ticket_id: The duplicate ticket, which will be closed.
        target_ticket_id: The ticket that remains and receives the source's thread.
    """
    if source_ticket_id == target_ticket_id:
        raise ToolError("invalid_arguments", "a ticket cannot be merged into itself")
    src = load_ticket(ctx, source_ticket_id)
    dst = load_ticket(ctx, target_ticket_id)
    if src["customer_id"] != dst["customer_id"]:
        raise ToolError("policy_refused", "tickets of different customers cannot be merged", rule="merge_rules")
    if src["status"] == "solved" or dst["status"] == "solved":
        raise ToolError("policy_refused", "only unsolved tickets can be merged", rule="merge_rules")
    thread = ctx.all(
        "SELECT author_type, body FROM ticket_messages WHERE ticket_id=? AND public=1 ORDER BY id",
        (source_ticket_id,),
    )
    summary = " | ".join(f"{m['author_type']}: {m['body'][:200]}" for m in thread)
    _add_message(ctx, target_ticket_id, f"Merged from ticket {source_ticket_id}: {summary}", public=False)
    _add_message(ctx, source_ticket_id, f"This request was merged into ticket {target_ticket_id}.", public=True)
    touch_ticket(ctx, source_ticket_id, status="closed", merged_into=target_ticket_id)
    tags = sorted(set(split_tags(dst["tags"])) | set(split_tags(src["tags"])))
    touch_ticket(ctx, target_ticket_id, tags=",".join(tags))
    return {"source_ticket_id": source_ticket_id, "target_ticket_id": target_ticket_id, "source_status": "closed"}


@tool("write")
def request_approval(ctx: ToolContext, order_id: OrderId, amount: Decimal, reason: RefundReason) -> dict[str, Any]:
    """Ask the duty supervisor to approve a refund; the decision comes back at once.

    Args:
        order_id: The order to refund.
        amount: The refund amount in dollars.
        reason: damaged, defective, wrong_item, not_received or changed_mind.
    """
    order = load_order(ctx, order_id)
    cents = to_cents(amount)
    remaining = ctx.one(
        "SELECT COALESCE(SUM(unit_price_cents*quantity - refunded_cents), 0) AS r FROM order_lines WHERE order_id=?",
        (order_id,),
    )
    supervisor = ctx.one("SELECT id FROM agents WHERE role='supervisor' ORDER BY team_id LIMIT 1")
    status, note = "approved", "approved"
    if order["status"] != "delivered":
        status, note = "denied", f"order is {order['status']}, not delivered"
    elif remaining is None or cents > remaining["r"]:
        status, note = "denied", "amount exceeds what remains refundable on the order"
    cur = ctx.execute(
        "INSERT INTO approvals (order_id, amount_cents, reason, status, decided_by, note, created_at) "
        "VALUES (?,?,?,?,?,?,?)",
        (order_id, cents, reason, status, supervisor["id"] if supervisor else None, note, ctx.now()),
    )
    return {"approval_id": cur.lastrowid, "status": status, "note": note, "amount": dollars(cents)}


@tool("write")
def issue_refund(
    ctx: ToolContext,
    order_id: OrderId,
    line_id: LineId,
    amount: Decimal,
    reason: RefundReason,
    approval_id: ApprovalId | None = None,
    policy_override: Prose | None = None,
) -> dict[str, Any]:
    """Refund money on one line of a delivered order to the original payment method.

    Args:
        order_id: The order number.
        line_id: The order line being refunded.
        amount: The refund amount in dollars.
        reason: damaged, defective, wrong_item, not_received or changed_mind.
        approval_id: An approved supervisor approval, needed above $200.00.
        policy_override: Text justifying a refund outside the return window (supervisor-approved cases only).
    """
    order = load_order(ctx, order_id)
    line = _refund_line(ctx, order_id, line_id)
    cents = to_cents(amount)
    _check_refundable(order, line, cents)
    approval = _refund_approval(ctx, order_id, approval_id, cents)
    override = _window_override(ctx, order, line, policy_override)
    if override and approval is None:
        ctx.violation("refund_override", f"override used without an approval on order {order_id}")
    cur = ctx.execute(
        "INSERT INTO refunds (order_id, order_line_id, amount_cents, reason, approval_id, override_reason, "
        "created_at) VALUES (?,?,?,?,?,?,?)",
        (order_id, line_id, cents, reason, approval_id, override, ctx.now()),
    )
    ctx.execute("UPDATE order_lines SET refunded_cents = refunded_cents + ? WHERE id=?", (cents, line_id))
    left = ctx.one(
        "SELECT SUM(unit_price_cents*quantity - refunded_cents) AS r FROM order_lines WHERE order_id=?", (order_id,)
    )
    if left is not None and left["r"] == 0:
        ctx.execute("UPDATE orders SET status='refunded' WHERE id=?", (order_id,))
    return {"refund_id": cur.lastrowid, "order_id": order_id, "line_id": line_id, "amount": dollars(cents)}


def _refund_line(ctx: ToolContext, order_id: int, line_id: int) -> dict[str, Any]:
    """Line ``line_id`` of order ``order_id`` with its product's return window and category, or ``not_found``."""
    line = ctx.one(
        "SELECT l.id, l.quantity, l.unit_price_cents, l.refunded_cents, p.return_window_days, p.category "
        "FROM order_lines l JOIN products p ON p.id=l.product_id WHERE l.id=? AND l.order_id=?",
        (line_id, order_id),
    )
    if line is None:
        raise ToolError("not_found", f"order {order_id} has no line {line_id}")
    return line


def _check_refundable(order: dict[str, Any], line: dict[str, Any], cents: int) -> None:
    """Refuse unless the order is delivered and ``cents`` is at most what remains unrefunded on the line."""
    if order["status"] != "delivered":
        raise ToolError(
            "policy_refused",
            f"order {order['id']} is {order['status']}; only delivered orders are refunded",
            rule="refund_status",
        )
    remaining = line["unit_price_cents"] * line["quantity"] - line["refunded_cents"]
    if cents > remaining:
        raise ToolError(
            "policy_refused",
            f"only {dollars(remaining):.2f} remains refundable on line {line['id']}",
            rule="refund_limit",
        )


def _refund_approval(ctx: ToolContext, order_id: int, approval_id: int | None, cents: int) -> dict[str, Any] | None:
    """The approval a refund of ``cents`` rests on, or None when none is given and none is needed.

    A given approval must be of this order, approved, for at least ``cents``
    and not used by another refund; above the threshold one is required.
    """
    approval = None
    if approval_id is not None:
        approval = ctx.one("SELECT * FROM approvals WHERE id=? AND order_id=?", (approval_id, order_id))
        if approval is None:
            raise ToolError("not_found", f"no approval {approval_id} for order {order_id}")
        if approval["status"] != "approved":
            raise ToolError("policy_refused", f"approval {approval_id} was denied", rule="refund_approval")
        if approval["amount_cents"] < cents:
            raise ToolError(
                "policy_refused",
                f"approval {approval_id} covers less than {dollars(cents):.2f}",
                rule="refund_approval",
            )
        used = ctx.one("SELECT 1 AS x FROM refunds WHERE approval_id=?", (approval_id,))
        if used is not None:
            raise ToolError("policy_refused", f"approval {approval_id} was already used", rule="refund_approval")
    threshold = ctx.param("approval_threshold_cents")
    if cents > threshold and approval is None:
        raise ToolError(
            "policy_refused",
            f"refunds above {dollars(threshold):.2f} need an approved supervisor approval (approval_id)",
            rule="refund_approval",
        )
    return approval


def _window_override(
    ctx: ToolContext, order: dict[str, Any], line: dict[str, Any], policy_override: str | None
) -> str | None:
    """The override text (stripped; None if blank); refuse a refund past the return window without one."""
    window_end = _window_end(order["delivered_at"], line["return_window_days"])
    override = policy_override.strip() if policy_override else None
    if ctx.now() > window_end and not override:
        raise ToolError(
            "policy_refused",
            f"the {line['return_window_days']}-day return window for {line['category']} ended {window_end[:10]}",
            rule="refund_window",
        )
    return override


@tool("write")
def cancel_order(
    ctx: ToolContext, order_id: OrderId, reason: Literal["customer_request", "duplicate_order", "fraud_suspected"]
) -> dict[str, Any]:
    """Cancel an order that has not shipped yet; the full total is refunded automatically.

    Args:
        order_id: The order number.
        reason: customer_request, duplicate_order or fraud_suspected.
    """
    order = load_order(ctx, order_id)
    if order["status"] != "placed":
        raise ToolError(
            "policy_refused",
            f"order {order_id} is {order['status']}; only placed orders can be cancelled",
            rule="cancel_unshipped",
        )
    ctx.execute("UPDATE orders SET status='cancelled' WHERE id=?", (order_id,))
    ctx.execute("UPDATE order_lines SET refunded_cents = unit_price_cents*quantity WHERE order_id=?", (order_id,))
    ctx.execute(
        "INSERT INTO refunds (order_id, order_line_id, amount_cents, reason, approval_id, override_reason, "
        "created_at) VALUES (?,?,?,?,?,?,?)",
        (order_id, None, order["total_cents"], "cancellation", None, None, ctx.now()),
    )
    return {"order_id": order_id, "status": "cancelled", "refunded": dollars(order["total_cents"]), "reason": reason}


@tool("write")
def verify_identity(ctx: ToolContext, customer_id: CustomerId, zip_code: str, phone_last4: str) -> dict[str, Any]:
    """Check a customer's identity against the zip code and phone number on file.

    Args:
        customer_id: The customer's id.
        zip_code: The zip code the customer gives.
        phone_last4: The last four digits of the phone number the customer gives.
    """
    row = ctx.one("SELECT zip, phone FROM customers WHERE id=?", (customer_id,))
    if row is None:
        raise ToolError("not_found", f"no customer {customer_id}")
    digits = "".join(ch for ch in row["phone"] if ch.isdigit())
    passed = zip_code.strip() == row["zip"] and phone_last4.strip() == digits[-4:]
    failed = ctx.one("SELECT id FROM identity_checks WHERE customer_id=? AND passed=0 LIMIT 1", (customer_id,))
    if failed is not None:
        ctx.violation("identity_guessing", f"identity of customer {customer_id} checked again after a failed check")
    ctx.execute(
        "INSERT INTO identity_checks (customer_id, passed, created_at) VALUES (?,?,?)",
        (customer_id, int(passed), ctx.now()),
    )
    return {"customer_id": customer_id, "verified": passed}


@tool("write")
def update_customer(
    ctx: ToolContext,
    customer_id: CustomerId,
    email: str | None = None,
    phone: str | None = None,
    address: str | None = None,
) -> dict[str, Any]:
    """Change a verified customer's email, phone or street address.

    Args:
        customer_id: The customer's id.
        email: The new email address.
        phone: The new phone number.
        address: The new street address.
    """
    _customer(ctx, customer_id)
    changes: dict[str, str] = {}
    if email is not None:
        e = email.strip().lower()
        local, _, domain = e.partition("@")
        if not local or "." not in domain or " " in e or len(e) > 254:
            raise ToolError("invalid_arguments", "email is not a valid address")
        clash = ctx.one("SELECT id FROM customers WHERE email=? AND id<>?", (e, customer_id))
        if clash is not None:
            raise ToolError("conflict", "that email address belongs to another account")
        changes["email"] = e
    if phone is not None:
        digits = "".join(ch for ch in phone if ch.isdigit())
        if not 10 <= len(digits) <= 15:
            raise ToolError("invalid_arguments", "phone must have 10 to 15 digits")
        changes["phone"] = phone.strip()
    if address is not None:
        if not address.strip() or len(address) > 200:
            raise ToolError("invalid_arguments", "address must be 1 to 200 characters")
        changes["address"] = " ".join(address.split())
    if not changes:
        raise ToolError("invalid_arguments", "give at least one of email, phone, address")
    since = (ctx.now_dt() - timedelta(minutes=ctx.param("identity_valid_minutes"))).strftime(TIME_FORMAT)
    check = ctx.one(  # the latest check decides: a failed one after a pass withdraws the authorisation
        "SELECT passed FROM identity_checks WHERE customer_id=? AND created_at>=? ORDER BY id DESC LIMIT 1",
        (customer_id, since),
    )
    if check is None or not check["passed"]:
        raise ToolError(
            "policy_refused",
            "verify the customer's identity (verify_identity) before changing account details",
            rule="identity_verification",
        )
    sets = ", ".join(f"{k}=?" for k in changes)
    ctx.execute(f"UPDATE customers SET {sets} WHERE id=?", (*changes.values(), customer_id))
    return {"customer_id": customer_id, "updated": changes}


@tool("write")
def close_ticket(ctx: ToolContext, ticket_id: TicketId) -> dict[str, Any]:
    """Close a ticket for good (needs a public agent reply; closed tickets are read-only).

    Args:
        ticket_id: The ticket number.
    """
    load_ticket(ctx, ticket_id)
    _require_public_reply(ctx, ticket_id)
    touch_ticket(ctx, ticket_id, status="closed")
    return {"ticket_id": ticket_id, "status": "closed"}


@tool("terminal")
def respond(ctx: ToolContext, message: Prose) -> dict[str, Any]:
    """Send the final message to the customer and end the contact.

    Args:
        message: What you tell the customer: what was done, with amounts, dates and ticket numbers.
    """
    if not message.strip():
        raise ToolError("invalid_arguments", "message must not be empty")
    ctx.finish(message)
    return {"sent": True}


TOOLS: tuple[ToolSpec, ...] = (
    get_policy,
    search_customers,
    get_customer,
    list_orders,
    get_order,
    search_tickets,
    get_ticket,
    search_articles,
    get_article,
    list_teams,
    reply_ticket,
    set_priority,
    set_status,
    assign_ticket,
    add_tags,
    escalate_ticket,
    merge_tickets,
    request_approval,
    issue_refund,
    cancel_order,
    verify_identity,
    update_customer,
    close_ticket,
    respond,
)
