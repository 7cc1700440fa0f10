"""Summaries of a run: pass rates, rewards, steps, per family and per gate.

Only *graded* episodes count in the figures: an errored episode (a failure at
the world, verifier or infrastructure boundary, see :mod:`mirrorworld.run.runner`)
says nothing about the agent, so it is left out of every rate and mean and
counted instead, in ``errors`` (all of them) and ``errors_by_boundary``.

``pass^k`` (Yao et al., tau-bench) is the fraction of tasks passed in *all* of
their ``k`` trials, over the tasks whose every trial was graded; with one trial
per task it equals the pass rate.

``usage`` sums what the agent counted the episodes to cost (a model's tokens
and requests, :meth:`~mirrorworld.agents.base.Agent.usage`), errored episodes
included: an endpoint bills a failed episode's requests too.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from statistics import fmean
from typing import Any

from mirrorworld.errors import BOUNDARIES
from mirrorworld.run.runner import EpisodeRecord
from mirrorworld.verify.verdict import GATES

__all__ = ["summarize"]


def _block(records: Sequence[EpisodeRecord]) -> dict[str, Any]:
    graded = [r for r in records if not r.errored]
    n = len(graded)
    by_task: dict[str, list[bool]] = defaultdict(list)
    errored_tasks = {r.task_id for r in records if r.errored}
    for r in graded:
        if r.task_id not in errored_tasks:
            by_task[r.task_id].append(r.passed)
    by_boundary: dict[str, int] = defaultdict(int)
    for r in records:
        if r.failure is not None:
            by_boundary[r.failure.boundary] += 1
    passed = sum(r.passed for r in graded)
    return {
        "episodes": len(records),
        "graded": n,
        "passed": passed,
        "pass_rate": round(passed / n, 4) if n else 0.0,
        "pass_hat_k": round(sum(all(v) for v in by_task.values()) / len(by_task), 4) if by_task else 0.0,
        "mean_reward": round(fmean(r.reward for r in graded), 4) if n else 0.0,
        "mean_steps": round(fmean(r.steps for r in graded), 2) if n else 0.0,
        "errors": len(records) - n,
        "errors_by_boundary": {b: by_boundary[b] for b in BOUNDARIES if by_boundary.get(b)},
    }


def summarize(records: Sequence[EpisodeRecord], *, seconds: float | None = None) -> dict[str, Any]:
    """The summary of a run (JSON-serialisable). Raises ``RunFileError`` on a malformed stored verdict."""
    out = _block(records)
    fams: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        fams[r.family].append(r)
    out["families"] = {name: _block(rs) for name, rs in sorted(fams.items())}
    failures = dict.fromkeys(GATES, 0)
    for r in records:
        verdict = None if r.errored else r.graded
        if verdict is None:
            continue
        for gate in GATES:
            if gate in verdict.gates and not verdict.gates[gate].passed:
                failures[gate] += 1
    out["gate_failures"] = failures
    out["trials"] = max((r.trial for r in records), default=0) + 1
    used = [r.usage for r in records if r.usage]
    if used:
        out["usage"] = {key: sum(u.get(key, 0) for u in used) for key in sorted({k for u in used for k in u})}
    if records:
        out["agent"] = records[0].agent
        out["world_hash"] = records[0].world_hash
    if seconds is not None and seconds > 0:
        out["seconds"] = round(seconds, 3)
        out["episodes_per_s"] = round(len(records) / seconds, 1)
    return out
