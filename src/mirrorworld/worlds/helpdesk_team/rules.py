"""The helpdesk team's roles, their tools and the rules a team adds to the helpdesk's.

Who may call what is data, not a naming convention: :data:`ROLE_TOOLS` maps
each role to the tools its seat in the contact center offers. The
multi-agent environments enforce it; a single agent driving a session directly
(the conformance checks, the verifier audit) is not bound by it.

``policy.md`` states the rules in prose; tools enforce them in code.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from mirrorworld.core.world import Rule
from mirrorworld.worlds.helpdesk.rules import RULES as HELPDESK_RULES

__all__ = [
    "CODE_VALID_MINUTES",
    "CUSTOMER",
    "LOST_PARCEL_DAYS",
    "ROLES",
    "ROLE_TOOLS",
    "RULES",
    "STAFF",
    "SUPERVISOR",
    "TIER1",
    "TIER2",
]

CUSTOMER, TIER1, SUPERVISOR, TIER2 = "customer", "tier1", "supervisor", "tier2"
ROLES: tuple[str, ...] = (CUSTOMER, TIER1, SUPERVISOR, TIER2)
"""Every role, in turn order: within a cycle the customer acts first, tier 2 last."""
STAFF: tuple[str, ...] = (TIER1, SUPERVISOR, TIER2)

LOST_PARCEL_DAYS = 7
"""A shipped order not delivered this many days after shipping is a lost parcel."""
CODE_VALID_MINUTES = 30
"""How long an emailed verification code can be used."""

_READS_STAFF = ("get_policy", "search_customers", "get_customer", "list_orders", "get_order", "get_ticket")

ROLE_TOOLS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        # The customer acts where a real customer would: in the chat and in their own mailbox.
        CUSTOMER: ("check_email", "message_agent", "confirm_change", "leave_chat"),
        TIER1: (
            *_READS_STAFF,
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
        SUPERVISOR: ("get_policy", "get_customer", "get_order", "list_approval_requests", "decide_approval"),
        TIER2: (
            *_READS_STAFF,
            "ask_customer",
            "request_supervisor_approval",
            "refund_lost_parcel",
            "issue_refund",
            "respond",
        ),
    }
)
"""The tools each role may call, in action-index order (index 0 of a role's action space is ``wait``)."""

TEAM_RULES = (
    Rule(
        "approval_policy",
        "A supervisor approves only refunds the policy allows: a delivered order, within the line's return "
        "window, for no more than remains refundable on the line.",
    ),
    Rule(
        "lost_parcel",
        "Lost-parcel refunds are made by tier 2 after a transfer, for orders shipped at least 7 days ago "
        "and never delivered.",
    ),
    Rule(
        "dual_control",
        "Account details change only when the customer confirms the change, after identity verification "
        "with a code emailed to the address on file.",
    ),
    Rule("chat_closed", "Nothing is said in a chat the customer has left."),
    Rule("approved_line", "A refund made with an approval refunds the line the approval was requested for."),
)

RULES: tuple[Rule, ...] = (*HELPDESK_RULES, *TEAM_RULES)
