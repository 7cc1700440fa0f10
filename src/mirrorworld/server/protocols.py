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

* **body** — a body must be complete ``body_timeout_s`` after its head
  (``408`` if no answer has begun, and the connection is closed).
* **pipelining** — with httptools, a read is parsed 4 KiB at a time and parsing
  stops while a request is queued behind the one in progress (the rest of the
  read waits, reading paused), so a client that pipelines without reading holds
  a bounded amount; once a connection is closed, nothing more is written to it.

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

It also lets an app answer a connection's messages **inline**: the scope of
every accepted WebSocket carries the extension :data:`INLINE_MESSAGES`, a
function the app may call once, right after accepting, with a handler
``(message) -> reply``. From then on each data message (the text as ``str``,
a binary message as ``bytes``) is given to the handler as soon as its last
frame is parsed, in the read callback, and the reply (UTF-8 JSON bytes) goes
out as a text message at once; the app receives only the
``websocket.disconnect``. Through ASGI a message is an event put on a queue,
a task woken to take it, reading paused and resumed around it (two
``epoll_ctl`` calls) and the reply's text decoded and encoded again: about
half of what the server spends on a read step, and the echo endpoint of
``mirrorworld bench --server`` pays it too, since it answers through ASGI.
Inline, replies keep the messages' order (one handler call at a time, per
connection), a read that carries many messages is answered
:data:`INLINE_BATCH` messages per turn of the event loop with reading held
meanwhile (other connections are served between batches), and backpressure
holds as before (reading stops while the peer leaves replies unread).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import http
from collections.abc import Callable
from typing import Any

from mirrorworld.server.config import ServerConfig
from mirrorworld.server.wire import access, dumps, inert, log

__all__ = ["INLINE_MESSAGES", "MAX_LINE_BYTES", "InlineHandler", "http_protocol", "ws_protocol"]

InlineHandler = Callable[[str | bytes], bytes]
"""Answers one WebSocket data message inline: the reply, UTF-8 JSON sent as a text message."""

INLINE_MESSAGES = "mirrorworld.inline_messages"
"""The scope extension of an accepted WebSocket: call it with an :data:`InlineHandler` (see the module docstring).

It returns whether the handler took over (not when messages already wait for
the app, which then keeps receiving them through ASGI).
"""

INLINE_BATCH = 32
"""Most messages of one connection answered inline in one turn of the event loop."""

MAX_LINE_BYTES = 16 * 1024
"""The longest request line or header line (name and value) a head may hold."""


PIPELINE_SLICE = 4096
"""With httptools, the bytes of one read are parsed this many at a time, so that parsing stops soon after a
request is queued behind the one in progress (what one slice can hold is the most a connection queues)."""

WS_WRITE_BUFFER = 256 * 1024
"""Pending output (pongs and close frames the peer is not reading) past which a WebSocket stops being read."""


