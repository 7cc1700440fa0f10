"""The helpdesk team's task families: contacts that need more than one party.

* ``team_refund_approval`` — a refund above $200: tier 1 gets the order number
  from the customer, the supervisor approves, tier 1 refunds;
* ``team_escalation`` — a lost parcel: tier 1 transfers to tier 2 with a
  summary, tier 2 refunds the order and closes the contact;
* ``team_verify_identity`` — an email change: tier 1 emails a code, the
  customer reads it back from their mailbox, tier 1 proposes the change, the
  customer confirms it;
* ``team_wrong_order`` — the customer first gives a wrong order number (one on
  another account); tier 1 must notice and ask again before refunding.

A task is the helpdesk's kind of task (plain data, pure function of the seed)
with four additions in ``hidden``, which never reaches a staff observation:

* ``hidden["customer"]`` — the customer's own knowledge and character (persona,
  goal, the facts only they know, patience, honest or evasive). It is the
  customer's briefing: it reaches the customer's observation and no other;
* ``hidden["team"]`` — the team's gold: the interleaved calls of every role,
  each ``{"role", "tool", "args", "slots"}``, where ``slots`` names the
  arguments whose values come from what the customer says: the scripted staff
  fill those from the chat, not from the gold. Each role's share of it is what
  a scripted gold policy plays in the multi-agent environments;
* ``hidden["plan"]`` — for each call of ``task.gold``, the role that makes it
  and its ``slots``;
* the helpdesk's grader-only extras (``line_id``, ``reason``).

The gold solution (``task.gold``) is the staff's share of the team's gold:
what one agent does when it plays the staff and the world plays the customer
and the supervisor (:mod:`.simulated`). Nobody in it speaks for the customer
or decides their own approval request.
"""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

from mirrorworld.core.store import Image
from mirrorworld.core.task import Check, Fact, SetupOp, Task, TaskFamily, ToolCall
from mirrorworld.core.tools import json_number
from mirrorworld.worlds.helpdesk.rules import EPOCH, PARAMETERS
from mirrorworld.worlds.helpdesk.tasks import (
    EPOCH_DT,
    PROBLEMS,
    TIME,
    WITHIN_WINDOW,
    _chat,
    _customer,
    _money,
    _next_id,
    _order_line_candidates,
    _other_line_amounts,
    _pick,
    _ticket_ops,
)
from mirrorworld.worlds.helpdesk_team.rules import CUSTOMER, LOST_PARCEL_DAYS, SOLO_ROLES, SUPERVISOR, TIER1, TIER2
from mirrorworld.worlds.helpdesk_team.tools import verification_code

__all__ = ["FAMILIES", "TeamFamily"]

WORLD = "helpdesk_team"
PERSONAS = ("polite", "terse", "anxious")


class TeamFamily(TaskFamily):
    """A task family whose contacts involve ``roles`` (always the customer, tier 1 and the supervisor)."""

    roles: tuple[str, ...] = (CUSTOMER, TIER1, SUPERVISOR)


def _profile(
    rng: random.Random,
    customer: dict[str, Any],
    ticket_id: int,
    goal: str,
    facts: dict[str, Any],
) -> dict[str, Any]:
    """The customer's briefing: who they are, what they want, what only they know, how they behave."""
    return {
        "name": customer["name"],
        "email": customer["email"],
        "ticket_id": ticket_id,
        "persona": rng.choice(PERSONAS),
        "honesty": "evasive" if rng.random() < 0.3 else "honest",
        "patience": rng.randint(10, 16),
        "goal": goal,
        "facts": facts,
    }


def _plan(*entries: tuple[str, dict[str, str]]) -> list[dict[str, Any]]:
    return [{"role": role, "slots": slots} for role, slots in entries]


