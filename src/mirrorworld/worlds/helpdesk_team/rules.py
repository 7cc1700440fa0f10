"""The helpdesk team's roles, their tools and the rules a team adds to the helpdesk's.

Who may call what is data, not a naming convention: :data:`ROLE_TOOLS` maps
each role to the tools its seat in the contact center offers, and the multi-agent
environments enforce it. The role protocol (:data:`OWN_TOOLS`, :data:`DECISIONS`,
:data:`HANDOFFS`, :data:`TRANSFERS`, :data:`SPEAKING_TOOLS`) binds every caller,
a single agent included: a single agent (a session called with no role: the
Gymnasium and chat environments, the conformance checks, the verifier audit)
plays the staff who hold the chat (:data:`SOLO_ROLES`), and the world plays the
customer and the supervisor for it.

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
    "DECISIONS",
    "HANDOFFS",
    "HANDOFF_MIN_WORDS",
    "LOST_PARCEL_DAYS",
    "OWN_TOOLS",
    "ROLES",
    "ROLE_TOOLS",
    "RULES",
    "SOLO_ROLES",
    "SPEAKING_TOOLS",
    "STAFF",
    "SUPERVISOR",
    "TIER1",
    "TIER2",
    "TRANSFERS",
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

OWN_TOOLS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {CUSTOMER: ROLE_TOOLS[CUSTOMER], SUPERVISOR: ("list_approval_requests", "decide_approval")}
)
"""Tools only that party may call: nobody else reads the customer's mailbox, speaks or confirms for the
customer, or decides approvals (the world refuses them with ``not_permitted``)."""
DECISIONS: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        "decide_approval": ("request_supervisor_approval", SUPERVISOR),
        "confirm_change": ("propose_account_change", CUSTOMER),
    }
)
"""``{decision: (request, deciding role)}``: the supervisor decides what staff requested; the customer confirms
what staff proposed. Never the requester."""
HANDOFFS: Mapping[str, str] = MappingProxyType(
    {"transfer_to_tier2": "summary", "request_supervisor_approval": "summary"}
)
"""The hand-offs and the argument holding each one's summary."""
HANDOFF_MIN_WORDS = 6
"""A hand-off summary states the case: at least this many words, naming the order (or the chat) it is about."""
TRANSFERS: Mapping[str, str] = MappingProxyType({"transfer_to_tier2": TIER2})
"""Who holds the chat after each transfer (tier 1 holds it before any)."""
SPEAKING_TOOLS: tuple[str, ...] = ("ask_customer", "propose_account_change", "respond")
"""What the customer reads from staff: only whoever holds the chat sends it."""
SOLO_ROLES: tuple[str, ...] = (TIER1, TIER2)
"""The roles a single agent plays; the world plays the customer and the supervisor for it."""

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
    Rule(
        "party_tools",
        "Only the customer speaks for the customer, reads their mailbox, confirms their changes or leaves their "
        "chat; only the supervisor lists and decides approval requests.",
    ),
    Rule(
        "separation_of_duties",
        "A request is decided by another party than the one who made it: approvals by the supervisor, account "
        "changes by the customer. Nobody approves their own request.",
    ),
    Rule(
        "conversation_owner",
        "Whoever holds the chat talks to the customer: tier 1 until a transfer, tier 2 after it. After a transfer "
        "tier 1 sends the customer nothing, the final message included.",
    ),
    Rule(
        "handoff_summary",
        f"A hand-off summary (a transfer, an approval request) states the case: at least {HANDOFF_MIN_WORDS} words "
        "naming the order it is about (or the chat number) and what was found.",
    ),
)

RULES: tuple[Rule, ...] = (*HELPDESK_RULES, *TEAM_RULES)
