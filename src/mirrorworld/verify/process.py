"""Dense process reward by potential-based shaping.

Φ(s) is the fraction of the task's checks that hold in state ``s``, less the
fraction that held in the initial state ``s₀`` (so Φ(s₀) = 0, and breaking a
constraint that held at the start makes Φ negative). Each step
earns ``F = γΦ(s') − Φ(s)`` with γ = 1, and at the end of the episode the
potential is taken back (Φ of the terminal state counts as 0). The shaping
terms of an episode therefore sum to ``−Φ(s₀) = 0``, and an episode's shaped
return equals its outcome score: an agent cannot farm them (an undo followed by a redo nets zero, and reaching a
subgoal without finishing is paid back at the end), and the optimal policy of
the outcome reward is unchanged (Ng, Harada & Russell, 1999).
"""

from __future__ import annotations

from mirrorworld.core.session import Session
from mirrorworld.verify.checks import potential

__all__ = ["ProcessReward"]


class ProcessReward:
    """Tracks Φ over one episode and pays out the shaping terms."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._checks = session.task.checks if session.task is not None else ()
        self._base = 0.0
        if session.task is not None:
            prep = session.world.prepared(session.task)
            if prep.initial_potential is None:
                prep.initial_potential = self._phi()
            self._base = prep.initial_potential
        self.current = 0.0
        self._seen_events = len(session.events)

    def _phi(self) -> float:
        return potential(self.session.db, self.session.image, self._checks) - self._base

    def step(self, *, episode_over: bool) -> float:
        """The shaping term for the calls made since the last ``step``."""
        events = self.session.events
        seen, n = self._seen_events, len(events)
        self._seen_events = n
        before = self.current
        changed = bool(events[seen].rows) if n == seen + 1 else any(events[i].rows for i in range(seen, n))
        if changed:
            self.current = self._phi()
        after = 0.0 if episode_over else self.current
        return after - before
