"""The command line: the main job, run files, listings, and one-line errors."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mirrorworld.cli import main
from mirrorworld.run import RunFile


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_run_json_summary_and_run_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "r.sqlite"
    code, out, _ = _run(
        capsys, "run", "--agent", "oracle", "--episodes", "9", "--split", "test", "--json", "--out", str(out_file)
    )
    assert code == 0
    summary = json.loads(out)
    assert summary["episodes"] == 9 and summary["pass_rate"] == 1.0 and summary["mean_reward"] == 1.0
    assert set(summary["families"]) == {
        "refund_damaged",
        "refund_with_approval",
        "deny_refund",
        "cancel_order",
        "triage",
        "sla_escalation",
        "merge_duplicates",
        "update_email",
        "kb_answer",
    }
    with RunFile.open(out_file) as run:
        assert len(run) == 9
        meta = run.meta
        assert meta["summary"]["pass_rate"] == 1.0 and meta["agent"] == "oracle"
        ep = run.episode(0)
        assert ep.world_hash == meta["world_hash"]
        assert ep.messages[0]["role"] == "system" and ep.messages[1]["role"] == "user"
        assert any(m.get("tool_calls") for m in ep.messages)
        assert ep.verdict["passed"] is True


def test_run_table_and_trials(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        capsys,
        "run",
        "--agent",
        "noop",
        "--episodes",
        "3",
        "--trials",
        "2",
        "--no-progress",
        "--families",
        "triage,kb_answer",
        "--out",
        str(tmp_path / "n.sqlite"),
    )
    assert code == 0
    assert "pass rate" in out and "triage" in out and "kb_answer" in out and "saved 6 episodes" in out


def test_show_run_and_episode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "r.sqlite"
    _run(capsys, "run", "--agent", "oracle", "--episodes", "2", "--json", "--out", str(path))
    code, out, _ = _run(capsys, "show", str(path))
    assert code == 0 and "refund_damaged/0" in out
    code, out, _ = _run(capsys, "show", str(path), "1")
    assert code == 0 and "PASSED" in out and "request_approval" in out and "verdict" in out
    code, out, _ = _run(capsys, "show", str(path), "0", "--json")
    assert json.loads(out)["task_id"] == "refund_damaged/0"


def test_listings(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "tools", "--world", "helpdesk", "--format", "openai")
    tools = json.loads(out)
    assert code == 0 and len(tools) >= 15
    assert all(t["type"] == "function" and {"name", "description", "parameters"} <= set(t["function"]) for t in tools)
    code, out, _ = _run(capsys, "tools", "--format", "markdown")
    assert "**`issue_refund`** (write)" in out
    code, out, _ = _run(capsys, "tasks", "--world", "helpdesk", "--json")
    assert code == 0 and len(json.loads(out)) >= 8
    code, out, _ = _run(capsys, "worlds")
    assert "mirrorworld/Helpdesk-v0" in out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["run", "--world", "nowhere"], "no world named 'nowhere'"),
        (["run", "--families", "bogus"], "no task family 'bogus'"),
        (["run", "--episodes", "0"], "at least 1"),
        (["run", "--agent", "replay"], "--replay"),
        (["show", "/nonexistent/run.sqlite"], "no run file"),
        (["tasks", "--world", "x"], "no world named"),
    ],
)
def test_errors_are_one_line(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, *argv)
    assert code != 0
    assert needle in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_corrupt_run_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"not a database at all" * 100)
    code, _, err = _run(capsys, "show", str(bad))
    assert code == 2 and "not a mirrorworld run file" in err and len(err.strip().splitlines()) == 1


def test_console_script_in_a_subprocess(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONHASHSEED": "7"}
    bad = subprocess.run(
        [sys.executable, "-m", "mirrorworld", "run", "--episodes", "nine"],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    ok = subprocess.run(
        [sys.executable, "-m", "mirrorworld", "run", "--episodes", "3", "--json", "--out", str(tmp_path / "s.sqlite")],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["pass_rate"] == 1.0


def test_every_command_help_shows_an_example_and_its_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    from mirrorworld.cli import EXAMPLES, _parser

    monkeypatch.setenv("COLUMNS", "200")
    parser, _handlers = _parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert set(commands) == set(EXAMPLES)
    for name, sub in commands.items():
        text = sub.format_help()
        assert "examples:\n" in text and EXAMPLES[name][0] in text, name
    run_help = commands["run"].format_help()
    assert "(default: 20)" in run_help and "(default: 0.0)" in run_help and "(default: OPENAI_API_KEY)" in run_help


def test_every_world_listed_is_accepted_by_name_and_by_id(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "worlds")
    assert code == 0
    for line in out.strip().splitlines():
        name, env_id = line.split("\t")[:2]
        for given in (name, env_id, env_id.rpartition("/")[2].lower()):
            code, listed, err = _run(capsys, "tasks", "--world", given, "--json")
            assert code == 0 and json.loads(listed), (given, err)
