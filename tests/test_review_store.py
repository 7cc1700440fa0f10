"""The review database, the queue and reviewer quality: sampling, serving, atomic and concurrent writes."""

from __future__ import annotations

import sqlite3
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from mirrorworld.errors import MirrorworldError
from mirrorworld.review.quality import QualityPolicy, auto_pause, quality_report
from mirrorworld.review.queue import Candidate, SamplingPlan, _allocate, build_queue, plan_queue, take_next
from mirrorworld.review.store import ASSIGNMENT_SECONDS, Reviewer, ReviewInput, ReviewStore
from mirrorworld.review.testing import make_runs


class Clock:
    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return make_runs(tmp_path_factory.mktemp("runs"), ("oracle", "claim", "random"), episodes=9)


@pytest.fixture()
def clock() -> Clock:
    return Clock()


@pytest.fixture()
def store(tmp_path: Path, runs: list[Path], clock: Clock) -> ReviewStore:
    s = ReviewStore(tmp_path / "review.sqlite", clock=clock)
    s.add_run(runs[0], audit=False)
    s.add_run(runs[1], audit=False)
    return s


def _reviewer(store: ReviewStore, name: str, role: str = "reviewer") -> Reviewer:
    rid = store.add_reviewer(name, f"{name}-password", role)  # type: ignore[arg-type]
    r = store.reviewer(rid)
    assert r is not None
    return r


def _grade(store: ReviewStore, r: Reviewer, passed: bool | None = None, **kw: object) -> int | None:
    item_id = take_next(store, r)
    if item_id is None:
        return None
    item = store.item(item_id)
    assert item is not None
    store.submit_review(
        ReviewInput(item_id, r.id, item.verifier_passed if passed is None else passed, **kw),  # type: ignore[arg-type]
        after=auto_pause(store, QualityPolicy()),
    )
    return item_id


# -- import ----------------------------------------------------------------------


def test_import_is_idempotent_and_keeps_the_whole_record(tmp_path: Path, runs: list[Path]) -> None:
    store = ReviewStore(tmp_path / "review.sqlite")
    assert store.add_run(runs[0]) == (1, 9)
    assert store.add_run(runs[1]) == (2, 9)
    items = store.items()
    assert len(items) == 18
    assert store.add_run(runs[0])[1] == 0  # again: nothing new
    oracle = [i for i in items if i.agent == "oracle"]
    assert all(i.verifier_passed for i in oracle) and not any(i.verifier_passed for i in items if i.agent == "claim")
    item = oracle[0]
    keys = [c.key for c in item.checks]
    assert keys[-5:] == ["gate:state", "gate:collateral", "gate:policy", "gate:communication", "gate:reply"]
    assert any(k.startswith("check:") for k in keys)
    assert all(":" in c.group for c in item.checks)
    record = store.record(item.id)
    assert record["task_id"] == item.task_id and record["messages"] and record["verdict"]["passed"]
    # audit-run flags the claim-success agent's empty success claims; those are over-sampled.
    assert any("claim_without_state" in i.audit_flags for i in items if i.agent == "claim")
    with pytest.raises(MirrorworldError, match="no item"):
        store.record(10_000)


def test_gold_runs_carry_known_answers(store: ReviewStore, runs: list[Path]) -> None:
    _, new = store.add_run(runs[2], gold=True, audit=False)
    assert new == 9
    gold = [i for i in store.items() if i.run_gold]
    assert len(gold) == 9 and all(i.gold_answer == i.verifier_passed for i in gold)
    build_queue(store, SamplingPlan())
    assert all(i.position is None for i in store.items() if i.gold_answer is not None)


def test_a_database_of_another_kind_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("""INSERT INTO meta VALUES ('format', '"something-else/1"')""")
    conn.commit()
    conn.close()
    with pytest.raises(MirrorworldError, match="is not a mirrorworld-review/1 database"):
        ReviewStore(other)
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(MirrorworldError, match="not a review database"):
        ReviewStore(junk)
    with pytest.raises(MirrorworldError, match="no review database"):
        ReviewStore(tmp_path / "missing.sqlite", create=False)


# -- sampling --------------------------------------------------------------------


def _candidates() -> list[Candidate]:
    out = []
    n = 0
    for fam, size in (("a", 30), ("b", 8), ("c", 2)):
        for verdict in ("pass", "fail"):
            for k in range(size):
                n += 1
                out.append(Candidate(n, f"{fam}/{verdict}", flagged=k % 5 == 0))
    return out


