"""Simulated reviewers: a seeded model of people grading, driven through the real review pipeline.

A :class:`SimulatedReviewer` stands for one person. Given an item and its
*true* outcome it produces a grade the way the app receives one — pass/fail,
per-check rubric rows, a reason, the reason box's keystroke count and paste
mark — and the seconds it took. :func:`simulate` has a set of them take items
with :func:`~mirrorworld.review.queue.take_next` and submit with
:meth:`~mirrorworld.review.store.ReviewStore.submit_review` under
:func:`~mirrorworld.review.quality.auto_pause`, exactly the calls the app's
``/take`` and ``/item/{id}/review`` handlers make (what the app adds on top is
parsing its form), so queue, gold honeypots, overlap and auto-pause behave as
they would for people. It is what the pools' routing, the calibration history
and the AI-assisted-review detector (:mod:`~mirrorworld.review.ai_assist`) are
measured on.

**The model**, per item, with ``t`` the item's true outcome:

* *Truth.* ``t`` is the item's gold answer when it has one, else the
  verifier's verdict, unless :func:`simulate` is given a ``truth`` function —
  a planted blind spot, say, where the verifier passes a family it should fail.
* *Grade.* The reviewer errs with probability ``(1 − accuracy)(1 + pass_bias)``
  on a truly failing item (a false pass) and ``(1 − accuracy)(1 − pass_bias)``
  on a truly passing one (a false fail). On a balanced set they are right
  ``accuracy`` of the time and pass ``½ + (1 − accuracy)·pass_bias`` of it;
  ``pass_bias`` runs from −1 (errs only by failing) to 1 (errs only by passing).
* *Rubric.* With probability ``rubric`` the reviewer answers the item's rubric
  rows, consistently with the grade: a pass passes every row (the outcome is 1
  only when every gate passes); a fail keeps the verifier's answer for each row
  and, where those all pass, fails one row drawn at random, so at least one
  row carries the failure.
* *Time.* Reading and judging an item takes a lognormal time with median
  ``median_seconds`` and log-sd ``spread``; the time spent in the fields —
  typing the reason at ``typing_cps``, answering rubric rows — comes on top.
  So seconds per item are that lognormal exactly for a reviewer who writes
  nothing, and longer by what they write.
* *Reason.* An honest reviewer writes ``reason_words`` words in a style of
  their own (openings, verdict words, fillers and pet phrases drawn from banks
  when the reviewer is made), citing specifics (a call, a ticket, the task)
  and naming a rubric row they failed in their own shorthand (a few of its
  words, not its label); with ``reuse_rate`` they reuse one of their earlier
  reasons instead (pasted when long: people copy their own boilerplate); with
  ``paste_rate`` they paste part of a fresh one. Typing costs
  ``chars / typing_cps`` seconds and about 3–20 % more keystrokes than
  characters (corrections).

**AI-assisted mode** (``assisted``): on a share ``assist_share`` of items the
reviewer hands the episode to a model and pastes its answer. The reason comes
from a small bank of model-style templates shared by every AI-assisted
reviewer, with light variation (synonyms, the item's family and failed rows);
it is pasted (the browser's paste mark set nine times in ten) with a handful
of keystrokes (the shortcut, a touch-up); the reason box is filled in one to
three seconds; the rubric rows are clicked through in under a second each;
and the item takes a near-constant ``assisted_seconds`` (log-sd 0.08). The
model's judgement is the reviewer's ``accuracy``.

**Per-field signals.** The store records one timing, one keystroke count and
one paste mark per review. A simulated reviewer also produces them per field —
seconds, keystrokes and paste for the reason box (``reason``) and each rubric
row answered (``rubric:<key>``) — which :func:`simulate` keeps in this
module's own table ``review_signals(review_id, field, seconds, keys, pasted)``
in the review database, written in the review's own transaction. The detector
reads them with :func:`read_signals`; an app that one day records them would
write the same rows.

**Time and determinism.** :func:`simulate` runs on a :class:`SimClock`: an
event loop moves it to each reviewer's next take or submit, so a grade's
``seconds`` are the simulated time between take and submit and nothing
sleeps. Each reviewer draws from ``random.Random("mirrorworld-sim/<seed>/<name>")``
(a string seed is hashed with SHA-512, not ``hash()``), events are ordered by
(time, sequence), and nothing iterates a set unsorted, so a simulation is the
same in any process and under any ``PYTHONHASHSEED`` — given the database.
Item ids and the secret that decides gold turns are random in a normal review
database; :func:`seeded_store` makes one whose ids and secret follow a seed
(for simulations only: its secret, which also signs session cookies, is
predictable).
"""

