"""Dense process reward by potential-based shaping, over progress an agent could see.

**The potential.** Φ(s) is the fraction of the task's *progress marks* that hold
in state ``s``, less the fraction that held when the episode started (so
Φ(s₀) = 0). The marks are:

* one per target record of the task: the agent has opened it (a tool put it on
  screen: ``ref in session.viewed``) or acted on it (a committed call wrote a
  row the world says belongs to it, ``World.owner``), whatever it wrote;
* the world's own marks (``World.progress_marks``): milestones an agent sees in
  production, such as "identity verified" or "approval obtained".

Φ never depends on whether a graded value is right (a priority, an amount, a
reason): trying values and watching the reward reveals nothing the tool
results did not already say, so the reward is no answer key.

**The terms.** Each step earns ``F = γΦ(s') − Φ(s)``; at the end of the episode,
however it ends (terminal call, step budget, the caller's ``finish``), the
potential is taken back: Φ of the terminal state counts as 0. Then for a
learner with the same discount γ the discounted sum of the terms over an
episode of ``T`` steps is ``γᵀ·0 − Φ(s₀) = 0``:

* the discounted shaped return equals the discounted outcome reward, so the
  optimal policy of the outcome reward is unchanged (Ng, Harada & Russell, 1999);
* nothing can be farmed: an undo followed by a redo nets zero, a mark reached
  without finishing is paid back at the end, and nothing is paid after the end;
* with γ = 1 (the default) the plain sum of the terms is 0: the return of an
  episode is its score, 1 when it passes and 0 when it fails, whatever its
  length and however it ends.

γ is ``EpisodeOptions(gamma=...)``: set it to the learner's discount. The
invariants are tested with property-based tests (``tests/test_process_reward.py``).
"""

from __future__ import annotations

import copy

from mirrorworld.core.session import Session

__all__ = ["ProcessReward"]


class ProcessReward:
    """Tracks Φ over one episode and pays out the shaping terms. See the module docstring."""

    def __init__(self, session: Session, *, gamma: float = 1.0) -> None:
        if not 0.0 < gamma <= 1.0:
            raise ValueError(f"gamma must be in (0, 1], not {gamma!r}")
        self.session = session
        self.gamma = gamma
        task = session.task
        self._targets = (
            frozenset(f"{kind}:{ident}" for kind, ident in task.targets) if task is not None else frozenset()
        )
        self._viewed: tuple[str, ...] | None = None
        self._opened = 0
        self._acted: set[str] = set()
        self._seen: set[str] = set()
        """Targets the agent has had on screen (once opened, a record stays opened)."""
        self._marks: tuple[bool, ...] = ()
        if task is not None:  # a new episode: its session is in the task's initial state
            prep = session.world.prepared(task)
            if prep.initial_marks is None:
                prep.initial_marks = session.world.progress_marks(session)
            self._marks = prep.initial_marks
        self._total = len(self._targets) + len(self._marks)
        self._base = 0.0
        self._base = self._phi()
        self.current = 0.0
        self._seen_events = len(session.events)

    def forked(self, session: Session) -> ProcessReward:
        """This process reward, continued on ``session`` (a fork of this one's session, in the same state)."""
        twin = copy.copy(self)
        twin.session = session
        twin._seen = set(self._seen)
        twin._acted = set(self._acted)
        return twin

    def _phi(self) -> float:
        if not self._total:
            return 0.0
        viewed = self.session.viewed
        if viewed is not self._viewed:
            self._viewed = viewed
            targets = self._targets
            if targets and not targets.isdisjoint(viewed):
                self._seen.update(r for r in viewed if r in targets)
            self._opened = len(self._seen | self._acted) if self._acted else len(self._seen)
        return (self._opened + sum(self._marks)) / self._total - self._base

    def _act_on(self, rows: tuple[tuple[str, int], ...]) -> None:
        """Mark the targets that own any of ``rows`` (written by a committed call) as acted on."""
        s = self.session
        image, world = s.image, s.world
        with s.borrow() as db:
            found_rows = [(table, db.execute(image.select_sql(table), (pk,)).fetchone()) for table, pk in rows]
        for table, found in found_rows:
            if found is None:
                continue
            owner = world.owner(table, dict(zip(image.columns[table], found, strict=True)))
            if owner is not None:
                ref = f"{owner[0]}:{owner[1]}"
                if ref in self._targets and ref not in self._acted:
                    self._acted.add(ref)
                    self._viewed = None  # recount

    def step(self, *, episode_over: bool) -> float:
        """The shaping term for the calls made since the last ``step`` (the last one settles Φ to 0)."""
        events = self.session.events
        seen, n = self._seen_events, len(events)
        self._seen_events = n
        before = self.current
        wrote = bool(events[seen].rows) if n == seen + 1 else any(events[i].rows for i in range(seen, n))
        if wrote:
            if len(self._acted) < len(self._targets):
                for i in range(seen, n):
                    self._act_on(events[i].rows)
            if self._marks:
                self._marks = self.session.world.progress_marks(self.session)
        if wrote or self.session.viewed is not self._viewed:
            self.current = self._phi()
        after = 0.0 if episode_over else self.current
        return self.gamma * after - before
