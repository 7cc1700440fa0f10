"""``mirrorworld drift``: an agent on two versions of a world, per-family deltas and the ablation of each change.

``--world helpdesk --from v0 --to v1`` names the versions by the world's env
id (``mirrorworld/Helpdesk-v0`` and ``-v1``); ``--to`` may also be any world
name or env id the registry knows. The agent is any of ``mirrorworld run``'s
(``--agent oracle``, ``--agent replay --replay RUN``, ``--agent openai``) or
``stale``: the old version's gold solutions, a policy fitted to the old API.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from mirrorworld.core.registry import Registry
from mirrorworld.core.world import World
from mirrorworld.errors import MirrorworldError
from mirrorworld.options import registry_of, world_option
from mirrorworld.progress import progress_bar, wants_progress

__all__ = ["register"]

_VERSION = re.compile(r"v?(\d{1,6})\Z")


def register(sub: Any, registry: Registry | None = None) -> dict[str, Any]:
    """Add ``drift`` to an argparse subparsers object; its handler by name."""
    d = sub.add_parser(
        "drift",
        help="an agent on two versions of a world: per-family deltas and which change caused which regression",
        description="Runs the agent on both versions' test tasks, ranks the declared changes by the drop each "
        "causes alone, and plots the per-family deltas.",
    )
    world_option(d, registry, what="the world whose versions are compared")
    d.add_argument("--from", dest="old", default="v0", help="the old version (vN, a world name or an env id)")
    d.add_argument("--to", dest="new", default="v1", help="the new version (vN, a world name or an env id)")
    d.add_argument("--agent", default="stale", help="stale (the old version's gold), oracle, random, replay, openai…")
    d.add_argument("--replay", default=None, help="the run file the replay agent replays")
    d.add_argument("--base-url", default=None, help="the openai agent's endpoint")
    d.add_argument("--model", default=None, help="the openai agent's model")
    d.add_argument("--episodes", type=int, default=5, help="test tasks per family on each version")
    d.add_argument("--family", action="append", default=None, help="only these families (repeatable)")
    d.add_argument("--no-ablation", action="store_true", help="skip the per-change ablation")
    d.add_argument("--plot", default=None, metavar="FILE.svg", help="write the report as an SVG chart")
    d.add_argument("--json", action="store_true", help="print the report as JSON")
    d.add_argument("--no-progress", action="store_true")
    return {"drift": cmd_drift}


def _version(registry: Registry, world: str, ref: str) -> World:
    base = registry.spec(world)
    m = _VERSION.match(ref.strip()) if isinstance(ref, str) else None
    if m:
        env_id = base.env_id.rsplit("-v", 1)[0] + f"-v{int(m.group(1))}"
        known = [s for s in registry.specs() if s.env_id == env_id]
        if not known:
            versions = sorted(
                s.env_id for s in registry.specs() if s.env_id.rsplit("-v", 1)[0] == base.env_id.rsplit("-v", 1)[0]
            )
            raise MirrorworldError(f"no registered world is {env_id} (known versions: {', '.join(versions)})")
        return registry.get(known[0].name)
    return registry.get(ref)


def cmd_drift(args: argparse.Namespace) -> int:
    from mirrorworld.agents import make_agent
    from mirrorworld.drift.report import StaleOracle, drift_report, plot_svg
    from mirrorworld.inert import inert

    registry = registry_of(args)
    if not 1 <= args.episodes <= 10_000:
        raise MirrorworldError("--episodes must be between 1 and 10000")
    plot = Path(args.plot) if args.plot else None
    if plot is not None and not plot.parent.is_dir():
        raise MirrorworldError(f"cannot write the plot: folder {inert(str(plot.parent))} does not exist")
    old = _version(registry, args.world, args.old)
    new = _version(registry, args.world, args.new)
    if old.id == new.id:
        raise MirrorworldError(f"--from and --to are the same version ({old.id})")
    if args.family:
        for name in args.family:
            old.family(name)
    options = {"replay": args.replay, "base_url": args.base_url, "model": args.model}

    def agent_for(world: World) -> Any:
        if args.agent == "stale":
            return StaleOracle(old)
        return make_agent(args.agent, **options)

    agent_for(old)  # a bad agent name or missing option fails before any episode
    enabled = wants_progress(json_output=args.json, disabled=args.no_progress)
    with progress_bar("drift", None, enabled=enabled) as update:

        def progress(total: int) -> Any:
            done = [0]

            def tick() -> None:
                done[0] += 1
                update(done[0], total)

            return tick

        report = drift_report(
            old,
            new,
            agent_for,
            per_family=args.episodes,
            families=args.family,
            ablation=not args.no_ablation,
            progress=progress,
        )
    if plot is not None:
        plot.write_text(plot_svg(report), encoding="utf-8")
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, sort_keys=True))
        return 0
    _print(report)
    if plot is not None:
        print(f"plot: {inert(str(plot))}")
    return 0


def _print(report: Any) -> None:
    from mirrorworld.inert import inert
    from mirrorworld.ship.compare import format_deltas

    print(f"agent {inert(report.agent)}: {report.old} ({report.old_hash}) -> {report.new} ({report.new_hash})")
    print("changes:")
    for line in report.changelog:
        print(f"  - {inert(line)}")
    print()
    print(format_deltas(report.families, "old", "new"))
    if report.errored != (0, 0):
        print(f"errored (not graded): {report.errored[0]} old, {report.errored[1]} new")
    if report.ablation:
        print()
        print("ablation: each change alone on the old version, largest drop first")
        for row in report.ablation:
            d = row.overall
            low, high = d.interval
            hit = [f"{f.family} {f.delta:+.0%}" for f in row.families if f.n_a and f.n_b and f.delta < 0]
            first, *more = row.changes
            print(f"  {d.delta:+5.0%} [{low:+.2f}, {high:+.2f}]  {inert(first)[:56]}")
            for change in more:
                print(f"{'':26}+ {inert(change)[:52]}")
            if hit:
                print(f"{'':26}{inert(', '.join(hit))[:54]}")
    sys.stdout.flush()
