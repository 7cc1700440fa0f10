"""Each built-in world's env id, tool order and family order, pinned.

A tool's index in ``world.tools`` is its Gymnasium action (and a seat's tool
index its PettingZoo action); a family's index decides which task
``reset(seed=i)`` plays. Policies trained on a world depend on both, so a
change here must come with a new world version.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from mirrorworld.core.registry import default
from mirrorworld.core.seats import Seated


@dataclass(frozen=True)
class Pin:
    env_id: str
    tools: tuple[str, ...]
    families: tuple[str, ...]
    seats: tuple[tuple[str, tuple[str, ...]], ...] | None = None
    """Each role in turn order, with its seat's tools in action order (worlds with seats)."""


PINS = {
    "helpdesk": Pin(
        "mirrorworld/Helpdesk-v0",
        (
            "get_policy",
            "search_customers",
            "get_customer",
            "list_orders",
            "get_order",
            "search_tickets",
            "get_ticket",
            "search_articles",
            "get_article",
            "list_teams",
            "reply_ticket",
            "set_priority",
            "set_status",
            "assign_ticket",
            "add_tags",
            "escalate_ticket",
            "merge_tickets",
            "request_approval",
            "issue_refund",
            "cancel_order",
            "verify_identity",
            "update_customer",
            "close_ticket",
            "respond",
        ),
        (
            "refund_damaged",
            "refund_with_approval",
            "deny_refund",
            "cancel_order",
            "triage",
            "sla_escalation",
            "merge_duplicates",
            "update_email",
            "kb_answer",
        ),
    ),
    "helpdesk_v1": Pin(
        "mirrorworld/Helpdesk-v1",
        (
            "get_policy",
            "search_customers",
            "get_customer",
            "list_orders",
            "get_order",
            "search_tickets",
            "get_ticket",
            "search_articles",
            "get_article",
            "list_teams",
            "reply_ticket",
            "set_priority",
            "set_status",
            "assign_ticket",
            "add_tags",
            "escalate_ticket",
            "merge_tickets",
            "request_approval",
            "create_refund",
            "cancel_order",
            "verify_identity",
            "update_customer",
            "close_ticket",
            "respond",
        ),
        (
            "refund_damaged",
            "refund_with_approval",
            "deny_refund",
            "cancel_order",
            "triage",
            "sla_escalation",
            "merge_duplicates",
            "update_email",
            "kb_answer",
        ),
    ),
    "helpdesk_team": Pin(
        "mirrorworld/HelpdeskTeam-v0",
        (
            "get_policy",
            "search_customers",
            "get_customer",
            "list_orders",
            "get_order",
            "get_ticket",
            "search_articles",
            "get_article",
            "check_email",
            "list_approval_requests",
            "message_agent",
            "confirm_change",
            "leave_chat",
            "ask_customer",
            "send_verification_code",
            "verify_code",
            "propose_account_change",
            "request_supervisor_approval",
            "decide_approval",
            "transfer_to_tier2",
            "refund_lost_parcel",
            "issue_refund",
            "cancel_order",
            "respond",
        ),
        ("team_refund_approval", "team_escalation", "team_verify_identity", "team_wrong_order"),
        (
            ("customer", ("check_email", "message_agent", "confirm_change", "leave_chat")),
            (
                "tier1",
                (
                    "get_policy",
                    "search_customers",
                    "get_customer",
                    "list_orders",
                    "get_order",
                    "get_ticket",
                    "search_articles",
                    "get_article",
                    "ask_customer",
                    "send_verification_code",
                    "verify_code",
                    "propose_account_change",
                    "request_supervisor_approval",
                    "transfer_to_tier2",
                    "issue_refund",
                    "cancel_order",
                    "respond",
                ),
            ),
            ("supervisor", ("get_policy", "get_customer", "get_order", "list_approval_requests", "decide_approval")),
            (
                "tier2",
                (
                    "get_policy",
                    "search_customers",
                    "get_customer",
                    "list_orders",
                    "get_order",
                    "get_ticket",
                    "ask_customer",
                    "request_supervisor_approval",
                    "refund_lost_parcel",
                    "issue_refund",
                    "respond",
                ),
            ),
        ),
    ),
    "sales": Pin(
        "mirrorworld/Sales-v0",
        (
            "get_policy",
            "search_parties",
            "get_party",
            "search_products",
            "get_product",
            "get_opportunity",
            "get_sale",
            "list_sales",
            "get_invoice",
            "add_contact",
            "create_lead",
            "qualify_lead",
            "mark_lost",
            "create_quotation",
            "request_discount_approval",
            "add_line",
            "quote_sale",
            "confirm_sale",
            "cancel_sale",
            "ship_shipment",
            "post_invoice",
            "pay_invoice",
            "respond",
            "convert_opportunity",
            "remove_line",
            "reopen_sale",
            "credit_invoice",
            "list_overdue_invoices",
            "quote_price",
            "return_sale",
            "receive_return",
            "set_invoice_method",
        ),
        (
            "add_contact",
            "new_lead",
            "qualify_lead",
            "lose_opportunity",
            "new_quotation",
            "discount_quotation",
            "confirm_order",
            "ship_order",
            "collect_payment",
            "cancel_quotation",
            "partial_shipment",
            "short_payment",
            "record_overpayment",
            "credit_invoice",
            "convert_opportunity",
            "win_opportunity",
            "amend_quotation",
            "chase_overdue",
            "pay_overdue",
            "credit_hold",
            "pay_then_confirm",
            "price_list_quotation",
            "price_question",
            "return_order",
            "invoice_on_shipment",
            "partial_invoice",
        ),
    ),
}
PINS["sales_v1"] = Pin("mirrorworld/Sales-v1", PINS["sales"].tools, PINS["sales"].families)
"""Sales v1 changes a tax parameter only: the same tools and families, in the same order, as Sales v0."""

BUMP = (
    "{world}: {what} changed. Trained policies depend on action indices and task order: keep the order "
    "(append new entries at the end) or bump the world's version (a new env id) and update this pin."
)


def test_every_built_in_world_is_pinned() -> None:
    built_in = {s.name for s in default.specs() if s.factory.startswith("mirrorworld.worlds.")}
    assert built_in == set(PINS), "a built-in world without a pin (or a pin without a world): add it to PINS"


@pytest.mark.parametrize("name", sorted(PINS))
def test_env_id_tools_and_families_are_pinned(name: str) -> None:
    pin = PINS[name]
    world = default.get(name)
    assert world.id == pin.env_id == default.env_id(name), BUMP.format(world=name, what="the env id")
    assert world.tool_names == pin.tools, BUMP.format(world=name, what="the tool order (the action indices)")
    assert tuple(f.name for f in world.families) == pin.families, BUMP.format(world=name, what="the family order")
    if pin.seats is not None:
        assert isinstance(world, Seated)
        seats = tuple((role, tuple(world.role_tools[role])) for role in world.roles)
        assert seats == pin.seats, BUMP.format(world=name, what="the roles' turn order or a seat's tool order")
