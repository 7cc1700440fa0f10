"""The ASGI application: sessions over HTTP JSON and WebSocket.

:func:`create_app` builds a FastAPI app around a
:class:`~mirrorworld.server.sessions.SessionManager`. Routes (all JSON;
request errors are ``{"error": {code, message}}`` with a 4xx/5xx status):

=========================================  ==========================================
``GET /health``                            liveness and load (open without a token)
``GET /v1/worlds``, ``/v1/worlds/{w}``     served worlds; one world's tools and policy
``POST /v1/sessions``                      create a session (201, ``SessionInfo``)
``GET /v1/sessions/{id}``                  the session and its episode
``POST /v1/sessions/{id}/reset``           a new episode in the same session
``POST /v1/sessions/{id}/step``            one tool call (``StepResponse``)
``GET /v1/sessions/{id}/state``            state hash, step count, done flags
``POST /v1/sessions/{id}/verdict``         end the episode and grade it
``POST /v1/sessions/{id}/fork``            a new session continuing from this state (201)
``DELETE /v1/sessions/{id}``               close
``/v1/sessions/{id}/mcp``                  the session's tools as an MCP server (streamable HTTP)
``WS /v1/ws``                              all of the above, multiplexed, for low latency
``/health /schema /metadata /reset``       the OpenEnv protocol
``/step /state /mcp``, ``WS /ws``          (see :mod:`mirrorworld.server.openenv`)
=========================================  ==========================================

The WebSocket protocol of ``/v1/ws``: each text message is a JSON object
``{"op": OP, "id": ANY, ...}`` with ``OP`` one of ``create`` (fields of
``CreateRequest``), ``reset`` (``session_id`` + ``ResetRequest``), ``step``
(``session_id``, ``tool``, ``args``), ``state``, ``verdict``, ``fork``,
``close``, ``info`` (``session_id``) and ``ping``. Each gets exactly one reply,
in order: ``{"id": ID, "data": {...}}`` — the same body the HTTP route returns —
or ``{"id": ID, "error": {code, message}}``. Sessions created over a
connection belong to it: they never expire while it is open, and they are
closed when it closes.

Operational behaviour lives in :class:`Gate`, a plain ASGI middleware (no
per-request task or copy): the admission of
:mod:`~mirrorworld.server.admission` (Host, Origin, body type), bearer auth,
the body-size limit and one access-log line per HTTP request (and one per
WebSocket connection, with its message count, when it closes). A request whose
client hung up before it was answered is logged with status ``499`` (client
closed request) and is no error of the server's. Every request value a log
line holds is made inert first (:func:`~mirrorworld.server.wire.inert`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request, WebSocket
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.websockets import WebSocketDisconnect

from mirrorworld.core.registry import Registry
from mirrorworld.server.admission import Admission, Head, body_refusal, read_head
from mirrorworld.server.config import ServerConfig
from mirrorworld.server.models import (
    CreateRequest,
    ErrorResponse,
    ResetRequest,
    SessionInfo,
    StateResponse,
    StepRequest,
    StepResponse,
    VerdictResponse,
)
from mirrorworld.server.openenv import add_openenv_routes
from mirrorworld.server.protocols import INLINE_MESSAGES
from mirrorworld.server.sessions import ApiError, LiveSession, SessionManager
from mirrorworld.server.wire import (
    API_VERSION,
    JSON_TYPE,
    ASGIApp,
    Message,
    Receive,
    Scope,
    Send,
    access,
    body_schema,
    client_of,
    dumps,
    error_response,
    guarded,
    inert,
    internal_error,
    json_response,
    log,
    parse_json,
    step_args,
)

__all__ = ["API_VERSION", "Gate", "create_app", "dumps", "json_response", "parse_json"]

_OPEN_PATHS = frozenset({"/health"})
_MCP_PATH = re.compile(r"^/v1/sessions/([^/]+)/mcp/?$")
_STEP_PATH = re.compile(r"^/v1/sessions/([^/]+)/step$")
_PATH_PARAM = re.compile(r"{([^}:]+)(?::[^}]*)?}")
_WS_OWNER = "v1-ws"
"""The mark (in ``LiveSession.attached``) of a session that an open ``/v1/ws`` connection owns."""


_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": text}
    for status, text in (
        (400, "Malformed request"),
        (401, "Missing or wrong bearer token"),
        (403, "Sent by a web page of another origin"),
        (404, "Unknown session, world or task"),
        (410, "Session closed or expired"),
        (413, "Body too large"),
        (415, "Body not declared as JSON"),
        (421, "Host not served (DNS rebinding)"),
        (429, "Rate or session limit"),
        (503, "Session capacity reached"),
    )
}


# -- the gate ------------------------------------------------------------------------


class Gate:
    """Admission, auth, body-size limit and access log around an ASGI app (see the module docstring).

    ``mcp`` handles ``/v1/sessions/{id}/mcp`` when the MCP SDK is installed.
    With a ``manager``, ``POST /v1/sessions/{id}/step`` — the hot path — is
    answered here directly, without the framework's routing and middleware
    stack; it behaves exactly as the documented FastAPI route (same helpers,
    same responses), which serves it when the app is used without the gate.
    """

    def __init__(
        self,
        app: ASGIApp,
        config: ServerConfig,
        mcp: ASGIApp | None = None,
        manager: SessionManager | None = None,
    ) -> None:
        self.app = app
        self.config = config
        self.mcp = mcp
        self.manager = manager
        self.admission = Admission(config)
        self._expected = f"Bearer {config.token}".encode() if config.token else None

    def _authorized(self, scope: Scope, head: Head) -> bool:
        if self._expected is None or scope.get("path") in _OPEN_PATHS:
            return True
        return head.authorization is not None and hmac.compare_digest(head.authorization, self._expected)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "websocket":
            head = read_head(scope.get("headers", ()))
            refusal = self.admission.refusal(scope, head)
            if refusal is None and not self._authorized(scope, head):
                refusal = ApiError(401, "unauthorized", "a valid bearer token is required")
            if refusal is not None:
                if self.config.access_log:
                    access.info("%s WS %s 403 %s", inert(client_of(scope)), inert(scope.get("path")), refusal.code)
                await send({"type": "websocket.close", "code": 1008, "reason": refusal.code})
                return
            if self.manager is not None and scope.get("path") == "/v1/ws":
                await serve_ws(scope, receive, send, self.manager)
                return
            await self.app(scope, receive, send)
            return
        if kind != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0
        sent = 0
        failed = False

        async def send_logged(message: Message) -> None:
            nonlocal status, sent
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                sent += len(message.get("body", b""))
            await send(message)

        try:
            await self._http(scope, receive, send_logged)
        except Exception:
            failed = True
            raise
        finally:
            if self.config.access_log and access.isEnabledFor(logging.INFO):
                access.info(
                    "%s %s %s %d %dB %.2fms",
                    inert(client_of(scope)),
                    inert(scope.get("method")),
                    inert(scope.get("path")),
                    status or (500 if failed else 499),  # nothing sent and no error: the client hung up
                    sent,
                    (time.perf_counter() - started) * 1000,
                )

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        head = read_head(scope.get("headers", ()))
        limit = self.config.max_body_bytes
        refusal = self.admission.refusal(scope, head)
        if refusal is None and not self._authorized(scope, head):
            refusal = ApiError(401, "unauthorized", "a valid 'Authorization: Bearer <token>' is required")
        if refusal is None:
            refusal = body_refusal(head, limit)
        if refusal is not None:
            await _send_error(send, refusal)
            return
        received = 0
        too_large = False

        async def receive_limited() -> Message:
            nonlocal received, too_large
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    too_large = True
                    raise _TooLarge(limit)
            return message

        path = scope.get("path", "")
        if self.manager is not None and scope.get("method") == "POST":
            match = _STEP_PATH.match(path)
            if match is not None:
                await self._step(match.group(1), scope, receive, send)
                return
        app = self.app
        if self.mcp is not None and _MCP_PATH.match(path):
            app = self.mcp
        response_started = False

        async def send_tracked(message: Message) -> None:
            nonlocal response_started
            if message["type"] == "http.response.start":
                response_started = True
            await send(message)

        try:
            await app(scope, receive_limited, send_tracked)
        except _TooLarge:
            if not response_started:
                await _send_error(send, ApiError(413, "payload_too_large", f"the body is over {limit} bytes"))
        except Exception:
            if too_large and not response_started:
                await _send_error(send, ApiError(413, "payload_too_large", f"the body is over {limit} bytes"))
                return
            raise

    async def _step(self, sid: str, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.manager is not None
        limit = self.config.max_body_bytes
        chunks = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _send_error(send, ApiError(413, "payload_too_large", f"the body is over {limit} bytes"))
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        try:
            tool, args = step_args(parse_json(b"".join(chunks), empty_ok=False))
            body = dumps(self.manager.step(sid, tool, args, client_of(scope)))
        except ApiError as err:
            await _send_error(send, err)
            return
        except Exception as err:
            log.exception("internal error on POST %s", inert(scope.get("path")))
            await _send_error(send, internal_error(err))
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})


class _TooLarge(ApiError):
    """Raised from ``receive`` when a streamed body passes the limit (a ``413`` wherever it is caught)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, "payload_too_large", f"the body is over {limit} bytes")


