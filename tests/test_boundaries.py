"""Failures have a boundary: an episode that a world, a verifier or the infrastructure broke is
recorded with its failure and left out of the pass rates, never scored as the agent's 0; run files
keep the failure, old run files still load, and a malformed run file is one error line."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mirrorworld.agents import make_agent
from mirrorworld.agents.base import Agent, EpisodeContext, Message, assistant, tool_call
from mirrorworld.cli import main
from mirrorworld.errors import AgentError, Failure, MirrorworldError, VerifierError, WorldError, boundary
from mirrorworld.run import EpisodeRecord, RunFile, run_episodes, summarize
from mirrorworld.worlds.helpdesk import HelpdeskWorld

FAMILY = ["refund_damaged"]


class CrashOnFirstTask(Agent):
    """The oracle, except on ``crash_on``: there it calls the faulty world's crashing tool."""

    name = "crash-first"

    def __init__(self, crash_on: str) -> None:
        self.crash_on = crash_on
        self.oracle = make_agent("oracle")

    def reset(self, context: EpisodeContext) -> None:
        self.task = context.task
        self.oracle.reset(context)

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> Message:
        if self.task.id == self.crash_on:
            order = self.task.targets[0][1]
            return assistant(None, [tool_call("c0", "refund_then_crash", {"order_id": order})])
        return self.oracle.act(messages, tools)


class Failing(Agent):
    """An agent whose ``act`` raises ``error`` on its second turn."""

    name = "failing"

    def __init__(self, error: Exception) -> None:
        self.error = error

    def reset(self, context: EpisodeContext) -> None:
        self.turn = 0

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> Message:
        self.turn += 1
        if self.turn == 2:
            raise self.error
        return assistant(None, [tool_call("c", "get_policy", {})])


# -- the boundary helper -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("crossed", "raised"),
    [("world", WorldError), ("verifier", VerifierError), ("infrastructure", AgentError), ("caller", MirrorworldError)],
)
def test_boundary_attributes_an_untyped_exception_to_the_boundary_it_crossed(
    crossed: Any, raised: type[Exception]
) -> None:
    with pytest.raises(raised) as info, boundary(crossed, "the code"):
        {}["missing"]
    assert type(info.value) is raised and isinstance(info.value.__cause__, KeyError)
    failure = Failure.of(info.value)
    assert failure.boundary == crossed and failure.message == "the code: KeyError: 'missing'"


def test_boundary_passes_typed_errors_and_interrupts_through() -> None:
    with pytest.raises(AgentError), boundary("world"):
        raise AgentError("endpoint down")
    with pytest.raises(KeyboardInterrupt), boundary("world"):
        raise KeyboardInterrupt
    with pytest.raises(ValueError, match="no boundary"), boundary("agent"):
        pass


# -- the runner --------------------------------------------------------------------------------------


def test_a_crashing_tool_is_a_world_failure_outside_the_pass_rate(faulty_helpdesk: HelpdeskWorld) -> None:
    first = faulty_helpdesk.task_for("test", 0, FAMILY)
    records = run_episodes(faulty_helpdesk, CrashOnFirstTask(first.id), episodes=3, families=FAMILY)
    crashed, *solved = records
    assert crashed.failure is not None and crashed.failure.boundary == "world"
    assert crashed.failure.kind == "WorldError" and "KeyError" in crashed.failure.message
    assert crashed.error == crashed.failure.message and crashed.errored
    assert not crashed.passed and crashed.score == 0.0 and crashed.reward == 0.0
    assert crashed.verdict == {} and crashed.graded is None
    assert crashed.steps == 1 and crashed.calls == []  # the crashed call was rolled back, not committed
    assert all(r.passed and r.failure is None and r.graded is not None for r in solved)
    summary = summarize(records)
    assert summary["episodes"] == 3 and summary["graded"] == 2 and summary["passed"] == 2
    assert summary["pass_rate"] == 1.0 and summary["pass_hat_k"] == 1.0 and summary["mean_reward"] == 1.0
    assert summary["errors"] == 1 and summary["errors_by_boundary"] == {"world": 1}
    assert summary["gate_failures"] == {"state": 0, "collateral": 0, "policy": 0, "communication": 0, "reply": 0}
    assert summary["families"]["refund_damaged"]["errors_by_boundary"] == {"world": 1}


