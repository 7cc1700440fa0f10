"""The helpdesk's task families.

Each family draws its entities from the pristine image with the task's seeded
``random.Random``, writes the contact (a new chat ticket and the customer's
message) as setup, and states the gold solution, scope, targets, checks and
facts. Customer-facing families end with ``respond``; back-office work orders
(triage) end with a short report.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Literal

from mirrorworld.core.store import Image
from mirrorworld.core.task import Check, Fact, SetupOp, Task, TaskFamily, ToolCall
from mirrorworld.core.tools import json_number
from mirrorworld.errors import TaskError
from mirrorworld.worlds.helpdesk.data import TICKET_TEMPLATES
from mirrorworld.worlds.helpdesk.rules import (
    CATEGORIES,
    CATEGORY_ROUTING,
    EPOCH,
    PARAMETERS,
    QUEUES,
    SLA_HOURS,
    TIER_FLOOR,
    triage_priority,
)

WORLD = "helpdesk"
TIME = "%Y-%m-%dT%H:%M:%SZ"
EPOCH_DT = datetime.strptime(EPOCH, TIME)


def _at(delta: timedelta) -> str:
    return (EPOCH_DT - delta).strftime(TIME)


@functools.lru_cache(maxsize=512)
def _ticket_times(created: timedelta, priority: str) -> tuple[str, str]:
    """A new ticket's creation time and SLA due time (families use a handful of ages, hence the cache)."""
    return _at(created), (EPOCH_DT - created + timedelta(hours=SLA_HOURS[priority])).strftime(TIME)


def _money(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02d}"


def _next_id(image: Image, table: str, offset: int = 1) -> int:
    return int(image.query(f"SELECT COALESCE(MAX(id), 0) FROM {table}")[0][0]) + offset


CUSTOMER_COLUMNS = ("id", "name", "email", "phone", "zip", "tier")


def _customer_rows(image: Image) -> dict[int, tuple[Any, ...]]:
    """Every customer's row by id, read once per image: most families draw one or three customers per task, and a
    fresh task's lookups on a large image all miss :meth:`~mirrorworld.core.store.Image.query`'s memo (a cold
    lookup there costs 3 to 5 times a dictionary's, so at scale 100 a task's customers cost more than the rest of it).
    """
    rows = image.query(f"SELECT {', '.join(CUSTOMER_COLUMNS)} FROM customers")
    return {int(r[0]): r for r in rows}


def _customer(image: Image, customer_id: int) -> dict[str, Any]:
    row = image.derived(_customer_rows, _customer_rows)[customer_id]
    return dict(zip(CUSTOMER_COLUMNS, row, strict=True))


def _teams(image: Image) -> dict[str, int]:
    """Each queue's team id (read once per image)."""
    return image.derived(_teams, lambda im: {str(q): int(i) for q, i in im.query("SELECT queue, id FROM teams")})


def _any_customer(image: Image, rng: random.Random) -> dict[str, Any]:
    """A customer drawn uniformly."""
    return _customer(image, rng.choice(image.query("SELECT id FROM customers ORDER BY id"))[0])


def _pick(rng: random.Random, rows: Sequence[tuple[Any, ...]], family: str) -> tuple[Any, ...]:
    if not rows:
        raise TaskError(f"{family}: the world has no candidate records (scale too small?)")
    return rng.choice(rows)


