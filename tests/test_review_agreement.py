"""Agreement coefficients reproduce published worked examples to 3 decimals.

Sources:

* Gwet, K. L. (2014). *Handbook of Inter-Rater Reliability*, 4th ed., Advanced
  Analytics. Table 2.1 (223 psychiatric patients, clinical vs research
  diagnosis, 4 categories): Cohen's kappa 0.432, AC1 0.456. The 100 pregnant
  women classified by two abstractors (3 categories): Cohen's kappa 0.796,
  AC1 0.849. Pp. 55–56 (4 raters × 12 units, 5 categories, missing ratings):
  p_a 0.818; AC1 0.775 (p_e 0.190); Fleiss' kappa 0.761 (p_e 0.239);
  Krippendorff's alpha 0.743.
* Krippendorff, K. (2011). *Computing Krippendorff's Alpha-Reliability*
  (Annenberg School for Communication, departmental paper 43): two observers,
  ten binary units, alpha 0.095; the same 4-observer nominal data as above,
  alpha 0.743.
* Fleiss, J. L. (1971). Measuring nominal scale agreement among many raters,
  *Psychological Bulletin* 76:378–382, in the form of the worked example of
  Wikipedia's "Fleiss' kappa" article (10 subjects × 14 raters, 5 categories):
  P̄ 0.378, P̄e 0.213, kappa 0.210.
* Feinstein, A. R. & Cicchetti, D. V. (1990). High agreement but low kappa: I.
  The problems of two paradoxes, *J. Clin. Epidemiol.* 43:543–549: two 2×2
  tables with 85 % agreement and kappa 0.70 and 0.32 (published to 2 decimals).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mirrorworld.review.agreement import (
    bootstrap_pairs,
    bootstrap_units,
    cohen_kappa,
    fleiss_kappa,
    gwet_ac1,
    krippendorff_alpha,
    pair_stats_from_tables,
    percent_agreement,
    unit_counts,
    unit_stats_from_counts,
)

N = None
GWET_4_RATERS = [  # Gwet (2014) pp. 55-56 = Krippendorff (2011) section C; rows are units, columns raters
    [1, 1, N, 1],
    [2, 2, 3, 2],
    [3, 3, 3, 3],
    [3, 3, 3, 3],
    [2, 2, 2, 2],
    [1, 2, 3, 4],
    [4, 4, 4, 4],
    [1, 1, 2, 1],
    [2, 2, 2, 2],
    [N, 5, 5, 5],
    [N, N, 1, 1],
    [N, N, 3, N],
]
FIVE = [1, 2, 3, 4, 5]

GWET_TABLE_2_1 = [[40, 4, 4, 17], [6, 25, 2, 13], [4, 1, 21, 12], [15, 5, 9, 45]]
GWET_ABSTRACTORS = [[13, 0, 0], [0, 20, 7], [0, 4, 56]]

WIKIPEDIA_FLEISS = [  # subjects × categories: how many of the 14 raters chose each category
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]


def _expand(table: list[list[int]]) -> tuple[list[int], list[int]]:
    a: list[int] = []
    b: list[int] = []
    for i, row in enumerate(table):
        for j, n in enumerate(row):
            a += [i] * n
            b += [j] * n
    return a, b


def _from_counts(counts: list[list[int]]) -> list[list[int | None]]:
    return [[k for k, n in enumerate(row) for _ in range(n)] for row in counts]  # type: ignore[misc]


@pytest.mark.parametrize(
    ("table", "kappa", "ac1"),
    [(GWET_TABLE_2_1, 0.432, 0.456), (GWET_ABSTRACTORS, 0.796, 0.849)],
    ids=["gwet-table-2.1", "gwet-abstractors"],
)
def test_two_raters_reproduce_gwet(table: list[list[int]], kappa: float, ac1: float) -> None:
    a, b = _expand(table)
    labels = list(range(len(table)))
    assert round(cohen_kappa(a, b, labels) or 0, 3) == kappa
    assert round(gwet_ac1([[x, y] for x, y in zip(a, b, strict=True)], labels) or 0, 3) == ac1
    closed = pair_stats_from_tables(np.array(table, dtype=float)[None])
    assert round(float(closed["kappa"][0]), 3) == kappa
    assert round(float(closed["ac1"][0]), 3) == ac1


def test_many_raters_with_missing_ratings_reproduce_gwet_and_krippendorff() -> None:
    assert round(percent_agreement(GWET_4_RATERS, FIVE) or 0, 3) == 0.818
    assert round(gwet_ac1(GWET_4_RATERS, FIVE) or 0, 3) == 0.775
    assert round(fleiss_kappa(GWET_4_RATERS, FIVE) or 0, 3) == 0.761
    assert round(krippendorff_alpha(GWET_4_RATERS, FIVE) or 0, 3) == 0.743
    closed = unit_stats_from_counts(unit_counts(GWET_4_RATERS, FIVE)[None])
    assert round(float(closed["alpha"][0]), 3) == 0.743


def test_binary_two_observers_reproduce_krippendorff() -> None:
    a = [0, 1, 0, 0, 0, 0, 0, 0, 1, 0]
    b = [1, 1, 1, 0, 0, 1, 0, 0, 0, 0]
    units: list[list[int | None]] = [[x, y] for x, y in zip(a, b, strict=True)]
    assert round(krippendorff_alpha(units, [0, 1]) or 0, 3) == 0.095
    table = np.zeros((1, 2, 2))
    for x, y in zip(a, b, strict=True):
        table[0, x, y] += 1
    assert round(float(pair_stats_from_tables(table)["alpha"][0]), 3) == 0.095


def test_fleiss_kappa_reproduces_the_worked_example() -> None:
    ratings = _from_counts(WIKIPEDIA_FLEISS)
    assert round(percent_agreement(ratings, list(range(5))) or 0, 3) == 0.378
    assert round(fleiss_kappa(ratings, list(range(5))) or 0, 3) == 0.210


@pytest.mark.parametrize(("table", "kappa"), [([[40, 9], [6, 45]], 0.70), ([[80, 10], [5, 5]], 0.32)])
def test_kappa_paradox_tables(table: list[list[int]], kappa: float) -> None:
    a, b = _expand(table)
    assert round(cohen_kappa(a, b, [0, 1]) or 0, 2) == kappa
    # Same 85 % agreement, and AC1 stays near it where kappa collapses.
    ac1 = gwet_ac1([[x, y] for x, y in zip(a, b, strict=True)], [0, 1]) or 0
    assert ac1 > 0.7


def test_undefined_coefficients_are_none_without_warnings() -> None:
    same: list[list[int | None]] = [[1, 1], [1, 1], [1, 1]]
    assert cohen_kappa([1, 1, 1], [1, 1, 1], [0, 1]) is None
    assert krippendorff_alpha(same, [0, 1]) is None
    assert fleiss_kappa(same, [0, 1]) is None
    assert gwet_ac1(same, [0, 1]) == 1.0  # AC1 is defined: chance agreement is 0 when one category is never used
    assert cohen_kappa([], [], [0, 1]) is None
    est = bootstrap_pairs(np.zeros((2, 2)))
    assert all(e.value is None for e in est.values())
    with pytest.raises(ValueError, match="not one of the labels"):
        unit_counts([[3]], [0, 1])


tables = st.lists(st.integers(0, 12), min_size=4, max_size=4).map(lambda v: np.array(v, dtype=float).reshape(2, 2))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables)
def test_closed_forms_match_the_libraries_on_any_table(table: np.ndarray) -> None:  # type: ignore[type-arg]
    """The bootstrap's numpy closed forms are the same estimators as scikit-learn and ``krippendorff``."""
    a, b = _expand(table.astype(int).tolist())
    closed = {k: float(v[0]) for k, v in pair_stats_from_tables(table[None]).items()}
    kappa = cohen_kappa(a, b, [0, 1])
    alpha = krippendorff_alpha([[x, y] for x, y in zip(a, b, strict=True)], [0, 1])
    assert (kappa is None) == np.isnan(closed["kappa"])
    if kappa is not None:
        assert kappa == pytest.approx(closed["kappa"], abs=1e-9)
    assert (alpha is None) == np.isnan(closed["alpha"])
    if alpha is not None:
        assert alpha == pytest.approx(closed["alpha"], abs=1e-9)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.sampled_from([0, 1, None]), min_size=2, max_size=5), min_size=1, max_size=12))
