"""``audit-verifiers``: prove a world's verifiers right, family by family.

For every task family over ``seeds`` seeds the audit checks:

1. *solvability* — the gold trajectory scores 1.0;
2. *null agents* — noop, refuse, claim, escalate-only and spray score 0;
3. *mutation testing* — mutants of the gold trajectory fail (mutation score =
   killed / non-equivalent mutants; a mutant that ends exactly like the gold —
   same state hash, message and broken rules — is equivalent, except for
   collateral and policy mutants, which must fail however they end);
4. *invariance* — harmless variants still pass;
5. *reward-basis lint* — every declared check reaches the verdict and can
   fail, and no task can pass on an empty criterion;
6. *determinism* — grading is repeatable in-process and in another process
   under another hash seed;
7. with ``adversary=N``, the generative adversary (:mod:`mirrorworld.audit.adversary`):
   ``N`` composed attacks per family must all fail, its legitimate variants all pass.

It also runs the red-team probes (:mod:`mirrorworld.agents.probes`). Nothing
here names a world or a family: a world added later is audited by
registering it.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import random
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from mirrorworld.audit.cases import Case, mutant_cases, null_cases, variant_cases
from mirrorworld.audit.play import Outcome, play
from mirrorworld.core.task import Task
from mirrorworld.core.world import World
from mirrorworld.errors import WorldError

__all__ = ["QUALITY_BARS", "AuditReport", "FamilyAudit", "audit_verifiers", "fingerprint"]

QUALITY_BARS = {
    "solvability": 1.0,
    "null_pass_rate": 0.0,
    "invariance": 1.0,
    "mutation_score": 0.95,
    "probe_success": 0.0,
    "determinism": 1.0,
}


@dataclass
class FamilyAudit:
    """The audit of one task family."""

    family: str
    tasks: int = 0
    solved: int = 0
    nulls: dict[str, list[int]] = field(default_factory=dict)
    """operator -> [passed (bad), total]"""
    mutants: dict[str, list[int]] = field(default_factory=dict)
    """operator -> [killed, total, equivalent or stillborn]"""
    variants: dict[str, list[int]] = field(default_factory=dict)
    """operator -> [passed, total]"""
    survivors: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    """Gold, null or variant cases with the wrong result."""
    lint: list[str] = field(default_factory=list)
    deterministic: int = 0

    @property
    def mutation_score(self) -> float:
        killed = sum(v[0] for v in self.mutants.values())
        total = sum(v[1] - v[2] for v in self.mutants.values())
        return killed / total if total else 1.0

    @property
    def null_passes(self) -> int:
        return sum(v[0] for v in self.nulls.values())

    @property
    def invariance(self) -> float:
        total = sum(v[1] for v in self.variants.values())
        return sum(v[0] for v in self.variants.values()) / total if total else 1.0

    def summary(self) -> dict[str, Any]:
        return {
            "tasks": self.tasks,
            "solvability": self.solved / self.tasks if self.tasks else 0.0,
            "null_passes": self.null_passes,
            "mutation_score": round(self.mutation_score, 4),
            "mutants_killed": sum(v[0] for v in self.mutants.values()),
            "mutants_equivalent": sum(v[2] for v in self.mutants.values()),
            "mutants_total": sum(v[1] for v in self.mutants.values()),
            "invariance": round(self.invariance, 4),
            "determinism": self.deterministic / self.tasks if self.tasks else 0.0,
            "lint_issues": len(self.lint),
        }


@dataclass
class AuditReport:
    """Everything ``audit-verifiers`` found, JSON-serialisable through ``to_dict``."""

    world: str
    world_hash: str
    seeds: int
    families: dict[str, FamilyAudit]
    probes: dict[str, list[int]] = field(default_factory=dict)
    """probe -> [successes, episodes]"""
    probe_findings: list[dict[str, Any]] = field(default_factory=list)
    cross_process: bool | None = None
    seconds: float = 0.0
    adversary: dict[str, Any] | None = None
    """The generative adversary's report (``AdversaryReport.to_dict()``), when it ran."""

    def failed_bars(self) -> list[str]:
        """The quality bars this audit misses, one line each (empty: all met)."""
        out = []
        for name, fam in self.families.items():
            s = fam.summary()
            if s["solvability"] < QUALITY_BARS["solvability"]:
                out.append(f"{name}: solvability {s['solvability']:.1%}")
            if s["null_passes"]:
                out.append(f"{name}: null agents passed {s['null_passes']} times")
            if s["mutation_score"] < QUALITY_BARS["mutation_score"]:
                out.append(f"{name}: mutation score {s['mutation_score']:.1%}")
            if s["invariance"] < QUALITY_BARS["invariance"]:
                out.append(f"{name}: invariance {s['invariance']:.1%}")
            if s["determinism"] < QUALITY_BARS["determinism"]:
                out.append(f"{name}: determinism {s['determinism']:.1%}")
            out += [f"{name}: {issue}" for issue in fam.lint]
        for probe, (succ, total) in self.probes.items():
            if succ:
                out.append(f"probe {probe}: succeeded {succ}/{total}")
        if self.cross_process is False:
            out.append("verdicts differ in another process")
        for name, fam in (self.adversary or {}).get("families", {}).items():
            if fam["survived"]:
                out.append(f"{name}: {fam['survived']}/{fam['tried']} adversary attacks passed")
            if fam["variants"][0]:
                out.append(f"{name}: {fam['variants'][0]}/{fam['variants'][1]} adversary variants failed")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "world": self.world,
            "world_hash": self.world_hash,
            "seeds": self.seeds,
            "seconds": round(self.seconds, 2),
            "quality_bars": QUALITY_BARS,
            "meets_bars": not self.failed_bars(),
            "failed_bars": self.failed_bars(),
            "families": {
                name: {**fam.summary(), **{k: v for k, v in asdict(fam).items() if k not in ("family", "tasks")}}
                for name, fam in self.families.items()
            },
            "probes": {k: {"successes": v[0], "episodes": v[1]} for k, v in self.probes.items()},
            "probe_findings": self.probe_findings,
            "determinism": {"cross_process": self.cross_process},
            "adversary": self.adversary,
        }


