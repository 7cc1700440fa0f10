"""Summaries of a run: pass rates, rewards, steps, per family and per gate.

``pass^k`` (Yao et al., tau-bench) is the fraction of tasks passed in *all* of
their ``k`` trials; with one trial per task it equals the pass rate.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from statistics import fmean
from typing import Any

from mirrorworld.run.runner import EpisodeRecord
from mirrorworld.verify.verdict import GATES

__all__ = ["summarize"]


def _block(records: Sequence[EpisodeRecord]) -> dict[str, Any]:
    n = len(records)
    by_task: dict[str, list[bool]] = defaultdict(list)
    for r in records:
        by_task[r.task_id].append(r.passed)
    return {
        "episodes": n,
        "passed": sum(r.passed for r in records),
        "pass_rate": round(sum(r.passed for r in records) / n, 4) if n else 0.0,
        "pass_hat_k": round(sum(all(v) for v in by_task.values()) / len(by_task), 4) if by_task else 0.0,
        "mean_reward": round(fmean(r.reward for r in records), 4) if n else 0.0,
        "mean_steps": round(fmean(r.steps for r in records), 2) if n else 0.0,
        "errors": sum(r.error is not None for r in records),
    }


def summarize(records: Sequence[EpisodeRecord], *, seconds: float | None = None) -> dict[str, Any]:
    """The summary of a run (JSON-serialisable)."""
    out = _block(records)
    fams: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        fams[r.family].append(r)
    out["families"] = {name: _block(rs) for name, rs in sorted(fams.items())}
    out["gate_failures"] = {
        gate: sum(1 for r in records if not r.verdict["breakdown"].get(gate, {}).get("passed", True)) for gate in GATES
    }
    out["trials"] = max((r.trial for r in records), default=0) + 1
    if records:
        out["agent"] = records[0].agent
        out["world_hash"] = records[0].world_hash
    if seconds is not None and seconds > 0:
        out["seconds"] = round(seconds, 3)
        out["episodes_per_s"] = round(len(records) / seconds, 1)
    return out
