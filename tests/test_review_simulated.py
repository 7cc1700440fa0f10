"""Simulated reviewers: nominal rates, consistent rubrics, the app's pipeline (auto-pause), determinism."""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from mirrorworld.errors import MirrorworldError
from mirrorworld.review.queue import SamplingPlan, build_queue
from mirrorworld.review.simulated import (
    SimClock,
    SimulatedGrade,
    SimulatedReviewer,
    read_signals,
    seeded_store,
    simulate,
)
from mirrorworld.review.store import CheckRef, Item, ReviewStore
from mirrorworld.review.testing import make_runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return make_runs(tmp_path_factory.mktemp("runs"), ("oracle", "claim", "random"), episodes=12)


def _store(path: Path, runs: list[Path], *, seed: int = 0, gold_rate: float = 0.1) -> ReviewStore:
    store = seeded_store(path, seed=seed)
    store.add_run(runs[0], audit=False, gold=True)
    store.add_run(runs[1], audit=False)
    store.add_run(runs[2], audit=False)
    build_queue(store, SamplingPlan(overlap=2, overlap_share=0.5, gold_rate=gold_rate, seed=seed))
    return store


def _item(truth: bool, n_checks: int = 3) -> Item:
    checks = tuple(CheckRef(f"check:c{i}", f"c{i}", f"fam: c{i}", truth) for i in range(n_checks))
    checks += (CheckRef("gate:state", "state", "gate: state", truth),)
    return Item(
        1, 1, 0, "t", "fam", "agent", "v", truth, float(truth), float(truth), None, checks, (), None, None, 0, 1
    )


# -- the model -----------------------------------------------------------------------


@pytest.mark.parametrize(("accuracy", "bias"), [(0.9, 0.0), (0.8, 0.5), (0.7, -0.6), (0.6, 1.0)])
def test_accuracy_and_bias_give_their_nominal_error_rates(accuracy: float, bias: float) -> None:
    reviewer = SimulatedReviewer("r", accuracy=accuracy, pass_bias=bias, reason_words=(0, 0))
    grader = reviewer.grader()
    n = 3000
    false_pass = sum(grader.grade(_item(False), False).passed for _ in range(n)) / n
    false_fail = sum(not grader.grade(_item(True), True).passed for _ in range(n)) / n
    want_pass, want_fail = reviewer.error_rates()
    assert want_pass == pytest.approx((1 - accuracy) * (1 + bias))
    assert abs(false_pass - want_pass) < 0.03 and abs(false_fail - want_fail) < 0.03
    balanced_accuracy = 1 - (false_pass + false_fail) / 2
    assert abs(balanced_accuracy - accuracy) < 0.025


def test_seconds_are_lognormal_with_the_given_median_and_spread() -> None:
    grader = SimulatedReviewer("r", median_seconds=45, spread=0.6, reason_words=(0, 0), rubric=0).grader()
    seconds = [grader.grade(_item(True), True).seconds for _ in range(3000)]
    assert statistics.median(seconds) == pytest.approx(45, rel=0.06)
    assert statistics.stdev(math.log(s) for s in seconds) == pytest.approx(0.6, rel=0.08)


def test_rubric_rows_agree_with_the_grade() -> None:
    grader = SimulatedReviewer("r", accuracy=0.6).grader()
    for truth in (True, False) * 300:
        g = grader.grade(_item(truth), truth)
        assert g.rubric, "rubric=1.0 answers every item"
        assert all(g.rubric.values()) == g.passed  # a pass passes every row, a fail fails at least one
        assert g.seconds >= sum(f.seconds for f in g.fields)
    skipping = SimulatedReviewer("s", rubric=0.0).grader()
    assert not any(skipping.grade(_item(True), True).rubric for _ in range(50))


def test_assisted_reviewers_paste_shared_templates_at_a_steady_pace() -> None:
    a = SimulatedReviewer("ai-1", assisted=True, assisted_seconds=30).grader()
    b = SimulatedReviewer("ai-2", assisted=True, assisted_seconds=30).grader()
    honest = SimulatedReviewer("h", reason_words=(20, 30)).grader()
    ga = [a.grade(_item(t), t) for t in (True, False) * 40]
    gb = [b.grade(_item(t), t) for t in (True, False) * 40]
    gh = [honest.grade(_item(t), t) for t in (True, False) * 40]
    assert all(g.assisted for g in ga) and not any(g.assisted for g in gh)
    assert sum(g.reason_pasted for g in ga) / len(ga) > 0.75 and sum(g.reason_pasted for g in gh) < 8
    assert all(g.reason_keys < 0.1 * len(g.reason) for g in ga)
    assert all(g.reason_keys >= len(g.reason) for g in gh if not g.reason_pasted)
    spread = statistics.stdev(math.log(g.seconds) for g in ga)
    assert spread < 0.15 < statistics.stdev(math.log(g.seconds) for g in gh)

    def words(gs: list[SimulatedGrade]) -> set[str]:
        return {w for g in gs for w in g.reason.lower().split()}

    shared = len(words(ga) & words(gb)) / len(words(ga) | words(gb))
    assert shared > 0.6  # one template bank
    assisted_share = SimulatedReviewer("ai-3", assisted=True, assist_share=0.5).grader()
    share = sum(assisted_share.grade(_item(True), True).assisted for _ in range(1000)) / 1000
    assert abs(share - 0.5) < 0.05