def test_many_rater_alpha_matches_the_library(units: list[list[int | None]]) -> None:
    closed = float(unit_stats_from_counts(unit_counts(units, [0, 1])[None])["alpha"][0])
    lib = krippendorff_alpha(units, [0, 1])
    assert (lib is None) == np.isnan(closed)
    if lib is not None:
        assert lib == pytest.approx(closed, abs=1e-9)


def test_bootstrap_intervals_are_seeded_and_bracket_the_estimate() -> None:
    table = np.array(GWET_ABSTRACTORS, dtype=float)
    one = bootstrap_pairs(table, resamples=500, seed=3)
    two = bootstrap_pairs(table, resamples=500, seed=3)
    assert one == two
    for name, e in one.items():
        assert e.value is not None and e.low is not None and e.high is not None, name
        assert e.low <= e.value <= e.high, name
    # The analytic 95 % interval Gwet reports for this table's AC1 is [0.764, 0.935].
    assert one["ac1"].low == pytest.approx(0.764, abs=0.03)
    assert one["ac1"].high == pytest.approx(0.935, abs=0.03)
    units = bootstrap_units(unit_counts(GWET_4_RATERS, FIVE), resamples=300, seed=1)
    assert units["ac1"].value == pytest.approx(0.775, abs=5e-4)
    assert units["ac1"].low is not None and units["ac1"].low < 0.775
