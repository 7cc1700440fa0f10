"""A person at the terminal as the agent: the prompt, its commands, and what is shown between them.

:class:`Console` reads one line at a time with :func:`input` (so it works in a
terminal, where ``readline`` gives line editing and history, and from a pipe)
and writes plain text: no colour, and everything that came from the world or
an agent printed inert (:func:`mirrorworld.inert.inert`), so an escape
sequence written into a ticket cannot reach the terminal.

:class:`Prompt` turns a line into a :class:`Move`. The commands:

* ``TOOL {json}`` — call a tool, its arguments a JSON object (``get_order
  {"order_id": 3}``; ``list_teams`` alone sends ``{}``);
* ``tools`` — the tools again, with their arguments; ``schema TOOL`` — one
  tool's description and JSON schema;
* ``policy`` — the written policy the agent works under (what a model reads in
  its system prompt);
* ``diff`` — the state diff so far (``Session.changes()``: every row that
  differs from the task's initial state, the clock left out);
* ``wait`` — in a team, pass the turn;
* ``help``; ``quit`` — end the episode now; it is graded as it stands.

A line that is not JSON after the tool name, arguments that are not an
object, or a tool the player does not have is one line of explanation and the
prompt again: nothing reaches the world, no step is spent. Arguments the
world refuses (a missing or mistyped argument) are a call like any agent's:
the refusal is the result, and it counts as a step. End of input (Ctrl-D) and
Ctrl-C at the prompt are ``quit``.

:class:`HumanAgent` is an :class:`~mirrorworld.agents.base.Agent` over a
prompt, so the runner (:func:`~mirrorworld.run.runner.run_episode`) plays and
records a person's episode exactly as it does a model's.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import re
import sys
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TextIO

from mirrorworld.agents.base import Agent, EpisodeContext, Message, assistant, tool_call
from mirrorworld.core.state import RowChange
from mirrorworld.core.tools import ToolSpec
from mirrorworld.inert import inert
from mirrorworld.verify.verdict import Verdict

__all__ = [
    "MAX_RESULT_CHARS",
    "MAX_RESULT_LINES",
    "Console",
    "HumanAgent",
    "Move",
    "Prompt",
    "format_diff",
    "format_result",
    "format_tools",
    "format_verdict",
]

MAX_RESULT_LINES = 60
"""Lines of a pretty-printed tool result shown at most (the rest is counted, not shown)."""
MAX_RESULT_CHARS = 6000
"""Characters of a tool result shown at most."""


class Console:
    """Plain-text terminal I/O: :meth:`read` a line, :meth:`say` text (see the module docstring)."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out
        if sys.stdin.isatty():
            with contextlib.suppress(ImportError):  # not every Python has it (Windows)
                import readline  # noqa: F401 - line editing and history for input()

    def read(self, prompt: str) -> str | None:
        """One line from the player; None at end of input or on Ctrl-C."""
        try:
            return input(prompt)
        except EOFError:
            self.say("")
            return None
        except KeyboardInterrupt:
            self.say("")
            return None

    def say(self, text: str = "") -> None:
        """Print our own words (already inert where they quote data)."""
        print(text, file=self.out or sys.stdout, flush=True)


@dataclass(frozen=True)
class Move:
    """What the player chose: a tool call, a wait (in a team) or the end."""

    kind: Literal["call", "wait", "quit"]
    tool: str = ""
    args: dict[str, Any] = field(default_factory=dict)


HELP = """commands:
  TOOL {json}     call a tool, e.g. get_order {"order_id": 3} (no arguments: just TOOL)
  tools           list the tools again;  schema TOOL: one tool's arguments as JSON schema
  policy          the policy you work under
  diff            the state changes made so far
{wait}  help            this text
  quit            end the episode now and grade it (so do Ctrl-D and Ctrl-C)"""


