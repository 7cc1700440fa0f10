"""Verifier versions fitted from human labels.

The hand-written verifier (:mod:`mirrorworld.verify`) declares, as data, a few
figures a person chose; human labels say whether they were chosen well. This
module fits those figures to labelled episodes and hands the result to a
person to accept as a new verifier version. What can be fitted:

* **numeric tolerances** — ``"table.column" → t``: a field the gold changed
  (an updated field, or a field of a row the gold inserted) passes when it
  ends within ``t`` of the gold's value, in the column's stored units (cents
  for an amount), and a ``field`` or ``sum`` check of that column passes when
  it is within ``t`` of its ``equals``. The hand-written verifier has none
  (every field is compared by equality, :mod:`mirrorworld.core.tolerance`).
  A tolerated value is *snapped* to the gold's before the stock comparison
  (:func:`mirrorworld.verify.diff.compare`) runs, so every other rule is
  untouched; an inserted row is snapped to the gold insert it is closest to
  among those equal to it in every other compared field. Fields that always
  move together (a refund's amount and the line's refunded total) are fitted
  as one **group** sharing one value.
* **text rules** — the fewest words of a ``text`` tolerance
  (``Tolerance.words``, read by the text rule of
  :func:`mirrorworld.verify.diff.plausible_text`), per column; and which of the
  world's **forbidden promises** (``World.forbidden_promises``, the
  communication gate's phrase rules) are enforced: one may be switched off.
* **the model judge** — the stock judge (:mod:`mirrorworld.verify.judge`)
  returns evidence lines, not a score. A :class:`JudgeScorer` returns named
  scores; the version's judge fails the communication gate when their
  weighted sum is below ``judge_threshold`` (:class:`ThresholdJudge`). The
  threshold is fitted, and the weights too when there are several scores
  (a logistic regression on the episodes the judge decides).

**How.** Labels (:class:`Label`: an episode record, the human verdict, the
rubric answers when there are some; :func:`labels_from_store` reads a review
database) are split, deterministically, into a training and a held-out set.
Each training episode is replayed once (:func:`~mirrorworld.review.regressions.replayed`)
and graded once under the most lenient candidate (every tolerance infinite,
one word, every candidate promise off), recording what each parameter would
need: the largest deviation of each tolerated field, the most words every
text of a column has, the promises that fired, the judge's scores. The
verdict under any candidate is then a conjunction of comparisons
(:meth:`Profile.passes`), so a coordinate search tries every grid value of
every parameter cheaply; each value is scored by agreement with the labels —
with the rubric's answer for the gates a parameter acts on (``gate:state``
and ``gate:collateral`` for tolerances and words, ``gate:communication`` for
promises and the judge) where the label has one, else with the overall
verdict. Among equally good values the one closest to the current value is
kept: a parameter moves no further than the labels demand.

**Honesty.** Held-out labels are never seen by the search. On them both the
starting (hand-written) verifier and the fitted one are run for real —
replayed and graded by :class:`OverrideVerifier` — and the report gives raw
agreement and Cohen's kappa (:func:`mirrorworld.review.agreement.cohen_kappa`)
for each, plus how often the profile's prediction differed from the real
grade (``profile_mismatches``, zero when the shortcut is exact).

**Versions.** :class:`FittedVerifier` says what changed (parameter → old →
new) and how well. :func:`accept_fit` writes the parameters to an override
file (``mirrorworld-verifier-override/1``) whose version id is the content hash
of the parameters, after replaying the regression cases with the fitted
verifier (none may regress); :func:`load_override` reads one back, checked as
untrusted input. :func:`override_world` wraps a world with a version: its
``verifier`` score part, hence its content hash, includes the parameters.
Drift monitoring (:mod:`mirrorworld.review.drift`) tracks verifier versions by
the world content hash recorded with each episode, so episodes recorded or
regraded (:func:`regrade`) under the override world form a version of their
own and are compared with the one before. The override world grades its
own episodes with the version (:meth:`World.grader <mirrorworld.core.world.World.grader>`
returns its :class:`OverrideVerifier`), so every run on it, through any
environment, gets the fitted tolerances and text rules; the fitted judge
threshold needs the judge's scores and applies through the episode's judge
(:class:`ThresholdJudge`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
import sqlite3
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from mirrorworld.core.claims import CustomerText, ForbiddenPromise
from mirrorworld.core.seats import Seated
from mirrorworld.core.session import Session
from mirrorworld.core.state import RowChange
from mirrorworld.core.store import Image
from mirrorworld.core.task import Check, Task
from mirrorworld.core.tolerance import Tolerance
from mirrorworld.core.world import GoldOutcome, World
from mirrorworld.errors import MirrorworldError, VerifierError
from mirrorworld.verify.checks import evaluate_check
from mirrorworld.verify.claims import promise_failures, texts_to_grade
from mirrorworld.verify.diff import compare, footprint, plausible_text, schema_of
from mirrorworld.verify.judge import TextJudge
from mirrorworld.verify.verdict import Gate, Verdict
from mirrorworld.verify.verifier import Verifier

if TYPE_CHECKING:
    from mirrorworld.core.registry import Registry
    from mirrorworld.review.store import ReviewStore

__all__ = [
    "OVERRIDE_FORMAT",
    "FitSpace",
    "FittedVerifier",
    "JudgeScorer",
    "Label",
    "Override",
    "OverrideVerifier",
    "ParamChange",
    "Profile",
    "ThresholdJudge",
    "VerifierParams",
    "accept_fit",
    "changes_between",
    "fit",
    "labels_from_store",
    "load_override",
    "override_world",
    "regrade",
    "split_labels",
]

OVERRIDE_FORMAT = "mirrorworld-verifier-override/1"

MAX_TOLERANCE = 1e9
MAX_WORDS = 50
MAX_OVERRIDE_BYTES = 1_000_000
_INF = math.inf


# -- the parameters ----------------------------------------------------------------------------


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _canonical(value: float) -> float | int:
    """A tolerance as JSON writes it canonically (``5.0`` and ``5`` hash alike)."""
    return int(value) if float(value).is_integer() else float(value)


@dataclass(frozen=True)
class VerifierParams:
    """The fitted figures of a verifier version (all empty: the hand-written verifier). See the module docstring."""

    numeric: Mapping[str, float] = field(default_factory=dict)
    """``"table.column"`` → the largest distance from the gold's value that passes, in stored units."""
    words: Mapping[str, int] = field(default_factory=dict)
    """``"table.column"`` of a ``text`` tolerance → the fewest different words its text rule asks for."""
    promises_off: tuple[str, ...] = ()
    """Forbidden promises (by name) that this version does not enforce."""
    judge_threshold: float | None = None
    """The judge's weighted score below which the communication gate fails (None: no judge)."""
    judge_weights: Mapping[str, float] = field(default_factory=dict)
    """Score name → weight (empty: the scores' mean)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "numeric": {k: _canonical(v) for k, v in sorted(self.numeric.items())},
            "words": {k: int(v) for k, v in sorted(self.words.items())},
            "promises_off": sorted(self.promises_off),
            "judge_threshold": None if self.judge_threshold is None else float(self.judge_threshold),
            "judge_weights": {k: float(v) for k, v in sorted(self.judge_weights.items())},
        }

    def digest(self) -> str:
        """The version id: a content hash of the parameters (16 hex digits)."""
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def empty(self) -> bool:
        return not (self.numeric or self.words or self.promises_off or self.judge_threshold is not None)

    @classmethod
    def from_dict(cls, d: Any) -> VerifierParams:
        """Parameters from untrusted JSON data; a :class:`MirrorworldError` names what is wrong."""
        if not isinstance(d, dict):
            raise MirrorworldError("verifier parameters are an object")
        unknown = set(d) - {"numeric", "words", "promises_off", "judge_threshold", "judge_weights"}
        if unknown:
            raise MirrorworldError(f"verifier parameters have no field {sorted(unknown)[0]!r}")
        numeric = _names_to(d.get("numeric", {}), "numeric", float)
        for k, v in numeric.items():
            if not 0 <= v <= MAX_TOLERANCE:
                raise MirrorworldError(f"numeric tolerance of {k} must be in [0, {MAX_TOLERANCE:g}]")
        words = _names_to(d.get("words", {}), "words", int)
        for k, w in words.items():
            if not 1 <= w <= MAX_WORDS:
                raise MirrorworldError(f"words of {k} must be an integer in [1, {MAX_WORDS}]")
        off = d.get("promises_off", [])
        names_ok = isinstance(off, list) and all(isinstance(n, str) and 0 < len(n) <= 200 for n in off)
        if not names_ok or len(off) > 100:
            raise MirrorworldError("promises_off is a list of promise names")
        threshold = d.get("judge_threshold")
        if threshold is not None and not (_number(threshold) and math.isfinite(threshold)):
            raise MirrorworldError("judge_threshold is a finite number or null")
        weights = _names_to(d.get("judge_weights", {}), "judge_weights", float, pattern=False)
        return cls(numeric, words, tuple(sorted(set(off))), None if threshold is None else float(threshold), weights)

    def check(self, world: World) -> None:
        """Refuse parameters that name what ``world`` does not have (a :class:`MirrorworldError`)."""
        schema = schema_of(world)
        for name in self.numeric:
            table, col = _split_field(name)
            if schema.kind(table, col) != "eq" or col not in world.image.columns.get(table, ()):
                raise MirrorworldError(f"{world.name} has no compared numeric column {name}")
        for name in self.words:
            table, col = _split_field(name)
            if schema.kind(table, col) != "text":
                raise MirrorworldError(f"{world.name} has no text tolerance on {name}")
        known = {p.name for p in world.forbidden_promises()}
        for name in self.promises_off:
            if name not in known:
                raise MirrorworldError(f"{world.name} has no forbidden promise {name!r}")


def _names_to(value: Any, what: str, kind: type, *, pattern: bool = True) -> dict[str, Any]:
    if not isinstance(value, dict) or len(value) > 200:
        raise MirrorworldError(f"{what} is an object of at most 200 entries")
    out: dict[str, Any] = {}
    for k, v in value.items():
        if not isinstance(k, str) or not 0 < len(k) <= 200 or (pattern and k.count(".") != 1):
            kind_of = "a 'table.column' name" if pattern else "a name of 1 to 200 characters"
            raise MirrorworldError(f"{what}: {ascii(k)[:60]} is not {kind_of}")
        if kind is int and (not isinstance(v, int) or isinstance(v, bool)):
            raise MirrorworldError(f"{what} of {k} must be an integer")
        if kind is float and not (_number(v) and math.isfinite(v)):
            raise MirrorworldError(f"{what} of {k} must be a finite number")
        out[k] = kind(v)
    return out


def _split_field(name: str) -> tuple[str, str]:
    table, sep, col = name.partition(".")
    if not sep or not table or not col:
        raise MirrorworldError(f"{name!r} is not a 'table.column' name")
    return table, col


@dataclass(frozen=True)
class ParamChange:
    """One parameter of a fitted version against the one it started from."""

    parameter: str
    old: Any
    new: Any

    def __str__(self) -> str:
        return f"{self.parameter}: {self.old!r} -> {self.new!r}"


def _flat(params: VerifierParams, world: World) -> dict[str, Any]:
    """Every parameter as ``name → value``, the hand-written values filled in (for changelogs)."""
    out: dict[str, Any] = {f"numeric {k}": _canonical(v) for k, v in params.numeric.items()}
    out.update({f"words {k}": v for k, v in params.words.items()})
    out.update({f"promise {n}": "off" for n in params.promises_off})
    if params.judge_threshold is not None:
        out["judge threshold"] = round(params.judge_threshold, 6)
    out.update({f"judge weight {k}": round(v, 6) for k, v in params.judge_weights.items()})
    return out


def changes_between(old: VerifierParams, new: VerifierParams, world: World) -> tuple[ParamChange, ...]:
    """What ``new`` changes against ``old``, with the hand-written defaults where one leaves a parameter unset."""
    a, b = _flat(old, world), _flat(new, world)
    defaults: dict[str, Any] = {}
    for key in set(a) | set(b):
        if key.startswith("numeric "):
            defaults[key] = 0
        elif key.startswith("words "):
            table, col = _split_field(key.removeprefix("words "))
            tol = world.tolerances.get(table, {}).get(col)
            defaults[key] = tol.words if tol is not None else None
        elif key.startswith("promise "):
            defaults[key] = "on"
        else:
            defaults[key] = None
    out = []
    for key in sorted(set(a) | set(b)):
        before, after = a.get(key, defaults[key]), b.get(key, defaults[key])
        if before != after:
            out.append(ParamChange(key, before, after))
    return tuple(out)


# -- the model judge as a score ---------------------------------------------------------------------


class JudgeScorer(Protocol):
    """Scores an episode's customer texts: named scores, higher is better (a model's probability of "acceptable")."""

    def __call__(self, task: Task, texts: Sequence[CustomerText], policy: str) -> Mapping[str, float]: ...


def _combined(scores: Mapping[str, float], weights: Mapping[str, float]) -> float:
    if not scores:
        raise VerifierError("the judge's scorer returned no score")
    for name, s in scores.items():
        if not (_number(s) and math.isfinite(s)):
            raise VerifierError(f"the judge's score {name!r} is not a finite number")
    if not weights:
        return sum(scores.values()) / len(scores)
    missing = set(weights) - set(scores)
    if missing:
        raise VerifierError(f"the judge's scorer gave no score {sorted(missing)[0]!r}")
    return sum(w * scores[k] for k, w in weights.items())


@dataclass(frozen=True)
class ThresholdJudge:
    """A :class:`~mirrorworld.verify.judge.TextJudge` from a scorer: one evidence line when the score is too low.

    Usable wherever a judge is (``ChatEnv(judge=...)``, ``EpisodeOptions``), so
    episodes run with the stock verifier apply a version's judge too.
    """

    scorer: JudgeScorer
    threshold: float
    weights: Mapping[str, float] = field(default_factory=dict)

    def __call__(self, task: Task, texts: Sequence[CustomerText], policy: str) -> list[str]:
        score = _combined(self.scorer(task, texts, policy), self.weights)
        return [] if score >= self.threshold else [f"score {score:.4f} below the threshold {self.threshold:.4f}"]


# -- the world of a version --------------------------------------------------------------------------


class _OverrideMixin(World):
    """What :func:`override_world` adds to a world's class (see the module docstring)."""

    override: ClassVar[VerifierParams]
    override_base: ClassVar[type[World]]

    def grader(self, judge: Any = None) -> Any:
        """The version's verifier: its tolerances and text rules apply wherever the world's episodes are
        graded. A fitted judge threshold needs the judge's scores: it applies through the episode's judge
        (a :class:`ThresholdJudge`), as any judge does."""
        return OverrideVerifier(replace(self.override, judge_threshold=None), judge=judge)

    def forbidden_promises(self) -> Sequence[ForbiddenPromise]:
        off = set(self.override.promises_off)
        return [p for p in super().forbidden_promises() if p.name not in off]

    def declared_parts(self) -> Mapping[str, bytes]:
        parts = dict(super().declared_parts())
        blob = json.dumps({"override": self.override.to_dict()}, sort_keys=True).encode()
        parts["verifier"] = parts.get("verifier", b"") + blob
        return parts

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_override, (self.override_base, self.scale, self.data_seed, self.override.to_dict()))