async def _send_error(send: Send, err: ApiError) -> None:
    body = dumps(err.body())
    headers = [(b"content-type", JSON_TYPE.encode()), (b"content-length", str(len(body)).encode())]
    if "retry_after_s" in err.extra:
        headers.append((b"retry-after", str(max(1, round(err.extra["retry_after_s"]))).encode()))
    await send({"type": "http.response.start", "status": err.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# -- the app -------------------------------------------------------------------------


def create_app(
    config: ServerConfig | None = None,
    registry: Registry | None = None,
    *,
    manager: SessionManager | None = None,
) -> Gate:
    """The server's ASGI app (a :class:`Gate` around FastAPI); ``app.manager`` holds the sessions.

    ``config`` is checked first (see :meth:`ServerConfig.checked`). The app
    builds the served worlds at startup, evicts idle sessions while it runs
    and closes every session at shutdown.
    """
    config = (config or ServerConfig()).checked()
    manager = manager or SessionManager(config, registry)
    mcp_app, mcp_lifespan = _mcp_parts(manager)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        manager.warm()
        sweeper = asyncio.create_task(_sweep(manager))
        try:
            async with mcp_lifespan():
                log.info(
                    "serving %s: %d session limit, idle timeout %gs, auth %s",
                    ", ".join(manager.world_names),
                    config.max_sessions,
                    config.idle_timeout_s,
                    "on" if config.token else "off",
                )
                yield
        finally:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
            closed = manager.close_all()
            log.info("shut down: closed %d sessions", closed)

    app = FastAPI(
        title="mirrorworld session server",
        version=API_VERSION,
        description="Isolated sessions of mirror worlds over HTTP, WebSocket, MCP and the OpenEnv protocol.",
        lifespan=lifespan,
    )
    app.state.manager = manager
    _add_error_handlers(app)
    _add_routes(app, manager)
    add_openenv_routes(app, manager)
    gate = Gate(app, config, mcp_app, manager)
    gate.manager = manager  # type: ignore[attr-defined]
    return gate


def _mcp_parts(
    manager: SessionManager,
) -> tuple[ASGIApp | None, Callable[[], contextlib.AbstractAsyncContextManager[Any]]]:
    try:
        from mirrorworld.server.mcp import session_mcp_app
    except ImportError:
        return None, contextlib.nullcontext
    return session_mcp_app(manager)


async def _sweep(manager: SessionManager) -> None:
    period = min(max(manager.config.idle_timeout_s / 4, 0.05), 5.0)
    while True:
        await asyncio.sleep(period)
        try:
            manager.evict_idle()
        except Exception:  # a bug here must not stop eviction for good
            log.exception("idle eviction failed")


def _add_error_handlers(app: FastAPI) -> None:
    async def on_api_error(_: Request, err: Exception) -> Response:
        assert isinstance(err, ApiError)
        return error_response(err)

    async def on_http_error(_: Request, err: Exception) -> Response:
        assert isinstance(err, StarletteHTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(err.status_code, "http_error")
        return error_response(ApiError(err.status_code, code, str(err.detail)))

    async def on_validation_error(_: Request, err: Exception) -> Response:
        assert isinstance(err, RequestValidationError)
        first = err.errors()[0] if err.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return error_response(ApiError(400, "invalid_request", f"{where}: {first.get('msg', 'invalid')}"))

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)


Handler = Callable[[Request], Awaitable[Response]]


class _Routes:
    """``@routes(method, path, summary=...)`` adds a documented JSON route to ``app``.

    Each route answers failures through :func:`guarded`, documents the error
    statuses of ``_ERRORS`` and its answer as ``model`` (under ``status``),
    declares ``body`` as its request body (the handler parses it itself, see
    :func:`body_schema`) and each ``{name}`` of its path as a required string
    parameter (see :func:`path_parameters`; the handler reads
    ``request.path_params``), and is tagged ``sessions`` or ``server`` by its
    path. The OpenAPI document lists the routes in the order they are added.
    """

    def __init__(self, app: FastAPI, config: ServerConfig) -> None:
        self.app = app
        self.config = config

    def __call__(
        self,
        method: str,
        path: str,
        *,
        body: type[Any] | None = None,
        model: type[Any] | None = None,
        status: int = 200,
        summary: str,
    ) -> Callable[[Handler], None]:
        def register(handler: Handler) -> None:
            responses: dict[int | str, dict[str, Any]] = dict(_ERRORS)
            if model is not None:
                responses[status] = {"model": model, "description": "OK"}
            extra = body_schema(body, self.config) if body is not None else {}
            parameters = path_parameters(path)
            if parameters:
                extra["parameters"] = parameters
            self.app.add_api_route(
                path,
                guarded(handler),
                methods=[method],
                summary=summary,
                status_code=status,
                responses=responses,
                openapi_extra=extra or None,
                tags=["sessions" if path.startswith("/v1/sessions") else "server"],
            )

        return register


_PARAMETER_DOCS = {
    "session_id": "A session's id, as its creation returned it.",
    "world": "A served world's name (see /v1/worlds).",
}


def path_parameters(path: str) -> list[dict[str, Any]]:
    """The OpenAPI declarations of the ``{name}`` parameters of ``path`` (each a required string of 1-100 characters).

    The handlers take the bare ``Request`` (they read ``path_params``
    themselves), so the framework sees no parameter to declare; without these
    the document names parameters it never defines, which makes it invalid.
    """
    return [
        {
            "name": name,
            "in": "path",
            "required": True,
            "description": _PARAMETER_DOCS.get(name, name),
            "schema": {"type": "string", "minLength": 1, "maxLength": 100},
        }
        for name in _PATH_PARAM.findall(path)
    ]


def _add_routes(app: FastAPI, manager: SessionManager) -> None:
    """The routes of the module docstring's table, in its order, and ``WS /v1/ws``."""
    route = _Routes(app, manager.config)
    _add_world_routes(route, manager)
    _add_session_routes(route, manager)

    @route("GET", "/v1/stats", summary="Counters")
    async def stats(request: Request) -> Response:
        return json_response(manager.stats())

    @app.websocket("/v1/ws")
    async def ws(websocket: WebSocket) -> None:
        await serve_ws(websocket.scope, websocket.receive, websocket.send, manager)


def _add_world_routes(route: _Routes, manager: SessionManager) -> None:
    """``/health`` and the served worlds."""

    @route("GET", "/health", summary="Liveness and load")
    async def health(request: Request) -> Response:
        return json_response({"status": "healthy", **manager.stats()})

    @route("GET", "/v1/worlds", summary="The worlds this server serves")
    async def worlds(request: Request) -> Response:
        out = []
        for name in manager.world_names:
            w = manager.world(name)
            out.append(
                {
                    "name": w.name,
                    "id": w.id,
                    "hash": w.content_hash,
                    "tools": list(w.tool_names),
                    "families": [f.name for f in w.families],
                }
            )
        return json_response({"worlds": out})

    @route("GET", "/v1/worlds/{world}", summary="A world's tools (OpenAI format), task families and policy")
    async def world_detail(request: Request) -> Response:
        w = manager.world(request.path_params["world"])
        return json_response(
            {
                "name": w.name,
                "id": w.id,
                "hash": w.content_hash,
                "tools": [t.openai_schema() for t in w.tools],
                "families": [{"name": f.name, "description": f.description} for f in w.families],
                "policy": w.policy,
            }
        )


def _add_session_routes(route: _Routes, manager: SessionManager) -> None:
    """A session's life: create, look at, reset, step, state, verdict, fork, close."""

    @route("POST", "/v1/sessions", body=CreateRequest, model=SessionInfo, status=201, summary="Create a session")
    async def create(request: Request) -> Response:
        live = manager.create(parse_json(await request.body()), client_of(request.scope))
        return json_response(live.info(), 201)

    @route("GET", "/v1/sessions/{session_id}", model=SessionInfo, summary="A session and its episode")
    async def info(request: Request) -> Response:
        return json_response(manager.get(request.path_params["session_id"]).info())

    @route(
        "POST", "/v1/sessions/{session_id}/reset", body=ResetRequest, model=SessionInfo, summary="Start a new episode"
    )
    async def reset(request: Request) -> Response:
        live = manager.reset(request.path_params["session_id"], parse_json(await request.body()))
        return json_response(live.info())

    @route("POST", "/v1/sessions/{session_id}/step", body=StepRequest, model=StepResponse, summary="One tool call")
    async def step(request: Request) -> Response:
        tool, args = step_args(parse_json(await request.body(), empty_ok=False))
        out = manager.step(request.path_params["session_id"], tool, args, client_of(request.scope))
        return json_response(out)

    @route("GET", "/v1/sessions/{session_id}/state", model=StateResponse, summary="State hash and progress")
    async def state(request: Request) -> Response:
        return json_response(manager.state(request.path_params["session_id"]))

    @route("POST", "/v1/sessions/{session_id}/verdict", model=VerdictResponse, summary="End and grade the episode")
    async def verdict(request: Request) -> Response:
        return json_response(manager.verdict(request.path_params["session_id"]))

    @route(
        "POST", "/v1/sessions/{session_id}/fork", model=SessionInfo, status=201, summary="Copy a session mid-episode"
    )
    async def fork(request: Request) -> Response:
        live = manager.fork(request.path_params["session_id"], client_of(request.scope))
        return json_response(live.info(), 201)

    @route("DELETE", "/v1/sessions/{session_id}", summary="Close a session")
    async def close(request: Request) -> Response:
        sid = request.path_params["session_id"]
        manager.close(sid)
        return json_response({"session_id": sid, "closed": True})


# -- the multiplexed WebSocket protocol ------------------------------------------------


def ws_handle(manager: SessionManager, raw: str | bytes, client: str, owned: set[str]) -> bytes:
    """The reply to one ``/v1/ws`` message (see the module docstring)."""
    rid: Any = None
    try:
        if len(raw) > manager.config.max_body_bytes:
            raise ApiError(413, "payload_too_large", f"the message is over {manager.config.max_body_bytes} bytes")
        msg = parse_json(raw, empty_ok=False)
        if not isinstance(msg, dict):
            raise ApiError(400, "invalid_request", "a message must be a JSON object")
        rid = _request_id(msg.pop("id", None))
        op = msg.pop("op", None)
        if op == "step":
            sid = msg.pop("session_id", None)
            tool, args = step_args(msg)
            data: Any = manager.step(_sid(sid), tool, args, client)
        elif op == "create":
            live = manager.create(msg, client)
            _own(live, owned)
            data = live.info()
        elif op == "ping":
            data = {"pong": True}
        elif op not in _SESSION_OPS:
            raise ApiError(400, "invalid_request", f"unknown op {inert(op, 40)!r}")
        else:
            sid = _sid(msg.pop("session_id", None))
            if op == "reset":
                data = manager.reset(sid, msg).info()
            elif msg:
                raise ApiError(400, "invalid_request", f"{sorted(msg)[0]}: unknown field")
            elif op == "state":
                data = manager.state(sid)
            elif op == "verdict":
                data = manager.verdict(sid)
            elif op == "info":
                data = manager.get(sid).info()
            elif op == "fork":
                live = manager.fork(sid, client)
                _own(live, owned)
                data = live.info()
            elif op == "close":
                manager.close(sid)
                owned.discard(sid)
                data = {"session_id": sid, "closed": True}
            else:
                raise ApiError(400, "invalid_request", f"unknown op {str(op)[:40]!r}")
        return dumps({"id": rid, "data": data})
    except ApiError as err:
        return _ws_error(rid, err)
    except Exception as err:
        log.exception("internal error on a WebSocket message")
        return _ws_error(rid, internal_error(err))


def _own(live: LiveSession, owned: set[str]) -> None:
    """Make ``live`` the connection's: it never expires while the connection is open, and closes with it."""
    owned.add(live.id)
    live.attached.add(_WS_OWNER)


_SESSION_OPS = frozenset({"reset", "state", "verdict", "info", "fork", "close"})
"""The ``/v1/ws`` ops that act on a session (they need a ``session_id``)."""


def _ws_error(rid: Any, err: ApiError) -> bytes:
    return dumps({"id": rid, **err.body(), "status": err.status})


def _request_id(value: Any) -> Any:
    if value is None or (isinstance(value, str) and len(value) <= 200):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**53:
        return value
    raise ApiError(400, "invalid_request", "id: a string (at most 200 characters) or an integer is required")


def _sid(value: Any) -> str:
    if not isinstance(value, str):
        raise ApiError(400, "invalid_request", "session_id: a string is required")
    return value


async def serve_ws(scope: Scope, receive: Receive, send: Send, manager: SessionManager) -> None:
    """Run one ``/v1/ws`` connection (an ASGI WebSocket) until it closes; close the sessions it created.

    Plain ASGI, so :class:`Gate` serves it without the framework's routing and
    per-message wrappers; the FastAPI route passes its WebSocket's own
    ``receive`` and ``send``. Where the server's WebSocket protocol offers it
    (:data:`~mirrorworld.server.protocols.INLINE_MESSAGES`), the messages are
    answered inline, in the protocol's read callback, by the same
    :func:`ws_handle`; this coroutine then only waits for the connection to end.
    """
    if (await receive())["type"] != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    client = client_of(scope)
    owned: set[str] = set()
    started = time.perf_counter()
    count = 0

    def answer(raw: str | bytes) -> bytes:
        nonlocal count
        count += 1
        return ws_handle(manager, raw, client, owned)

    inline = (scope.get("extensions") or {}).get(INLINE_MESSAGES)
    if inline is not None:
        inline(answer)
    try:
        while True:
            message = await receive()
            if message["type"] != "websocket.receive":
                break
            raw = message.get("text")
            if raw is None:
                raw = message.get("bytes") or b""
            await send({"type": "websocket.send", "text": answer(raw).decode()})
    except (WebSocketDisconnect, OSError):  # the peer went away mid-send (Starlette and uvicorn say so)
        pass
    finally:
        for sid in owned:
            if sid in manager:
                manager.close(sid, "its WebSocket connection closed")
        if manager.config.access_log:
            access.info(
                "%s WS %s %d messages %.2fs",
                inert(client),
                inert(scope.get("path")),
                count,
                time.perf_counter() - started,
            )