from __future__ import annotations

import hashlib
import heapq
import json
import math
import random
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mirrorworld.errors import MirrorworldError
from mirrorworld.review.quality import auto_pause, load_policy
from mirrorworld.review.queue import take_next
from mirrorworld.review.store import CheckRef, Item, Reviewer, ReviewInput, ReviewStore

__all__ = [
    "FieldSignal",
    "SimClock",
    "SimulatedGrade",
    "SimulatedReviewer",
    "Simulation",
    "SimulationGrade",
    "accounts",
    "ensure_signals_table",
    "read_signals",
    "seeded_store",
    "simulate",
    "write_signals",
]

SIGNALS_SCHEMA = """
CREATE TABLE IF NOT EXISTS review_signals (
    review_id INTEGER NOT NULL REFERENCES reviews(id), field TEXT NOT NULL,
    seconds REAL NOT NULL, keys INTEGER NOT NULL, pasted INTEGER NOT NULL CHECK (pasted IN (0, 1)),
    PRIMARY KEY (review_id, field)
);
"""


class SimClock:
    """A clock that moves only when told: ``clock()`` is the time, ``advance`` and ``t`` move it."""

    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = float(t)

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> float:
        self.t += seconds
        return self.t


@dataclass(frozen=True)
class FieldSignal:
    """What one field of the grading form saw: seconds with focus, keystrokes, whether text was pasted."""

    field: str
    seconds: float
    keys: int
    pasted: bool


@dataclass(frozen=True)
class SimulatedGrade:
    """One grade as a simulated reviewer produced it (before it is submitted)."""

    passed: bool
    truth: bool
    reason: str
    rubric: dict[str, bool]
    seconds: float
    reason_keys: int
    reason_pasted: bool
    assisted: bool
    fields: tuple[FieldSignal, ...]

    def review_input(self, item_id: int, reviewer_id: int) -> ReviewInput:
        return ReviewInput(
            item_id=item_id,
            reviewer_id=reviewer_id,
            passed=self.passed,
            reason=self.reason,
            rubric=dict(self.rubric),
            reason_keys=self.reason_keys,
            reason_pasted=self.reason_pasted,
        )


# -- text banks ----------------------------------------------------------------------
#
# Honest reviewers each draw a personal style (a few phrases of each kind) from
# these banks when they are made, so two honest reviewers rarely share phrasing.
# The AI templates are shared by every AI-assisted reviewer: that is the point.


def _bank(phrases: str) -> tuple[str, ...]:
    return tuple(phrases.split("|"))


_OPENINGS = _bank(
    "ok so|looked at the transcript|read through it|went over the calls|checked the diff|i checked|"
    "from the conversation|after reading|quick look:|scanned the tool calls|"
    "compared the state with the task|reviewed it|looking at the end state|traced the steps|"
    "per the task text|reading the messages|first pass:|went through the episode|"
    "had a look at the record|stepping through|on the diff alone|judging by the replies"
)
_PASS = _bank(
    "agent did what was asked|looks right to me|all good|state matches the request|nothing missing|"
    "customer got a clear answer|correct outcome|fine, no policy issue|did it properly|done as requested|"
    "no problems|matches what the customer wanted|solid|handled cleanly|right call|this one is fine|"
    "no complaints|works"
)
_FAIL = _bank(
    "agent got it wrong|not done|missed a step|this is off|wrong result|"
    "customer was told something untrue|claims it is done but it is not|incomplete|policy problem here|"
    "does not match the request|bad outcome|touched the wrong record|no good|falls short|broken|nope|"
    "should not pass|not what was asked"
)
_FILLERS = _bank(
    "i think|pretty sure|double checked|see the last message|numbers add up|amount looks off|"
    "ticket status too|not sure about the tone|reply was short|took a while|second call was redundant|"
    "no harm done|identity checked first|approval step was there|nothing else changed|the order lines|"
    "the email bit|priority field|escalation note|read it twice|odd wording|fast enough|"
    "would flag the tone|the refund part|see call 3|mostly|honestly|as far as i can tell"
)
_ADJECTIVES = _bank(
    "odd|clean|sloppy|quick|careful|vague|polite|curt|solid|shaky|weird|tidy|messy|clear|fuzzy|late|early|"
    "wordy|blunt|proper|partial|extra|missing|wrong|right|stale|fresh|strict|loose|rough"
)
_NOUNS = _bank(
    "handoff|refund|reply|lookup|wording|ticket|summary|closing|greeting|check|status|note|amount|"
    "follow-up|apology|escalation|priority|merge|email|answer|order|record|step|policy|approval|tone"
)

