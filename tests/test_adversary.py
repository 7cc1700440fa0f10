"""The generative adversary: reproducible, and it catches verifiers broken one way each."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from mirrorworld import make_world
from mirrorworld.audit import adversary as adversary_module
from mirrorworld.audit.adversary import ATTACKS, run_adversary
from mirrorworld.verify.verdict import Gate, Verdict

WORLD = make_world("helpdesk")
FAMILIES = ["refund_damaged", "cancel_order", "update_email"]


def _verdict(passed: bool) -> Verdict:
    gates = {"state": Gate(passed)}
    return Verdict(passed, 1.0 if passed else 0.0, gates, {}, {})


def test_reports_are_reproducible() -> None:
    a = run_adversary(WORLD, per_family=30, tasks_per_family=3, families=FAMILIES).to_dict()
    b = run_adversary(WORLD, per_family=30, tasks_per_family=3, families=FAMILIES).to_dict()
    assert a == b
    assert all(a["families"][f]["tried"] == 30 for f in FAMILIES)
    assert json.loads(json.dumps(a)) == a


def test_a_verifier_that_passes_everything_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    class Lenient:
        def __call__(self, session: Any) -> Verdict:
            return _verdict(True)

    monkeypatch.setattr(adversary_module, "Verifier", Lenient)
    report = run_adversary(WORLD, per_family=40, tasks_per_family=2, families=FAMILIES)
    for name in FAMILIES:
        fam = report.families[name]
        for kind in ATTACKS:
            survived, tried = fam.attacks[kind]
            assert tried and survived, f"{name}: no {kind} attack was caught passing under a lenient verifier"
        assert fam.survivors and all(s["calls"] for s in fam.survivors)
        assert fam.variants[0] == 0


def test_survivors_come_with_minimal_trajectories(monkeypatch: pytest.MonkeyPatch) -> None:
    """A surviving write attack shrinks to the gold plus the one write that makes it differ."""

    class Lenient:
        def __call__(self, session: Any) -> Verdict:
            return _verdict(True)

    monkeypatch.setattr(adversary_module, "Verifier", Lenient)
    report = run_adversary(WORLD, per_family=60, tasks_per_family=3, families=["refund_damaged"])
    writes = [s for s in report.families["refund_damaged"].survivors if s["kind"] == "write"]
    gold = WORLD.task("refund_damaged", 0).gold
    assert writes
    assert all(len(s["calls"]) == len(gold) + 1 for s in writes)


def test_a_verifier_that_fails_everything_fails_the_variants(monkeypatch: pytest.MonkeyPatch) -> None:
    class Strict:
        def __call__(self, session: Any) -> Verdict:
            return _verdict(False)

    monkeypatch.setattr(adversary_module, "Verifier", Strict)
    report = run_adversary(WORLD, per_family=10, tasks_per_family=2, families=FAMILIES)
    # Every legitimate variant is reported failing; the gold itself fails, so nothing is attacked.
    assert report.variant_failures == sum(f.variants[1] for f in report.families.values()) > 0
    assert report.survived == 0 and all(f.tried == 0 for f in report.families.values())


def test_audit_verifiers_runs_the_adversary_from_the_command_line() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mirrorworld",
            "audit-verifiers",
            "--world",
            "helpdesk",
            "--seeds",
            "1",
            "--families",
            "cancel_order",
            "--adversary",
            "20",
            "--no-probes",
            "--no-cross-process",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode in (0, 1), out.stderr
    data = json.loads(out.stdout)
    fam = data["adversary"]["families"]["cancel_order"]
    assert fam["tried"] == 20 and set(fam["attacks"]) == set(ATTACKS)
    bad = subprocess.run(
        [sys.executable, "-m", "mirrorworld", "audit-verifiers", "--adversary", "-3"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1
