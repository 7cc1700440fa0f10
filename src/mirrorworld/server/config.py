"""What a server promises to its operator: where it listens, who may call it, and its limits.

A :class:`ServerConfig` is plain data, checked once by :meth:`ServerConfig.checked`
before a server starts. The rules it enforces:

* **auth** — a server bound to anything but a loopback address requires a
  bearer token (``--token`` or ``MIRRORWORLD_TOKEN``); refusing to start is
  better than serving sessions to the network unauthenticated. A token may be
  set on loopback too. ``/health`` is always open, for load balancers.
* **browsers** — every web page the developer opens can reach a loopback
  server, so requests are admitted by ``Host`` (``allowed_hosts``), ``Origin``
  (``allowed_origins``) and body type before anything else reads them (see
  :mod:`~mirrorworld.server.admission`).
* **limits** — ``max_sessions`` live sessions in all, ``max_sessions_per_client``
  per client (by default a quarter of ``max_sessions`` off loopback, see
  :meth:`ServerConfig.sessions_per_client`), ``max_body_bytes`` per HTTP body
  or WebSocket message, ``max_head_bytes`` per request head, received within
  ``head_timeout_s``, and its body within ``body_timeout_s``; ``max_steps_limit`` on any episode's ``max_steps``.
  A *client* is the peer's IP address: on loopback every local process is
  the same client.
* **step rate** — ``step_rate`` tool calls per second per client (a token
  bucket holding one second's worth), counted over every transport that runs
  a tool: ``POST .../step``, a WebSocket ``step``, OpenEnv's ``/step`` and
  ``tools/call``, and MCP's ``tools/call``. It covers tool calls only: other
  operations (create, reset, fork, state, verdict, close) are not counted;
  what bounds them is the session limits above.
* **idle eviction** — a session untouched for ``idle_timeout_s`` is closed; using
  it afterwards answers ``410 session_expired`` (the server remembers the ids
  of the last ``remember_closed`` sessions it closed, so a late caller learns
  why, instead of a bare ``unknown_session``). A session that an open
  WebSocket connection holds (one it created, or attached to on OpenEnv's
  ``/ws``) never expires while the connection is open; the sessions a
  connection created close with it.
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, replace

from mirrorworld.errors import MirrorworldError

__all__ = ["TOKEN_ENV", "ServerConfig", "is_loopback"]

TOKEN_ENV = "MIRRORWORLD_TOKEN"
"""Environment variable read for the bearer token when none is passed."""

_HOST = re.compile(r"\*|[A-Za-z0-9._-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]|[0-9A-Fa-f:.]{2,45}")
_ORIGIN = re.compile(r"\*|https?://([A-Za-z0-9._-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])(:[0-9]{1,5})?")


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (``127.0.0.0/8``, ``::1``, ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ServerConfig:
    """Listening address, auth and operational limits of a session server."""

    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    """Bearer token every request but ``/health`` must carry (required off loopback)."""
    max_sessions: int = 4096
    """Live sessions the server holds at once, over all clients."""
    max_sessions_per_client: int | None = None
    """Live sessions one client may hold (None: see :meth:`sessions_per_client`)."""
    max_body_bytes: int = 1_048_576
    """Largest HTTP request body or WebSocket message, in bytes."""
    max_head_bytes: int = 65_536
    """Largest HTTP request head (request line and headers), in bytes; one line may take at most 16 KiB of it."""
    head_timeout_s: float = 10.0
    """Seconds a connection has to send a whole request head (from connecting, or from a head's first byte)."""
    body_timeout_s: float = 30.0
    """Seconds a request has to send its whole body once its head is complete (else ``408``, connection closed)."""
    allowed_hosts: tuple[str, ...] | None = None
    """Host names a request may address (``*``: any). None: loopback names only without a token, any with one."""
    allowed_origins: tuple[str, ...] = ()
    """Web origins (``scheme://host[:port]``, or ``*``) whose pages may call the server, besides its own."""
    step_rate: float | None = None
    """Tool calls per second one client may make (None: unlimited); other operations are not counted."""
    idle_timeout_s: float = 900.0
    """Seconds without use after which a session is closed."""
    max_steps_limit: int = 1000
    """The largest ``max_steps`` a session may ask for."""
    remember_closed: int = 100_000
    """How many closed session ids are kept to explain later use."""
    worlds: tuple[str, ...] | None = None
    """World names this server serves (None: every registered world)."""
    access_log: bool = True
    """Log one line per HTTP request and per WebSocket connection."""
    graceful_timeout_s: float = 5.0
    """Seconds in-flight requests get to finish on shutdown."""

    def sessions_per_client(self) -> int:
        """The live sessions one client may hold.

        ``max_sessions_per_client`` when set. Otherwise a quarter of
        ``max_sessions`` on a server bound off loopback, so that no one address
        can take the whole server, and all of them on loopback, where every
        local process is the same client (what keeps web pages out there is
        the admission of :mod:`~mirrorworld.server.admission`).
        """
        if self.max_sessions_per_client is not None:
            return self.max_sessions_per_client
        return self.max_sessions if is_loopback(self.host) else max(1, self.max_sessions // 4)

    def checked(self) -> ServerConfig:
        """This config with the token filled from the environment, or a ``MirrorworldError``."""
        cfg = self if self.token else replace(self, token=os.environ.get(TOKEN_ENV) or None)
        if not is_loopback(cfg.host) and not cfg.token:
            raise MirrorworldError(
                f"serving on {cfg.host} (not loopback) needs a bearer token: pass --token or set {TOKEN_ENV}"
            )
        if not 0 <= cfg.port <= 65535:
            raise MirrorworldError(f"port must be in 0..65535, not {cfg.port}")
        for name in ("max_sessions", "max_body_bytes", "max_steps_limit"):
            if getattr(cfg, name) < 1:
                raise MirrorworldError(f"{name} must be at least 1")
        if cfg.max_sessions_per_client is not None and cfg.max_sessions_per_client < 1:
            raise MirrorworldError("max_sessions_per_client must be at least 1")
        if cfg.step_rate is not None and cfg.step_rate <= 0:
            raise MirrorworldError("step_rate must be positive")
        if cfg.idle_timeout_s <= 0:
            raise MirrorworldError("idle_timeout_s must be positive")
        if cfg.max_head_bytes < 1024:
            raise MirrorworldError("max_head_bytes must be at least 1024")
        if not cfg.head_timeout_s > 0:
            raise MirrorworldError("head_timeout_s must be positive")
        if not cfg.body_timeout_s > 0:
            raise MirrorworldError("body_timeout_s must be positive")
        for host in cfg.allowed_hosts or ():
            if not isinstance(host, str) or not _HOST.fullmatch(host):
                raise MirrorworldError(f"allowed host {str(host)[:80]!r} is not a host name (or *)")
        for origin in cfg.allowed_origins:
            if not isinstance(origin, str) or not _ORIGIN.fullmatch(origin):
                raise MirrorworldError(f"allowed origin {str(origin)[:80]!r} is not scheme://host[:port] (or *)")
        if cfg.token is not None and (len(cfg.token) < 8 or not cfg.token.isprintable() or " " in cfg.token):
            raise MirrorworldError("the token must be at least 8 printable characters without spaces")
        return cfg