class Prompt:
    """The command loop of one player: reads lines until one is a move (see the module docstring)."""

    def __init__(
        self,
        console: Console,
        tools: Sequence[ToolSpec],
        *,
        policy: str = "",
        diff: Callable[[], list[RowChange]] | None = None,
        can_wait: bool = False,
        seat: str | None = None,
        elsewhere: Collection[str] = (),
    ) -> None:
        self.console = console
        self.tools = {t.name: t for t in tools}
        self.seat = seat
        self.elsewhere = frozenset(elsewhere)
        """Tools of the world outside the player's seat (a team's other roles'): named as such when called."""
        self.policy = policy
        self.diff = diff
        self.can_wait = can_wait

    def help_text(self) -> str:
        wait = "  wait            pass your turn\n" if self.can_wait else ""
        return HELP.replace("{wait}", wait)

    def ask(self, prompt: str) -> Move:
        """Read lines until the player makes a move; commands that show something are answered on the way."""
        while True:
            line = self.console.read(prompt)
            if line is None:
                self.console.say("(end of input: ending the episode)")
                return Move("quit")
            move = self.parse(line)
            if move is not None:
                return move

    def parse(self, line: str) -> Move | None:
        """The move ``line`` makes, or None after answering a command or explaining what is wrong with it."""
        say = self.console.say
        text = line.strip()
        if not text:
            return None
        word, rest = _split(text)
        if word in ("quit", "exit") and not rest:
            return Move("quit")
        if word == "help" and not rest:
            say(self.help_text())
            return None
        if word == "tools" and not rest:
            say(format_tools(self.tools.values()))
            return None
        if word == "policy" and not rest:
            say(inert(self.policy or "(this world has no written policy)", 100_000))
            return None
        if word == "diff" and not rest:
            say(format_diff(self.diff()) if self.diff is not None else "(no state to compare)")
            return None
        if word == "wait" and not rest and self.can_wait:
            return Move("wait")
        if word == "schema":
            spec = self.tools.get(rest)
            if spec is None:
                say(self._unknown(rest) if rest else "usage: schema TOOL")
                return None
            say(format_schema(spec))
            return None
        spec = self.tools.get(word)
        if spec is None:
            say(self._unknown(word))
            return None
        if not rest:
            return Move("call", spec.name, {})
        try:
            args = json.loads(rest)
        except ValueError as err:
            msg = getattr(err, "msg", str(err))
            pos = getattr(err, "pos", None)
            where = f" at character {pos + 1}" if isinstance(pos, int) else ""
            say(f"not JSON: {inert(msg, 200, lines=False)}{where}; type e.g. {spec.name} {_example(spec)}")
            return None
        if not isinstance(args, dict):
            say(f"the arguments must be a JSON object, e.g. {spec.name} {_example(spec)}")
            return None
        return Move("call", spec.name, args)

    def _unknown(self, name: str) -> str:
        shown = inert(name, 60, lines=False)
        if name in self.elsewhere and name not in self.tools:
            return f"the {self.seat or 'player'} cannot call {shown} (type `tools` for yours)"
        close = difflib.get_close_matches(name, list(self.tools), n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        return f"no tool or command named {shown!r}{hint} (type `tools` for the tools, `help` for the commands)"


_COMMAND = re.compile(r"([^\s{\[]*)\s*(.*)\Z", re.DOTALL)


def _split(text: str) -> tuple[str, str]:
    """``(word, rest)`` of a command line: ``get_order {"order_id": 3}`` and ``get_order{...}`` alike."""
    m = _COMMAND.match(text)
    assert m is not None  # the pattern matches every string
    return m.group(1), m.group(2).strip()


def _example(spec: ToolSpec) -> str:
    """A JSON object naming the tool's required arguments, with a placeholder of each one's type."""
    placeholders = {"integer": 1, "number": 1.0, "boolean": True, "array": [], "string": "..."}
    example = {}
    for p in spec.params:
        if p.required:
            enum = p.schema.get("enum")
            example[p.name] = enum[0] if enum else placeholders.get(str(p.schema.get("type")), "...")
    return json.dumps(example)


def _type_of(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return "|".join(str(v) for v in schema["enum"])
    kind = str(schema.get("type", "any"))
    if kind == "array":
        items = schema.get("items")
        return f"list of {_type_of(items)}" if isinstance(items, dict) else "list"
    return kind


def format_tools(tools: Iterable[ToolSpec]) -> str:
    """One line per tool: ``name(arg: type, optional?: type)  description`` (optional arguments marked ``?``)."""
    lines = ["tools (arguments marked ? are optional):"]
    for t in tools:
        args = ", ".join(f"{p.name}{'' if p.required else '?'}: {_type_of(p.schema)}" for p in t.params)
        lines.append(inert(f"  {t.name}({args})  {t.description}", 600, lines=False))
    return "\n".join(lines)


def format_schema(spec: ToolSpec) -> str:
    """One tool: its kind, its description and its arguments' JSON schema."""
    schema = json.dumps(spec.parameters_schema, indent=2, ensure_ascii=False)
    return inert(f"{spec.name} ({spec.kind} tool): {spec.description}\n{schema}", 20_000)


def format_result(content: str) -> str:
    """A tool result's JSON text, pretty-printed, cut to :data:`MAX_RESULT_LINES` lines, inert."""
    try:
        pretty = json.dumps(json.loads(content), indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        pretty = str(content)
    lines = pretty.splitlines()
    more = len(lines) - MAX_RESULT_LINES
    shown = "\n".join(lines[:MAX_RESULT_LINES])
    out = inert(shown, MAX_RESULT_CHARS)
    if more > 0:
        out += f"\n... ({more} more lines)"
    return out


def _cell(value: Any) -> str:
    return "null" if value is None else inert(json.dumps(value, ensure_ascii=False, default=str), 200, lines=False)


def format_diff(changes: Sequence[RowChange]) -> str:
    """The state diff: one line per changed row, then its changed fields ``before -> after`` (the clock left out)."""
    rows = [c for c in changes if c.table != "sim_clock"]
    if not rows:
        return "state diff: nothing changed"
    lines = [f"state diff ({len(rows)} row{'s' if len(rows) != 1 else ''} changed):"]
    for c in rows:
        lines.append(f"  {inert(c.table, 100)} #{c.pk} {c.kind}")
        for col, (before, after) in c.fields.items():
            shown = _cell(after) if c.kind == "insert" else f"{_cell(before)} -> {_cell(after)}"
            lines.append(f"      {inert(col, 100)}: {shown}")
    return "\n".join(lines)


def format_verdict(verdict: Verdict | None, *, failure: str | None = None) -> str:
    """``verdict: PASSED`` (or ``FAILED``) with the score, then each gate with its evidence."""
    if verdict is None:
        return f"verdict: none, the episode was not graded ({inert(failure or 'no verdict', 500, lines=False)})"
    lines = [f"verdict: {'PASSED' if verdict.passed else 'FAILED'} (score {verdict.score:.2f})"]
    for name, gate in verdict.gates.items():
        lines.append(f"  {inert(name, 100)}: {'pass' if gate.passed else 'FAIL'}")
        lines.extend(f"      {inert(e, 500, lines=False)}" for e in gate.evidence)
    return "\n".join(lines)


class HumanAgent(Agent):
    """The agent a person plays through a :class:`Prompt` (see the module docstring).

    It reads what an agent reads (the chat messages: the policy, the task, the
    tool results) and answers with one tool call per message; ``quit`` is a
    message without tool calls, which ends the episode. ``diff`` reads the
    state of the episode being played through ``diff``, a function the player's
    command line hands it.
    """

    name = "human"

    def __init__(
        self,
        console: Console,
        tools: Sequence[ToolSpec],
        *,
        policy: str = "",
        diff: Callable[[], list[RowChange]] | None = None,
        max_steps: int | None = None,
    ) -> None:
        self.console = console
        self.prompt = Prompt(console, tools, policy=policy, diff=diff)
        self.max_steps = max_steps
        self._shown = 0
        self._calls = 0

    def reset(self, context: EpisodeContext) -> None:
        """A new episode (the context's task is privileged: a person is shown only the messages)."""
        self._shown = 0
        self._calls = 0

    def show(self, messages: Sequence[Message]) -> None:
        """Print the messages not shown yet: the task at the start, then each tool result."""
        say = self.console.say
        for m in messages[self._shown :]:
            role = m.get("role")
            if role == "user":
                say(inert(f"task: {m.get('content')}", 20_000))
                say()
                say(format_tools(self.prompt.tools.values()))
                say("type `help` for the commands")
            elif role == "tool":
                say(format_result(str(m.get("content"))))
        self._shown = len(messages)

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> Message:
        self.show(messages)
        budget = f"/{self.max_steps}" if self.max_steps is not None else ""
        move = self.prompt.ask(f"step {self._calls + 1}{budget}> ")
        if move.kind != "call":
            return assistant(None)
        self._calls += 1
        return assistant(None, [tool_call(f"call_{self._calls}", move.tool, move.args)])

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "player": "a person at the terminal"}
