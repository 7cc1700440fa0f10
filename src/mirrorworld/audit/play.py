"""Playing a tool-call trajectory on a task's initial state and grading it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from mirrorworld.core.session import Session
from mirrorworld.core.task import Task, ToolCall
from mirrorworld.core.world import World
from mirrorworld.verify.verdict import Verdict
from mirrorworld.verify.verifier import Verifier

__all__ = ["Outcome", "play"]


@dataclass(frozen=True)
class Outcome:
    """How a trajectory ended: its verdict and what it left behind."""

    verdict: Verdict
    state_hash: str
    effect: str
    """Digest of what changed, ignoring the world's volatile (timestamp) columns."""
    final_message: str | None
    rules: tuple[str, ...]
    refused: int

    def same_result_as(self, other: Outcome) -> bool:
        """Same effect on the state, same final message and same broken rules."""
        return (self.effect, self.final_message, self.rules) == (other.effect, other.final_message, other.rules)


def play(world: World, task: Task, calls: Sequence[ToolCall]) -> Outcome:
    """Run ``calls`` in a fresh session of ``task`` (stopping when the episode ends) and grade it."""
    with world.session(task) as s:
        for call in calls:
            if s.done:
                break
            s.call(call.tool, call.args)
        verdict = Verifier()(s)
        rules = tuple(sorted(v.rule for e in s.events for v in e.violations))
        rules += tuple(sorted(v.rule for v in world.guards(s)))
        return Outcome(
            verdict, s.state_hash(), effect(world, s), s.final_message, rules, sum(1 for e in s.events if not e.ok)
        )


def effect(world: World, session: Session) -> str:
    """A digest of the rows an episode changed, without volatile columns or the clock."""
    parts = []
    for change in session.changes():
        if change.table == "sim_clock":
            continue
        volatile = set(world.volatile_columns.get(change.table, ()))
        if change.kind == "update":
            fields = {c: v[1] for c, v in change.fields.items() if c not in volatile}
            if not fields:
                continue
        else:
            row = change.after or change.before or {}
            fields = {c: v for c, v in row.items() if c not in volatile}
        parts.append([change.table, change.pk, change.kind, sorted(fields.items())])
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()
