"""Multi-agent runs: one policy per role over the tasks of any world with seats, graded and recorded.

:func:`run_team_episode` plays one task of a seated world
(:class:`~mirrorworld.core.seats.Seated`) with a policy behind every role of
its contact, in the world's turn order, through a
:class:`~mirrorworld.episodes.TeamEpisode`, and returns a :class:`TeamRecord`:
the verdict of the shared verifier, each role's return and own reward term,
every turn. :func:`summarize_team` adds per-role rewards to the usual run
summary. Nothing here imports a world.

Policies are named per role. :func:`make_policies` reads them from the world:
its :meth:`~mirrorworld.core.seats.Seated.policy_menu` maps each role's
policy names to import paths (a ``RolePolicy`` class, built with no
arguments, or a factory called with the runner's options as keyword
arguments); a role the menu leaves out can be played by the generic
baselines of :data:`POLICIES` (``gold``, ``idle``, ``refuse``, ``claim``), and
every role can be played by a model (``llm``: :data:`LLM_STAFF`, with ``--model``
and the endpoint options of ``run``). A
role no name is given for plays the world's ``default_team`` policy, else
``gold``: that is the reference team (:func:`gold_team`).

``mirrorworld run --multi-agent`` is :func:`run_multi_agent`; :func:`add_arguments`
adds its options to the ``run`` parser. ``--world`` names a seated world (a
world without seats stands for the one registered seated world built on it:
``helpdesk`` runs ``helpdesk_team``); ``--policy ROLE=NAME`` (repeatable)
picks any role's policy, and ``--customer``, ``--tier1``, ``--supervisor``,
``--tier2`` are shorthands for the helpdesk team's roles. It writes the usual
run file (one episode per task; the turns as messages, the per-role figures
under the verdict's ``team`` key), so ``mirrorworld show`` reads it.
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

from mirrorworld.agents.base import Agent
from mirrorworld.core.registry import Registry, default, load_object
from mirrorworld.core.seats import Seated, seats_of
from mirrorworld.core.task import Split, Task
from mirrorworld.core.world import World
from mirrorworld.episodes import TeamEpisode
from mirrorworld.errors import Failure, MirrorworldError, RegistryError, boundary
from mirrorworld.run.metrics import summarize
from mirrorworld.run.runner import EpisodeRecord, _event
from mirrorworld.sim.policies import RoleContext, RolePolicy

__all__ = [
    "DEFAULT_WORLD",
    "GOLD_TEAM",  # noqa: F822 - the default world's reference team, read on first use (__getattr__)
    "POLICIES",
    "ROLE_FLAGS",
    "TeamRecord",
    "add_arguments",
    "gold_team",
    "make_policies",
    "policy_menu",
    "run_multi_agent",
    "run_team_episode",
    "run_team_episodes",
    "summarize_team",
    "team_world",
]

DEFAULT_WORLD = "helpdesk_team"
"""The world ``--multi-agent`` runs when none is named."""

_SIM = "mirrorworld.sim.policies"

POLICIES: Mapping[str, str] = {
    "gold": f"{_SIM}:GoldStaff",
    "idle": f"{_SIM}:IdlePolicy",
    "refuse": f"{_SIM}:RefusePolicy",
    "claim": f"{_SIM}:ClaimPolicy",
}
"""The generic baselines by name (import paths): the policies of a role its world's menu leaves out."""

LLM_STAFF = "mirrorworld.sim.llm:llm_staff"
"""The ``llm`` policy every role has unless its world's menu names its own (the helpdesk team's customer does):
a model behind ``--model`` and the endpoint options of ``run``, playing the seat through its tools."""

ROLE_FLAGS = ("customer", "tier1", "supervisor", "tier2")
"""Roles with a command-line flag of their own (``--tier1 NAME`` is ``--policy tier1=NAME``)."""


def policy_menu(world: World) -> dict[str, dict[str, str]]:
    """Each role's policies by name: the world's menu, or :data:`POLICIES` for a role the menu leaves out."""
    seats = seats_of(world)
    menu = seats.policy_menu()
    out = {role: dict(menu[role]) if role in menu else dict(POLICIES) for role in seats.roles}
    for names in out.values():
        names.setdefault("llm", LLM_STAFF)
    return out


def gold_team(world: World) -> dict[str, str]:
    """The reference team of ``world``: each role's ``default_team`` policy, ``gold`` where it names none."""
    seats = seats_of(world)
    return {role: seats.default_team.get(role, "gold") for role in seats.roles}


