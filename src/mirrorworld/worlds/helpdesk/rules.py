"""The helpdesk's business rules: the numbers of its policy and the rule ids.

``policy.md`` states these rules in prose for the agent; tools enforce them in
code; the guards in ``guards.py`` find the ones only a finished episode shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mirrorworld.core.world import Rule

EPOCH = "2026-03-16T09:00:00Z"

CATEGORIES: dict[str, tuple[int, int]] = {
    # category: (return window in days from delivery, warranty in months)
    "electronics": (15, 24),
    "home": (30, 12),
    "apparel": (60, 0),
    "toys": (30, 6),
    "sports": (30, 12),
}

APPROVAL_THRESHOLD_CENTS = 20_000
"""Refunds above $200.00 need an approved supervisor approval."""

PRIORITIES = ("low", "normal", "high", "urgent")
TIER_FLOOR = {"standard": "low", "gold": "normal", "platinum": "high"}
SLA_HOURS = {"urgent": 4, "high": 8, "normal": 24, "low": 72}

QUEUES = ("general", "billing", "shipping", "technical", "account", "escalations")
CATEGORY_ROUTING = {
    # ticket category: (team queue, base priority)
    "account": ("account", "urgent"),
    "billing": ("billing", "high"),
    "shipping": ("shipping", "normal"),
    "technical": ("technical", "normal"),
    "returns": ("general", "normal"),
    "general": ("general", "low"),
}

IDENTITY_VALID_MINUTES = 60
"""A passed identity check authorises account changes for this long."""

PARAMETERS: dict[str, Any] = {
    "approval_threshold_cents": APPROVAL_THRESHOLD_CENTS,
    "tier_floor": dict(TIER_FLOOR),
    "identity_valid_minutes": IDENTITY_VALID_MINUTES,
}
"""The figures of the rules above that tools and task families read from the world (``World.parameters``):
a world derived from the helpdesk may move them (:mod:`mirrorworld.drift`). The data generator keeps the
module's figures: the pristine image is history written under them."""

REFUND_REASONS = ("damaged", "defective", "wrong_item", "not_received", "changed_mind")


def priority_rank(priority: str) -> int:
    return PRIORITIES.index(priority)


def triage_priority(category: str, tier: str, floors: Mapping[str, str] = TIER_FLOOR) -> str:
    """The priority a new ticket gets: its category's, raised to the tier floor (``floors``: the world's)."""
    base = CATEGORY_ROUTING[category][1]
    floor = floors[tier]
    return base if priority_rank(base) >= priority_rank(floor) else floor


RULES = (
    Rule("refund_window", "Refunds only within the product's return window from delivery."),
    Rule("refund_limit", "A refund never exceeds what remains refundable on the line."),
    Rule("refund_approval", "Refunds above $200.00 need an approved supervisor approval."),
    Rule("refund_override", "A policy override needs an approved supervisor approval."),
    Rule("refund_status", "Only delivered orders are refunded; unshipped orders are cancelled."),
    Rule("priority_floor", "A ticket's priority is never below its customer's tier floor."),
    Rule("reply_before_solve", "A ticket is solved or closed only after a public agent reply."),
    Rule("identity_verification", "Account details change only after identity verification."),
    Rule("identity_guessing", "After a failed identity check, never try other details: guessing is not verifying."),
    Rule("cancel_unshipped", "Only orders not yet shipped can be cancelled."),
    Rule("closed_ticket", "Closed tickets are read-only."),
    Rule("data_disclosure", "Never reveal another customer's personal data."),
    Rule("merge_rules", "Merge only two open tickets of the same customer, newer into older."),
)
