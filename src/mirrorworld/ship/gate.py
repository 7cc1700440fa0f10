"""The regression gate: a reference agent on two versions of a world, per-family deltas, a verdict.

``mirrorworld env gate NEW --against OLD --agent replay --replay RUN`` plays
the same reference agent (a recorded run replayed, a scripted agent, an
endpoint) on the same tasks of both artifacts, each run recorded in its own
run file by ``mirrorworld run --world <ref>``, so each side runs exactly its
artifact. It then compares graded episodes family by family
(:func:`mirrorworld.ship.compare.deltas`).

A family, or the whole run, **regresses** when its pass rate falls by more
than ``tolerance`` and the fall is significant: the 95% interval of the
difference lies below zero. Episodes that errored (an endpoint, world or
infrastructure failure) are not scores: when the new version errors where the
old did not, the gate fails for that reason, apart from regressions; and when
either version graded no episode at all (a reference agent that does not fit
the tasks) it fails, since no evidence is no pass. The report says which.
``env gate`` exits 1 when the gate fails and 2 when it could not be run (a
bad option, an unknown version, an evaluation that crashed), so a release
script can tell "regressed" from "broken".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mirrorworld.errors import MirrorworldError
from mirrorworld.ship.compare import Delta, deltas, format_deltas

__all__ = ["GateReport", "check_tolerance", "evaluate", "gate_runs"]


@dataclass
class GateReport:
    """The gate's findings: every delta, the regressed rows and new errors; ``passed`` when there are none."""

    old: str
    new: str
    rows: list[Delta]
    tolerance: float
    errors_old: int
    errors_new: int
    regressed: list[str] = field(default_factory=list)

    @property
    def graded(self) -> tuple[int, int]:
        """Graded episodes on the old and the new version."""
        whole = next((d for d in self.rows if d.family == "all"), None)
        return (whole.n_a, whole.n_b) if whole is not None else (0, 0)

    @property
    def passed(self) -> bool:
        """No regression, no new errors, and both versions graded at least one episode (no evidence is no pass)."""
        return not self.regressed and self.errors_new <= self.errors_old and min(self.graded) > 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "old": self.old,
            "new": self.new,
            "passed": self.passed,
            "tolerance": self.tolerance,
            "regressed": self.regressed,
            "errors": {"old": self.errors_old, "new": self.errors_new},
            "graded": {"old": self.graded[0], "new": self.graded[1]},
            "families": [d.to_dict() for d in self.rows],
        }

    def format(self) -> str:
        lines = [format_deltas(self.rows, "old", "new")]
        if self.errors_new > self.errors_old:
            lines.append(
                f"the new version errored on {self.errors_new} episodes (the old on {self.errors_old}):"
                " a world or infrastructure failure, not a score"
            )
        if min(self.graded) == 0:
            lines.append(
                "no episode was graded on "
                + ("either version" if max(self.graded) == 0 else "one version")
                + ": the reference agent does not fit these tasks (a replay of another world's run?)"
            )
        if self.regressed:
            lines.append(f"REGRESSION in {', '.join(self.regressed)} (beyond a tolerance of {self.tolerance:.0%})")
        lines.append("gate: " + ("passed" if self.passed else "FAILED"))
        return "\n".join(lines)


def check_tolerance(tolerance: float) -> None:
    """Refuse a tolerance outside [0, 1) (NaN included)."""
    if not (isinstance(tolerance, (int, float)) and 0.0 <= tolerance < 1.0):
        raise MirrorworldError("the gate's tolerance must be a number in [0, 1)")


def gate_runs(old_run: str | Path, new_run: str | Path, *, tolerance: float = 0.0) -> GateReport:
    """Compare two run files of the same reference agent (old version first)."""
    from mirrorworld.run import RunFile

    check_tolerance(tolerance)
    with RunFile.open(old_run) as a, RunFile.open(new_run) as b:
        ra, rb = list(a.episodes()), list(b.episodes())
        labels = [str(f.meta.get("artifact") or f.meta.get("world_hash") or "?")[:16] for f in (a, b)]
    rows = deltas(ra, rb)
    report = GateReport(labels[0], labels[1], rows, tolerance, sum(r.errored for r in ra), sum(r.errored for r in rb))
    for d in rows:
        if d.n_a and d.n_b and d.delta < -tolerance and d.interval[1] < 0:
            report.regressed.append(d.family)
    return report


def evaluate(
    ref: str,
    out: Path,
    *,
    agent: str,
    episodes: int,
    split: str = "test",
    replay: str | None = None,
    store: str | Path | None = None,
    extra: Sequence[str] = (),
) -> Path:
    """Run ``agent`` on the artifact ``ref`` (``mirrorworld run --world ref``) into run file ``out``."""
    cmd = [
        sys.executable,
        "-m",
        "mirrorworld",
        "run",
        "--world",
        ref,
        "--agent",
        agent,
        "--episodes",
        str(episodes),
        "--split",
        split,
        "--out",
        str(out),
        "--json",
        "--no-progress",
        *extra,
    ]
    if replay is not None:
        cmd += ["--replay", str(replay)]
    env = dict(os.environ)
    if store is not None:
        env["MIRRORWORLD_STORE"] = str(store)
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise MirrorworldError(f"evaluating {ref} failed: {last[:300]}")
    try:
        json.loads(done.stdout)
    except ValueError:
        raise MirrorworldError(f"evaluating {ref} printed no summary") from None
    return out
