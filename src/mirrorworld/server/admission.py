"""Which requests reach the routes at all: the host they name, the page that sent them, the type of their body.

An unauthenticated server listens on loopback, and so everything on the
developer's machine can reach it — every web page their browser shows
included. A page cannot read a cross-site answer, but it can *send*: a form or
a ``fetch`` with a ``text/plain`` body creates sessions or acts on ids it
knows, and a page behind a DNS name that the attacker re-points at
``127.0.0.1`` (DNS rebinding) is same-origin with the server and reads every
answer. :class:`Admission` refuses what only a browser sends, before anything
reads the body; every other client (httpx, requests, curl with a JSON type,
``websockets``, the OpenEnv and MCP clients) passes unchanged:

* **Host** — a request must name the server by a loopback name
  (``localhost``, ``127.0.0.1``, ``[::1]``, any port), by the literal address
  its connection arrived at, or by one of ``allowed_hosts``; else ``421
  misdirected_request``. A rebinding page names the attacker's host; none of
  these names can be re-pointed. With a bearer token and no
  ``allowed_hosts`` any host is accepted: a page does not know the token, and
  a proxy in front of a networked server names it as it likes.
* **Origin** — browsers name the page that sent a request in ``Origin`` (on
  every WebSocket handshake and every request but a plain ``GET``); other
  clients send none. A request whose ``Origin`` is neither the server's own
  (its ``host:port`` is the ``Host`` the request names) nor one of
  ``allowed_origins`` is refused: ``403 cross_origin``, or a ``1008`` close
  before a WebSocket is accepted.
* **Content-Type** — a request body declared as anything but JSON
  (``application/json`` or ``application/*+json``) is refused with ``415
  unsupported_media_type``: the types a page may send cross-site without
  asking first (``text/plain``, form encodings) are exactly those. A body that
  declares no type is read as JSON, as it always was (a browser cannot send
  one without also sending its ``Origin``).

These checks are in front of every route, ``/health`` and the MCP endpoint
included (the MCP SDK's own Host and Origin checks still apply behind them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from mirrorworld.server.config import ServerConfig, is_loopback
from mirrorworld.server.sessions import ApiError

__all__ = ["Admission", "Head", "body_refusal", "read_head"]


class Head:
    """The request headers the gate acts on (the first of each; ``repeated`` when Host or Origin came twice)."""

    __slots__ = ("authorization", "chunked", "content_length", "content_type", "host", "origin", "repeated")

    def __init__(self) -> None:
        self.host: bytes | None = None
        self.origin: bytes | None = None
        self.authorization: bytes | None = None
        self.content_type: bytes | None = None
        self.content_length: bytes | None = None
        self.chunked = False
        self.repeated = False


def read_head(headers: Iterable[tuple[bytes, bytes]]) -> Head:
    """The :class:`Head` of an ASGI header list (names are lower case, as ASGI promises)."""
    head = Head()
    for name, value in headers:
        if name == b"host":
            head.repeated |= head.host is not None
            head.host = value
        elif name == b"origin":
            head.repeated |= head.origin is not None
            head.origin = value
        elif name == b"authorization":
            if head.authorization is None:
                head.authorization = value
        elif name == b"content-type":
            if head.content_type is None:
                head.content_type = value
        elif name == b"content-length":
            if head.content_length is None:
                head.content_length = value
        elif name == b"transfer-encoding":
            head.chunked = True
    return head


def _host_name(value: str) -> str | None:
    """The host of a ``Host`` header (``name``, ``name:port``, ``[v6]:port``), lower case; None if malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        rest = value[end + 1 :]
        if rest and not (rest.startswith(":") and rest[1:].isdigit()):
            return None
        return value[1:end]
    name, colon, port = value.partition(":")
    if colon and not port.isdigit():
        return None
    return name.rstrip(".") or None


class Admission:
    """The Host and Origin checks of one server (see the module docstring)."""

    def __init__(self, config: ServerConfig) -> None:
        hosts = config.allowed_hosts
        self.any_host = (hosts is None and config.token is not None) or "*" in (hosts or ())
        self.hosts = frozenset(h.lower().strip("[]").rstrip(".") for h in hosts or ())
        self.any_origin = "*" in config.allowed_origins
        self.origins = frozenset(o.lower().rstrip("/") for o in config.allowed_origins)
        self._named: dict[bytes, bool] = {}  # Host header -> names a loopback or allowed host (a small memo)

    def refusal(self, scope: Mapping[str, Any], head: Head) -> ApiError | None:
        """Why a request (HTTP or WebSocket) with this head may not be served, or None."""
        if head.repeated:
            return ApiError(400, "invalid_request", "a request names one Host and one Origin")
        if head.host is not None and not self.any_host and not self._host_allowed(head.host, scope):
            shown = head.host[:100].decode("latin-1").encode("unicode_escape").decode("ascii")
            return ApiError(
                421,
                "misdirected_request",
                f"this server does not answer to the host {shown!r} (allow it with --allowed-host)",
            )
        if head.origin is not None and not self.any_origin:
            origin = head.origin.decode("latin-1").strip().lower()
            if origin.rstrip("/") not in self.origins and not _same_origin(origin, head.host):
                shown = origin[:100].encode("unicode_escape").decode("ascii")
                return ApiError(
                    403,
                    "cross_origin",
                    f"requests from the web page at {shown!r} are refused (allow it with --allowed-origin)",
                )
        return None

    def _host_allowed(self, raw: bytes, scope: Mapping[str, Any]) -> bool:
        named = self._named.get(raw)
        if named is None:
            name = _host_name(raw.decode("latin-1"))
            named = name is not None and (is_loopback(name) or name in self.hosts)
            if len(self._named) >= 256:
                self._named.clear()
            self._named[raw] = named
        if named:
            return True
        name = _host_name(raw.decode("latin-1"))
        server = scope.get("server")
        return name is not None and server is not None and str(server[0]).lower().strip("[]") == name


def _same_origin(origin: str, host: bytes | None) -> bool:
    """Whether the page at ``origin`` is the server itself (its ``host[:port]`` is the Host the request names)."""
    if host is None:
        return False
    scheme, sep, netloc = origin.partition("://")
    if not sep or scheme not in ("http", "https"):
        return False
    return netloc.rstrip("/") == host.decode("latin-1").strip().lower()


def body_refusal(head: Head, limit: int) -> ApiError | None:
    """Why the body of a request with this head may not be read (its declared length or type), or None."""
    declared = 0
    if head.content_length is not None:
        try:
            declared = int(head.content_length)
        except ValueError:
            return ApiError(400, "invalid_request", "bad Content-Length")
        if declared > limit:
            return ApiError(413, "payload_too_large", f"the body is over {limit} bytes")
    if head.content_type is not None and (declared > 0 or head.chunked) and not _is_json(head.content_type):
        return ApiError(
            415, "unsupported_media_type", "the body must be JSON: send it with Content-Type: application/json"
        )
    return None


def _is_json(content_type: bytes) -> bool:
    kind = content_type.split(b";", 1)[0].strip().lower()
    return kind == b"application/json" or (kind.startswith(b"application/") and kind.endswith(b"+json"))
