"""``mirrorworld play`` driven through a real pseudo-terminal, its prompt parser, and ``render_mode="ansi"``.

The terminal tests fork ``python -m mirrorworld play`` onto a pty (stdlib
:mod:`pty`, as a person's terminal would be: line discipline, echo, Ctrl-C as
SIGINT, Ctrl-D as end of input), wait for each prompt and type a line, the
way a person would. ``TERM=dumb`` keeps readline from writing its own escape
sequences, so that any ESC in the output would be ours.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mirrorworld.cli import main
from mirrorworld.core.registry import default
from mirrorworld.core.seats import seats_of
from mirrorworld.envs.ansi import MAX_RESULT
from mirrorworld.envs.chat import ChatEnv
from mirrorworld.envs.gymnasium import MirrorEnv
from mirrorworld.errors import MirrorworldError
from mirrorworld.play.human import Console, Move, Prompt
from mirrorworld.run import EpisodeRecord, RunFile

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")

FAMILY = "refund_damaged"
PROMPT = re.compile(rb"step (\d+)/\d+> ")


class Terminal:
    """``mirrorworld play ARGS`` on a pseudo-terminal: wait for text, type lines, collect the output."""

    def __init__(self, *args: str, cwd: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MIRRORWORLD_")}
        env.update(TERM="dumb", PYTHONUNBUFFERED="1", COLUMNS="120", LINES="40")
        pid, fd = pty.fork()
        if pid == 0:  # the child: the command, its stdin, stdout and stderr the terminal
            try:
                os.chdir(cwd)
                os.execve(sys.executable, [sys.executable, "-m", "mirrorworld", "play", *args], env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.out = b""
        self._seen = 0
        self.status: int | None = None

    def _read(self, deadline: float) -> bool:
        """Read what is there (waiting until ``deadline``); False once the child has closed the terminal."""
        ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return True
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: the child exited and the terminal closed
            return False
        if not chunk:
            return False
        self.out += chunk
        return True

    def expect(self, pattern: bytes | re.Pattern[bytes], timeout: float = 30.0) -> re.Match[bytes]:
        """Wait until ``pattern`` appears after what was matched last; return the match."""
        regex = pattern if isinstance(pattern, re.Pattern) else re.compile(re.escape(pattern))
        deadline = time.monotonic() + timeout
        while True:
            found = regex.search(self.out, self._seen)
            if found is not None:
                self._seen = found.end()
                return found
            if time.monotonic() > deadline or not self._read(deadline):
                tail = self.out[-1500:].decode(errors="replace")
                raise AssertionError(f"{pattern!r} never appeared; the terminal shows:\n{tail}")

    def type(self, line: str) -> None:
        os.write(self.fd, line.encode() + b"\n")

    def key(self, raw: bytes) -> None:
        os.write(self.fd, raw)

    def finish(self, timeout: float = 30.0) -> int:
        """Read until the child exits; its exit status."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._read(deadline):
            pass
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        self.status = os.waitstatus_to_exitcode(status)
        return self.status

    def kill(self) -> None:
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except OSError:
                pass
            os.close(self.fd)
            self.status = -9


Spawn = Callable[..., Terminal]


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Spawn]:
    opened: list[Terminal] = []

    def spawn(*args: str) -> Terminal:
        t = Terminal(*args, cwd=tmp_path)
        opened.append(t)
        return t

    yield spawn
    for t in opened:
        t.kill()


def _gold_lines(family: str = FAMILY, seed: int = 0) -> list[str]:
    task = default.get("helpdesk").task(family, seed)
    return [f"{call.tool} {json.dumps(call.args, default=str)}" for call in task.gold]


def _one_episode(path: Path) -> tuple[dict[str, Any], EpisodeRecord]:
    with RunFile.open(path) as run:
        records = list(run.episodes())
        meta = run.meta
    assert len(records) == 1
    return meta, records[0]