class _GuardedTransport:
    """A transport that drops what is written once it is closing, instead of raising (uvloop) or warning."""

    __slots__ = ("_transport",)

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._transport.is_closing():
            self._transport.write(data)

    def writelines(self, lines: Any) -> None:
        if not self._transport.is_closing():
            self._transport.writelines(lines)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


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
    flow: Any
    _head_timer: asyncio.TimerHandle | None = None
    _body_timer: asyncio.TimerHandle | None = None
    body_timeout_s = 30.0

    def _arm(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_timed_out)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.flow is not None and self.flow.read_paused and not self.transport.is_closing():
            self._arm()  # the server holds the head back (pipelining): not the client
            return
        self._refuse(408, "request_timeout", f"the request head did not arrive within {self.head_timeout_s:g} s")

    def _arm_body(self) -> None:
        if self._body_timer is None:
            self._body_timer = self.loop.call_later(self.body_timeout_s, self._body_timed_out)

    def _disarm_body(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _body_timed_out(self) -> None:
        self._body_timer = None
        if self.transport.is_closing():
            return
        if self.flow is not None and self.flow.read_paused:
            self._arm_body()  # the server holds the body back (pipelining, or the app reads slowly): not the client
            return
        self._refuse(
            408, "request_timeout", f"the request body did not arrive within {self.body_timeout_s:g} s", body=True
        )

    def _cycles(self) -> list[Any]:
        """Every request/response cycle of this connection that may still run (subclasses add queued ones)."""
        return [self.cycle] if self.cycle is not None else []

    def _abandon(self) -> None:
        """Mark every cycle disconnected, so that no answer is written to the closed transport."""
        for cycle in self._cycles():
            cycle.disconnected = True
            cycle.message_event.set()

    def _open(self, transport: asyncio.Transport, connection_made: Any) -> None:
        connection_made(_GuardedTransport(transport))
        self._arm()

    def _refuse(self, status: int, code: str, message: str, body: bool = False) -> None:
        """Answer ``status`` with a JSON error (unless an answer is being written) and close the connection.

        ``body``: the refusal is of the body of the request in progress (no answer to it may have begun).
        """
        self._disarm()
        self._disarm_body()
        if self.transport.is_closing():
            return
        if self.cycle is None or self.cycle.response_complete or (body and not self.cycle.response_started):
            payload = dumps({"error": {"code": code, "message": message}})
            head = (
                f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\n"
                f"content-type: application/json\r\ncontent-length: {len(payload)}\r\nconnection: close\r\n\r\n"
            )
            self.transport.write(head.encode("ascii") + payload)
        self._abandon()
        self.transport.close()
        if self.log_refusals:
            peer = inert(self.client[0]) if self.client else "unknown"
            access.info("%s - - %d %s", peer, status, code)


def _httptools_protocol(config: ServerConfig) -> type[asyncio.Protocol]:
    import httptools
    from uvicorn.protocols.http.flow_control import FlowControl
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class HeldFlow(FlowControl):
        """uvicorn's flow control, except that reading stays paused while the protocol holds a backlog."""

        def __init__(self, transport: asyncio.Transport, owner: BoundedHttpToolsProtocol) -> None:
            super().__init__(transport)
            self._owner = owner

        def resume_reading(self) -> None:
            if not self._owner._backlog:
                super().resume_reading()

    line_limit = min(MAX_LINE_BYTES, config.max_head_bytes)

    class _Refused(Exception):
        """Raised from a parser callback to stop parsing a head that is refused (``_refusal`` says why)."""

    class BoundedHttpToolsProtocol(_HeadGuard, HttpToolsProtocol):
        """uvicorn's httptools protocol with the bounds of the module docstring."""

        max_head_bytes = config.max_head_bytes
        head_timeout_s = config.head_timeout_s
        body_timeout_s = config.body_timeout_s
        log_refusals = config.access_log

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._head_open = False  # between a head's first byte and its end
            self._head_bytes = 0  # bytes received while it is open (after the read it began in)
            self._began = False  # a head began in the slice being parsed
            self._parsed = 0  # bytes of the head's lines parsed so far
            self._refusal: tuple[int, str, str] | None = None
            self._backlog = b""  # bytes received but not parsed while a request is queued
            self._active: Any = None  # the cycle whose app task runs (self.cycle is the last one parsed)

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            self._open(transport, super().connection_made)
            self.flow = HeldFlow(self.transport, self)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            self._disarm_body()
            self._abandon()
            self._backlog = b""
            super().connection_lost(exc)
            self.pipeline.clear()

        def _cycles(self) -> list[Any]:
            cycles = [cycle for cycle, _ in self.pipeline]
            cycles += [c for c in (self._active, self.cycle) if c is not None]
            return cycles

        def _start_asgi_task(self, cycle: Any, app: Any) -> None:
            self._active = cycle
            super()._start_asgi_task(cycle, app)

        def data_received(self, data: bytes) -> None:
            if self._backlog:
                self._backlog += data
                self.flow.pause_reading()
                return
            self._feed(data)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self._backlog and not self.transport.is_closing():
                data, self._backlog = self._backlog, b""
                self._feed(data)
                if not self._backlog and not self.pipeline:
                    self.flow.resume_reading()

        def _feed(self, data: bytes) -> None:
            """Parse ``data`` a slice at a time; what is left when a request is queued waits in ``_backlog``."""
            self._unset_keepalive_if_required()
            view = memoryview(data)
            for start in range(0, len(data), PIPELINE_SLICE):
                if self.pipeline:
                    self._backlog = bytes(view[start:])
                    self.flow.pause_reading()
                    return
                if not self._feed_slice(view[start : start + PIPELINE_SLICE]) or self.parser is None:
                    return

        def _feed_slice(self, data: memoryview) -> bool:
            """Parse one slice: False if the connection was upgraded or refused."""
            self._began = False
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserUpgrade:
                if self._should_upgrade():
                    self.handle_websocket_upgrade()
                else:
                    self._unsupported_upgrade_warning()
                return False
            except httptools.HttpParserError:
                self._refuse(*(self._refusal or (400, "invalid_request", "the request is not valid HTTP/1.1")))
                return False
            if self._head_open:
                if not self._began:
                    self._head_bytes += len(data)
                if self._head_bytes > self.max_head_bytes:
                    self._refuse(431, "header_too_large", f"the request head is over {self.max_head_bytes} bytes")
                    return False
                self._arm()
            return not self.transport.is_closing()

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
            self._arm_body()

        def on_message_complete(self) -> None:
            self._disarm_body()
            super().on_message_complete()

    return BoundedHttpToolsProtocol


def _h11_protocol(config: ServerConfig) -> type[asyncio.Protocol]:
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class DeadlineH11Protocol(_HeadGuard, H11Protocol):
        """uvicorn's h11 protocol (h11 bounds the head) with the head deadline of the module docstring."""

        max_head_bytes = config.max_head_bytes
        head_timeout_s = config.head_timeout_s
        body_timeout_s = config.body_timeout_s
        log_refusals = config.access_log

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            self._open(transport, super().connection_made)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            self._disarm_body()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            closing = self.transport.is_closing()
            if self.conn.their_state is h11.IDLE and not closing:
                self._arm()  # a head has begun and is not complete
            else:
                self._disarm()
            if self.conn.their_state is h11.SEND_BODY and not closing:
                self._arm_body()
            else:
                self._disarm_body()

    return DeadlineH11Protocol


def http_protocol(config: ServerConfig) -> type[asyncio.Protocol]:
    """The HTTP protocol class to give uvicorn (``http=``) for a server with ``config``: httptools if installed."""
    try:
        return _httptools_protocol(config)
    except ImportError:
        return _h11_protocol(config)


def _suppress_errors() -> contextlib.AbstractContextManager[None]:
    return contextlib.suppress(AttributeError, NotImplementedError, ValueError)


def ws_protocol(config: ServerConfig) -> type[asyncio.Protocol] | str:
    """The WebSocket protocol to give uvicorn (``ws=``): see the module docstring (``"auto"`` without websockets)."""
    try:
        from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
    except ImportError:
        return "auto"

    from websockets.exceptions import InvalidState

    class Utf8CheckedWebSocketsProtocol(WebSocketsSansIOProtocol):
        """uvicorn's websockets protocol; a text message that is not UTF-8 closes the connection with 1007.

        A peer that does not read what it is sent (pongs to its pings, say) is not read either while
        more than ``WS_WRITE_BUFFER`` bytes wait to be sent to it. An app may answer the messages
        inline (:data:`INLINE_MESSAGES`, see the module docstring).
        """

        _backpressured = False
        _inline: InlineHandler | None = None
        _pending: collections.deque[str | bytes] | None = None
        """Messages that wait for the next inline batch (inline mode only)."""
        _turn = 0
        """Messages answered inline in this turn of the event loop."""
        _drain: asyncio.Handle | None = None
        _held = False
        """Reading is stopped until the pending messages are answered."""

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            with _suppress_errors():
                transport.set_write_buffer_limits(high=WS_WRITE_BUFFER)

        def connection_lost(self, exc: Exception | None) -> None:
            self._inline = None
            if self._drain is not None:
                self._drain.cancel()
                self._drain = None
            super().connection_lost(exc)

        def pause_writing(self) -> None:
            super().pause_writing()
            if not self._backpressured and not self.transport.is_closing():
                self._backpressured = True
                self.transport.pause_reading()

        def resume_writing(self) -> None:
            super().resume_writing()
            if self._backpressured:
                self._backpressured = False
                if not self.read_paused and not self._held and not self.transport.is_closing():
                    self.transport.resume_reading()

        async def receive(self) -> Any:
            if self._backpressured and self.read_paused and self.queue.empty():
                self.read_paused = False  # reading resumes when the peer has read its backlog (resume_writing)
            return await super().receive()

        def handle_connect(self, event: Any) -> None:
            super().handle_connect(event)
            scope = self.__dict__.get("scope")
            if scope is not None:  # the handshake goes on: the app decides whether to accept
                scope["extensions"][INLINE_MESSAGES] = self._answer_inline

        def _answer_inline(self, handler: InlineHandler) -> bool:
            if not self.queue.empty() or self.close_sent:
                return False
            self._inline = handler
            self._pending = collections.deque()
            return True

        def data_received(self, data: bytes) -> None:
            self._turn = 0
            super().data_received(data)

        def send_receive_event_to_app(self) -> None:
            text = self.curr_msg_data_type == "text"
            if (text or self._inline is not None) and not self.close_sent:
                data = self.frames[0] if len(self.frames) == 1 else b"".join(self.frames)
                self.frames = [data]
                message: str | bytes = data
                if text:
                    try:
                        message = str(data, "utf-8")
                    except UnicodeDecodeError:
                        self.frames = []
                        self.conn.send_close(1007, "the message is not UTF-8")
                        self.handle_parser_exception()
                        return
                if self._inline is not None:
                    self.frames = []
                    self._take(message)
                    return
            super().send_receive_event_to_app()

        # -- inline answers ---------------------------------------------------------

        def _take(self, message: str | bytes) -> None:
            pending = self._pending
            assert pending is not None
            if pending or self._turn >= INLINE_BATCH:  # answered in a later turn, in order
                pending.append(message)
                if self._drain is None:
                    self._hold()
                    self._drain = self.loop.call_soon(self._answer_pending)
                return
            self._turn += 1
            self._answer(message)

        def _answer_pending(self) -> None:
            self._drain = None
            pending = self._pending
            if pending is None:
                return
            self._turn = 0
            while pending and self._turn < INLINE_BATCH and self._inline is not None:
                self._turn += 1
                self._answer(pending.popleft())
            if pending and self._inline is not None:
                self._drain = self.loop.call_soon(self._answer_pending)
            else:
                pending.clear()
                self._release()

        def _answer(self, message: str | bytes) -> None:
            handler = self._inline
            if handler is None or self.close_sent or self.transport.is_closing():
                return
            try:
                reply = handler(message)
            except Exception:  # a handler answers every message itself: this is a server bug
                log.exception("internal error answering a WebSocket message")
                self._inline = None
                self.conn.fail(1011, "internal error")
                self.transport.write(b"".join(self.conn.data_to_send()))
                self.close_sent = True
                self.transport.close()
                return
            try:
                self.conn.send_text(reply)
            except InvalidState:  # the connection is closing: no one reads the reply
                return
            self.transport.write(b"".join(self.conn.data_to_send()))

        def _hold(self) -> None:
            if not self._held:
                self._held = True
                if not self.read_paused and not self._backpressured and not self.transport.is_closing():
                    self.transport.pause_reading()

        def _release(self) -> None:
            if self._held:
                self._held = False
                if not self.read_paused and not self._backpressured and not self.transport.is_closing():
                    self.transport.resume_reading()

    return Utf8CheckedWebSocketsProtocol
