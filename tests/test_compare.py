"""``mirrorworld compare``: pass^k, the task-level bootstrap, and the report at 80 columns."""

from __future__ import annotations

import json
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mirrorworld.cli import main
from mirrorworld.run import RunFile
from mirrorworld.run.metrics import summarize
from mirrorworld.ship.compare import RESAMPLES, bootstrap, comparison, format_comparison, pass_hat_k


def _records(outcomes: dict[str, list[bool | None]], family: str = "f") -> list[Any]:
    """Records of tasks and their trials' outcomes (None: an errored trial)."""
    return [
        SimpleNamespace(task_id=t, family=family, passed=bool(o), errored=o is None, trial=i)
        for t, trials in outcomes.items()
        for i, o in enumerate(trials)
    ]


def test_pass_hat_k_is_the_unbiased_estimator() -> None:
    records = _records({"t1": [True, True, False], "t2": [True, True, True], "t3": [False, False, False]})
    assert pass_hat_k(records, 1) == pytest.approx((2 / 3 + 1 + 0) / 3)
    assert pass_hat_k(records, 2) == pytest.approx((1 / 3 + 1 + 0) / 3)
    assert pass_hat_k(records, 3) == pytest.approx(1 / 3)
    assert pass_hat_k(records, 4) is None
    with pytest.raises(ValueError):
        pass_hat_k(records, 0)


def test_errored_trials_count_in_no_estimate() -> None:
    records = _records({"t1": [True, None, True], "t2": [False, True, True]})
    # t1 has two graded trials, both passed; t2 three with two passes.
    assert pass_hat_k(records, 2) == pytest.approx((1 + 1 / 3) / 2)
    assert pass_hat_k(records, 3) == pytest.approx(0.0)  # only t2 has three graded trials
    boot = bootstrap(records, _records({"t1": [None, None, None], "t2": [None, None, None]}))
    assert boot is None  # nothing graded on one side: no interval


def test_pass_hat_k_at_the_runs_trials_is_the_summary_figure(tmp_path: Path) -> None:
    out = tmp_path / "r.sqlite"
    assert (
        main(["run", "--agent", "random", "--episodes", "9", "--trials", "3", "--out", str(out), "--no-progress"]) == 0
    )
    with RunFile.open(out) as run:
        records = list(run.episodes())
    assert pass_hat_k(records, 3) == pytest.approx(summarize(records)["pass_hat_k"], abs=1e-4)
    assert pass_hat_k(records, 1) == pytest.approx(summarize(records)["pass_rate"], abs=1e-4)


def _run_pair(rng: random.Random, n_tasks: int, rate_a: float, rate_b: float, spread: float) -> tuple[list[Any], ...]:
    """Two runs of the same tasks; each task has its own difficulty, shared by both agents."""
    a: dict[str, list[bool | None]] = {}
    b: dict[str, list[bool | None]] = {}
    for t in range(n_tasks):
        shift = rng.uniform(-spread, spread)
        a[f"t{t}"] = [rng.random() < min(1, max(0, rate_a + shift)) for _ in range(2)]
        b[f"t{t}"] = [rng.random() < min(1, max(0, rate_b + shift)) for _ in range(2)]
    return _records(a), _records(b)


def test_bootstrap_is_deterministic_and_contains_the_observed_difference() -> None:
    a, b = _run_pair(random.Random(1), 40, 0.4, 0.6, 0.3)
    first = bootstrap(a, b)
    assert first is not None and first == bootstrap(a, b)
    low, high, paired = first
    observed = sum(r.passed for r in b) / len(b) - sum(r.passed for r in a) / len(a)
    assert paired and -1 <= low <= observed <= high <= 1


def test_pairing_narrows_the_interval_when_tasks_differ_in_difficulty() -> None:
    a, b = _run_pair(random.Random(2), 60, 0.5, 0.6, 0.45)
    paired = bootstrap(a, b)
    renamed = [SimpleNamespace(**{**vars(r), "task_id": "x" + r.task_id}) for r in b]
    unpaired = bootstrap(a, renamed)
    assert paired is not None and unpaired is not None
    assert paired[2] is True and unpaired[2] is False
    assert paired[1] - paired[0] < 0.8 * (unpaired[1] - unpaired[0])


@pytest.mark.slow
def test_bootstrap_covers_the_true_difference_about_95_percent() -> None:
    rng = random.Random(3)
    covered = 0
    sims = 300
    for _ in range(sims):
        a, b = _run_pair(rng, 50, 0.45, 0.6, 0.3)
        boot = bootstrap(a, b, resamples=RESAMPLES)
        assert boot is not None
        covered += boot[0] <= 0.15 <= boot[1]
    assert 0.88 <= covered / sims <= 0.99


def test_bootstrap_coverage_smoke() -> None:
    rng = random.Random(4)
    covered = sum(
        (lambda boot: boot is not None and boot[0] <= 0.15 <= boot[1])(bootstrap(*_run_pair(rng, 50, 0.45, 0.6, 0.3)))
        for _ in range(60)
    )
    assert covered >= 50  # about 57 expected at 95%; a broken interval lands far below


def test_report_fits_80_columns_and_names_both_intervals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    for agent, out in (("random", a), ("oracle", b)):
        argv = ["run", "--agent", agent, "--episodes", "9", "--trials", "2", "--out", str(out), "--no-progress"]
        assert main(argv) == 0
    capsys.readouterr()
    assert main(["compare", str(a), str(b)]) == 0
    text = capsys.readouterr().out
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "Newcombe 95%" in text and "bootstrap 95%" in text and "pass^k" in text and "k=2 A" in text
    all_row = next(line for line in text.splitlines() if line.startswith("all "))
    assert "18/18 100%" in all_row
    assert main(["compare", str(a), str(b), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    fam = {f["family"]: f for f in report["families"]}
    assert fam["all"]["paired"] is True and fam["all"]["pass_hat_k"]["2"]["b"] == 1.0
    assert report["trials"] == 2 and report["errored"] == {"a": 0, "b": 0}


def test_format_handles_empty_and_hostile_families() -> None:
    a = _records({"t": [True]}, family="\x1b[31mred")
    text = format_comparison(comparison(a, []))
    assert "\x1b" not in text and "-" in text