def _ticket_ops(
    ticket_id: int,
    message_id: int,
    customer: dict[str, Any],
    *,
    subject: str,
    body: str,
    created: timedelta = timedelta(0),
    status: str = "new",
    priority: str | None = None,
    team_id: int | None = None,
    order_id: int | None = None,
    category: str | None = None,
    channel: str = "chat",
) -> list[SetupOp]:
    prio = priority or TIER_FLOOR[customer["tier"]]
    created_at, sla = _ticket_times(created, prio)
    return [
        SetupOp(
            "insert",
            "tickets",
            {
                "id": ticket_id,
                "customer_id": customer["id"],
                "order_id": order_id,
                "channel": channel,
                "subject": subject,
                "category": category,
                "status": status,
                "priority": prio,
                "team_id": team_id,
                "assignee_id": None,
                "tags": "",
                "sla_due_at": sla,
                "created_at": created_at,
                "updated_at": created_at,
                "merged_into": None,
            },
        ),
        SetupOp(
            "insert",
            "ticket_messages",
            {
                "id": message_id,
                "ticket_id": ticket_id,
                "author_type": "customer",
                "author_id": customer["id"],
                "public": 1,
                "body": body,
                "created_at": created_at,
            },
        ),
    ]


def _chat(ticket_id: int, customer: dict[str, Any], text: str) -> str:
    return (
        f"Live chat with a customer (ticket #{ticket_id}).\n"
        f'Customer: "Hi, this is {customer["name"]} ({customer["email"]}). {text}"'
    )


def _order_line_candidates(image: Image, where: str, params: tuple[Any, ...] = ()) -> Sequence[tuple[Any, ...]]:
    return image.query(
        "SELECT l.id, l.order_id, o.customer_id, p.name, p.category, l.unit_price_cents, o.delivered_at, "
        "p.return_window_days FROM order_lines l JOIN orders o ON o.id = l.order_id "
        "JOIN products p ON p.id = l.product_id "
        "WHERE o.status='delivered' AND l.quantity=1 AND l.refunded_cents=0 AND " + where + " ORDER BY l.id",
        params,
    )


def _other_line_amounts(image: Image, order_id: int, line_id: int) -> tuple[str, ...]:
    """The amounts of the order's other lines: the wrong answers to "how much was refunded"."""
    rows = image.query(
        "SELECT DISTINCT unit_price_cents * quantity FROM order_lines WHERE order_id=? AND id<>? ORDER BY 1",
        (order_id, line_id),
    )
    return tuple(_money(r[0]) for r in rows)


WITHIN_WINDOW = "datetime(o.delivered_at, '+' || (p.return_window_days - 1) || ' days') > datetime(?)"
PAST_WINDOW = "datetime(o.delivered_at, '+' || (p.return_window_days + 2) || ' days') < datetime(?)"

PROBLEMS = {
    "damaged": "arrived damaged - the box was crushed and it's broken",
    "defective": "stopped working after two days, it's defective",
    "wrong_item": "is not what I ordered, you sent me the wrong item",
}


class _RefundFamily(TaskFamily):
    above_threshold: bool

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        size = "l.unit_price_cents > ?" if self.above_threshold else "l.unit_price_cents <= ?"
        rows = _order_line_candidates(
            image, f"{size} AND {WITHIN_WINDOW}", (self.param("approval_threshold_cents"), EPOCH)
        )
        line_id, order_id, customer_id, product, _category, price, _delivered, _window = _pick(rng, rows, self.name)
        customer = _customer(image, customer_id)
        reason = rng.choice(tuple(PROBLEMS))
        tid, mid = _next_id(image, "tickets"), _next_id(image, "ticket_messages")
        text = f"The {product} from my order #{order_id} {PROBLEMS[reason]}. I'd like my money back please."
        amount = _money(price)
        gold = []
        checks = [
            Check(
                "line refunded in full",
                "field",
                {"table": "order_lines", "id": line_id, "field": "refunded_cents", "equals": price},
            ),
        ]
        approval_id = None
        if self.above_threshold:
            approval_id = _next_id(image, "approvals")
            gold.append(
                ToolCall("request_approval", {"order_id": order_id, "amount": json_number(amount), "reason": reason})
            )
            checks.append(
                Check(
                    "refund approved by a supervisor",
                    "count",
                    {"table": "approvals", "where": {"order_id": order_id, "status": "approved"}, "min": 1},
                )
            )
        gold.append(
            ToolCall(
                "issue_refund",
                {
                    "order_id": order_id,
                    "line_id": line_id,
                    "amount": json_number(amount),
                    "reason": reason,
                    **({"approval_id": approval_id} if approval_id else {}),
                },
            )
        )
        gold.append(
            ToolCall(
                "respond",
                {"message": f"I'm sorry about the {product}. I've refunded ${amount} for it on order #{order_id}."},
            )
        )
        return Task(
            world=WORLD,
            family=self.name,
            seed=seed,
            instruction=_chat(tid, customer, text),
            setup=tuple(
                _ticket_ops(tid, mid, customer, subject=f"Problem with order #{order_id}", body=text, order_id=order_id)
            ),
            gold=tuple(gold),
            scope=(("ticket", tid), ("order", order_id), ("customer", customer_id)),
            targets=(("order", order_id),),
            checks=tuple(checks),
            facts=(Fact("refund amount", amount, "money", _other_line_amounts(image, order_id, line_id)),),
            customer_id=customer_id,
            hidden={"line_id": line_id, "reason": reason},
        )


