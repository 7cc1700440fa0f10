"""Multi-agent runs: one policy per role over team tasks, graded and recorded.

:func:`run_team_episode` plays one task with a policy behind every role
(turn order within a cycle: customer, tier 1, supervisor, tier 2 — the AEC
environment's order) and returns a :class:`TeamRecord`: the verdict of the
shared verifier, each role's return and own reward term, every turn.
:func:`summarize_team` adds per-role rewards to the usual run summary.

``mirrorworld run --multi-agent`` is :func:`run_multi_agent`; :func:`add_arguments`
adds its options to the ``run`` parser. It writes the usual run file (one
episode per task; the turns as messages, the per-role figures under the
verdict's ``team`` key), so ``mirrorworld show`` reads it.

Policies by name (``--customer``, ``--tier1``, ``--supervisor``, ``--tier2``):

* customer: ``scripted`` (the seeded simulator), ``llm`` (an OpenAI-compatible
  endpoint: ``--customer-base-url``, ``--customer-model``), ``idle``;
* tier1: ``gold``, ``overreaching``, ``refuse``, ``claim``, ``idle``;
* supervisor: ``diligent``, ``rubber-stamp``, ``idle``;
* tier2: ``gold``, ``refuse``, ``idle``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from statistics import fmean
from typing import Any, Literal

from mirrorworld.core.task import Split, Task
from mirrorworld.errors import AgentError, MirrorworldError, RegistryError
from mirrorworld.run.metrics import summarize
from mirrorworld.run.runner import EpisodeRecord, _event
from mirrorworld.sim.customer import ScriptedCustomer
from mirrorworld.sim.policies import (
    ClaimPolicy,
    DiligentSupervisor,
    GoldStaff,
    IdlePolicy,
    OverreachingStaff,
    RefusePolicy,
    RoleContext,
    RolePolicy,
    RubberStampSupervisor,
)
from mirrorworld.episodes.team import TeamEpisode
from mirrorworld.worlds.helpdesk_team import CUSTOMER, ROLES, SUPERVISOR, TIER1, TIER2, HelpdeskTeamWorld

__all__ = [
    "GOLD_TEAM",
    "POLICIES",
    "TeamRecord",
    "add_arguments",
    "make_policies",
    "run_multi_agent",
    "run_team_episode",
    "run_team_episodes",
    "summarize_team",
]

PolicyFactory = Callable[[Mapping[str, Any]], RolePolicy]


def _llm_customer(options: Mapping[str, Any]) -> RolePolicy:
    from mirrorworld.sim.llm import LLMCustomer

    if not options.get("customer_base_url") or not options.get("customer_model"):
        raise RegistryError("the llm customer needs --customer-base-url and --customer-model")
    return LLMCustomer(base_url=str(options["customer_base_url"]), model=str(options["customer_model"]))


POLICIES: dict[str, dict[str, PolicyFactory]] = {
    CUSTOMER: {"scripted": lambda o: ScriptedCustomer(), "llm": _llm_customer, "idle": lambda o: IdlePolicy()},
    TIER1: {
        "gold": lambda o: GoldStaff(),
        "overreaching": lambda o: OverreachingStaff(),
        "refuse": lambda o: RefusePolicy(),
        "claim": lambda o: ClaimPolicy(),
        "idle": lambda o: IdlePolicy(),
    },
    SUPERVISOR: {
        "diligent": lambda o: DiligentSupervisor(),
        "rubber-stamp": lambda o: RubberStampSupervisor(),
        "idle": lambda o: IdlePolicy(),
    },
    TIER2: {"gold": lambda o: GoldStaff(), "refuse": lambda o: RefusePolicy(), "idle": lambda o: IdlePolicy()},
}
"""Policies by role and name (see the module docstring)."""

GOLD_TEAM: dict[str, str] = {CUSTOMER: "scripted", TIER1: "gold", SUPERVISOR: "diligent", TIER2: "gold"}
"""The reference team: the simulated customer with the scripted gold staff."""


def make_policies(names: Mapping[str, str], **options: Any) -> dict[str, RolePolicy]:
    """One policy per role, by name (``names`` may leave roles out: they get the reference team's)."""
    out: dict[str, RolePolicy] = {}
    for role in ROLES:
        name = names.get(role, GOLD_TEAM[role])
        factory = POLICIES[role].get(name)
        if factory is None:
            known = ", ".join(POLICIES[role])
            raise RegistryError(f"no {role} policy named {name!r} (known: {known})")
        policy = factory(options)
        policy.name = name
        out[role] = policy
    return out


@dataclass
class TeamRecord:
    """One graded team episode."""

    index: int
    task_id: str
    family: str
    seed: int
    split: str
    passed: bool
    score: float
    returns: dict[str, float]
    """Each role's return: the team's reward plus its own term."""
    role_terms: dict[str, float]
    """Each role's own term: ``-penalty`` per hard rule its calls broke."""
    policies: dict[str, str]
    cycles: int
    customer_left: bool
    truncated: bool
    turns: list[dict[str, Any]]
    calls: list[dict[str, Any]]
    verdict: dict[str, Any]
    task: dict[str, Any]
    world_hash: str
    error: str | None = None
    seconds: float = 0.0
    violations: dict[str, list[str]] = field(default_factory=dict)

    def to_episode_record(self) -> EpisodeRecord:
        """This episode in the run-file format (turns as messages, team figures under ``verdict["team"]``)."""
        messages: list[dict[str, Any]] = []
        for t in self.turns:
            if t["tool"] is None:
                continue
            outcome = "ok" if t["ok"] else f"error {(t['error'] or {}).get('code')}"
            messages.append({"role": t["role"], "content": f"{t['tool']} {json.dumps(t['args'])} -> {outcome}"})
        team = {
            "returns": self.returns,
            "role_terms": self.role_terms,
            "policies": self.policies,
            "cycles": self.cycles,
            "customer_left": self.customer_left,
            "truncated": self.truncated,
            "violations": self.violations,
        }
        return EpisodeRecord(
            index=self.index,
            task_id=self.task_id,
            family=self.family,
            seed=self.seed,
            split=self.split,
            trial=0,
            agent="team(" + ",".join(f"{r}={p}" for r, p in self.policies.items()) + ")",
            passed=self.passed,
            score=self.score,
            reward=fmean(self.returns.values()) if self.returns else 0.0,
            steps=len(self.calls),
            messages=messages,
            calls=self.calls,
            verdict={**self.verdict, "team": team},
            task=self.task,
            world_hash=self.world_hash,
            error=self.error,
            seconds=self.seconds,
        )


def run_team_episode(
    world: HelpdeskTeamWorld,
    task: Task,
    policies: Mapping[str, RolePolicy],
    *,
    max_cycles: int = 40,
    reward: Literal["shaped", "sparse"] = "shaped",
    penalty: float = 1.0,
    index: int = 0,
) -> TeamRecord:
    """Play ``task`` with a policy behind each of its roles and grade it."""
    started = time.perf_counter()
    ep = TeamEpisode(world, task, max_cycles=max_cycles, reward=reward, penalty=penalty)
    error = None
    try:
        for role in ep.roles:
            policies[role].reset(RoleContext(world, task, role, task.seed))
        while not ep.over:
            for role in ep.roles:
                if ep.over:
                    break
                action = policies[role].act(ep.observe(role))
                if action is None:
                    ep.act(role, None)
                else:
                    ep.act(role, action.tool, action.args)
            ep.end_cycle()
    except AgentError as err:
        error = str(err)
    verdict = ep.finish()
    returns = ep.returns
    record = TeamRecord(
        index=index,
        task_id=task.id,
        family=task.family,
        seed=task.seed,
        split=task.split,
        passed=verdict.passed and error is None,
        score=verdict.score if error is None else 0.0,
        returns={r: round(returns.get(r, 0.0), 6) if error is None else 0.0 for r in ep.roles},
        role_terms=ep.role_terms(),
        policies={r: policies[r].name for r in ep.roles},
        cycles=ep.cycle,
        customer_left=ep.customer_left,
        truncated=ep.truncated,
        turns=[t.to_dict() for t in ep.turns],
        calls=[_event(e) for e in ep.session.events],
        verdict=verdict.to_dict(),
        task=task.to_dict(),
        world_hash=world.content_hash,
        error=error,
        seconds=time.perf_counter() - started,
        violations={r: [f"step {v.step}: {v.rule}" for v in vs] for r, vs in ep.violations_by_role().items() if vs},
    )
    ep.close()
    return record


def run_team_episodes(
    world: HelpdeskTeamWorld,
    policies: Mapping[str, RolePolicy],
    *,
    episodes: int,
    split: Split = "test",
    families: Sequence[str] | None = None,
    start: int = 0,
    max_cycles: int = 40,
    reward: Literal["shaped", "sparse"] = "shaped",
    penalty: float = 1.0,
    on_record: Callable[[TeamRecord], None] | None = None,
) -> list[TeamRecord]:
    """Run ``episodes`` tasks of ``split`` (cycling through families) with the same policies."""
    records = []
    for i in range(episodes):
        task = world.task_for(split, start + i, families)
        record = run_team_episode(world, task, policies, max_cycles=max_cycles, reward=reward, penalty=penalty, index=i)
        records.append(record)
        if on_record is not None:
            on_record(record)
    return records


def _roles_block(records: Sequence[TeamRecord]) -> dict[str, float]:
    by_role: dict[str, list[float]] = defaultdict(list)
    for r in records:
        for role, value in r.returns.items():
            by_role[role].append(value)
    return {role: round(fmean(by_role[role]), 4) for role in ROLES if by_role.get(role)}


def summarize_team(records: Sequence[TeamRecord], *, seconds: float | None = None) -> dict[str, Any]:
    """The run summary (pass rates, rewards, gates, as for one agent) plus per-role figures."""
    out = summarize([r.to_episode_record() for r in records], seconds=seconds)
    out["roles"] = _roles_block(records)
    out["customer_left"] = sum(r.customer_left for r in records)
    out["truncated"] = sum(r.truncated for r in records)
    out["mean_cycles"] = round(fmean(r.cycles for r in records), 2) if records else 0.0
    penalised: dict[str, int] = defaultdict(int)
    for r in records:
        for role, term in r.role_terms.items():
            if term < 0:
                penalised[role] += 1
    out["penalised"] = dict(sorted(penalised.items()))
    fams: dict[str, list[TeamRecord]] = defaultdict(list)
    for r in records:
        fams[r.family].append(r)
    for name, rs in fams.items():
        out["families"][name]["roles"] = _roles_block(rs)
    if records:
        policies: dict[str, str] = {}
        for r in records:
            policies.update(r.policies)
        out["policies"] = {role: policies[role] for role in ROLES if role in policies}
        out["agent"] = "team"
    return out


# -- command line ----------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``--multi-agent`` options to the ``run`` parser (which already has the run options)."""
    g = parser.add_argument_group("multi-agent (--multi-agent)")
    g.add_argument("--multi-agent", action="store_true", help="run a team over the helpdesk_team world")
    g.add_argument("--customer", default="scripted", help=f"customer policy: {', '.join(POLICIES[CUSTOMER])}")
    g.add_argument("--tier1", default="gold", help=f"tier-1 policy: {', '.join(POLICIES[TIER1])}")
    g.add_argument("--supervisor", default="diligent", help=f"supervisor policy: {', '.join(POLICIES[SUPERVISOR])}")
    g.add_argument("--tier2", default="gold", help=f"tier-2 policy: {', '.join(POLICIES[TIER2])}")
    g.add_argument("--max-cycles", type=int, default=40, help="cycles before an episode is truncated")
    g.add_argument("--penalty", type=float, default=1.0, help="a role's charge per hard rule its calls break")
    g.add_argument("--customer-base-url", default=None, help="OpenAI-compatible endpoint of the llm customer")
    g.add_argument("--customer-model", default=None, help="model of the llm customer")


def run_multi_agent(args: argparse.Namespace) -> int:
    """``mirrorworld run --multi-agent``: run the team, record it, print per-role rewards."""
    from mirrorworld.run.trajectories import RunFile

    episodes = int(getattr(args, "episodes", 8))
    max_cycles = int(getattr(args, "max_cycles", 40))
    if episodes < 1 or max_cycles < 1:
        raise MirrorworldError("--episodes and --max-cycles must be at least 1")
    name = getattr(args, "world", "helpdesk_team")
    if name not in ("helpdesk", "helpdesk_team"):
        raise MirrorworldError(f"--multi-agent runs the helpdesk_team world, not {name!r}")
    from mirrorworld.core.registry import default

    world: Any = default.get("helpdesk_team", scale=float(getattr(args, "scale", 1.0)))
    fam_arg = getattr(args, "families", None)
    families = [f.strip() for f in fam_arg.split(",") if f.strip()] if fam_arg else None
    for f in families or ():
        world.family(f)
    names = {
        CUSTOMER: getattr(args, "customer", "scripted"),
        TIER1: getattr(args, "tier1", "gold"),
        SUPERVISOR: getattr(args, "supervisor", "diligent"),
        TIER2: getattr(args, "tier2", "gold"),
    }
    policies = make_policies(
        names,
        customer_base_url=getattr(args, "customer_base_url", None),
        customer_model=getattr(args, "customer_model", None),
    )
    split: Split = getattr(args, "split", "test")
    out_arg = getattr(args, "out", None)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    out = Path(out_arg) if out_arg else Path("runs") / f"{world.name}-team-{stamp}.sqlite"
    meta = {
        "world": world.id,
        "world_hash": world.content_hash,
        "agent": "team",
        "policies": names,
        "split": split,
        "episodes": episodes,
        "trials": 1,
        "families": families,
        "max_cycles": max_cycles,
        "scale": float(getattr(args, "scale", 1.0)),
        "start": int(getattr(args, "start", 0)),
    }
    runfile = RunFile.create(out, meta)
    started = time.perf_counter()
    try:
        records = run_team_episodes(
            world,
            policies,
            episodes=episodes,
            split=split,
            families=families,
            start=int(getattr(args, "start", 0)),
            max_cycles=max_cycles,
            penalty=float(getattr(args, "penalty", 1.0)),
            on_record=lambda r: runfile.add(r.to_episode_record()),
        )
        summary = summarize_team(records, seconds=time.perf_counter() - started)
        summary["run_file"] = str(out)
        runfile.set_meta("summary", summary)
    finally:
        runfile.close()
    if getattr(args, "json", False):
        print(json.dumps(summary, indent=2))
    else:
        print_team_summary(summary, title=f"team on {world.id} ({split} split)")
        print(f"saved {len(records)} episodes to {out}")
    return 0


def print_team_summary(summary: dict[str, Any], title: str) -> None:
    """Print a team summary as a table: pass rate and each role's mean reward, per family."""
    from rich.console import Console
    from rich.table import Table

    roles = [r for r in ROLES if r in summary.get("roles", {})]
    table = Table(title=title)
    table.add_column("family", no_wrap=True, min_width=20)
    for col in ("episodes", "pass rate", *roles):
        table.add_column(col, justify="right")

    def row(name: str, block: dict[str, Any], style: str | None = None) -> None:
        rewards = block.get("roles", {})
        cells = [f"{rewards[r]:.3f}" if r in rewards else "-" for r in roles]
        table.add_row(name, str(block["episodes"]), f"{block['pass_rate']:.1%}", *cells, style=style)

    for name, block in summary["families"].items():
        row(name, block)
    row("all", summary, style="bold")
    con = Console(highlight=False, soft_wrap=False, width=max(Console().width, 100))
    con.print(table)
    policies = ", ".join(f"{r}={p}" for r, p in summary.get("policies", {}).items())
    con.print(f"policies: {policies}")
    gates = ", ".join(f"{g} {n}" for g, n in summary["gate_failures"].items())
    con.print(f"verifier gate failures: {gates}")
    penalised = ", ".join(f"{r} {n}" for r, n in summary.get("penalised", {}).items()) or "none"
    con.print(
        f"customer left: {summary['customer_left']}  truncated: {summary['truncated']}  "
        f"mean cycles: {summary['mean_cycles']}  penalised roles: {penalised}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``run_multi_agent`` as its own command (``python -m mirrorworld.run.multiagent``)."""
    parser = argparse.ArgumentParser(prog="mirrorworld run --multi-agent")
    parser.add_argument("--world", default="helpdesk_team")
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--split", choices=("train", "test"), default="test")
    parser.add_argument("--families", default=None)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--out", default=None)
    parser.add_argument("--json", action="store_true")
    add_arguments(parser)
    return run_multi_agent(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