def test_the_gold_calls_typed_at_the_prompt_pass_and_are_saved_as_a_run(
    terminal: Spawn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "play.sqlite"
    t = terminal("--world", "helpdesk", "--family", FAMILY, "--task-seed", "0", "--out", str(out))
    t.expect(b"task: Live chat")
    t.expect(b"issue_refund(order_id: integer, line_id: integer")  # the tools, with their arguments
    for line in _gold_lines():
        t.expect(PROMPT)
        t.type(line)
    t.expect(b"state diff (")
    t.expect(b"verdict: PASSED (score 1.00)")
    t.expect(b"saved to")
    assert t.finish() == 0
    meta, record = _one_episode(out)
    assert meta["agent"] == "human" and meta["play"]["task"] == f"{FAMILY}/0"
    assert record.agent == "human" and record.task_id == f"{FAMILY}/0"
    assert record.graded is not None and record.graded.passed and record.passed
    assert record.steps == len(_gold_lines())
    assert main(["show", str(out), "0"]) == 0
    shown = capsys.readouterr().out
    assert "PASSED" in shown and "agent human" in shown


def test_bad_json_and_an_unknown_tool_reprompt_without_spending_a_step(terminal: Spawn, tmp_path: Path) -> None:
    out = tmp_path / "play.sqlite"
    t = terminal("--family", FAMILY, "--out", str(out))
    t.expect(b"step 1/30> ")
    t.type('get_order {"order_id": 42')
    t.expect(b"not JSON: ")
    t.expect(b"step 1/30> ")
    t.type('get_ordr {"order_id": 428}')
    t.expect(b"no tool or command named 'get_ordr'; did you mean get_order?")
    t.expect(b"step 1/30> ")
    t.type("get_order [428]")
    t.expect(b"the arguments must be a JSON object")
    t.expect(b"step 1/30> ")
    t.type("schema issue_refund")
    t.expect(b'"required": [')
    t.expect(b"step 1/30> ")
    t.type('get_order {"order_id": "not a number"}')  # the world's own refusal: a call, and a step
    t.expect(b"invalid_arguments")
    t.expect(b"step 2/30> ")
    t.type("quit")
    t.expect(b"verdict: FAILED")
    assert t.finish() == 0
    _, record = _one_episode(out)
    assert record.steps == 1 and record.graded is not None and not record.passed
    assert b"Traceback" not in t.out


def test_quitting_early_grades_the_episode_as_it_stands(terminal: Spawn, tmp_path: Path) -> None:
    out = tmp_path / "play.sqlite"
    t = terminal("--family", FAMILY, "--out", str(out))
    t.expect(PROMPT)
    t.type(_gold_lines()[0])  # the refund, then no final message
    t.expect(b"refund_id")
    t.expect(PROMPT)
    t.type("diff")
    t.expect(b"refunds #")
    t.expect(PROMPT)
    t.type("quit")
    t.expect(b"verdict: FAILED")
    t.expect(b"reply: FAIL")
    assert t.finish() == 0
    _, record = _one_episode(out)
    assert record.graded is not None and not record.passed and record.steps == 1


def test_end_of_input_ends_the_episode_and_saves_it_under_the_default_name(terminal: Spawn, tmp_path: Path) -> None:
    t = terminal("--family", FAMILY)
    t.expect(PROMPT)
    time.sleep(0.5)  # as a person would: readline is waiting for a key by then
    t.key(b"\x04")  # Ctrl-D at the start of a line
    t.expect(b"end of input")
    t.expect(b"verdict: FAILED")
    assert t.finish() == 0
    saved = list((tmp_path / "runs").glob("helpdesk-human-*.sqlite"))
    assert len(saved) == 1
    _, record = _one_episode(saved[0])
    assert record.graded is not None and record.steps == 0


def test_ctrl_c_at_the_prompt_ends_the_episode_cleanly(terminal: Spawn, tmp_path: Path) -> None:
    out = tmp_path / "play.sqlite"
    t = terminal("--family", FAMILY, "--out", str(out))
    t.expect(PROMPT)
    # A person presses it a while after the prompt; at once, the signal could land before readline waits
    # for input and be seen only at the next key (a race of CPython's readline loop, not of ours).
    time.sleep(0.5)
    t.key(b"\x03")  # the terminal sends SIGINT
    t.expect(b"verdict: FAILED")
    assert t.finish() == 0
    assert b"Traceback" not in t.out and b"KeyboardInterrupt" not in t.out
    _, record = _one_episode(out)
    assert record.graded is not None


def test_control_characters_in_tool_results_reach_the_terminal_inert(terminal: Spawn, tmp_path: Path) -> None:
    out = tmp_path / "play.sqlite"
    t = terminal("--family", FAMILY, "--out", str(out))
    t.expect(PROMPT)
    # Typed as JSON escapes (plain ASCII); the note holds real ESC and BEL characters once stored.
    t.type(r'reply_ticket {"ticket_id": 801, "body": "note \u001b]0;pwned\u0007 \u001b[2J \u009b31m", "public": false}')
    t.expect(PROMPT)
    t.type('get_ticket {"ticket_id": 801}')
    t.expect(rb"\u001b]0;pwned\u0007 \u001b[2J \x9b31m")  # shown as escapes (JSON's, else Python's)
    t.expect(PROMPT)
    t.type("quit")
    t.expect(b"verdict:")
    assert t.finish() == 0
    assert b"\x1b" not in t.out and b"\x07" not in t.out and "\x9b".encode() not in t.out


def test_a_person_plays_one_role_of_the_team(terminal: Spawn, tmp_path: Path) -> None:
    world = default.get("helpdesk_team")
    task = world.task("team_refund_approval", 0)
    calls = [call for role, call, _ in seats_of(world).team_plan(task) if role == "tier1"]
    out = tmp_path / "team.sqlite"
    t = terminal("--world", "helpdesk_team", "--role", "tier1", "--family", task.family, "--out", str(out))
    t.expect(b"you are the tier1")
    t.expect(b"briefing: You are a tier-1 support agent")
    turn = re.compile(rb"cycle \d+/40 tier1> ")
    for call in calls:
        t.expect(turn)
        if call.tool == "issue_refund":  # it needs the supervisor's approval first: pass turns until it comes
            for _ in range(5):
                if b"message from supervisor" in t.out:
                    break
                t.type("wait")
                t.expect(turn)
        if call.tool == "respond":
            t.type("decide_approval {}")  # another seat's tool: refused here, not a turn
            t.expect(b"the tier1 cannot call decide_approval")
            t.expect(turn)
        t.type(f"{call.tool} {json.dumps(call.args, default=str)}")
    t.expect(b"verdict: PASSED")
    assert t.finish() == 0
    meta, record = _one_episode(out)
    assert meta["agent"] == "human" and meta["policies"]["tier1"] == "human"
    assert record.graded is not None and record.passed and "tier1=human" in record.agent


def test_from_a_pipe_a_person_plays_the_customer(tmp_path: Path) -> None:
    out = tmp_path / "customer.sqlite"
    lines = ["wait", 'message_agent {"ticket_id": 801, "message": "It is order #783."}', *["wait"] * 8]
    args = ["--world", "helpdesk_team", "--role", "customer", "--family", "team_refund_approval", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "mirrorworld", "play", *args],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "message from tier1 (question)" in done.stdout  # what the customer's seat sees, and only that
    assert "message from agent (final)" in done.stdout and "verdict: PASSED" in done.stdout
    meta, record = _one_episode(out)
    assert meta["policies"]["customer"] == "human" and record.passed


def test_role_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["play", "--world", "sales", "--role", "tier1", "--out", str(tmp_path / "a.sqlite")]) == 1
    err = capsys.readouterr().err
    assert "--role plays one seat of a team world" in err and err.count("\n") == 1
    assert main(["play", "--world", "helpdesk_team", "--role", "cashier", "--out", str(tmp_path / "b.sqlite")]) == 1
    assert "has no role 'cashier'" in capsys.readouterr().err
    args = ["play", "--world", "helpdesk_team", "--role", "tier2", "--family", "team_refund_approval"]
    assert main([*args, "--out", str(tmp_path / "c.sqlite")]) == 1
    assert "does not involve the tier2" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # refused before a run file was made


