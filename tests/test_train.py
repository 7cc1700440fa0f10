"""``mirrorworld train`` at smoke size: it trains, evaluates on the test split, audits, and writes its files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from mirrorworld.cli import main
from mirrorworld.train.demos import demonstrate
from mirrorworld.train.ppo import Args, make_env


def test_train_writes_results_curve_episodes_and_audit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    argv = ["train", "--world", "helpdesk", "--families", "cancel_order", "--minutes", "1", "--steps", "512"]
    code = main([*argv, "--episodes", "2", "--warm-start", "20", "--out", str(out), "--no-progress"])
    assert code == 0, capsys.readouterr().err
    results = json.loads((out / "results.json").read_text())
    assert set(results["test"]) == {"cancel_order"}
    row = results["test"]["cancel_order"]
    assert row["oracle"] == 1.0 and 0.0 <= row["trained"] <= 1.0 and 0.0 <= row["random"] <= 1.0
    assert results["history"]["demonstrations"] > 0 and results["history"]["steps"][0] == 0
    assert results["audit"]["episodes"] == 2
    lines = (out / "test_episodes.jsonl").read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(line)["task_id"].startswith("cancel_order/") for line in lines)
    assert (out / "table.md").read_text().startswith("| family |")
    assert (out / "policy.pt").stat().st_size > 0


def test_train_refuses_bad_arguments_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["train", "--families", "no_such_family", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "no_such_family" in err
    code = main(["train", "--minutes", "0", "--out", str(tmp_path)])
    assert code == 1 and capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize("family", ["refund_damaged", "deny_refund", "cancel_order", "sla_escalation", "update_email"])
def test_demonstrations_pass_on_train_tasks(family: str) -> None:
    args = Args(families=(family,), max_steps=10)
    env = make_env(args)
    world = env.world
    passed = [demonstrate(env, world.task_for("train", i, [family])) is not None for i in range(6)]
    assert sum(passed) >= 5, passed
