"""The agreement report: how often, and where, humans and the verifier agree.

For each reviewed item (episodes of gold runs excluded: their verdicts are
known by construction and would flatter the verifier):

* the **human verdict** is the adjudicated verdict when there is one, else the
  strict majority of the reviewers' grades; a tie without adjudication is
  *unresolved* and left out of verifier-vs-human figures (it is listed as a
  disagreement to adjudicate);
* **verifier vs human** compares the verifier's pass/fail with the human
  verdict: agreement, Cohen's kappa, Krippendorff's alpha and Gwet's AC1 with
  percentile-bootstrap intervals, and the confusion matrix;
* **human vs human** uses the items graded by two or more reviewers: observed
  agreement, Fleiss' kappa, Krippendorff's alpha and Gwet's AC1 over
  interchangeable raters, and Cohen's kappa of grade pairs (each pair of
  grades of an item, the earlier grade as rater A; its interval resamples
  items, not pairs). Per-reviewer Cohen's kappa against peers is in the
  quality report.

The same figures are broken down **per task family** and **per verifier check**
(a task's checks pooled across tasks by what they test, e.g.
``triage: tickets.priority``, plus the four gates), where the human side is the
majority of the reviewers' rubric answers for that check. The report ends with
the **disagreements** — items where the human verdict differs from the
verifier, the humans split, or a reviewer flagged reward hacking on an episode
the verifier passed — and counts of the reviewers' flags.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mirrorworld.errors import MirrorworldError
from mirrorworld.review.agreement import bootstrap_pairs, bootstrap_unit_tables, bootstrap_units
from mirrorworld.review.store import Item, ReviewRow, ReviewStore

__all__ = ["StatsOptions", "agreement_report", "compute_stats", "human_verdict", "incomparable_builds"]


@dataclass(frozen=True)
class StatsOptions:
    resamples: int = 1000
    seed: int = 0
    level: float = 0.95
    allow_incomparable: bool = False


def _majority(votes: Sequence[bool]) -> bool | None:
    yes = sum(votes)
    no = len(votes) - yes
    if yes == no:
        return None
    return yes > no


def human_verdict(reviews: Sequence[ReviewRow], adjudication: dict[str, Any] | None) -> bool | None:
    """The adjudicated verdict, else the strict majority of ``reviews`` (None: no reviews, or a tie)."""
    if adjudication is not None:
        return bool(adjudication["passed"])
    return _majority([r.passed for r in reviews])


def _seed(base: int, name: str) -> int:
    return base ^ int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big")


def _pairs(pairs: Sequence[tuple[bool, bool]], opt: StatsOptions, name: str) -> dict[str, Any]:
    """Verifier (rows) vs human (columns) figures from (verifier, human) pairs."""
    table = np.zeros((2, 2))
    for v, h in pairs:
        table[int(v), int(h)] += 1
    est = bootstrap_pairs(table, resamples=opt.resamples, seed=_seed(opt.seed, name), level=opt.level)
    return {
        "n": len(pairs),
        "agreement": est["agreement"].to_dict(),
        "kappa": est["kappa"].to_dict(),
        "alpha": est["alpha"].to_dict(),
        "ac1": est["ac1"].to_dict(),
        "confusion": {
            "verifier_pass_human_pass": int(table[1, 1]),
            "verifier_pass_human_fail": int(table[1, 0]),
            "verifier_fail_human_pass": int(table[0, 1]),
            "verifier_fail_human_fail": int(table[0, 0]),
        },
    }


def _units(units: Sequence[Sequence[bool]], opt: StatsOptions, name: str) -> dict[str, Any]:
    """Human-vs-human figures from each item's grades (items with two or more)."""
    rows = [u for u in units if len(u) >= 2]
    counts = np.array([[len(u) - sum(u), sum(u)] for u in rows], dtype=np.float64).reshape(len(rows), 2)
    est = bootstrap_units(counts, resamples=opt.resamples, seed=_seed(opt.seed, name), level=opt.level)
    tables = np.zeros((len(rows), 2, 2))
    for k, votes in enumerate(rows):
        for i, first in enumerate(votes):
            for second in votes[i + 1 :]:
                tables[k, int(first), int(second)] += 1
    pairs = bootstrap_unit_tables(
        tables, resamples=opt.resamples, seed=_seed(opt.seed, name + "/pairs"), level=opt.level
    )
    return {
        "n": len(rows),
        "ratings": int(counts.sum()),
        "agreement": est["pa"].to_dict(),
        "kappa_fleiss": est["fleiss"].to_dict(),
        "kappa_cohen": pairs["kappa"].to_dict(),
        "alpha": est["alpha"].to_dict(),
        "ac1": est["ac1"].to_dict(),
    }