def _build(path: str, name: str, options: Mapping[str, Any]) -> RolePolicy:
    made = load_object(path)
    policy = made() if isinstance(made, type) else made(**options)
    if not isinstance(policy, RolePolicy):
        raise RegistryError(f"the policy {name!r} ({path}) built a {type(policy).__name__}, not a RolePolicy")
    policy.name = name
    return policy


def make_policies(
    world: World,
    names: Mapping[str, str] | None = None,
    *,
    roles: Sequence[str] | None = None,
    **options: Any,
) -> dict[str, RolePolicy]:
    """One new policy per role of ``world`` (or of ``roles``), by name (see the module docstring).

    ``names`` may leave roles out: they play the reference team's policy
    (:func:`gold_team`). ``options`` go to the policy factories (the llm
    customer's ``customer_base_url`` and ``customer_model``). An unknown role
    or policy name is a :class:`RegistryError`.
    """
    seats = seats_of(world)
    names = dict(names or {})
    for role in [*names, *(roles or ())]:
        if role not in seats.roles:
            raise RegistryError(f"world {world.name} has no role {role!r} (roles: {', '.join(seats.roles)})")
    menu, team = policy_menu(world), gold_team(world)
    out: dict[str, RolePolicy] = {}
    for role in roles if roles is not None else seats.roles:
        name = names.get(role, team[role])
        path = menu[role].get(name)
        if path is None:
            raise RegistryError(f"no {role} policy named {name!r} (known: {', '.join(menu[role])})")
        out[role] = _build(path, name, options)
    return out


def __getattr__(name: str) -> dict[str, str]:
    """``GOLD_TEAM``: the reference team of :data:`DEFAULT_WORLD` (:func:`gold_team`), from the default registry."""
    if name == "GOLD_TEAM":
        return gold_team(default.get(DEFAULT_WORLD))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    failure: dict[str, str] | None = None
    """The failure that stopped an errored episode (``{boundary, kind, message}``), not graded."""
    seconds: float = 0.0
    violations: dict[str, list[str]] = field(default_factory=dict)
    world_roles: tuple[str, ...] = ()
    """Every role of the world, in turn order (the task's contact may involve fewer)."""
    simulated_role: str | None = None
    """The world's ``simulated_role`` (the customer), if it has one."""

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
            verdict={**self.verdict, "team": team} if self.verdict else {},
            task=self.task,
            world_hash=self.world_hash,
            error=self.error,
            failure=Failure.from_dict(self.failure) if self.failure is not None else None,
            seconds=self.seconds,
        )


def run_team_episode(
    world: World,
    task: Task,
    policies: Mapping[str, RolePolicy],
    *,
    max_cycles: int = 40,
    reward: Literal["shaped", "sparse"] = "shaped",
    penalty: float = 1.0,
    index: int = 0,
) -> TeamRecord:
    """Play ``task`` with a policy behind each role of its contact and grade it.

    Every cycle each role acts once, in turn order, until the episode ends;
    the episode decides everything else (seats, end, rewards). A policy that
    cannot act (an endpoint down, a bug in its code) is an ``infrastructure``
    failure, a crashed tool a ``world`` failure, a crashed grader a
    ``verifier`` failure: the episode is then recorded as errored with that
    boundary (``failure``), not graded, and not counted as a team failure.
    """
    started = time.perf_counter()
    ep = TeamEpisode(world, task, max_cycles=max_cycles, reward=reward, penalty=penalty)
    missing = [r for r in ep.roles if r not in policies]
    if missing:
        ep.close()
        raise MirrorworldError(f"no policy for role(s) {', '.join(missing)} of task {task.id}")
    failure: Failure | None = None
    verdict = None
    try:
        for role in ep.roles:
            with boundary("infrastructure", f"the {role} policy {policies[role].name}"):
                policies[role].reset(RoleContext(world, task, role, task.seed))
        while not ep.over:
            for role in ep.roles:
                if ep.over:
                    break
                with boundary("infrastructure", f"the {role} policy {policies[role].name}"):
                    action = policies[role].act(ep.observe(role))
                with boundary("world", f"{world.name}: stepping {task.id}"):
                    if action is None:
                        ep.act(role, None)
                    else:
                        ep.act(role, action.tool, action.args)
            ep.end_cycle()
        with boundary("verifier", f"grading {task.id}"):
            verdict = ep.finish()
    except MirrorworldError as err:
        failure = ep.episode.failure or Failure.of(err)
    error = failure.message if failure is not None else None
    returns = ep.returns
    record = TeamRecord(
        index=index,
        task_id=task.id,
        family=task.family,
        seed=task.seed,
        split=task.split,
        passed=verdict is not None and verdict.passed,
        score=verdict.score if verdict is not None else 0.0,
        returns={r: round(returns.get(r, 0.0), 6) if verdict is not None else 0.0 for r in ep.roles},
        role_terms=ep.role_terms(),
        policies={r: policies[r].name for r in ep.roles},
        cycles=ep.cycle,
        customer_left=ep.customer_left,
        truncated=ep.truncated,
        turns=[t.to_dict() for t in ep.turns],
        calls=[_event(e) for e in ep.session.events],
        verdict=verdict.to_dict() if verdict is not None else {},
        task=task.to_dict(),
        world_hash=world.content_hash,
        error=error,
        failure=failure.to_dict() if failure is not None else None,
        seconds=time.perf_counter() - started,
        violations={r: [f"step {v.step}: {v.rule}" for v in vs] for r, vs in ep.violations_by_role().items() if vs},
        world_roles=tuple(ep.seats.roles),
        simulated_role=ep.seats.simulated_role,
    )
    ep.close()
    return record