@pytest.mark.parametrize(
    "kw",
    [{"accuracy": 1.5}, {"accuracy": 0.2, "pass_bias": 0.5}, {"pass_bias": -2}, {"rubric": 2}, {"spread": -1},
     {"median_seconds": 0}, {"reason_words": (5, 2)}],
)  # fmt: skip
def test_impossible_parameters_are_refused(kw: dict[str, object]) -> None:
    with pytest.raises(MirrorworldError):
        SimulatedReviewer("r", **kw)  # type: ignore[arg-type]


# -- through the review pipeline -------------------------------------------------------


def test_grades_go_through_the_store_as_the_app_stores_them(tmp_path: Path, runs: list[Path]) -> None:
    clock = SimClock(1_800_000_000.0)
    store = _store(tmp_path / "review.sqlite", runs)
    store.clock = clock
    reviewers = [SimulatedReviewer(f"r{i}", accuracy=0.9, median_seconds=40 + 20 * i) for i in range(3)]
    result = simulate(store, reviewers, items=10, clock=clock)
    assert len(result.grades) == 30 and not result.paused
    stored = {r.id: r for r in store.reviews()}
    signals = read_signals(store)
    for g in result.grades:
        row = stored[g.review_id]
        assert (row.reviewer, row.item_id, row.passed, row.reason) == (
            g.reviewer,
            g.item_id,
            g.grade.passed,
            g.grade.reason,
        )
        assert row.rubric == g.grade.rubric and row.reason_keys == g.grade.reason_keys
        assert row.seconds == pytest.approx(g.grade.seconds, abs=1e-6)  # the server's clock: take to submit
        assert {s.field for s in signals[g.review_id]} == {"reason"} | {f"rubric:{k}" for k in g.grade.rubric}
    assert store.check_consistency() == []
    assert result.ended_at > result.started_at + 10 * 40
    # Three reviewers never take the same item twice; overlapped items reach two of them.
    pairs = {(g.reviewer, g.item_id) for g in result.grades}
    assert len(pairs) == 30


def test_the_store_clock_is_restored_and_a_seeded_store_is_always_new(tmp_path: Path, runs: list[Path]) -> None:
    store = _store(tmp_path / "review.sqlite", runs)
    own = store.clock
    simulate(store, [SimulatedReviewer("r")], items=2, clock=SimClock(5.0))
    assert store.clock is own
    with pytest.raises(MirrorworldError, match="exists"):
        seeded_store(tmp_path / "review.sqlite")


def test_auto_pause_stops_a_careless_reviewer_on_gold_items(tmp_path: Path, runs: list[Path]) -> None:
    store = _store(tmp_path / "review.sqlite", runs, gold_rate=0.5)
    careless = SimulatedReviewer("careless", accuracy=0.25, seed=3)
    careful = SimulatedReviewer("careful", accuracy=0.98, seed=3)
    result = simulate(store, [careless, careful], items=24)
    assert "gold accuracy" in result.paused["careless"] and "careful" not in result.paused
    accounts = {r.name: r for r in store.reviewers()}
    assert accounts["careless"].paused and not accounts["careful"].paused
    theirs = result.of("careless")
    assert sum(g.gold for g in theirs) >= 5 and len(theirs) < 24
    assert len(result.of("careful")) == 24


def test_a_truth_function_plants_a_blind_spot(tmp_path: Path, runs: list[Path]) -> None:
    store = _store(tmp_path / "review.sqlite", runs)
    blind = "refund_damaged"
    result = simulate(
        store,
        [SimulatedReviewer(f"r{i}", accuracy=1.0) for i in range(2)],
        truth=lambda item: False if item.family == blind else item.verifier_passed,
    )
    items = {i.id: i for i in store.items()}
    in_spot = [g for g in result.grades if items[g.item_id].family == blind]
    assert in_spot and not any(g.grade.passed for g in in_spot)
    assert any(items[g.item_id].verifier_passed for g in in_spot)  # the verifier passed some: humans disagree
    others = [g for g in result.grades if items[g.item_id].family != blind]
    assert all(g.grade.passed == items[g.item_id].verifier_passed for g in others)


def simulation_digest(db: Path, seed: int, runs: list[Path]) -> str:
    """A small mixed simulation on a new seeded database; its digest (run here and in a subprocess)."""
    store = _store(db, runs, seed=seed)
    reviewers = [
        SimulatedReviewer("a", seed=seed, accuracy=0.8, pass_bias=0.3, reuse_rate=0.3),
        SimulatedReviewer("b", seed=seed, accuracy=0.95, median_seconds=20, paste_rate=0.2),
        SimulatedReviewer("c", seed=seed, assisted=True, assist_share=0.7),
    ]
    return simulate(store, reviewers, items=12).digest()


_SCRIPT = """
import runpy, sys
from pathlib import Path
ns = runpy.run_path(sys.argv[1])
print(ns["simulation_digest"](Path(sys.argv[2]), int(sys.argv[3]), [Path(p) for p in sys.argv[4:]]))
"""


def test_a_simulation_is_the_same_in_any_process_and_hash_seed(tmp_path: Path, runs: list[Path]) -> None:
    here = simulation_digest(tmp_path / "here.sqlite", 7, runs)
    assert len(here) == 64
    assert simulation_digest(tmp_path / "again.sqlite", 7, runs) == here
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT, __file__, str(tmp_path / "there.sqlite"), "7", *map(str, runs)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    assert out.stdout.strip() == here
    assert simulation_digest(tmp_path / "other.sqlite", 8, runs) != here  # another seed, another simulation