def test_allocation_fills_small_strata_and_redistributes() -> None:
    alloc = _allocate({"a": 30, "b": 8, "c": 2}, {"a": 1.0, "b": 1.0, "c": 1.0}, 24)
    assert alloc == {"a": 14, "b": 8, "c": 2}
    assert _allocate({"a": 3, "b": 3}, {"a": 1.0, "b": 1.0}, 100) == {"a": 3, "b": 3}
    heavy = _allocate({"a": 50, "b": 50}, {"a": 1.0, "b": 3.0}, 40)
    assert heavy == {"a": 10, "b": 30}


def test_stratified_sample_covers_every_stratum_first() -> None:
    cands = _candidates()
    entries = plan_queue(cands, SamplingPlan(size=20, overlap_share=0.5, seed=4))
    assert len(entries) == 20 and len({e.item_id for e in entries}) == 20
    strata = {c.stratum for c in cands}
    assert {e.stratum for e in entries[: len(strata)]} == strata  # round-robin: every stratum early
    assert [e.position for e in entries] == list(range(20))
    assert sum(e.overlap == 2 for e in entries) == 10
    assert entries == plan_queue(cands, SamplingPlan(size=20, overlap_share=0.5, seed=4))
    assert entries != plan_queue(cands, SamplingPlan(size=20, overlap_share=0.5, seed=5))


def test_flagged_episodes_and_disagreeing_strata_are_over_sampled() -> None:
    cands = [c for c in _candidates() if c.stratum.startswith("a/")]
    flagged = {c.item_id for c in cands if c.flagged}
    share = {True: 0.0, False: 0.0}
    for boost in (True, False):
        hits = 0
        for seed in range(40):
            plan = SamplingPlan(size=10, seed=seed, boost_flagged=5.0 if boost else 0.0)
            hits += sum(e.item_id in flagged for e in plan_queue(cands, plan))
        share[boost] = hits / 400
    assert share[True] > 1.5 * share[False]
    plan = SamplingPlan(size=20, boost_disagreement=3.0)
    picked = Counter(e.stratum for e in plan_queue(cands, plan, disagreement={"a/fail": 1.0}))
    assert picked["a/fail"] == 16 and picked["a/pass"] == 4


def test_bad_plans_are_refused() -> None:
    for plan in (SamplingPlan(overlap=0), SamplingPlan(gold_rate=2), SamplingPlan(size=-1)):
        with pytest.raises(MirrorworldError):
            plan.validate()


# -- serving ---------------------------------------------------------------------


def test_overlap_is_respected_and_nobody_grades_an_item_twice(store: ReviewStore) -> None:
    build_queue(store, SamplingPlan(overlap=2, overlap_share=0.5, gold_rate=0.0))
    people = [_reviewer(store, n) for n in ("ann", "ben", "cat")]
    graded: dict[int, list[int]] = {}
    progress = True
    while progress:
        progress = False
        for r in people:
            item_id = _grade(store, r)
            if item_id is not None:
                graded.setdefault(item_id, []).append(r.id)
                progress = True
    items = {i.id: i for i in store.items()}
    assert set(graded) == {i.id for i in items.values() if i.position is not None}
    for item_id, who in graded.items():
        assert len(who) == len(set(who)) == items[item_id].overlap
    assert store.check_consistency() == []


def test_an_open_item_comes_back_and_an_abandoned_one_is_released(store: ReviewStore, clock: Clock) -> None:
    build_queue(store, SamplingPlan(size=1, overlap_share=0.0, gold_rate=0.0))
    ann, ben = _reviewer(store, "ann"), _reviewer(store, "ben")
    first = take_next(store, ann)
    assert first is not None and take_next(store, ann) == first
    assert take_next(store, ben) is None  # the single slot is taken
    clock.t += ASSIGNMENT_SECONDS + 1
    assert take_next(store, ben) == first  # ann abandoned it
    store.submit_review(ReviewInput(first, ben.id, True))
    store.submit_review(ReviewInput(first, ann.id, False))  # ann comes back late: her grade still counts
    assert len(store.reviews()) == 2


def test_gold_items_are_mixed_in_at_the_gold_rate(store: ReviewStore, runs: list[Path], clock: Clock) -> None:
    store.add_run(runs[2], gold=True, audit=False)
    build_queue(store, SamplingPlan(overlap_share=0.0, gold_rate=0.3, seed=1))
    store.set_meta("secret", "a fixed secret")  # the gold draws depend on it: fix it for a reproducible test
    store = ReviewStore(store.path, clock=clock)
    r = _reviewer(store, "ann")
    served = [_grade(store, r) for _ in range(20)]
    items = {i.id: i for i in store.items()}
    gold = [i for i in served if i is not None and items[i].gold_answer is not None]
    assert len(gold) == 5  # of 20: the 30 % rate, drawn reproducibly from the secret
    assert len(set(served)) == len(served)


