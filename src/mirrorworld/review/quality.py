"""Reviewer quality: gold accuracy, time per item, peer agreement, suspicious patterns.

Measures, per reviewer:

* **gold accuracy** — share of gold (honeypot) items graded as their known answer;
* **time per item** — median seconds from taking an item to submitting its grade
  (measured by the server, not reported by the browser);
* **peer agreement** — over items another reviewer also graded, the share of
  (this reviewer, other reviewer) grade pairs that agree, and Cohen's kappa of
  those pairs;
* **verifier agreement** — share of grades that match the verifier (context
  only: disagreeing with the verifier is what review is for).

**Auto-pause.** After every grade, if the reviewer has answered at least
``min_gold`` gold items with accuracy below ``min_gold_accuracy``, or graded at
least ``min_peer_items`` overlapped items with peer agreement below
``min_peer_agreement``, they are paused: the queue gives them nothing until an
admin resumes them. Only grades since the last resume count toward a pause.

**Suspicious patterns** are flagged for an admin to look at, never acted on
automatically (each can have an innocent explanation):

* ``too_fast`` — at least ``fast_share`` of a reviewer's grades took under
  ``fast_seconds``;
* ``same_answer`` — the same pass/fail on nearly every item
  (``same_answer_share``) while the verifier's verdicts on those items are
  mixed (straight-lining);
* ``repeated_reason`` — one reason text reused on ``repeated_reason_count`` items;
* ``shared_reason`` — a reason identical to another reviewer's (copied, or
  produced by the same tool);
* ``pasted_reason`` — long reasons that were pasted rather than typed: the
  browser saw a paste, or far fewer keystrokes than characters, or the text
  appeared faster than anyone types (``max_typing_cps``). Reviewers who hand
  the work to an AI show up here.
"""

from __future__ import annotations

import re
import sqlite3
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from mirrorworld.review.agreement import pair_stats_from_tables
from mirrorworld.review.store import Item, Reviewer, ReviewInput, ReviewRow, ReviewStore

__all__ = ["QualityPolicy", "ReviewerQuality", "assess", "auto_pause", "quality_report"]


@dataclass(frozen=True)
class QualityPolicy:
    """Thresholds for pausing and flagging reviewers. See the module docstring."""

    min_gold: int = 5
    min_gold_accuracy: float = 0.7
    min_peer_items: int = 10
    min_peer_agreement: float = 0.6
    fast_seconds: float = 10.0
    fast_share: float = 0.5
    min_reviews_for_patterns: int = 5
    same_answer_share: float = 0.95
    repeated_reason_count: int = 3
    min_reason_chars: int = 12
    paste_min_chars: int = 40
    paste_keys_ratio: float = 0.3
    max_typing_cps: float = 12.0
    pasted_share: float = 0.3

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> QualityPolicy:
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


@dataclass
class ReviewerQuality:
    """One reviewer's quality figures and flags."""

    reviewer_id: int
    name: str
    role: str
    paused: bool
    paused_reason: str | None
    reviews: int = 0
    gold: int = 0
    gold_correct: int = 0
    median_seconds: float | None = None
    peer_items: int = 0
    peer_pairs: int = 0
    peer_agree: int = 0
    peer_kappa: float | None = None
    verifier_agreement: float | None = None
    flags: list[tuple[str, str]] = field(default_factory=list)
    pause_reason: str | None = None
    """Why the reviewer should be paused now (grades since the last resume), if they should."""

    @property
    def gold_accuracy(self) -> float | None:
        return self.gold_correct / self.gold if self.gold else None

    @property
    def peer_agreement(self) -> float | None:
        return self.peer_agree / self.peer_pairs if self.peer_pairs else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["gold_accuracy"] = self.gold_accuracy
        d["peer_agreement"] = self.peer_agreement
        d["flags"] = [{"rule": r, "evidence": e} for r, e in self.flags]
        return d


_SPACE = re.compile(r"\s+")


def _norm(reason: str) -> str:
    return _SPACE.sub(" ", reason.strip().lower())


def _pasted(r: ReviewRow, policy: QualityPolicy) -> bool:
    n = len(r.reason.strip())
    if n < policy.paste_min_chars:
        return False
    return (
        r.reason_pasted
        or r.reason_keys < policy.paste_keys_ratio * n
        or (r.seconds > 0 and n / r.seconds > policy.max_typing_cps)
        or r.seconds == 0
    )


