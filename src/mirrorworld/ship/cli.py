"""``mirrorworld pack``, ``mirrorworld env publish|list|show|pin|rollback|gate`` and ``mirrorworld compare``."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mirrorworld.core.registry import Registry
from mirrorworld.errors import MirrorworldError

__all__ = ["register"]


def register(sub: Any, registry: Registry) -> dict[str, Any]:
    """Add the shipping commands to ``sub``; their handlers by command name."""
    p = sub.add_parser("pack", help="build a world's artifact: one reproducible wheel with its manifest")
    p.add_argument("world", help="a world name (its installed code is packed)")
    p.add_argument("--out", default="dist", help="folder to write the artifact into (default: dist)")
    p.add_argument("--json", action="store_true", help="print the manifest and digest as JSON")

    e = sub.add_parser("env", help="the version store of world artifacts: publish, list, show, pin, rollback, gate")
    e.add_argument("--store", default=None, help="the store's folder (default: $MIRRORWORLD_STORE)")
    es = e.add_subparsers(dest="env_command", required=True, parser_class=type(e))
    pub = es.add_parser("publish", help="add an artifact and pin its world's name to it")
    pub.add_argument("artifact", help="an artifact file, or a world name (packed first)")
    pub.add_argument("--no-pin", action="store_true", help="publish without moving the name")
    pub.add_argument("--note", default="")
    ls = es.add_parser("list", help="published artifacts")
    ls.add_argument("world", nargs="?")
    ls.add_argument("--json", action="store_true")
    sh = es.add_parser("show", help="one artifact's manifest and its world's history")
    sh.add_argument("ref", help="NAME, NAME@VERSION or NAME@HASH")
    sh.add_argument("--json", action="store_true")
    pin = es.add_parser("pin", help="point a world's name at an artifact")
    pin.add_argument("ref", help="NAME@VERSION or NAME@HASH")
    pin.add_argument("--note", default="")
    rb = es.add_parser("rollback", help="point a world's name back at what it resolved to before")
    rb.add_argument("world")
    rb.add_argument("--note", default="")
    g = es.add_parser(
        "gate", help="a reference agent on two versions: per-family deltas; exit 1 on a regression, 2 on an error"
    )
    g.add_argument("new", help="the candidate: NAME@VERSION or NAME@HASH")
    g.add_argument(
        "--against",
        default=None,
        help="the reference version (default: the name's current pin, or the pin before it when that is the candidate)",
    )
    g.add_argument("--agent", default="replay", help="the reference agent (default: replay of --replay)")
    g.add_argument("--replay", default=None, help="a recorded run to replay as the reference agent")
    g.add_argument("--episodes", type=int, default=45)
    g.add_argument("--split", choices=("train", "test"), default="test")
    g.add_argument("--tolerance", type=float, default=0.0, help="a drop in pass rate allowed (0.05 = 5 points)")
    g.add_argument("--out", default=None, help="folder for the two run files (default: a temporary one)")
    g.add_argument("--json", action="store_true")

    c = sub.add_parser("compare", help="compare two runs per family; refuses runs of different world builds")
    c.add_argument("runs", nargs=2, metavar="RUN")
    c.add_argument(
        "--allow-incomparable", action="store_true", help="compare runs of different world builds (with a warning)"
    )
    c.add_argument("--json", action="store_true")
    return {"pack": cmd_pack, "env": cmd_env, "compare": cmd_compare}


def _store(args: argparse.Namespace) -> Any:
    from mirrorworld.ship.store import Store

    return Store(args.store)


def cmd_pack(args: argparse.Namespace) -> int:
    from mirrorworld.ship.artifact import Artifact, pack

    path = pack(args.world, args.out, registry=args.registry)
    art = Artifact.open(path)
    if args.json:
        shown = {"path": str(path), "digest": art.digest, "size": art.size, **art.manifest.to_dict()}
        print(json.dumps(shown, indent=2))
    else:
        m = art.manifest
        print(f"{path}\n  {m.env_id}  content hash {m.content_hash}  digest {art.digest}  {art.size / 1e3:.0f} kB")
    return 0


def _when(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def cmd_env(args: argparse.Namespace) -> int:
    store = _store(args)
    sub = args.env_command
    if sub == "publish":
        target = Path(args.artifact)
        if not target.exists() and "/" not in args.artifact and not args.artifact.endswith(".whl"):
            from mirrorworld.ship.artifact import pack

            with tempfile.TemporaryDirectory() as tmp:
                packed = pack(args.artifact, tmp, registry=args.registry)
                done = store.publish(packed, note=args.note, pin=not args.no_pin)
        else:
            done = store.publish(target, note=args.note, pin=not args.no_pin)
        m = done.manifest
        where = f"; {m.world} now resolves to it" if done.pinned else ""
        print(f"published {m.env_id} content hash {m.content_hash} digest {done.digest[:16]}{where}")
        return 0
    if sub == "list":
        rows = store.published(args.world)
        if args.json:
            print(json.dumps([r.to_dict() for r in rows], indent=2))
            return 0
        if not rows:
            print(f"nothing published in {store.root}")
            return 0
        for r in rows:
            mark = "*" if r.pinned else " "
            print(
                f"{mark} {r.manifest.world}@{r.manifest.version}  {r.manifest.env_id:28} hash {r.manifest.content_hash}"
                f"  digest {r.digest[:16]}  {_when(r.published_at)}"
            )
        return 0
    if sub == "show":
        from mirrorworld.ship.store import split_ref

        shown = store.manifest_json(args.ref)
        history = store.history(split_ref(args.ref)[0])
        if args.json:
            print(json.dumps({**shown, "history": history}, indent=2))
            return 0
        print(f"{shown['env_id']}  digest {shown['digest']}{'  (pinned)' if shown['pinned'] else ''}")
        for key in ("content_hash", "mirrorworld_version", "python", "licence", "reward_range", "data_seed", "scale"):
            print(f"  {key:20} {shown[key]}")
        print("  parts")
        for part, h in shown["parts"].items():
            print(f"    {part:18} {h}")
        print("  history")
        for h in history:
            print(f"    {_when(h['at'])}  {h['action']:8} {h['digest'][:16]}  {ascii(h['note'])[1:-1][:80]}")
        return 0
    if sub == "pin":
        done = store.pin(args.ref, note=args.note)
        print(f"{done.manifest.world} resolves to {done.manifest.env_id} digest {done.digest[:16]}")
        return 0
    if sub == "rollback":
        done = store.rollback(args.world, note=args.note)
        print(f"rolled back: {done.manifest.world} resolves to {done.manifest.env_id} digest {done.digest[:16]} again")
        return 0
    if sub == "gate":
        try:
            return _gate(args, store)
        except MirrorworldError as err:
            from mirrorworld.inert import inert

            print(inert(f"mirrorworld: error: {err}", 1000, lines=False), file=sys.stderr)
            return 2
    raise MirrorworldError(f"unknown env command {sub}")


def _gate(args: argparse.Namespace, store: Any) -> int:
    from mirrorworld.ship.gate import check_tolerance, evaluate, gate_runs
    from mirrorworld.ship.store import split_ref

    if args.episodes < 1:
        raise MirrorworldError("--episodes must be at least 1")
    check_tolerance(args.tolerance)
    if args.agent == "replay" and not args.replay:
        raise MirrorworldError("the replay reference agent needs --replay RUN (a recorded run)")
    if args.replay:
        from mirrorworld.run import RunFile

        with RunFile.open(args.replay) as ref_run:
            recorded = str(ref_run.meta.get("world", ""))
    name, _ = split_ref(args.new)
    new = store.resolve(args.new)
    old = store.resolve(args.against or name)
    if args.against is None and old.digest == new.digest:
        # the candidate was published and pinned already: gate it against what it replaced
        before = store.previous(name)
        if before is None:
            raise MirrorworldError(f"{args.new} is {name}'s only pin: name the reference version with --against")
        old = before
    if old.manifest.world != new.manifest.world:
        raise MirrorworldError("the gate compares two versions of one world")
    if args.replay and recorded.rpartition("-v")[0] != new.manifest.env_id.rpartition("-v")[0]:
        raise MirrorworldError(
            f"the reference run was recorded on {ascii(recorded)[1:-1][:80]}, not on a version of {new.manifest.env_id}"
        )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.out) if args.out else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        runs = []
        for label, art in (("old", old), ("new", new)):
            print(
                f"evaluating {args.agent} on the {label} version ({art.manifest.env_id}, {art.short})", file=sys.stderr
            )
            out = folder / f"gate-{label}-{art.short}.sqlite"
            if out.exists():
                out.unlink()
            evaluate(
                f"{name}@{art.digest}",
                out,
                agent=args.agent,
                episodes=args.episodes,
                split=args.split,
                replay=args.replay,
                store=store.root,
            )
            runs.append(out)
        report = gate_runs(runs[0], runs[1], tolerance=args.tolerance)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.format())
    return 0 if report.passed else 1


def cmd_compare(args: argparse.Namespace) -> int:
    from mirrorworld.run import RunFile
    from mirrorworld.ship.compare import Provenance, check_comparable, comparison, format_comparison

    with RunFile.open(args.runs[0]) as a, RunFile.open(args.runs[1]) as b:
        pa, pb = Provenance.of(a.meta), Provenance.of(b.meta)
        differ = check_comparable(pa, pb, allow=args.allow_incomparable)
        if differ:
            print(
                f"mirrorworld: WARNING: these runs are not comparable: {pa.label()} and {pb.label()}"
                f" differ in {', '.join(differ)}",
                file=sys.stderr,
            )
        report = comparison(list(a.episodes()), list(b.episodes()))
    if args.json:
        print(json.dumps({"incomparable": differ, **report}, indent=2))
    else:
        print(f"A: {ascii(str(args.runs[0]))[1:-1]}\nB: {ascii(str(args.runs[1]))[1:-1]}")
        print(format_comparison(report))
    return 0
