"""The ``twin`` and ``fidelity`` commands.

``mirrorworld twin up --world sales`` creates (or finds cached) the world's real
twin database; ``mirrorworld fidelity --world sales`` measures the mirror
against it, call by call. ``mirrorworld fidelity --world sales --agents
oracle,random,partial --episodes 100`` measures it agent by agent instead: each
agent plays the same tasks on the mirror and on the twin, and the report gives
the pass rates, their gap and every verdict that differs
(:mod:`mirrorworld.fidelity.agents`). ``fidelity`` exits 1 when a quality bar is
missed or, with ``--against``, when agreement dropped below the saved baseline.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from mirrorworld.core.registry import Registry, default
from mirrorworld.core.world import World
from mirrorworld.errors import MirrorworldError, RunFileError
from mirrorworld.options import registry_of, world_option
from mirrorworld.outputs import check_output_path, write_atomic
from mirrorworld.progress import progress_bar, wants_progress

__all__ = ["register"]


def register(sub: Any, registry: Registry | None = None) -> dict[str, Any]:
    """Add the twin and fidelity commands to an argparse subparsers object; return their handlers.

    ``--world`` lists the worlds of ``registry``; the handlers look worlds up in
    the registry ``mirrorworld.cli.main`` puts on the arguments.
    """
    t = sub.add_parser("twin", help="create and cache a world's real twin (a Tryton database for sales)")
    t.add_argument("action", choices=("up", "path"), help="up: create it if needed; path: print the cached file")
    world_option(t, registry, preferred="sales")
    t.add_argument("--option", action="append", metavar="KEY=VALUE", help="build a changed twin (tax_rounding=line)")
    f = sub.add_parser(
        "fidelity", help="measure a mirror against its real twin, call by call (or agent by agent: --agents)"
    )
    world_option(f, registry, preferred="sales")
    f.add_argument(
        "--agents",
        default=None,
        metavar="A,B,...",
        help="measure the agent-level gap instead: these agents (e.g. oracle,random,partial) play the same tasks "
        "on the mirror and on the twin; pass rates, gap and every differing verdict",
    )
    f.add_argument(
        "--checkpoint",
        default=None,
        metavar="PATH",
        help="with --agents trained: the policy.pt (or its folder) of mirrorworld train on this world",
    )
    f.add_argument("--model", default=None, help="with --agents openai: the model to ask")
    f.add_argument(
        "--base-url", default=None, help="with --agents openai: an OpenAI-compatible endpoint (else OPENAI_BASE_URL)"
    )
    f.add_argument(
        "--api-key-env", default=None, metavar="VAR", help="with --agents openai: the variable holding the key"
    )
    f.add_argument("--episodes", type=int, default=50, help="with --agents: tasks per agent (cycling families)")
    f.add_argument("--calls", type=int, default=1200, help="random calls to replay (half valid, half with bad input)")
    f.add_argument("--seeds", type=int, default=2, help="task seeds per family for gold and audit traces")
    f.add_argument("--no-audit", action="store_true", help="skip the audit's mutant/variant trajectories")
    f.add_argument(
        "--trajectories",
        action="append",
        default=[],
        metavar="FILE",
        help="recorded trajectories to replay too: a run file of `mirrorworld run`, or JSONL (repeatable)",
    )
    f.add_argument("--json", action="store_true")
    f.add_argument("--html", default=None, metavar="FILE")
    f.add_argument("--against", default=None, metavar="BASELINE", help="fail if agreement dropped below this baseline")
    f.add_argument("--save-baseline", default=None, metavar="FILE", help="save this run as a baseline")
    f.add_argument(
        "--twin-option", action="append", metavar="KEY=VALUE", help="measure against a changed twin (tax_rounding=line)"
    )
    return {"twin": cmd_twin, "fidelity": cmd_fidelity}


def world_named(name: str, registry: Registry | None = None) -> World:
    """The world ``name`` of ``registry`` (by default the installed worlds)."""
    return (registry or default).get(name)


def cmd_twin(args: argparse.Namespace) -> int:
    from mirrorworld.twin.db import cache_dir, ensure, parse_options, twin_key

    world = world_named(args.world, registry_of(args))
    options = parse_options(args.option)
    if args.action == "path":
        print(cache_dir() / f"{world.name}-{twin_key(world, options)}.sqlite")
        return 0
    path = ensure(world, options=options, log=lambda m: print(m, file=sys.stderr))
    print(path)
    return 0


RANDOM_LENGTH = 20


def cmd_agents(args: argparse.Namespace) -> int:
    """``mirrorworld fidelity --agents``: the agent-level sim-to-real gap (:mod:`mirrorworld.fidelity.agents`)."""
    from mirrorworld.agents import make_agent
    from mirrorworld.fidelity.agents import gap_lines, measure_gap
    from mirrorworld.fidelity.episode import Twin
    from mirrorworld.fidelity.report import agents_page
    from mirrorworld.inert import inert
    from mirrorworld.run.backends import twin_refusal
    from mirrorworld.twin.db import ensure, parse_options

    names = list(dict.fromkeys(a.strip() for a in str(args.agents).split(",") if a.strip()))
    if not names:
        raise MirrorworldError("--agents names at least one agent, e.g. --agents oracle,random,partial")
    if args.episodes < 1:
        raise MirrorworldError("--episodes must be at least 1")
    if args.against or args.save_baseline or args.trajectories:
        raise MirrorworldError("--against, --save-baseline and --trajectories are for the call-level run, not --agents")
    agent_options: dict[str, Any] = {}
    for flag, key, owner in (
        ("--checkpoint", "checkpoint", "trained"),
        ("--model", "model", "openai"),
        ("--base-url", "base_url", "openai"),
        ("--api-key-env", "api_key_env", "openai"),
    ):
        value = getattr(args, key)
        if value is None:
            continue
        if owner not in names:
            raise MirrorworldError(
                f"{flag} is the {owner} agent's option: name it in --agents (--agents oracle,{owner})"
            )
        agent_options["policy" if key == "checkpoint" else key] = value
    made = [make_agent(name, **agent_options) for name in names]  # unknown, or lacking options: refused here
    html_out = check_output_path(args.html) if args.html else None
    world = world_named(args.world, registry_of(args))
    for agent in made:
        trained_on = agent.describe().get("world")
        if trained_on is not None and trained_on != world.name:
            raise MirrorworldError(f"--checkpoint was trained on {trained_on}, not on {world.name}")
    refusal = twin_refusal(world)
    if refusal is not None:
        raise MirrorworldError(refusal)
    options = parse_options(args.twin_option)
    database = ensure(world, options=options, log=lambda m: print(m, file=sys.stderr))
    total = 2 * args.episodes * len(names)
    with (
        Twin(world, database=database) as twin,
        progress_bar(
            f"{len(names)} agents on mirror and twin", total, enabled=wants_progress(json_output=args.json)
        ) as update,
    ):
        data = measure_gap(world, twin, names, episodes=args.episodes, agent_options=agent_options, progress=update)
    data["twin_options"] = options
    if html_out is not None:
        write_atomic(html_out, agents_page(data))
    if args.json:
        print(json.dumps(data, indent=2, default=str))
    else:
        # Evidence, task ids and failure messages carry agent text and the twin's answers: printed inert.
        for line in gap_lines(data):
            print(inert(line, 4000, lines=False))
        for bar in data["failed_bars"]:
            print(f"QUALITY BAR MISSED: {inert(bar, 4000, lines=False)}")
    return 1 if data["failed_bars"] else 0


def cmd_fidelity(args: argparse.Namespace) -> int:
    if getattr(args, "agents", None) is not None:
        return cmd_agents(args)
    from mirrorworld.fidelity.baseline import baseline_identity, drift, load_baseline, save_baseline
    from mirrorworld.fidelity.harness import run_fidelity
    from mirrorworld.fidelity.report import drift_lines, failed_bars, fidelity_html, summary_lines, to_dict
    from mirrorworld.fidelity.traces import Trace, audit_traces, gold_traces, recorded_traces
    from mirrorworld.inert import inert
    from mirrorworld.twin import tryton
    from mirrorworld.twin.backend import TwinBackend
    from mirrorworld.twin.db import ensure, parse_options

    for flag, key in (
        ("--checkpoint", "checkpoint"),
        ("--model", "model"),
        ("--base-url", "base_url"),
        ("--api-key-env", "api_key_env"),
    ):
        if getattr(args, key, None) is not None:
            raise MirrorworldError(f"{flag} is an agent's option: it goes with --agents")
    if args.calls < 0 or args.seeds < 1:
        raise MirrorworldError("--calls must be at least 0 and --seeds at least 1")
    # Where the results go is checked before the twin is built and the calls replayed, not after.
    html_out = check_output_path(args.html) if args.html else None
    baseline_out = check_output_path(args.save_baseline) if args.save_baseline else None
    baseline = load_baseline(Path(args.against)) if args.against else None
    recorded: list[Trace] = []
    for path in args.trajectories:  # read (and refused, if they must be) before the twin is built
        if not Path(path).is_file():
            raise RunFileError(f"no trajectories file {path}")
        recorded += list(recorded_traces(Path(path)))
    world = world_named(args.world, registry_of(args))
    options = parse_options(args.twin_option)
    database = ensure(world, options=options, log=lambda m: print(m, file=sys.stderr))
    traces: list[Trace] = list(gold_traces(world, args.seeds))
    if not args.no_audit:
        traces += list(audit_traces(world, args.seeds))
    traces += recorded
    n = (args.calls + RANDOM_LENGTH - 1) // RANDOM_LENGTH
    for i in range(n):
        kind = "random" if i % 2 == 0 else "invalid"
        traces.append(Trace(kind, f"{kind} {i}", kind, seed=i, length=RANDOM_LENGTH))
    total = sum(len(t.calls) or t.length for t in traces)
    done = 0
    with (
        TwinBackend(world, database) as twin,
        progress_bar(
            f"replaying on mirror and twin ({len(traces)} traces)", total, enabled=wants_progress(json_output=args.json)
        ) as update,
    ):

        def advance(calls: int) -> None:
            nonlocal done
            done += calls
            update(done, total)

        run = run_fidelity(world, twin, traces, progress=advance)
    data = to_dict(run)
    data["twin_options"] = options
    data["twin_modules"] = list(tryton.MODULES)
    data["run_options"] = {
        "--calls": args.calls,
        "--seeds": args.seeds,
        "audit traces": "off" if args.no_audit else "on",
        "--trajectories": ", ".join(args.trajectories) or "none",
    }
    full = args.calls >= 1000
    data["failed_bars"] = failed_bars(data, full=full)
    if baseline is not None:
        data["drift"] = drift(data, baseline)
        data["drift"]["baseline"] = baseline_identity(Path(args.against), baseline)
    if baseline_out is not None:
        save_baseline(data, baseline_out)
    if html_out is not None:
        write_atomic(html_out, fidelity_html(data))
    if args.json:
        print(json.dumps(data, indent=2, default=str))
    else:
        # Trace names, tool names, arguments and responses come from recorded files and the twin: printed inert.
        for line in summary_lines(data):
            print(inert(line, 4000, lines=False))
        for bar in data["failed_bars"]:
            print(f"QUALITY BAR MISSED: {inert(bar, 4000, lines=False)}")
        for line in drift_lines(data):
            print(inert(line, 4000, lines=False))
    failed = bool(data["failed_bars"]) or bool(baseline is not None and data["drift"]["regressions"])
    return 1 if failed else 0
