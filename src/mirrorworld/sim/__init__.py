"""Simulated parties of a team episode: the role-policy interface, generic baselines and the customer simulators.

* :mod:`mirrorworld.sim.policies` — the role-policy interface and the baselines every seated world can use
  (gold staff, idle, refuse, claim);
* :mod:`mirrorworld.sim.customer` — the deterministic, seeded customer simulator;
* :mod:`mirrorworld.sim.llm` — a customer played by a model behind any OpenAI-compatible endpoint;
* :mod:`mirrorworld.sim.measure` — how often a simulator makes a gold team fail.

The team episode they play in is :class:`mirrorworld.episodes.TeamEpisode` (re-exported here with its
types). Policies particular to one world live with it and are named by its ``policy_menu``; nothing here
imports a world.
"""

from __future__ import annotations

from mirrorworld.episodes.team import WAIT, Action, RoleObservation, TeamEpisode, Turn
from mirrorworld.sim.customer import CustomerProfile, ScriptedCustomer
from mirrorworld.sim.policies import (
    ClaimPolicy,
    GoldStaff,
    IdlePolicy,
    RefusePolicy,
    RoleContext,
    RolePolicy,
)

__all__ = [
    "WAIT",
    "Action",
    "ClaimPolicy",
    "CustomerProfile",
    "GoldStaff",
    "IdlePolicy",
    "RefusePolicy",
    "RoleContext",
    "RoleObservation",
    "RolePolicy",
    "ScriptedCustomer",
    "TeamEpisode",
    "Turn",
]
