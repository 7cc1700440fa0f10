"""``mirrorworld play``: a person plays the agent of one task in the terminal, graded and saved as a run.

``--family F --task-seed N`` picks the task ``F/N`` (by default the world's
first family and seed 0). The player is shown the task and the tools with
their arguments, and types commands (:mod:`mirrorworld.play.human`) until the
episode ends: the world's terminal tool (``respond``), the step budget, or
``quit`` / Ctrl-D / Ctrl-C, which end it as it stands. Then the state diff and
the verdict (each gate, with its evidence) are printed, and the episode is
saved as a one-episode run file (``--out``; by default
``runs/<world>-human-<time>.sqlite``, as ``mirrorworld run`` names its runs)
whose agent is ``human``: ``mirrorworld show RUN 0`` reads it.

``--role ROLE`` seats the person in one role of a team world (``--world
helpdesk_team``, or a world a team world extends: ``helpdesk``), the other
roles playing the world's default team (:mod:`mirrorworld.play.team`); the
run file is then a team run's, as ``mirrorworld run --multi-agent`` writes.
"""

from __future__ import annotations

import argparse
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mirrorworld.core.registry import Registry
from mirrorworld.core.seats import Seated
from mirrorworld.core.world import World
from mirrorworld.errors import MirrorworldError, RunFileError
from mirrorworld.options import registry_of, world_option

__all__ = ["cmd_play", "register"]


def register(sub: Any, registry: Registry | None = None) -> dict[str, Any]:
    """Add ``play`` to an argparse subparsers object; its handler by name."""
    p = sub.add_parser(
        "play",
        help="play the agent yourself in the terminal: graded, and saved as a run",
        description="Shows a task and the tools, reads tool calls typed as `TOOL {json}` (and `tools`, "
        "`schema TOOL`, `policy`, `diff`, `help`, `quit`), then prints the state diff and the verdict and "
        "saves the episode as a run file. quit, Ctrl-D and Ctrl-C end the episode and grade it as it stands.",
    )
    world_option(p, registry, what="the world to play")
    p.add_argument("--family", default=None, help="the task family (default: the world's first)")
    p.add_argument("--task-seed", "--seed", dest="task_seed", type=int, default=0, metavar="N", help="the task's seed")
    p.add_argument("--max-steps", type=int, default=30, help="tool calls before the episode is cut short")
    p.add_argument(
        "--role",
        default=None,
        help="in a team world, the role you play (the customer or a staff role); the others play the "
        "world's default team",
    )
    p.add_argument("--max-cycles", type=int, default=40, help="with --role: cycles before the episode is cut short")
    p.add_argument("--out", default=None, help="run file to write (default: runs/<world>-human-<time>.sqlite)")
    return {"play": cmd_play}


def _team_world(registry: Registry, name: str) -> World:
    """The world with seats ``--world`` names, or the one that extends it (as ``run --multi-agent`` picks)."""
    from mirrorworld.run.multiagent import team_world

    try:
        return team_world(registry, name)
    except MirrorworldError:
        seated = []
        for other in registry.names():
            try:
                if isinstance(registry.get(other), Seated):
                    seated.append(other)
            except MirrorworldError:
                continue
        raise MirrorworldError(
            f"--role plays one seat of a team world, and {name} has no seats "
            f"(worlds with seats: {', '.join(seated) or 'none registered'})"
        ) from None


def _out(args: argparse.Namespace, world: World) -> Path:
    if args.out:
        out = Path(args.out)
    else:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
        out = Path("runs") / f"{world.name}-human-{stamp}.sqlite"
    if out.exists() or out.is_symlink():
        raise RunFileError(f"{out} already exists (pick another --out)")
    return out


def _meta(world: World, task: Any, args: argparse.Namespace, agent: dict[str, Any]) -> dict[str, Any]:
    """What the run file records of a play (as ``mirrorworld run`` records a run, less the options a
    resumed run would replay: a person's episode cannot be played again by ``run --resume``)."""
    import mirrorworld

    return {
        "world": world.id,
        "world_hash": world.content_hash,
        "world_parts": world.score_parts(),
        "artifact": None,
        "agent": "human",
        "agent_config": agent,
        "model": None,
        "split": task.split,
        "episodes": 1,
        "trials": 1,
        "families": [task.family],
        "max_steps": args.max_steps,
        "scale": 1.0,
        "start": 0,
        "versions": {"mirrorworld": mirrorworld.__version__, "python": platform.python_version()},
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "play": {"task": task.id, "role": args.role},
    }


