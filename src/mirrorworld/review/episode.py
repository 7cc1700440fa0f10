"""What a reviewer reads: an episode step by step, and the state diff it produced.

The state diff is not taken from the record's own account: the episode's
assistant messages are replayed on a fresh session of the recorded task (the
world is deterministic, so the replay reaches the same state) and the diff is
the session's :meth:`~mirrorworld.core.session.Session.changes` — every row
that differs from the task's initial state. The simulated clock's row is left
out (every write advances it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from mirrorworld.core.registry import Registry, default
from mirrorworld.core.task import Task
from mirrorworld.envs.chat import ChatEnv
from mirrorworld.errors import MirrorworldError

__all__ = ["Change", "EpisodeView", "Step", "episode_view"]


@dataclass(frozen=True)
class ToolStep:
    name: str
    arguments: str
    result: str
    ok: bool


@dataclass(frozen=True)
class Step:
    """One message of the conversation (tool results folded into the calls they answer)."""

    role: str
    text: str | None
    calls: tuple[ToolStep, ...] = ()


@dataclass(frozen=True)
class Change:
    table: str
    pk: int
    kind: str
    fields: tuple[tuple[str, str, str], ...]
    """(column, before, after) as display text."""


@dataclass
class EpisodeView:
    instruction: str
    steps: list[Step] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    replay_error: str | None = None


def _pretty(text: Any) -> str:
    if isinstance(text, str):
        try:
            return json.dumps(json.loads(text), indent=1, ensure_ascii=False, sort_keys=True)
        except ValueError:
            return text
    return json.dumps(text, indent=1, ensure_ascii=False, sort_keys=True, default=str)


def _cell(value: Any) -> str:
    return "∅" if value is None else str(value)


def episode_view(record: dict[str, Any], registry: Registry | None = None) -> EpisodeView:
    """The conversation and the replayed state diff of one episode record."""
    task = Task.from_dict(record["task"])
    view = EpisodeView(task.instruction)
    messages = record.get("messages", [])
    results = {m.get("tool_call_id"): m for m in messages if m.get("role") == "tool"}
    for m in messages:
        role = str(m.get("role"))
        if role in ("system", "tool"):
            continue
        calls = []
        for i, c in enumerate(m.get("tool_calls") or []):
            fn = c.get("function", {}) if isinstance(c, dict) else {}
            reply = results.get(c.get("id") if isinstance(c, dict) else None, {})
            content = reply.get("content", "")
            ok = not (isinstance(content, str) and content.startswith('{"error"'))
            calls.append(ToolStep(str(fn.get("name", f"call {i}")), _pretty(fn.get("arguments")), _pretty(content), ok))
        text = m.get("content")
        view.steps.append(Step(role, text if isinstance(text, str) else None, tuple(calls)))
    try:
        world = (registry or default).get(task.world)
        env = ChatEnv(world, max_steps=10_000)
        env.reset(task=task)
        try:
            for m in messages:
                if m.get("role") != "assistant" or env.done:
                    continue
                env.step({"role": "assistant", "content": m.get("content"), "tool_calls": m.get("tool_calls")})
            assert env.episode is not None
            for ch in env.episode.session.changes():
                if ch.table == "sim_clock":
                    continue
                fields = tuple((col, _cell(b), _cell(a)) for col, (b, a) in ch.fields.items())
                view.changes.append(Change(ch.table, ch.pk, ch.kind, fields))
        finally:
            env.close()
    except MirrorworldError as err:  # a world that can no longer replay this episode: show the log, say why
        view.replay_error = f"{type(err).__name__}: {err}"
    return view