# -- the prompt, in process ---------------------------------------------------------------------


class _Scripted(Console):
    def __init__(self, lines: list[str]) -> None:
        self.lines = list(lines)
        self.said: list[str] = []

    def read(self, prompt: str) -> str | None:
        return self.lines.pop(0) if self.lines else None

    def say(self, text: str = "") -> None:
        self.said.append(text)


def test_the_prompt_parses_calls_and_answers_commands() -> None:
    world = default.get("helpdesk")
    console = _Scripted(["", "help", "tools", "policy", "diff", 'get_order{"order_id":3}'])
    prompt = Prompt(console, world.tools, policy=world.policy, diff=list)
    assert prompt.ask("> ") == Move("call", "get_order", {"order_id": 3})
    text = "\n".join(console.said)
    assert "quit" in text and "get_policy()" in text and "Northwind" in text and "nothing changed" in text
    assert Prompt(_Scripted(["list_teams"]), world.tools).ask("> ") == Move("call", "list_teams", {})
    assert Prompt(_Scripted(["wait"]), world.tools, can_wait=True).ask("> ") == Move("wait")
    assert Prompt(_Scripted([]), world.tools).ask("> ") == Move("quit")
    refused = _Scripted(["wait", "\x1b[31m {}", "quit"])
    assert Prompt(refused, world.tools).ask("> ") == Move("quit")
    assert all("\x1b" not in line for line in refused.said)


