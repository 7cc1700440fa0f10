"""Agreement statistics: Cohen's kappa, Fleiss' kappa, Krippendorff's alpha, Gwet's AC1.

Every coefficient here is *chance-corrected agreement* on nominal labels
(pass/fail in practice, any hashable categories in general)::

    coefficient = (p_a - p_e) / (1 - p_e)

where ``p_a`` is the observed agreement and ``p_e`` the agreement expected by
chance. They differ in ``p_e``:

* **Cohen's kappa** (two raters with identities: the verifier and the human
  majority) — ``p_e`` from each rater's own marginals. Computed with
  scikit-learn's ``cohen_kappa_score``.
* **Fleiss' kappa** (any number of interchangeable raters, each unit rated by
  two or more of them: human vs human) — ``p_e = Σ π_k²`` over the pooled
  category shares ``π_k``, with Gwet's (2014) treatment of units that have
  different numbers of ratings.
* **Krippendorff's alpha** (any raters, missing ratings allowed) — from the
  coincidence matrix of pairable values. Computed with the ``krippendorff``
  package.
* **Gwet's AC1** — ``p_e = Σ π_k (1 - π_k) / (q - 1)`` for ``q`` categories.
  Kappa collapses when nearly every episode passes (or fails): ``p_e`` then
  approaches ``p_a`` and kappa can be near zero at 95 % raw agreement. AC1
  stays close to raw agreement in that case, which is why it is reported
  beside kappa. Implemented here (Gwet 2008, *Br. J. Math. Stat. Psychol.*
  61:29–48; Gwet 2014, *Handbook of Inter-Rater Reliability*, 4th ed.) and
  checked against the handbook's worked examples in the tests.

A coefficient whose ``p_e`` is 1 (every rating in one category) is undefined
and returned as ``None``, never as NaN.

Confidence intervals are percentile bootstraps over units (episodes): a
resample of units with replacement is, for two raters, a multinomial draw of
the contingency table, and for many raters a draw of rows of the per-unit
category counts, so the resampled coefficients are computed in closed form from
counts with numpy (``*_from_counts``) — the same estimators as the library
calls, which the tests assert on random tables.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "Estimate",
    "bootstrap_pairs",
    "bootstrap_unit_tables",
    "bootstrap_units",
    "cohen_kappa",
    "fleiss_kappa",
    "gwet_ac1",
    "krippendorff_alpha",
    "pair_stats_from_tables",
    "percent_agreement",
    "unit_counts",
    "unit_stats_from_counts",
]

Rating = Hashable | None
"""One rating; ``None`` is a missing rating."""

_EPS = 1e-12


@dataclass(frozen=True)
class Estimate:
    """A coefficient with its bootstrap confidence interval (``None`` where undefined)."""

    value: float | None
    low: float | None = None
    high: float | None = None

    def to_dict(self) -> dict[str, Any]:
        r = _round
        return {"value": r(self.value), "ci": [r(self.low), r(self.high)]}


def _round(x: float | None) -> float | None:
    return None if x is None else round(float(x), 4)


def _codes(labels: Sequence[Hashable]) -> dict[Hashable, int]:
    codes = {lab: i for i, lab in enumerate(labels)}
    if len(codes) != len(labels) or len(codes) < 2:
        raise ValueError("labels must be at least two distinct categories")
    return codes


def unit_counts(ratings: Sequence[Sequence[Rating]], labels: Sequence[Hashable]) -> NDArray[np.float64]:
    """Units × categories matrix: how many raters put each unit in each category.

    ``ratings`` is units × raters; ``None`` marks a missing rating. A rating
    outside ``labels`` is an error.
    """
    codes = _codes(labels)
    out = np.zeros((len(ratings), len(labels)), dtype=np.float64)
    for i, row in enumerate(ratings):
        for v in row:
            if v is None:
                continue
            if v not in codes:
                raise ValueError(f"rating {v!r} is not one of the labels {list(labels)!r}")
            out[i, codes[v]] += 1
    return out


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable], labels: Sequence[Hashable]) -> float | None:
    """Cohen's kappa of two raters' labels for the same units (scikit-learn)."""
    if len(a) != len(b):
        raise ValueError("both raters must rate the same units")
    if not a:
        return None
    codes = _codes(labels)
    table = np.zeros((1, len(labels), len(labels)))
    for x, y in zip(a, b, strict=True):
        table[0, codes[x], codes[y]] += 1
    if np.isnan(pair_stats_from_tables(table)["kappa"][0]):
        return None
    from sklearn.metrics import cohen_kappa_score  # type: ignore[import-untyped]

    return float(cohen_kappa_score([codes[x] for x in a], [codes[y] for y in b], labels=list(range(len(labels)))))


def krippendorff_alpha(ratings: Sequence[Sequence[Rating]], labels: Sequence[Hashable]) -> float | None:
    """Krippendorff's alpha for nominal data, units × raters with ``None`` missing (``krippendorff``)."""
    counts = unit_counts(ratings, labels)
    if np.isnan(unit_stats_from_counts(counts[None])["alpha"][0]):
        return None
    import krippendorff

    codes = _codes(labels)
    width = max((len(r) for r in ratings), default=0)
    data = np.full((width, len(ratings)), np.nan)
    for i, row in enumerate(ratings):
        for j, v in enumerate(row):
            if v is not None:
                data[j, i] = codes[v]
    return float(
        krippendorff.alpha(reliability_data=data, level_of_measurement="nominal", value_domain=list(range(len(labels))))
    )


