"""What ``mirrorworld run`` adds around the runner for an evaluation one can trust: the agent from its options,
what the run file records of it, resuming, and when a run's exit status says it failed.

**Options a run is defined by** (:data:`RUN_OPTIONS`: the world, the agent and
its model, endpoint and sampling, the tasks, the trials, the limits, the
faults) are stored in the run file's ``options`` meta, so that
``mirrorworld run --resume RUN`` plays the same run again. A run file is
untrusted input, so the stored options are not taken as they are: they are
turned back into a command line and parsed by the ``run`` parser itself (types,
choices), exactly as if typed. **Options of the transport** (the key's
variable, timeouts, retries, concurrency, ``--max-errors``, output) are not
part of the run: a resumed run takes them from the new command line. An
option of the run given again with another value is refused: a resumed run is
the run it continues. The endpoints (:data:`ENDPOINTS`) are the exception:
the file says which server the run was played against, but a resumed run
goes there only when told so again (``--base-url``, or ``OPENAI_BASE_URL``),
since the API key goes with every request.

**Resuming** keeps every graded episode and plays the rest of the plan: the
episodes never played (an interrupted run) and the errored ones (an endpoint
that failed), whose rows are replaced. A run's episodes are seeded by their
task and trial, so a resumed run's verdicts are those a run without the
interruption would have had.

**Exit status** (:func:`exit_status`): a run whose graded episodes are fewer
than its errored ones says little about the agent; ``mirrorworld run`` then
exits with :data:`EXIT_ERRORED`, as it does when ``--max-errors`` stopped it.
"""

from __future__ import annotations

import argparse
import os
import platform
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from mirrorworld.agents.base import Agent
from mirrorworld.errors import MirrorworldError, RunFileError

__all__ = [
    "ENDPOINTS",
    "EXIT_ERRORED",
    "EXIT_INTERRUPTED",
    "RUN_OPTIONS",
    "agent_factory",
    "exit_status",
    "explicit_options",
    "restore_options",
    "run_meta",
    "stored_options",
]

ENDPOINTS = ("base_url", "judge_base_url")
"""Run options a resumed run does not take from the file: a run file could name any server, and the
API key would go there. A resumed run must be given them again, and the same."""

EXIT_ERRORED = 3
"""The exit status of a run stopped by ``--max-errors`` or whose episodes mostly errored."""
EXIT_INTERRUPTED = 130
"""The exit status of an interrupted run (what finished is saved, with a partial summary)."""

RUN_OPTIONS = (
    "world",
    "agent",
    "episodes",
    "trials",
    "split",
    "families",
    "start",
    "max_steps",
    "faults",
    "scale",
    "backend",
    "twin_option",
    "seed",
    "replay",
    "checkpoint",
    "base_url",
    "model",
    "temperature",
    "top_p",
    "max_tokens",
    "judge_base_url",
    "judge_model",
)
"""The options that define a run (see the module docstring), by their ``argparse`` destination."""


def stored_options(args: argparse.Namespace) -> dict[str, Any]:
    """The run-defining options of ``args`` as the run file stores them."""
    return {name: getattr(args, name, None) for name in RUN_OPTIONS}


def explicit_options(parser: argparse.ArgumentParser, argv: Sequence[str]) -> set[str]:
    """The destinations of the options ``argv`` gives (long forms and their abbreviations, ``--x=v`` too)."""
    flags: dict[str, str] = {}
    for action in parser._actions:
        for flag in action.option_strings:
            if flag.startswith("--"):
                flags[flag] = action.dest
    given: set[str] = set()
    for token in argv:
        if token == "--":
            break
        if not token.startswith("--"):
            continue
        flag = token.partition("=")[0]
        if flag in flags:
            given.add(flags[flag])
            continue
        matches = {dest for f, dest in flags.items() if f.startswith(flag)}
        if len(matches) == 1:
            given |= matches
    return given


def restore_options(args: argparse.Namespace, parser: argparse.ArgumentParser, argv: Sequence[str]) -> dict[str, Any]:
    """Set ``args``' run options to those stored in the run file ``args.resume``; return its meta.

    ``parser`` is the ``run`` parser and ``argv`` the command line after the
    command's name. Raises :class:`RunFileError` for a file that is not a run
    ``mirrorworld run`` wrote, :class:`MirrorworldError` for a run option given
    again with another value.
    """
    from mirrorworld.run.trajectories import RunFile

    path = str(args.resume)
    with RunFile.open(path) as run:
        meta = run.meta
    stored = meta.get("options")
    if not isinstance(stored, dict) or not isinstance(stored.get("agent"), str):
        raise RunFileError(f"{path} records no run options (it was not written by `mirrorworld run`)")
    if meta.get("agent") == "team":
        raise RunFileError(f"{path} is a multi-agent run; --resume continues single-agent runs")
    line: list[str] = []
    for name in RUN_OPTIONS:
        value = stored.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise RunFileError(f"{path}: its stored option {name} is not a plain value")
        line += [f"--{name.replace('_', '-')}", str(value)]
    restored = _parse_stored(parser, line, path)
    given = explicit_options(parser, argv) - {"resume"}
    for name in ENDPOINTS:
        then = getattr(restored, name, None)
        now = getattr(args, name, None) or (os.environ.get("OPENAI_BASE_URL") if name == "base_url" else None)
        if then is not None and now != then:
            flag = f"--{name.replace('_', '-')}"
            raise MirrorworldError(
                f"{path} was played against {str(then)[:200]}: give {flag} {str(then)[:200]} to resume it there"
            )
    for name in RUN_OPTIONS:
        now, then = getattr(args, name, None), getattr(restored, name, None)
        if name in given and now != then and not _same_world(name, now, then):
            raise MirrorworldError(
                f"--resume continues {path} as it was started: --{name.replace('_', '-')} was {then!r}, not {now!r}"
            )
        if not (name == "world" and name in given):
            setattr(args, name, then)
    return meta


