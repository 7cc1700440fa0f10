"""The agent interface.

An agent sees what an LLM agent sees: the chat messages so far and the tools in
OpenAI format, and answers with one assistant message (text and/or
``tool_calls``). An assistant message without tool calls ends the episode; its
text is the final message to the customer.

``reset`` hands the agent an :class:`EpisodeContext`. Its ``task`` field is
privileged: only the oracle and test doubles may read it; a real agent must
not.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from mirrorworld.core.task import Task
from mirrorworld.core.world import World

__all__ = ["Agent", "EpisodeContext", "assistant", "tool_call"]

Message = dict[str, Any]


@dataclass(frozen=True)
class EpisodeContext:
    """What an agent is told when an episode starts."""

    world: World
    task: Task
    seed: int


def tool_call(call_id: str, name: str, args: dict[str, Any] | str) -> dict[str, Any]:
    """An OpenAI-format tool call."""
    text = args if isinstance(args, str) else json.dumps(args)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


def assistant(content: str | None = None, calls: list[dict[str, Any]] | None = None) -> Message:
    """An OpenAI-format assistant message."""
    msg: Message = {"role": "assistant", "content": content}
    if calls:
        msg["tool_calls"] = calls
    return msg


class Agent(ABC):
    """Base class of agents. One instance plays one episode at a time."""

    name: str = "agent"

    def reset(self, context: EpisodeContext) -> None:  # noqa: B027 - optional hook
        """Prepare for a new episode."""

    @abstractmethod
    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> Message:
        """The next assistant message."""

    def usage(self) -> dict[str, int] | None:
        """What the episode just played cost, as the agent counts it (a model's tokens), or None.

        Called once an episode ends, before the next ``reset``; the run file
        records it with the episode.
        """
        return None

    def describe(self) -> dict[str, Any]:
        """The agent as a run file records it: its name and what decides its behaviour (a model, its
        endpoint and sampling), never a secret."""
        return {"name": self.name}