class RefundDamaged(_RefundFamily):
    name = "refund_damaged"
    description = "Refund a damaged, defective or wrong item within its return window (up to $200)."
    above_threshold = False


class RefundWithApproval(_RefundFamily):
    name = "refund_with_approval"
    description = "Refund an item above $200: get a supervisor approval first, then refund with it."
    above_threshold = True


class DenyRefund(TaskFamily):
    name = "deny_refund"
    description = "A refund request outside the return window: refuse, giving the window and delivery date."

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        rows = _order_line_candidates(image, PAST_WINDOW, (EPOCH,))
        line_id, order_id, customer_id, product, category, _price, delivered, window = _pick(rng, rows, self.name)
        customer = _customer(image, customer_id)
        why = rng.choice(
            (
                "I changed my mind about it",
                "it doesn't really fit what I need",
                "I found it cheaper elsewhere",
                "I never ended up using it",
            )
        )
        tid, mid = _next_id(image, "tickets"), _next_id(image, "ticket_messages")
        text = f"I'd like to return the {product} from order #{order_id} and get a refund - {why}."
        day = delivered[:10]
        refunds = image.query("SELECT COUNT(*) FROM refunds WHERE order_id=?", (order_id,))[0][0]
        return Task(
            world=WORLD,
            family=self.name,
            seed=seed,
            instruction=_chat(tid, customer, text),
            setup=tuple(
                _ticket_ops(
                    tid, mid, customer, subject=f"Return request for order #{order_id}", body=text, order_id=order_id
                )
            ),
            gold=(
                ToolCall(
                    "respond",
                    {
                        "message": (
                            f"I'm sorry, but I can't refund the {product}: it was delivered on {day} and "
                            f"the return window for {category} items is {window} days, which has passed."
                        )
                    },
                ),
            ),
            scope=(("ticket", tid), ("order", order_id), ("customer", customer_id)),
            targets=(("order", order_id),),
            checks=(
                Check(
                    "no new refund on the order",
                    "count",
                    {"table": "refunds", "where": {"order_id": order_id}, "max": refunds},
                ),
            ),
            facts=(
                Fact(
                    "return window (days)",
                    str(window),
                    "number",
                    tuple(sorted({str(w) for w, _ in CATEGORIES.values()} - {str(window)}, key=int)),
                ),
                Fact("delivery date", day, "date"),
            ),
            customer_id=customer_id,
            hidden={"line_id": line_id},
        )