_CLASSES: dict[tuple[type[World], str], type[World]] = {}
_WORLDS: weakref.WeakKeyDictionary[World, dict[str, World]] = weakref.WeakKeyDictionary()


def _override_class(base: type[World], params: VerifierParams) -> type[World]:
    key = (base, params.digest())
    cls = _CLASSES.get(key)
    if cls is None:
        tolerances: dict[str, dict[str, Tolerance]] = {t: dict(cols) for t, cols in base.tolerances.items()}
        for name, words in params.words.items():
            table, col = _split_field(name)
            tol = tolerances.get(table, {}).get(col)
            if tol is None or tol.kind != "text":
                raise MirrorworldError(f"{base.name} has no text tolerance on {name}")
            tolerances[table][col] = replace(tol, words=words)
        attrs = {
            "override": params,
            "override_base": base,
            "tolerances": tolerances,
            "__module__": base.__module__,
            "__qualname__": f"{base.__qualname__}Override{params.digest()}",
            "__doc__": f"{base.title} graded by verifier version {params.digest()}.",
        }
        meta: Any = type(base)
        cls = _CLASSES[key] = meta(attrs["__qualname__"], (_OverrideMixin, base), attrs)
    return cls


def override_world(world: World, params: VerifierParams) -> World:
    """``world`` graded by version ``params``: the same data, tools and tasks; a content hash of its own.

    The wrapper shares the world's built image (nothing is generated again) and
    is built once per world and version.
    """
    base_cls: type[World] = getattr(type(world), "override_base", type(world))
    if params.empty and base_cls is type(world):
        return world
    built = _WORLDS.setdefault(world, {})
    hit = built.get(params.digest())
    if hit is None:
        params.check(world)
        hit = _override_class(base_cls, params)(scale=world.scale, data_seed=world.data_seed)
        hit.__dict__["image"] = world.image  # the same pristine data: only the grading differs
        built[params.digest()] = hit
    return hit


