"""The HTTP and WebSocket protocols uvicorn serves the app with: bounded request heads, clean refusals.

uvicorn reads requests with httptools when it is installed (h11 otherwise).
httptools keeps a request head in memory however long it grows — uvicorn's
``h11_max_incomplete_event_size`` bounds h11 only — and uvicorn times out no
connection that is still sending its head. So a few connections sending
40 MB headers can hold hundreds of megabytes of the server for as long as they
like, and a client trickling its head a byte at a time holds a connection for
ever. :func:`http_protocol` is the protocol that bounds both, whichever parser
runs:

* **size** — with httptools, the bytes a connection sends while a request head
  is incomplete are counted as they arrive, and the head's lines as they are
  parsed; past ``max_head_bytes`` the request is answered ``431`` and the
  connection closed, so a head holds at most that much memory plus one read
  from the socket. One line may take at most 16 KiB of it (``414`` for the
  request line, ``431`` for a header). With h11, h11's own bound is set to
  ``max_head_bytes`` (uvicorn answers ``400``).
* **time** — a head must be complete ``head_timeout_s`` after its first byte
  arrives, and a new connection must send one within that time of
  connecting; otherwise the answer is ``408`` and the connection is closed.
  Between requests, uvicorn's keep-alive timeout applies as before.

Refusals are JSON errors like the app's (``{"error": {code, message}}``), with
one access-log line each and nothing else; with httptools a malformed head is
a ``400`` the same way, without uvicorn's warning. A refusal cannot interleave
with an answer still being written (a pipelined request): then the connection
is just closed.

:func:`ws_protocol` is uvicorn's WebSocket protocol on ``websockets``
(sans-I/O), except that a text message that is not UTF-8 closes the
connection with ``1007``, as RFC 6455 asks, and logs nothing: uvicorn logs it
with a traceback. (On wsproto, used when ``websockets`` is missing, wsproto
refuses such a message itself.)
"""

from __future__ import annotations

import asyncio
import http
from typing import Any

from mirrorworld.server.config import ServerConfig
from mirrorworld.server.wire import access, dumps, inert

__all__ = ["MAX_LINE_BYTES", "http_protocol", "ws_protocol"]

MAX_LINE_BYTES = 16 * 1024
"""The longest request line or header line (name and value) a head may hold."""


class _HeadGuard:
    """What both parsers' protocols share: the head deadline and the refusal (mixed into a uvicorn protocol)."""

    max_head_bytes = 65_536
    head_timeout_s = 10.0
    log_refusals = True

    # set by the uvicorn protocol this is mixed into
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    client: tuple[str, int] | None
    cycle: Any
    _head_timer: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_timed_out)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        self._refuse(408, "request_timeout", f"the request head did not arrive within {self.head_timeout_s:g} s")

    def _refuse(self, status: int, code: str, message: str) -> None:
        """Answer ``status`` with a JSON error (unless an answer is being written) and close the connection."""
        self._disarm()
        if self.transport.is_closing():
            return
        if self.cycle is None or self.cycle.response_complete:
            body = dumps({"error": {"code": code, "message": message}})
            head = (
                f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\n"
                f"content-type: application/json\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n"
            )
            self.transport.write(head.encode("ascii") + body)
        self.transport.close()
        if self.log_refusals:
            peer = inert(self.client[0]) if self.client else "unknown"
            access.info("%s - - %d %s", peer, status, code)


def _httptools_protocol(config: ServerConfig) -> type[asyncio.Protocol]:
    import httptools
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    line_limit = min(MAX_LINE_BYTES, config.max_head_bytes)

    class _Refused(Exception):
        """Raised from a parser callback to stop parsing a head that is refused (``_refusal`` says why)."""

    class BoundedHttpToolsProtocol(_HeadGuard, HttpToolsProtocol):
        """uvicorn's httptools protocol with the bounds of the module docstring."""

        max_head_bytes = config.max_head_bytes
        head_timeout_s = config.head_timeout_s
        log_refusals = config.access_log

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._head_open = False  # between a head's first byte and its end
            self._head_bytes = 0  # bytes received while it is open (after the read it began in)
            self._began = False  # a head began in the read being parsed
            self._parsed = 0  # bytes of the head's lines parsed so far
            self._refusal: tuple[int, str, str] | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            self._unset_keepalive_if_required()
            self._began = False
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserUpgrade:
                if self._should_upgrade():
                    self.handle_websocket_upgrade()
                else:
                    self._unsupported_upgrade_warning()
                return
            except httptools.HttpParserError:
                self._refuse(*(self._refusal or (400, "invalid_request", "the request is not valid HTTP/1.1")))
                return
            if self._head_open:
                if not self._began:
                    self._head_bytes += len(data)
                if self._head_bytes > self.max_head_bytes:
                    self._refuse(431, "header_too_large", f"the request head is over {self.max_head_bytes} bytes")
                    return
                self._arm()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._head_open = True
            self._began = True
            self._head_bytes = 0
            self._parsed = 0

        def on_url(self, url: bytes) -> None:
            super().on_url(url)
            self._parsed += len(url)
            if len(self.url) > line_limit:
                self._refusal = (414, "uri_too_long", f"the request line is over {line_limit} bytes")
                raise _Refused

        def on_header(self, name: bytes, value: bytes) -> None:
            if len(name) + len(value) > line_limit:
                self._refusal = (431, "header_too_large", f"a header line is over {line_limit} bytes")
                raise _Refused
            self._parsed += len(name) + len(value) + 4
            if self._parsed > self.max_head_bytes:
                self._refusal = (431, "header_too_large", f"the request head is over {self.max_head_bytes} bytes")
                raise _Refused
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            self._head_open = False
            self._disarm()
            super().on_headers_complete()

    return BoundedHttpToolsProtocol


def _h11_protocol(config: ServerConfig) -> type[asyncio.Protocol]:
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class DeadlineH11Protocol(_HeadGuard, H11Protocol):
        """uvicorn's h11 protocol (h11 bounds the head) with the head deadline of the module docstring."""

        max_head_bytes = config.max_head_bytes
        head_timeout_s = config.head_timeout_s
        log_refusals = config.access_log

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self._arm()  # a head has begun and is not complete
            else:
                self._disarm()

    return DeadlineH11Protocol


def http_protocol(config: ServerConfig) -> type[asyncio.Protocol]:
    """The HTTP protocol class to give uvicorn (``http=``) for a server with ``config``: httptools if installed."""
    try:
        return _httptools_protocol(config)
    except ImportError:
        return _h11_protocol(config)


def ws_protocol(config: ServerConfig) -> type[asyncio.Protocol] | str:
    """The WebSocket protocol to give uvicorn (``ws=``): see the module docstring (``"auto"`` without websockets)."""
    try:
        from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
    except ImportError:
        return "auto"

    class Utf8CheckedWebSocketsProtocol(WebSocketsSansIOProtocol):
        """uvicorn's websockets protocol; a text message that is not UTF-8 closes the connection with 1007."""

        def send_receive_event_to_app(self) -> None:
            if self.curr_msg_data_type == "text" and not self.close_sent:
                data = self.frames[0] if len(self.frames) == 1 else b"".join(self.frames)
                self.frames = [data]
                try:
                    str(data, "utf-8")
                except UnicodeDecodeError:
                    self.frames = []
                    self.conn.send_close(1007, "the message is not UTF-8")
                    self.handle_parser_exception()
                    return
            super().send_receive_event_to_app()

    return Utf8CheckedWebSocketsProtocol
