"""A person in one seat of a team: the other roles play their world's default team.

:func:`play_team_episode` plays one task of a seated world
(:class:`~mirrorworld.core.seats.Seated`) through a
:class:`~mirrorworld.episodes.TeamEpisode`, exactly as the multi-agent runner
does (:func:`~mirrorworld.run.multiagent.run_team_episode`: every cycle each
role of the task's contact acts once, in the world's turn order), with the
person behind ``role`` and each other role's default policy
(:func:`~mirrorworld.run.multiagent.make_policies`) behind the others. The
person sees what that role sees and nothing else: its briefing, then at each
of its turns the new messages of its inbox and the result of its own last
call. Its commands are those of :class:`~mirrorworld.play.human.Prompt`, with
``wait`` (pass the turn) and only its seat's tools.

The episode ends as any team episode does (a final message, the customer
leaving, the cycle limit) or when the person quits: it is then graded as it
stands. The record is the runner's :class:`~mirrorworld.run.multiagent.TeamRecord`,
its policies naming the person's role ``human``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from mirrorworld.core.seats import seats_of
from mirrorworld.core.state import RowChange
from mirrorworld.core.task import Task
from mirrorworld.core.world import World
from mirrorworld.episodes import TeamEpisode
from mirrorworld.errors import Failure, MirrorworldError, boundary
from mirrorworld.inert import inert
from mirrorworld.play.human import Console, Prompt, format_result, format_tools
from mirrorworld.run.multiagent import TeamRecord, make_policies
from mirrorworld.run.runner import _event
from mirrorworld.sim.policies import RoleContext, RolePolicy
from mirrorworld.verify.verdict import Verdict

__all__ = ["HUMAN", "TeamPlay", "play_team_episode"]

HUMAN = "human"
"""The policy name the record gives the person's role."""


class TeamPlay:
    """The outcome of :func:`play_team_episode`: the record and the state diff it ended with."""

    def __init__(self, record: TeamRecord, changes: list[RowChange], verdict: Verdict | None) -> None:
        self.record = record
        self.changes = changes
        self.verdict = verdict


def play_team_episode(
    world: World,
    task: Task,
    role: str,
    console: Console,
    *,
    max_cycles: int = 40,
    others: Mapping[str, RolePolicy] | None = None,
) -> TeamPlay:
    """Play ``task`` with the person in ``role`` (see the module docstring).

    ``others`` are the policies of the other roles (by default the world's
    default team). A role the task's contact does not involve, or a world
    without seats, is a :class:`MirrorworldError`. A failure of a policy, a
    tool or the grader is recorded with its boundary, as the runner records it.
    """
    seats = seats_of(world)
    if role not in seats.roles:
        raise MirrorworldError(f"world {world.name} has no role {role!r} (roles: {', '.join(seats.roles)})")
    started = time.perf_counter()
    ep = TeamEpisode(world, task, max_cycles=max_cycles)
    try:
        if role not in ep.roles:
            raise MirrorworldError(
                f"task {task.id} does not involve the {role} (its parties: {', '.join(ep.roles)}); pick another task"
            )
        rest = [r for r in ep.roles if r != role]
        policies = dict(others) if others is not None else make_policies(world, roles=rest)
        missing = [r for r in rest if r not in policies]
        if missing:
            raise MirrorworldError(f"no policy for role(s) {', '.join(missing)} of task {task.id}")
        return _play(ep, role, console, policies, started)
    finally:
        ep.close()