_AI_TEMPLATES = (
    "The agent {handled} the {family} request {manner}. {detail} The final response to the customer is"
    " {clear} and {consistent} the stated policy, so the episode {should} be marked as {verdict}.",
    "Upon reviewing the trajectory, the agent {performed} the required steps for the {family} task. {detail}"
    " Overall, the outcome {meets} the task requirements. Verdict: {verdict}.",
    "After carefully examining the conversation and the resulting state, {detail_lower} The agent's actions"
    " {align} with the customer's request and the applicable policy. Therefore, I would rate this episode as"
    " {verdict}.",
    "This trajectory demonstrates {quality} handling of the {family} scenario. {detail} Based on the evidence"
    " in the tool calls and the final message, the appropriate grade is {verdict}.",
)
_AI_WORDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # slot: (words when the grade is pass, words when it is fail)
    "handled": (("handled", "addressed", "processed"), ("handled", "attempted", "processed")),
    "manner": (("correctly", "appropriately", "effectively"), ("incorrectly", "incompletely", "improperly")),
    "clear": (("clear", "accurate", "professional"), ("misleading", "inaccurate", "incomplete")),
    "consistent": (("consistent with", "in line with"), ("not consistent with", "not in line with")),
    "should": (("should", "can"), ("should", "must")),
    "performed": (("performed", "completed", "executed"), ("attempted", "only partially completed", "skipped")),
    "meets": (("meets", "satisfies", "fulfils"), ("does not meet", "fails to satisfy", "falls short of")),
    "align": (("align", "are consistent", "comply"), ("do not align", "are inconsistent", "do not comply")),
    "quality": (("thorough and correct", "accurate", "effective"), ("flawed", "incomplete", "incorrect")),
}
_AI_PREFIXES = ("", "", "", "Summary: ", "Assessment: ", "Review: ")


def _words(items: Iterable[str]) -> list[str]:
    return [w for w in " ".join(items).split() if w]


@dataclass(frozen=True)
class SimulatedReviewer:
    """A simulated person. See the module docstring for what each parameter does."""

    name: str
    seed: int = 0
    accuracy: float = 0.9
    pass_bias: float = 0.0
    median_seconds: float = 60.0
    spread: float = 0.5
    rubric: float = 1.0
    reason_words: tuple[int, int] = (8, 30)
    typing_cps: float = 4.0
    paste_rate: float = 0.02
    reuse_rate: float = 0.0
    break_seconds: float = 5.0
    assisted: bool = False
    assist_share: float = 1.0
    assisted_seconds: float = 30.0

    def __post_init__(self) -> None:
        if not 0 <= self.accuracy <= 1 or not -1 <= self.pass_bias <= 1:
            raise MirrorworldError("accuracy is between 0 and 1 and pass_bias between -1 and 1")
        if (1 - self.accuracy) * (1 + abs(self.pass_bias)) > 1 + 1e-12:
            raise MirrorworldError("(1 - accuracy)(1 + |pass_bias|) must not exceed 1: it is an error rate")
        for name in ("rubric", "paste_rate", "reuse_rate", "assist_share"):
            if not 0 <= getattr(self, name) <= 1:
                raise MirrorworldError(f"{name} is between 0 and 1")
        if min(self.median_seconds, self.typing_cps, self.assisted_seconds) <= 0 or self.spread < 0:
            raise MirrorworldError("seconds and typing speed are positive, spread is not negative")
        lo, hi = self.reason_words
        if not 0 <= lo <= hi:
            raise MirrorworldError("reason_words is (least, most) words with 0 <= least <= most")

    @property
    def password(self) -> str:
        """The password of the simulated account (a simulated person has nothing to protect)."""
        return f"simulated:{self.name}"

    def error_rates(self) -> tuple[float, float]:
        """(false pass rate on truly failing items, false fail rate on truly passing items)."""
        miss = 1 - self.accuracy
        return miss * (1 + self.pass_bias), miss * (1 - self.pass_bias)

    def grader(self) -> Grader:
        """A fresh grader: this reviewer's random stream from its start, with no reasons written yet."""
        return Grader(self)