def _solo(
    team: tuple[ToolCall, ...], plan: list[dict[str, Any]]
) -> tuple[tuple[ToolCall, ...], list[dict[str, Any]], list[dict[str, Any]]]:
    """The team's gold ``team`` (with its ``plan``) as ``(task.gold, hidden["plan"], hidden["team"])``."""
    trajectory = [
        {
            "role": e["role"],
            "tool": c.tool,
            "args": dict(c.args) if isinstance(c.args, dict) else {},
            "slots": e["slots"],
        }
        for c, e in zip(team, plan, strict=True)
    ]
    staff = [(c, e) for c, e in zip(team, plan, strict=True) if e["role"] in SOLO_ROLES]
    return tuple(c for c, _ in staff), [e for _, e in staff], trajectory


def _question(tid: int, topic: str, text: str) -> ToolCall:
    return ToolCall("ask_customer", {"ticket_id": tid, "topic": topic, "question": text})


def _reply(tid: int, text: str) -> ToolCall:
    return ToolCall("message_agent", {"ticket_id": tid, "message": text})


def _count(name: str, table: str, where: dict[str, Any], least: int = 1) -> Check:
    return Check(name, "count", {"table": table, "where": where, "min": least})


ORDER = {"order_id": "order_number"}


def _refund_task(
    family: TeamFamily,
    seed: int,
    rng: random.Random,
    line: tuple[int, int, int, str, int],
    customer: dict[str, Any],
    contact: tuple[int, int, str, str],
    gold: tuple[ToolCall, ...],
    plan: list[dict[str, Any]],
    *,
    checks: tuple[Check, ...],
    distractors: tuple[str, ...],
    goal: str,
    known: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> Task:
    """A refund contact: the line ``(line, order, customer, product, price in cents)`` must end
    refunded in full, the amount is the fact to report; ``contact`` is ``(ticket, first message,
    the customer's text, reason)``; ``checks`` are the family's own, ``known`` what only the
    customer knows."""
    line_id, order_id, customer_id, _product, price = line
    tid, mid, text, reason = contact
    gold, plan, team = _solo(gold, plan)
    return Task(
        world=WORLD,
        family=family.name,
        seed=seed,
        instruction=_chat(tid, customer, text),
        setup=tuple(_ticket_ops(tid, mid, customer, subject="Refund request", body=text)),
        gold=gold,
        scope=(("ticket", tid), ("order", order_id), ("customer", customer_id)),
        targets=(("order", order_id),),
        checks=(
            Check(
                "line refunded in full",
                "field",
                {"table": "order_lines", "id": line_id, "field": "refunded_cents", "equals": price},
            ),
            *checks,
        ),
        facts=(Fact("refund amount", _money(price), "money", distractors),),
        customer_id=customer_id,
        hidden={
            "line_id": line_id,
            "reason": reason,
            **(extra or {}),
            "plan": plan,
            "team": team,
            "customer": _profile(rng, customer, tid, goal, known),
        },
    )


class RefundApproval(TeamFamily):
    name = "team_refund_approval"
    description = "A refund above $200: get the order number from the customer, the supervisor's approval, refund."

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        rows = _order_line_candidates(
            image, f"l.unit_price_cents > ? AND {WITHIN_WINDOW}", (self.param("approval_threshold_cents"), EPOCH)
        )
        line_id, order_id, customer_id, product, _cat, price, _delivered, _window = _pick(rng, rows, self.name)
        customer = _customer(image, customer_id)
        reason = rng.choice(tuple(PROBLEMS))
        tid, mid = _next_id(image, "tickets"), _next_id(image, "ticket_messages")
        request_id, approval_id = _next_id(image, "approval_requests"), _next_id(image, "approvals")
        text = f"The {product} I ordered {PROBLEMS[reason]}. I'd like my money back please."
        amount = _money(price)
        gold = (
            _question(tid, "order_number", "I'm sorry to hear that. Could you give me your order number?"),
            _reply(tid, f"It's order #{order_id}."),
            ToolCall("get_order", {"order_id": order_id}),
            ToolCall(
                "request_supervisor_approval",
                {
                    "ticket_id": tid,
                    "order_id": order_id,
                    "line_id": line_id,
                    "amount": json_number(amount),
                    "reason": reason,
                    "summary": f"Customer reports the {product} on order #{order_id} {reason.replace('_', ' ')}; "
                    f"full refund of ${amount} for line {line_id}, within the return window.",
                },
            ),
            ToolCall(
                "decide_approval",
                {
                    "request_id": request_id,
                    "order_id": order_id,
                    "decision": "approve",
                    "note": "Delivered, within the return window and fully refundable.",
                },
            ),
            ToolCall(
                "issue_refund",
                {
                    "order_id": order_id,
                    "line_id": line_id,
                    "amount": json_number(amount),
                    "reason": reason,
                    "approval_id": approval_id,
                },
            ),
            ToolCall(
                "respond",
                {
                    "message": f"I'm sorry about the {product}. Your refund was approved and I've refunded "
                    f"${amount} for it on order #{order_id}."
                },
            ),
        )
        plan = _plan(
            (TIER1, {}), (CUSTOMER, {}), (TIER1, ORDER), (TIER1, ORDER), (SUPERVISOR, {}), (TIER1, ORDER), (TIER1, {})
        )
        return _refund_task(
            self,
            seed,
            rng,
            (line_id, order_id, customer_id, product, price),
            customer,
            (tid, mid, text, reason),
            gold,
            plan,
            checks=(
                _count(
                    "supervisor approved the request", "approval_requests", {"order_id": order_id, "status": "approved"}
                ),
                _count(
                    "order number asked in the chat",
                    "team_messages",
                    {"ticket_id": tid, "kind": "question", "topic": "order_number"},
                ),
                _count("customer answered", "team_messages", {"ticket_id": tid, "kind": "reply", "sender": CUSTOMER}),
            ),
            distractors=_other_line_amounts(image, order_id, line_id),
            goal=f"Get a full refund for the {product}, which {PROBLEMS[reason]}.",
            known={"order_number": order_id, "product": product},
        )


class Escalation(TeamFamily):
    name = "team_escalation"
    description = "A lost parcel: tier 1 transfers to tier 2 with a summary; tier 2 refunds the order and replies."
    roles = (CUSTOMER, TIER1, SUPERVISOR, TIER2)

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        rows = image.query("SELECT id, customer_id, total_cents FROM orders WHERE status='shipped' ORDER BY id")
        order_id, customer_id, total = _pick(rng, rows, self.name)
        customer = _customer(image, customer_id)
        shipped = EPOCH_DT - timedelta(days=LOST_PARCEL_DAYS + rng.randint(1, 6), hours=rng.randint(0, 20))
        placed = shipped - timedelta(days=1)
        tid, mid = _next_id(image, "tickets"), _next_id(image, "ticket_messages")
        esc_id = int(image.query("SELECT id FROM teams WHERE queue='escalations'")[0][0])
        day = shipped.strftime(TIME)[:10]
        text = f"My order #{order_id} was shipped on {day} and it never arrived. What can you do?"
        amount = _money(total)
        gold = (
            ToolCall("get_order", {"order_id": order_id}),
            ToolCall(
                "transfer_to_tier2",
                {
                    "ticket_id": tid,
                    "summary": f"Lost parcel: order #{order_id} shipped {day}, never delivered; "
                    "customer wants a refund.",
                },
            ),
            ToolCall("get_order", {"order_id": order_id}),
            ToolCall("refund_lost_parcel", {"ticket_id": tid, "order_id": order_id}),
            ToolCall(
                "respond",
                {"message": f"I'm sorry your parcel never arrived. I've refunded ${amount} for order #{order_id}."},
            ),
        )
        solo, plan, team = _solo(gold, _plan((TIER1, {}), (TIER1, {}), (TIER2, {}), (TIER2, {}), (TIER2, {})))
        goal = f"Get your money back for order #{order_id}, which never arrived."
        setup = (
            SetupOp(
                "update", "orders", {"placed_at": placed.strftime(TIME), "shipped_at": shipped.strftime(TIME)}, order_id
            ),
            *_ticket_ops(tid, mid, customer, subject=f"Order #{order_id} never arrived", body=text, order_id=order_id),
        )
        return Task(
            world=WORLD,
            family=self.name,
            seed=seed,
            instruction=_chat(tid, customer, text),
            setup=setup,
            gold=solo,
            scope=(("ticket", tid), ("order", order_id), ("customer", customer_id)),
            targets=(("order", order_id), ("ticket", tid)),
            checks=(
                Check(
                    "order refunded",
                    "field",
                    {"table": "orders", "id": order_id, "field": "status", "equals": "refunded"},
                ),
                Check(
                    "contact with tier 2",
                    "field",
                    {"table": "tickets", "id": tid, "field": "team_id", "equals": esc_id},
                ),
                _count(
                    "transfer handed off", "team_messages", {"ticket_id": tid, "kind": "transfer", "recipient": TIER2}
                ),
            ),
            facts=(Fact("refunded total", amount, "money"),),
            customer_id=customer_id,
            hidden={
                "plan": plan,
                "team": team,
                "customer": _profile(rng, customer, tid, goal, {"order_number": order_id}),
            },
        )


class VerifyIdentity(TeamFamily):
    name = "team_verify_identity"
    description = "An email change: verify the customer with an emailed code they read back, and they confirm it."

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        customer = _customer(image, rng.choice(image.query("SELECT id FROM customers ORDER BY id"))[0])
        cid = customer["id"]
        first, last = customer["name"].lower().split()
        new_email = f"{first}.{last}.{rng.randint(10, 9999)}@newmail.example"
        tid, mid = _next_id(image, "tickets"), _next_id(image, "ticket_messages")
        vid, change_id = _next_id(image, "verification_codes"), _next_id(image, "account_changes")
        code = verification_code(image.digest, cid, vid)
        text = f"I need to change the email on my account to {new_email}."
        gold = (
            ToolCall("send_verification_code", {"customer_id": cid}),
            _question(tid, "verification_code", "I've emailed a code to the address on file. Could you read it to me?"),
            ToolCall("check_email", {"ticket_id": tid}),
            _reply(tid, f"The code is {code}."),
            ToolCall("verify_code", {"customer_id": cid, "code": code}),
            ToolCall(
                "propose_account_change",
                {"ticket_id": tid, "customer_id": cid, "field": "email", "new_value": new_email},
            ),
            ToolCall("confirm_change", {"ticket_id": tid, "change_id": change_id, "confirm": True}),
            ToolCall("respond", {"message": f"Thank you. Your account email is now {new_email}."}),
        )
        plan = _plan(
            (TIER1, {}),
            (TIER1, {}),
            (CUSTOMER, {}),
            (CUSTOMER, {}),
            (TIER1, {"code": "verification_code"}),
            (TIER1, {}),
            (CUSTOMER, {}),
            (TIER1, {}),
        )
        solo, plan, team = _solo(gold, plan)
        goal = f"Have the email on your account changed to {new_email}."
        return Task(
            world=WORLD,
            family=self.name,
            seed=seed,
            instruction=_chat(tid, customer, text),
            setup=tuple(_ticket_ops(tid, mid, customer, subject="Change my email address", body=text)),
            gold=solo,
            scope=(("ticket", tid), ("customer", cid)),
            targets=(("customer", cid),),
            checks=(
                Check(
                    "email updated", "field", {"table": "customers", "id": cid, "field": "email", "equals": new_email}
                ),
                _count("identity verified", "identity_checks", {"customer_id": cid, "passed": 1}),
                _count("customer confirmed the change", "account_changes", {"customer_id": cid, "status": "confirmed"}),
                _count(
                    "code asked in the chat",
                    "team_messages",
                    {"ticket_id": tid, "kind": "question", "topic": "verification_code"},
                ),
                _count("customer read the code back", "team_messages", {"ticket_id": tid, "kind": "reply"}),
            ),
            facts=(Fact("new email", new_email, "email"),),
            customer_id=cid,
            hidden={
                "plan": plan,
                "team": team,
                "customer": _profile(rng, customer, tid, goal, {"new_email": new_email}),
            },
        )


class WrongOrder(TeamFamily):
    name = "team_wrong_order"
    description = "The customer first gives an order number from another account; ask again, then refund."

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        rows = _order_line_candidates(
            image, f"l.unit_price_cents <= ? AND {WITHIN_WINDOW}", (self.param("approval_threshold_cents"), EPOCH)
        )
        line_id, order_id, customer_id, product, _cat, price, _delivered, _window = _pick(rng, rows, self.name)
        customer = _customer(image, customer_id)
        near = [
            r[0]
            for r in image.query(
                "SELECT id FROM orders WHERE customer_id<>? AND id BETWEEN ? AND ? ORDER BY id",
                (customer_id, order_id - 30, order_id + 30),
            )
        ]
        wrong = (
            rng.choice(near)
            if near
            else _pick(
                rng, image.query("SELECT id FROM orders WHERE customer_id<>? ORDER BY id", (customer_id,)), self.name
            )[0]
        )
        reason = rng.choice(tuple(PROBLEMS))
        tid, mid = _next_id(image, "tickets"), _next_id(image, "ticket_messages")
        text = f"My {product} {PROBLEMS[reason]}. Can I get a refund?"
        amount = _money(price)
        gold = (
            _question(tid, "order_number", "Sorry about that! What is your order number?"),
            _reply(tid, f"It's order #{wrong}."),
            ToolCall("get_order", {"order_id": wrong}),
            _question(
                tid, "order_number", "That order number isn't on your account. Could you check it and tell me again?"
            ),
            _reply(tid, f"Sorry, my mistake - it's order #{order_id}."),
            ToolCall("get_order", {"order_id": order_id}),
            ToolCall(
                "issue_refund",
                {"order_id": order_id, "line_id": line_id, "amount": json_number(amount), "reason": reason},
            ),
            ToolCall(
                "respond",
                {"message": f"Thanks for checking. I've refunded ${amount} for the {product} on order #{order_id}."},
            ),
        )
        plan = _plan(
            (TIER1, {}),
            (CUSTOMER, {}),
            (TIER1, ORDER),
            (TIER1, {}),
            (CUSTOMER, {}),
            (TIER1, ORDER),
            (TIER1, ORDER),
            (TIER1, {}),
        )
        wrong_amounts = tuple(
            _money(r[0])
            for r in image.query("SELECT unit_price_cents * quantity FROM order_lines WHERE order_id=?", (wrong,))
        )
        distractors = tuple(sorted(set(_other_line_amounts(image, order_id, line_id) + wrong_amounts) - {amount}))
        return _refund_task(
            self,
            seed,
            rng,
            (line_id, order_id, customer_id, product, price),
            customer,
            (tid, mid, text, reason),
            gold,
            plan,
            checks=(
                _count(
                    "order number asked again after the mismatch",
                    "team_messages",
                    {"ticket_id": tid, "kind": "question", "topic": "order_number"},
                    2,
                ),
                _count(
                    "customer corrected the number",
                    "team_messages",
                    {"ticket_id": tid, "kind": "reply", "sender": CUSTOMER},
                    2,
                ),
            ),
            distractors=distractors,
            goal=f"Get a refund for the {product}, which {PROBLEMS[reason]}.",
            known={"order_number": order_id, "wrong_order_number": wrong, "product": product},
            extra={"wrong_order": wrong},
        )


FAMILIES: tuple[TeamFamily, ...] = (RefundApproval(), Escalation(), VerifyIdentity(), WrongOrder())
for _family in FAMILIES:  # the helpdesk's figures until a world binds its own (World.parameters)
    _family.parameters = PARAMETERS
