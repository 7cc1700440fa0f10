"""The benchmark: report structure, a quick run, and the baseline's fidelity.

No test here asserts on wall-clock figures: they only have to be positive and
finite. The baseline is checked to hold exactly the mirror's data.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from mirrorworld import make_world
from mirrorworld.bench import format_report, run_bench
from mirrorworld.bench.baseline import JsonBaseline, dump_tables, writes_from_changes
from mirrorworld.bench.bench import PLANS, percentile
from mirrorworld.core.world import World

FIGURES = {
    "reset_p50_us",
    "reset_p99_us",
    "fresh_reset_p50_us",
    "session_reset_p50_us",
    "session_reset_p99_us",
    "step_rate",
    "step_p50_us",
    "verify_p50_us",
    "verify_p99_us",
    "verify_cold_p50_us",
    "episode_rate",
    "memory_per_session_mb",
    # The scale section; a quick run's largest scale is 2.
    "fresh_session_p50_us",
    "fresh_session_p50_us_x2",
    "fresh_reset_p50_us_x2",
    "read_step_p50_us_x2",
    "search_nomatch_p50_us_x2",
    "search_status_p50_us_x2",
    "verify_p50_us_x2",
    "memory_per_session_mb_x2",
    "live_sessions_8gb",
}
TARGETED = {
    "reset_p50_us": 100,
    "fresh_reset_p50_us": 150,
    "step_rate": 50_000,
    "verify_p50_us": 1000,
    "episode_rate": 500,
    "memory_per_session_mb": 5,
    "fresh_session_p50_us": 100,
    "fresh_session_p50_us_x2": 100,
    "fresh_reset_p50_us_x2": 150,
    "memory_per_session_mb_x2": 0.5,
    "live_sessions_8gb": 100_000,
}


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return run_bench("helpdesk", quick=True, progress=True)


@pytest.fixture(scope="module")
def world() -> World:
    return make_world("helpdesk")


@pytest.fixture()
def baseline(world: World, tmp_path: Path) -> JsonBaseline:
    return JsonBaseline.export(world.image, tmp_path / "helpdesk.json")


# -- the report -------------------------------------------------------------------


def test_report_structure(report: dict[str, Any], world: World) -> None:
    assert report["world"] == "mirrorworld/Helpdesk-v0"
    assert isinstance(report["world_hash"], str) and report["world_hash"]
    assert report["quick"] is True
    machine = report["machine"]
    assert machine["cpu_count"] >= 1
    assert machine["python"].count(".") == 2
    assert set(report["figures"]) == FIGURES
    assert report["elapsed_s"] > 0
    assert report["plan"] == asdict(PLANS["quick"])
    json.loads(json.dumps(report, allow_nan=False))  # JSON-serialisable, no NaN or infinity


def test_figures_are_positive_and_finite(report: dict[str, Any]) -> None:
    for name, fig in report["figures"].items():
        for key in ("mirrorworld", "baseline", "ratio"):
            value = fig[key]
            assert isinstance(value, float), (name, key)
            assert value > 0 and math.isfinite(value), (name, key, value)
        assert fig["unit"] in ("µs", "steps/s", "episodes/s", "MB", "sessions")
        assert fig["better"] in ("lower", "higher")
        assert fig["label"]


def test_ratios_and_targets_are_consistent(report: dict[str, Any]) -> None:
    for name, fig in report["figures"].items():
        mirror, base = fig["mirrorworld"], fig["baseline"]
        if fig["better"] == "lower":
            assert fig["ratio"] == pytest.approx(base / mirror), name
        else:
            assert fig["ratio"] == pytest.approx(mirror / base), name
        target = fig["target"]
        if target is None:
            assert fig["meets_target"] is None, name
        else:
            meets = mirror <= target if fig["better"] == "lower" else mirror >= target
            assert fig["meets_target"] is meets, name
    for name, target in TARGETED.items():
        assert report["figures"][name]["target"] == target
    # Rates are better higher, times and memory lower.
    assert report["figures"]["step_rate"]["better"] == "higher"
    assert report["figures"]["episode_rate"]["better"] == "higher"
    assert report["figures"]["reset_p50_us"]["better"] == "lower"
    assert report["figures"]["memory_per_session_mb"]["better"] == "lower"


def test_percentiles_are_ordered(report: dict[str, Any]) -> None:
    figs = report["figures"]
    for p50, p99 in (("reset_p50_us", "reset_p99_us"), ("verify_p50_us", "verify_p99_us")):
        assert figs[p50]["mirrorworld"] <= figs[p99]["mirrorworld"]
        assert figs[p50]["baseline"] <= figs[p99]["baseline"]


def test_detail(report: dict[str, Any]) -> None:
    detail = report["detail"]
    assert detail["rows"] > 1000
    assert detail["image_bytes"] > 0 and detail["json_bytes"] > 0
    mem = detail["memory"]["mirrorworld"]
    assert mem["sqlite_bytes"] >= 0 and mem["per_item_bytes"] > 0


def test_scale_section(report: dict[str, Any], tmp_path: Path) -> None:
    scale = report["detail"]["scale"]
    assert list(scale["scales"]) == ["1", "2"]
    for row in scale["scales"].values():
        for key in ("fresh_reset_us", "fresh_session_us", "private_copy_us", "read_step_us", "verify_us"):
            assert row[key] > 0 and math.isfinite(row[key])
        assert row["resident_limit"] >= 4
    assert scale["scales"]["2"]["image_mb"] > scale["scales"]["1"]["image_mb"]
    assert set(scale["live_bytes_per_session"]) == {"200", "1000"}
    # A parked session holds no copy of the image: far below one.
    assert max(scale["live_bytes_per_session"].values()) < scale["image_bytes"] / 4
    pytest.importorskip("matplotlib")
    from mirrorworld.bench.scale import plot_scale

    out = plot_scale(scale, tmp_path / "scale.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_format_report(report: dict[str, Any]) -> None:
    text = format_report(report)
    assert isinstance(text, str) and text.endswith("\n")
    assert "mirrorworld/Helpdesk-v0" in text
    assert report["world_hash"] in text
    for fig in report["figures"].values():
        assert fig["label"] in text
    assert "QUICK" in text
    assert "\x1b[" not in text  # plain text, no terminal escapes


def test_format_report_marks_missed_targets(report: dict[str, Any]) -> None:
    fake = json.loads(json.dumps(report))
    fig = fake["figures"]["reset_p50_us"]
    fig["mirrorworld"], fig["meets_target"] = 1e6, False
    assert "NO" in format_report(fake)


def test_percentile() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50
    assert percentile(values, 99) == 99
    assert percentile(values, 100) == 100
    assert percentile([7.0], 99) == 7.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    with pytest.raises(ValueError):
        percentile([], 50)


def test_unknown_world_is_an_error() -> None:
    from mirrorworld.errors import RegistryError

    with pytest.raises(RegistryError):
        run_bench("no-such-world", quick=True, progress=False)


# -- the baseline holds the mirror's data -----------------------------------------


def test_baseline_export_equals_image(world: World, baseline: JsonBaseline) -> None:
    image = world.image
    data = baseline.load()
    assert set(data) == set(image.tables)
    assert not any(t.startswith("mw_") for t in data)
    for table in image.tables:
        (count,) = image.query(f"SELECT COUNT(*) FROM {table}")[0]
        assert len(data[table]) == count, table
    row = image.query("SELECT * FROM customers WHERE id=7")[0]
    assert data["customers"]["7"] == dict(zip(image.columns["customers"], row, strict=True))
    assert baseline.load() is not data and baseline.load() == data  # each load is a private copy


@pytest.mark.parametrize("family", ["refund_damaged", "triage", "update_email", "kb_answer"])
def test_baseline_reset_and_gold_states_equal_mirror(world: World, baseline: JsonBaseline, family: str) -> None:
    image = world.image
    task = world.task(family, 1)
    data = baseline.reset(task)
    with world.session(task) as s:
        initial = dump_tables(s.db, image.tables, image.columns)
        assert {t: len(rows) for t, rows in data.items()} == {t: len(rows) for t, rows in initial.items()}
        ticket = str(task.scope[0][1])  # every helpdesk task's setup writes its contact ticket
        assert data["tickets"][ticket] == initial["tickets"][ticket]
        assert data == initial
        for call in task.gold:
            assert s.call(call.tool, call.args).ok
        writes = writes_from_changes(s.changes())
        final = dump_tables(s.db, image.tables, image.columns)
    for j, call in enumerate(task.gold):
        baseline.step(data, call.tool, json.dumps(call.args), writes if j == 0 else ())
    assert data == final
    assert baseline.grade(data, task, writes)


def test_baseline_grading_tells_states_apart(world: World, baseline: JsonBaseline) -> None:
    task = world.task("cancel_order", 1)
    with world.session(task) as s:
        for call in task.gold:
            s.call(call.tool, call.args)
        writes = writes_from_changes(s.changes())
    assert writes
    untouched = baseline.reset(task)
    assert not baseline.grade(untouched, task, writes)
    done = baseline.reset(task)
    baseline.step(done, "cancel_order", "{}", writes)
    assert baseline.grade(done, task, writes)
    assert baseline.state_hash(done) != baseline.state_hash(untouched)


def test_baseline_get_customer_answers_like_the_mirror(world: World, baseline: JsonBaseline) -> None:
    data = baseline.reset()
    with world.session(None) as s:
        for cid in (1, 42, 500):
            mirror = json.loads(s.call("get_customer", {"customer_id": cid}).content())
            assert json.loads(baseline.step(data, "get_customer", json.dumps({"customer_id": cid}))) == mirror
            assert "security_pin" not in mirror["customer"]
    assert "not_found" in baseline.step(data, "get_customer", '{"customer_id": 999999}')
    assert baseline.step(data, "get_customer", "{not json").startswith("Error:")
