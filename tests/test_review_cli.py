"""The ``review`` command and the calibration loop: disagreements → regression cases → replay."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from typing import Any

import pytest

from mirrorworld.errors import MirrorworldError
from mirrorworld.review.__main__ import main
from mirrorworld.review.cli import register
from mirrorworld.review.queue import SamplingPlan, build_queue, take_next
from mirrorworld.review.regressions import (
    CASE_FORMAT,
    RegressionCase,
    check_cases,
    export_disagreements,
    load_cases,
    run_case,
    write_cases,
)
from mirrorworld.review.store import ReviewInput, ReviewStore
from mirrorworld.review.testing import make_runs


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A review database: two reviewers grade everything; the claim agent's episodes are 'passed' by humans."""
    tmp = tmp_path_factory.mktemp("reviewed")
    store = ReviewStore(tmp / "review.sqlite")
    for p in make_runs(tmp, ("oracle", "claim"), episodes=4):
        store.add_run(p, audit=False)
    build_queue(store, SamplingPlan(overlap=2, overlap_share=1.0, gold_rate=0.0))
    people = [store.reviewer(store.add_reviewer(n, f"{n}-password")) for n in ("ann", "ben")]
    judge = store.add_reviewer("judge", "judge-password", "adjudicator")
    for r in people:
        assert r is not None
        while (item_id := take_next(store, r)) is not None:
            item = store.item(item_id)
            assert item is not None
            # The humans disagree with the verifier on every claim episode (they believe the claim).
            store.submit_review(ReviewInput(item_id, r.id, True, reason="the agent says it is done"))
    claims = [i for i in store.items() if i.agent == "claim"]
    store.adjudicate(claims[0].id, judge, True, "the customer's request was handled")  # a disagreement: becomes a case
    store.adjudicate(claims[1].id, judge, False, "nothing was done")  # agrees with the verifier: no case
    return tmp / "review.sqlite"


def test_export_turns_adjudicated_disagreements_into_cases(reviewed: Path, tmp_path: Path) -> None:
    store = ReviewStore(reviewed)
    out = tmp_path / "cases.jsonl"
    cases, new = export_disagreements(store, out)
    assert new == 1 and len(cases) == 1
    (case,) = cases
    assert case.status == "open" and case.human_passed and not case.verifier_passed
    assert case.messages and all(m["role"] == "assistant" for m in case.messages)
    assert case.reason == "the customer's request was handled" and case.source["adjudicated_by"] == "judge"
    line = json.loads(out.read_text().splitlines()[0])
    assert line["format"] == CASE_FORMAT
    result = run_case(case)
    assert not result.verifier_passed and not result.agrees and not result.regressed
    # Exporting again adds nothing and keeps a status someone set by hand.
    write_cases(out, [RegressionCase(**{**case.__dict__, "status": "fixed"})])
    cases, new = export_disagreements(store, out)
    assert new == 0 and cases[0].status == "fixed"
    summary = check_cases([out])
    assert summary["regressed"] == [case.id] and summary["cases"] == 1


def test_case_files_are_validated(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "something-else"}\n')
    with pytest.raises(MirrorworldError, match="not a regression case"):
        load_cases(bad)
    assert load_cases(tmp_path / "missing") == []


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_stats_command(reviewed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["stats", "--db", str(reviewed), "--json", "--resamples", "50"], capsys)
    assert code == 0
    report = json.loads(out)
    assert report["reviews"] == 16 and report["items_reviewed"] == 8
    assert report["verifier_vs_human"]["confusion"]["verifier_fail_human_pass"] == 3
    assert "alarms" in report["drift"]
    code, out, _ = _run(["stats", "--db", str(reviewed), "--resamples", "50"], capsys)
    assert code == 0 and "verifier vs human" in out and "16 grades of 8 items" in out


def test_export_and_check_commands(reviewed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "regressions" / "verifier_cases.jsonl"
    code, out, _ = _run(["export-disagreements", "--db", str(reviewed), "--out", str(out_file)], capsys)
    assert code == 0 and "1 new regression cases; 1 in" in out
    code, out, _ = _run(["check-regressions", str(out_file.parent), "--json"], capsys)
    assert code == 0 and json.loads(out)["open"] != []
    code, _, err = _run(["check-regressions", str(tmp_path / "nowhere")], capsys)
    assert code == 1 and err.startswith("mirrorworld: error: no regression cases at")


def test_user_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["stats", "--db", str(tmp_path / "none.sqlite")], capsys)
    assert code == 1 and err == f"mirrorworld: error: no review database at {tmp_path / 'none.sqlite'}\n"
    code, _, err = _run(["serve", str(tmp_path / "missing-run.sqlite"), "--db", str(tmp_path / "r.sqlite")], capsys)
    assert code == 1 and "no run file at" in err
    code, _, err = _run(["serve", "--overlap", "0", "--db", str(tmp_path / "r.sqlite")], capsys)
    assert code == 1 and "overlap must be at least 1" in err


def test_add_user_reads_the_password_from_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "r.sqlite"
    monkeypatch.setattr("sys.stdin", io.StringIO("a-long-password\n"))
    code, out, _ = _run(["add-user", "zoe", "--role", "adjudicator", "--db", str(db)], capsys)
    assert code == 0 and "added adjudicator zoe" in out
    reviewer = ReviewStore(db).authenticate("zoe", "a-long-password")
    assert reviewer is not None and reviewer.role == "adjudicator"
    monkeypatch.setattr("sys.stdin", io.StringIO("short\n"))
    code, _, err = _run(["add-user", "yan", "--db", str(db)], capsys)
    assert code == 1 and "at least 8 characters" in err


def test_register_plugs_into_an_argparse_cli() -> None:
    parser = argparse.ArgumentParser(prog="mirrorworld")
    sub = parser.add_subparsers(dest="command", required=True)
    handlers: dict[str, Any] = register(sub)
    assert set(handlers) == {"review"}
    args = parser.parse_args(["review", "stats", "--db", "x.sqlite", "--json"])
    assert args.command == "review" and args.review_command == "stats" and args.json
    with pytest.raises(SystemExit):
        parser.parse_args(["review"])