def _same_world(name: str, now: Any, then: Any) -> bool:
    """A resumed run of an artifact (``helpdesk@1.2``) is handed on to its child as the plain world name."""
    return name == "world" and isinstance(then, str) and "@" in then and then.partition("@")[0] == now


class _Refused(Exception):
    pass


class _StrictParser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        raise _Refused(message)

    def exit(self, status: int = 0, message: str | None = None) -> Any:
        raise _Refused(message or "refused")


def _parse_stored(parser: argparse.ArgumentParser, line: list[str], path: str) -> argparse.Namespace:
    """``line`` parsed by a copy of ``parser`` that raises instead of exiting."""
    strict = _StrictParser(add_help=False)
    for action in parser._actions:
        if action.option_strings and action.dest in RUN_OPTIONS:
            strict._add_action(action)
    try:
        return strict.parse_args(line)
    except _Refused as err:
        raise RunFileError(f"{path}: its stored options do not parse: {str(err)[:200]}") from None


def agent_factory(args: argparse.Namespace) -> Callable[[], Agent]:
    """A function that builds a new agent as ``args`` names it (one per worker thread)."""
    from mirrorworld.agents import make_agent

    options = {
        "seed": args.seed,
        "replay": args.replay,
        "policy": getattr(args, "checkpoint", None),
        "base_url": args.base_url,
        "model": args.model,
        "api_key_env": args.api_key_env,
        "temperature": args.temperature,
        "top_p": args.top_p,
        "max_tokens": args.max_tokens,
        "timeout": args.timeout,
        "retries": args.retries,
    }
    if args.agent != "trained" and getattr(args, "checkpoint", None) is not None:
        raise MirrorworldError(f"--checkpoint is an option of the trained agent, not of {args.agent}")
    if args.agent != "openai":
        for flag, value, default in (
            ("--model", args.model, None),
            ("--base-url", args.base_url, None),
            ("--top-p", args.top_p, None),
            ("--max-tokens", args.max_tokens, None),
        ):
            if value != default:
                raise MirrorworldError(f"{flag} is an option of the openai agent, not of {args.agent}")
    return lambda: make_agent(args.agent, **options)


def run_meta(
    args: argparse.Namespace,
    world: Any,
    agent: Agent,
    *,
    requested_world: str,
    artifact: str | None,
    judge: Any,
    faults: Any,
    families: list[str] | None,
) -> dict[str, Any]:
    """What a run file records of a run before its first episode: the world's build, the agent's
    description (model, endpoint, sampling: never a secret), the versions, the options."""
    import mirrorworld
    from mirrorworld.agents.openai import sdk_version

    versions = {"mirrorworld": mirrorworld.__version__, "python": platform.python_version()}
    if args.agent == "openai" or judge is not None:
        versions["openai"] = sdk_version() or "not installed"
    options = stored_options(args)
    options["world"] = requested_world
    return {
        "world": world.id,
        "world_hash": world.content_hash,
        "world_parts": world.score_parts(),
        "artifact": artifact,
        "agent": agent.name,
        "agent_config": agent.describe(),
        "model": getattr(agent, "model", None),
        "split": args.split,
        "episodes": args.episodes,
        "trials": args.trials,
        "families": families,
        "max_steps": args.max_steps,
        "scale": args.scale,
        "start": args.start,
        "judge": {"base_url": args.judge_base_url, "model": args.judge_model} if judge is not None else None,
        "faults": faults.to_dict() if faults is not None else None,
        "concurrency": args.concurrency,
        "versions": versions,
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "options": options,
    }


def exit_status(summary: dict[str, Any]) -> int:
    """0, or :data:`EXIT_ERRORED` when ``--max-errors`` stopped the run or most of its episodes errored."""
    if summary.get("stopped"):
        return EXIT_ERRORED
    errors, graded = int(summary.get("errors", 0)), int(summary.get("graded", 0))
    return EXIT_ERRORED if errors > graded else 0