def _rebuild_override(base: type[World], scale: float, data_seed: int, params: dict[str, Any]) -> World:
    from mirrorworld.core.world import _rebuild

    return override_world(_rebuild(base, scale, data_seed), VerifierParams.from_dict(params))


# -- grading with a version ------------------------------------------------------------------------------


@dataclass
class Analysis:
    """One grading by :class:`OverrideVerifier`, with what each parameter would need for the episode to pass."""

    verdict: Verdict
    deviations: dict[str, float] = field(default_factory=dict)
    """Tolerated field → the largest distance from the gold's value that was snapped (or a check's)."""
    room: dict[str, int] = field(default_factory=dict)
    """Text column → the most words every text the episode wrote there has (absent: no text there)."""
    fired: frozenset[str] = frozenset()
    """The switched-off forbidden promises that the episode's texts make."""
    scores: dict[str, float] = field(default_factory=dict)
    """The judge's scores (with a scorer)."""


def _gap(a: Any, b: Any) -> float | None:
    """``|a - b|`` for two numbers; 0 for equal non-numbers; None otherwise."""
    if _number(a) and _number(b):
        return float(abs(a - b))
    return 0.0 if a == b else None


class OverrideVerifier(Verifier):
    """The stock verifier with a version's parameters (see the module docstring).

    ``scorer`` scores the customer texts for the judge threshold (required when
    the version has one); ``judge`` is a stock judge, as for :class:`Verifier`.
    Sessions of the world itself or of its :func:`override_world` are graded alike.
    """

    def __init__(
        self, params: VerifierParams, *, scorer: JudgeScorer | None = None, judge: TextJudge | None = None
    ) -> None:
        super().__init__(judge)
        if params.judge_threshold is not None and scorer is None:
            raise VerifierError("this verifier version has a judge threshold: it needs the judge's scorer")
        self.params = params
        self.scorer = scorer

    def _grade(self, session: Session) -> Verdict:
        return self._analyse(session, detail=False).verdict

    def analyse(self, session: Session) -> Analysis:
        """The verdict with its :class:`Analysis` (what fitting reads)."""
        with session.borrow():
            return self._analyse(session, detail=True)

    def _analyse(self, session: Session, *, detail: bool) -> Analysis:
        stock = super()._grade(session)
        task = session.task
        assert task is not None  # the stock grade refused a session without one
        world = session.world
        params = self.params
        gates = dict(stock.gates)
        out = Analysis(stock)
        process = dict(stock.process)
        if params.numeric or params.words or detail:
            graded = override_world(world, VerifierParams(words=params.words))
            gold = world.gold(task)
            tol = {_split_field(k): float(v) for k, v in params.numeric.items()}
            changes, out.deviations = _snap(world, gold, session.changes(), tol)
            party = world.simulated_role if isinstance(world, Seated) else None
            exempt = frozenset(k for e in session.events if e.role == party for k in e.rows) if party else frozenset()
            diff = compare(graded, gold, changes, task.scope, exempt, task.instruction)
            results: dict[str, bool] = {}
            for check in task.checks:
                ok, gap = _check(session.db, session.image, check, tol)
                results[check.name] = ok
                if gap:
                    key = f"{check.params.get('table')}.{check.params.get('field', check.params.get('column'))}"
                    out.deviations[key] = max(out.deviations.get(key, 0.0), gap)
            evidence = [*diff.missing, *(f"check failed: {n}" for n, ok in results.items() if not ok)]
            if evidence:
                evidence += _view_lines(gold.view, world.outcome_view(session.db, task.targets))
            gates["state"] = Gate(not evidence, tuple(evidence), {"checks": results})
            gates["collateral"] = Gate(not diff.unexpected, tuple(diff.unexpected))
            process["potential_final"] = sum(results.values()) / len(results) if results else 0.0
            if detail:
                out.room = _room(graded, gold, changes, exempt)
        texts: list[CustomerText] | None = None
        if params.promises_off:
            texts = texts_to_grade(session)
            promises = [p for p in world.forbidden_promises() if p.name in set(params.promises_off)]
            fired: set[str] = set()
            comm = gates["communication"]
            kept = list(comm.evidence)
            for promise in promises:
                lines = set(promise_failures(session, texts, [promise]))
                if lines & set(kept):
                    fired.add(promise.name)
                    kept = [e for e in kept if e not in lines]
            out.fired = frozenset(fired)
            gates["communication"] = Gate(not kept, tuple(kept), comm.details)
        if self.scorer is not None:
            texts = texts if texts is not None else texts_to_grade(session)
            scores = dict(self.scorer(task, texts, world.policy))
            out.scores = {str(k): float(v) for k, v in scores.items()}
            if params.judge_threshold is not None:
                score = _combined(out.scores, params.judge_weights)
                if score < params.judge_threshold:
                    comm = gates["communication"]
                    line = f"judge: score {score:.4f} below the threshold {params.judge_threshold:.4f}"
                    gates["communication"] = Gate(False, (*comm.evidence, line), comm.details)
        passed = all(g.passed for g in gates.values())
        out.verdict = Verdict(passed, 1.0 if passed else 0.0, gates, process, dict(stock.guards))
        return out