def _lognormal(rng: random.Random, median: float, sigma: float) -> float:
    return median * math.exp(rng.gauss(0.0, sigma)) if sigma > 0 else median


class Grader:
    """A simulated reviewer at work: their random stream and the reasons they have written so far."""

    def __init__(self, reviewer: SimulatedReviewer) -> None:
        self.reviewer = reviewer
        self.rng = random.Random(f"mirrorworld-sim/{reviewer.seed}/{reviewer.name}")
        style = random.Random(f"mirrorworld-sim/style/{reviewer.seed}/{reviewer.name}")
        self.openings = style.sample(_OPENINGS, 4)
        self.pass_words = style.sample(_PASS, 4)
        self.fail_words = style.sample(_FAIL, 4)
        self.fillers = style.sample(_FILLERS, 5)
        self.fillers += [f"{a} {n}" for a, n in zip(style.sample(_ADJECTIVES, 6), style.sample(_NOUNS, 6), strict=True)]
        self.lowercase = style.random() < 0.5
        self.prefix = style.choice(_AI_PREFIXES)
        self.written: list[str] = []

    def grade(self, item: Item, truth: bool) -> SimulatedGrade:
        """Grade ``item`` whose true outcome is ``truth``."""
        r, rng = self.reviewer, self.rng
        assisted = r.assisted and rng.random() < r.assist_share
        false_pass, false_fail = r.error_rates()
        wrong = rng.random() < (false_fail if truth else false_pass)
        passed = truth != wrong
        rubric: dict[str, bool] = {}
        if assisted or rng.random() < r.rubric:
            rubric = _rubric(item.checks, passed, rng)
        failed = [c.label for c in item.checks if rubric.get(c.key) is False]
        fields: list[FieldSignal] = []
        if assisted:
            reason = self._ai_reason(item, passed, failed)
            pasted = rng.random() < 0.9
            keys = rng.randint(1, 6)
            fields.append(FieldSignal("reason", round(rng.uniform(0.8, 3.0), 3), keys, pasted))
            for key in sorted(rubric):
                fields.append(FieldSignal(f"rubric:{key}", round(rng.uniform(0.4, 0.9), 3), 1, False))
            floor = sum(f.seconds for f in fields) + 2.0
            seconds = max(floor, _lognormal(rng, r.assisted_seconds, 0.08))
        else:
            reason, keys, pasted, typing = self._human_reason(item, passed, failed)
            fields.append(FieldSignal("reason", round(typing, 3), keys, pasted))
            row_median = 2.5 * min(3.0, max(0.3, r.median_seconds / 60.0))
            for key in sorted(rubric):
                fields.append(FieldSignal(f"rubric:{key}", round(_lognormal(rng, row_median, 0.6), 3), 1, False))
            seconds = _lognormal(rng, r.median_seconds, r.spread) + sum(f.seconds for f in fields)
        return SimulatedGrade(
            passed=passed,
            truth=truth,
            reason=reason,
            rubric=rubric,
            seconds=round(seconds, 3),
            reason_keys=keys,
            reason_pasted=pasted,
            assisted=assisted,
            fields=tuple(fields),
        )

    def _human_reason(self, item: Item, passed: bool, failed: Sequence[str]) -> tuple[str, int, bool, float]:
        """(reason, keystrokes, pasted, seconds in the reason box) of a reason a person writes."""
        r, rng = self.reviewer, self.rng
        if self.written and rng.random() < r.reuse_rate:
            reason = rng.choice(self.written[-5:])
            if len(reason) >= 40:  # long boilerplate is copied, short is retyped
                return reason, rng.randint(1, 4), True, rng.uniform(0.5, 2.0)
            keys = round(len(reason) * rng.uniform(1.03, 1.2))
            return reason, keys, False, len(reason) / _lognormal(rng, r.typing_cps, 0.2)
        lo, hi = r.reason_words
        want = rng.randint(lo, hi)
        if want == 0:
            return "", 0, False, 0.0
        parts = [rng.choice(self.openings), rng.choice(self.pass_words if passed else self.fail_words)]
        if failed:  # people name a failed row in their own words, not its label
            parts.append(_gist(rng.choice(failed), rng))
        fill = [*self.fillers, item.family.replace("_", " ")]
        while len(_words(parts)) < want:
            kind = rng.random()
            if kind < 0.2:  # what people cite: a call, a task, a ticket, an amount
                bit = rng.choice(("call", "step", "task", "ticket", "line", "order", "msg"))
                what = item.task_id if bit == "task" else str(rng.randint(1, 40 if bit != "order" else 9999))
                part = f"{bit} {what}"
            elif kind < 0.35:
                part = f"{rng.choice(_ADJECTIVES)} {rng.choice(_NOUNS)}"
            else:
                part = rng.choice(fill)
            parts.insert(rng.randint(1, len(parts)), part)
        words = _words(parts)[:want]
        reason = " ".join(words) if self.lowercase else " ".join(words).capitalize()
        self.written.append(reason)
        chars = len(reason)
        if rng.random() < r.paste_rate:  # part of it pasted (a quote from the conversation, notes)
            typed = round(chars * rng.uniform(0.0, 0.5))
            keys = round(typed * rng.uniform(1.03, 1.2)) + 1
            return reason, keys, True, typed / _lognormal(rng, r.typing_cps, 0.2) + rng.uniform(0.5, 2.0)
        keys = round(chars * rng.uniform(1.03, 1.2))
        return reason, keys, False, chars / _lognormal(rng, r.typing_cps, 0.2)

    def _ai_reason(self, item: Item, passed: bool, failed: Sequence[str]) -> str:
        rng = self.rng
        verdict = "pass" if passed else "fail"
        words = {slot: rng.choice(choices[0 if passed else 1]) for slot, choices in _AI_WORDS.items()}
        named = ", ".join(f"'{f}'" for f in failed[:2])
        if passed:
            detail = "All required checks are satisfied and no unintended changes were made."
        elif named:
            verb = "is" if len(failed[:2]) == 1 else "are"
            detail = f"However, {named} {verb} not satisfied, so the task was not completed."
        else:
            detail = "However, the required outcome was not achieved, so the task was not completed."
        text = rng.choice(_AI_TEMPLATES).format(
            family=item.family.replace("_", " "),
            detail=detail,
            detail_lower=detail[0].lower() + detail[1:],
            verdict=verdict.upper() if rng.random() < 0.5 else verdict,
            **words,
        )
        return self.prefix + text