def cmd_play(args: argparse.Namespace) -> int:
    """``mirrorworld play`` (see the module docstring)."""
    from mirrorworld.play.human import Console

    if args.max_steps < 1 or args.max_cycles < 1:
        raise MirrorworldError("--max-steps and --max-cycles must be at least 1")
    registry = registry_of(args)
    world = _team_world(registry, args.world) if args.role is not None else registry.get(args.world)
    family = args.family if args.family is not None else world.families[0].name
    task = world.task(family, args.task_seed)
    out = _out(args, world)
    console = Console()
    if args.role is not None:
        from mirrorworld.core.seats import seats_of

        seats = seats_of(world)
        if args.role not in seats.roles:
            raise MirrorworldError(f"{world.name} has no role {args.role!r} (roles: {', '.join(seats.roles)})")
        parties = seats.task_roles(task)
        if args.role not in parties:
            raise MirrorworldError(
                f"task {task.id} does not involve the {args.role} (its parties: {', '.join(parties)}); "
                "pick another --family"
            )
        if registry.spec(args.world).name != world.name:
            console.say(f"(playing {world.name}, the team world built on {registry.spec(args.world).name})")
        return _play_team(world, task, args, out, console)
    return _play_single(world, task, args, out, console)


def _play_single(world: World, task: Any, args: argparse.Namespace, out: Path, console: Any) -> int:
    from mirrorworld.core.state import RowChange
    from mirrorworld.envs.chat import ChatEnv
    from mirrorworld.play.human import HumanAgent, format_diff, format_verdict
    from mirrorworld.run import RunFile, run_episode, summarize

    class PlayEnv(ChatEnv):
        """The chat env, keeping its episode's state diff when the runner closes it after grading."""

        changes: list[RowChange] = []  # noqa: RUF012 - set per instance on close

        def close(self) -> None:
            if self.episode is not None and not self.episode.session.closed:
                try:
                    self.changes = self.episode.session.changes()
                except MirrorworldError:  # a world that failed may not show its state: the failure is the record
                    self.changes = []
            super().close()

    env = PlayEnv(world, max_steps=args.max_steps)

    def diff() -> list[RowChange]:
        return env.episode.session.changes() if env.episode is not None else []

    agent = HumanAgent(console, world.tools, policy=world.policy, diff=diff, max_steps=args.max_steps)
    runfile = RunFile.create(out, _meta(world, task, args, agent.describe()))
    try:
        console.say(
            f"mirrorworld play: you are the agent in {world.id}; at most {args.max_steps} tool calls. "
            "quit, Ctrl-D or Ctrl-C ends the episode and grades it."
        )
        record = run_episode(env, agent, task)
        agent.show(record.messages)
        console.say()
        console.say(format_diff(env.changes))
        console.say(format_verdict(record.graded, failure=record.error))
        runfile.add(record)
        summary = summarize([record], seconds=record.seconds)
        summary["run_file"] = str(out)
        runfile.set_meta("summary", summary)
    finally:
        runfile.close()
    console.say(f"task {task.id}; saved to {out} (mirrorworld show {out} 0)")
    return 0


def _play_team(world: World, task: Any, args: argparse.Namespace, out: Path, console: Any) -> int:
    from mirrorworld.play.human import format_diff, format_verdict
    from mirrorworld.play.team import HUMAN, play_team_episode
    from mirrorworld.run import RunFile
    from mirrorworld.run.multiagent import summarize_team

    meta = _meta(world, task, args, {"name": HUMAN, "player": "a person at the terminal", "role": args.role})
    meta["max_cycles"] = args.max_cycles
    runfile = RunFile.create(out, meta)
    try:
        played = play_team_episode(world, task, args.role, console, max_cycles=args.max_cycles)
        record = played.record
        console.say()
        console.say(format_diff(played.changes))
        console.say(format_verdict(played.verdict, failure=record.error))
        runfile.add(record.to_episode_record())
        runfile.set_meta("policies", record.policies)
        summary = summarize_team([record], seconds=record.seconds)
        summary["run_file"] = str(out)
        runfile.set_meta("summary", summary)
    finally:
        runfile.close()
    console.say(f"task {task.id}; saved to {out} (mirrorworld show {out} 0)")
    return 0