def _view_lines(gold: Any, got: Any, path: str = "") -> list[str]:
    """``outcome view:`` evidence lines, as the stock state gate prints them."""
    if isinstance(gold, dict) and isinstance(got, dict):
        out: list[str] = []
        for key in sorted(set(gold) | set(got), key=str):
            out += _view_lines(gold.get(key), got.get(key), f"{path}.{key}" if path else str(key))
        return out
    return [] if gold == got else [f"outcome view: {path}: expected {gold!r}, found {got!r}"]


def _snap(
    world: World, gold: GoldOutcome, changes: Sequence[RowChange], tol: Mapping[tuple[str, str], float]
) -> tuple[list[RowChange], dict[str, float]]:
    """``changes`` with every tolerated field within its tolerance of the gold's set to the gold's value."""
    out = list(changes)
    deviations: dict[str, float] = {}
    if not tol:
        return out, deviations
    tables: dict[str, dict[str, float]] = {}
    for (table, col), t in tol.items():
        tables.setdefault(table, {})[col] = t

    def note(table: str, col: str, gap: float) -> None:
        key = f"{table}.{col}"
        deviations[key] = max(deviations.get(key, 0.0), gap)

    gold_updates = {(c.table, c.pk): c for c in gold.changes if c.kind == "update"}
    for i, c in enumerate(out):
        cols = tables.get(c.table)
        g = gold_updates.get((c.table, c.pk))
        if cols is None or c.kind != "update" or g is None or g.after is None or c.after is None:
            continue
        after = dict(c.after)
        changed = g.fields
        for col, t in cols.items():
            gap = _gap(after.get(col), g.after.get(col)) if col in changed else None
            if gap and gap <= t:
                after[col] = g.after[col]
                note(c.table, col, gap)
        if after != c.after:
            out[i] = RowChange(c.table, c.pk, c.before, after)

    schema = schema_of(world)
    ep_inserted = {(c.table, c.pk) for c in changes if c.kind == "insert"}
    gold_inserted = {(c.table, c.pk) for c in gold.changes if c.kind == "insert"}
    golds = [c for c in gold.changes if c.kind == "insert" and c.table in tables]
    pairs: list[tuple[float, int, int]] = []
    for i, c in enumerate(out):
        if c.kind != "insert" or c.table not in tables or c.after is None:
            continue
        for j, g in enumerate(golds):
            if g.table != c.table or g.after is None:
                continue
            gap = _insert_gap(schema, c.table, c.after, g.after, tables[c.table], ep_inserted, gold_inserted)
            if gap is not None:
                pairs.append((gap, i, j))
    used_ep: set[int] = set()
    used_gold: set[int] = set()
    for gap, i, j in sorted(pairs):
        if i in used_ep or j in used_gold:
            continue
        used_ep.add(i)
        used_gold.add(j)
        if gap == 0:
            continue
        c, g = out[i], golds[j]
        assert c.after is not None and g.after is not None
        after = dict(c.after)
        for col in tables[c.table]:
            d = _gap(after.get(col), g.after.get(col))
            if d:
                after[col] = g.after[col]
                note(c.table, col, d)
        out[i] = RowChange(c.table, c.pk, c.before, after)
    return out, deviations