_STOP = frozenset(_bank("a|an|the|is|it|its|what|must|where|one|to|of|for|in|on|was|were|be|by|and|or|that|this"))


def _gist(label: str, rng: random.Random) -> str:
    """A person's shorthand for a rubric row: two or three of its words and a verdict word."""
    content = [w for w in label.split() if w.lower() not in _STOP] or label.split()
    keep = sorted(rng.sample(range(len(content)), min(len(content), rng.randint(2, 3))))
    return " ".join(content[k] for k in keep) + " " + rng.choice(("wrong", "off", "not ok", "missing", "failed", "bad"))


def _rubric(checks: Sequence[CheckRef], passed: bool, rng: random.Random) -> dict[str, bool]:
    """Rubric answers consistent with the overall grade (see the module docstring)."""
    if passed:
        return {c.key: True for c in checks}
    rows = {c.key: c.verifier for c in checks}
    if rows and all(rows.values()):
        rows[rng.choice(sorted(rows))] = False
    return rows


# -- per-field signals ---------------------------------------------------------------


def ensure_signals_table(store: ReviewStore) -> None:
    """Create ``review_signals`` in the review database if it is missing."""
    with store.write() as conn:
        conn.execute(SIGNALS_SCHEMA)


def write_signals(conn: sqlite3.Connection, review_id: int, fields: Iterable[FieldSignal]) -> None:
    """Record a review's per-field signals (inside the caller's transaction)."""
    conn.executemany(
        "INSERT OR REPLACE INTO review_signals (review_id, field, seconds, keys, pasted) VALUES (?, ?, ?, ?, ?)",
        [(review_id, f.field, float(f.seconds), int(f.keys), int(f.pasted)) for f in fields],
    )