def test_a_paused_reviewer_gets_nothing(store: ReviewStore) -> None:
    build_queue(store, SamplingPlan(gold_rate=0.0))
    r = _reviewer(store, "ann")
    store.set_paused(r.id, True, "testing", by=None)
    assert take_next(store, r) is None
    store.set_paused(r.id, False, "", by=None)
    assert take_next(store, r) is not None


# -- writes ----------------------------------------------------------------------


def test_a_review_needs_an_assignment_and_is_stored_once(store: ReviewStore) -> None:
    build_queue(store, SamplingPlan(gold_rate=0.0))
    r = _reviewer(store, "ann")
    with pytest.raises(MirrorworldError, match="not assigned"):
        store.submit_review(ReviewInput(store.items()[0].id, r.id, True))
    item_id = take_next(store, r)
    assert item_id is not None
    item = store.item(item_id)
    assert item is not None
    with pytest.raises(MirrorworldError, match="has no rubric row"):
        store.submit_review(ReviewInput(item_id, r.id, True, rubric={"check:nonsense": True}))
    with pytest.raises(MirrorworldError, match="at most"):
        store.submit_review(ReviewInput(item_id, r.id, True, reason="x" * 6000))
    assert store.reviews() == []
    key = item.checks[0].key
    first = store.submit_review(ReviewInput(item_id, r.id, True, reason="ok", rubric={key: False}))
    again = store.submit_review(ReviewInput(item_id, r.id, False, reason="changed my mind"))
    assert first[1] and not again[1] and first[0] == again[0]
    (stored,) = store.reviews()
    assert stored.passed and stored.rubric == {key: False} and stored.reason == "ok"


def test_a_failure_mid_write_leaves_nothing(store: ReviewStore) -> None:
    build_queue(store, SamplingPlan(gold_rate=0.0))
    r = _reviewer(store, "ann")
    item_id = take_next(store, r)
    assert item_id is not None
    item = store.item(item_id)
    assert item is not None

    def crash(conn: sqlite3.Connection, review: ReviewInput) -> None:
        assert conn.execute("SELECT COUNT(*) FROM rubric").fetchone()[0] == 2  # written, not committed
        raise RuntimeError("the process dies here")

    rubric = {item.checks[0].key: True, item.checks[-1].key: False}
    with pytest.raises(RuntimeError):
        store.submit_review(ReviewInput(item_id, r.id, True, rubric=rubric), after=crash)
    assert store.reviews() == []
    with store.read() as conn:
        assert conn.execute("SELECT COUNT(*) FROM rubric").fetchone()[0] == 0
    store.submit_review(ReviewInput(item_id, r.id, True, rubric=rubric))
    assert len(store.reviews()) == 1 and store.check_consistency() == []


def test_concurrent_reviewers_lose_nothing(store: ReviewStore, runs: list[Path]) -> None:
    store.add_run(runs[2], audit=False)
    build_queue(store, SamplingPlan(overlap=3, overlap_share=1.0, gold_rate=0.0))
    people = [_reviewer(store, f"r{k}") for k in range(6)]
    errors: list[BaseException] = []
    done: Counter[int] = Counter()
    barrier = threading.Barrier(len(people))

    def work(r: Reviewer) -> None:
        try:
            barrier.wait()
            while True:
                item_id = take_next(store, r)
                if item_id is None:
                    return
                store.submit_review(ReviewInput(item_id, r.id, item_id % 2 == 0, reason=f"{r.name} on {item_id}"))
                done[r.id] += 1
        except BaseException as err:  # surfaced below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(r,)) for r in people]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    reviews = store.reviews()
    assert len(reviews) == sum(done.values()) == 27 * 3
    per_item = Counter(r.item_id for r in reviews)
    assert set(per_item.values()) == {3}
    assert len({(r.item_id, r.reviewer_id) for r in reviews}) == len(reviews)
    assert store.check_consistency() == []


# -- sign-in ---------------------------------------------------------------------