def _calls_json(case: Case) -> list[dict[str, Any]]:
    return [{"tool": c.tool, "args": c.args} for c in case.calls]


def _run_cases(world: World, task: Task, cases: list[Case], gold: Outcome) -> list[tuple[Case, Outcome]]:
    """Play cases; of a try-group keep the first whose calls were all accepted."""
    out: list[tuple[Case, Outcome]] = []
    groups: dict[Any, list[tuple[Case, Outcome]]] = {}
    for case in cases:
        group = case.meta.get("try_group")
        if group is not None and group in groups and groups[group][-1][1].refused <= gold.refused:
            continue  # this group already has a mutant whose calls all went through
        outcome = play(world, task, case.calls)
        if group is None:
            out.append((case, outcome))
        else:
            groups.setdefault(group, []).append((case, outcome))
    for tried in groups.values():
        accepted = [t for t in tried if t[1].refused <= gold.refused]
        out.append(accepted[0] if accepted else tried[0])
    return out


def audit_task(world: World, task: Task, fam: FamilyAudit, rng: random.Random) -> None:
    """Audit one task into ``fam``."""
    fam.tasks += 1
    gold = play(world, task, task.gold)
    if gold.verdict.score == 1.0:
        fam.solved += 1
    else:
        fam.failures.append({"task": task.id, "case": "gold", "evidence": gold.verdict.evidence})

    names = {c.name for c in task.checks}
    if set(gold.verdict.breakdown["state"]["checks"]) != names:
        fam.lint.append(f"{task.id}: the verdict does not evaluate every declared check")
    initial = play(world, task, ())
    ever_false = {n for n, ok in initial.verdict.breakdown["state"]["checks"].items() if not ok}
    initial_view = world.outcome_view_for(task)
    if not task.checks and not task.facts and initial_view == world.gold(task).view:
        fam.lint.append(f"{task.id}: empty criterion (no checks, no facts, gold changes no target)")

    for case, outcome in _run_cases(world, task, list(null_cases(world, task)), gold):
        bucket = fam.nulls.setdefault(case.operator, [0, 0])
        bucket[1] += 1
        if outcome.verdict.score > 0:
            bucket[0] += 1
            fam.failures.append(
                {
                    "task": task.id,
                    "case": f"null {case.operator}",
                    "calls": _calls_json(case),
                    "evidence": outcome.verdict.evidence,
                }
            )

    for case, outcome in _run_cases(world, task, list(mutant_cases(world, task, rng)), gold):
        bucket = fam.mutants.setdefault(case.operator, [0, 0, 0])
        bucket[1] += 1
        ever_false |= {n for n, ok in outcome.verdict.breakdown["state"]["checks"].items() if not ok}
        if not outcome.verdict.passed:
            bucket[0] += 1
        elif outcome.same_result_as(gold) and (case.equivalence_allowed or outcome.refused > gold.refused):
            bucket[2] += 1  # equivalent, or stillborn (its deviation was refused)
        else:
            fam.survivors.append(
                {
                    "task": task.id,
                    "operator": case.operator,
                    "mutant": case.name,
                    "calls": _calls_json(case),
                    "final_message": outcome.final_message,
                }
            )

    for case, outcome in _run_cases(world, task, list(variant_cases(world, task)), gold):
        bucket = fam.variants.setdefault(case.operator, [0, 0])
        bucket[1] += 1
        if outcome.verdict.passed:
            bucket[0] += 1
        else:
            fam.failures.append(
                {
                    "task": task.id,
                    "case": f"variant {case.operator}: {case.name}",
                    "calls": _calls_json(case),
                    "evidence": outcome.verdict.evidence,
                }
            )

    dead = sorted(names - ever_false)
    if dead:
        fam.lint.append(f"{task.id}: checks that never fail in any audited trajectory: {', '.join(dead)}")

    again = play(world, task, task.gold)
    if again.verdict.to_dict() == gold.verdict.to_dict() and again.state_hash == gold.state_hash:
        fam.deterministic += 1


