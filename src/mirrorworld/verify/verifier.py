"""Grading an episode.

The :class:`Verifier` compares a session's state with the task's gold solution
replayed on a fresh copy of the initial state, and applies five gates:

* **state** — every change the gold made, the episode made the same way (the
  whole diff, below), and every declared check holds;
* **collateral** — the episode made no change the gold did not make that no
  tolerance covers (a change that was undone is not a change);
* **policy** — no hard rule was broken, by a committed call or as found by the
  world's guards over the finished episode;
* **communication** — every text the customer sees is read by one claim checker
  (:mod:`mirrorworld.verify.claims`), as a person sees it (invisible characters
  removed, look-alike letters folded): the final message *asserts* every
  required fact (not negated, asked, hedged or only reported as the customer's
  words; no distractor given as the answer; another currency is no dollar
  amount), every claim of an action is backed by the episode, an action
  reported in words no claim rule reads names a tool that succeeded, every
  amount, record number and email a text gives is one the agent was shown, no
  promise the policy forbids is made (another customer's data in any form is a
  ``data_disclosure`` violation, found by the world's guards with the same
  reader; a report to staff may name only the task's customers);
* **reply** — a final message was sent, where the task's family needs one
  (``TaskFamily.needs_reply``): evidence ``no final message``.

**The whole diff.** An episode's state is graded as the rows it changed
against the task's initial state (``Session.changes()``), compared with the
gold's (``GoldOutcome.changes``, replayed once per task and compiled once by
:mod:`mirrorworld.verify.diff`). Every field of every row, in every table but
the simulated clock, is compared, whatever entity it belongs to; what differs
is either *missing* (the gold changed it and the episode did not, or changed
it otherwise: the state gate) or *unexpected* (the episode changed it and the
gold did not: the collateral gate, whose evidence names the owning entity
when it lies outside the task's scope, ``… (belongs to order 7)``, and reads
``unexpected change: …`` otherwise). A row that existed before is matched by
its primary key; an inserted row by its content, never its rowid: its fields
without the rowid and tolerated columns, with every foreign key to another
inserted row replaced by that row's content, so an insert that got another
id because a harmless step ran first still matches, and so do the rows that
refer to it. Gold and episode inserts are matched per table as multisets.
A row of an entity outside the task's scope that the episode wrote at all
(even a write that changed only its timestamps) is collateral.

**Tolerances** are data each world declares (``World.tolerances``, see
:mod:`mirrorworld.core.tolerance`): ``ignore`` (simulated timestamps; every
``volatile_columns`` entry), ``id`` (sequence-drawn values), ``order``
(positions) are not compared; ``text`` (free text) passes the text rule of
:func:`mirrorworld.verify.diff.plausible_text` or equals what the gold wrote,
and, where the gold writes a text of its own, echoes it or the customer's
words (unless the tolerance says ``echo=False``), its content being read by
the claim checker; ``choice`` lets a field the gold
leaves alone move to a listed value on an entity of the task's scope. Extra
rows of a world's ``optional_rows`` tables (an approval asked for and not
needed, an internal note) are harmless on an entity of the scope. The task's
``scope`` is thus where tolerated extras may happen; its ``targets`` only
pick the outcome view printed as evidence when the state gate fails.

It also reports the fraction of checks holding at the start and the end, and
guard counters (repeated identical calls, refused calls, rows written and
restored) that audits use.
The verifier reads the session's state and its recorded events only; nothing
an agent says about its own work is taken on trust.

**Where the end state comes from.** The state and collateral gates read an
:class:`EndState`: the rows the episode changed, the gold's outcome and the end
state the checks and the outcome view read. Grading a session
(``Verifier()(session)``) takes all three from the session and ``World.gold``;
:meth:`Verifier.grade` takes them from elsewhere (the real twin's end state
and its own gold replay, :mod:`mirrorworld.fidelity.episode`) while every
other gate still reads the session's record of calls and texts.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mirrorworld.core.seats import Seated
from mirrorworld.core.session import RowChange, Session, Violation
from mirrorworld.core.task import Task
from mirrorworld.errors import VerifierError
from mirrorworld.verify.checks import evaluate_check, initial_potential
from mirrorworld.verify.claims import texts_to_grade
from mirrorworld.verify.communication import grade_communication
from mirrorworld.verify.diff import compare
from mirrorworld.verify.judge import TextJudge
from mirrorworld.verify.verdict import Gate, Verdict

if TYPE_CHECKING:
    from mirrorworld.core.world import GoldOutcome

__all__ = ["EndState", "Verifier", "verify"]


@dataclass(frozen=True)
class EndState:
    """What the state and collateral gates compare: an episode's end against its task's gold.

    * ``changes`` — the rows the episode changed against the task's initial state;
    * ``gold`` — the gold solution's outcome: its changes and its outcome view;
    * ``db`` — the end state in the world's schema: the task's checks and the
      outcome view (printed as evidence when the state gate fails) read it.
    """

    changes: Sequence[RowChange]
    gold: GoldOutcome
    db: sqlite3.Connection


def _view_mismatches(gold: Any, got: Any, path: str = "") -> list[str]:
    if isinstance(gold, dict) and isinstance(got, dict):
        out = []
        for key in sorted(set(gold) | set(got), key=str):
            out += _view_mismatches(gold.get(key), got.get(key), f"{path}.{key}" if path else str(key))
        return out
    return [] if gold == got else [f"{path}: expected {gold!r}, found {got!r}"]


class Verifier:
    """Grades sessions; stateless apart from the world's gold cache.

    ``judge`` is an optional second reader of the customer texts
    (:mod:`mirrorworld.verify.judge`); without one, grading needs no model.
    """

    def __init__(self, judge: TextJudge | None = None) -> None:
        self.judge = judge

    def __call__(self, session: Session) -> Verdict:
        with session.borrow():  # the session keeps its connection while graded, and may park after
            return self._grade(session)

    def grade(self, session: Session, end: EndState) -> Verdict:
        """Grade ``session``'s record of calls and texts with the state gates reading ``end``.

        For an end state read outside the session (see the module docstring);
        the session's own state is not looked at.
        """
        task = session.task
        if task is None:
            raise VerifierError("a session without a task cannot be graded")
        return self._verdict(session, task, end)

    def _grade(self, session: Session) -> Verdict:
        task = session.task
        if task is None:
            raise VerifierError("a session without a task cannot be graded")
        return self._verdict(session, task, EndState(session.changes(), session.world.gold(task), session.db))

    def _verdict(self, session: Session, task: Task, end: EndState) -> Verdict:
        world = session.world
        gold, db, changes = end.gold, end.db, end.changes
        party = world.simulated_role if isinstance(world, Seated) else None
        exempt = frozenset(k for e in session.events if e.role == party for k in e.rows) if party else frozenset()
        diff = compare(world, gold, changes, task.scope, exempt, task.instruction)
        check_results = {c.name: evaluate_check(db, session.image, c) for c in task.checks}
        failed_checks = [name for name, ok in check_results.items() if not ok]
        state_evidence = [*diff.missing, *(f"check failed: {n}" for n in failed_checks)]
        if state_evidence:
            view = _view_mismatches(gold.view, world.outcome_view(db, task.targets))
            state_evidence += [f"outcome view: {m}" for m in view]
        state = Gate(not state_evidence, tuple(state_evidence), {"checks": check_results})
        collateral = Gate(not diff.unexpected, tuple(diff.unexpected))

        violations: list[Violation] = [v for e in session.events for v in e.violations]
        violations += world.guards(session)
        hard = [v for v in violations if v.hard]
        policy = Gate(
            not hard,
            tuple(f"step {v.step}: {v.rule}: {v.message}" for v in violations),
            {"violations": [{"rule": v.rule, "hard": v.hard, "step": v.step} for v in violations]},
        )

        communication = grade_communication(session, task)
        if self.judge is not None:
            judged = self.judge(task, texts_to_grade(session), world.policy)
            if judged:
                communication = Gate(
                    False,
                    communication.evidence + tuple(f"judge: {line}"[:500] for line in judged),
                    communication.details,
                )

        family = world.families_by_name.get(task.family)
        needs_reply = family.needs_reply if family is not None else True
        replied = session.final_message is not None
        reply = Gate(replied or not needs_reply, () if replied or not needs_reply else ("no final message",))

        gates = {
            "state": state,
            "collateral": collateral,
            "policy": policy,
            "communication": communication,
            "reply": reply,
        }
        passed = all(g.passed for g in gates.values())
        process = {
            "potential_initial": initial_potential(world, task),
            "potential_final": sum(check_results.values()) / len(check_results) if check_results else 0.0,
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
