"""``render_mode="ansi"``: an episode's conversation so far, as plain text that is safe to print.

:class:`~mirrorworld.envs.gymnasium.MirrorEnv` and :class:`~mirrorworld.envs.chat.ChatEnv`
render what their agent saw, in order:

* the task: the instruction (the customer's message, a work order) and any
  later customer or user message;
* each tool call as the agent sent it, ``> tool {arguments}``, and, indented
  under it, the JSON result it got (an error is ``{"error": {code, message}}``);
* the agent's own text (an assistant message's content);
* once the episode has ended, the verdict: passed or failed, the score, and
  each gate with its evidence (or, for an episode that failed before it could
  be graded, that it has no verdict).

Everything shown is untrusted (an agent wrote it, or wrote the data a tool
read back), so it goes through :func:`mirrorworld.inert.inert`: no control
character (ESC, BEL, a one-byte CSI, a bidi override) reaches the terminal,
each is shown as its escape (``\\x1b``). Values are cut to a bound
(:data:`MAX_ARGS`, :data:`MAX_RESULT`, :data:`MAX_TEXT`), an ellipsis marking
the cut, so a render grows by a few lines per step. Rendering costs nothing
until ``render()`` is called: the Gymnasium env keeps its log of calls only
when it was made with ``render_mode="ansi"``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from mirrorworld.verify.verdict import Verdict

__all__ = ["MAX_ARGS", "MAX_RESULT", "MAX_TEXT", "Transcript", "chat_transcript"]

MAX_TEXT = 2000
"""Longest instruction or message shown (characters)."""
MAX_ARGS = 300
"""Longest tool-call arguments shown."""
MAX_RESULT = 600
"""Longest tool result shown."""

_INDENT = "    "


def _inert(value: Any, limit: int, *, lines: bool = False) -> str:
    from mirrorworld.inert import inert  # rich, imported only when something is rendered

    return inert(value, limit, lines=lines)


def _args_text(args: Any) -> str:
    """Arguments as the agent sent them: JSON text as it is, anything else as compact JSON."""
    if args is None or isinstance(args, str):
        return args or ""
    try:
        return json.dumps(args, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return f"<{type(args).__name__}>"


class Transcript:
    """A render being written: add what happened in order, then read :meth:`text`."""

    def __init__(self, header: str = "") -> None:
        self._lines: list[str] = [_inert(header, MAX_TEXT)] if header else []

    def said(self, who: str, text: Any) -> None:
        """A message of ``who`` (``task``, ``user``, ``assistant``), its lines indented under the first."""
        if text is None or text == "":
            return
        body = _inert(text, MAX_TEXT, lines=True).replace("\t", " ").splitlines() or [""]
        self._lines.append(f"{who}: {body[0]}")
        self._lines.extend(_INDENT + line for line in body[1:])

    def called(self, tool: Any, args: Any, result: Any) -> None:
        """A tool call and the result it got (``result`` None: no result yet)."""
        shown = _args_text(args)
        name = _inert(tool, 200)
        self._lines.append(f"> {name} {_inert(shown, MAX_ARGS)}" if shown else f"> {name}")
        if result is not None:
            self._lines.append(_INDENT + _inert(result, MAX_RESULT))

    def ended(self, verdict: Verdict | None, *, failure: str | None = None) -> None:
        """The episode's end: its verdict, or why it has none."""
        if verdict is None:
            why = f": {_inert(failure, 500)}" if failure else ""
            self._lines.append(f"episode over, no verdict{why}")
            return
        self._lines.append(f"verdict: {'PASSED' if verdict.passed else 'FAILED'} (score {verdict.score:.2f})")
        for name, gate in verdict.gates.items():
            evidence = "; ".join(gate.evidence)
            mark = "pass" if gate.passed else "FAIL"
            line = f"{_INDENT}{_inert(name, 100)}: {mark}"
            self._lines.append(f"{line} - {_inert(evidence, MAX_RESULT)}" if evidence else line)

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"


def chat_transcript(messages: Iterable[Mapping[str, Any]], header: str = "") -> Transcript:
    """The transcript of OpenAI-format chat messages, the system prompt left out (it is the world's, not the
    episode's). The tool messages after an assistant message answer its calls in order, as
    :class:`~mirrorworld.envs.chat.ChatEnv` records them."""
    items = [m for m in messages if isinstance(m, Mapping)]
    out = Transcript(header)
    first_user = True
    i = 0
    while i < len(items):
        m = items[i]
        i += 1
        role = m.get("role")
        if role == "user":
            out.said("task" if first_user else "user", m.get("content"))
            first_user = False
        elif role == "assistant":
            content = m.get("content")
            out.said("assistant", content if isinstance(content, str) else None)
            calls = m.get("tool_calls") or []
            for call in calls if isinstance(calls, list) else [calls]:
                fn = call.get("function") if isinstance(call, Mapping) else None
                fn = fn if isinstance(fn, Mapping) else {}
                reply = None
                if i < len(items) and items[i].get("role") == "tool":
                    reply = items[i].get("content")
                    i += 1
                out.called(fn.get("name", "<malformed>"), fn.get("arguments"), reply)
        elif role == "tool":  # a reply no call of ours asked for: shown as it is
            out.said("tool", m.get("content"))
    return out
