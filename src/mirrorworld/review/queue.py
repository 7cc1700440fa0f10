"""The review queue: which episodes humans grade, how many times, and in what order.

**Stratified sampling.** Episodes are grouped into strata by task family and
verifier verdict (``refund_damaged/pass``, ``refund_damaged/fail`` …), so a
rare verdict in a rare family is reviewed at all. The queue's ``size`` is
split across strata by water-filling: each stratum gets an equal share (times
its weight), a stratum with fewer episodes than its share gives the rest back
to the others. A stratum's weight is ``1 + boost_disagreement × d`` where ``d``
is the share of its already-reviewed episodes on which humans disagreed with
the verifier, so strata where the verifier is known to be wrong are
over-sampled. Within a stratum, episodes are drawn without replacement with
probability proportional to ``1 + boost_flagged`` for episodes that
``audit-run`` flagged (or that errored) and ``1`` otherwise
(Efraimidis–Spirakis keys ``u^(1/w)``).

**Order.** Queue positions interleave the strata round-robin (first draw of
every stratum, then the second …), so a campaign stopped early still covers
every stratum.

**Overlap.** A random ``overlap_share`` of the queued items must be graded by
``overlap`` different reviewers (the rest by one); these items measure
human-vs-human agreement.

**Gold honeypots.** Items with a known answer (from runs imported as gold, or
adjudicated items an admin promotes) never enter the stratified queue. Each
time a reviewer asks for work, a draw seeded by the database secret, the
reviewer and how many items they have graded decides (with probability
``gold_rate``) whether they get a gold item they have not seen — unpredictable
to the reviewer, reproducible for an audit. Gold items look like any other
item until graded.

Sampling is deterministic given ``seed`` and the database contents.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import sqlite3
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from mirrorworld.errors import MirrorworldError
from mirrorworld.review.store import ASSIGNMENT_SECONDS, Item, Reviewer, ReviewStore

__all__ = ["Candidate", "QueueEntry", "SamplingPlan", "build_queue", "plan_queue", "take_next"]


@dataclass(frozen=True)
class SamplingPlan:
    """How to fill and serve the queue. See the module docstring."""

    size: int | None = None
    """Items in the queue in all (None: every imported episode)."""
    overlap: int = 2
    """Reviewers per overlapped item."""
    overlap_share: float = 0.25
    """Share of queued items that get ``overlap`` reviewers."""
    boost_flagged: float = 3.0
    boost_disagreement: float = 3.0
    gold_rate: float = 0.1
    """Chance that a request for work is answered with a gold item."""
    seed: int = 0

    def validate(self) -> None:
        if self.size is not None and self.size < 0:
            raise MirrorworldError("the sample size must not be negative")
        if self.overlap < 1:
            raise MirrorworldError("overlap must be at least 1")
        if not 0 <= self.overlap_share <= 1 or not 0 <= self.gold_rate <= 1:
            raise MirrorworldError("overlap share and gold rate are between 0 and 1")
        if self.boost_flagged < 0 or self.boost_disagreement < 0:
            raise MirrorworldError("boosts must not be negative")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SamplingPlan:
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class Candidate:
    """An episode that may be queued."""

    item_id: int
    stratum: str
    flagged: bool


@dataclass(frozen=True)
class QueueEntry:
    item_id: int
    position: int
    stratum: str
    overlap: int


def _allocate(sizes: dict[str, int], weights: dict[str, float], total: int) -> dict[str, int]:
    """Water-filling: shares proportional to weight, capped by stratum size, remainder redistributed."""
    alloc = dict.fromkeys(sizes, 0)
    open_ = {s for s in sizes if sizes[s] > 0}
    left = min(total, sum(sizes.values()))
    while left > 0 and open_:
        wsum = sum(weights[s] for s in open_)
        # Largest-remainder rounding of this round's shares.
        raw = {s: left * weights[s] / wsum for s in open_}
        give = {s: min(int(raw[s]), sizes[s] - alloc[s]) for s in open_}
        spare = left - sum(give.values())
        for s in sorted(open_, key=lambda s: (-(raw[s] - int(raw[s])), s)):
            if spare <= 0:
                break
            if give[s] < sizes[s] - alloc[s]:
                give[s] += 1
                spare -= 1
        if not any(give.values()):
            break
        for s, g in give.items():
            alloc[s] += g
            left -= g
        open_ = {s for s in open_ if alloc[s] < sizes[s]}
    return alloc


def plan_queue(
    candidates: Sequence[Candidate],
    plan: SamplingPlan,
    *,
    disagreement: dict[str, float] | None = None,
    start: int = 0,
) -> list[QueueEntry]:
    """Choose and order ``plan.size`` of ``candidates`` (all of them when size is None)."""
    plan.validate()
    rng = random.Random(f"mirrorworld-review/{plan.seed}")
    by_stratum: dict[str, list[Candidate]] = defaultdict(list)
    for c in sorted(candidates, key=lambda c: c.item_id):
        by_stratum[c.stratum].append(c)
    total = len(candidates) if plan.size is None else min(plan.size, len(candidates))
    disagreement = disagreement or {}
    weights = {s: 1.0 + plan.boost_disagreement * disagreement.get(s, 0.0) for s in by_stratum}
    alloc = _allocate({s: len(v) for s, v in by_stratum.items()}, weights, total)
    drawn: dict[str, list[Candidate]] = {}
    for s in sorted(by_stratum):
        keyed = []
        for c in by_stratum[s]:
            w = 1.0 + (plan.boost_flagged if c.flagged else 0.0)
            u = rng.random() or 1e-300
            keyed.append((math.log(u) / w, c.item_id, c))
        keyed.sort(key=lambda k: (-k[0], k[1]))
        drawn[s] = [c for _, _, c in keyed[: alloc[s]]]
    order = sorted(drawn)
    rng.shuffle(order)
    chosen: list[Candidate] = []
    for rank in range(max((len(v) for v in drawn.values()), default=0)):
        chosen += [drawn[s][rank] for s in order if rank < len(drawn[s])]
    n_overlap = round(plan.overlap_share * len(chosen))
    overlapped = set(rng.sample(range(len(chosen)), n_overlap)) if n_overlap else set()
    return [
        QueueEntry(c.item_id, start + i, c.stratum, plan.overlap if i in overlapped else 1)
        for i, c in enumerate(chosen)
    ]


def _stratum(item: Item) -> str:
    return f"{item.family}/{'pass' if item.verifier_passed else 'fail'}"


def _stratum_disagreement(conn: sqlite3.Connection, store: ReviewStore) -> dict[str, float]:
    """Per stratum, the share of reviews that disagree with the verifier so far."""
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for family, verifier, human in conn.execute(
        "SELECT i.family, i.verifier_passed, v.passed FROM reviews v JOIN items i ON i.id=v.item_id"
    ):
        s = f"{family}/{'pass' if verifier else 'fail'}"
        totals[s][0] += int(verifier != human)
        totals[s][1] += 1
    return {s: d / n for s, (d, n) in totals.items() if n}


def build_queue(store: ReviewStore, plan: SamplingPlan) -> int:
    """Queue episodes not yet queued (gold items excluded) after the existing queue; return how many.

    With ``plan.size`` the queue grows to that many items in all; without, every
    imported non-gold episode is queued. The plan is saved for serving.
    """
    plan.validate()
    with store.write() as conn:
        store_plan = plan.to_dict()
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('sampling', ?)", (_json(store_plan),))
        queued = int(conn.execute("SELECT COUNT(*) FROM items WHERE position IS NOT NULL").fetchone()[0])
        items = store.items(conn, "i.position IS NULL AND i.gold_answer IS NULL AND r.gold = 0")
        want = None if plan.size is None else max(0, plan.size - queued)
        if want == 0 or not items:
            return 0
        candidates = [Candidate(i.id, _stratum(i), bool(i.audit_flags) or i.error is not None) for i in items]
        start = int(conn.execute("SELECT COALESCE(MAX(position) + 1, 0) FROM items").fetchone()[0])
        entries = plan_queue(
            candidates,
            SamplingPlan(**{**store_plan, "size": want}),
            disagreement=_stratum_disagreement(conn, store),
            start=start,
        )
        conn.executemany(
            "UPDATE items SET position=?, stratum=?, overlap=? WHERE id=?",
            [(e.position, e.stratum, e.overlap, e.item_id) for e in entries],
        )
    return len(entries)


def _json(value: Any) -> str:
    return json.dumps(value)


def _gold_turn(secret: str, reviewer_id: int, done: int, rate: float) -> bool:
    h = hashlib.sha256(f"{secret}/gold/{reviewer_id}/{done}".encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64 < rate


def take_next(store: ReviewStore, reviewer: Reviewer) -> int | None:
    """The item ``reviewer`` should grade next, assigned to them; None when there is none.

    An item they took and have not graded comes back first. A paused reviewer
    gets nothing. Capacity counts finished reviews plus assignments younger
    than ``ASSIGNMENT_SECONDS``, so an abandoned item returns to the queue.
    """
    raw = store.get_meta("sampling")
    plan = SamplingPlan.from_dict(raw) if isinstance(raw, dict) else SamplingPlan()
    now = store.clock()
    with store.write() as conn:
        current = store.reviewer(reviewer.id, conn)
        if current is None or current.paused:
            return None
        row = conn.execute(
            "SELECT a.item_id FROM assignments a LEFT JOIN reviews v ON v.item_id=a.item_id AND"
            " v.reviewer_id=a.reviewer_id WHERE a.reviewer_id=? AND v.id IS NULL ORDER BY a.started_at LIMIT 1",
            (reviewer.id,),
        ).fetchone()
        if row is not None:
            return int(row[0])
        done = int(conn.execute("SELECT COUNT(*) FROM reviews WHERE reviewer_id=?", (reviewer.id,)).fetchone()[0])
        gold_sql = (
            "SELECT i.id FROM items i WHERE i.gold_answer IS NOT NULL AND NOT EXISTS"
            " (SELECT 1 FROM assignments a WHERE a.item_id=i.id AND a.reviewer_id=?) ORDER BY i.id"
        )
        choice: int | None = None
        if _gold_turn(store.secret, reviewer.id, done, plan.gold_rate):
            golds = [int(r[0]) for r in conn.execute(gold_sql, (reviewer.id,))]
            if golds:
                choice = random.Random(f"{store.secret}/{reviewer.id}/{done}").choice(golds)
        if choice is None:
            row = conn.execute(
                "SELECT i.id FROM items i WHERE i.position IS NOT NULL AND i.gold_answer IS NULL"
                " AND NOT EXISTS (SELECT 1 FROM assignments a WHERE a.item_id=i.id AND a.reviewer_id=?)"
                " AND (SELECT COUNT(*) FROM assignments a LEFT JOIN reviews v ON v.item_id=a.item_id"
                "      AND v.reviewer_id=a.reviewer_id WHERE a.item_id=i.id AND (v.id IS NOT NULL OR a.started_at > ?))"
                "     < i.overlap"
                " ORDER BY i.position LIMIT 1",
                (reviewer.id, now - ASSIGNMENT_SECONDS),
            ).fetchone()
            choice = None if row is None else int(row[0])
        if choice is None:
            return None
        conn.execute("INSERT INTO assignments VALUES (?, ?, ?)", (choice, reviewer.id, now))
        return choice