class CancelOrder(TaskFamily):
    name = "cancel_order"
    description = "Cancel an order that has not shipped and tell the customer the refunded total."

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        rows = image.query("SELECT id, customer_id, total_cents FROM orders WHERE status='placed' ORDER BY id")
        order_id, customer_id, total = _pick(rng, rows, self.name)
        customer = _customer(image, customer_id)
        tid, mid = _next_id(image, "tickets"), _next_id(image, "ticket_messages")
        why = rng.choice(("I ordered it by mistake", "I found what I needed locally", "I no longer need it"))
        text = f"Please cancel my order #{order_id}, {why}."
        amount = _money(total)
        return Task(
            world=WORLD,
            family=self.name,
            seed=seed,
            instruction=_chat(tid, customer, text),
            setup=tuple(
                _ticket_ops(tid, mid, customer, subject=f"Cancel order #{order_id}", body=text, order_id=order_id)
            ),
            gold=(
                ToolCall("cancel_order", {"order_id": order_id, "reason": "customer_request"}),
                ToolCall("respond", {"message": f"Order #{order_id} is cancelled and ${amount} will be refunded."}),
            ),
            scope=(("ticket", tid), ("order", order_id), ("customer", customer_id)),
            targets=(("order", order_id),),
            checks=(
                Check(
                    "order cancelled",
                    "field",
                    {"table": "orders", "id": order_id, "field": "status", "equals": "cancelled"},
                ),
                Check(
                    "total refunded",
                    "sum",
                    {"table": "refunds", "column": "amount_cents", "where": {"order_id": order_id}, "equals": total},
                ),
            ),
            facts=(Fact("refunded total", amount, "money"),),
            customer_id=customer_id,
        )


class Triage(TaskFamily):
    name = "triage"
    description = "Triage three new tickets: priority by category and tier floor, team queue, status open."

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        customers = image.query("SELECT id FROM customers ORDER BY id")
        teams = _teams(image)
        team_ids = {q: teams[q] for q in QUEUES}
        first_tid, first_mid = _next_id(image, "tickets"), _next_id(image, "ticket_messages")
        setup: list[SetupOp] = []
        gold: list[ToolCall] = []
        checks: list[Check] = []
        tids = []
        for k, (cid,) in enumerate(rng.sample(customers, 3)):
            customer = _customer(image, cid)
            category = rng.choice(tuple(TICKET_TEMPLATES))
            subject, body = rng.choice(TICKET_TEMPLATES[category])
            tid = first_tid + k
            tids.append(tid)
            queue = CATEGORY_ROUTING[category][0]
            prio = triage_priority(category, customer["tier"], self.param("tier_floor"))
            # The web form lets customers pick a priority; triage must correct it.
            chosen = rng.choice([p for p in ("low", "normal", "high", "urgent") if p != prio])
            setup += _ticket_ops(
                tid,
                first_mid + k,
                customer,
                subject=subject,
                body=body,
                priority=chosen,
                created=timedelta(minutes=30 - 10 * k),
                channel=rng.choice(("email", "web")),
            )
            gold += [
                ToolCall("set_priority", {"ticket_id": tid, "priority": prio}),
                ToolCall("assign_ticket", {"ticket_id": tid, "team": queue}),
                ToolCall("set_status", {"ticket_id": tid, "status": "open"}),
            ]
            checks += [
                Check(
                    f"#{tid} priority {prio}",
                    "field",
                    {"table": "tickets", "id": tid, "field": "priority", "equals": prio},
                ),
                Check(
                    f"#{tid} routed to {queue}",
                    "field",
                    {"table": "tickets", "id": tid, "field": "team_id", "equals": team_ids[queue]},
                ),
                Check(f"#{tid} open", "field", {"table": "tickets", "id": tid, "field": "status", "equals": "open"}),
            ]
        ids = ", ".join(f"#{t}" for t in tids)
        gold.append(ToolCall("respond", {"message": f"Triaged tickets {ids}."}))
        return Task(
            world=WORLD,
            family=self.name,
            seed=seed,
            instruction=(
                f"Work order from your team lead: triage the new tickets {ids} according to the policy "
                "(priority, team queue, status), then report back with respond."
            ),
            setup=tuple(setup),
            gold=tuple(gold),
            scope=tuple(("ticket", t) for t in tids),
            targets=tuple(("ticket", t) for t in tids),
            checks=tuple(checks),
            facts=(),
        )


