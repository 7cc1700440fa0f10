"""Agents on the real twin: twin episodes, their grading, the agent-level gap and its commands.

The tests that play on the twin need Tryton (``pip install 'mirrorworld[twin]'``)
and are skipped without it; they share the process's one loaded twin. The
command-line runs are their own processes (Tryton holds one twin per process).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mirrorworld.agents import OracleAgent, PartialAgent, make_agent
from mirrorworld.agents.base import EpisodeContext
from mirrorworld.agents.scripted import CallListAgent
from mirrorworld.cli import main
from mirrorworld.core.task import Task, ToolCall
from mirrorworld.envs.chat import ChatEnv
from mirrorworld.fidelity.agents import agent_gap, failed_bars, gap_lines, measure_gap
from mirrorworld.run.runner import EpisodeRecord, plan_episodes, play_episodes, run_episode
from mirrorworld.twin import tryton
from mirrorworld.worlds.sales import SalesWorld

WORLD = SalesWorld()
needs_tryton = pytest.mark.skipif(not tryton.available(), reason="Tryton (trytond, proteus) is not installed")


@pytest.fixture(scope="module")
def twin() -> Iterator[Any]:
    from mirrorworld.fidelity.episode import Twin
    from mirrorworld.twin.testing import shared_twin

    yield Twin(WORLD, shared_twin())


class Calls(CallListAgent):
    """Plays the calls it is given."""

    name = "calls"

    def __init__(self, calls: list[ToolCall]) -> None:
        self.calls = calls

    def plan(self, context: EpisodeContext) -> list[ToolCall]:
        return self.calls


def _both(twin: Any, agent: Any, task: Task) -> tuple[EpisodeRecord, EpisodeRecord]:
    mirror = run_episode(ChatEnv(WORLD, split="test"), agent, task)
    real = run_episode(twin.env(WORLD, split="test"), agent, task)
    return mirror, real


def _gates(record: EpisodeRecord) -> dict[str, bool]:
    verdict = record.graded
    assert verdict is not None, record.failure
    return {name: gate.passed for name, gate in verdict.gates.items()}


@needs_tryton
@pytest.mark.parametrize("family", ["new_quotation", "discount_quotation", "collect_payment"])
def test_the_oracle_passes_on_the_twin(twin: Any, family: str) -> None:
    task = WORLD.task(family, 0)
    record = run_episode(twin.env(WORLD, split="test"), OracleAgent(), task)
    assert record.passed and all(_gates(record).values()), record.verdict
    assert record.steps == len(task.gold)
    created = next((c for c in record.calls if c["tool"] == "create_quotation"), None)
    if created is not None:  # the agent was shown what Tryton answered
        assert created["ok"] and isinstance(created["data"]["sale_id"], int)


@needs_tryton
def test_a_wrong_agent_fails_on_the_twin_with_the_state_gate(twin: Any) -> None:
    task = WORLD.task("new_lead", 0)
    wrong = [
        ToolCall(c.tool, {**c.args, "amount": "1.00"}) if c.tool == "create_lead" else c
        for c in task.gold  # the lead recorded with another budget, the right number announced
    ]
    mirror, real = _both(twin, Calls(wrong), task)
    assert not real.passed and not _gates(real)["state"]
    evidence = real.graded.gates["state"].evidence  # type: ignore[union-attr]
    assert "check failed: lead amount" in evidence and any("missing insert into opportunities" in e for e in evidence)
    assert _gates(real) == _gates(mirror)  # graded alike on both backends


@needs_tryton
def test_a_dropped_write_and_an_extra_record_are_graded_as_on_the_mirror(twin: Any) -> None:
    task = WORLD.task("new_quotation", 0)
    gold = list(task.gold)
    dropped = [c for c in gold if c.tool != "quote_sale"]  # the final message still says it was quoted
    extra = [ToolCall("create_quotation", {"party_id": gold[0].args["party_id"]}), *gold]  # a draft left behind
    for calls in (dropped, extra):
        mirror, real = _both(twin, Calls(calls), task)
        assert not real.passed and _gates(real) == _gates(mirror), (real.verdict, mirror.verdict)
    assert not _gates(real)["collateral"]


@needs_tryton
def test_a_twin_crash_is_an_errored_episode_not_a_zero(twin: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from mirrorworld.twin import sales as twin_sales

    def crash(pool: Any, **kwargs: Any) -> Any:
        raise RuntimeError("Tryton fell over")

    task = WORLD.task("add_contact", 0)
    monkeypatch.setitem(twin_sales.TOOLS, "add_contact", crash)
    record = run_episode(twin.env(WORLD, split="test"), OracleAgent(), task)
    assert record.errored and record.failure is not None and record.verdict == {}
    assert (record.failure.boundary, record.failure.kind) == ("infrastructure", "TwinError")
    assert "Tryton fell over" in record.failure.message
    monkeypatch.undo()
    assert run_episode(twin.env(WORLD, split="test"), OracleAgent(), task).passed  # the twin was rolled back


def test_a_twin_that_cannot_open_errors_every_episode(monkeypatch: pytest.MonkeyPatch) -> None:
    from mirrorworld.fidelity.episode import Twin

    monkeypatch.setattr(tryton, "available", lambda: False)
    broken = Twin(WORLD)
    records = play_episodes(WORLD, OracleAgent(), plan_episodes(WORLD, episodes=2), make_env=broken.env)
    assert [r.failure.boundary if r.failure else None for r in records] == ["infrastructure"] * 2
    assert all("Tryton is not installed" in str(r.error) and not r.passed for r in records)


def test_the_partial_agent_is_seeded_and_drops_one_write() -> None:
    agent = PartialAgent(seed=3)
    plans = {}
    for family in WORLD.families:
        task = WORLD.task(family.name, 0)
        agent.reset(EpisodeContext(WORLD, task, seed=0))
        plans[task.id] = list(agent._calls)
        assert len(task.gold) - len(plans[task.id]) in (0, 1)
        assert plans[task.id][-1] == task.gold[-1]  # the final message is kept
    again = make_agent("partial", seed=3)
    for task_id, calls in plans.items():
        again.reset(EpisodeContext(WORLD, WORLD.task_at(task_id), seed=0))
        assert again._calls == calls  # type: ignore[attr-defined]
    assert 0 < sum(len(c) < len(WORLD.task_at(t).gold) for t, c in plans.items()) < len(plans)


def test_differences_name_the_gates_and_their_evidence() -> None:
    planned = plan_episodes(WORLD, episodes=10)
    oracle = play_episodes(WORLD, OracleAgent(), planned)
    partial = play_episodes(WORLD, PartialAgent(), planned)
    gap = agent_gap("partial", oracle, partial)  # as if the "twin" were the partial agent's runs
    fails = sum(not r.passed for r in partial)
    assert gap["paired"] == 10 and len(gap["differences"]) == fails > 0
    assert gap["gap"] == pytest.approx(-fails / 10)
    first = gap["differences"][0]
    state = next(g for g in first["gates"] if g["gate"] == "state")
    assert state["mirror"] is True and state["twin"] is False and state["twin_only"]
    data = {"agents": [gap], "bar": 0.02, "world": WORLD.id, "twin_versions": {}, "episodes": 10, "split": "test"}
    assert failed_bars(data) == [f"partial: gap {-fails * 10:+.1f} pp exceeds 2 pp"]
    lines = gap_lines(data)
    assert all(len(line) <= 80 for line in lines[1:]), [line for line in lines if len(line) > 80]
    assert f"  partial {first['task']} #{first['index']}: mirror pass, twin fail" in "\n".join(lines)


@needs_tryton
def test_measured_gap_of_the_reference_agents_is_within_the_bar(twin: Any) -> None:
    data = measure_gap(WORLD, twin, ["oracle", "random", "partial"], episodes=4)
    assert data["failed_bars"] == [], gap_lines(data)
    by_agent = {a["agent"]: a for a in data["agents"]}
    assert by_agent["oracle"]["families"][-1]["twin"]["rate"] == 1.0
    assert all(a["differences"] == [] and a["errored"] == [] for a in data["agents"]), gap_lines(data)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["run", "--world", "helpdesk", "--backend", "twin"], "world helpdesk has no real twin"),
        (["fidelity", "--world", "helpdesk", "--agents", "oracle"], "world helpdesk has no real twin"),
        (["run", "--world", "sales", "--backend", "twin", "--concurrency", "2"], "one episode at a time"),
        (["fidelity", "--world", "sales", "--agents", "nobody"], "no agent named 'nobody'"),
    ],
)
def test_twin_refusals_are_one_line(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) != 0
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1, err


def test_without_tryton_the_twin_backend_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(tryton, "available", lambda: False)
    assert main(["run", "--world", "sales", "--backend", "twin", "--episodes", "1"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == "mirrorworld: error: the twin backend needs Tryton: pip install 'mirrorworld[twin]'"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "mirrorworld", *args], capture_output=True, text=True, timeout=600, cwd=cwd
    )
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    return done


@needs_tryton
def test_fidelity_agents_prints_the_gap_table(tmp_path: Path) -> None:
    page = tmp_path / "agents.html"
    argv = ["fidelity", "--world", "sales", "--agents", "oracle,partial", "--episodes", "2", "--html", str(page)]
    done = _cli(*argv, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("oracle: 2 of 2 episodes graded on both backends") for line in lines)
    assert any(line.split()[:4] == ["all", "2", "100.0%", "100.0%"] for line in lines)
    assert "verdicts that differ between mirror and twin: 0" in lines
    assert all(len(line) <= 80 for line in lines[1:])
    assert "Agent-level sim-to-real gap" in page.read_text()


@needs_tryton
def test_run_on_the_twin_records_its_backend(tmp_path: Path) -> None:
    from mirrorworld.run import RunFile

    out = tmp_path / "twin.sqlite"
    argv = ["run", "--world", "sales", "--backend", "twin", "--agent", "oracle", "--episodes", "2", "--out", str(out)]
    done = _cli(*argv, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["pass_rate"] == 1.0
    with RunFile.open(out) as run:
        meta = run.meta
        assert meta["backend"]["name"] == "twin" and "trytond" in meta["backend"]["versions"]
        assert meta["options"]["backend"] == "twin"
        assert [r.passed for r in run.episodes()] == [True, True]
