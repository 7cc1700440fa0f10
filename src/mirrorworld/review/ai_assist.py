"""AI-assisted review detection: a suspicion score per reviewer, and its measured detection rates.

A reviewer who hands episodes to a model and pastes its answers grades fast,
at a steady pace, with text that is not theirs. :func:`detect` scores every
reviewer of a review database from signals that each such habit leaves, so an
admin can look — like :mod:`~mirrorworld.review.quality`'s suspicious
patterns, a score is never acted on automatically.

**Signals** (weights in :class:`DetectorPolicy`; the score is the sum of the
weights of the signals that fired, flagged at ``threshold``):

* the quality report's patterns, called, not recomputed
  (:func:`~mirrorworld.review.quality.quality_report` with ``policy.quality``):
  ``pasted_reason`` (1.0), ``shared_reason`` (1.0), ``repeated_reason`` (0.5),
  ``too_fast`` (0.5), ``same_answer`` (0.5);
* ``steady_pace`` (1.0) — per-review seconds (the server's) vary less than
  people's do: the standard deviation of log seconds is below
  ``steady_log_sd`` over at least ``min_pace_reviews`` grades. People's time
  per item is lognormal with a log-sd of 0.3–0.9 (the chance that sixteen
  grades of a reviewer at 0.35 look this steady is under 1 %); pasting a
  model's answer takes about the same time every time. Grades done without
  the model widen it, so this catches the reviewers who use it throughout;
* ``template_reason`` (1.0) — at least ``template_min_twins`` and
  ``template_share`` of the reviewer's distinct long reasons
  (``quality.paste_min_chars`` characters or more, eight word bigrams or more)
  have a near twin written by *another* reviewer, on any item: word-bigram
  Jaccard similarity of at least ``template_jaccard``. ``shared_reason``
  catches the same text on the same item; this catches one tool's templates
  with light variation across items. A text reused by its own author counts
  once (reuse is ``repeated_reason``'s business);
* per field, from ``review_signals`` (see :mod:`~mirrorworld.review.simulated`:
  the store records one timing and one paste mark per review, so per-field
  figures live in their own table): ``reason_not_typed`` (0.5) — at least
  ``field_share`` of long reasons filled faster than ``quality.max_typing_cps``
  in the time the reason box itself had focus, or pasted there (the
  per-review check is blind to a reviewer who waits before submitting; this
  is not); ``rubric_clicked_through`` (0.5) — at least ``field_share`` of the
  rubrics of three rows or more answered with every row under
  ``rubric_seconds`` and the slowest row within ``rubric_ratio`` times the
  fastest (people read rows of different lengths; a click-through is
  uniform). Without that table these two are silent.

No single habit of an honest person reaches the threshold (2.5): a fast
expert fires ``too_fast`` (0.5) and sometimes ``steady_pace`` (their time is
mostly typing, which varies less), a reviewer who pastes quotes the paste pair
(1.5), one who reuses boilerplate ``repeated_reason`` with the paste pair
(2.0). An AI-assisted reviewer fires pasting, the rubric click-through and
templates together (3.0), and pace as well when they use the model on nearly
every item (4.0–5.0).

**Measured** with :func:`detection_report` / :func:`detection_study`: 40 honest
simulated reviewers (typical, fast experts, slow careless ones, quote-pasters,
boilerplate reusers, terse ones — :func:`population`) and 10 AI-assisted ones
(assist share 0.7–1.0, 15–60 s per item), 16 grades each from a queue of
``oracle``/``claim``/``random`` helpdesk episodes (93 each) with overlap 3 and
10 % gold, through take_next, submit_review and auto_pause. At the default
policy, seeds 0–4 pooled (250 reviewers):

==================  ==========  ======================
                    measured    Wilson 95 %
==================  ==========  ======================
detection (TPR)     50/50       [0.929, 1.000]
false positives     0/200       [0.000, 0.019]
==================  ==========  ======================

Assisted scores ranged 3.0–5.0, honest ones 0–2.0. The weights and
thresholds were set on seeds 100–102 before measuring on 0–4; there they give
30/30 and 1/120 (a boilerplate reuser who also straight-lined: 2.5).

**What this does not show.** A *lone* AI-assisted reviewer among 40 honest
ones has no one to share templates with: on seeds 0–4 it was caught 1 time in
5 (score 2.0: pasting and the rubric click-through; caught when its pace was
steady too), with 2/200 false positives. Detection of one person using a model
needs the model's own answers to compare against (reasons generated for the
same items, fed in as another reviewer's) — not done here. And separability is
measured *on this simulation*: honest reasons come from phrase banks, assisted
ones from a template bank, pasting and timing from the model in
:mod:`~mirrorworld.review.simulated`; real reviewers and real models are the
test that matters.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
import re
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mirrorworld.review.quality import QualityPolicy, load_policy, quality_report
from mirrorworld.review.simulated import FieldSignal, SimulatedReviewer, read_signals
from mirrorworld.review.store import ReviewRow, ReviewStore

__all__ = [
    "DetectionReport",
    "DetectorPolicy",
    "ReviewerSuspicion",
    "detect",
    "detection_report",
    "detection_study",
    "population",
]

WEIGHTS: dict[str, float] = {
    "pasted_reason": 1.0,
    "shared_reason": 1.0,
    "repeated_reason": 0.5,
    "too_fast": 0.5,
    "same_answer": 0.5,
    "steady_pace": 1.0,
    "template_reason": 1.0,
    "reason_not_typed": 0.5,
    "rubric_clicked_through": 0.5,
}
"""Each signal's weight in the suspicion score (see the module docstring)."""