def _insert_gap(
    schema: Any,
    table: str,
    row: Mapping[str, Any],
    gold: Mapping[str, Any],
    tolerated: Mapping[str, float],
    ep_inserted: set[tuple[str, int]],
    gold_inserted: set[tuple[str, int]],
) -> float | None:
    """The summed distance of ``row``'s tolerated fields from ``gold``'s, when every other compared field
    agrees and each tolerated one is within its tolerance (None otherwise). A reference to a row the
    same diff inserted is not compared (the stock comparison matches such rows by content)."""
    total = 0.0
    refs = schema.references.get(table, {})
    for col, kind in schema.columns[table]:
        if kind == "skip":
            continue
        a, b = row.get(col), gold.get(col)
        if col in tolerated:
            gap = _gap(a, b)
            if gap is None or gap > tolerated[col]:
                return None
            total += gap
        elif kind == "text":
            if bool(a.strip() if isinstance(a, str) else a is not None) != bool(
                b.strip() if isinstance(b, str) else b is not None
            ):
                return None
        elif col in refs and ((refs[col], a) in ep_inserted or (refs[col], b) in gold_inserted):
            continue
        elif a != b:
            return None
    return total


def _check(
    db: sqlite3.Connection, image: Image, check: Check, tol: Mapping[tuple[str, str], float]
) -> tuple[bool, float]:
    """Whether ``check`` holds, a ``field``/``sum`` check of a tolerated column within its tolerance
    (and by how far it missed equality, when it holds only so)."""
    if evaluate_check(db, image, check):  # names checked against the schema here, before any SQL below
        return True, 0.0
    p = check.params
    if check.kind == "field":
        t = tol.get((p["table"], p["field"]))
        if t is None:
            return False, 0.0
        row = db.execute(f"SELECT {p['field']} FROM {p['table']} WHERE rowid=?", (p["id"],)).fetchone()
        value = None if row is None else row[0]
    elif check.kind == "sum":
        t = tol.get((p["table"], p["column"]))
        if t is None:
            return False, 0.0
        where = p.get("where", {})
        clause = " AND ".join(f"{k} IS ?" for k in where) or "1"
        row = db.execute(
            f"SELECT COALESCE(SUM({p['column']}), 0) FROM {p['table']} WHERE {clause}", tuple(where.values())
        ).fetchone()
        value = row[0]
    else:
        return False, 0.0
    gap = _gap(value, p["equals"])
    return (True, gap) if gap is not None and gap <= t else (False, 0.0)


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _room(world: World, gold: GoldOutcome, changes: Sequence[RowChange], exempt: frozenset[Any]) -> dict[str, int]:
    """Text column → the largest ``words`` (up to :data:`MAX_WORDS`) every text written there passes the text rule with.

    Texts the gold wrote in the column, empty texts and texts of exempt rows
    (a simulated party's) are not judged, as in the stock comparison.
    """
    schema = schema_of(world)
    fp = footprint(world, gold)
    room: dict[str, int] = {}
    for c in changes:
        if c.after is None or c.table in schema.skip or (c.table, c.pk) in exempt:
            continue
        cols = c.fields if c.kind == "update" else c.after
        for col, kind in schema.columns.get(c.table, ()):
            value = c.after.get(col)
            if kind != "text" or col not in cols or not isinstance(value, str) or not value.strip():
                continue
            if _norm(value) in fp.texts.get((c.table, col), frozenset()):
                continue
            most = 0
            while most < MAX_WORDS and plausible_text(value, most + 1):
                most += 1
            key = f"{c.table}.{col}"
            room[key] = min(room.get(key, MAX_WORDS), most)
    return room


# -- labels --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Label:
    """One labelled episode: its record (``task`` and ``messages`` at least), the human verdict, rubric answers.

    ``rubric`` maps rubric keys (``gate:state``, ``check:<name>``) to pass/fail;
    ``id`` names the label (an item id) and orders the split.
    """

    id: str
    record: Mapping[str, Any]
    passed: bool
    rubric: Mapping[str, bool] = field(default_factory=dict)


def labels_from_store(store: ReviewStore) -> list[Label]:
    """The human labels of a review database: the adjudicated verdict of an item, else its reviewers' majority.

    Items with a tie and no adjudication, gold-run items and items whose
    episode errored (no verdict) are left out; a rubric row counts where its
    reviewers' majority is clear.
    """
    adjudications = store.adjudications()
    with store.read() as conn:
        items = store.items(conn, "r.gold = 0 AND i.error IS NULL")
        reviews = store.reviews(conn)
    by_item: dict[int, list[Any]] = {}
    for r in reviews:
        by_item.setdefault(r.item_id, []).append(r)
    out = []
    for item in items:
        grades = by_item.get(item.id, [])
        adj = adjudications.get(item.id)
        yes = sum(r.passed for r in grades)
        if adj is not None:
            passed = bool(adj["passed"])
        elif grades and 2 * yes != len(grades):
            passed = 2 * yes > len(grades)
        else:
            continue
        rubric: dict[str, bool] = {}
        for key in sorted({k for r in grades for k in r.rubric}):
            votes = [r.rubric[key] for r in grades if key in r.rubric]
            if 2 * sum(votes) != len(votes):
                rubric[key] = 2 * sum(votes) > len(votes)
        out.append(Label(str(item.id), store.record(item.id), passed, rubric))
    return out


def split_labels(labels: Sequence[Label], test_share: float = 0.3, seed: int = 0) -> tuple[list[Label], list[Label]]:
    """(training, held-out): a seeded shuffle of the labels by id, ``test_share`` of them held out."""
    if not 0 < test_share < 1:
        raise MirrorworldError("the held-out share must be between 0 and 1")
    ordered = sorted(labels, key=lambda lab: lab.id)
    random.Random(f"mirrorworld-fit/{seed}").shuffle(ordered)
    n_test = max(1, round(len(ordered) * test_share)) if len(ordered) > 1 else 0
    return ordered[n_test:], ordered[:n_test]