def read_signals(store: ReviewStore) -> dict[int, list[FieldSignal]]:
    """Review id → its per-field signals (empty where the database has none)."""
    with store.read() as conn:
        found = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='review_signals'").fetchone()
        if found is None:
            return {}
        rows = conn.execute(
            "SELECT review_id, field, seconds, keys, pasted FROM review_signals ORDER BY review_id, field"
        ).fetchall()
    out: dict[int, list[FieldSignal]] = {}
    for rid, name, seconds, keys, pasted in rows:
        out.setdefault(int(rid), []).append(FieldSignal(str(name), float(seconds), int(keys), bool(pasted)))
    return out


# -- the driver ----------------------------------------------------------------------


def seeded_store(path: str | Path, *, seed: int = 0, clock: SimClock | None = None) -> ReviewStore:
    """A new review database at ``path`` whose item ids and gold-turn secret follow ``seed``.

    For simulations only: the secret also signs the app's session cookies, and
    here anyone who knows the seed knows it. An existing file is refused.
    """
    p = Path(path)
    if p.exists() or p.is_symlink():
        raise MirrorworldError(f"{p} exists: a seeded review database is always a new one")
    clock = clock if clock is not None else SimClock()
    rng = random.Random(f"mirrorworld-sim/store/{seed}")
    first = ReviewStore(p, clock=clock, rng=rng)
    first.set_meta("secret", hashlib.sha256(f"mirrorworld-sim/secret/{seed}".encode()).hexdigest())
    return ReviewStore(p, clock=clock, rng=rng)


def accounts(store: ReviewStore, reviewers: Sequence[SimulatedReviewer]) -> dict[str, Reviewer]:
    """The review accounts of ``reviewers`` by name, made with ``store.add_reviewer`` where missing."""
    names = [r.name for r in reviewers]
    if len(set(names)) != len(names):
        raise MirrorworldError("simulated reviewers need distinct names")
    have = {r.name: r for r in store.reviewers()}
    for r in reviewers:
        if r.name not in have:
            rid = store.add_reviewer(r.name, r.password)
            found = store.reviewer(rid)
            assert found is not None
            have[r.name] = found
    return {n: have[n] for n in names}


@dataclass(frozen=True)
class SimulationGrade:
    """A grade that was submitted: who, which item (id and import place), what, and how it was made."""

    reviewer: str
    reviewer_id: int
    item_id: int
    run_id: int
    episode: int
    review_id: int
    gold: bool
    grade: SimulatedGrade

    def to_dict(self) -> dict[str, Any]:
        g = self.grade
        return {
            "reviewer": self.reviewer,
            "item": [self.run_id, self.episode],
            "gold": self.gold,
            "passed": g.passed,
            "truth": g.truth,
            "assisted": g.assisted,
            "seconds": g.seconds,
            "reason": g.reason,
            "rubric": dict(sorted(g.rubric.items())),
            "keys": g.reason_keys,
            "pasted": g.reason_pasted,
        }


@dataclass
class Simulation:
    """What :func:`simulate` did: the grades in submission order, who is paused at the end (name → reason),
    the time it spanned."""

    grades: list[SimulationGrade] = field(default_factory=list)
    paused: dict[str, str] = field(default_factory=dict)
    started_at: float = 0.0
    ended_at: float = 0.0

    def of(self, name: str) -> list[SimulationGrade]:
        return [g for g in self.grades if g.reviewer == name]

    def digest(self) -> str:
        """SHA-256 of the grades and pauses, keyed by import place (run, episode), not by item id."""
        body = {"grades": [g.to_dict() for g in self.grades], "paused": dict(sorted(self.paused.items()))}
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


Take = Callable[[ReviewStore, Reviewer], int | None]