def test_passwords_and_sessions(store: ReviewStore, clock: Clock) -> None:
    r = _reviewer(store, "ann")
    assert store.authenticate("ann", "ann-password") == r
    assert store.authenticate("ann", "wrong-password") is None
    assert store.authenticate("nobody", "ann-password") is None
    token, csrf = store.create_session(r.id)
    found = store.session(token)
    assert found is not None and found[0].id == r.id and found[1] == csrf
    clock.t += 13 * 3600
    assert store.session(token) is None
    token, _ = store.create_session(r.id)
    store.end_session(token)
    assert store.session(token) is None
    for name, pw in (("", "longenough"), ("has space", "longenough"), ("ok", "short")):
        with pytest.raises(MirrorworldError):
            store.add_reviewer(name, pw)
    with pytest.raises(MirrorworldError, match="already"):
        store.add_reviewer("ann", "another-password")
    with pytest.raises(MirrorworldError, match="role"):
        store.add_reviewer("zed", "zed-password", "boss")  # type: ignore[arg-type]


# -- quality ---------------------------------------------------------------------


@pytest.fixture()
def gold_store(store: ReviewStore, runs: list[Path]) -> Iterator[ReviewStore]:
    store.add_run(runs[2], gold=True, audit=False)
    build_queue(store, SamplingPlan(overlap=2, overlap_share=1.0, gold_rate=1.0))
    yield store


def test_wrong_answers_on_gold_items_pause_a_reviewer(gold_store: ReviewStore, clock: Clock) -> None:
    r = _reviewer(gold_store, "ann")
    items = {i.id: i for i in gold_store.items()}
    for _ in range(5):
        item_id = take_next(gold_store, r)
        assert item_id is not None and items[item_id].gold_answer is not None
        clock.t += 60
        gold_store.submit_review(
            ReviewInput(item_id, r.id, not items[item_id].gold_answer), after=auto_pause(gold_store, QualityPolicy())
        )
    paused = gold_store.reviewer(r.id)
    assert paused is not None and paused.paused and "gold accuracy 0/5" in (paused.paused_reason or "")
    assert take_next(gold_store, paused) is None
    (q,) = [q for q in quality_report(gold_store) if q.reviewer_id == r.id]
    assert q.gold == 5 and q.gold_accuracy == 0.0
    clock.t += 60
    gold_store.set_paused(r.id, False, "", by=None)
    resumed = gold_store.reviewer(r.id)
    assert resumed is not None
    assert _grade(gold_store, resumed) is not None  # grades before the resume no longer count
    resumed = gold_store.reviewer(r.id)
    assert resumed is not None and not resumed.paused


def test_disagreeing_with_peers_pauses_a_reviewer(store: ReviewStore, clock: Clock) -> None:
    build_queue(store, SamplingPlan(overlap=2, overlap_share=1.0, gold_rate=0.0))
    good, bad = _reviewer(store, "good"), _reviewer(store, "bad")
    for _ in range(12):
        clock.t += 60
        item_id = _grade(store, good)
        assert item_id is not None
        assert take_next(store, bad) == item_id
        item = store.item(item_id)
        assert item is not None
        store.submit_review(
            ReviewInput(item_id, bad.id, not item.verifier_passed), after=auto_pause(store, QualityPolicy())
        )
        if (b := store.reviewer(bad.id)) is not None and b.paused:
            break
    b = store.reviewer(bad.id)
    assert b is not None and b.paused and "agreement with peers" in (b.paused_reason or "")
    g = store.reviewer(good.id)
    assert g is not None and not g.paused


def test_suspicious_patterns_are_flagged(store: ReviewStore, clock: Clock) -> None:
    build_queue(store, SamplingPlan(overlap=2, overlap_share=1.0, gold_rate=0.0))
    fast, copier = _reviewer(store, "fast"), _reviewer(store, "copier")
    essay = "The agent verified the order, confirmed eligibility under the policy and issued the refund correctly."
    for k in range(8):
        item_id = take_next(store, fast)
        assert item_id is not None
        clock.t += 2  # two seconds an item, always "pass", always the same pasted essay
        store.submit_review(ReviewInput(item_id, fast.id, True, reason=essay, reason_keys=3, reason_pasted=True))
        assert take_next(store, copier) == item_id
        clock.t += 400
        store.submit_review(
            ReviewInput(item_id, copier.id, k % 2 == 0, reason=essay if k < 2 else f"typed note {k}", reason_keys=200)
        )
    flags = {q.name: {rule for rule, _ in q.flags} for q in quality_report(store)}
    assert {"too_fast", "same_answer", "repeated_reason", "shared_reason", "pasted_reason"} <= flags["fast"]
    assert flags["copier"] == {"shared_reason"}