def gwet_ac1(ratings: Sequence[Sequence[Rating]], labels: Sequence[Hashable]) -> float | None:
    """Gwet's AC1 for any number of raters, missing ratings allowed (units × raters)."""
    v = unit_stats_from_counts(unit_counts(ratings, labels)[None])["ac1"][0]
    return None if np.isnan(v) else float(v)


def fleiss_kappa(ratings: Sequence[Sequence[Rating]], labels: Sequence[Hashable]) -> float | None:
    """Fleiss' kappa for any number of raters, missing ratings allowed (units × raters)."""
    v = unit_stats_from_counts(unit_counts(ratings, labels)[None])["fleiss"][0]
    return None if np.isnan(v) else float(v)


def percent_agreement(ratings: Sequence[Sequence[Rating]], labels: Sequence[Hashable]) -> float | None:
    """Observed agreement ``p_a``: the share of agreeing rating pairs, averaged over units."""
    v = unit_stats_from_counts(unit_counts(ratings, labels)[None])["pa"][0]
    return None if np.isnan(v) else float(v)


def _safe_ratio(num: NDArray[np.float64], den: NDArray[np.float64]) -> NDArray[np.float64]:
    out = np.full(np.broadcast(num, den).shape, np.nan)
    ok = np.abs(den) > _EPS
    np.divide(num, den, out=out, where=ok)
    return out


def pair_stats_from_tables(tables: NDArray[np.float64]) -> dict[str, NDArray[np.float64]]:
    """Two-rater coefficients from contingency tables (``B × q × q``; rows rater A, columns rater B).

    Returns arrays of length ``B`` for ``agreement``, ``kappa`` (Cohen),
    ``alpha`` (Krippendorff, nominal, no missing values) and ``ac1`` (Gwet);
    NaN where a coefficient is undefined.
    """
    t = np.asarray(tables, dtype=np.float64)
    n = t.sum(axis=(1, 2))
    q = t.shape[1]
    rows, cols = t.sum(axis=2), t.sum(axis=1)
    po = _safe_ratio(np.trace(t, axis1=1, axis2=2), n)
    pe_k = _safe_ratio((rows * cols).sum(axis=1), n**2)
    kappa = _safe_ratio(po - pe_k, 1 - pe_k)
    pi = _safe_ratio(rows + cols, (2 * n)[:, None])
    pe_g = (pi * (1 - pi)).sum(axis=1) / (q - 1)
    ac1 = _safe_ratio(po - pe_g, 1 - pe_g)
    # Krippendorff: N = 2n pairable values, coincidences off the diagonal = 2 × disagreeing units.
    big_n = 2 * n
    nc = rows + cols
    off = 2 * (n - np.trace(t, axis1=1, axis2=2))
    alpha = 1 - (big_n - 1) * _safe_ratio(off, big_n**2 - (nc**2).sum(axis=1))
    alpha = np.where(n >= 1, alpha, np.nan)
    return {"agreement": po, "kappa": kappa, "alpha": alpha, "ac1": ac1}


def unit_stats_from_counts(counts: NDArray[np.float64]) -> dict[str, NDArray[np.float64]]:
    """Many-rater coefficients from per-unit category counts (``B × units × q``).

    Units with fewer than two ratings carry no agreement information: they
    count toward the category shares ``π_k`` of AC1 and Fleiss' kappa (as in
    Gwet 2014) but not toward ``p_a``, and are not pairable for alpha. Returns
    arrays of length ``B`` for ``pa``, ``fleiss``, ``ac1`` and ``alpha``.
    """
    r = np.asarray(counts, dtype=np.float64)
    q = r.shape[2]
    m = r.sum(axis=2)
    rated = m >= 1
    pairable = m >= 2
    n_rated = rated.sum(axis=1)
    n_pair = pairable.sum(axis=1)
    agree_u = _safe_ratio((r * (r - 1)).sum(axis=2), m * (m - 1))
    pa = _safe_ratio(np.where(pairable, agree_u, 0).sum(axis=1), n_pair)
    shares = np.where(rated[..., None], _safe_ratio(r, m[..., None]), 0)
    pi = _safe_ratio(shares.sum(axis=1), n_rated[:, None])
    pe_f = (pi**2).sum(axis=1)
    pe_g = (pi * (1 - pi)).sum(axis=1) / (q - 1)
    fleiss = _safe_ratio(pa - pe_f, 1 - pe_f)
    ac1 = _safe_ratio(pa - pe_g, 1 - pe_g)
    rp = np.where(pairable[..., None], r, 0)
    mp = rp.sum(axis=2)
    off_u = _safe_ratio(mp**2 - (rp**2).sum(axis=2), mp - 1)
    off = np.where(pairable, off_u, 0).sum(axis=1)
    big_n = mp.sum(axis=1)
    nc = rp.sum(axis=1)
    alpha = 1 - (big_n - 1) * _safe_ratio(off, big_n**2 - (nc**2).sum(axis=1))
    alpha = np.where(n_pair >= 1, alpha, np.nan)
    return {"pa": pa, "fleiss": fleiss, "ac1": ac1, "alpha": alpha}


