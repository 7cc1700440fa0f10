"""Agent text is printed inert: no markup from the data, no control sequence reaches the terminal.

A run file whose messages, tool names and arguments, task ids, family and
agent names, errors, failures, gate names and verdict evidence all carry
hostile text (rich markup that closes a tag nobody opened, markup that dresses
itself as the tool's verdict, an OSC that sets the window title, a screen
clear, an OSC 52 clipboard write, a one-byte C1 CSI, a bidi override, an
emoji code, carriage return and backspace) is fed to ``show``, ``audit-run``
and ``fidelity``, with a terminal forced on (``FORCE_COLOR``), so that rich
writes its own styling as raw escape sequences. Once those (SGR, ``ESC [ ...
m``) are taken out, the output holds no control or format character but
newlines, and the hostile text is there verbatim, its markup unread.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from mirrorworld.agents import make_agent
from mirrorworld.cli import main
from mirrorworld.inert import inert, text
from mirrorworld.run import RunFile, run_episodes, summarize
from mirrorworld.worlds.helpdesk import HelpdeskWorld

HOSTILE = (
    "[/INST] [bold red]PASSED[/] \x1b]0;pwned\x07 \x1b[2J \x1b]52;c;aGVsbG8=\x07 \x9b31m "
    "\u202eevil\u202c \u2066x\u2069 :warning: \r\x08\x00\x7f\u2028end"
)
MARKUP = ("[/INST]", "[bold red]PASSED[/]", ":warning:")
"""Pieces of :data:`HOSTILE` that must come out verbatim (their markup not read)."""
SHOWN = ("\\x1b]0;pwned\\x07", "\\x1b[2J", "\\x9b31m", "\\u202eevil\\u202c")
"""How its control characters must come out: as their escapes."""

_SGR = re.compile(r"\x1b\[[0-9;]*m")


def _raw_controls(output: str) -> list[str]:
    """Control and format characters in ``output`` once rich's own styling (SGR sequences) is taken out."""
    plain = _SGR.sub("", output)
    return sorted(
        {c for c in plain if c != "\n" and unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn")}
    )


def _one_line_hostile(n: int) -> list[dict[str, Any]]:
    call = {"id": "c1", "type": "function", "function": {"name": HOSTILE, "arguments": json.dumps({"x": HOSTILE})}}
    return [
        {"role": "system", "content": "policy"},
        {"role": "user", "content": HOSTILE},
        {"role": "assistant", "content": HOSTILE, "tool_calls": [dict(call, id=f"c{i}") for i in range(n)]},
        *({"role": "tool", "tool_call_id": f"c{i}", "content": HOSTILE} for i in range(n)),
        {"role": "assistant", "content": HOSTILE},
    ]


def hostile_run(path: Path) -> Path:
    """A real run of two episodes, then every text a run file prints made hostile."""
    world = HelpdeskWorld()
    with RunFile.create(path, {"world": world.id, "agent": "oracle", "split": "test"}) as run:
        records = run_episodes(world, make_agent("oracle"), episodes=2, on_record=run.add)
        summary = summarize(records)
    verdict = records[0].verdict
    verdict["breakdown"]["state"]["evidence"] = [HOSTILE]
    verdict["breakdown"][HOSTILE] = {"passed": False, "evidence": [HOSTILE]}
    block = summary["families"].popitem()[1]
    summary["families"] = {HOSTILE: block}
    summary["gate_failures"] = {HOSTILE: 1}
    summary["errors"], summary["errors_by_boundary"] = 1, {HOSTILE: 1}
    summary["seconds"], summary["episodes_per_s"] = 1.0, HOSTILE
    failure = {"boundary": "world", "kind": HOSTILE, "message": HOSTILE}
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(
            "UPDATE episodes SET task_id=?, agent=?, family=?, messages=?, verdict=? WHERE idx=0",
            ("triage/" + HOSTILE, HOSTILE, HOSTILE, json.dumps(_one_line_hostile(3)), json.dumps(verdict)),
        )
        conn.execute(
            "UPDATE episodes SET error=?, failure=?, verdict='{}', passed=0, messages=? WHERE idx=1",
            (HOSTILE, json.dumps(failure), json.dumps(_one_line_hostile(1))),
        )
        for key, value in (("agent", HOSTILE), ("world", HOSTILE), ("summary", summary)):
            conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))
    conn.close()
    return path


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hostile")
    (folder / "log.jsonl").write_text(
        json.dumps({"task_id": "triage/0", "messages": _one_line_hostile(3)}) + "\n", encoding="utf-8"
    )
    return hostile_run(folder / "run.sqlite")


def _terminal(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """A command with a terminal forced on: rich writes its styling as escape sequences."""
    env = {**os.environ, "FORCE_COLOR": "1", "TERM": "xterm-256color", "COLUMNS": "2000"}
    env.pop("NO_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "mirrorworld", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["show", "{run}"],
        ["show", "{run}", "0"],
        ["show", "{run}", "1"],
        ["show", "{run}", "--json"],
        ["show", "{run}", "0", "--json"],
        ["audit-run", "{run}", "--world", "helpdesk"],
        ["audit-run", "{log}", "--world", "helpdesk"],
    ],
    ids=lambda argv: " ".join(a for a in argv if "{" not in a) or "show",
)
def test_every_reader_prints_hostile_text_inert(argv: list[str], hostile: Path) -> None:
    args = [a.format(run=hostile, log=hostile.parent / "log.jsonl") for a in argv]
    done = _terminal(args, hostile.parent)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert _raw_controls(done.stdout + done.stderr) == []
    if "--json" in args:
        json.loads(done.stdout)
        return
    assert "\x1b[" in done.stdout, "the terminal was not forced on: the test would prove nothing"
    plain = _SGR.sub("", done.stdout)
    for piece in (*MARKUP, *SHOWN):
        assert piece in plain, (piece, plain[:3000])


