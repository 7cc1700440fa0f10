"""Drift monitoring: is the verifier drifting away from the humans, or the scores shifting?

Three views, each with an alarm:

* **Agreement over time.** Grades are bucketed into windows of
  ``window_seconds`` from the first grade; per window, the share of grades that
  agree with the verifier (each grade counts, so a window need not finish
  whole items) and Gwet's AC1 / Cohen's kappa of (verifier, grade) pairs. The
  alarm ``agreement_drop`` fires when the latest window with at least
  ``min_window_reviews`` grades agrees less than all earlier grades pooled, by
  at least ``max_agreement_drop``, and a one-sided Fisher exact test puts the
  drop's p-value under ``p_value`` (both, so neither noise in a small window
  nor a trivial drop in a huge one raises it).
* **Agreement per verifier version.** The verifier version is the world's
  content hash recorded with each episode (it covers the verifier's code).
  Versions are ordered by when their first episode was imported; each is
  compared with the one before it by the same rule (``version_agreement_drop``).
* **Score distribution across runs.** For each agent, every later run is
  compared with that agent's first run: the population stability index (PSI)
  of the verifier score and of the episode reward, and a two-sample test —
  Fisher's exact test when the values take two levels (the score is 0 or 1),
  a chi-square test of homogeneity for a few levels, and the two-sample
  Kolmogorov–Smirnov test for continuous values (SciPy). ``score_shift``
  fires when PSI ≥ ``psi_alarm`` or the test's p-value < ``test_p_value``.

PSI = Σ (aᵢ − eᵢ) ln(aᵢ / eᵢ) over bins, where e and a are the reference and
the compared run's bin shares; an empty bin's share is taken as ``psi_floor``
(1e-4) so the sum stays finite. Bins are the distinct values when there are at
most ``bins`` of them, else the reference's deciles. Customary reading:
below 0.1 stable, 0.1–0.25 a moderate shift, above 0.25 a major one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mirrorworld.review.agreement import pair_stats_from_tables
from mirrorworld.review.store import Item, ReviewRow, ReviewStore

__all__ = ["DriftPolicy", "drift_report", "psi", "two_sample_test"]


@dataclass(frozen=True)
class DriftPolicy:
    """Windows and alarm thresholds. See the module docstring."""

    window_seconds: float = 7 * 86400
    min_window_reviews: int = 20
    max_agreement_drop: float = 0.10
    p_value: float = 0.05
    psi_alarm: float = 0.25
    test_p_value: float = 0.01
    bins: int = 10
    psi_floor: float = 1e-4

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _bins(reference: NDArray[np.float64], other: NDArray[np.float64], bins: int) -> tuple[NDArray[Any], NDArray[Any]]:
    """Counts of both samples over common bins (distinct values, or the reference's quantiles)."""
    values = np.unique(np.concatenate([reference, other]))
    if len(values) <= bins:
        ref = np.array([(reference == v).sum() for v in values])
        oth = np.array([(other == v).sum() for v in values])
        return ref, oth
    edges = np.unique(np.quantile(reference, np.linspace(0, 1, bins + 1)[1:-1]))
    return (
        np.bincount(np.searchsorted(edges, reference, side="right"), minlength=len(edges) + 1),
        np.bincount(np.searchsorted(edges, other, side="right"), minlength=len(edges) + 1),
    )


def psi(reference: Sequence[float], other: Sequence[float], *, bins: int = 10, floor: float = 1e-4) -> float:
    """Population stability index of ``other`` against ``reference``. See the module docstring."""
    ref_arr, oth_arr = np.asarray(reference, dtype=np.float64), np.asarray(other, dtype=np.float64)
    if ref_arr.size == 0 or oth_arr.size == 0:
        raise ValueError("PSI needs two non-empty samples")
    ref, oth = _bins(ref_arr, oth_arr, bins)
    e = np.maximum(ref / ref.sum(), floor)
    a = np.maximum(oth / oth.sum(), floor)
    return float(((a - e) * np.log(a / e)).sum())


def two_sample_test(reference: Sequence[float], other: Sequence[float], *, bins: int = 10) -> dict[str, Any]:
    """Whether two samples come from one distribution: ``{"test", "statistic", "p_value"}``.

    ``statistic`` is the odds ratio (Fisher), chi-square or KS distance; None
    where it is infinite.
    """
    from scipy import stats  # type: ignore[import-untyped]

    ref_arr, oth_arr = np.asarray(reference, dtype=np.float64), np.asarray(other, dtype=np.float64)
    values = np.unique(np.concatenate([ref_arr, oth_arr]))
    if len(values) <= 1:
        return {"test": "identical", "statistic": 0.0, "p_value": 1.0}
    if len(values) == 2:
        table = [[int((ref_arr == v).sum()) for v in values], [int((oth_arr == v).sum()) for v in values]]
        res = stats.fisher_exact(table)
        return {"test": "fisher_exact", "statistic": _finite(res.statistic), "p_value": float(res.pvalue)}
    if len(values) <= bins:
        table = [[int((ref_arr == v).sum()) for v in values], [int((oth_arr == v).sum()) for v in values]]
        chi = stats.chi2_contingency(table)
        return {"test": "chi_square", "statistic": _finite(chi.statistic), "p_value": float(chi.pvalue)}
    ks = stats.ks_2samp(ref_arr, oth_arr)
    return {"test": "kolmogorov_smirnov", "statistic": _finite(ks.statistic), "p_value": float(ks.pvalue)}


def _finite(x: Any) -> float | None:
    """A statistic as a JSON-safe float (Fisher's odds ratio is infinite when a cell is empty)."""
    v = float(x)
    return v if np.isfinite(v) else None


def _agreement(pairs: Sequence[tuple[bool, bool]]) -> dict[str, Any]:
    table = np.zeros((1, 2, 2))
    for v, h in pairs:
        table[0, int(v), int(h)] += 1
    s = pair_stats_from_tables(table)

    def val(x: NDArray[np.float64]) -> float | None:
        return None if np.isnan(x[0]) else round(float(x[0]), 4)

    agree = int(table[0, 0, 0] + table[0, 1, 1])
    return {
        "n": len(pairs),
        "agree": agree,
        "agreement": val(s["agreement"]),
        "ac1": val(s["ac1"]),
        "kappa": val(s["kappa"]),
    }


def _drop(base: dict[str, Any], new: dict[str, Any], policy: DriftPolicy) -> dict[str, Any] | None:
    """The evidence of a significant agreement drop from ``base`` to ``new``, or None."""
    from scipy import stats  # type: ignore[import-untyped]

    if new["n"] < policy.min_window_reviews or base["n"] == 0:
        return None
    drop = base["agree"] / base["n"] - new["agree"] / new["n"]
    if drop < policy.max_agreement_drop:
        return None
    table = [[new["agree"], new["n"] - new["agree"]], [base["agree"], base["n"] - base["agree"]]]
    p = float(stats.fisher_exact(table, alternative="less").pvalue)
    if p >= policy.p_value:
        return None
    return {"drop": round(drop, 4), "p_value": p}


def drift_report(
    items: Sequence[Item],
    reviews: Sequence[ReviewRow],
    runs: Sequence[dict[str, Any]],
    policy: DriftPolicy | None = None,
) -> dict[str, Any]:
    """Agreement per window and per verifier version, score shift per run, and the alarms raised."""
    policy = policy or DriftPolicy()
    by_id = {i.id: i for i in items}
    graded = [(r, by_id[r.item_id]) for r in reviews if r.item_id in by_id and not by_id[r.item_id].run_gold]
    alarms: list[dict[str, Any]] = []

    windows: list[dict[str, Any]] = []
    if graded:
        t0 = min(r.submitted_at for r, _ in graded)
        buckets: dict[int, list[tuple[bool, bool]]] = defaultdict(list)
        for r, item in graded:
            buckets[int((r.submitted_at - t0) // policy.window_seconds)].append((item.verifier_passed, r.passed))
        for k in sorted(buckets):
            w = _agreement(buckets[k])
            w.update(start=t0 + k * policy.window_seconds, end=t0 + (k + 1) * policy.window_seconds, index=k)
            windows.append(w)
        full = [w for w in windows if w["n"] >= policy.min_window_reviews]
        if full:
            last = full[-1]
            earlier = [p for k in sorted(buckets) if k < last["index"] for p in buckets[k]]
            if earlier:
                hit = _drop(_agreement(earlier), last, policy)
                if hit:
                    alarms.append({"alarm": "agreement_drop", "window": last["index"], **hit})

    first_seen: dict[str, int] = {}
    for rank, item in enumerate(sorted(items, key=lambda i: (i.run_id, i.episode, i.id))):  # import order
        first_seen.setdefault(item.verifier_version, rank)
    by_version: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for r, item in graded:
        by_version[item.verifier_version].append((item.verifier_passed, r.passed))
    versions: list[dict[str, Any]] = []
    for v in sorted(by_version, key=lambda v: first_seen[v]):
        ventry = _agreement(by_version[v])
        ventry["version"] = v
        if versions:
            hit = _drop(versions[-1], ventry, policy)
            if hit:
                alarms.append(
                    {"alarm": "version_agreement_drop", "version": v, "previous": versions[-1]["version"], **hit}
                )
        versions.append(ventry)

    by_run: dict[int, list[Item]] = defaultdict(list)
    for item in items:
        by_run[item.run_id].append(item)
    shifts = []
    reference: dict[str, dict[str, Any]] = {}
    for run in sorted(runs, key=lambda r: (r["added_at"], r["id"])):
        if run["gold"] or not by_run.get(run["id"]):
            continue
        agent = run["agent"]
        eps = by_run[run["id"]]
        entry: dict[str, Any] = {
            "run": run["id"],
            "path": run["path"],
            "agent": agent,
            "episodes": len(eps),
            "pass_rate": round(sum(i.score for i in eps) / len(eps), 4),
        }
        if agent not in reference:
            reference[agent] = {"run": run["id"], "eps": eps}
            entry["reference"] = True
            shifts.append(entry)
            continue
        base = reference[agent]["eps"]
        entry["reference"] = False
        entry["against"] = reference[agent]["run"]
        for metric in ("score", "reward"):
            a = [float(getattr(i, metric)) for i in base]
            b = [float(getattr(i, metric)) for i in eps]
            entry[metric] = {
                "psi": round(psi(a, b, bins=policy.bins, floor=policy.psi_floor), 4),
                **two_sample_test(a, b, bins=policy.bins),
            }
            m = entry[metric]
            if m["psi"] >= policy.psi_alarm or m["p_value"] < policy.test_p_value:
                alarms.append(
                    {
                        "alarm": "score_shift",
                        "run": run["id"],
                        "metric": metric,
                        "psi": m["psi"],
                        "test": m["test"],
                        "p_value": m["p_value"],
                    }
                )
        shifts.append(entry)
    return {"policy": policy.to_dict(), "windows": windows, "versions": versions, "runs": shifts, "alarms": alarms}


def compute_drift(store: ReviewStore, policy: DriftPolicy | None = None) -> dict[str, Any]:
    """The drift report of a review database."""
    with store.read() as conn:
        items = store.items(conn)
        reviews = store.reviews(conn)
    return drift_report(items, reviews, store.runs(), policy)