@dataclass(frozen=True)
class DetectorPolicy:
    """Thresholds of the AI-assisted-review detector. See the module docstring."""

    quality: QualityPolicy | None = None
    """The quality report's thresholds (None: the review database's own policy)."""
    threshold: float = 2.5
    min_pace_reviews: int = 8
    steady_log_sd: float = 0.2
    template_jaccard: float = 0.5
    template_share: float = 0.3
    field_share: float = 0.3
    rubric_seconds: float = 1.0
    rubric_ratio: float = 2.5
    template_min_twins: int = 3
    max_reasons: int = 3000
    """The template comparison looks at this many most recent long reasons (it is quadratic)."""
    weights: dict[str, float] = field(default_factory=lambda: dict(WEIGHTS))
    """Signal → weight; a signal not named here is off (neither reported nor scored)."""


@dataclass
class ReviewerSuspicion:
    """One reviewer's suspicion score and the signals that fired, each with its evidence."""

    reviewer_id: int
    name: str
    reviews: int
    score: float = 0.0
    flagged: bool = False
    signals: list[tuple[str, str]] = field(default_factory=list)

    @property
    def fired(self) -> list[str]:
        """The signals that fired, each once (a signal may bring several pieces of evidence)."""
        return list(dict.fromkeys(rule for rule, _ in self.signals))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["signals"] = [{"rule": r, "evidence": e} for r, e in self.signals]
        return d


_WORD = re.compile(r"[a-z0-9']+")


def _bigrams(text: str) -> set[str]:
    words = _WORD.findall(text.lower())
    return {f"{a} {b}" for a, b in itertools.pairwise(words)}


def _norm(reason: str) -> str:
    return " ".join(reason.lower().split())


def _templated(reviews: Sequence[ReviewRow], min_chars: int, jaccard: float, cap: int) -> dict[int, int]:
    """Review id → 1 for long reasons with a near twin (bigram Jaccard ≥ ``jaccard``) by another reviewer.

    Exact Jaccard over the bigrams that two or more reviewers used (the only
    ones that can be shared across reviewers), as one matrix product.
    """
    long = [r for r in reviews if len(r.reason.strip()) >= min_chars][-cap:]
    grams = [_bigrams(r.reason) for r in long]
    keep = [i for i, g in enumerate(grams) if len(g) >= 8]
    if len(keep) < 2:
        return {}
    users: dict[str, set[int]] = {}
    for i in keep:
        for g in grams[i]:
            users.setdefault(g, set()).add(long[i].reviewer_id)
    vocab = {g: k for k, g in enumerate(sorted(g for g, who in users.items() if len(who) > 1))}
    if not vocab:
        return {}
    x = np.zeros((len(keep), len(vocab)), dtype=np.float32)
    for row, i in enumerate(keep):
        for g in grams[i]:
            col = vocab.get(g)
            if col is not None:
                x[row, col] = 1.0
    sizes = np.array([len(grams[i]) for i in keep], dtype=np.float32)
    who = np.array([long[i].reviewer_id for i in keep])
    out: dict[int, int] = {}
    for start in range(0, len(keep), 512):
        inter = x[start : start + 512] @ x.T
        union = sizes[start : start + 512, None] + sizes[None, :] - inter
        sim = np.where(union > 0, inter / np.maximum(union, 1.0), 0.0)
        sim[who[start : start + 512, None] == who[None, :]] = 0.0
        best = sim.max(axis=1)
        for row, value in enumerate(best):
            if value >= jaccard:
                out[long[keep[start + row]].id] = 1
    return out