def test_an_agent_error_is_an_infrastructure_failure(helpdesk: HelpdeskWorld) -> None:
    (record,) = run_episodes(helpdesk, Failing(AgentError("HTTP 503 from the endpoint")), episodes=1)
    assert record.failure == Failure("infrastructure", "AgentError", "HTTP 503 from the endpoint")
    assert record.error == "HTTP 503 from the endpoint" and not record.passed and record.score == 0.0
    assert record.steps == 1 and len(record.calls) == 1 and record.graded is None
    summary = summarize([record])
    assert summary["errors_by_boundary"] == {"infrastructure": 1} and summary["graded"] == 0
    assert summary["pass_rate"] == 0.0 and summary["errors"] == 1


def test_a_bug_in_an_agents_code_is_an_infrastructure_failure_not_a_zero(helpdesk: HelpdeskWorld) -> None:
    (record,) = run_episodes(helpdesk, Failing(KeyError("choices")), episodes=1)
    assert record.failure is not None and record.failure.boundary == "infrastructure"
    assert record.failure.kind == "AgentError" and "agent failing: KeyError" in record.failure.message


def test_a_crashing_verifier_is_a_verifier_failure(helpdesk: HelpdeskWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    from mirrorworld.verify import verifier

    def broken(self: Any, session: Any) -> Any:
        raise ZeroDivisionError("a bug in the verifier")

    monkeypatch.setattr(verifier.Verifier, "__call__", broken)
    (record,) = run_episodes(helpdesk, make_agent("oracle"), episodes=1)
    assert record.failure is not None and record.failure.boundary == "verifier"
    assert record.failure.kind == "VerifierError" and "ZeroDivisionError" in record.failure.message
    assert not record.passed and record.verdict == {}
    assert summarize([record])["errors_by_boundary"] == {"verifier": 1}


# -- run files ---------------------------------------------------------------------------------------


def _errored_run(path: Path, world: HelpdeskWorld) -> list[EpisodeRecord]:
    first = world.task_for("test", 0, FAMILY)
    meta = {"world": world.id, "agent": "crash-first", "split": "test"}
    with RunFile.create(path, meta) as run:
        records = run_episodes(world, CrashOnFirstTask(first.id), episodes=2, families=FAMILY, on_record=run.add)
        run.set_meta("summary", summarize(records))
    return records


def test_a_run_file_keeps_the_failure(tmp_path: Path, faulty_helpdesk: HelpdeskWorld) -> None:
    path = tmp_path / "run.sqlite"
    records = _errored_run(path, faulty_helpdesk)
    with RunFile.open(path) as run:
        loaded = list(run.episodes())
        assert run.meta["summary"]["errors_by_boundary"] == {"world": 1}
    assert [r.failure for r in loaded] == [r.failure for r in records]
    assert loaded[0].failure is not None and loaded[0].failure.boundary == "world"
    assert loaded[1].graded == records[1].graded and loaded[1].graded is not None
    assert summarize(loaded)["errors_by_boundary"] == summarize(records)["errors_by_boundary"]


def test_a_run_file_without_the_failure_column_still_loads(tmp_path: Path, helpdesk: HelpdeskWorld) -> None:
    path = tmp_path / "old.sqlite"
    with RunFile.create(path, {"world": helpdesk.id}) as run:
        run_episodes(helpdesk, Failing(AgentError("HTTP 500")), episodes=1, on_record=run.add)
        run_episodes(helpdesk, make_agent("oracle"), episodes=1, on_record=run.add)
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE episodes DROP COLUMN failure")
    conn.close()
    with RunFile.open(path) as run:
        old_error, old_pass = run.episodes()
    assert old_error.error == "HTTP 500" and old_error.failure == Failure("infrastructure", "AgentError", "HTTP 500")
    assert old_pass.failure is None and old_pass.passed
    assert summarize([old_error, old_pass])["errors_by_boundary"] == {"infrastructure": 1}


def test_show_prints_the_boundary(
    tmp_path: Path, faulty_helpdesk: HelpdeskWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.sqlite"
    _errored_run(path, faulty_helpdesk)
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "errored" in out and "world: " in out and "world 1" in out
    assert main(["show", str(path), "0"]) == 0
    out = capsys.readouterr().out
    assert "ERRORED" in out and "errored at the world boundary" in out and "not graded" in out
    assert main(["show", str(path), "--json"]) == 0
    episodes = json.loads(capsys.readouterr().out)["episodes"]
    assert episodes[0]["failure"]["boundary"] == "world" and episodes[1]["failure"] is None


def _oracle_run(path: Path, world: HelpdeskWorld) -> None:
    with RunFile.create(path, {"world": world.id, "agent": "oracle", "split": "test"}) as run:
        records = run_episodes(world, make_agent("oracle"), episodes=2, on_record=run.add)
        run.set_meta("summary", summarize(records))


def _tamper(path: Path, column: str, value: Any) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(f"UPDATE episodes SET {column}=? WHERE idx=1", (value,))
    conn.close()


@pytest.mark.parametrize(
    ("column", "value", "needle"),
    [
        ("verdict", "[1, 2]", "verdict is list, not dict"),
        ("verdict", '{"passed": true}', "verdict has no 'score'"),
        ("verdict", '{"passed": "yes", "score": 1, "breakdown": {}}', "verdict.passed is str"),
        ("verdict", "not json {", "verdict is not valid JSON"),
        ("verdict", '"\\u001b[2J\\n[red]boom"', "verdict is str, not dict"),
        ("steps", "many", "steps is str, not int"),
        ("messages", '{"role": "user"}', "messages is dict, not list"),
    ],
)
def test_a_malformed_run_file_is_one_error_line_from_show(
    tmp_path: Path,
    helpdesk: HelpdeskWorld,
    capsys: pytest.CaptureFixture[str],
    column: str,
    value: str,
    needle: str,
) -> None:
    path = tmp_path / "run.sqlite"
    _oracle_run(path, helpdesk)
    _tamper(path, column, value)
    for argv in (["show", str(path)], ["show", str(path), "1"], ["show", str(path), "--json"]):
        code = main(argv)
        out, err = capsys.readouterr()
        assert code == 2, (argv, out)
        assert err.startswith(f"mirrorworld: error: {path}: episode 1: ") and needle in err, err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert main(["show", str(path), "0"]) == 0  # the other episodes still read
    capsys.readouterr()


def test_a_malformed_verdict_through_the_console_script(tmp_path: Path, helpdesk: HelpdeskWorld) -> None:
    path = tmp_path / "run.sqlite"
    _oracle_run(path, helpdesk)
    bad = json.dumps({"passed": True, "score": 1.0, "breakdown": {"state": {"passed": 1}}})
    _tamper(path, "verdict", bad)
    done = subprocess.run(
        [sys.executable, "-m", "mirrorworld", "show", str(path), "1"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"mirrorworld: error: {path}: episode 1: malformed verdict: verdict.breakdown has no 'process'"
    ]


def test_a_malformed_stored_summary_is_one_error_line(
    tmp_path: Path, helpdesk: HelpdeskWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.sqlite"
    _oracle_run(path, helpdesk)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE meta SET value=? WHERE key='summary'", (json.dumps({"families": {"x": {}}}),))
    conn.close()
    assert main(["show", str(path)]) == 2
    err = capsys.readouterr().err
    assert "its stored summary is malformed" in err and len(err.strip().splitlines()) == 1


def test_the_review_app_shows_an_errored_episode_as_not_graded(tmp_path: Path, faulty_helpdesk: HelpdeskWorld) -> None:
    from starlette.testclient import TestClient

    from mirrorworld.review.app import create_app
    from mirrorworld.review.store import ReviewStore, record_verdict
    from mirrorworld.review.testing import ReviewerClient

    path = tmp_path / "run.sqlite"
    _errored_run(path, faulty_helpdesk)
    store = ReviewStore(tmp_path / "review.sqlite")
    store.add_run(path, audit=False)
    errored, graded = store.items()
    assert errored.error is not None and "KeyError" in errored.error and not errored.verifier_passed
    assert not any(ref.key.startswith("gate:") for ref in errored.checks)
    assert {ref.key for ref in graded.checks} >= {"gate:state", "gate:communication"}
    assert record_verdict(store.record(errored.id)) is None
    assert record_verdict(store.record(graded.id)) is not None
    store.add_reviewer("judge", "judge-password", "adjudicator")
    judge = ReviewerClient(TestClient(create_app(store), base_url="http://127.0.0.1"))
    assert judge.sign_in("judge", "judge-password").status_code == 303
    page = judge.http.get(f"/item/{errored.id}")
    assert page.status_code == 200 and "Verifier verdict: none" in page.text and "KeyError" in page.text
    page = judge.http.get(f"/item/{graded.id}")
    assert page.status_code == 200 and 'Verifier verdict: <span class="pass">pass</span>' in page.text