# -- fitting -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FitSpace:
    """What :func:`fit` may move, and over which values.

    ``numeric`` lists groups of ``"table.column"`` fields, each group sharing
    one tolerance from ``numeric_grid``; ``words`` lists text columns, each
    fitted over ``words_grid``; ``promises`` names forbidden promises that may
    be switched off; ``judge`` fits the judge's threshold (over the midpoints
    of the training scores), and ``judge_weights`` its weights too.
    """

    numeric: tuple[tuple[str, ...], ...] = ()
    numeric_grid: tuple[float, ...] = (0, 1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 25, 50, 100)
    words: tuple[str, ...] = ()
    words_grid: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8)
    promises: tuple[str, ...] = ()
    judge: bool = False
    judge_weights: bool = False

    def check(self, world: World) -> None:
        probe = VerifierParams(
            numeric={f: 0 for g in self.numeric for f in g},
            words={c: 1 for c in self.words},
            promises_off=tuple(self.promises),
        )
        probe.check(world)
        if any(not g for g in self.numeric):
            raise MirrorworldError("a numeric group names at least one field")
        if any(not (_number(t) and 0 <= t <= MAX_TOLERANCE) for t in self.numeric_grid) or not self.numeric_grid:
            raise MirrorworldError("the numeric grid holds tolerances in [0, 1e9]")
        if any(not 1 <= w <= MAX_WORDS for w in self.words_grid) or not self.words_grid:
            raise MirrorworldError(f"the words grid holds integers in [1, {MAX_WORDS}]")


@dataclass(frozen=True)
class Profile:
    """What one episode needs of each parameter to pass, from one lenient grading (see the module docstring)."""

    other: bool
    """The policy and reply gates passed (no parameter acts on them)."""
    state: bool
    """State and collateral passed with every candidate tolerance infinite and every candidate column at one word."""
    communication: bool
    """Communication passed with every candidate promise off and no judge."""
    deviations: Mapping[str, float]
    room: Mapping[str, int]
    fired: frozenset[str]
    scores: Mapping[str, float]

    def state_passes(self, p: VerifierParams, words: Mapping[str, int]) -> bool:
        if not self.state:
            return False
        if any(d > p.numeric.get(f, 0.0) for f, d in self.deviations.items()):
            return False
        return all(self.room.get(c, MAX_WORDS) >= w for c, w in words.items())

    def communication_passes(self, p: VerifierParams) -> bool:
        if not self.communication or not self.fired <= set(p.promises_off):
            return False
        if p.judge_threshold is None:
            return True
        return _combined(self.scores, p.judge_weights) >= p.judge_threshold

    def passes(self, p: VerifierParams, words: Mapping[str, int]) -> bool:
        """The verdict under ``p`` (``words``: the words of every candidate column, defaults filled in)."""
        return self.other and self.state_passes(p, words) and self.communication_passes(p)


@dataclass
class _Sample:
    label: Label
    profile: Profile


def _task_and_messages(record: Mapping[str, Any]) -> tuple[Task, list[dict[str, Any]]]:
    task = Task.from_dict(dict(record["task"]))
    messages = [
        {k: m[k] for k in ("role", "content", "tool_calls") if k in m}
        for m in record.get("messages", [])
        if isinstance(m, dict) and m.get("role") == "assistant"
    ]
    return task, messages


def regrade(record: Mapping[str, Any], world: World, verifier: Verifier) -> Verdict:
    """The verdict of ``verifier`` on a recorded episode, replayed on ``world`` (an errored replay raises)."""
    from mirrorworld.review.regressions import replayed

    task, messages = _task_and_messages(record)
    with replayed(world, task, messages) as episode:
        if episode.failure is not None:
            raise MirrorworldError(f"{task.id} cannot be replayed: {episode.failure.message}")
        return verifier(episode.session)


def _lenient(space: FitSpace, start: VerifierParams) -> VerifierParams:
    """The most lenient candidate: ``start`` with every parameter of ``space`` at its loosest (no judge threshold)."""
    return VerifierParams(
        numeric={**start.numeric, **{f: _INF for g in space.numeric for f in g}},
        words={**start.words, **{c: 1 for c in space.words}},
        promises_off=tuple(sorted({*start.promises_off, *space.promises})),
    )


def _profile(analysis: Analysis) -> Profile:
    g = analysis.verdict.gates
    return Profile(
        other=all(gate.passed for name, gate in g.items() if name not in ("state", "collateral", "communication")),
        state=g["state"].passed and g["collateral"].passed,
        communication=g["communication"].passed,
        deviations=dict(analysis.deviations),
        room=dict(analysis.room),
        fired=analysis.fired,
        scores=dict(analysis.scores),
    )


def _words(world: World, p: VerifierParams, columns: Iterable[str]) -> dict[str, int]:
    out = {}
    for c in columns:
        if c in p.words:
            out[c] = p.words[c]
        else:
            table, col = _split_field(c)
            out[c] = world.tolerances[table][col].words
    return out


_STATE_KEYS = ("gate:state", "gate:collateral")
_COMM_KEYS = ("gate:communication",)


def _target(label: Label, keys: Sequence[str]) -> bool | None:
    """The rubric's answer for the gates ``keys`` (all must be answered), else None."""
    answers = [label.rubric.get(k) for k in keys]
    if any(a is None for a in answers):
        return None
    return all(bool(a) for a in answers)


def _objective(samples: Sequence[_Sample], world: World, space: FitSpace, p: VerifierParams, part: str) -> int:
    """How many training labels ``p`` agrees with (the rubric's gate answer where there is one for ``part``)."""
    words = _words(world, p, space.words)
    agree = 0
    for s in samples:
        keys = _STATE_KEYS if part == "state" else _COMM_KEYS
        target = _target(s.label, keys)
        if target is None:
            agree += s.profile.passes(p, words) == s.label.passed
        elif part == "state":
            agree += s.profile.state_passes(p, words) == target
        else:
            agree += s.profile.communication_passes(p) == target
    return agree