def test_an_error_line_that_quotes_hostile_text_is_inert(hostile: Path) -> None:
    done = _terminal(["audit-run", str(hostile)], hostile.parent)  # meta names a world with a hostile name
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("mirrorworld: error: ") and done.stderr.count("\n") == 1
    assert _raw_controls(done.stderr) == [] and "\\x1b]0;pwned\\x07" in done.stderr


def test_fidelity_prints_recorded_trace_names_tools_and_responses_inert(
    hostile: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``fidelity`` on hostile recorded traces, with the twin's replay stood in for: every printed line inert."""
    import contextlib

    from mirrorworld.fidelity import harness
    from mirrorworld.twin import backend, db

    traces = tmp_path / "traces.jsonl"
    traces.write_text(json.dumps({"name": HOSTILE, "calls": [{"tool": HOSTILE, "args": {"x": HOSTILE}}]}) + "\n")

    def replay(world: Any, twin: Any, all_traces: list[Any], progress: Any = None) -> harness.FidelityRun:
        run = harness.FidelityRun(world.id, {"trytond": HOSTILE}, calls=1, agreed=0)
        for t in all_traces:
            if t.kind == "recorded":
                c = t.calls[0]
                run.divergences.append(harness.Divergence(t.name, "outcome", t.family, 1, c.tool, c.args, [HOSTILE]))
                run.by_tool[c.tool] = [0, 1]
                run.by_family[HOSTILE] = [0, 1, 0, 1]
        return run

    monkeypatch.setattr(db, "ensure", lambda world, options=None, log=None: tmp_path / "twin.sqlite")
    monkeypatch.setattr(backend, "TwinBackend", lambda world, database: contextlib.nullcontext())
    monkeypatch.setattr(harness, "run_fidelity", replay)
    argv = ["fidelity", "--world", "sales", "--calls", "0", "--seeds", "1", "--no-audit"]
    assert main([*argv, "--trajectories", str(traces), "--trajectories", str(hostile)]) == 1  # bars missed
    out = capsys.readouterr().out
    assert _raw_controls(out) == [] and out.count("\\x1b]0;pwned\\x07") >= 4
    assert all(piece in out for piece in MARKUP)


def test_inert_text_is_escaped_bounded_and_never_markup() -> None:
    assert inert("plain [b]text[/b] \u00e9\u4e2d") == "plain [b]text[/b] \u00e9\u4e2d"
    assert inert("a\x1b[2Jb\x9bc\u202ed\r\x00") == "a\\x1b[2Jb\\x9bc\\u202ed\\r\\x00"
    assert inert("two\nlines\tand a tab") == "two\nlines\tand a tab"
    assert inert("two\nlines", lines=False) == "two\\nlines"
    assert inert("x" * 50, 10) == "x" * 10 + "…"
    assert inert(10**5000) == "<int>" and inert(["\x1b"]) == "['\\x1b']"
    shown = text("[bold red]PASSED[/] :warning:", style="cyan")
    assert shown.plain == "[bold red]PASSED[/] :warning:" and shown.spans == [] and str(shown.style) == "cyan"


def test_the_verifier_audit_prints_what_its_adversaries_wrote_inert() -> None:
    """``audit-verifiers`` quotes probe and adversary calls, which carry hostile strings by design."""
    from rich.console import Console

    from mirrorworld.audit.report import print_audit

    family = {
        "tasks": 1,
        "solvability": 1.0,
        "null_passes": 0,
        "mutation_score": 0.5,
        "mutants_killed": 1,
        "mutants_total": 2,
        "mutants_equivalent": 0,
        "invariance": 1.0,
        "determinism": 1.0,
        "lint_issues": 0,
        "survivors": [{"task": HOSTILE, "operator": HOSTILE, "mutant": HOSTILE}],
        "failures": [{"task": HOSTILE, "case": HOSTILE, "evidence": [HOSTILE]}],
    }
    adversary = {"attacks": {"write": [1, 2]}, "variants": [0, 1], "survivors": [], "per_family": 2}
    report = {
        "world": HOSTILE,
        "seeds": 1,
        "families": {HOSTILE: family},
        "quality_bars": {"mutation_score": 0.95},
        "probes": {HOSTILE: {"successes": 1, "episodes": 1}},
        "determinism": {"cross_process": False},
        "probe_findings": [{"probe": HOSTILE, "task": HOSTILE, "evidence": HOSTILE}],
        "adversary": {
            "per_family": 2,
            "families": {HOSTILE: {**adversary, "survivors": [{"task": HOSTILE, "kind": "write", "calls": []}]}},
        },
        "meets_bars": False,
        "failed_bars": [HOSTILE],
    }
    con = Console(record=True, force_terminal=True, color_system="truecolor", width=2000, highlight=False)
    print_audit(report, console=con)
    out = con.export_text(styles=True)
    assert "\x1b[" in out and _raw_controls(out) == []
    assert _SGR.sub("", out).count("[bold red]PASSED[/]") >= 8
