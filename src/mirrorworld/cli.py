"""The ``mirrorworld`` command line.

Commands: ``run`` (the main job: agents over tasks, graded and recorded),
``show`` (a run file or one of its episodes), ``tasks``, ``tools``, ``worlds``
and ``bench``. Every error is one line on stderr, printed inert (what a file
or an agent wrote in it reaches the terminal as text), and a non-zero exit:

* 2: a usage error, or a file that is not what the command reads (a missing,
  corrupt or hostile run file, JSONL or trace file: a
  :class:`~mirrorworld.errors.RunFileError`);
* 1: any other error mirrorworld reports (an unknown world, an agent or world
  failure that stops the command, an operating-system error);
* 70: an internal error, a bug (``MIRRORWORLD_DEBUG=1`` shows its traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

from mirrorworld.core.registry import Registry, default
from mirrorworld.errors import MirrorworldError, RunFileError
from mirrorworld.options import registry_of, world_option
from mirrorworld.progress import progress_bar, wants_progress

__all__ = ["main"]


class _Help(argparse.HelpFormatter):
    """Help that shows each option's default (when it has one worth showing) and keeps an epilog's examples
    as written."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "%(default)" in text
            or "default:" in text
            or default is None
            or isinstance(default, bool)
            or default == argparse.SUPPRESS
            or default == []
            or not action.option_strings
        ):
            return text
        return f"{text} (default: %(default)s)" if text else "(default: %(default)s)"

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:\n"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Help)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"mirrorworld: error: {message} (see --help)\n")


EXAMPLES: dict[str, tuple[str, ...]] = {
    "run": (
        "mirrorworld run --world helpdesk --agent oracle --episodes 100",
        "mirrorworld run --agent openai --base-url http://localhost:8000/v1 --model NAME --concurrency 8",
        "mirrorworld run --resume runs/helpdesk-openai-20261202-101500-000000.sqlite",
        "mirrorworld run --multi-agent --policy tier1=llm --model NAME --base-url URL",
        "mirrorworld run --world sales --backend twin --agent partial --episodes 20",
    ),
    "show": ("mirrorworld show run.sqlite", "mirrorworld show run.sqlite 3 --json"),
    "tasks": ("mirrorworld tasks --world sales",),
    "tools": ("mirrorworld tools --world helpdesk --format openai-strict", "mirrorworld tools --format anthropic"),
    "worlds": ("mirrorworld worlds",),
    "audit-verifiers": ("mirrorworld audit-verifiers --world helpdesk --seeds 200 --html audit.html",),
    "audit-run": ("mirrorworld audit-run run.sqlite --json",),
    "serve": ("mirrorworld serve --world helpdesk --port 8765",),
    "mcp": ("mirrorworld mcp --world helpdesk",),
    "review": (
        "mirrorworld review serve run.sqlite --db review.sqlite",
        "mirrorworld review stats --db review.sqlite",
        "mirrorworld review token create --db review.sqlite --name pipeline --role admin --create",
        "mirrorworld review fit --db review.sqlite --numeric refunds.amount_cents,order_lines.refunded_cents",
    ),
    "twin": ("mirrorworld twin up --world sales",),
    "fidelity": (
        "mirrorworld fidelity --world sales --calls 1200 --html fidelity.html",
        "mirrorworld fidelity --world sales --agents oracle,random,partial --episodes 100 --json",
    ),
    "train": ("mirrorworld train --world helpdesk --minutes 12 --out runs/train",),
    "pack": ("mirrorworld pack helpdesk --out dist",),
    "env": ("mirrorworld env publish helpdesk", "mirrorworld env gate helpdesk@1 --replay ref.sqlite"),
    "compare": ("mirrorworld compare before.sqlite after.sqlite", "mirrorworld compare a.sqlite b.sqlite --json"),
    "export": (
        "mirrorworld export run.sqlite --format jsonl",
        "mirrorworld export run.sqlite --format hf --out run-dataset",
        "mirrorworld export --format openenv helpdesk --out exports/helpdesk-openenv",
    ),
    "image": ("mirrorworld image build helpdesk --out helpdesk.tar",),
    "drift": ("mirrorworld drift --world helpdesk --from v0 --to v1 --agent stale --plot drift.svg",),
    "parity": ("mirrorworld parity --world sales",),
    "bench": ("mirrorworld bench --quick", "mirrorworld bench --server --json"),
    "view": ("mirrorworld view run.sqlite other.sqlite", "mirrorworld view runs/*.sqlite --no-open --port 8600"),
    "play": (
        "mirrorworld play --world helpdesk --family refund_damaged --task-seed 3",
        "mirrorworld play --world helpdesk_team --role customer",
    ),
}
"""An example or two per command, shown at the end of its ``--help``."""


