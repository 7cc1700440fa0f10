"""The differential fidelity harness: mirror against twin, reports, baselines and drift.

The run against the real twin needs Tryton and is skipped without it; the
report, baseline and drift logic is tested on synthetic runs.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mirrorworld.core.session import ToolResult
from mirrorworld.errors import MirrorworldError
from mirrorworld.fidelity.baseline import drift, load_baseline, save_baseline
from mirrorworld.fidelity.cli import register
from mirrorworld.fidelity.harness import FidelityRun, compare, normalise, response
from mirrorworld.fidelity.report import failed_bars, fidelity_html, summary_lines, to_dict
from mirrorworld.fidelity.traces import Trace, gold_traces
from mirrorworld.twin import tryton
from mirrorworld.worlds.sales import SalesWorld

WORLD = SalesWorld()
needs_tryton = pytest.mark.skipif(not tryton.available(), reason="Tryton (trytond, proteus) is not installed")


@pytest.fixture(scope="session")
def twin() -> Iterator[Any]:
    from mirrorworld.twin.testing import shared_twin

    yield shared_twin()


def test_normalisation_ignores_harmless_number_formats() -> None:
    assert normalise({"a": "12.50", "b": 12.5, "c": [3, "3.0"]}) == {"a": "12.5", "b": "12.5", "c": ["3", "3"]}
    ok = response(ToolResult(True, {"total": "10.00"}))
    assert compare(ok, response(ToolResult(True, {"total": "10"}))) is None
    assert compare(ok, response(ToolResult(True, {"total": "10.01"})))[0] == "fields"  # type: ignore[index]
    err = response(ToolResult(False, error={"code": "not_found", "message": "x"}))
    assert compare(ok, err)[0] == "outcome"  # type: ignore[index]
    other = response(ToolResult(False, error={"code": "invalid_state", "message": "y"}))
    assert compare(err, other)[0] == "error_class"  # type: ignore[index]
    assert compare(err, response(ToolResult(False, error={"code": "not_found", "message": "z"}))) is None


def _synthetic(agreed: int, calls: int) -> dict[str, Any]:
    run = FidelityRun("mirrorworld/Sales-v0", {"trytond": "8.2.1"}, calls, agreed)
    run.by_tool = {"get_sale": [agreed, calls]}
    run.by_family = {"random": [agreed, calls, 1, 1]}
    run.by_decider = {"real": [agreed, calls]}
    run.gold_final = [3, 3]
    run.mirror_seconds, run.twin_seconds = 0.001, 2.0
    return to_dict(run)


def test_baseline_round_trip_and_drift(tmp_path: Path) -> None:
    base = _synthetic(1000, 1000)
    path = tmp_path / "base.json"
    save_baseline(base, path)
    assert load_baseline(path) == json.loads(path.read_text())
    assert drift(_synthetic(1000, 1000), base)["regressions"] == []
    worse = drift(_synthetic(950, 1000), base)
    assert any("call agreement" in r for r in worse["regressions"])
    assert any("tool get_sale" in r for r in worse["regressions"])
    (tmp_path / "junk.json").write_text("[]")
    with pytest.raises(MirrorworldError):
        load_baseline(tmp_path / "junk.json")


def test_reports_render_and_bars_apply() -> None:
    data = _synthetic(2990, 3000)
    assert failed_bars(data, full=True) == []
    assert failed_bars(_synthetic(2900, 3000), full=True)  # 96.7% of the real system's calls
    assert any("3000" in bar for bar in failed_bars(_synthetic(1000, 1000), full=True))
    mostly_shared = _synthetic(2990, 3000)
    mostly_shared["real_share"] = 0.75
    assert any("decided only 75.0%" in bar for bar in failed_bars(mostly_shared, full=True))
    assert "Fidelity of" in fidelity_html(data)
    assert any("per tool" in line for line in summary_lines(data))


def test_cli_registers_twin_and_fidelity() -> None:
    parser = argparse.ArgumentParser()
    handlers = register(parser.add_subparsers(dest="command"))
    assert set(handlers) == {"twin", "fidelity"}
    args = parser.parse_args(["fidelity", "--world", "sales", "--calls", "40", "--json", "--against", "b.json"])
    assert args.calls == 40 and args.against == "b.json"


@needs_tryton
def test_small_fidelity_run_against_real_tryton(twin: Any, tmp_path: Path) -> None:
    from mirrorworld.fidelity.harness import run_fidelity
    from mirrorworld.fidelity.traces import recorded_traces

    recorded = tmp_path / "agent.jsonl"
    calls = [
        {"tool": "search_parties", "args": {"query": "Acme"}},
        {"tool": "create_quotation", "args": {"party_id": 3}},
        {"tool": "add_line", "args": {"sale_id": "33", "product_id": 4, "quantity": 3, "discount": "$5"}},
        {"tool": "quote_sale", "args": '{"sale_id": 33}'},
        {"tool": "respond", "args": {"message": "Quoted."}},
    ]
    recorded.write_text(json.dumps({"name": "agent run", "calls": calls}) + "\n")
    traces = list(gold_traces(WORLD, 1)) + list(recorded_traces(recorded))
    traces += [Trace(k, f"{k} {i}", k, seed=i, length=12) for i, k in enumerate(("random", "invalid") * 3)]
    run = run_fidelity(WORLD, twin, traces)
    data = to_dict(run)
    assert data["gold_final_state"] == 1.0
    assert data["call_agreement"] >= 0.99, summary_lines(data)
    assert failed_bars(data, full=False) == []
    assert data["speed"]["ratio"] > 0  # measured in the same run; the figure itself belongs to the full run
    assert data["by_trace_kind"]["recorded"]["calls"] == 4  # the final respond is the session's: not compared
    assert data["session_calls"] >= len(traces) - 6
    assert set(data["by_decider"]) <= {"real", "adapter", "shared"}
    assert data["real_share"] > 0.5 and data["real_agreement"] == 1.0


@needs_tryton
def test_a_changed_twin_is_detected_with_a_minimal_trace(twin: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from mirrorworld.fidelity.harness import run_fidelity
    from mirrorworld.twin import sales as twin_sales

    traces = [Trace("gold", "gold", "ship_order", list(WORLD.task("ship_order", 0).gold))]
    base = to_dict(run_fidelity(WORLD, twin, traces))
    real = twin_sales.TOOLS["ship_shipment"]

    def drifted(pool: Any, shipment_id: int, partial: bool = False) -> dict[str, Any]:
        out = real(pool, shipment_id, partial)
        return {**out, "state": "shipped"}  # the "new version" reports another state name

    monkeypatch.setitem(twin_sales.TOOLS, "ship_shipment", drifted)
    changed = to_dict(run_fidelity(WORLD, twin, traces))
    report = drift(changed, base)
    assert any("ship_shipment" in r for r in report["regressions"])
    (div,) = changed["divergences"]
    assert div["kind"] == "fields" and div["minimal"] == [{"tool": "ship_shipment", "args": div["args"]}]


def test_twin_refuses_other_worlds() -> None:
    from mirrorworld.twin.db import ensure
    from mirrorworld.worlds.helpdesk import HelpdeskWorld

    with pytest.raises(MirrorworldError):
        ensure(HelpdeskWorld())
