"""The helpdesk team world (``mirrorworld/HelpdeskTeam-v0``): the helpdesk's contact center
staffed by customer, tier 1, supervisor and tier 2, a world with seats.

``SPEC`` is what the ``mirrorworld.worlds`` entry point names; the world's code
is imported when ``HelpdeskTeamWorld`` is first used.
"""

from typing import Any

from mirrorworld.core.registry import WorldSpec
from mirrorworld.worlds.helpdesk_team.rules import CUSTOMER, ROLE_TOOLS, ROLES, STAFF, SUPERVISOR, TIER1, TIER2

__all__ = [
    "CUSTOMER",
    "ROLES",
    "ROLE_TOOLS",
    "SPEC",
    "STAFF",
    "SUPERVISOR",
    "TIER1",
    "TIER2",
    "HelpdeskTeamWorld",
]

SPEC = WorldSpec(
    "helpdesk_team",
    "mirrorworld/HelpdeskTeam-v0",
    "mirrorworld.worlds.helpdesk_team.world:HelpdeskTeamWorld",
    "The helpdesk staffed by a team (customer, tier 1, supervisor, tier 2), for multi-agent episodes.",
)


def __getattr__(name: str) -> Any:
    if name == "HelpdeskTeamWorld":
        from mirrorworld.worlds.helpdesk_team.world import HelpdeskTeamWorld

        return HelpdeskTeamWorld
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
