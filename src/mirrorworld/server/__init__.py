"""Serving mirror worlds to remote agents: sessions over HTTP, WebSocket, MCP and OpenEnv.

Install with ``pip install 'mirrorworld[server]'`` (and ``[mcp]`` for MCP), then
``mirrorworld serve``. The pieces:

* :mod:`~mirrorworld.server.config` — :class:`ServerConfig`: address, bearer
  token, limits, idle timeout;
* :mod:`~mirrorworld.server.sessions` — :class:`SessionManager`: the sessions,
  no network;
* :mod:`~mirrorworld.server.app` — :func:`create_app`: the ASGI app, its routes
  and its WebSocket protocol;
* :mod:`~mirrorworld.server.openenv` — the OpenEnv protocol;
* :mod:`~mirrorworld.server.mcp` — a session's tools over MCP;
* :mod:`~mirrorworld.server.run` — :func:`serve` and :class:`BackgroundServer`.

The client side is :mod:`mirrorworld.client` and
:class:`mirrorworld.envs.remote.RemoteMirrorEnv`.
"""

from mirrorworld.server.app import create_app
from mirrorworld.server.config import ServerConfig
from mirrorworld.server.run import BackgroundServer, serve
from mirrorworld.server.sessions import ApiError, SessionManager

__all__ = ["ApiError", "BackgroundServer", "ServerConfig", "SessionManager", "create_app", "serve"]