def _add_examples(parser: argparse.ArgumentParser) -> None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                lines = EXAMPLES.get(name)
                if lines and not sub.epilog:
                    sub.epilog = "examples:\n" + "".join(f"  {line}\n" for line in lines)


def _parser(registry: Registry | None = None) -> tuple[argparse.ArgumentParser, dict[str, Any]]:
    registry = registry or default
    handlers: dict[str, Any] = dict(COMMANDS)
    p = _Parser(prog="mirrorworld", description="Mirror worlds for training and evaluating tool-using agents.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    r = sub.add_parser("run", help="run an agent over tasks, grade and record every episode")
    world_option(r, registry)
    r.add_argument(
        "--agent", default="oracle", help="noop, refuse, claim, random, oracle, oracle_retry, partial, replay or openai"
    )
    r.add_argument("--episodes", type=int, default=20, help="number of tasks")
    r.add_argument("--trials", type=int, default=1, help="runs per task (for pass^k)")
    r.add_argument("--split", choices=("train", "test"), default="test")
    r.add_argument("--families", default=None, help="comma-separated task families (default: all)")
    r.add_argument("--start", type=int, default=0, help="index of the first task in the split")
    r.add_argument("--max-steps", type=int, default=30)
    r.add_argument(
        "--faults",
        default=None,
        metavar="KEY=VALUE,...",
        help="inject seeded transient tool failures, e.g. rate=0.1,seed=7 (kinds=timeout+rate_limited+unavailable, "
        "latency_s=N, writes_only=true)",
    )
    r.add_argument("--scale", type=float, default=1.0)
    r.add_argument(
        "--backend",
        choices=("mirror", "twin"),
        default="mirror",
        help="where the tools run: the mirror, or the world's real twin (sales: Tryton), graded by the same "
        "verifier contract with the gold replayed on the twin",
    )
    r.add_argument("--out", default=None, help="run file to write (default: runs/<world>-<agent>-<time>.sqlite)")
    r.add_argument("--json", action="store_true", help="print the summary as JSON")
    r.add_argument("--no-progress", action="store_true")
    r.add_argument("--seed", type=int, default=0, help="seed of the random agent")
    r.add_argument("--replay", default=None, help="run file for the replay agent")
    r.add_argument(
        "--checkpoint",
        default=None,
        metavar="PATH",
        help="the trained agent's policy.pt (or its folder), as mirrorworld train wrote it",
    )
    r.add_argument(
        "--twin-option",
        default=None,
        metavar="KEY=VALUE,...",
        help="with --backend twin: play on a changed twin (tax_rounding=line)",
    )
    r.add_argument(
        "--concurrency", type=int, default=1, metavar="N", help="episodes played at once (threads: for model endpoints)"
    )
    r.add_argument("--max-errors", type=int, default=None, metavar="N", help="stop once more than N episodes errored")
    r.add_argument(
        "--resume",
        default=None,
        metavar="RUN",
        help="finish RUN as it was started: play its missing and errored episodes into the same file",
    )
    m = r.add_argument_group("model endpoint (--agent openai; the judge shares the transport options)")
    m.add_argument("--model", default=None, help="model name")
    m.add_argument(
        "--base-url", default=None, help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL, else OpenAI's API)"
    )
    m.add_argument(
        "--api-key-env", default="OPENAI_API_KEY", metavar="VAR", help="environment variable holding the API key"
    )
    m.add_argument("--temperature", type=float, default=0.0, help="sampling temperature")
    m.add_argument("--top-p", type=float, default=None, help="nucleus sampling (default: the endpoint's)")
    m.add_argument("--max-tokens", type=int, default=None, help="tokens per reply at most (default: the endpoint's)")
    m.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for one reply")
    m.add_argument(
        "--retries", type=int, default=2, help="retries per request (network errors, 5xx, 429 after its Retry-After)"
    )
    r.add_argument(
        "--judge-base-url", default=None, help="grade customer texts with a model judge too (off by default)"
    )
    r.add_argument("--judge-model", default=None, help="model name of the judge")
    _ray_options(r, "play the episodes on Ray actors")
    from mirrorworld.run.multiagent import add_arguments as add_multi_agent

    add_multi_agent(r)

    s = sub.add_parser("show", help="show a run file, or one episode of it")
    s.add_argument("run")
    s.add_argument("episode", nargs="?", type=int)
    s.add_argument("--json", action="store_true")

    t = sub.add_parser("tasks", help="list a world's task families with a sample task")
    world_option(t, registry)
    t.add_argument("--split", choices=("train", "test"), default="test")
    t.add_argument("--json", action="store_true")

    o = sub.add_parser("tools", help="list a world's tools")
    world_option(o, registry)
    o.add_argument(
        "--format",
        choices=("table", "markdown", "openai", "openai-strict", "anthropic", "mcp"),
        default="table",
        help="a table or markdown to read; or every tool's schema as JSON, in one client's form",
    )

    sub.add_parser(
        "worlds",
        help="list the registered worlds",
        description="One line per world: its name, its versioned id (--world takes either), its tools, its task "
        "families and its content hash, tab-separated.",
    )

    from mirrorworld.audit.cli import register as register_audit

    handlers.update(register_audit(sub, registry))

    from mirrorworld.server import cli as server_cli

    server_cli.register(sub, registry)
    handlers.update(server_cli.COMMANDS)

    from mirrorworld.review.cli import register as register_review

    handlers.update(register_review(sub))

    from mirrorworld.fidelity.cli import register as register_fidelity

    handlers.update(register_fidelity(sub, registry))

    from mirrorworld.train.cli import register as register_train

    handlers.update(register_train(sub, registry))

    from mirrorworld.ship.cli import register as register_ship

    handlers.update(register_ship(sub, registry))

    from mirrorworld.ship.hub_cli import register as register_export

    handlers.update(register_export(sub))

    from mirrorworld.ship.image_cli import register as register_image

    handlers.update(register_image(sub))

    from mirrorworld.drift.cli import register as register_drift

    handlers.update(register_drift(sub, registry))

    from mirrorworld.drift.parity import register as register_parity

    handlers.update(register_parity(sub, registry))

    from mirrorworld.view.cli import register as register_view

    handlers.update(register_view(sub, registry))

    from mirrorworld.play.cli import register as register_play

    handlers.update(register_play(sub, registry))

    b = sub.add_parser("bench", help="measure reset, step, verify, episode throughput and memory")
    world_option(b, registry)
    b.add_argument("--json", action="store_true")
    b.add_argument("--quick", action="store_true", help="a few seconds instead of a minute")
    b.add_argument("--server", action="store_true", help="benchmark the session server (loopback, bounded)")
    b.add_argument("--drift", action="store_true", help="what a drifted API and fault injection cost per call")
    _ray_options(b, "measure episodes/s on --workers Ray actors against one")
    b.add_argument("--episodes", type=int, default=1200, help="episodes per measurement (with --ray)")
    _add_examples(p)
    return p, handlers


def _ray_options(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--ray",
        nargs="?",
        const="local",
        default=None,
        metavar="ADDRESS",
        help=f"{what}: alone, a local Ray; or a cluster's address (auto, HOST:6379, ray://HOST:10001)",
    )
    parser.add_argument("--workers", type=int, default=None, help="Ray actors (default: the cluster's CPUs)")


def _check_ray_options(args: argparse.Namespace) -> None:
    if args.workers is not None and args.ray is None:
        raise MirrorworldError("--workers needs --ray")
    if args.workers is not None and args.workers < 1:
        raise MirrorworldError("--workers must be at least 1")


def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def _world(args: argparse.Namespace, scale: float = 1.0) -> Any:
    """The world ``--world`` names, from the command's registry."""
    return registry_of(args).get(args.world, scale=scale)


def cmd_run(args: argparse.Namespace) -> int:
    """``mirrorworld run``: plan, play, grade and record; see :mod:`mirrorworld.run.evaluate` for resuming
    and the exit status."""
    from mirrorworld.run import evaluate

    _check_ray_options(args)
    resumed: dict[str, Any] | None = None
    if args.resume is not None:
        if args.multi_agent or args.ray is not None or args.out:
            raise MirrorworldError("--resume continues a run in its own file, in this process (no --out, --ray)")
        run_parser = _subcommand(_parser(registry_of(args))[0], "run")
        resumed = evaluate.restore_options(args, run_parser, (getattr(args, "argv", None) or [])[1:])
    if args.multi_agent and args.ray is not None:
        raise MirrorworldError("--ray plays single-agent runs; --multi-agent runs in one process")
    if getattr(args, "backend", "mirror") == "twin" and (args.multi_agent or args.ray is not None):
        raise MirrorworldError("--backend twin plays single-agent runs in this process (no --multi-agent, --ray)")
    if args.multi_agent:
        if args.agent != "oracle":
            raise MirrorworldError(
                "--multi-agent plays a policy per role (--policy ROLE=NAME, e.g. tier1=llm); "
                "--agent is for single-agent runs"
            )
        from mirrorworld.run.multiagent import run_multi_agent

        return run_multi_agent(args)
    from mirrorworld.run import RunFile, plan_episodes, play_episodes, summarize

    if args.episodes < 1 or args.trials < 1 or args.max_steps < 1:
        raise MirrorworldError("--episodes, --trials and --max-steps must be at least 1")
    if args.concurrency < 1 or (args.max_errors is not None and args.max_errors < 0):
        raise MirrorworldError("--concurrency must be at least 1 and --max-errors at least 0")
    if args.concurrency > 1 and args.ray is not None:
        raise MirrorworldError("--concurrency plays threads in this process; --ray spreads episodes over actors")
    from mirrorworld.episodes import Faults

    faults = Faults.parse(getattr(args, "faults", None))
    if args.ray is not None:
        from mirrorworld.distributed.cluster import LOCAL, probe_address, require_ray

        require_ray()
        if args.ray != LOCAL:
            probe_address(args.ray)  # before the run file exists: a typo leaves nothing behind
    requested_world = str(args.world)
    artifact = None
    if "@" in str(args.world):
        from mirrorworld.ship.launch import reexec, resolve, same_code

        name, art = resolve(args.world)
        args.world = name
        installed = registry_of(args).get(name, scale=args.scale) if name in registry_of(args).names() else None
        if installed is None or same_code(installed, art):
            argv = list(getattr(args, "argv", None) or sys.argv[1:])
            if resumed is not None:
                argv += ["--world", requested_world]  # rewritten to the plain name for the child
            return reexec(art, argv, name)
        artifact = art.digest
    world = _world(args, args.scale)
    if artifact is None:
        from mirrorworld.ship.launch import check_child

        artifact = check_child(world)
    if resumed is not None and resumed.get("world_hash") != world.content_hash:
        raise MirrorworldError(
            f"{args.resume} was run on another build of {world.name} (hash {str(resumed.get('world_hash'))[:16]}, "
            f"installed {world.content_hash[:16]}); resume it where it was started"
        )
    families = [f.strip() for f in args.families.split(",") if f.strip()] if args.families else None
    for f in families or ():
        world.family(f)
    from mirrorworld.run.backends import open_backend

    backend = open_backend(args, world)
    make = evaluate.agent_factory(args)
    agent = make()
    judge = None
    if getattr(args, "judge_base_url", None) or getattr(args, "judge_model", None):
        if not args.judge_model:
            raise MirrorworldError("a model judge needs --judge-model (and --judge-base-url or OPENAI_BASE_URL)")
        from mirrorworld.agents.judge import OpenAIJudge

        judge = OpenAIJudge(
            base_url=args.judge_base_url,
            model=args.judge_model,
            api_key_env=args.api_key_env,
            timeout=args.timeout,
            retries=args.retries,
        )
    if resumed is not None:
        out = Path(args.resume)
    else:
        out = (
            Path(args.out)
            if args.out
            else Path("runs") / (f"{world.name}-{agent.name}-{datetime.now().strftime('%Y%m%d-%H%M%S-%f')}.sqlite")
        )
        if out.exists() or out.is_symlink():
            raise RunFileError(f"{out} already exists (pick another --out, or --resume it)")
    planned = plan_episodes(
        world, episodes=args.episodes, split=args.split, families=families, start=args.start, trials=args.trials
    )
    kept: list[Any] = []
    if resumed is not None:
        with RunFile.open(out) as old:
            previous = list(old.episodes())
        kept = [r for r in previous if not r.errored]
        runfile = RunFile.append_to(out)
        runfile.discard(r.index for r in previous if r.errored)
        done = {r.index for r in kept}
        todo = [p for p in planned if p.index not in done]
    else:
        meta = evaluate.run_meta(
            args,
            world,
            agent,
            requested_world=requested_world,
            artifact=artifact,
            judge=judge,
            faults=faults,
            families=families,
        )
        if args.ray is not None:
            meta["ray"] = {"address": args.ray, "workers": args.workers}
        meta["backend"] = backend.meta()
        runfile = RunFile.create(out, meta)
        todo = planned
    records: list[Any] = []
    errors = [0]

    def record(r: Any) -> None:
        runfile.add(r, keep_index=True)
        records.append(r)
        if r.errored:
            errors[0] += 1
            if args.max_errors is not None and errors[0] > args.max_errors:
                raise _TooManyErrors

    started = time.perf_counter()
    show = wants_progress(json_output=args.json, disabled=args.no_progress)
    stopped: str | None = None
    try:
        with progress_bar(f"{agent.name} on {world.id}", len(todo), enabled=show) as update:
            options: dict[str, Any] = {
                "split": args.split,
                "families": families,
                "max_steps": args.max_steps,
                "judge": judge,
                "faults": faults,
                "on_record": record,
                "progress": update,
            }
            if args.ray is not None:
                from mirrorworld.distributed import run_on_ray

                run_on_ray(
                    world,
                    agent,
                    address=args.ray,
                    workers=args.workers,
                    episodes=args.episodes,
                    start=args.start,
                    trials=args.trials,
                    **options,
                )
            elif todo:
                play_episodes(
                    world,
                    agent,
                    todo,
                    concurrency=args.concurrency,
                    make_agent=make,
                    make_env=backend.make_env,
                    **options,
                )
    except _TooManyErrors:
        stopped = f"stopped after more than {args.max_errors} errored episodes"
    except KeyboardInterrupt:
        stopped = "interrupted"
    finally:
        backend.close()
        every = sorted([*kept, *records], key=lambda r: r.index)
        seconds = time.perf_counter() - started
        before = (resumed.get("summary") if resumed is not None else None) or {}
        earlier = before.get("seconds") if isinstance(before, dict) else None
        if isinstance(earlier, (int, float)) and 0 <= earlier < 1e9:
            seconds += float(earlier)  # the time of the run, all its sittings together (a file's figure, bounded)
        summary = summarize(every, seconds=seconds)
        summary["run_file"] = str(out)
        summary["planned"] = len(planned)
        # Complete: every planned episode played and graded (an errored one is played again by --resume).
        summary["complete"] = len(every) == len(planned) and stopped is None and not any(r.errored for r in every)
        if stopped is not None:
            summary["stopped"] = stopped
        runfile.set_meta("summary", summary)
        runfile.close()
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        on = " on the real twin" if backend.name == "twin" else ""
        _print_summary(summary, title=f"{agent.name} on {world.id}{on} ({args.split} split)")
        of = "" if len(every) == len(planned) else f" of {len(planned)}"
        print(f"saved {len(every)}{of} episodes to {out}")
    first = next((r for r in every if r.errored), None)
    if first is not None:
        _error_line(
            f"first error: episode {first.index} ({first.task_id}): {first.failure.boundary} {first.failure.kind}: "
            f"{first.failure.message}"
        )
    if stopped is not None or not summary["complete"]:
        why = stopped or f"{summary['errors']} errored episodes to play again"
        again = "".join(
            f" --{name.replace('_', '-')} {shlex.quote(str(getattr(args, name)))}"
            for name in evaluate.ENDPOINTS
            if getattr(args, name, None)
        )  # a resumed run goes to an endpoint only when told again
        _error_line(f"{why}: resume with: mirrorworld run --resume {shlex.quote(str(out))}{again}")
    if stopped == "interrupted":
        return evaluate.EXIT_INTERRUPTED
    status = evaluate.exit_status(summary)
    if status and stopped is None:
        _error_line(
            f"{summary['errors']} of {summary['episodes']} episodes errored (not graded): the pass rate covers "
            f"only the {summary['graded']} graded"
        )
    return status


class _TooManyErrors(Exception):
    """Raised from the record callback to stop a run at ``--max-errors``."""


def _subcommand(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of one subcommand of the main parser."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser = action.choices[name]
            return found
    raise MirrorworldError(f"no command {name!r}")


def _print_summary(summary: dict[str, Any], title: str) -> None:
    """The summary table; errored episodes are counted per boundary, outside the rates.

    ``summary`` may come from a run file: every name in it is printed inert
    (:mod:`mirrorworld.inert`), every number read as a number.
    """
    from rich.table import Table
    from rich.text import Text

    from mirrorworld.inert import inert, text

    table = Table(title=text(title, 200))
    table.add_column("family", no_wrap=True)
    for col in ("episodes", "pass rate", "pass^k", "reward", "steps", "errors"):
        table.add_column(col, justify="right")

    def row(name: str, b: dict[str, Any], style: str = "") -> None:
        cells = (
            str(int(b["episodes"])),
            f"{float(b['pass_rate']):.1%}",
            f"{float(b['pass_hat_k']):.1%}",
            f"{float(b['mean_reward']):.3f}",
            f"{float(b['mean_steps']):.1f}",
            str(int(b.get("errors", 0))),  # per boundary on the line below the table (80 columns)
        )
        table.add_row(text(name, 200), *(Text(c) for c in cells), style=style)

    for name, b in summary["families"].items():
        row(name, b)
    row("all", summary, style="bold")
    con = _console()
    con.print(table)
    gates = ", ".join(f"{inert(g, 100)} {int(n)}" for g, n in summary["gate_failures"].items())
    con.print(Text(f"gate failures: {gates}"))
    if int(summary.get("errors", 0)):
        con.print(Text(f"errored episodes (not graded, outside the rates): {_errors(summary, counts=False)}"))
    if "episodes_per_s" in summary:
        rate = inert(summary["episodes_per_s"], 40)
        con.print(Text(f"{int(summary['episodes'])} episodes in {float(summary['seconds']):.2f} s ({rate} /s)"))


def _errors(block: dict[str, Any], *, counts: bool = True) -> str:
    """``3 (world 2, verifier 1)``: errored episodes, per boundary (older summaries have the total only); inert."""
    from mirrorworld.inert import inert

    total = int(block.get("errors", 0))
    by = block.get("errors_by_boundary") or {}
    parts = ", ".join(f"{inert(b, 40)} {int(n)}" for b, n in by.items())
    if not counts:
        return parts or str(total)
    return f"{total} ({parts})" if total and parts else str(total)


_SUMMARY_FAULTS = (KeyError, TypeError, ValueError, AttributeError, OverflowError)
"""What reading a malformed stored summary raises (a missing key, a name where a number belongs, infinity)."""


def cmd_show(args: argparse.Namespace) -> int:
    """A run (its summary and one row per episode) or one episode; a malformed run file is one error line.

    Everything the run file holds is printed inert (:mod:`mirrorworld.inert`):
    markup in an agent's text stays text, control characters are shown as escapes.
    """
    from rich.table import Table
    from rich.text import Text

    from mirrorworld.inert import text
    from mirrorworld.run import RunFile

    with RunFile.open(args.run) as run:
        if args.episode is None:
            meta = run.meta
            records = list(run.episodes())
            eps = [
                {
                    "index": e.index,
                    "task": e.task_id,
                    "trial": e.trial,
                    "passed": e.passed,
                    "reward": e.reward,
                    "steps": e.steps,
                    "error": e.error,
                    "failure": None if e.failure is None else e.failure.to_dict(),
                }
                for e in records
            ]
            if args.json:
                print(json.dumps({"meta": meta, "episodes": eps}, indent=2))
                return 0
            if isinstance(meta.get("summary"), dict):
                title = f"{meta.get('agent')} on {meta.get('world')} ({meta.get('split')} split)"
                try:
                    _print_summary(meta["summary"], title=title)
                except _SUMMARY_FAULTS:
                    raise RunFileError(f"{args.run}: its stored summary is malformed") from None
            table = Table(title=text(args.run, 300))
            for col in ("#", "task", "trial", "passed", "reward", "steps", "error"):
                table.add_column(col)
            for e in records:
                table.add_row(
                    Text(str(e.index)),
                    text(e.task_id, 200),
                    Text(str(e.trial)),
                    Text("errored" if e.errored else "yes" if e.passed else "no"),
                    Text(f"{e.reward:.2f}"),
                    Text(str(e.steps)),
                    _failure_text(e.failure),
                )
            _console().print(table)
            return 0
        ep = run.episode(args.episode)
    if args.json:
        from dataclasses import asdict

        print(json.dumps(asdict(ep), indent=2, default=str))
        return 0
    _print_episode(ep)
    return 0


def _failure_text(failure: Any) -> Any:
    from rich.text import Text

    from mirrorworld.inert import inert

    return Text(f"{inert(failure.boundary, 40)}: {inert(failure.message, 80)}" if failure is not None else "")


def _print_episode(ep: Any) -> None:
    """One episode of a run file: its header, its messages and tool calls, its verdict or failure, all inert."""
    from rich.text import Text

    from mirrorworld.inert import inert, text

    verdict = ep.graded
    con = _console()
    status = ("ERRORED", "yellow") if ep.errored else ("PASSED", "green") if ep.passed else ("FAILED", "red")
    con.print(
        Text.assemble(
            (f"episode {ep.index}", "bold"),
            "  task ",
            text(ep.task_id, 200),
            "  agent ",
            text(ep.agent, 200),
            "  ",
            status,
            f"  reward {ep.reward:.2f}  steps {ep.steps}",
        )
    )
    for m in ep.messages:
        role = m.get("role")
        if role == "system":
            continue
        calls = m.get("tool_calls")
        if role == "assistant" and calls:
            for c in calls if isinstance(calls, list) else [calls]:
                fn = c.get("function", {}) if isinstance(c, dict) else {}
                fn = fn if isinstance(fn, dict) else {}
                name = text(fn.get("name"), 200, style="cyan")
                con.print(Text.assemble(("assistant → ", "cyan"), name, " ", text(fn.get("arguments"))))
        elif role == "tool":
            con.print(Text.assemble("  ", ("tool:", "dim"), " ", text(m.get("content"), 400)))
        else:
            con.print(Text.assemble(text(role, 40, style="bold"), (":", "bold"), " ", text(m.get("content"))))
    if verdict is None:
        con.print(Text.assemble(("verdict", "bold"), "  none: the episode was not graded"))
    else:
        con.print(Text("verdict", style="bold"))
        for gate, result in verdict.gates.items():
            mark = ("pass", "green") if result.passed else ("FAIL", "red")
            con.print(Text.assemble("  ", text(gate, 100), ": ", mark, " ", text("; ".join(result.evidence))))
        for section in ("process", "guards"):
            con.print(Text.assemble(f"  {section}: ", text(getattr(verdict, section))))
    if ep.failure is not None:
        f = ep.failure
        con.print(
            Text.assemble(
                (f"errored at the {inert(f.boundary, 40)} boundary", "red"),
                " (",
                text(f.kind, 200),
                "): ",
                text(f.message),
            )
        )


def cmd_tasks(args: argparse.Namespace) -> int:
    from mirrorworld.core.task import split_seed

    world = _world(args)
    rows = []
    for fam in world.families:
        task = world.task(fam.name, split_seed(args.split, 0))
        rows.append(
            {
                "family": fam.name,
                "description": fam.description,
                "example_id": task.id,
                "instruction": task.instruction,
                "gold_calls": len(task.gold),
                "checks": len(task.checks),
                "facts": len(task.facts),
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    from rich.table import Table

    table = Table(title=f"task families of {world.id}", show_lines=True)
    for col in ("family", "description", "example instruction", "gold calls"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["family"], r["description"], r["instruction"], str(r["gold_calls"]))
    _console().print(table)
    return 0


def cmd_tools(args: argparse.Namespace) -> int:
    """``mirrorworld tools``: a world's tools to read (table, markdown) or as schemas (see ``core.schemas``)."""
    from mirrorworld.core.schemas import FORMS, tool_schemas

    world = _world(args)
    if args.format in FORMS:
        print(json.dumps(tool_schemas(world.tools, args.format), indent=2))
        return 0
    if args.format == "markdown":
        for i, t in enumerate(world.tools):
            params = ", ".join(f"`{p.name}`" + ("" if p.required else "?") for p in t.params)
            print(f"{i}. **`{t.name}`** ({t.kind}) {params}: {t.description}")
        return 0
    from rich.table import Table

    table = Table(title=f"tools of {world.id}")
    for col in ("#", "tool", "kind", "arguments", "description"):
        table.add_column(col)
    for i, t in enumerate(world.tools):
        params = ", ".join(p.name + ("" if p.required else "?") for p in t.params)
        table.add_row(str(i), t.name, t.kind, params, t.description)
    _console().print(table)
    return 0


def cmd_worlds(args: argparse.Namespace) -> int:
    registry = registry_of(args)
    for name in registry.names():
        w = registry.get(name)
        print(f"{name}\t{w.id}\t{len(w.tools)} tools\t{len(w.families)} task families\thash {w.content_hash}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    _check_ray_options(args)
    if args.ray is not None:
        if args.server or args.episodes < 1:
            raise MirrorworldError("bench --ray takes --episodes (at least 1) and not --server")
        from mirrorworld.distributed.bench import format_scaling, scaling

        scaled = scaling(_world(args), args.episodes, args.workers or 2, address=args.ray)
        print(json.dumps(scaled, indent=2) if args.json else format_scaling(scaled))
        return 0
    if args.server:
        from mirrorworld.bench.cli import bench_server

        return bench_server(json_output=args.json, quick=args.quick)
    if args.drift:
        from mirrorworld.bench.drift import bench_drift, format_drift

        drifted = bench_drift(quick=args.quick, registry=registry_of(args))
        print(json.dumps(drifted, indent=2) if args.json else format_drift(drifted))
        return 0
    from mirrorworld.bench import format_report, run_bench

    report = run_bench(
        registry_of(args).spec(args.world).name, quick=args.quick, progress=not args.json or sys.stderr.isatty()
    )
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(format_report(report))
    return 0


COMMANDS = {
    "run": cmd_run,
    "show": cmd_show,
    "tasks": cmd_tasks,
    "tools": cmd_tools,
    "worlds": cmd_worlds,
    "bench": cmd_bench,
}


def main(argv: Sequence[str] | None = None, *, registry: Registry | None = None) -> int:
    """Run one command; it finds worlds in ``registry`` (by default the installed ones). Returns the exit code."""
    registry = registry or default
    parser, handlers = _parser(registry)
    args = parser.parse_args(argv)
    args.registry = registry
    args.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return int(handlers[args.command](args))
    except RunFileError as err:
        _error_line(f"mirrorworld: error: {err}")
        return 2
    except MirrorworldError as err:
        _error_line(f"mirrorworld: error: {err}")
        return 1
    except OSError as err:
        _error_line(f"mirrorworld: error: {err.strerror or err}: {err.filename or ''}".rstrip(": "))
        return 1
    except KeyboardInterrupt:
        print("mirrorworld: interrupted", file=sys.stderr)
        return 130
    except Exception as err:
        if os.environ.get("MIRRORWORLD_DEBUG"):
            raise
        _error_line(
            f"mirrorworld: internal error: {type(err).__name__}: {err} (MIRRORWORLD_DEBUG=1 shows the traceback)"
        )
        return 70


def _error_line(message: str) -> None:
    """An error on stderr as one inert line: what a file or an agent wrote in it cannot reach the terminal."""
    from mirrorworld.inert import inert

    print(inert(message, 1000, lines=False), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