def detect(store: ReviewStore, policy: DetectorPolicy | None = None) -> list[ReviewerSuspicion]:
    """Every reviewer's suspicion score, in reviewer order (see the module docstring)."""
    policy = policy or DetectorPolicy()
    qpolicy = policy.quality or load_policy(store)
    report = quality_report(store, qpolicy)
    reviews = store.reviews()
    signals = read_signals(store)
    templated = _templated(reviews, qpolicy.paste_min_chars, policy.template_jaccard, policy.max_reasons)
    by_reviewer: dict[int, list[ReviewRow]] = {}
    for r in reviews:
        by_reviewer.setdefault(r.reviewer_id, []).append(r)
    out: list[ReviewerSuspicion] = []
    for q in report:
        mine = by_reviewer.get(q.reviewer_id, [])
        s = ReviewerSuspicion(q.reviewer_id, q.name, len(mine))
        s.signals += q.flags
        if len(mine) >= policy.min_pace_reviews:
            spread = statistics.stdev(math.log(max(r.seconds, 0.01)) for r in mine)
            if spread < policy.steady_log_sd:
                s.signals.append(("steady_pace", f"log-seconds sd {spread:.2f} over {len(mine)} grades"))
        long = [r for r in mine if len(r.reason.strip()) >= qpolicy.paste_min_chars]
        texts = {_norm(r.reason): templated.get(r.id, 0) for r in long}  # a reused text counts once
        twins = sum(texts.values())
        if twins >= policy.template_min_twins and twins / len(texts) >= policy.template_share:
            s.signals.append(
                ("template_reason", f"{twins} of {len(texts)} long reasons nearly repeat another reviewer's")
            )
        _field_signals(s, mine, long, signals, qpolicy, policy)
        s.signals = [(rule, evidence) for rule, evidence in s.signals if rule in policy.weights]
        s.score = round(sum(policy.weights.get(rule, 0.0) for rule in sorted(set(s.fired))), 3)
        s.flagged = s.score >= policy.threshold
        out.append(s)
    return out


def _field_signals(
    s: ReviewerSuspicion,
    mine: Sequence[ReviewRow],
    long: Sequence[ReviewRow],
    signals: dict[int, list[FieldSignal]],
    qpolicy: QualityPolicy,
    policy: DetectorPolicy,
) -> None:
    measured = 0
    untyped = 0
    for r in long:
        box = next((f for f in signals.get(r.id, ()) if f.field == "reason"), None)
        if box is None:
            continue
        measured += 1
        chars = len(r.reason.strip())
        if box.pasted or box.seconds <= 0 or chars / box.seconds > qpolicy.max_typing_cps:
            untyped += 1
    if untyped >= 2 and untyped / measured >= policy.field_share:
        s.signals.append(("reason_not_typed", f"{untyped} of {measured} long reasons appeared faster than typing"))
    sheets = 0
    clicked = 0
    for r in mine:
        rows = [f.seconds for f in signals.get(r.id, ()) if f.field.startswith("rubric:")]
        if len(rows) < 3:
            continue
        sheets += 1
        if max(rows) < policy.rubric_seconds and min(rows) > 0 and max(rows) / min(rows) < policy.rubric_ratio:
            clicked += 1
    if clicked >= 2 and clicked / sheets >= policy.field_share:
        s.signals.append(
            (
                "rubric_clicked_through",
                f"{clicked} of {sheets} rubrics answered in under {policy.rubric_seconds:g} s a row, all alike",
            )
        )


# -- measurement ---------------------------------------------------------------------