# -- render_mode="ansi" -------------------------------------------------------------------------


def test_gymnasium_renders_the_conversation_and_the_verdict() -> None:
    world = default.get("helpdesk")
    task = world.task(FAMILY, 0)
    env = MirrorEnv(world, render_mode="ansi")
    assert "ansi" in env.metadata["render_modes"]
    assert env.render() is None  # nothing to show before reset
    env.reset(options={"task": task})
    env.step({"tool_name": "get_order", "tool_args": json.dumps({"order_id": 428, "\x1b]0;x": 1})})
    env.step({"tool_name": "get_order", "tool_args": '{"order_id": 428}'})
    first = env.render()
    assert first is not None and first.startswith("[step 2]")
    assert "task: Live chat with a customer" in first
    assert '> get_order {"order_id": 428}' in first and "invalid_arguments" in first
    assert "\x1b" not in first and "\\x1b]0;x" in first
    long_result = next(line for line in first.splitlines() if '"lines"' in line)
    assert long_result.endswith("…") and len(long_result.strip()) <= MAX_RESULT + 1
    assert "verdict" not in first
    for call in task.gold:
        env.step({"tool_name": call.tool, "tool_args": json.dumps(call.args)})
    done = env.render()
    assert done is not None and "> respond" in done and "verdict: PASSED (score 1.00)" in done
    assert "state: pass" in done
    env.close()
    assert MirrorEnv(world).render() is None
    with pytest.raises(MirrorworldError):
        MirrorEnv(world, render_mode="human")


def test_chat_renders_the_conversation_inert_and_the_verdict() -> None:
    world = default.get("helpdesk")
    task = world.task(FAMILY, 0)
    env = ChatEnv(world, render_mode="ansi")
    assert "ansi" in env.metadata["render_modes"] and env.render() is None
    env.reset(task=task)
    call = {"id": "a", "type": "function", "function": {"name": "get_order", "arguments": '{"order_id": 428}'}}
    env.step({"role": "assistant", "content": "Let me look \x1b[2J\x07\u202e", "tool_calls": [call]})
    text = env.render()
    assert text is not None and "task: Live chat" in text and "Northwind Goods" not in text  # no system prompt
    assert "assistant: Let me look \\x1b[2J\\x07\\u202e" in text
    assert '> get_order {"order_id": 428}\n    {"order":' in text
    assert not any(c in text for c in "\x1b\x07\u202e")
    env.step({"role": "assistant", "content": "Nothing more I can do, sorry."})
    ended = env.render()
    assert ended is not None and "verdict: FAILED" in ended and "state: FAIL" in ended
    env.close()
    assert ChatEnv(world).render() is None
    with pytest.raises(MirrorworldError):
        ChatEnv(world, render_mode="rgb_array")
