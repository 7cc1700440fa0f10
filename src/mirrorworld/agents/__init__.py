"""Agents: scripted baselines, test doubles, replay and an OpenAI-compatible client."""

from __future__ import annotations

from typing import Any

from mirrorworld.agents.base import Agent, EpisodeContext, assistant, tool_call
from mirrorworld.agents.openai import OpenAIAgent
from mirrorworld.agents.replay import ReplayAgent
from mirrorworld.agents.scripted import (
    CallListAgent,
    ClaimSuccessAgent,
    NoopAgent,
    OracleAgent,
    RandomAgent,
    RefuseAgent,
    ScriptedAgent,
)
from mirrorworld.errors import RegistryError

__all__ = [
    "AGENTS",
    "Agent",
    "CallListAgent",
    "ClaimSuccessAgent",
    "EpisodeContext",
    "NoopAgent",
    "OpenAIAgent",
    "OracleAgent",
    "RandomAgent",
    "RefuseAgent",
    "ReplayAgent",
    "ScriptedAgent",
    "assistant",
    "make_agent",
    "tool_call",
]

AGENTS = ("noop", "refuse", "claim", "random", "oracle", "oracle_retry", "replay", "openai")


def make_agent(name: str, **options: Any) -> Agent:
    """An agent by name. ``replay`` needs ``replay=RUN``; ``openai`` needs ``base_url`` and ``model``."""
    if name == "noop":
        return NoopAgent()
    if name == "refuse":
        return RefuseAgent()
    if name == "claim":
        return ClaimSuccessAgent()
    if name == "oracle":
        return OracleAgent()
    if name == "oracle_retry":
        return OracleAgent(retries=3)
    if name == "random":
        return RandomAgent(seed=int(options.get("seed") or 0))
    if name == "replay":
        if not options.get("replay"):
            raise RegistryError("the replay agent needs a run file (--replay RUN)")
        return ReplayAgent.from_run(options["replay"])
    if name == "openai":
        if not options.get("base_url") or not options.get("model"):
            raise RegistryError("the openai agent needs --base-url and --model")
        return OpenAIAgent(base_url=options["base_url"], model=options["model"], api_key=options.get("api_key"))
    raise RegistryError(f"no agent named {name!r} (known: {', '.join(AGENTS)})")
