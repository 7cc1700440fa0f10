"""Simulated parties of a team episode: the customer simulator, scripted staff and the team episode they share.

* :mod:`mirrorworld.episodes.team` — :class:`TeamEpisode`, one session shared by several roles;
* :mod:`mirrorworld.sim.policies` — the role-policy interface and scripted staff;
* :mod:`mirrorworld.sim.customer` — the deterministic, seeded customer simulator;
* :mod:`mirrorworld.sim.llm` — a customer played by a model behind any OpenAI-compatible endpoint;
* :mod:`mirrorworld.sim.measure` — how often the simulator makes a gold team fail.
"""

from __future__ import annotations

from mirrorworld.sim.customer import CustomerProfile, ScriptedCustomer
from mirrorworld.sim.policies import (
    ClaimPolicy,
    DiligentSupervisor,
    GoldStaff,
    IdlePolicy,
    OverreachingStaff,
    RefusePolicy,
    RoleContext,
    RolePolicy,
    RubberStampSupervisor,
)
from mirrorworld.episodes.team import WAIT, Action, RoleObservation, TeamEpisode, Turn

__all__ = [
    "WAIT",
    "Action",
    "ClaimPolicy",
    "CustomerProfile",
    "DiligentSupervisor",
    "GoldStaff",
    "IdlePolicy",
    "OverreachingStaff",
    "RefusePolicy",
    "RoleContext",
    "RoleObservation",
    "RolePolicy",
    "RubberStampSupervisor",
    "ScriptedCustomer",
    "TeamEpisode",
    "Turn",
]