def _percentile_ci(samples: NDArray[np.float64], level: float) -> tuple[float | None, float | None]:
    s = samples[~np.isnan(samples)]
    # An interval from fewer than half the resamples would describe a different population.
    if s.size < max(2, samples.size // 2):
        return None, None
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(s, [tail, 100 - tail])
    return float(lo), float(hi)


def bootstrap_pairs(
    table: NDArray[np.float64], *, resamples: int = 1000, seed: int = 0, level: float = 0.95
) -> dict[str, Estimate]:
    """Two-rater estimates with percentile-bootstrap intervals from one ``q × q`` table.

    Point values are the library estimators (scikit-learn for kappa,
    ``krippendorff`` for alpha); resampling units with replacement draws the
    table from a multinomial with the observed cell shares.
    """
    t = np.asarray(table, dtype=np.float64)
    n = int(t.sum())
    point = {k: float(v[0]) for k, v in pair_stats_from_tables(t[None]).items()}
    a, b = _expand_table(t)
    labels = list(range(t.shape[0]))
    point["kappa"] = _nan(cohen_kappa(a, b, labels))
    point["alpha"] = _nan(krippendorff_alpha([[x, y] for x, y in zip(a, b, strict=True)], labels))
    if n == 0:
        return {k: Estimate(None) for k in point}
    if resamples == 0:
        return {k: Estimate(_none(v)) for k, v in point.items()}
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(n, (t / n).ravel(), size=resamples).reshape(resamples, *t.shape).astype(np.float64)
    boot = pair_stats_from_tables(draws)
    return {k: Estimate(_none(point[k]), *_percentile_ci(boot[k], level)) for k in point}


def bootstrap_unit_tables(
    tables: NDArray[np.float64], *, resamples: int = 1000, seed: int = 0, level: float = 0.95
) -> dict[str, Estimate]:
    """Two-rater estimates over per-unit contingency tables (``units × q × q``), resampling units.

    For rating pairs that cluster in units (every pair of grades of one
    episode): the point values are :func:`bootstrap_pairs`' over the summed
    table, and each resample sums the tables of resampled units, so the
    interval respects the clustering.
    """
    t = np.asarray(tables, dtype=np.float64)
    total = t.sum(axis=0) if t.shape[0] else np.zeros(t.shape[1:])
    point = bootstrap_pairs(total, resamples=0)
    if t.shape[0] == 0:
        return point
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, t.shape[0], size=(resamples, t.shape[0]))
    boot = pair_stats_from_tables(t[idx].sum(axis=1))
    return {k: Estimate(point[k].value, *_percentile_ci(boot[k], level)) for k in point}


def bootstrap_units(
    counts: NDArray[np.float64], *, resamples: int = 1000, seed: int = 0, level: float = 0.95
) -> dict[str, Estimate]:
    """Many-rater estimates with percentile-bootstrap intervals from per-unit counts (``units × q``).

    Point values: ``krippendorff`` for alpha, this module's closed forms for
    Fleiss' kappa, AC1 and ``p_a``.
    """
    c = np.asarray(counts, dtype=np.float64)
    point = {k: float(v[0]) for k, v in unit_stats_from_counts(c[None]).items()}
    labels = list(range(c.shape[1]))
    ratings: list[list[Rating]] = [[k for k in labels for _ in range(int(row[k]))] for row in c]
    point["alpha"] = _nan(krippendorff_alpha(ratings, labels)) if c.shape[0] else float("nan")
    if c.shape[0] == 0:
        return {k: Estimate(None) for k in point}
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, c.shape[0], size=(resamples, c.shape[0]))
    boot = unit_stats_from_counts(c[idx])
    return {k: Estimate(_none(point[k]), *_percentile_ci(boot[k], level)) for k in point}


def _expand_table(t: NDArray[np.float64]) -> tuple[list[int], list[int]]:
    a: list[int] = []
    b: list[int] = []
    for i in range(t.shape[0]):
        for j in range(t.shape[1]):
            k = int(t[i, j])
            a += [i] * k
            b += [j] * k
    return a, b


def _nan(x: float | None) -> float:
    return float("nan") if x is None else x


def _none(x: float) -> float | None:
    return None if np.isnan(x) else x