def agreement_report(
    items: Sequence[Item],
    reviews: Sequence[ReviewRow],
    adjudications: dict[int, dict[str, Any]],
    options: StatsOptions | None = None,
) -> dict[str, Any]:
    """The report (a JSON-ready dict) from items, their reviews and adjudications. See the module docstring."""
    opt = options or StatsOptions()
    by_item: dict[int, list[ReviewRow]] = defaultdict(list)
    for r in reviews:
        by_item[r.item_id].append(r)
    reviewed = [i for i in items if by_item.get(i.id) and not i.run_gold]

    pairs: list[tuple[bool, bool]] = []
    fam_pairs: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    units: list[list[bool]] = []
    fam_units: dict[str, list[list[bool]]] = defaultdict(list)
    check_pairs: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    check_units: dict[str, list[list[bool]]] = defaultdict(list)
    disagreements: list[dict[str, Any]] = []
    unresolved = 0
    for item in reviewed:
        rs = by_item[item.id]
        votes = [r.passed for r in rs]
        adj = adjudications.get(item.id)
        human = human_verdict(rs, adj)
        units.append(votes)
        fam_units[item.family].append(votes)
        if human is None:
            unresolved += 1
        else:
            pairs.append((item.verifier_passed, human))
            fam_pairs[item.family].append((item.verifier_passed, human))
        for ref in item.checks:
            answers = [r.rubric[ref.key] for r in rs if ref.key in r.rubric]
            if not answers:
                continue
            check_units[ref.group].append(answers)
            h = _majority(answers)
            if h is not None:
                check_pairs[ref.group].append((ref.verifier, h))
        kinds = []
        if human is not None and human != item.verifier_passed:
            kinds.append("verifier_vs_human")
        if len(set(votes)) > 1:
            kinds.append("human_vs_human")
        hacked = sum(r.flag_hacking for r in rs)
        if hacked and item.verifier_passed:
            kinds.append("reward_hacking")
        if kinds:
            disagreements.append(
                {
                    "item": item.id,
                    "task": item.task_id,
                    "family": item.family,
                    "agent": item.agent,
                    "verifier": item.verifier_passed,
                    "human": human,
                    "votes": {"pass": sum(votes), "fail": len(votes) - sum(votes)},
                    "kinds": kinds,
                    "adjudicated": None if adj is None else bool(adj["passed"]),
                    "flags": {
                        "reward_hacking": hacked,
                        "task_wrong": sum(r.flag_task_wrong for r in rs),
                        "edge_case": sum(r.flag_edge_case for r in rs),
                    },
                    "reasons": [{"reviewer": r.reviewer, "passed": r.passed, "reason": r.reason} for r in rs],
                }
            )
    disagreements.sort(key=lambda d: (d["adjudicated"] is not None, d["family"], d["item"]))
    flag_counts: Counter[str] = Counter()
    for r in reviews:
        flag_counts["reward_hacking"] += r.flag_hacking
        flag_counts["task_wrong"] += r.flag_task_wrong
        flag_counts["edge_case"] += r.flag_edge_case
    families = sorted(set(fam_units))
    return {
        "items_reviewed": len(reviewed),
        "reviews": sum(len(by_item[i.id]) for i in reviewed),
        "reviewers": len({r.reviewer_id for i in reviewed for r in by_item[i.id]}),
        "unresolved": unresolved,
        "adjudicated": sum(1 for i in reviewed if i.id in adjudications),
        "verifier_vs_human": _pairs(pairs, opt, "all"),
        "human_vs_human": _units(units, opt, "all/humans"),
        "by_family": {
            f: {
                "verifier_vs_human": _pairs(fam_pairs[f], opt, f"family/{f}"),
                "human_vs_human": _units(fam_units[f], opt, f"family/{f}/humans"),
            }
            for f in families
        },
        "by_check": {
            g: {
                "verifier_vs_human": _pairs(check_pairs[g], opt, f"check/{g}"),
                "human_vs_human": _units(check_units[g], opt, f"check/{g}/humans"),
            }
            for g in sorted(check_units)
        },
        "flags": dict(flag_counts),
        "disagreements": disagreements,
        "bootstrap": {"resamples": opt.resamples, "seed": opt.seed, "level": opt.level},
    }


def incomparable_builds(store: ReviewStore) -> list[str]:
    """The score parts in which the worlds of the database's runs differ (empty: every run is comparable).

    Agreement pooled over runs of different world builds mixes verdicts that
    mean different things (see :mod:`mirrorworld.ship.compare`).
    """
    from mirrorworld.ship.compare import Provenance, check_comparable

    with store.read() as conn:
        metas = [r[0] for r in conn.execute("SELECT meta FROM runs ORDER BY id")]
    builds: list[Provenance] = []
    unnamed = 0
    for raw in metas:
        try:
            builds.append(Provenance.of(json.loads(raw)))
        except (ValueError, TypeError, RecursionError, MirrorworldError):
            unnamed += 1
    differ: set[str] = set()
    for other in builds[1:]:
        differ.update(check_comparable(builds[0], other, allow=True))
    if unnamed and len(metas) > 1:
        differ.add("unknown build (a run file that names no world_hash)")
    return sorted(differ)


def compute_stats(store: ReviewStore, options: StatsOptions | None = None) -> dict[str, Any]:
    """The agreement report of a review database.

    Refused (:class:`~mirrorworld.ship.compare.IncomparableError`) when its runs
    come from world builds whose score parts differ, unless
    ``options.allow_incomparable``; the report then lists those parts under
    ``incomparable`` so every view can warn.
    """
    from mirrorworld.ship.compare import IncomparableError

    options = options or StatsOptions()
    differ = incomparable_builds(store)
    if differ and not options.allow_incomparable:
        raise IncomparableError(
            f"the review database holds runs of world builds that differ in {', '.join(differ)}: their agreement"
            " statistics would mix verdicts that mean different things (pass --allow-incomparable to pool them)"
        )
    with store.read() as conn:
        items = store.items(conn)
        reviews = store.reviews(conn)
        adjudications = store.adjudications(conn)
    report = agreement_report(items, reviews, adjudications, options)
    report["incomparable"] = differ
    return report
