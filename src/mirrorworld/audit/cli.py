"""The ``audit-verifiers`` and ``audit-run`` commands."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from mirrorworld.core.registry import Registry
from mirrorworld.errors import MirrorworldError, RunFileError
from mirrorworld.options import registry_of, world_option
from mirrorworld.outputs import check_output_path, write_atomic
from mirrorworld.progress import progress_bar, wants_progress

__all__ = ["register"]


def register(sub: Any, registry: Registry | None = None) -> dict[str, Any]:
    """Add the audit commands to an argparse subparsers object; return their handlers.

    ``--world`` lists the worlds of ``registry``; the handlers look worlds up in
    the registry ``mirrorworld.cli.main`` puts on the arguments.
    """
    a = sub.add_parser("audit-verifiers", help="prove a world's verifiers right: mutants, null agents, probes")
    world_option(a, registry)
    a.add_argument("--seeds", type=int, default=20, help="tasks per family (the full audit uses 200)")
    a.add_argument("--families", default=None, help="comma-separated task families (default: all)")
    a.add_argument("--json", action="store_true")
    a.add_argument("--html", default=None, metavar="FILE", help="also write a self-contained HTML report")
    a.add_argument("--no-probes", action="store_true")
    a.add_argument("--no-cross-process", action="store_true")
    a.add_argument(
        "--adversary",
        type=int,
        default=0,
        metavar="N",
        help="also run the generative adversary: N composed attacks per family (the full audit uses 5000)",
    )
    a.add_argument(
        "--regressions",
        default=None,
        metavar="PATH",
        help="verifier regression cases from human review (default: tests/regressions if present)",
    )
    r = sub.add_parser("audit-run", help="flag reward-hacking patterns in a recorded run (run file or OpenAI JSONL)")
    r.add_argument("run")
    world_option(r, registry, preferred=None, what="the world of a JSONL file (run files name their own)")
    r.add_argument("--json", action="store_true")
    return {"audit-verifiers": cmd_audit_verifiers, "audit-run": cmd_audit_run}


def cmd_audit_verifiers(args: argparse.Namespace) -> int:
    from mirrorworld.audit.report import audit_html, print_audit
    from mirrorworld.audit.verifiers import audit_verifiers
    from mirrorworld.inert import inert

    if args.seeds < 1:
        raise MirrorworldError("--seeds must be at least 1")
    if args.adversary < 0:
        raise MirrorworldError("--adversary must be 0 (off) or more")
    html_out = check_output_path(args.html) if args.html else None  # before the audit, not after it
    regressions = args.regressions or ("tests/regressions" if Path("tests/regressions").is_dir() else None)
    if regressions and not Path(regressions).exists():
        raise MirrorworldError(f"no regression cases at {regressions}")
    registry = registry_of(args)
    world = registry.get(args.world)
    families = [f.strip() for f in args.families.split(",") if f.strip()] if args.families else None
    with progress_bar(f"auditing {world.id}", None, enabled=wants_progress(json_output=args.json)) as update:
        report = audit_verifiers(
            world,
            seeds=args.seeds,
            families=families,
            probes=not args.no_probes,
            cross_process=not args.no_cross_process,
            adversary=args.adversary,
            progress=update,
        )
    data = report.to_dict()
    if regressions:
        from mirrorworld.review.regressions import check_cases

        data["regressions"] = check_cases([regressions], registry, world=world.name)
        if data["regressions"]["regressed"]:
            data["meets_bars"] = False
            data["failed_bars"].append(f"verifier regressions: {', '.join(data['regressions']['regressed'])}")
    if html_out is not None:
        write_atomic(html_out, audit_html(data))
    if args.json:
        print(json.dumps(data, indent=2, default=str))
    else:
        print_audit(data)
        if html_out is not None:
            print(f"HTML report written to {inert(str(html_out), 400, lines=False)}")
    return 0 if data["meets_bars"] else 1


def cmd_audit_run(args: argparse.Namespace) -> int:
    """Flag reward-hacking patterns in a recorded run; everything the file holds is printed inert."""
    from mirrorworld.audit.report import print_run_audit
    from mirrorworld.audit.runlog import audit_run

    path = Path(args.run)
    name = args.world
    if name is None:
        if path.suffix in (".jsonl", ".json"):
            raise MirrorworldError("a JSONL file needs --world")
        from mirrorworld.run.trajectories import RunFile

        with RunFile.open(path) as run:
            name = run.meta.get("world")
        if not isinstance(name, str) or not name:
            raise RunFileError(f"{path}: its meta names no world (give --world)")
    result = audit_run(path, registry_of(args).get(name))
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print_run_audit(result, str(path))
    return 0
