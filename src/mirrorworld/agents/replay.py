"""Replaying recorded episodes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mirrorworld.agents.base import Agent, EpisodeContext, Message, assistant
from mirrorworld.errors import AgentError

__all__ = ["ReplayAgent"]


class ReplayAgent(Agent):
    """Replays, for each task, the assistant messages of a recorded episode of that task.

    Built from a run file (``ReplayAgent.from_run``) or from a mapping of task id
    to messages. A task the recording does not cover is an ``AgentError``.
    """

    name = "replay"

    def __init__(self, recordings: dict[str, list[Message]]) -> None:
        self.recordings = recordings

    @classmethod
    def from_run(cls, path: str | Path) -> ReplayAgent:
        from mirrorworld.run.trajectories import RunFile

        recordings: dict[str, list[Message]] = {}
        with RunFile.open(path) as run:
            for ep in run.episodes():
                recordings.setdefault(ep.task_id, [m for m in ep.messages if m.get("role") == "assistant"])
        return cls(recordings)

    def reset(self, context: EpisodeContext) -> None:
        script = self.recordings.get(context.task.id)
        if script is None:
            raise AgentError(f"the recording has no episode of task {context.task.id}")
        self._script = script
        self._i = 0

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> Message:
        if self._i >= len(self._script):
            return assistant("")
        msg = self._script[self._i]
        self._i += 1
        out: Message = {"role": "assistant", "content": msg.get("content")}
        if msg.get("tool_calls"):
            out["tool_calls"] = msg["tool_calls"]
        return out
