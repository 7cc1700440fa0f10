"""How often a gold team fails because of its simulated customer.

A simulator is only useful if a team that does everything right passes with
it. :func:`measure_simulator` plays the world's reference staff (its
``default_team`` for every role but the ``simulated_role``, ``gold`` where it
names none; in the helpdesk team, gold tier 1 and tier 2 with the diligent
supervisor) over ``seeds`` tasks of every family twice:

1. with a **reference customer** that plays the simulated role's share of the
   gold trajectory (:class:`~mirrorworld.sim.policies.GoldStaff` in its seat):
   every such episode must pass, which shows the staff are right;
2. with the **simulator** under test.

Every task the reference passes and the simulator fails is a simulator
failure, sorted by its first cause, in this order:

* ``agent_error`` — the simulator could not act (an endpoint down);
* ``declined_change`` — the customer declined the change they asked for (a
  call of theirs with ``confirm: false``);
* ``wrong_information`` — the staff acted on what the customer said and it was
  wrong (a refused call, a failed check);
* ``left`` — the customer lost patience and left;
* ``stalled`` — the episode ran out of cycles (the customer never answered,
  or answered without the fact asked for, until the staff gave up);
* ``other`` — none of these.

For the scripted customer the failure rate must be 0 (a test keeps it so).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mirrorworld.core.seats import seats_of
from mirrorworld.core.task import Split, split_seed
from mirrorworld.core.world import World
from mirrorworld.errors import MirrorworldError
from mirrorworld.sim.policies import GoldStaff, RolePolicy

__all__ = ["FAILURE_MODES", "SimulatorReport", "classify", "measure_simulator"]

FAILURE_MODES = ("left", "stalled", "declined_change", "wrong_information", "agent_error", "other")

if TYPE_CHECKING:  # the runner imports the simulator; import it back only for typing
    from mirrorworld.run.multiagent import TeamRecord


@dataclass
class SimulatorReport:
    """The outcome of :func:`measure_simulator`."""

    customer: str
    episodes: int = 0
    reference_passed: int = 0
    simulator_passed: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)
    """Tasks the reference passed and the simulator failed: ``{task, mode, evidence}``."""
    reference_failures: list[str] = field(default_factory=list)
    """Tasks even the reference customer failed (a bug in the staff or the task)."""

    @property
    def failure_rate(self) -> float:
        """Simulator failures over the episodes the reference passed."""
        return len(self.failures) / self.reference_passed if self.reference_passed else 0.0

    @property
    def modes(self) -> dict[str, int]:
        counts = Counter(f["mode"] for f in self.failures)
        return {m: counts[m] for m in FAILURE_MODES if counts[m]}

    def to_dict(self) -> dict[str, Any]:
        return {
            "customer": self.customer,
            "episodes": self.episodes,
            "reference_passed": self.reference_passed,
            "simulator_passed": self.simulator_passed,
            "failure_rate": round(self.failure_rate, 4),
            "modes": self.modes,
            "failures": self.failures,
            "reference_failures": self.reference_failures,
        }


def classify(record: TeamRecord) -> str | None:
    """The failure mode of a team episode (None when it passed)."""
    if record.passed:
        return None
    if record.error is not None:
        return "agent_error"
    customer = record.simulated_role
    declined = any(
        t["role"] == customer and isinstance(t["args"], dict) and t["args"].get("confirm") is False
        for t in record.turns
    )
    if declined:
        return "declined_change"
    if any(not t["ok"] and t["role"] != customer and t["tool"] for t in record.turns):
        return "wrong_information"  # the staff acted on what the customer said, and the world refused it
    if record.customer_left:
        return "left"
    if record.truncated:
        return "stalled"
    if not record.verdict["breakdown"]["state"]["passed"]:
        return "wrong_information"
    return "other"


def measure_simulator(
    world: World,
    customer: Callable[[], RolePolicy],
    *,
    families: Sequence[str] | None = None,
    seeds: int = 10,
    split: Split = "test",
    max_cycles: int = 40,
) -> SimulatorReport:
    """Measure a customer simulator against the gold staff (see the module docstring)."""
    from mirrorworld.run.multiagent import make_policies, run_team_episode

    seats = seats_of(world)
    role = seats.simulated_role
    if role is None:
        raise MirrorworldError(f"world {world.name} has no simulated role to measure a simulator in")
    staff = [r for r in seats.roles if r != role]
    names = list(families) if families else [f.name for f in world.families]
    sim = customer()
    report = SimulatorReport(customer=sim.name)
    for family in names:
        for i in range(seeds):
            task = world.task(family, split_seed(split, i))
            report.episodes += 1
            team = {role: GoldStaff(), **make_policies(world, roles=staff)}
            reference = run_team_episode(world, task, team, max_cycles=max_cycles)
            if not reference.passed:
                report.reference_failures.append(task.id)
                continue
            report.reference_passed += 1
            record = run_team_episode(
                world, task, {role: sim, **make_policies(world, roles=staff)}, max_cycles=max_cycles
            )
            mode = classify(record)
            if mode is None:
                report.simulator_passed += 1
                continue
            evidence = record.error or "; ".join(record.verdict["evidence"][:3]) or mode
            report.failures.append({"task": task.id, "mode": mode, "evidence": evidence})
    return report