def _play(ep: TeamEpisode, role: str, console: Console, policies: Mapping[str, RolePolicy], started: float) -> TeamPlay:
    world, task = ep.world, ep.task
    say = console.say
    tools = [world.tools_by_name[name] for name in ep.tools_of(role)]
    prompt = Prompt(
        console,
        tools,
        policy=world.policy,
        diff=ep.session.changes,
        can_wait=True,
        seat=role,
        elsewhere=world.tools_by_name,
    )
    say(f"you are the {role}; the others: " + ", ".join(f"{r} ({policies[r].name})" for r in ep.roles if r != role))
    say(inert(f"briefing: {ep.observe(role).briefing}", 20_000))
    say()
    say(format_tools(tools))
    say("type `help` for the commands, `wait` to pass your turn")
    inbox = _Inbox(console)
    failure: Failure | None = None
    verdict: Verdict | None = None
    quit_ = False
    try:
        for r in ep.roles:
            if r != role:
                with boundary("infrastructure", f"the {r} policy {policies[r].name}"):
                    policies[r].reset(RoleContext(world, task, r, task.seed))
        while not ep.over and not quit_:
            for r in ep.roles:
                if ep.over:
                    break
                if r == role:
                    inbox.show(ep.observe(role).inbox)
                    move = prompt.ask(f"cycle {ep.cycle + 1}/{ep.max_cycles} {role}> ")
                    if move.kind == "quit":
                        quit_ = True
                        break
                    with boundary("world", f"{world.name}: stepping {task.id}"):
                        result = ep.act(role, None) if move.kind == "wait" else ep.act(role, move.tool, move.args)
                    if result is not None:
                        say(format_result(result.content()))
                    continue
                with boundary("infrastructure", f"the {r} policy {policies[r].name}"):
                    action = policies[r].act(ep.observe(r))
                with boundary("world", f"{world.name}: stepping {task.id}"):
                    ep.act(r, None) if action is None else ep.act(r, action.tool, action.args)
            if not quit_:
                ep.end_cycle()
        inbox.show(ep.observe(role).inbox)  # what came after the person's last turn (a final message)
        with boundary("verifier", f"grading {task.id}"):
            verdict = ep.finish()
    except MirrorworldError as err:
        failure = ep.episode.failure or Failure.of(err)
    try:
        changes = ep.session.changes()
    except MirrorworldError:  # a world that failed may not show its state: the failure is the record
        changes = []
    names = {r: HUMAN if r == role else policies[r].name for r in ep.roles}
    return TeamPlay(_record(ep, names, verdict, failure, started), changes, verdict)


class _Inbox:
    """What of a role's inbox the person has been shown: each message once (by id; one without, by content)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.seen: set[Any] = set()

    def show(self, inbox: Mapping[str, Any]) -> None:
        for m in inbox.get("messages", []):
            ident = m.get("id")
            key = ident if isinstance(ident, int) else (m.get("kind"), m.get("from"), m.get("body"))
            if key in self.seen:
                continue
            self.seen.add(key)
            kind = f" ({m['kind']})" if m.get("kind") else ""
            at = f"[{m['at']}] " if m.get("at") else ""
            self.console.say(inert(f"{at}message from {m.get('from')}{kind}: {m.get('body', '')}", 4000))


def _record(
    ep: TeamEpisode, names: dict[str, str], verdict: Verdict | None, failure: Failure | None, started: float
) -> TeamRecord:
    """The episode as the multi-agent runner records one (the same fields, from the same episode)."""
    task, world = ep.task, ep.world
    returns = ep.returns
    return TeamRecord(
        index=0,
        task_id=task.id,
        family=task.family,
        seed=task.seed,
        split=task.split,
        passed=verdict is not None and verdict.passed,
        score=verdict.score if verdict is not None else 0.0,
        returns={r: round(returns.get(r, 0.0), 6) if verdict is not None else 0.0 for r in ep.roles},
        role_terms=ep.role_terms(),
        policies=names,
        cycles=ep.cycle,
        customer_left=ep.customer_left,
        truncated=ep.truncated,
        turns=[t.to_dict() for t in ep.turns],
        calls=[_event(e) for e in ep.session.events],
        verdict=verdict.to_dict() if verdict is not None else {},
        task=task.to_dict(),
        world_hash=world.content_hash,
        error=failure.message if failure is not None else None,
        failure=failure.to_dict() if failure is not None else None,
        seconds=time.perf_counter() - started,
        violations={r: [f"step {v.step}: {v.rule}" for v in vs] for r, vs in ep.violations_by_role().items() if vs},
        world_roles=tuple(ep.seats.roles),
        simulated_role=ep.seats.simulated_role,
    )
