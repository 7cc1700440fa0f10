"""OpenAI-style chat over a session, for LLM agents.

``ChatEnv.tools`` lists the world's tools in OpenAI function-calling format.
``reset`` returns the opening messages (a system message with the world's
policy, a user message with the task). ``step`` takes one assistant message in
OpenAI format and returns the tool messages answering its ``tool_calls``.

An assistant message without tool calls ends the episode: its text, if any,
becomes the final message to the customer (as if the world's terminal tool had
been called with it). Malformed tool calls get an error tool message; nothing
an agent sends raises. After the end, as in every adapter, each tool call gets
the ``episode_over`` error and changes nothing (:mod:`mirrorworld.episodes`).
``last_outcome`` is the :class:`~mirrorworld.episodes.StepOutcome` of the
latest call, and ``reward`` the return so far.

``render_mode="ansi"`` (as in Gymnasium): ``render()`` returns the conversation
so far as text, the task, each tool call with its arguments and result, the
agent's text, and the verdict once the episode has ended, all of it inert and
bounded (:mod:`mirrorworld.envs.ansi`); None without it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from mirrorworld.core.registry import Registry, default
from mirrorworld.core.task import Split, Task
from mirrorworld.core.world import World
from mirrorworld.episodes import Episode, EpisodeOptions, Faults, StepOutcome, check_split, select_task
from mirrorworld.errors import MirrorworldError, WorldError
from mirrorworld.verify.judge import TextJudge
from mirrorworld.verify.verdict import Verdict

__all__ = ["SYSTEM_PROMPT", "ChatEnv"]

SYSTEM_PROMPT = (
    "You are an agent working in {title}. Use the tools to act; every tool result is JSON. "
    "Finish by calling `{terminal}` with your final message (or by replying without tool calls). "
    "Follow this policy:\n\n{policy}"
)


class ChatEnv:
    """Chat-style episodes over one world. See the module docstring."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"]}

    def __init__(
        self,
        world: str | World = "helpdesk",
        *,
        split: Split = "train",
        families: tuple[str, ...] | list[str] | None = None,
        max_steps: int = 30,
        reward: Literal["shaped", "sparse"] = "shaped",
        judge: TextJudge | None = None,
        registry: Registry | None = None,
        faults: Faults | str | Mapping[str, Any] | None = None,
        render_mode: str | None = None,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise MirrorworldError(f"render_mode must be one of {self.metadata['render_modes']}, not {render_mode!r}")
        self.render_mode = render_mode
        self.world = (registry or default).get(world) if isinstance(world, str) else world
        self.split: Split = check_split(split)
        self.families = tuple(families) if families else None
        self.options = EpisodeOptions(max_steps=max_steps, reward=reward, judge=judge, faults=Faults.parse(faults))
        self.max_steps = max_steps
        terminals = [t for t in self.world.tools if t.kind == "terminal"]
        if len(terminals) != 1:
            raise WorldError(f"world {self.world.name} needs exactly one terminal tool")
        self.terminal = terminals[0].name
        texts = [p.name for p in terminals[0].params if p.required and p.schema.get("type") == "string"]
        if len(texts) != 1:
            raise WorldError(f"the terminal tool {self.terminal} needs exactly one required string parameter")
        self._terminal_param = texts[0]
        self.tools: list[dict[str, Any]] = [t.openai_schema() for t in self.world.tools]
        self.messages: list[dict[str, Any]] = []
        self.episode: Episode | None = None
        self.last_outcome: StepOutcome | None = None

    def reset(self, seed: int = 0, *, task: Task | None = None, task_id: str | None = None) -> list[dict[str, Any]]:
        """Start task ``seed`` of the split (or ``task``, or ``task_id``); return the opening messages."""
        if self.episode is not None:
            self.episode.close()
        task = select_task(self.world, split=self.split, families=self.families, task=task, task_id=task_id, index=seed)
        self.episode = self._new_episode(task)
        self.last_outcome = None
        system = SYSTEM_PROMPT.format(title=self.world.id, terminal=self.terminal, policy=self.world.policy)
        self.messages = [
            {"role": "system", "content": system},
            {"role": "user", "content": task.instruction},
        ]
        return list(self.messages)

    def _new_episode(self, task: Task) -> Episode:
        """The episode ``reset`` starts (an encoding over another backend starts its own kind)."""
        return Episode(self.world, task, self.options)

    @property
    def done(self) -> bool:
        return self.episode is not None and self.episode.over

    @property
    def reward(self) -> float:
        """The episode's return so far (0.0 before ``reset``)."""
        return self.episode.total_reward if self.episode is not None else 0.0

    def _ep(self) -> Episode:
        if self.episode is None:
            raise MirrorworldError("call reset() first")
        return self.episode

    def step(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        """Apply one assistant message; return the tool messages it produced.

        After the end, each tool call of the message is answered with the
        ``episode_over`` error (and nothing changes); a message without tool
        calls changes nothing either.
        """
        ep = self._ep()
        if not isinstance(message, dict):
            message = {"role": "assistant", "content": message if isinstance(message, str) else None}
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            calls = [calls]  # one malformed call: it gets an error tool message
        content = _text(message.get("content"))
        record: dict[str, Any] = {"role": "assistant", "content": content if isinstance(content, str) else None}
        if isinstance(calls, list) and calls:
            record["tool_calls"] = calls
        self.messages.append(record)
        if not isinstance(calls, list) or not calls:
            if ep.over:
                return []
            if isinstance(content, str) and content.strip():
                self.last_outcome = ep.step(self.terminal, {self._terminal_param: content})
            if not ep.over:
                ep.finish()
            return []
        replies = []
        for i, call in enumerate(calls):
            call_id, name, args = _unpack(call, i)
            outcome = self.last_outcome = ep.step(name, args)
            reply = {"role": "tool", "tool_call_id": call_id, "content": outcome.content()}
            replies.append(reply)
            self.messages.append(reply)
        return replies

    def call(self, tool_call: dict[str, Any]) -> dict[str, Any]:
        """Apply a single OpenAI tool call; return its tool message."""
        replies = self.step({"role": "assistant", "content": None, "tool_calls": [tool_call]})
        return replies[0] if replies else {"role": "tool", "content": "{}"}

    def render(self) -> str | None:
        """With ``render_mode="ansi"``, the conversation so far as text (see the module docstring); else None."""
        if self.render_mode != "ansi" or self.episode is None:
            return None
        from mirrorworld.envs.ansi import chat_transcript

        ep = self.episode
        out = chat_transcript(self.messages, f"[step {ep.session.steps}] {self.world.id}")
        if ep.over:
            out.ended(ep.verdict, failure=ep.failure.message if ep.failure is not None else None)
        return out.text()

    def verdict(self) -> Verdict:
        """The verdict (grading the episode now if it is still running)."""
        return self._ep().finish()

    def close(self) -> None:
        if self.episode is not None:
            self.episode.close()
            self.episode = None


def _text(content: Any) -> str | None:
    """Message content as text: a string, or OpenAI's list of content parts joined."""
    if isinstance(content, str) or content is None:
        return content
    if isinstance(content, list):
        parts = [str(p["text"]) for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return "\n".join(parts) if parts else None
    return None


def _unpack(call: Any, index: int) -> tuple[str, str, Any]:
    """(id, tool name, arguments) of an OpenAI tool call, tolerating junk."""
    if not isinstance(call, dict):
        return f"call_{index}", "<malformed>", None
    call_id = call.get("id") if isinstance(call.get("id"), str) else f"call_{index}"
    fn = call.get("function")
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        return str(call_id), "<malformed>", None
    args = fn.get("arguments")
    if args is not None and not isinstance(args, (str, dict)):
        args = json.dumps(args, default=str)
    return str(call_id), fn["name"], args