class SlaEscalation(TaskFamily):
    name = "sla_escalation"
    description = "A customer chases a ticket past its SLA: escalate it, make it urgent, tell them."

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        customer = _any_customer(image, rng)
        category = rng.choice(("shipping", "technical", "returns", "billing"))
        subject, body = rng.choice(TICKET_TEMPLATES[category])
        prio = triage_priority(category, customer["tier"])
        hours = SLA_HOURS[prio] + rng.randint(6, 40)
        queue = CATEGORY_ROUTING[category][0]
        teams = _teams(image)
        team_id, esc_id = teams[queue], teams["escalations"]
        tid, mid = _next_id(image, "tickets"), _next_id(image, "ticket_messages")
        setup = _ticket_ops(
            tid,
            mid,
            customer,
            subject=subject,
            body=body,
            created=timedelta(hours=hours),
            status="open",
            priority=prio,
            team_id=team_id,
            category=category,
            channel=rng.choice(("email", "web")),
        )
        when = "two days ago" if hours > 36 else "yesterday"
        text = f"I opened ticket #{tid} ({subject.rstrip('?')}) {when} and nobody has answered yet. What is going on?"
        return Task(
            world=WORLD,
            family=self.name,
            seed=seed,
            instruction=_chat(tid, customer, text),
            setup=tuple(setup),
            gold=(
                ToolCall("escalate_ticket", {"ticket_id": tid, "reason": "SLA breached without a response"}),
                ToolCall("set_priority", {"ticket_id": tid, "priority": "urgent"}),
                ToolCall(
                    "respond",
                    {
                        "message": f"I'm sorry for the wait. Ticket #{tid} has been escalated to our "
                        "Escalations team as urgent."
                    },
                ),
            ),
            scope=(("ticket", tid), ("customer", customer["id"])),
            targets=(("ticket", tid),),
            checks=(
                Check("escalated", "field", {"table": "tickets", "id": tid, "field": "team_id", "equals": esc_id}),
                Check("urgent", "field", {"table": "tickets", "id": tid, "field": "priority", "equals": "urgent"}),
                Check(
                    "internal note",
                    "count",
                    {"table": "ticket_messages", "where": {"ticket_id": tid, "public": 0}, "min": 1},
                ),
            ),
            facts=(Fact("ticket number", str(tid), "id"),),
            customer_id=customer["id"],
        )


class MergeDuplicates(TaskFamily):
    name = "merge_duplicates"
    description = "A customer opened two tickets for one issue: merge the newer into the older."

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        rows = image.query("SELECT id, customer_id FROM orders WHERE status IN ('shipped','delivered') ORDER BY id")
        order_id, customer_id = _pick(rng, rows, self.name)
        customer = _customer(image, customer_id)
        category = rng.choice(("shipping", "returns", "technical"))
        subject, body = rng.choice(TICKET_TEMPLATES[category])
        queue = CATEGORY_ROUTING[category][0]
        team_id = _teams(image)[queue]
        prio = triage_priority(category, customer["tier"])
        old, new = _next_id(image, "tickets"), _next_id(image, "tickets", 2)
        mid = _next_id(image, "ticket_messages")
        setup = _ticket_ops(
            old,
            mid,
            customer,
            subject=subject,
            body=f"Order #{order_id}: {body}",
            created=timedelta(hours=5),
            status="open",
            priority=prio,
            team_id=team_id,
            order_id=order_id,
            category=category,
            channel="email",
        )
        setup += _ticket_ops(
            new,
            mid + 1,
            customer,
            subject=f"Re: {subject}",
            body=f"Following up on order #{order_id}. {body}",
            created=timedelta(hours=1),
            order_id=order_id,
            channel="web",
        )
        text = (
            f"I think I opened two tickets about the same problem with order #{order_id} - sorry! "
            "Can you combine them so I only get one thread?"
        )
        return Task(
            world=WORLD,
            family=self.name,
            seed=seed,
            instruction=_chat(new, customer, text),
            setup=tuple(setup),
            gold=(
                ToolCall("merge_tickets", {"source_ticket_id": new, "target_ticket_id": old}),
                ToolCall("respond", {"message": f"Done - I merged your requests into ticket #{old}."}),
            ),
            scope=(("ticket", old), ("ticket", new), ("customer", customer_id)),
            targets=(("ticket", old), ("ticket", new)),
            checks=(
                Check(
                    "newer ticket merged",
                    "field",
                    {"table": "tickets", "id": new, "field": "merged_into", "equals": old},
                ),
                Check(
                    "newer ticket closed",
                    "field",
                    {"table": "tickets", "id": new, "field": "status", "equals": "closed"},
                ),
            ),
            facts=(Fact("remaining ticket number", str(old), "id"),),
            customer_id=customer_id,
        )