def run_team_episodes(
    world: World,
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


def _role_order(records: Sequence[TeamRecord]) -> list[str]:
    """Every role the records name: the world's turn order first, then any other in order of appearance."""
    order: list[str] = []
    for r in records:
        for role in (*r.world_roles, *r.returns):
            if role not in order:
                order.append(role)
    return order


def _roles_block(records: Sequence[TeamRecord], order: Sequence[str]) -> dict[str, float]:
    by_role: dict[str, list[float]] = defaultdict(list)
    for r in records:
        for role, value in r.returns.items():
            by_role[role].append(value)
    return {role: round(fmean(by_role[role]), 4) for role in order if by_role.get(role)}


def summarize_team(records: Sequence[TeamRecord], *, seconds: float | None = None) -> dict[str, Any]:
    """The run summary (pass rates, rewards, gates, as for one agent) plus per-role figures."""
    order = _role_order(records)
    out = summarize([r.to_episode_record() for r in records], seconds=seconds)
    out["roles"] = _roles_block(records, order)
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
        out["families"][name]["roles"] = _roles_block(rs, order)
    if records:
        policies: dict[str, str] = {}
        for r in records:
            policies.update(r.policies)
        out["policies"] = {role: policies[role] for role in order if role in policies}
        out["agent"] = "team"
    return out


# -- command line ----------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``--multi-agent`` options to the ``run`` parser (which already has the run options)."""
    g = parser.add_argument_group("multi-agent (--multi-agent)")
    g.add_argument(
        "--multi-agent", action="store_true", help=f"run a team over a world with seats (default {DEFAULT_WORLD})"
    )
    g.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="ROLE=NAME",
        help="the policy one role plays (repeatable; names come from the world's policy menu); "
        "a role left out plays the world's default team",
    )
    for role in ROLE_FLAGS:
        g.add_argument(f"--{role}", default=None, metavar="NAME", help=f"the {role} policy (--policy {role}=NAME)")
    g.add_argument("--max-cycles", type=int, default=40, help="cycles before an episode is truncated")
    g.add_argument("--penalty", type=float, default=1.0, help="a role's charge per hard rule its calls break")
    g.add_argument("--customer-base-url", default=None, help="OpenAI-compatible endpoint of the llm customer")
    g.add_argument("--customer-model", default=None, help="model of the llm customer")


def team_world(registry: Registry, name: str, *, scale: float = 1.0) -> World:
    """The seated world ``name`` stands for: itself when it has seats, else the one registered world
    with seats that extends it (``helpdesk`` stands for ``helpdesk_team``); else a :class:`MirrorworldError`."""
    world = registry.get(name, scale=scale)
    if isinstance(world, Seated):
        return world
    seated: dict[str, World] = {}
    for other in registry.names():
        try:
            candidate = registry.get(other, scale=scale)
        except MirrorworldError:  # a world that cannot be built is no candidate
            continue
        if isinstance(candidate, Seated):
            seated[other] = candidate
    extending = [w for w in seated.values() if isinstance(w, type(world))]
    if len(extending) == 1:
        return extending[0]
    known = ", ".join(seated) or "none registered"
    raise MirrorworldError(
        f"--multi-agent needs a world with seats; {world.name} has none (worlds with seats: {known})"
    )


def _policy_names(args: argparse.Namespace) -> dict[str, str]:
    """The roles' policy names from ``--policy ROLE=NAME`` and the per-role flags."""
    names: dict[str, str] = {}

    def put(role: str, name: str, how: str) -> None:
        if role in names and names[role] != name:
            raise MirrorworldError(f"{how}: the {role} is already given policy {names[role]!r}")
        names[role] = name

    for item in getattr(args, "policy", None) or ():
        role, sep, name = str(item).partition("=")
        if not sep or not role.strip() or not name.strip():
            raise MirrorworldError(f"--policy takes ROLE=NAME, not {str(item)[:80]!r}")
        put(role.strip(), name.strip(), f"--policy {item}")
    for role in ROLE_FLAGS:
        flag = getattr(args, role, None)
        if flag is not None:
            put(role, str(flag), f"--{role} {flag}")
    return names


