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
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mirrorworld.errors import MirrorworldError
from mirrorworld.ship.manifest import differing_parts

__all__ = ["Delta", "IncomparableError", "Provenance", "check_comparable", "deltas", "format_deltas", "wilson"]

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