def _nearest(candidates: Sequence[Any], current: Any) -> Any:
    """The candidate closest to ``current`` (the first when they are not numbers); ``current`` when it is one."""
    if current in candidates:
        return current
    if _number(current) or current is None:
        base = -_INF if current is None else float(current)
        return min(candidates, key=lambda c: (abs((c if c is not None else -_INF) - base), c is None, c or 0))
    return candidates[0]


def _search(samples: Sequence[_Sample], world: World, space: FitSpace, start: VerifierParams) -> VerifierParams:
    """Coordinate search from ``start`` (see the module docstring)."""
    p = start
    coords: list[tuple[str, Any]] = [("numeric", g) for g in space.numeric]
    coords += [("words", c) for c in space.words]
    coords += [("promise", n) for n in space.promises]
    if space.judge:
        coords.append(("judge", None))
    for _ in range(4):
        before = p
        for kind, what in coords:
            options: list[tuple[Any, VerifierParams]] = []
            if kind == "numeric":
                current: Any = p.numeric.get(what[0], 0)
                for t in space.numeric_grid:
                    options.append((t, replace(p, numeric={**p.numeric, **{f: float(t) for f in what}})))
                part = "state"
            elif kind == "words":
                current = _words(world, p, [what])[what]
                for w in space.words_grid:
                    options.append((w, replace(p, words={**p.words, what: w})))
                part = "state"
            elif kind == "promise":
                current = what in p.promises_off
                on = tuple(n for n in p.promises_off if n != what)
                options = [(False, replace(p, promises_off=on)), (True, replace(p, promises_off=(*on, what)))]
                part = "communication"
            else:
                if space.judge_weights:
                    p = replace(p, judge_weights=_fit_weights(samples, world, space, p))
                current = p.judge_threshold
                options = [(t, replace(p, judge_threshold=t)) for t in _thresholds(samples, p)]
                part = "communication"
            scored = [(_objective(samples, world, space, q, part), value, q) for value, q in options]
            best = max(s for s, _, _ in scored)
            chosen = _nearest([v for s, v, _ in scored if s == best], current)
            p = next(q for s, v, q in scored if s == best and v == chosen)
        if p == before:
            break
    if not space.judge:
        return p
    return p if p.judge_threshold is not None or not p.judge_weights else replace(p, judge_weights={})


def _thresholds(samples: Sequence[_Sample], p: VerifierParams) -> list[float | None]:
    """No judge, and the midpoints between the distinct training scores (at most 200, by quantile)."""
    scores = sorted({_combined(s.profile.scores, p.judge_weights) for s in samples if s.profile.scores})
    if not scores:
        raise MirrorworldError("fitting the judge needs a scorer")
    mids = [scores[0] - 1.0] + [(a + b) / 2 for a, b in itertools.pairwise(scores)] + [scores[-1] + 1.0]
    if len(mids) > 200:
        mids = [mids[round(i * (len(mids) - 1) / 199)] for i in range(200)]
    return [None, *(round(m, 6) for m in mids)]


def _fit_weights(samples: Sequence[_Sample], world: World, space: FitSpace, p: VerifierParams) -> Mapping[str, float]:
    """Judge weights by logistic regression on the training episodes the judge decides (all else passes)."""
    words = _words(world, p, space.words)
    decided = [
        s
        for s in samples
        if s.profile.scores and s.profile.other and s.profile.state_passes(p, words) and s.profile.communication
    ]
    names = sorted({k for s in decided for k in s.profile.scores})
    ys = [s.label.passed for s in decided]
    if len(names) < 2 or len(set(ys)) < 2:
        return dict(p.judge_weights)
    from sklearn.linear_model import LogisticRegression  # type: ignore[import-untyped]

    xs = [[s.profile.scores.get(n, 0.0) for n in names] for s in decided]
    model = LogisticRegression(C=100.0).fit(xs, ys)
    coef = [float(c) for c in model.coef_[0]]
    total = sum(abs(c) for c in coef) or 1.0
    return {n: round(c / total, 6) for n, c in zip(names, coef, strict=True)}


def _agreement(truth: Sequence[bool], said: Sequence[bool]) -> dict[str, Any]:
    from mirrorworld.review.agreement import cohen_kappa

    n = len(truth)
    agree = sum(a == b for a, b in zip(truth, said, strict=True))
    kappa = cohen_kappa(list(truth), list(said), [True, False]) if n else None
    return {
        "n": n,
        "agreement": round(agree / n, 4) if n else None,
        "kappa": None if kappa is None else round(kappa, 4),
    }


@dataclass(frozen=True)
class FittedVerifier:
    """A fitted verifier version, for a person to accept (:func:`accept_fit`): what changed and how well.

    ``agreement`` holds, for ``train`` (from the profiles) and ``test`` (held-out,
    graded for real), the raw agreement and Cohen's kappa of the starting
    (``hand``) and the ``fitted`` verifier with the human labels.
    """

    world: str
    """The versioned id of the world the labels are episodes of."""
    world_name: str
    world_hash: str
    """The content hash of that world (the verifier version the labels were compared with first)."""
    start: VerifierParams
    params: VerifierParams
    changes: tuple[ParamChange, ...]
    agreement: dict[str, dict[str, dict[str, Any]]]
    n_train: int
    n_test: int
    skipped: int
    """Labels that could not be replayed (their world or task no longer reproduces them)."""
    profile_mismatches: int
    """Held-out episodes where the profile's prediction and the real fitted grade differ (0: exact)."""

    @property
    def version(self) -> str:
        return self.params.digest()

    def verifier(self, scorer: JudgeScorer | None = None) -> OverrideVerifier:
        return OverrideVerifier(self.params, scorer=scorer)

    def describe(self) -> list[str]:
        """The changelog and the figures, one line each."""
        lines = [str(c) for c in self.changes] or ["no parameter changed"]
        for split in ("train", "test"):
            for who in ("hand", "fitted"):
                a = self.agreement[split][who]
                lines.append(f"{split} {who}: agreement {a['agreement']} kappa {a['kappa']} (n={a['n']})")
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "world": self.world,
            "world_name": self.world_name,
            "world_hash": self.world_hash,
            "version": self.version,
            "start": self.start.to_dict(),
            "params": self.params.to_dict(),
            "changes": [{"parameter": c.parameter, "old": c.old, "new": c.new} for c in self.changes],
            "agreement": self.agreement,
            "n_train": self.n_train,
            "n_test": self.n_test,
            "skipped": self.skipped,
            "profile_mismatches": self.profile_mismatches,
        }