def fingerprint(world: World, families: Sequence[str], seeds: int) -> str:
    """A hash of the verdicts of gold, null and mutant trajectories of a sample of tasks."""
    h = hashlib.sha256()
    for family in families:
        for seed in range(seeds):
            task = world.task(family, seed)
            cases = [*null_cases(world, task), *mutant_cases(world, task, random.Random(f"audit/{task.id}"))]
            for calls in [task.gold, *(c.calls for c in cases)]:
                v = play(world, task, calls).verdict.to_dict()
                h.update(json.dumps(v, sort_keys=True, default=str).encode())
    return h.hexdigest()


_CHILD = (
    "import pickle, sys; from mirrorworld.audit.verifiers import fingerprint; "
    "world, families, seeds = pickle.load(sys.stdin.buffer); print(fingerprint(world, families, seeds))"
)
"""The other process: it rebuilds the world from its pickle and prints the fingerprint."""


def _cross_process(world: World, families: list[str], seeds: int) -> bool:
    """Whether another process, under another hash seed, grades the same sample the same way.

    The world travels as its pickle (its class, scale and data seed: see
    ``World.__reduce__``), so a world registered any way (an entry point, an
    in-process registration, a class defined in a test module) is rebuilt the
    same in the other process, which gets this process's import path.
    """
    here = fingerprint(world, families, seeds)
    try:
        payload = pickle.dumps((world, list(families), seeds))
    except (pickle.PicklingError, AttributeError, TypeError) as err:
        raise WorldError(
            f"world {world.name} cannot be rebuilt in another process ({err}); audit it with --no-cross-process"
        ) from err
    env = {
        **os.environ,
        "PYTHONHASHSEED": "4242",
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }
    out = subprocess.run(
        [sys.executable, "-c", _CHILD],
        input=payload,
        capture_output=True,
        env=env,
        timeout=600,
        check=False,
    )
    if out.returncode != 0:
        lines = out.stderr.decode("utf-8", "replace").strip().splitlines()
        raise WorldError(
            f"world {world.name} could not be graded in another process: {lines[-1] if lines else out.returncode}"
        )
    return out.stdout.decode("utf-8", "replace").strip() == here


def audit_verifiers(
    world: World,
    *,
    seeds: int = 20,
    families: Sequence[str] | None = None,
    probes: bool = True,
    cross_process: bool = True,
    adversary: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> AuditReport:
    """Audit every task family of ``world`` over ``seeds`` seeds. See the module docstring."""
    started = time.perf_counter()
    names = list(families) if families else [f.name for f in world.families]
    for n in names:
        world.family(n)
    report = AuditReport(world.id, world.content_hash, seeds, {n: FamilyAudit(n) for n in names})
    total = len(names) * seeds
    done = 0
    for name in names:
        for seed in range(seeds):
            task = world.task(name, seed)
            audit_task(world, task, report.families[name], random.Random(f"audit/{task.id}"))
            done += 1
            if progress is not None:
                progress(done, total)
    if probes:
        from mirrorworld.agents.probes import run_probes

        report.probes, report.probe_findings = run_probes(world, names, seeds)
    if cross_process:
        report.cross_process = _cross_process(world, names, min(seeds, 2))
    if adversary > 0:
        from mirrorworld.audit.adversary import run_adversary

        report.adversary = run_adversary(
            world, per_family=adversary, tasks_per_family=min(seeds, adversary), families=names
        ).to_dict()
    report.seconds = time.perf_counter() - started
    return report
