"""Serving mirror worlds to remote agents: sessions over HTTP, WebSocket, MCP and OpenEnv.

Install with ``pip install 'mirrorworld[server]'`` (and ``[mcp]`` for MCP), then
``mirrorworld serve``. The pieces:

* :mod:`~mirrorworld.server.config` — :class:`ServerConfig`: address, bearer
  token, limits, idle timeout;
* :mod:`~mirrorworld.server.sessions` — :class:`SessionManager`: the sessions,
  no network;
* :mod:`~mirrorworld.server.app` — :func:`create_app`: the ASGI app, its routes
  and its WebSocket protocol;
* :mod:`~mirrorworld.server.admission` — which requests reach the routes: the
  Host, Origin and body-type checks that keep web pages out;
* :mod:`~mirrorworld.server.openenv` — the OpenEnv protocol;
* :mod:`~mirrorworld.server.mcp` — a session's tools over MCP;
* :mod:`~mirrorworld.server.run` — :func:`serve` and :class:`BackgroundServer`;
* :mod:`~mirrorworld.server.protocols` — the HTTP and WebSocket protocols
  uvicorn runs: request heads bounded in size and time, a clean ``1007``;
* :mod:`~mirrorworld.server.wire` — the JSON bodies and error responses every
  protocol shares;
* :mod:`~mirrorworld.server.options` — what the command-line entry points
  share, importing nothing optional.

The client side is :mod:`mirrorworld.client` and
:class:`mirrorworld.envs.remote.RemoteMirrorEnv`.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ApiError", "BackgroundServer", "ServerConfig", "SessionManager", "create_app", "serve"]

_HOMES = {
    "ApiError": "sessions",
    "BackgroundServer": "run",
    "ServerConfig": "config",
    "SessionManager": "sessions",
    "create_app": "app",
    "serve": "run",
}


def __getattr__(name: str) -> Any:
    # The server's dependencies are an optional extra: import them only when used,
    # so ``mirrorworld --help`` and the other commands work without them.
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"mirrorworld.server.{home}"), name)
