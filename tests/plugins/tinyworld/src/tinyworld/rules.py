"""The library's business rules: the numbers of its policy and the rule ids.

``policy.md`` states them in prose for the agent; ``tools.py`` enforces them;
the guard in ``world.py`` finds the one only a finished episode shows.
"""

from __future__ import annotations

from datetime import date, timedelta

from mirrorworld.core.world import Rule

EPOCH = "2026-03-02T09:00:00Z"
"""The simulated time at which the library's data is generated (and every task starts)."""

TODAY = EPOCH[:10]

LOAN_DAYS = 14
"""How many days a renewal adds to a loan's due date."""

RENEWAL_LIMIT = 2
"""How many times a loan may be renewed."""

MEMBER = "member"
LIBRARIAN = "librarian"
ROLES = (MEMBER, LIBRARIAN)
"""The seats, in turn order: the member speaks first."""

ROLE_TOOLS: dict[str, tuple[str, ...]] = {
    MEMBER: ("message_desk",),
    LIBRARIAN: ("find_member", "list_loans", "renew_loan", "respond"),
}

RULES = (
    Rule("renewal_limit", f"A loan is renewed at most {RENEWAL_LIMIT} times."),
    Rule("overdue", "An overdue loan is not renewed: the book must be returned first."),
    Rule("privacy", "Never tell a member another member's details."),
)


def later(day: str, days: int = LOAN_DAYS) -> str:
    """The ISO date ``days`` after ``day``."""
    return (date.fromisoformat(day) + timedelta(days=days)).isoformat()
