"""The agreement report and drift monitoring over hand-built reviews, and the SVG charts."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from typing import Any

import numpy as np
import pytest

from mirrorworld.review.agreement import cohen_kappa
from mirrorworld.review.drift import DriftPolicy, drift_report, psi, two_sample_test
from mirrorworld.review.stats import StatsOptions, agreement_report, human_verdict
from mirrorworld.review.store import CheckRef, Item, ReviewRow
from mirrorworld.review.svg import bar_chart, line_chart

OPT = StatsOptions(resamples=200, seed=0)
DAY = 86400.0


def item(
    id: int,
    verifier: bool,
    *,
    family: str = "refund",
    checks: tuple[CheckRef, ...] = (),
    run_id: int = 1,
    run_gold: bool = False,
    version: str = "v1",
    score: float | None = None,
    reward: float | None = None,
) -> Item:
    return Item(
        id=id, run_id=run_id, episode=id, task_id=f"{family}/{id}", family=family, agent="a", verifier_version=version,
        verifier_passed=verifier, score=float(verifier) if score is None else score,
        reward=float(verifier) if reward is None else reward, error=None, checks=checks, audit_flags=(),
        gold_answer=None, stratum=None, position=id, overlap=2, run_gold=run_gold,
    )  # fmt: skip


_ids = iter(range(1, 1_000_000))


def review(
    item_id: int, who: int, passed: bool, *, at: float = 0.0, hacking: bool = False, **rubric: bool
) -> ReviewRow:
    return ReviewRow(
        id=next(_ids), item_id=item_id, reviewer_id=who, reviewer=f"r{who}", passed=passed, reason="",
        rubric={k.replace("__", ":"): v for k, v in rubric.items()}, flag_hacking=hacking, flag_task_wrong=False,
        flag_edge_case=False, started_at=at - 30, submitted_at=at, seconds=30.0, reason_keys=0, reason_pasted=False,
    )  # fmt: skip


# -- agreement report --------------------------------------------------------------


def test_human_verdict_is_adjudication_then_strict_majority() -> None:
    rs = [review(1, 1, True), review(1, 2, True), review(1, 3, False)]
    assert human_verdict(rs, None) is True
    assert human_verdict(rs[1:], None) is None  # a tie
    assert human_verdict(rs[1:], {"passed": False}) is False
    assert human_verdict(rs, {"passed": False}) is False  # adjudication overrides the majority
    assert human_verdict([], None) is None


def test_report_counts_confusion_disagreements_and_ties() -> None:
    items = [item(1, True), item(2, True), item(3, False), item(4, False), item(5, True, run_gold=True), item(6, True)]
    reviews = [
        review(1, 1, True), review(1, 2, True),  # agree
        review(2, 1, False), review(2, 2, False),  # verifier passed, humans fail it
        review(3, 1, False), review(3, 2, True),  # humans split: a tie, unresolved
        review(4, 1, True), review(4, 2, False),  # a tie settled by adjudication: pass
        review(5, 1, False),  # a gold run's episode: not in the figures
        review(6, 1, True, hacking=True),  # verifier and human pass it, but flagged as reward hacking
    ]  # fmt: skip
    r = agreement_report(items, reviews, {4: {"passed": True, "reason": "", "at": 0, "by": "j"}}, OPT)
    assert r["items_reviewed"] == 5 and r["reviews"] == 9 and r["unresolved"] == 1 and r["adjudicated"] == 1
    vh = r["verifier_vs_human"]
    assert vh["n"] == 4
    assert vh["confusion"] == {
        "verifier_pass_human_pass": 2,
        "verifier_pass_human_fail": 1,
        "verifier_fail_human_pass": 1,
        "verifier_fail_human_fail": 0,
    }
    assert vh["agreement"]["value"] == 0.5
    expected = cohen_kappa([1, 1, 0, 1], [1, 0, 1, 1], [0, 1])
    assert expected is not None and vh["kappa"]["value"] == pytest.approx(expected, abs=1e-4)
    kinds = {d["item"]: d["kinds"] for d in r["disagreements"]}
    assert kinds == {
        2: ["verifier_vs_human"],
        3: ["human_vs_human"],
        4: ["verifier_vs_human", "human_vs_human"],
        6: ["reward_hacking"],
    }
    assert r["disagreements"][-1]["item"] == 4  # adjudicated ones last
    hh = r["human_vs_human"]
    assert hh["n"] == 4 and hh["ratings"] == 8 and hh["agreement"]["value"] == 0.5
    assert hh["kappa_cohen"]["value"] == 0.0  # pairs (earlier, later): TT, FF, FT, TF
    assert r["flags"]["reward_hacking"] == 1


def test_report_breaks_down_by_family_and_by_check() -> None:
    state = CheckRef("gate:state", "end state", "gate: state", True)
    field = CheckRef("check:#12 status", "#12 status", "triage: tickets.status", False)
    items = [item(1, True, family="triage", checks=(state, field)), item(2, False, family="refund", checks=(state,))]
    reviews = [
        review(1, 1, True, gate__state=True, **{"check__#12 status": True}),
        review(1, 2, True, gate__state=True, **{"check__#12 status": True}),
        review(2, 1, True, gate__state=False),
    ]
    r = agreement_report(items, reviews, {}, OPT)
    assert set(r["by_family"]) == {"refund", "triage"}
    assert r["by_family"]["triage"]["verifier_vs_human"]["agreement"]["value"] == 1.0
    assert r["by_family"]["refund"]["verifier_vs_human"]["agreement"]["value"] == 0.0
    checks = r["by_check"]
    assert set(checks) == {"gate: state", "triage: tickets.status"}
    assert checks["gate: state"]["verifier_vs_human"]["confusion"]["verifier_pass_human_fail"] == 1
    assert checks["triage: tickets.status"]["verifier_vs_human"]["confusion"]["verifier_fail_human_pass"] == 1
    assert checks["triage: tickets.status"]["human_vs_human"]["agreement"]["value"] == 1.0


def test_when_nearly_everything_passes_kappa_misleads_and_ac1_does_not() -> None:
    items = [item(i, True) for i in range(1, 41)]
    reviews = [review(i, 1, i != 40) for i in range(1, 41)]  # humans agree on 39 of 40
    r = agreement_report(items, reviews, {}, OPT)["verifier_vs_human"]
    assert r["agreement"]["value"] == 0.975
    assert r["kappa"]["value"] == 0.0  # the verifier never fails anything: kappa sees no agreement beyond chance
    assert r["ac1"]["value"] > 0.97


def test_an_empty_report_is_well_formed() -> None:
    r = agreement_report([], [], {}, OPT)
    assert r["verifier_vs_human"]["n"] == 0 and r["verifier_vs_human"]["kappa"]["value"] is None
    assert r["disagreements"] == [] and r["by_family"] == {}


# -- drift -------------------------------------------------------------------------


def test_psi_reproduces_a_hand_computation() -> None:
    ref = [0] * 50 + [1] * 50
    new = [0] * 90 + [1] * 10
    assert psi(ref, new) == pytest.approx(0.4 * math.log(1.8) + 0.4 * math.log(5), abs=1e-9)  # 0.8789
    assert psi(ref, ref) == 0.0
    assert psi([1] * 10, [0] * 10) == pytest.approx(2 * (1 - 1e-4) * math.log(1e4))  # empty bins floored at 1e-4
    rng = np.random.default_rng(0)
    base = rng.normal(size=2000)
    assert psi(base, rng.normal(size=2000)) < 0.05
    assert psi(base, rng.normal(0.8, 1, size=2000)) > 0.25
    with pytest.raises(ValueError):
        psi([], [1.0])


def test_two_sample_test_suits_the_data() -> None:
    same = two_sample_test([0, 1] * 50, [0, 1] * 50)
    assert same["test"] == "fisher_exact" and same["p_value"] == pytest.approx(1.0)
    shifted = two_sample_test([1] * 45 + [0] * 5, [1] * 5 + [0] * 45)
    assert shifted["p_value"] < 1e-10
    assert two_sample_test([1] * 40 + [0] * 10, [1] * 50)["statistic"] is None  # an infinite odds ratio
    levels = two_sample_test([0, 0.5, 1] * 20, [0, 0.5, 1] * 20)
    assert levels["test"] == "chi_square" and levels["p_value"] == pytest.approx(1.0)
    rng = np.random.default_rng(1)
    cont = two_sample_test(rng.normal(size=300), rng.normal(1, 1, size=300))
    assert cont["test"] == "kolmogorov_smirnov" and cont["p_value"] < 1e-6
    assert two_sample_test([1.0], [1.0])["test"] == "identical"


def _timeline(windows: list[tuple[int, int]]) -> tuple[list[Item], list[ReviewRow]]:
    """One window per (agreeing grades, disagreeing grades), a week apart."""
    items: list[Item] = []
    reviews: list[ReviewRow] = []
    for w, (agree, disagree) in enumerate(windows):
        for k in range(agree + disagree):
            i = item(len(items) + 1, True)
            items.append(i)
            reviews.append(review(i.id, 1, k < agree, at=w * 7 * DAY + k))
    return items, reviews


def test_an_agreement_drop_raises_an_alarm_only_when_it_is_real() -> None:
    items, reviews = _timeline([(45, 5), (46, 4), (24, 26)])
    d = drift_report(items, reviews, [], DriftPolicy())
    assert [w["n"] for w in d["windows"]] == [50, 50, 50]
    (alarm,) = [a for a in d["alarms"] if a["alarm"] == "agreement_drop"]
    assert alarm["window"] == 2 and alarm["drop"] == pytest.approx(0.91 - 0.48) and alarm["p_value"] < 0.001
    small = drift_report(*_timeline([(45, 5), (46, 4), (2, 3)]), [], DriftPolicy())
    assert small["alarms"] == []  # five grades are too few to judge
    noise = drift_report(*_timeline([(45, 5), (46, 4), (42, 8)]), [], DriftPolicy())
    assert noise["alarms"] == []


def test_a_worse_verifier_version_raises_an_alarm() -> None:
    items = [item(i, True, version="old" if i <= 40 else "new") for i in range(1, 81)]
    reviews = [review(i, 1, i <= 40 or i % 2 == 0, at=float(i)) for i in range(1, 81)]
    d = drift_report(items, reviews, [], DriftPolicy(window_seconds=1e9))
    assert [v["version"] for v in d["versions"]] == ["old", "new"]
    (alarm,) = d["alarms"]
    assert alarm["alarm"] == "version_agreement_drop" and alarm["version"] == "new" and alarm["previous"] == "old"


def _runs(*specs: tuple[int, str, bool]) -> list[dict[str, Any]]:
    return [{"id": i, "path": f"run{i}", "agent": a, "gold": g, "added_at": float(i)} for i, a, g in specs]


def test_a_shift_in_scores_between_runs_of_one_agent_raises_an_alarm() -> None:
    items = (
        [item(i, i % 10 < 8, run_id=1, reward=0.1 * (i % 10)) for i in range(1, 101)]
        + [item(i, i % 10 < 2, run_id=2, reward=0.1 * (i % 10)) for i in range(101, 201)]
        + [item(i, i % 10 < 8, run_id=3, reward=0.1 * (i % 10)) for i in range(201, 301)]
        + [item(i, False, run_id=4) for i in range(301, 311)]
    )
    runs = _runs((1, "oracle", False), (2, "oracle", False), (3, "oracle", False), (4, "noop", False))
    d = drift_report(items, [], runs, DriftPolicy())
    by_run = {r["run"]: r for r in d["runs"]}
    assert by_run[1]["reference"] and by_run[4]["reference"]  # each agent against its own first run
    assert by_run[2]["score"]["psi"] > 0.25 and by_run[2]["score"]["test"] == "fisher_exact"
    assert by_run[3]["score"]["psi"] == 0.0 and by_run[3]["score"]["p_value"] == pytest.approx(1.0)
    assert by_run[2]["reward"]["psi"] == 0.0  # the reward distribution did not move
    assert [(a["alarm"], a["run"], a["metric"]) for a in d["alarms"]] == [("score_shift", 2, "score")]


# -- charts ------------------------------------------------------------------------


def test_charts_are_well_formed_svg_with_escaped_labels() -> None:
    svg = line_chart("a <b> & c", ["w1", "w2", "w3"], {"agreement": [0.9, None, 0.5], "AC1": [0.8, 0.7, 0.2]})
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{ns}svg"
    assert root.find(f"{ns}title").text == "a <b> & c"  # type: ignore[union-attr]
    assert len(root.findall(f"{ns}polyline")) == 1  # the gap leaves "agreement" two lone points; AC1 is one line
    bars = ET.fromstring(bar_chart("psi", ["r1", "r<2>"], [0.3, None], hi=0.5, thresholds=[(0.25, "alarm")]))
    assert len(bars.findall(f"{ns}rect")) == 1
    assert any(t.text == "r<2>" for t in bars.iter(f"{ns}text"))