class UpdateEmail(TaskFamily):
    name = "update_email"
    description = "Change a customer's email after verifying their identity."

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        customer = _any_customer(image, rng)
        first, last = customer["name"].lower().split()
        new_email = f"{first[0]}{last}.{rng.randint(10, 9999)}@newmail.example"
        last4 = "".join(ch for ch in customer["phone"] if ch.isdigit())[-4:]
        tid, mid = _next_id(image, "tickets"), _next_id(image, "ticket_messages")
        text = (
            f"I need to change the email on my account to {new_email}. For verification: my zip code is "
            f"{customer['zip']} and my phone number ends in {last4}."
        )
        cid = customer["id"]
        return Task(
            world=WORLD,
            family=self.name,
            seed=seed,
            instruction=_chat(tid, customer, text),
            setup=tuple(_ticket_ops(tid, mid, customer, subject="Change my email address", body=text)),
            gold=(
                ToolCall("verify_identity", {"customer_id": cid, "zip_code": customer["zip"], "phone_last4": last4}),
                ToolCall("update_customer", {"customer_id": cid, "email": new_email}),
                ToolCall("respond", {"message": f"Your account email is now {new_email}."}),
            ),
            scope=(("ticket", tid), ("customer", cid)),
            targets=(("customer", cid),),
            checks=(
                Check(
                    "email updated", "field", {"table": "customers", "id": cid, "field": "email", "equals": new_email}
                ),
            ),
            facts=(Fact("new email", new_email, "email"),),
            customer_id=cid,
        )


# (article title prefix, question, regex capturing the fact, fact kind)
KB_QUESTIONS: tuple[tuple[str, str, str, str], ...] = (
    (
        "Shipping options",
        "How much does express shipping cost?",
        r"Express shipping takes \d+ business days and "
        r"costs \$(\d+(?:\.\d+)?)",
        "money",
    ),
    (
        "Shipping options",
        "How many business days does standard shipping take?",
        r"Standard shipping takes (\d+)",
        "number",
    ),
    (
        "Shipping options",
        "Above what order amount is standard shipping free?",
        r"free on orders over \$(\d+(?:\.\d+)?)",
        "money",
    ),
    (
        "Price adjustments",
        "If something I bought gets cheaper after it's delivered, how many days do I have to get the difference back?",
        r"within (\d+) days",
        "number",
    ),
    ("Gift cards", "For how many years is a gift card valid?", r"valid for (\d+) years", "number"),
    ("Gift wrapping", "How much does gift wrapping cost per item?", r"\$(\d+(?:\.\d+)?) per item", "money"),
    (
        "Restocking fee",
        "What percentage restocking fee applies to opened electronics I return?",
        r"fee of (\d+) percent",
        "number",
    ),
    (
        "Return labels",
        "How many business days until I get a prepaid return label by email?",
        r"within (\d+) business days",
        "number",
    ),
    (
        "Refund processing",
        "How many business days does a refund take to reach my card?",
        r"within (\d+) business days",
        "number",
    ),
    ("Return policy: electronics", "How many days do I have to return headphones?", r"within (\d+) days", "number"),
    ("Return policy: apparel", "How many days do I have to return a jacket?", r"within (\d+) days", "number"),
    ("Return policy: home", "How many days do I have to return a blender?", r"within (\d+) days", "number"),
    ("Warranty: electronics", "How many months of warranty does a smart watch come with?", r"a (\d+)-month", "number"),
    ("Warranty: sports", "How long is the warranty on a camping tent, in months?", r"a (\d+)-month", "number"),
)