def population(seed: int, n_honest: int = 40, n_assisted: int = 10) -> list[SimulatedReviewer]:
    """A seeded set of simulated reviewers: ``n_honest`` of mixed kinds, then ``n_assisted`` AI-assisted ones.

    Honest kinds, in turn: typical (accuracy 0.8–0.92, 40–120 s), fast experts
    (0.93–0.98, 7–20 s), slow careless ones (0.6–0.75, 150–400 s, short
    reasons, rubric often skipped), quote-pasters (paste part of 30–50 % of
    their reasons), boilerplate reusers (reuse 40–60 %), terse ones (0–4
    words). AI-assisted: accuracy 0.8–0.95, assist share 0.7–1.0, 15–60 s.
    """
    rng = random.Random(f"mirrorworld-ai-assist/{seed}")
    kinds = ("typical", "expert", "careless", "typical", "paster", "expert", "reuser", "terse", "typical", "careless")
    out: list[SimulatedReviewer] = []
    for i in range(n_honest):
        kind = kinds[i % len(kinds)]
        base: dict[str, Any] = {
            "name": f"honest-{i:02d}",
            "seed": seed,
            "accuracy": rng.uniform(0.8, 0.92),
            "pass_bias": rng.uniform(-0.3, 0.3),
            "median_seconds": rng.uniform(40, 120),
            "spread": rng.uniform(0.35, 0.8),
            "reason_words": (rng.randint(4, 10), rng.randint(14, 35)),
            "typing_cps": rng.uniform(3.0, 6.0),
            "paste_rate": rng.uniform(0.0, 0.05),
            "rubric": rng.uniform(0.6, 1.0),
        }
        if kind == "expert":
            base |= {"accuracy": rng.uniform(0.93, 0.98), "median_seconds": rng.uniform(7, 20)}
            base |= {"typing_cps": rng.uniform(6.0, 9.0), "spread": rng.uniform(0.3, 0.6)}
        elif kind == "careless":
            base |= {"accuracy": rng.uniform(0.6, 0.75), "median_seconds": rng.uniform(150, 400)}
            base |= {"reason_words": (rng.randint(0, 3), rng.randint(5, 12)), "rubric": rng.uniform(0.2, 0.6)}
            base |= {"spread": rng.uniform(0.5, 0.9)}
        elif kind == "paster":
            base |= {"paste_rate": rng.uniform(0.3, 0.5)}
        elif kind == "reuser":
            base |= {"reuse_rate": rng.uniform(0.4, 0.6)}
        elif kind == "terse":
            base |= {"reason_words": (0, 4), "rubric": rng.uniform(0.0, 0.3)}
        out.append(SimulatedReviewer(**base))
    for i in range(n_assisted):
        out.append(
            SimulatedReviewer(
                name=f"assisted-{i:02d}",
                seed=seed,
                accuracy=rng.uniform(0.8, 0.95),
                pass_bias=rng.uniform(-0.2, 0.3),
                median_seconds=rng.uniform(40, 120),
                spread=rng.uniform(0.35, 0.8),
                reason_words=(rng.randint(4, 10), rng.randint(14, 35)),
                typing_cps=rng.uniform(3.0, 6.0),
                assisted=True,
                assist_share=rng.uniform(0.7, 1.0),
                assisted_seconds=rng.uniform(15, 60),
            )
        )
    return out


@functools.cache
def _simulated_hash() -> str:
    """One credential hash for every simulated account (one scrypt per process, not one per reviewer)."""
    from mirrorworld.review.store import hash_password

    return hash_password("simulated reviewer")


def _wilson(k: int, n: int) -> tuple[float, float]:
    from mirrorworld.ship.compare import wilson

    return wilson(k, n)


@dataclass(frozen=True)
class DetectionReport:
    """Detection on one simulated set (or several pooled): counts, rates and their Wilson 95 % intervals."""

    seeds: tuple[int, ...]
    threshold: float
    true_positives: int
    false_negatives: int
    false_positives: int
    true_negatives: int
    reviewers: tuple[tuple[str, bool, ReviewerSuspicion], ...] = ()
    """(name, truly AI-assisted, what the detector said), for every simulated reviewer."""

    @property
    def tpr(self) -> float:
        n = self.true_positives + self.false_negatives
        return self.true_positives / n if n else 0.0

    @property
    def fpr(self) -> float:
        n = self.false_positives + self.true_negatives
        return self.false_positives / n if n else 0.0

    @property
    def tpr_interval(self) -> tuple[float, float]:
        return _wilson(self.true_positives, self.true_positives + self.false_negatives)

    @property
    def fpr_interval(self) -> tuple[float, float]:
        return _wilson(self.false_positives, self.false_positives + self.true_negatives)

    def to_dict(self) -> dict[str, Any]:
        return {
            "seeds": list(self.seeds),
            "threshold": self.threshold,
            "tp": self.true_positives,
            "fn": self.false_negatives,
            "fp": self.false_positives,
            "tn": self.true_negatives,
            "tpr": self.tpr,
            "tpr_ci95": list(self.tpr_interval),
            "fpr": self.fpr,
            "fpr_ci95": list(self.fpr_interval),
            "reviewers": [{"name": n, "assisted": a, **s.to_dict()} for n, a, s in self.reviewers],
        }

    def summary(self) -> str:
        (tl, th), (fl, fh) = self.tpr_interval, self.fpr_interval
        pos = self.true_positives + self.false_negatives
        neg = self.false_positives + self.true_negatives
        return (
            f"seeds {','.join(map(str, self.seeds))}: TPR {self.true_positives}/{pos} = {self.tpr:.2f}"
            f" [{tl:.3f}, {th:.3f}], FPR {self.false_positives}/{neg} = {self.fpr:.2f} [{fl:.3f}, {fh:.3f}]"
        )


