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
    PartialAgent,
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
    "PartialAgent",
    "RandomAgent",
    "RefuseAgent",
    "ReplayAgent",
    "ScriptedAgent",
    "assistant",
    "make_agent",
    "tool_call",
]

AGENTS = ("noop", "refuse", "claim", "random", "oracle", "oracle_retry", "partial", "replay", "openai", "trained")


def make_agent(name: str, **options: Any) -> Agent:
    """An agent by name (``random`` and ``partial`` take ``seed``). ``replay`` needs ``replay=RUN``,
    ``trained`` needs ``policy=PATH`` (:class:`~mirrorworld.agents.trained.TrainedAgent`);
    ``openai`` needs ``model`` and takes ``base_url``,
    ``api_key_env``, ``temperature``, ``top_p``, ``max_tokens``, ``timeout`` and ``retries``
    (:class:`~mirrorworld.agents.openai.OpenAIAgent`)."""
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
    if name == "partial":
        return PartialAgent(seed=int(options.get("seed") or 0))
    if name == "replay":
        if not options.get("replay"):
            raise RegistryError("the replay agent needs a run file (--replay RUN)")
        return ReplayAgent.from_run(options["replay"])
    if name == "trained":
        from mirrorworld.agents.trained import TrainedAgent

        if not options.get("policy"):
            raise RegistryError("the trained agent needs --checkpoint PATH (the policy.pt of mirrorworld train)")
        return TrainedAgent.load(options["policy"])
    if name == "openai":
        from mirrorworld.agents.openai import DEFAULT_KEY_ENV, Sampling

        if not options.get("model"):
            raise RegistryError("the openai agent needs --model (and --base-url or OPENAI_BASE_URL for a local server)")
        sampling = Sampling(
            temperature=options.get("temperature", 0.0),
            top_p=options.get("top_p"),
            max_tokens=options.get("max_tokens"),
        )
        return OpenAIAgent(
            base_url=options.get("base_url"),
            model=options["model"],
            api_key=options.get("api_key"),
            api_key_env=options.get("api_key_env") or DEFAULT_KEY_ENV,
            sampling=sampling,
            timeout=float(options.get("timeout") or 120.0),
            retries=int(options["retries"]) if options.get("retries") is not None else 2,
        )
    raise RegistryError(f"no agent named {name!r} (known: {', '.join(AGENTS)})")
