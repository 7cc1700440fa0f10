"""The ``serve`` and ``mcp`` subcommands, for ``mirrorworld.cli``.

Wire them in with::

    from mirrorworld.server import cli as server_cli

    server_cli.register(sub)                  # adds `serve` and `mcp`
    COMMANDS.update(server_cli.COMMANDS)      # their handlers

(``mirrorworld bench --server`` is :func:`mirrorworld.bench.cli.bench_server`.)

Handlers take the parsed ``argparse.Namespace`` and return an exit code; a user
error raises :class:`~mirrorworld.errors.MirrorworldError` (one line on stderr).
The server's dependencies are imported only when a command runs, so
``mirrorworld --help`` works without the ``server`` extra.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mirrorworld.core.registry import Registry
from mirrorworld.errors import MirrorworldError
from mirrorworld.options import registry_of, world_option
from mirrorworld.server.options import add_mcp_arguments, need_extra

__all__ = ["COMMANDS", "cmd_mcp", "cmd_serve", "register"]


def register(subparsers: Any, registry: Registry | None = None) -> None:
    """Add ``serve`` and ``mcp`` to an ``argparse`` subparsers object (``--world`` lists ``registry``'s worlds)."""
    s = subparsers.add_parser("serve", help="serve isolated sessions over HTTP, WebSocket, MCP and OpenEnv")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (off loopback a --token is required)")
    s.add_argument("--port", type=int, default=8765)
    s.add_argument("--token", default=None, help="bearer token clients must send (default: $MIRRORWORLD_TOKEN)")
    world_option(s, registry, repeat=True, what="a world to serve (default: all)")
    s.add_argument("--max-sessions", type=int, default=4096, help="live sessions in all")
    s.add_argument(
        "--max-sessions-per-client",
        type=int,
        default=None,
        help="live sessions per client address (default: all of them on loopback, a quarter off it)",
    )
    s.add_argument("--max-body-bytes", type=int, default=1_048_576, help="largest request body or WS message")
    s.add_argument(
        "--step-rate",
        type=float,
        default=None,
        help="tool calls per second per client, on every transport; no other operation counts (default: no limit)",
    )
    s.add_argument(
        "--allowed-host",
        action="append",
        default=None,
        metavar="NAME",
        help="a host name requests may address besides loopback names (repeatable; * for any)",
    )
    s.add_argument(
        "--allowed-origin",
        action="append",
        default=None,
        metavar="ORIGIN",
        help="a web origin (scheme://host[:port]) whose pages may call the server (repeatable; * for any)",
    )
    s.add_argument("--idle-timeout", type=float, default=900.0, help="seconds before an unused session is closed")
    s.add_argument("--max-steps-limit", type=int, default=1000, help="the largest max_steps a session may ask for")
    s.add_argument("--no-access-log", action="store_true", help="do not log one line per request")
    s.set_defaults(func=cmd_serve)

    m = subparsers.add_parser("mcp", help="serve one session's tools over MCP on stdin/stdout")
    add_mcp_arguments(m, registry)
    m.set_defaults(func=cmd_mcp)


def cmd_serve(args: argparse.Namespace) -> int:
    """``mirrorworld serve``: serve until SIGINT/SIGTERM, then shut down gracefully."""
    for module in ("fastapi", "uvicorn", "orjson"):
        need_extra(module, "server")
    from mirrorworld.server.config import ServerConfig
    from mirrorworld.server.run import serve

    registry = registry_of(args)
    worlds = tuple(registry.spec(w).name for w in args.world) if args.world else None
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
        allowed_hosts=tuple(args.allowed_host) if args.allowed_host else None,
        allowed_origins=tuple(args.allowed_origin or ()),
    )
    serve(config, registry)
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    """``mirrorworld mcp``: one session of one task over MCP stdio."""
    need_extra("mcp", "mcp")
    from mirrorworld.server.mcp import run

    return run(args)


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
