"""Verifier regression cases from adjudicated human review (``tests/regressions/*.jsonl``).

Each case replays a recorded episode with the current verifier. A case marked
``fixed`` must be graded as the humans graded it; an ``open`` case is a known
disagreement, an expected failure that turns into an error (strict xfail) the
day the verifier agrees, so that the case gets marked ``fixed``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mirrorworld.review.regressions import RegressionCase, load_cases, run_case

CASES_DIR = Path(__file__).parent / "regressions"


def _params() -> list[object]:
    cases = load_cases(CASES_DIR)
    if not cases:
        return [pytest.param(None, id="no-cases", marks=pytest.mark.skip(reason="no regression cases exported yet"))]
    return [
        pytest.param(
            c,
            id=c.id,
            marks=[pytest.mark.xfail(strict=True, reason=f"open: {c.reason[:80]}")] if c.status == "open" else [],
        )
        for c in cases
    ]


@pytest.mark.parametrize("case", _params())
def test_verifier_grades_the_case_as_humans_did(case: RegressionCase) -> None:
    result = run_case(case)
    assert result.verifier_passed == case.human_passed, (
        f"{case.id}: humans say {'pass' if case.human_passed else 'fail'} ({case.reason}); "
        f"the verifier says {'pass' if result.verifier_passed else 'fail'}: {result.evidence}"
    )
