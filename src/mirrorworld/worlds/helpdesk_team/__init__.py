"""The helpdesk team world: the helpdesk's contact center staffed by customer, tier 1, supervisor and tier 2."""

from __future__ import annotations

from mirrorworld.worlds.helpdesk_team.rules import CUSTOMER, ROLE_TOOLS, ROLES, STAFF, SUPERVISOR, TIER1, TIER2
from mirrorworld.worlds.helpdesk_team.world import HelpdeskTeamWorld

__all__ = [
    "CUSTOMER",
    "ROLES",
    "ROLE_TOOLS",
    "STAFF",
    "SUPERVISOR",
    "TIER1",
    "TIER2",
    "HelpdeskTeamWorld",
    "team_world",
]

_FALLBACK: dict[tuple[float, int], HelpdeskTeamWorld] = {}


def team_world(*, scale: float = 1.0, data_seed: int = 0) -> HelpdeskTeamWorld:
    """The helpdesk team world: the registered one when ``helpdesk_team`` is registered, else one built here.

    Either way one instance per ``(scale, data_seed)`` and process, so its image
    is generated once.
    """
    from mirrorworld.errors import RegistryError
    from mirrorworld.registry import default

    try:
        world = default.get("helpdesk_team", scale=scale, data_seed=data_seed)
    except RegistryError:
        key = (float(scale), int(data_seed))
        if key not in _FALLBACK:
            _FALLBACK[key] = HelpdeskTeamWorld(scale=scale, data_seed=data_seed)
        return _FALLBACK[key]
    if not isinstance(world, HelpdeskTeamWorld):
        raise RegistryError("the world registered as helpdesk_team is not a HelpdeskTeamWorld")
    return world