def _default_truth(item: Item) -> bool:
    return item.gold_answer if item.gold_answer is not None else item.verifier_passed


def simulate(
    store: ReviewStore,
    reviewers: Sequence[SimulatedReviewer],
    *,
    items: int | None = None,
    clock: SimClock | None = None,
    truth: Callable[[Item], bool] | None = None,
    take: Take = take_next,
) -> Simulation:
    """Have ``reviewers`` grade from ``store``'s queue until each has ``items`` grades or gets nothing.

    Accounts are made where missing (:func:`accounts`). A reviewer stops when
    ``take`` (by default the queue's :func:`~mirrorworld.review.queue.take_next`;
    pass a routed one to route) gives them nothing: the queue has nothing left
    for them, or auto-pause paused them. The quality policy is read once, at the
    start (the app reads it per grade; it does not change during a simulation).
    Time is ``clock`` (by default the
    store's own clock when it is a :class:`SimClock`, else a new one at the
    store's present time): the store reads its time from it for the duration,
    so do not simulate on a store a live app is serving.
    """
    truth = truth or _default_truth
    ensure_signals_table(store)
    by_name = accounts(store, reviewers)
    own_clock = store.clock
    if clock is None:
        clock = own_clock if isinstance(own_clock, SimClock) else SimClock(own_clock())
    store.clock = clock
    result = Simulation(started_at=clock.t)
    known = {i.id: i for i in store.items()}
    pause = auto_pause(store, load_policy(store))  # the app loads it per request; it does not change here
    graders = [r.grader() for r in reviewers]
    done = [0] * len(reviewers)
    seq = 0
    heap: list[tuple[float, int, int, str, int, SimulatedGrade | None]] = []
    for i, g in enumerate(graders):
        heap.append((clock.t + _lognormal(g.rng, reviewers[i].break_seconds, 0.5), seq, i, "take", 0, None))
        seq += 1
    heapq.heapify(heap)
    try:
        while heap:
            at, _, i, kind, item_id, grade = heapq.heappop(heap)
            clock.t = max(clock.t, at)
            sim = reviewers[i]
            account = by_name[sim.name]
            if kind == "take":
                if items is not None and done[i] >= items:
                    continue
                got = take(store, account)  # the queue reads the account's pause itself
                if got is None:
                    continue
                item = known.get(got) or store.item(got)
                if item is None:
                    raise MirrorworldError(f"the queue handed out item {got}, which does not exist")
                known[got] = item
                made = graders[i].grade(item, bool(truth(item)))
                heapq.heappush(heap, (clock.t + made.seconds, seq, i, "submit", got, made))
                seq += 1
                continue
            assert grade is not None
            review_id = _submit(store, grade, item_id, account.id, pause)
            item = known[item_id]
            result.grades.append(
                SimulationGrade(
                    sim.name,
                    account.id,
                    item_id,
                    item.run_id,
                    item.episode,
                    review_id,
                    item.gold_answer is not None,
                    grade,
                )
            )
            done[i] += 1
            heapq.heappush(
                heap, (clock.t + _lognormal(graders[i].rng, sim.break_seconds, 0.5), seq, i, "take", 0, None)
            )
            seq += 1
    finally:
        store.clock = own_clock
    result.ended_at = clock.t
    now = {r.id: r for r in store.reviewers()}
    for name, account in by_name.items():
        current = now.get(account.id)
        if current is not None and current.paused:
            result.paused[name] = current.paused_reason or ""
    return result


def _submit(
    store: ReviewStore,
    grade: SimulatedGrade,
    item_id: int,
    reviewer_id: int,
    pause: Callable[[sqlite3.Connection, ReviewInput], None],
) -> int:
    """Submit as the app does (under ``auto_pause``), plus the per-field signals in the same transaction."""

    def after(conn: sqlite3.Connection, review: ReviewInput) -> None:
        pause(conn, review)
        row = conn.execute(
            "SELECT id FROM reviews WHERE item_id=? AND reviewer_id=?", (review.item_id, review.reviewer_id)
        ).fetchone()
        write_signals(conn, int(row[0]), grade.fields)

    review_id, _ = store.submit_review(grade.review_input(item_id, reviewer_id), after=after)
    return review_id