_ENDPOINT_OPTIONS = ("base_url", "model", "api_key_env", "temperature", "top_p", "max_tokens", "timeout", "retries")
"""The ``run`` options an ``llm`` staff role is built from (:func:`mirrorworld.sim.llm.llm_staff`)."""


def _model_agents(policies: Mapping[str, RolePolicy]) -> dict[str, Agent]:
    """The agents behind the roles a model plays (an ``llm`` policy keeps its agent as ``agent``)."""
    out: dict[str, Agent] = {}
    for role, policy in policies.items():
        agent = getattr(policy, "agent", None)
        if isinstance(agent, Agent):
            out[role] = agent
    return out


def run_multi_agent(args: argparse.Namespace) -> int:
    """``mirrorworld run --multi-agent``: run the team, record it, print per-role rewards."""
    from mirrorworld.run.trajectories import RunFile

    episodes = int(getattr(args, "episodes", 8))
    max_cycles = int(getattr(args, "max_cycles", 40))
    if episodes < 1 or max_cycles < 1:
        raise MirrorworldError("--episodes and --max-cycles must be at least 1")
    registry: Registry = getattr(args, "registry", None) or default
    scale = float(getattr(args, "scale", 1.0))
    world = team_world(registry, getattr(args, "world", None) or DEFAULT_WORLD, scale=scale)
    fam_arg = getattr(args, "families", None)
    families = [f.strip() for f in fam_arg.split(",") if f.strip()] if fam_arg else None
    for f in families or ():
        world.family(f)
    policies = make_policies(
        world,
        _policy_names(args),
        customer_base_url=getattr(args, "customer_base_url", None),
        customer_model=getattr(args, "customer_model", None),
        **{key: getattr(args, key, None) for key in _ENDPOINT_OPTIONS},
    )
    names = {role: policy.name for role, policy in policies.items()}
    split: Split = getattr(args, "split", "test")
    start = int(getattr(args, "start", 0))
    out_arg = getattr(args, "out", None)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    out = Path(out_arg) if out_arg else Path("runs") / f"{world.name}-team-{stamp}.sqlite"
    meta = {
        "world": world.id,
        "world_hash": world.content_hash,
        "agent": "team",
        "policies": names,
        "policy_config": {role: agent.describe() for role, agent in _model_agents(policies).items()},
        "split": split,
        "episodes": episodes,
        "trials": 1,
        "families": families,
        "max_cycles": max_cycles,
        "scale": scale,
        "start": start,
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
            start=start,
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
    """Print a team summary as a table: pass rate and each role's mean reward, per family (names printed inert)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from mirrorworld.inert import inert, text

    roles = list(summary.get("roles", {}))
    table = Table(title=text(title, 200))
    table.add_column("family", no_wrap=True, min_width=20)
    for col in ("episodes", "pass rate", *roles):
        table.add_column(text(col, 100), justify="right")

    def row(name: str, block: dict[str, Any], style: str = "") -> None:
        rewards = block.get("roles", {})
        cells = [f"{rewards[r]:.3f}" if r in rewards else "-" for r in roles]
        numbers = (str(block["episodes"]), f"{block['pass_rate']:.1%}", *cells)
        table.add_row(text(name, 200), *(Text(c) for c in numbers), style=style)

    for name, block in summary["families"].items():
        row(name, block)
    row("all", summary, style="bold")
    con = Console(highlight=False, soft_wrap=False, width=max(Console().width, 100))
    con.print(table)
    policies = ", ".join(f"{inert(r, 100)}={inert(p, 100)}" for r, p in summary.get("policies", {}).items())
    con.print(Text(f"policies: {policies}"))
    gates = ", ".join(f"{inert(g, 100)} {n}" for g, n in summary["gate_failures"].items())
    con.print(Text(f"gate failures: {gates}"))
    penalised = ", ".join(f"{inert(r, 100)} {n}" for r, n in summary.get("penalised", {}).items()) or "none"
    con.print(
        Text(
            f"customer left: {summary['customer_left']}  truncated: {summary['truncated']}  "
            f"mean cycles: {summary['mean_cycles']}  penalised roles: {penalised}"
        )
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``run_multi_agent`` as its own command (``python -m mirrorworld.run.multiagent``)."""
    parser = argparse.ArgumentParser(prog="mirrorworld run --multi-agent")
    parser.add_argument("--world", default=DEFAULT_WORLD)
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
