"""AI-assisted review detection: measured rates on the simulated set, and each signal on the pattern it targets."""

from __future__ import annotations

import math
import os
import sqlite3
from pathlib import Path

import pytest

from mirrorworld.review.ai_assist import (
    WEIGHTS,
    DetectorPolicy,
    ReviewerSuspicion,
    detect,
    detection_study,
    population,
)
from mirrorworld.review.quality import quality_report
from mirrorworld.review.queue import SamplingPlan, build_queue, take_next
from mirrorworld.review.simulated import (
    FieldSignal,
    SimClock,
    SimulatedReviewer,
    ensure_signals_table,
    seeded_store,
    simulate,
    write_signals,
)
from mirrorworld.review.store import ReviewInput, ReviewStore
from mirrorworld.review.testing import make_runs

SEEDS = (0, 1)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    # As many episodes as detection_report makes for 50 reviewers grading 16 items each.
    return make_runs(tmp_path_factory.mktemp("runs"), ("oracle", "claim", "random"), episodes=93)


@pytest.fixture()
def scratch(tmp_path: Path) -> Path:
    """Where the measurement's databases go: memory-backed when the machine has it (their syncs cost nothing)."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else tmp_path


def test_detection_rate_and_false_positives_on_the_simulated_set(runs: list[Path], scratch: Path) -> None:
    report = detection_study(SEEDS, 40, 10, runs=runs, directory=scratch)
    assert report.true_positives + report.false_negatives == 10 * len(SEEDS)
    assert report.false_positives + report.true_negatives == 40 * len(SEEDS)
    assert report.tpr >= 0.9, report.summary()
    assert report.fpr <= 0.1, report.summary()
    low, high = report.tpr_interval
    assert low <= report.tpr <= high and 0 <= report.fpr_interval[0] <= report.fpr <= report.fpr_interval[1]
    assert report.threshold == DetectorPolicy().threshold
    # The honest set holds people a naive detector would catch: pasters, reusers.
    honest = {n: s for n, a, s in report.reviewers if not a}
    assert any("pasted_reason" in s.fired for s in honest.values())
    assert any("repeated_reason" in s.fired for s in honest.values())
    data = report.to_dict()
    assert data["tp"] == report.true_positives and len(data["reviewers"]) == 50 * len(SEEDS)


def test_the_population_mixes_kinds_and_is_seeded() -> None:
    people = population(3)
    assert people == population(3) and people != population(4)
    honest = [p for p in people if not p.assisted]
    assert len(honest) == 40 and len(people) == 50
    assert min(p.median_seconds for p in honest) < 20 < 150 < max(p.median_seconds for p in honest)
    assert min(p.accuracy for p in honest) < 0.75 and max(p.accuracy for p in honest) > 0.93
    assert any(p.paste_rate >= 0.3 for p in honest) and any(p.reuse_rate >= 0.4 for p in honest)
    # Speed alone separates nobody: the fastest experts read faster than the model round trip.
    assert min(p.median_seconds for p in honest) < min(p.assisted_seconds for p in people if p.assisted)


# -- each signal on its pattern ------------------------------------------------------


@pytest.fixture()
def store(tmp_path: Path, runs: list[Path]) -> ReviewStore:
    s = seeded_store(tmp_path / "review.sqlite", seed=5, clock=SimClock())
    s.add_run(runs[0], audit=False, gold=True)
    s.add_run(runs[1], audit=False)
    s.add_run(runs[2], audit=False)
    build_queue(s, SamplingPlan(overlap=3, overlap_share=1.0, gold_rate=0.1, seed=5))
    return s


def _by_name(store: ReviewStore, policy: DetectorPolicy | None = None) -> dict[str, ReviewerSuspicion]:
    return {s.name: s for s in detect(store, policy)}


def test_steady_pace_fires_on_near_constant_time_only(store: ReviewStore) -> None:
    quiet = {"reason_words": (0, 0), "rubric": 0.0}
    steady = SimulatedReviewer("steady", median_seconds=40, spread=0.03, **quiet)  # type: ignore[arg-type]
    varied = SimulatedReviewer("varied", median_seconds=40, spread=0.5, **quiet)  # type: ignore[arg-type]
    simulate(store, [steady, varied], items=12)
    found = _by_name(store)
    assert found["steady"].fired == ["steady_pace"] and found["steady"].score == WEIGHTS["steady_pace"]
    assert found["varied"].fired == [] and not found["varied"].flagged


def test_template_reasons_fire_across_reviewers_on_different_items(store: ReviewStore) -> None:
    people = [SimulatedReviewer(f"ai-{i}", assisted=True, seed=i) for i in range(2)]
    people += [SimulatedReviewer(f"human-{i}", reason_words=(15, 30), seed=i) for i in range(3)]
    simulate(store, people, items=10)
    found = _by_name(store)
    for i in range(2):
        assert {"template_reason", "pasted_reason", "reason_not_typed"} <= set(found[f"ai-{i}"].fired)
        assert found[f"ai-{i}"].flagged
    for i in range(3):
        assert found[f"human-{i}"].fired == [] and found[f"human-{i}"].score == 0


def _grade(
    store: ReviewStore, reviewer_id: int, reason: str, *, seconds: float, keys: int, fields: list[FieldSignal]
) -> None:
    """One grade as a browser would send it, with its per-field signals."""
    clock = store.clock
    assert isinstance(clock, SimClock)
    reviewer = store.reviewer(reviewer_id)
    assert reviewer is not None
    item_id = take_next(store, reviewer)
    assert item_id is not None
    clock.advance(seconds)

    def after(conn: sqlite3.Connection, review: ReviewInput) -> None:
        rid = conn.execute(
            "SELECT id FROM reviews WHERE item_id=? AND reviewer_id=?", (review.item_id, review.reviewer_id)
        ).fetchone()[0]
        write_signals(conn, rid, fields)

    store.submit_review(ReviewInput(item_id, reviewer_id, True, reason, reason_keys=keys), after=after)
    clock.advance(5)


def test_the_reason_box_timing_catches_a_paste_the_review_totals_miss(store: ReviewStore) -> None:
    ensure_signals_table(store)
    waiter = store.add_reviewer("waiter", "waiter-password")
    typist = store.add_reviewer("typist", "typist-password")
    for k in range(6):
        reason = f"The customer asked for item {k} and the agent handled it without touching anything else at all."
        # Both report a typed reason (keys ≥ characters, no paste mark) and take a minute and a half.
        _grade(store, waiter, reason, seconds=90, keys=len(reason) + 3, fields=[FieldSignal("reason", 1.5, 3, False)])
        typed = [FieldSignal("reason", 30, 110, False)]
        _grade(store, typist, reason + f" ({k})", seconds=95, keys=len(reason) + 9, fields=typed)
    found = _by_name(store)
    assert "pasted_reason" not in found["waiter"].fired  # the per-review figures look typed
    assert "reason_not_typed" in found["waiter"].fired and "reason_not_typed" not in found["typist"].fired
    assert "shared_reason" not in found["waiter"].fired


def test_rubric_rows_clicked_through_fire_only_when_fast_and_uniform(store: ReviewStore) -> None:
    ensure_signals_table(store)
    clicker = store.add_reviewer("clicker", "clicker-password")
    reader = store.add_reviewer("reader", "reader-password")
    for k in range(4):
        fast = [FieldSignal(f"rubric:r{j}", 0.5 + 0.02 * ((j + k) % 5), 1, False) for j in range(4)]
        slow = [FieldSignal(f"rubric:r{j}", 0.4 * math.exp(j % 3), 1, False) for j in range(4)]
        _grade(store, clicker, "", seconds=60, keys=0, fields=fast)
        _grade(store, reader, "", seconds=60, keys=0, fields=slow)
    found = _by_name(store)
    assert found["clicker"].fired == ["rubric_clicked_through"] and found["reader"].fired == []


def test_the_quality_reports_patterns_are_reused(store: ReviewStore) -> None:
    reuser = SimulatedReviewer("reuser", reuse_rate=1.0, reason_words=(3, 5))
    fast = SimulatedReviewer("fast", median_seconds=3, spread=0.5, reason_words=(0, 0), rubric=0.0)
    simulate(store, [reuser, fast], items=10)
    found = _by_name(store)
    flags = {q.name: q.flags for q in quality_report(store)}
    assert ("repeated_reason" in found["reuser"].fired) and found["reuser"].signals[:1] == flags["reuser"][:1]
    assert "too_fast" in found["fast"].fired
    assert found["fast"].score == WEIGHTS["too_fast"] and not found["fast"].flagged  # one habit is not a verdict


def test_weights_and_threshold_are_the_policys(store: ReviewStore) -> None:
    simulate(store, [SimulatedReviewer("ai", assisted=True)], items=10)
    default = _by_name(store)["ai"]
    assert default.flagged and default.score >= DetectorPolicy().threshold
    lenient = DetectorPolicy(threshold=100.0)
    assert not _by_name(store, lenient)["ai"].flagged
    only_paste = DetectorPolicy(weights={"pasted_reason": 3.0})
    assert _by_name(store, only_paste)["ai"].fired == ["pasted_reason"]
    assert _by_name(store, only_paste)["ai"].score == 3.0


def test_a_database_without_field_signals_is_scored_without_them(tmp_path: Path, runs: list[Path]) -> None:
    store = ReviewStore(tmp_path / "plain.sqlite", clock=SimClock())
    store.add_run(runs[1], audit=False)
    build_queue(store, SamplingPlan())
    rid = store.add_reviewer("pat", "pat-password")
    reason = "A long reason that was pasted from somewhere else entirely, word for word."
    for _ in range(5):
        _plain(store, rid, reason)
    found = _by_name(store)["pat"]
    assert "pasted_reason" in found.fired and "reason_not_typed" not in found.fired


def _plain(store: ReviewStore, rid: int, reason: str) -> None:
    clock = store.clock
    assert isinstance(clock, SimClock)
    reviewer = store.reviewer(rid)
    assert reviewer is not None
    item = take_next(store, reviewer)
    assert item is not None
    clock.advance(30)
    store.submit_review(ReviewInput(item, rid, False, reason, reason_keys=2, reason_pasted=True))
