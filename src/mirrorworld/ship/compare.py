"""Whether two runs may be compared, and how they compare: per-family pass-rate deltas with intervals.

A run file records where its scores come from (``world``, ``world_hash``,
``world_parts`` and, when it ran from a published artifact, ``artifact``).
Two runs are **comparable** only when their worlds' score-relevant parts are
equal: a changed rule threshold, task family, verifier tolerance or tool
schema changes what a score means. :func:`check_comparable` refuses, naming
the parts that differ; with ``allow=True`` it returns them for a loud warning
instead. A run file written before parts were recorded is compared by its
``world_hash`` alone ("unknown parts" when those differ).

:func:`deltas` compares graded episodes only (errored episodes are an
endpoint, world or infrastructure failure, not a score) and gives each
family's difference in pass rate with a 95% Newcombe interval (the hybrid
Wilson score interval for a difference of two proportions), which stays
inside [-1, 1] and behaves at rates of 0 and 1 where the normal
approximation does not.

Newcombe's interval takes every episode as independent. Two things it does
not see, :func:`bootstrap` does: trials of one task are correlated (a task an
agent fails it tends to fail in every trial), and two runs of the same tasks
are paired (the usual case: the same plan, two agents or two builds). The
bootstrap resamples **tasks**, not episodes (a cluster bootstrap, each task
carrying all its graded trials); when both runs hold the same tasks of a
family it resamples them once for both sides (paired), which removes the
tasks' own difficulty from the difference and gives a narrower interval when
the agents agree on which tasks are hard; otherwise each side is resampled on
its own. The interval is the 2.5th-97.5th percentile of
:data:`RESAMPLES` resamples from a fixed seed, so a comparison prints the same
figures every time. With few tasks a percentile bootstrap is too narrow (two
runs that each pass or fail every task give ``[+1, +1]``): read it beside
Newcombe's interval, which stays honest at small counts.

:func:`pass_hat_k` is ``pass^k`` (Yao et al., tau-bench): the probability
that ``k`` trials of a task all pass, averaged over tasks, estimated without
bias from ``n`` graded trials with ``c`` passes as ``C(c, k) / C(n, k)`` over
the tasks with at least ``k`` graded trials. At ``k = 1`` it is the pass rate
(per task); at ``k`` = the run's trials it is the run summary's ``pass^k``.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import comb
from typing import Any

from mirrorworld.errors import MirrorworldError
from mirrorworld.ship.manifest import differing_parts

__all__ = [
    "RESAMPLES",
    "Delta",
    "IncomparableError",
    "Provenance",
    "bootstrap",
    "check_comparable",
    "comparison",
    "deltas",
    "format_comparison",
    "format_deltas",
    "pass_hat_k",
    "wilson",
]

RESAMPLES = 2000
"""Bootstrap resamples per family (the percentile interval's 2.5% tail is 50 of them)."""

_HEX = re.compile(r"[0-9a-f]{16,64}\Z")
Z95 = 1.959963984540054


class IncomparableError(MirrorworldError):
    """Two runs whose scores mean different things."""


@dataclass(frozen=True)
class Provenance:
    """Where a run's scores come from, read from its (untrusted) metadata."""

    world: str
    world_hash: str
    parts: Mapping[str, str] | None
    artifact: str | None

    @classmethod
    def of(cls, meta: Mapping[str, Any]) -> Provenance:
        world = meta.get("world")
        world_hash = meta.get("world_hash")
        if not isinstance(world, str) or not isinstance(world_hash, str) or not _HEX.match(world_hash):
            raise MirrorworldError("the run file does not say which world build it ran on (world, world_hash)")
        raw = meta.get("world_parts")
        parts = None
        if isinstance(raw, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
            parts = {k[:64]: v[:64] for k, v in raw.items()}
        artifact = meta.get("artifact")
        if not (isinstance(artifact, str) and _HEX.match(artifact)):
            artifact = None
        return cls(world[:120], world_hash, parts, artifact)

    def label(self) -> str:
        where = f"artifact {self.artifact[:16]}" if self.artifact else f"hash {self.world_hash}"
        return f"{ascii(self.world)[1:-1]} ({where})"


def check_comparable(a: Provenance, b: Provenance, *, allow: bool = False) -> list[str]:
    """The score parts in which two runs' worlds differ; refused (an error) unless ``allow``."""
    if a.world_hash == b.world_hash and a.world == b.world:
        return []
    if a.parts is not None and b.parts is not None:
        differ = differing_parts(a.parts, b.parts)
        if a.world != b.world:
            differ = ["world id", *differ]
    else:
        differ = ["world id"] if a.world != b.world else []
        differ.append("unknown parts (a run file without world_parts)")
    if not differ:  # same parts, another hash: the id or the recipe of the hash differs
        differ = ["world id"]
    if not allow:
        raise IncomparableError(
            f"the runs' scores are not comparable: {a.label()} and {b.label()} differ in {', '.join(differ)}"
            " (pass --allow-incomparable to compare anyway)"
        )
    return differ


def wilson(passed: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``passed / n`` (``(0, 1)`` when ``n`` is 0)."""
    if n == 0:
        return 0.0, 1.0
    p = passed / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    low = 0.0 if passed == 0 else max(0.0, centre - half)
    high = 1.0 if passed == n else min(1.0, centre + half)
    return low, high


@dataclass(frozen=True)
class Delta:
    """One family's (or the whole run's, ``family="all"``) pass rates in two runs and their difference."""

    family: str
    n_a: int
    passed_a: int
    n_b: int
    passed_b: int

    @property
    def rate_a(self) -> float:
        return self.passed_a / self.n_a if self.n_a else float("nan")

    @property
    def rate_b(self) -> float:
        return self.passed_b / self.n_b if self.n_b else float("nan")

    @property
    def delta(self) -> float:
        return self.rate_b - self.rate_a

    @property
    def interval(self) -> tuple[float, float]:
        """95% Newcombe interval of ``rate_b - rate_a``."""
        if not self.n_a or not self.n_b:
            return -1.0, 1.0
        la, ua = wilson(self.passed_a, self.n_a)
        lb, ub = wilson(self.passed_b, self.n_b)
        pa, pb = self.rate_a, self.rate_b
        d = pb - pa
        low = d - math.sqrt((pb - lb) ** 2 + (ua - pa) ** 2)
        high = d + math.sqrt((ub - pb) ** 2 + (pa - la) ** 2)
        return max(-1.0, low), min(1.0, high)

    def to_dict(self) -> dict[str, Any]:
        low, high = self.interval
        return {
            "family": self.family,
            "a": {"graded": self.n_a, "passed": self.passed_a},
            "b": {"graded": self.n_b, "passed": self.passed_b},
            "delta": round(self.delta, 4) if self.n_a and self.n_b else None,
            "ci95": [round(low, 4), round(high, 4)],
        }


def deltas(a: Sequence[Any], b: Sequence[Any]) -> list[Delta]:
    """Per-family deltas (then ``all``) between two runs' records (``.family``, ``.passed``, ``.errored``)."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for side, records in ((0, a), (2, b)):
        for r in records:
            if r.errored:
                continue
            for key in (str(r.family), "all"):
                counts[key][side] += 1
                counts[key][side + 1] += int(bool(r.passed))
    names = sorted(k for k in counts if k != "all") + (["all"] if "all" in counts else [])
    return [Delta(k, *counts[k]) for k in names]


def format_deltas(rows: Sequence[Delta], a: str = "A", b: str = "B") -> str:
    """A plain table of :func:`deltas` (family, both rates, the difference and its interval)."""
    head = f"{'family':24}{a[:14]:>16}{b[:14]:>16}{'delta':>9}{'95% CI':>18}"
    lines = [head]
    for d in rows:
        low, high = d.interval

        def rate(passed: int, n: int) -> str:
            return f"{passed}/{n} {passed / n:4.0%}" if n else "-"

        delta = f"{d.delta:+.0%}" if d.n_a and d.n_b else "-"
        lines.append(
            f"{ascii(d.family)[1:-1][:24]:24}{rate(d.passed_a, d.n_a):>16}{rate(d.passed_b, d.n_b):>16}"
            f"{delta:>9}{f'[{low:+.2f}, {high:+.2f}]':>18}"
        )
    return "\n".join(lines)


def _tasks(records: Sequence[Any], family: str) -> dict[str, tuple[int, int]]:
    """Graded (trials, passes) per task of ``family`` (``"all"``: every family)."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in records:
        if r.errored or (family != "all" and str(r.family) != family):
            continue
        counts = out[str(r.task_id)]
        counts[0] += 1
        counts[1] += int(bool(r.passed))
    return {k: (v[0], v[1]) for k, v in out.items()}


def pass_hat_k(records: Sequence[Any], k: int, family: str = "all") -> float | None:
    """``pass^k`` of a run's graded records (see the module docstring); None when no task has ``k`` graded trials."""
    if k < 1:
        raise ValueError("k is at least 1")
    tasks = [(n, c) for n, c in _tasks(records, family).values() if n >= k]
    if not tasks:
        return None
    return sum(comb(c, k) / comb(n, k) for n, c in tasks) / len(tasks)


def bootstrap(
    a: Sequence[Any], b: Sequence[Any], family: str = "all", *, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float, bool] | None:
    """The 95% cluster-bootstrap interval of ``rate_b - rate_a`` for ``family``, and whether it was paired.

    None when either run has no graded episode of the family.
    """
    import numpy as np

    ta, tb = _tasks(a, family), _tasks(b, family)
    if not ta or not tb:
        return None
    rng = np.random.default_rng(seed)
    paired = set(ta) == set(tb)
    if paired:
        keys = sorted(ta)
        na, ca = (np.array([ta[k][i] for k in keys], dtype=float) for i in (0, 1))
        nb, cb = (np.array([tb[k][i] for k in keys], dtype=float) for i in (0, 1))
        picks = rng.integers(0, len(keys), size=(resamples, len(keys)))
        rate_a = ca[picks].sum(axis=1) / na[picks].sum(axis=1)
        rate_b = cb[picks].sum(axis=1) / nb[picks].sum(axis=1)
    else:
        rate_a, rate_b = (_resampled_rates(t, rng, resamples) for t in (ta, tb))
    low, high = np.percentile(rate_b - rate_a, [2.5, 97.5])
    return float(low), float(high), paired


def _resampled_rates(tasks: Mapping[str, tuple[int, int]], rng: Any, resamples: int) -> Any:
    import numpy as np

    keys = sorted(tasks)
    n = np.array([tasks[k][0] for k in keys], dtype=float)
    c = np.array([tasks[k][1] for k in keys], dtype=float)
    picks = rng.integers(0, len(keys), size=(resamples, len(keys)))
    return c[picks].sum(axis=1) / n[picks].sum(axis=1)


def _trials(records: Sequence[Any]) -> int:
    tasks = _tasks(records, "all")
    return max((n for n, _ in tasks.values()), default=0)


def comparison(a: Sequence[Any], b: Sequence[Any]) -> dict[str, Any]:
    """Everything ``mirrorworld compare --json`` reports of two runs' records (see :func:`format_comparison`)."""
    rows = deltas(a, b)
    families = []
    k_max = max(1, min(_trials(a), _trials(b)))
    for d in rows:
        row = d.to_dict()
        boot = bootstrap(a, b, d.family)
        row["bootstrap95"] = [round(boot[0], 4), round(boot[1], 4)] if boot else None
        row["paired"] = boot[2] if boot else None
        row["pass_hat_k"] = {
            str(k): {"a": _round(pass_hat_k(a, k, d.family)), "b": _round(pass_hat_k(b, k, d.family))}
            for k in range(1, k_max + 1)
        }
        families.append(row)
    return {
        "families": families,
        "errored": {"a": sum(bool(r.errored) for r in a), "b": sum(bool(r.errored) for r in b)},
        "episodes": {"a": len(a), "b": len(b)},
        "trials": k_max,
        "resamples": RESAMPLES,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _interval(pair: Sequence[float] | None) -> str:
    if pair is None:
        return "-"
    return "[" + ",".join(f"{v:+.2f}".replace("0.", ".") for v in pair) + "]"


def format_comparison(report: Mapping[str, Any]) -> str:
    """The comparison as plain tables that fit 80 columns: rates, deltas, both intervals, then ``pass^k``."""

    def rate(side: Mapping[str, int]) -> str:
        n, passed = side["graded"], side["passed"]
        return f"{passed}/{n} {passed / n:.0%}" if n else "-"

    lines = [f"{'family':18}{'A':>12}{'B':>12}{'delta':>7}{'Newcombe 95%':>15}{'bootstrap 95%':>15}"]
    for f in report["families"]:
        delta = f"{f['delta']:+.0%}" if f["delta"] is not None else "-"
        boot = _interval(f["bootstrap95"]) + ("" if f["paired"] in (None, True) else "u")
        lines.append(
            f"{ascii(f['family'])[1:-1][:18]:18}{rate(f['a']):>12}{rate(f['b']):>12}{delta:>7}"
            f"{_interval(f['ci95']):>15}{boot:>15}"
        )
    errored = report["errored"]
    lines.append(f"graded episodes only; errored (in no rate): A {errored['a']}, B {errored['b']}")
    lines.append("bootstrap: over tasks, paired where both runs hold the same tasks (u: unpaired)")
    k_max = int(report["trials"])
    if k_max > 1:
        lines.append("")
        head = "".join(f"{f'k={k} A':>8}{'B':>6}" for k in range(1, k_max + 1)[:4])
        lines.append(f"{'pass^k':18}{head}")
        for f in report["families"]:
            cells = ""
            for k in range(1, k_max + 1)[:4]:
                got = f["pass_hat_k"][str(k)]
                cells += "".join(f"{'-' if v is None else f'{v:.2f}':>{w}}" for v, w in ((got["a"], 8), (got["b"], 6)))
            lines.append(f"{ascii(f['family'])[1:-1][:18]:18}{cells}")
    return "\n".join(lines)