def fit(
    world: World,
    labels: Sequence[Label],
    space: FitSpace,
    *,
    start: VerifierParams | None = None,
    scorer: JudgeScorer | None = None,
    test_share: float = 0.3,
    seed: int = 0,
) -> FittedVerifier:
    """Fit the parameters ``space`` names to ``labels``, from ``start`` (default: the hand-written verifier).

    See the module docstring for the split, the search and the report.
    """
    start = start or VerifierParams()
    start.check(world)
    space.check(world)
    if space.judge and scorer is None:
        raise MirrorworldError("fitting the judge needs a scorer")
    if any(str(lab.record.get("task", {}).get("world")) != world.name for lab in labels):
        raise MirrorworldError(f"every label must be an episode of world {world.name}")
    train, test = split_labels(labels, test_share, seed)
    lenient = OverrideVerifier(_lenient(space, start), scorer=scorer)
    hand = OverrideVerifier(start, scorer=scorer)
    skipped = 0
    samples: list[_Sample] = []
    from mirrorworld.review.regressions import replayed

    for lab in train:
        try:
            task, messages = _task_and_messages(lab.record)
            with replayed(world, task, messages) as episode:
                samples.append(_Sample(lab, _profile(lenient.analyse(episode.session))))
        except (MirrorworldError, KeyError, TypeError, ValueError):
            skipped += 1
    if not samples:
        raise MirrorworldError("no training label could be replayed")
    fitted = _search(samples, world, space, start)
    tuned = OverrideVerifier(fitted, scorer=scorer)
    truth: list[bool] = []
    said_hand: list[bool] = []
    said_fit: list[bool] = []
    mismatches = 0
    words = _words(world, fitted, space.words)
    for lab in test:
        try:
            task, messages = _task_and_messages(lab.record)
            with replayed(world, task, messages) as episode:
                h, f = hand(episode.session), tuned(episode.session)
                predicted = _profile(lenient.analyse(episode.session)).passes(fitted, words)
        except (MirrorworldError, KeyError, TypeError, ValueError):
            skipped += 1
            continue
        truth.append(lab.passed)
        said_hand.append(h.passed)
        said_fit.append(f.passed)
        mismatches += predicted != f.passed
    words_start = _words(world, start, space.words)
    train_truth = [s.label.passed for s in samples]
    return FittedVerifier(
        world=world.id,
        world_name=world.name,
        world_hash=world.content_hash,
        start=start,
        params=fitted,
        changes=changes_between(start, fitted, world),
        agreement={
            "train": {
                "hand": _agreement(train_truth, [s.profile.passes(start, words_start) for s in samples]),
                "fitted": _agreement(train_truth, [s.profile.passes(fitted, words) for s in samples]),
            },
            "test": {"hand": _agreement(truth, said_hand), "fitted": _agreement(truth, said_fit)},
        },
        n_train=len(samples),
        n_test=len(truth),
        skipped=skipped,
        profile_mismatches=mismatches,
    )


# -- accepting a version -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Override:
    """An accepted verifier version, as read from its override file."""

    world: str
    version: str
    params: VerifierParams
    meta: Mapping[str, Any]

    def verifier(self, scorer: JudgeScorer | None = None) -> OverrideVerifier:
        return OverrideVerifier(self.params, scorer=scorer)

    def world_for(self, base: World) -> World:
        """``base`` graded by this version (:func:`override_world`); ``base`` must be the world it was fitted on."""
        if base.id != self.world:
            raise MirrorworldError(f"verifier version {self.version} is of {self.world}, not {base.id}")
        return override_world(base, self.params)


def accept_fit(
    fitted: FittedVerifier,
    directory: str | Path,
    *,
    by: str,
    regressions: Sequence[str | Path] = (),
    registry: Registry | None = None,
    scorer: JudgeScorer | None = None,
) -> Path:
    """Accept ``fitted`` as a new verifier version: write ``<directory>/<world>-<version>.json``; return its path.

    ``by`` names the person accepting. With ``regressions`` (case files or
    folders), every regression case is first replayed with the fitted
    verifier (:func:`mirrorworld.review.regressions.check_cases`): a ``fixed``
    case it gets wrong refuses the version. Accepting the same version again
    rewrites the same file.
    """
    from mirrorworld.outputs import check_output_path, write_atomic

    if not isinstance(by, str) or not by.strip() or len(by) > 200:
        raise MirrorworldError("accepting a verifier version needs the name of the person accepting it")
    if regressions:
        from mirrorworld.review.regressions import check_cases

        summary = check_cases(list(regressions), registry, world=fitted.world_name, verifier=fitted.verifier(scorer))
        if summary["regressed"]:
            raise MirrorworldError(
                f"verifier version {fitted.version} regresses {len(summary['regressed'])} case(s): "
                + ", ".join(summary["regressed"][:5])
            )
    safe = fitted.world.replace("/", "_")
    path = check_output_path(Path(directory) / f"{safe}-{fitted.version}.json", new_folders=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"format": OVERRIDE_FORMAT, **fitted.to_dict(), "accepted_by": by.strip()}
    write_atomic(path, json.dumps(doc, sort_keys=True, indent=1, default=str) + "\n")
    return path


def load_override(path: str | Path, world: World | None = None) -> Override:
    """Read an override file, checked as untrusted input (and against ``world`` when given)."""
    p = Path(path)
    try:
        if p.stat().st_size > MAX_OVERRIDE_BYTES:
            raise MirrorworldError(f"{p} is larger than an override file may be")
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise MirrorworldError(f"{p} is not a verifier override file ({err})") from None
    if not isinstance(doc, dict) or doc.get("format") != OVERRIDE_FORMAT:
        raise MirrorworldError(f"{p} is not a {OVERRIDE_FORMAT} file")
    params = VerifierParams.from_dict(doc.get("params"))
    if doc.get("version") != params.digest():
        raise MirrorworldError(f"{p}: its version is not the hash of its parameters (edited by hand?)")
    name = doc.get("world")
    if not isinstance(name, str) or len(name) > 200:
        raise MirrorworldError(f"{p}: no world named")
    if world is not None:
        if name != world.id:
            raise MirrorworldError(f"{p} is a verifier version of {name}, not {world.id}")
        params.check(world)
    return Override(name, params.digest(), params, {k: v for k, v in doc.items() if k != "params"})
