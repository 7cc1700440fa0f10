"""The verdict on one episode.

``passed`` is true only when every gate passes; ``score`` is 1.0 when passed and
0.0 otherwise, so no partial credit can be farmed from the parts of a task that
are easy. ``breakdown`` keeps each gate's result with its evidence, and the
process-reward potentials that dense shaping used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["GATES", "Gate", "Verdict"]

GATES = ("state", "collateral", "policy", "communication")
"""The gates an episode must all pass, in report order."""


@dataclass(frozen=True)
class Gate:
    """One gate's result: whether it passed and the evidence for it."""

    passed: bool
    evidence: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "evidence": list(self.evidence), **self.details}


@dataclass(frozen=True)
class Verdict:
    """The grade of one episode. See the module docstring."""

    passed: bool
    score: float
    gates: dict[str, Gate]
    process: dict[str, Any]
    guards: dict[str, Any]

    @property
    def breakdown(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: g.to_dict() for name, g in self.gates.items()}
        out["process"] = self.process
        out["guards"] = self.guards
        return out

    @property
    def evidence(self) -> list[str]:
        return [f"{name}: {e}" for name, g in self.gates.items() for e in g.evidence]

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "score": self.score,
            "breakdown": self.breakdown,
            "evidence": self.evidence,
        }