def detection_report(
    seed: int,
    n_honest: int = 40,
    n_assisted: int = 10,
    *,
    items: int = 16,
    runs: Sequence[str | Path] | None = None,
    directory: str | Path | None = None,
    policy: DetectorPolicy | None = None,
) -> DetectionReport:
    """Simulate :func:`population` (``seed``) grading ``items`` each, detect, and count who was caught.

    The review database is a new :func:`~mirrorworld.review.simulated.seeded_store`
    in ``directory`` (a temporary folder by default) filled from ``runs``
    (oracle, claim and random helpdesk runs, the oracle's as gold; made with
    :func:`~mirrorworld.review.testing.make_runs` when not given).
    """
    if directory is None:
        with tempfile.TemporaryDirectory(prefix="mirrorworld-ai-assist-") as tmp:
            return detection_report(seed, n_honest, n_assisted, items=items, runs=runs, directory=tmp, policy=policy)
    from mirrorworld.review.pools import add_accounts
    from mirrorworld.review.queue import SamplingPlan, build_queue
    from mirrorworld.review.simulated import seeded_store, simulate

    folder = Path(directory)
    people = population(seed, n_honest, n_assisted)
    if runs is None:
        from mirrorworld.review.testing import make_runs

        episodes = max(12, math.ceil(len(people) * items / 3 / 3) + 4)
        runs = make_runs(folder, ("oracle", "claim", "random"), episodes=episodes)
    db = folder / f"detection-{seed}.sqlite"
    store = seeded_store(db, seed=seed)
    for k, run in enumerate(runs):
        store.add_run(run, audit=False, gold=k == 0)
    build_queue(store, SamplingPlan(overlap=3, overlap_share=1.0, gold_rate=0.1, seed=seed))
    add_accounts(store, [p.name for p in people], _simulated_hash())
    simulate(store, people, items=items)
    policy = policy or DetectorPolicy()
    found = {s.name: s for s in detect(store, policy)}
    rows = tuple((p.name, p.assisted, found[p.name]) for p in people)
    return DetectionReport(
        seeds=(seed,),
        threshold=policy.threshold,
        true_positives=sum(a and s.flagged for _, a, s in rows),
        false_negatives=sum(a and not s.flagged for _, a, s in rows),
        false_positives=sum(not a and s.flagged for _, a, s in rows),
        true_negatives=sum(not a and not s.flagged for _, a, s in rows),
        reviewers=rows,
    )


def detection_study(
    seeds: Sequence[int],
    n_honest: int = 40,
    n_assisted: int = 10,
    *,
    items: int = 16,
    runs: Sequence[str | Path] | None = None,
    directory: str | Path | None = None,
    policy: DetectorPolicy | None = None,
) -> DetectionReport:
    """:func:`detection_report` over several seeds, pooled (the intervals treat reviewers as independent).

    The databases go to a temporary folder inside ``directory`` (by default the
    system's temporary folder), removed at the end.
    """
    with tempfile.TemporaryDirectory(prefix="mirrorworld-ai-assist-", dir=directory) as tmp:
        if runs is None:
            from mirrorworld.review.testing import make_runs

            episodes = max(12, math.ceil((n_honest + n_assisted) * items / 3 / 3) + 4)
            runs = make_runs(tmp, ("oracle", "claim", "random"), episodes=episodes)
        parts = [
            detection_report(s, n_honest, n_assisted, items=items, runs=runs, directory=tmp, policy=policy)
            for s in seeds
        ]
    return DetectionReport(
        seeds=tuple(seeds),
        threshold=parts[0].threshold if parts else (policy or DetectorPolicy()).threshold,
        true_positives=sum(p.true_positives for p in parts),
        false_negatives=sum(p.false_negatives for p in parts),
        false_positives=sum(p.false_positives for p in parts),
        true_negatives=sum(p.true_negatives for p in parts),
        reviewers=tuple(r for p in parts for r in p.reviewers),
    )
