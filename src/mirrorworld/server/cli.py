"""The ``serve`` and ``mcp`` subcommands and the ``bench --server`` entry, for ``mirrorworld.cli``.

Wire them in with::

    from mirrorworld.server import cli as server_cli

    server_cli.register(sub)                  # adds `serve` and `mcp`
    COMMANDS.update(server_cli.COMMANDS)      # their handlers
    # in `bench`: an argument `--server`, and when it is given:
    return server_cli.bench_server(json_output=args.json, quick=args.quick)

Handlers take the parsed ``argparse.Namespace`` and return an exit code; a user
error raises :class:`~mirrorworld.errors.MirrorworldError` (one line on stderr).
The server's dependencies are imported only when a command runs, so
``mirrorworld --help`` works without the ``server`` extra.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mirrorworld.errors import MirrorworldError

__all__ = ["COMMANDS", "bench_server", "cmd_mcp", "cmd_serve", "register"]


def register(subparsers: Any) -> None:
    """Add ``serve`` and ``mcp`` to an ``argparse`` subparsers object."""
    s = subparsers.add_parser("serve", help="serve isolated sessions over HTTP, WebSocket, MCP and OpenEnv")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (off loopback a --token is required)")
    s.add_argument("--port", type=int, default=8765)
    s.add_argument("--token", default=None, help="bearer token clients must send (default: $MIRRORWORLD_TOKEN)")
    s.add_argument("--world", action="append", default=None, help="a world to serve (repeatable; default: all)")
    s.add_argument("--max-sessions", type=int, default=4096, help="live sessions in all")
    s.add_argument("--max-sessions-per-client", type=int, default=None, help="live sessions per client address")
    s.add_argument("--max-body-bytes", type=int, default=1_048_576, help="largest request body or WS message")
    s.add_argument("--step-rate", type=float, default=None, help="tool calls per second per client (default: no limit)")
    s.add_argument("--idle-timeout", type=float, default=900.0, help="seconds before an unused session is closed")
    s.add_argument("--max-steps-limit", type=int, default=1000, help="the largest max_steps a session may ask for")
    s.add_argument("--no-access-log", action="store_true", help="do not log one line per request")
    s.set_defaults(func=cmd_serve)

    m = subparsers.add_parser("mcp", help="serve one session's tools over MCP on stdin/stdout")
    from_mcp_add_arguments(m)
    m.set_defaults(func=cmd_mcp)


def from_mcp_add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``mirrorworld mcp`` (kept here so ``--help`` needs no MCP SDK)."""
    p.add_argument("--world", default="helpdesk")
    p.add_argument("--task-id", default=None, help="family/seed")
    p.add_argument("--family", default=None, help="a task family (with --seed)")
    p.add_argument("--seed", type=int, default=None, help="with --family: the task seed; alone: index in --split")
    p.add_argument("--split", choices=("train", "test"), default="test")
    p.add_argument("--max-steps", type=int, default=100)


def _need(module: str, extra: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise MirrorworldError(f"this command needs {module}: pip install 'mirrorworld[{extra}]'")


def cmd_serve(args: argparse.Namespace) -> int:
    """``mirrorworld serve``: serve until SIGINT/SIGTERM, then shut down gracefully."""
    for module in ("fastapi", "uvicorn", "orjson"):
        _need(module, "server")
    from mirrorworld.core.registry import default
    from mirrorworld.server.config import ServerConfig
    from mirrorworld.server.run import serve

    worlds = tuple(w.lower() for w in args.world) if args.world else None
    for name in worlds or ():
        if name not in default.names():
            raise MirrorworldError(f"no world named {name!r} (known: {', '.join(default.names())})")
    config = ServerConfig(
        host=args.host,
        port=args.port,
        token=args.token,
        worlds=worlds,
        max_sessions=args.max_sessions,
        max_sessions_per_client=args.max_sessions_per_client,
        max_body_bytes=args.max_body_bytes,
        step_rate=args.step_rate,
        idle_timeout_s=args.idle_timeout,
        max_steps_limit=args.max_steps_limit,
        access_log=not args.no_access_log,
    )
    serve(config)
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    """``mirrorworld mcp``: one session of one task over MCP stdio."""
    _need("mcp", "mcp")
    from mirrorworld.server.mcp import run

    return run(args)


def bench_server(
    *, json_output: bool = False, quick: bool = False, clients: int = 32, seconds: float = 3.0, sessions: int = 1000
) -> int:
    """``mirrorworld bench --server``: print the server benchmark (a table, or JSON)."""
    for module in ("fastapi", "uvicorn", "orjson", "websockets"):
        _need(module, "server")
    from mirrorworld.bench.server import bench_server as run_bench
    from mirrorworld.bench.server import format_server_report

    report = run_bench(clients=clients, seconds=seconds, sessions=sessions, quick=quick)
    if json_output:
        print(json.dumps(report, indent=2))
    else:
        print(format_server_report(report), file=sys.stdout)
    return 0


COMMANDS = {"serve": cmd_serve, "mcp": cmd_mcp}
"""Handlers by subcommand name, to merge into ``mirrorworld.cli.COMMANDS``."""


def main(argv: list[str] | None = None) -> int:
    """``python -m mirrorworld.server.cli serve|mcp ...``: the subcommands without the main CLI."""
    parser = argparse.ArgumentParser(prog="mirrorworld")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except MirrorworldError as err:
        print(f"mirrorworld: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