def assess(
    reviewer: Reviewer,
    reviews: Sequence[ReviewRow],
    items: dict[int, Item],
    policy: QualityPolicy,
) -> ReviewerQuality:
    """Quality of ``reviewer`` from ``reviews`` (theirs and their peers' on the same items)."""
    q = ReviewerQuality(reviewer.id, reviewer.name, reviewer.role, reviewer.paused, reviewer.paused_reason)
    mine = [r for r in reviews if r.reviewer_id == reviewer.id]
    by_item: dict[int, list[ReviewRow]] = defaultdict(list)
    for r in reviews:
        by_item[r.item_id].append(r)
    q.reviews = len(mine)
    if not mine:
        return q
    q.median_seconds = statistics.median(r.seconds for r in mine)

    def figures(rows: Sequence[ReviewRow]) -> tuple[int, int, int, int, np.ndarray[Any, Any]]:
        gold = correct = pairs = agree = 0
        table = np.zeros((2, 2))
        for r in rows:
            item = items.get(r.item_id)
            if item is not None and item.gold_answer is not None:
                gold += 1
                correct += int(r.passed == item.gold_answer)
            for other in by_item[r.item_id]:
                if other.reviewer_id != reviewer.id:
                    pairs += 1
                    agree += int(other.passed == r.passed)
                    table[int(r.passed), int(other.passed)] += 1
        return gold, correct, pairs, agree, table

    q.gold, q.gold_correct, q.peer_pairs, q.peer_agree, table = figures(mine)
    q.peer_items = sum(1 for r in mine if any(o.reviewer_id != reviewer.id for o in by_item[r.item_id]))
    if q.peer_pairs:
        k = float(pair_stats_from_tables(table[None])["kappa"][0])
        q.peer_kappa = None if np.isnan(k) else k
    judged = [r for r in mine if r.item_id in items]
    if judged:
        q.verifier_agreement = sum(r.passed == items[r.item_id].verifier_passed for r in judged) / len(judged)

    recent = [r for r in mine if r.submitted_at >= reviewer.cleared_at]
    gold, correct, pairs, agree, _ = figures(recent)
    peer_items = sum(1 for r in recent if any(o.reviewer_id != reviewer.id for o in by_item[r.item_id]))
    if gold >= policy.min_gold and correct / gold < policy.min_gold_accuracy:
        q.pause_reason = f"gold accuracy {correct}/{gold} is below {policy.min_gold_accuracy:.0%}"
    elif peer_items >= policy.min_peer_items and pairs and agree / pairs < policy.min_peer_agreement:
        q.pause_reason = f"agreement with peers {agree}/{pairs} is below {policy.min_peer_agreement:.0%}"

    n = len(mine)
    if n >= policy.min_reviews_for_patterns:
        fast = sum(1 for r in mine if r.seconds < policy.fast_seconds)
        if fast / n >= policy.fast_share:
            q.flags.append(("too_fast", f"{fast} of {n} grades took under {policy.fast_seconds:g} s"))
        passes = sum(r.passed for r in mine)
        top = max(passes, n - passes)
        verdicts = [items[r.item_id].verifier_passed for r in judged]
        mixed = bool(verdicts) and min(sum(verdicts), len(verdicts) - sum(verdicts)) >= 0.2 * len(verdicts)
        if top / n >= policy.same_answer_share and mixed:
            answer = "pass" if passes >= n - passes else "fail"
            q.flags.append(("same_answer", f"'{answer}' on {top} of {n} items whose verifier verdicts are mixed"))
    reasons = Counter(_norm(r.reason) for r in mine if len(_norm(r.reason)) >= policy.min_reason_chars)
    for text, count in reasons.most_common():
        if count < policy.repeated_reason_count:
            break
        q.flags.append(("repeated_reason", f"the same reason on {count} items: {text[:60]!r}"))
    shared = 0
    for r in mine:
        text = _norm(r.reason)
        if len(text) >= 2 * policy.min_reason_chars and any(
            o.reviewer_id != reviewer.id and _norm(o.reason) == text for o in by_item[r.item_id]
        ):
            shared += 1
    if shared:
        q.flags.append(("shared_reason", f"{shared} reasons are word for word another reviewer's"))
    long_reasons = [r for r in mine if len(r.reason.strip()) >= policy.paste_min_chars]
    pasted = sum(_pasted(r, policy) for r in long_reasons)
    if pasted >= 2 and pasted / len(long_reasons) >= policy.pasted_share:
        q.flags.append(("pasted_reason", f"{pasted} of {len(long_reasons)} long reasons were pasted, not typed"))
    return q


def _context(
    store: ReviewStore, conn: sqlite3.Connection, reviewer_ids: Sequence[int] | None
) -> tuple[list[ReviewRow], dict[int, Item]]:
    if reviewer_ids is None:
        reviews = store.reviews(conn)
    else:
        marks = ",".join("?" * len(reviewer_ids))
        reviews = store.reviews(
            conn,
            f"v.item_id IN (SELECT item_id FROM reviews WHERE reviewer_id IN ({marks}))",
            tuple(reviewer_ids),
        )
    ids = sorted({r.item_id for r in reviews})
    items = {i.id: i for i in store.items(conn)} if reviewer_ids is None else {}
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        if reviewer_ids is not None:
            items.update({i.id: i for i in store.items(conn, f"i.id IN ({','.join('?' * len(chunk))})", tuple(chunk))})
    return reviews, items


def quality_report(store: ReviewStore, policy: QualityPolicy | None = None) -> list[ReviewerQuality]:
    """Every reviewer's quality, in reviewer order."""
    policy = policy or load_policy(store)
    with store.read() as conn:
        reviews, items = _context(store, conn, None)
        reviewers = [store.reviewer(int(r[0]), conn) for r in conn.execute("SELECT id FROM reviewers ORDER BY id")]
    return [assess(r, reviews, items, policy) for r in reviewers if r is not None]


def load_policy(store: ReviewStore) -> QualityPolicy:
    raw = store.get_meta("quality")
    return QualityPolicy.from_dict(raw) if isinstance(raw, dict) else QualityPolicy()


def auto_pause(store: ReviewStore, policy: QualityPolicy) -> Callable[[sqlite3.Connection, ReviewInput], None]:
    """A ``submit_review(after=...)`` hook that pauses a reviewer who falls under a threshold."""

    def check(conn: sqlite3.Connection, review: ReviewInput) -> None:
        reviewer = store.reviewer(review.reviewer_id, conn)
        if reviewer is None or reviewer.paused:
            return
        reviews, items = _context(store, conn, [reviewer.id])
        q = assess(reviewer, reviews, items, policy)
        if q.pause_reason is not None:
            store._set_paused(conn, reviewer.id, True, q.pause_reason, by=None)

    return check
