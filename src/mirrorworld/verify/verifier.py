"""Grading an episode.

The :class:`Verifier` compares a session's state with the task's gold solution
replayed on a fresh copy of the initial state, and applies four gates:

* **state** — the outcome view of the task's targets equals the gold one, and
  every declared check holds;
* **collateral** — no row changed outside the task's scope (a change that was
  undone is not a change);
* **policy** — no hard rule was broken, by a committed call or as found by the
  world's guards over the finished episode;
* **communication** — the final message states every required fact.

It also reports the process-reward potentials and guard counters (repeated
identical calls, refused calls, rows written and restored) that audits use.
The verifier reads the session's state and its recorded events only; nothing
an agent says about its own work is taken on trust.
"""

from __future__ import annotations

from typing import Any

from mirrorworld.core.session import Session, Violation
from mirrorworld.errors import VerifierError
from mirrorworld.verify.checks import evaluate_check, initial_potential, potential
from mirrorworld.verify.communication import missing_facts, stated_distractors
from mirrorworld.verify.verdict import Gate, Verdict

__all__ = ["Verifier", "verify"]


def _view_mismatches(gold: Any, got: Any, path: str = "") -> list[str]:
    if isinstance(gold, dict) and isinstance(got, dict):
        out = []
        for key in sorted(set(gold) | set(got), key=str):
            out += _view_mismatches(gold.get(key), got.get(key), f"{path}.{key}" if path else str(key))
        return out
    return [] if gold == got else [f"{path}: expected {gold!r}, found {got!r}"]


class Verifier:
    """Grades sessions; stateless apart from the world's gold cache."""

    def __call__(self, session: Session) -> Verdict:
        task = session.task
        if task is None:
            raise VerifierError("a session without a task cannot be graded")
        world = session.world
        gold = world.gold(task)
        db = session.db

        view = world.outcome_view(db, task.targets)
        mismatches = _view_mismatches(gold.view, view)
        check_results = {c.name: evaluate_check(db, session.image, c) for c in task.checks}
        failed_checks = [name for name, ok in check_results.items() if not ok]
        state = Gate(
            not mismatches and not failed_checks,
            tuple(mismatches) + tuple(f"check failed: {n}" for n in failed_checks),
            {"checks": check_results},
        )

        scope = set(task.scope)
        collateral_rows = []
        changes = session.changes()
        for change in changes:
            owner = world.owner(change.table, change.after or change.before or {})
            if owner is not None and owner not in scope:
                collateral_rows.append(f"{change.kind} {change.table} {change.pk} (belongs to {owner[0]} {owner[1]})")
        collateral = Gate(not collateral_rows, tuple(collateral_rows))

        violations: list[Violation] = [v for e in session.events for v in e.violations]
        violations += world.guards(session)
        hard = [v for v in violations if v.hard]
        policy = Gate(
            not hard,
            tuple(f"step {v.step}: {v.rule}: {v.message}" for v in violations),
            {"violations": [{"rule": v.rule, "hard": v.hard, "step": v.step} for v in violations]},
        )

        missing = missing_facts(session.final_message, task.facts)
        ambiguous = [(f, d) for f in task.facts for d in stated_distractors(session.final_message, f)]
        communication = Gate(
            not missing and not ambiguous,
            tuple(f"final message does not state {f.label} ({f.value})" for f in missing)
            + tuple(f"final message also states {d}, a wrong answer for {f.label}" for f, d in ambiguous),
            {"responded": session.final_message is not None},
        )

        gates = {"state": state, "collateral": collateral, "policy": policy, "communication": communication}
        passed = all(g.passed for g in gates.values())
        process = {
            "potential_initial": initial_potential(world, task),
            "potential_final": potential(db, session.image, task.checks),
        }
        signatures = [e.signature() for e in session.events if e.ok]
        written = {k for e in session.events for k in e.rows if k[0] != "sim_clock"}
        guards = {
            "calls": len(session.events),
            "refused_calls": sum(1 for e in session.events if not e.ok),
            "repeated_calls": len(signatures) - len(set(signatures)),
            "rows_restored": len(written - {(c.table, c.pk) for c in changes}),
        }
        return Verdict(passed, 1.0 if passed else 0.0, gates, process, guards)


def verify(session: Session) -> Verdict:
    """Grade ``session`` against its task."""
    return Verifier()(session)