def _kb_figures(image: Image) -> list[tuple[str, str, str, str, str]]:
    """Every figure the KB questions can ask for: (prefix, question, pattern, kind, value)."""
    out = []
    for prefix, question, pattern, kind in KB_QUESTIONS:
        for (body,) in image.query("SELECT body FROM articles WHERE title LIKE ? ORDER BY id", (prefix + "%",)):
            m = re.search(pattern, body)
            if m is not None:
                out.append((prefix, question, pattern, kind, m.group(1)))
    return out


def _kb_values(image: Image) -> dict[str, frozenset[str]]:
    """Every figure the KB questions can ask for, by kind: the distractors of an answer (read once per image)."""

    def build(im: Image) -> dict[str, frozenset[str]]:
        kinds: dict[str, set[str]] = {}
        for _prefix, _question, _pattern, kind, value in _kb_figures(im):
            kinds.setdefault(kind, set()).add(value)
        return {k: frozenset(v) for k, v in kinds.items()}

    return image.derived(_kb_values, build)


class KnowledgeAnswer(TaskFamily):
    name = "kb_answer"
    description = "Answer a policy question with the exact figure from the knowledge base."

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        prefix, question, pattern, kind = rng.choice(KB_QUESTIONS)
        rows = image.query("SELECT id, title, body FROM articles WHERE title LIKE ? ORDER BY id", (prefix + "%",))
        article_id, _title, body = _pick(rng, rows, self.name)
        m = re.search(pattern, body)
        if m is None:
            raise TaskError(f"{self.name}: article {article_id} does not state the fact for {question!r}")
        value = m.group(1)
        sentence = next(s for s in body.split(". ") if m.group(0) in s).rstrip(".")
        fact_kind: Literal["money", "number"] = "money" if kind == "money" else "number"
        distractors = sorted(_kb_values(image).get(kind, frozenset()) - {value}, key=Decimal)
        customer = _any_customer(image, rng)
        tid, mid = _next_id(image, "tickets"), _next_id(image, "ticket_messages")
        return Task(
            world=WORLD,
            family=self.name,
            seed=seed,
            instruction=_chat(tid, customer, f"Quick question: {question}"),
            setup=tuple(_ticket_ops(tid, mid, customer, subject="Question", body=question)),
            gold=(
                ToolCall("get_article", {"article_id": article_id}),
                ToolCall("respond", {"message": f"According to our help center: {sentence}."}),
            ),
            scope=(("ticket", tid), ("customer", customer["id"])),
            targets=(),
            checks=(),
            facts=(Fact("answer", value, fact_kind, tuple(distractors)),),
            customer_id=customer["id"],
            hidden={"article_id": article_id},
        )


FAMILIES: tuple[TaskFamily, ...] = (
    RefundDamaged(),
    RefundWithApproval(),
    DenyRefund(),
    CancelOrder(),
    Triage(),
    SlaEscalation(),
    MergeDuplicates(),
    UpdateEmail(),
    KnowledgeAnswer(),
)
for _family in FAMILIES:  # the helpdesk's figures until a world binds its own (World.parameters)
    _family.parameters = PARAMETERS
