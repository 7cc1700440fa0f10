"""Scripted agents: baselines and test doubles shipped with the library.

* ``noop`` ends every episode at once, saying nothing;
* ``refuse`` refuses every request;
* ``claim`` claims success without doing anything;
* ``oracle`` replays the task's gold solution (privileged);
* ``partial`` replays the gold solution less one write on a seeded half of the
  tasks (privileged): an agent that passes some tasks and fails others;
* ``random`` calls random tools with random, schema-shaped arguments;
* ``replay`` replays the assistant messages of a recorded episode;
* ``scripted`` plays a fixed list of assistant messages.
"""

from __future__ import annotations

import json
import random
import string
from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

from mirrorworld.agents.base import Agent, EpisodeContext, Message, assistant, tool_call
from mirrorworld.core.task import ToolCall

__all__ = [
    "CallListAgent",
    "ClaimSuccessAgent",
    "NoopAgent",
    "OracleAgent",
    "PartialAgent",
    "RandomAgent",
    "RefuseAgent",
    "ScriptedAgent",
]

REFUSAL = "I'm sorry, but I can't help with that request."
CLAIM = "All done! I've taken care of everything you asked for and your issue is fully resolved."


class NoopAgent(Agent):
    """Does nothing: ends the episode with no action and no message."""

    name = "noop"

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> Message:
        return assistant("")


class RefuseAgent(Agent):
    """Refuses everything."""

    name = "refuse"

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> Message:
        return assistant(REFUSAL)


class ClaimSuccessAgent(Agent):
    """Claims success without acting."""

    name = "claim"

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> Message:
        return assistant(CLAIM)


class CallListAgent(Agent):
    """Plays a list of tool calls planned at the start of the episode, one per message, then stops.

    With ``retries`` > 0 it retries a call whose result is a transient failure
    (an error marked ``retryable``: a timeout, a rate limit, an unavailable
    service), up to ``retries`` times per call, as a production client's retry
    policy does; every other refusal is final.
    """

    name = "calls"
    retries: int = 0

    @abstractmethod
    def plan(self, context: EpisodeContext) -> list[ToolCall]:
        """The calls to make in this episode."""

    def reset(self, context: EpisodeContext) -> None:
        self.context = context
        self._calls = self.plan(context)
        self._i = 0
        self._tries = 0
        self._n = 0

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> Message:
        if self._i > 0 and self._tries < self.retries and _transient(messages):
            self._tries += 1
            call = self._calls[self._i - 1]
        elif self._i >= len(self._calls):
            return assistant("")
        else:
            call = self._calls[self._i]
            self._i += 1
            self._tries = 0
        self._n += 1
        return assistant(None, [tool_call(f"call_{self._n}", call.tool, call.args)])


def _transient(messages: list[Message]) -> bool:
    """Whether the last message is a tool result reporting a retryable failure."""
    last = messages[-1] if messages else None
    if not isinstance(last, dict) or last.get("role") != "tool" or not isinstance(last.get("content"), str):
        return False
    try:
        body = json.loads(last["content"])
    except ValueError:
        return False
    error = body.get("error") if isinstance(body, dict) else None
    return isinstance(error, dict) and error.get("retryable") is True


class OracleAgent(CallListAgent):
    """Replays the gold solution, one tool call per message (``retries``: see :class:`CallListAgent`)."""

    name = "oracle"

    def __init__(self, *, retries: int = 0) -> None:
        self.retries = retries
        if retries:
            self.name = "oracle_retry"

    def plan(self, context: EpisodeContext) -> list[ToolCall]:
        return list(context.task.gold)


class PartialAgent(CallListAgent):
    """The gold solution with one write left out, on a seeded share of the tasks (privileged).

    For each task a ``random.Random`` seeded with ``seed`` and the task's id
    decides: with probability ``drop`` it picks one of the gold's write calls,
    which is left out, and every other call (the final message included, so it
    still reports the step it skipped) is played as the gold plays it;
    otherwise the whole gold solution is played. The same seed thus leaves out
    the same call of the same task in every process and on every backend
    (mirror or twin), which is what a paired comparison needs: an agent whose
    pass rate is neither 0 nor 1 and whose every failure is a known, missing
    write (the state gate; usually the communication gate too).
    """

    name = "partial"

    def __init__(self, *, seed: int = 0, drop: float = 0.5) -> None:
        if not 0.0 <= drop <= 1.0:
            raise ValueError(f"drop must be in [0, 1], not {drop!r}")
        self.seed = seed
        self.drop = drop

    def plan(self, context: EpisodeContext) -> list[ToolCall]:
        gold = list(context.task.gold)
        rng = random.Random(f"partial-agent/{self.seed}/{context.task.id}")
        tools = context.world.tools_by_name
        writes = [i for i, c in enumerate(gold) if (spec := tools.get(c.tool)) is not None and spec.kind == "write"]
        if writes and rng.random() < self.drop:
            left_out = rng.choice(writes)
            return gold[:left_out] + gold[left_out + 1 :]
        return gold

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "seed": self.seed, "drop": self.drop}


class ScriptedAgent(Agent):
    """Plays a fixed list of assistant messages, then stops."""

    name = "scripted"

    def __init__(self, script: Sequence[Message]) -> None:
        self.script = list(script)

    def reset(self, context: EpisodeContext) -> None:
        self._i = 0

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> Message:
        if self._i >= len(self.script):
            return assistant("")
        msg = self.script[self._i]
        self._i += 1
        return msg


WORDS = ("order", "refund", "ticket", "please", "account", "help", "status", "update", "item", "thanks")


class RandomAgent(Agent):
    """Random tools with random arguments shaped by their schemas (seeded per episode)."""

    name = "random"

    def __init__(self, *, max_calls: int = 8, seed: int = 0) -> None:
        self.max_calls = max_calls
        self.seed = seed

    def reset(self, context: EpisodeContext) -> None:
        self.rng = random.Random(f"random-agent/{self.seed}/{context.task.id}")
        self._n = 0

    def _value(self, schema: dict[str, Any]) -> Any:
        rng = self.rng
        if "enum" in schema:
            return rng.choice(schema["enum"])
        kind = schema.get("type")
        if kind == "integer":
            return rng.randint(1, 1200)
        if kind == "number":
            return round(rng.uniform(1, 500), 2)
        if kind == "boolean":
            return rng.random() < 0.5
        if kind == "array":
            return [rng.choice(WORDS) for _ in range(rng.randint(1, 3))]
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 5)))

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> Message:
        self._n += 1
        if self._n > self.max_calls or self.rng.random() < 0.1:
            words = " ".join(self.rng.choice(WORDS) for _ in range(8))
            return assistant(words.capitalize() + ".")
        fn = self.rng.choice(tools)["function"]
        params = fn["parameters"]
        args = {}
        for name, schema in params["properties"].items():
            if name in params.get("required", []) or self.rng.random() < 0.5:
                args[name] = self._value(schema)
        if self.rng.random() < 0.05:  # now and then, garbage
            text = "".join(self.rng.choice(string.printable) for _ in range(20))
            return assistant(None, [tool_call(f"call_{self._n}", fn["name"], text)])
        return assistant(None, [tool_call(f"call_{self._n}", fn["name"], args)])
