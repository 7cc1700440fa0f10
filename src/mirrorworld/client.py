"""A typed client for the session server, synchronous and asynchronous.

::

    from mirrorworld.client import Client

    with Client("http://127.0.0.1:8765") as client:
        with client.create("helpdesk", family="refund_damaged", seed=3) as session:
            print(session.info.instruction)
            result = session.step("get_order", {"order_id": 428})
            result.ok, result.result, result.content   # the tool result as the agent sees it
            session.verdict().passed

:class:`AsyncClient` has the same methods as coroutines. Both speak HTTP by
default; ``transport="ws"`` sends every session operation over one WebSocket
connection instead (several times faster per step; sessions created over it
are closed by the server when the connection closes). ``token`` is sent as
``Authorization: Bearer …`` (default: ``$MIRRORWORLD_TOKEN``).

A request the server refuses raises :class:`RemoteError` with its HTTP status
and stable ``code`` (``unknown_session``, ``session_expired``,
``rate_limited`` …). A tool call that fails does *not* raise: it is a
:class:`StepResult` with ``ok`` false and ``error`` set, exactly as in a local
session. ``StepResult.content`` is byte-for-byte the JSON text a local
``ToolResult.content()`` gives.

Needs ``httpx`` and ``websockets`` (``pip install 'mirrorworld[server]'``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import threading
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

import httpx

from mirrorworld.errors import BOUNDARIES, MirrorworldError

__all__ = [
    "AsyncClient",
    "AsyncRemoteSession",
    "Client",
    "RemoteError",
    "RemoteSession",
    "RemoteVerdict",
    "SessionInfo",
    "SessionState",
    "StepResult",
]

Transport = Literal["http", "ws"]
Split = Literal["train", "test"]

_ROUTES: dict[str, tuple[str, str]] = {
    "create": ("POST", "/v1/sessions"),
    "info": ("GET", "/v1/sessions/{sid}"),
    "reset": ("POST", "/v1/sessions/{sid}/reset"),
    "step": ("POST", "/v1/sessions/{sid}/step"),
    "state": ("GET", "/v1/sessions/{sid}/state"),
    "verdict": ("POST", "/v1/sessions/{sid}/verdict"),
    "fork": ("POST", "/v1/sessions/{sid}/fork"),
    "close": ("DELETE", "/v1/sessions/{sid}"),
}


class RemoteError(MirrorworldError):
    """A request the server refused (or could not be reached: ``status`` 0, ``code`` ``connection_error``).

    ``boundary`` says who failed: the boundary the server named (``world`` for a
    crashed tool), ``infrastructure`` for an unreachable server or a server bug,
    else ``caller`` (a request the server refused).
    """

    def __init__(self, status: int, code: str, message: str, body: dict[str, Any] | None = None) -> None:
        super().__init__(f"{code}: {message}" + (f" (HTTP {status})" if status else ""))
        self.status = status
        self.code = code
        self.message = message
        self.body = body or {}
        named = self.body.get("boundary")
        if named in BOUNDARIES and named != "agent":
            self.boundary = named
        elif status == 0 or status >= 500:
            self.boundary = "infrastructure"


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A session and the episode it plays."""

    session_id: str
    world: str
    world_hash: str
    task_id: str
    family: str
    split: Split
    instruction: str
    max_steps: int
    tools: tuple[str, ...]
    step: int
    done: bool
    view: str
    records: str

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SessionInfo:
        return cls(
            d["session_id"],
            d["world"],
            d["world_hash"],
            d["task_id"],
            d["family"],
            d["split"],
            d["instruction"],
            d["max_steps"],
            tuple(d["tools"]),
            d["step"],
            d["done"],
            d["view"],
            d["records"],
        )


@dataclass(frozen=True, slots=True)
class StepResult:
    """One tool call's result and where the episode stands."""

    ok: bool
    result: Any
    """The agent-visible JSON value (``{"error": {code, message}}`` when not ``ok``)."""
    reward: float
    """Shaping reward of the call, plus the verdict's score on the call that ends the episode."""
    terminated: bool
    truncated: bool
    done: bool
    step: int
    view: str
    records: str
    verdict: dict[str, Any] | None = None

    @property
    def content(self) -> str:
        """The result as the JSON text an agent reads (the same text as ``ToolResult.content()``)."""
        return json.dumps(self.result, separators=(",", ":"), ensure_ascii=True)

    @property
    def error(self) -> dict[str, Any] | None:
        """The error ``{code, message}`` of a failed call."""
        if self.ok or not isinstance(self.result, dict):
            return None
        err = self.result.get("error")
        return err if isinstance(err, dict) else None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StepResult:
        return cls(
            d["ok"],
            d["result"],
            d["reward"],
            d["terminated"],
            d["truncated"],
            d["done"],
            d["step"],
            d["view"],
            d["records"],
            d.get("verdict"),
        )


@dataclass(frozen=True, slots=True)
class SessionState:
    """A session's state hash and progress."""

    session_id: str
    state_hash: str
    task_id: str
    step: int
    max_steps: int
    terminated: bool
    truncated: bool
    done: bool
    total_reward: float

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SessionState:
        return cls(
            d["session_id"],
            d["state_hash"],
            d["task_id"],
            d["step"],
            d["max_steps"],
            d["terminated"],
            d["truncated"],
            d["done"],
            d["total_reward"],
        )


@dataclass(frozen=True, slots=True)
class RemoteVerdict:
    """The verdict on an episode, as the server's verifier gave it."""

    passed: bool
    score: float
    breakdown: dict[str, Any] = field(default_factory=dict)
    evidence: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RemoteVerdict:
        return cls(d["passed"], d["score"], d.get("breakdown", {}), tuple(d.get("evidence", ())))

    def to_dict(self) -> dict[str, Any]:
        """The same shape as ``Verdict.to_dict()``."""
        return {
            "passed": self.passed,
            "score": self.score,
            "breakdown": self.breakdown,
            "evidence": list(self.evidence),
        }


def _spec(
    world: str | None,
    task_id: str | None,
    family: str | None,
    seed: int | None,
    index: int | None,
    split: Split,
    families: list[str] | tuple[str, ...] | None,
    max_steps: int,
    reward: Literal["shaped", "sparse"] = "shaped",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"split": split, "max_steps": max_steps}
    if reward != "shaped":
        spec["reward"] = reward
    if world is not None:
        spec["world"] = world
    for key, value in (("task_id", task_id), ("family", family), ("seed", seed), ("index", index)):
        if value is not None:
            spec[key] = value
    if families:
        spec["families"] = list(families)
    return spec


def _headers(token: str | None) -> dict[str, str]:
    token = token or os.environ.get("MIRRORWORLD_TOKEN")
    return {"Authorization": f"Bearer {token}"} if token else {}


def _ws_url(base_url: str) -> str:
    url = base_url.rstrip("/")
    if url.startswith("https://"):
        url = "wss://" + url[len("https://") :]
    elif url.startswith("http://"):
        url = "ws://" + url[len("http://") :]
    return url + "/v1/ws"


def _check_http(response: httpx.Response) -> Any:
    try:
        body = json.loads(response.content) if response.content else {}
    except ValueError:
        raise RemoteError(response.status_code, "bad_response", "the server sent something other than JSON") from None
    if response.status_code >= 400:
        err = body.get("error", {}) if isinstance(body, dict) else {}
        raise RemoteError(
            response.status_code,
            str(err.get("code", "http_error")),
            str(err.get("message", response.reason_phrase)),
            err if isinstance(err, dict) else None,
        )
    return body


def _check_ws(reply: Any, rid: int) -> Any:
    if not isinstance(reply, dict) or reply.get("id") != rid:
        raise RemoteError(0, "bad_response", "the server answered out of order")
    if "error" in reply:
        err = reply["error"]
        raise RemoteError(int(reply.get("status", 0)), str(err.get("code")), str(err.get("message")), err)
    return reply["data"]


def _ws_message(op: str, sid: str | None, body: dict[str, Any] | None, rid: int) -> str:
    msg: dict[str, Any] = {"op": op, "id": rid}
    if sid is not None:
        msg["session_id"] = sid
    if body:
        msg.update(body)
    return json.dumps(msg, separators=(",", ":"))


def _connection_error(err: BaseException) -> RemoteError:
    return RemoteError(0, "connection_error", f"{type(err).__name__}: {err}")


class _Endpoint:
    """What both clients hold: the server, the transport, the credentials and the request ids."""

    def __init__(self, base_url: str, *, token: str | None, transport: Transport, timeout: float) -> None:
        if transport not in ("http", "ws"):
            raise MirrorworldError(f"transport must be http or ws, not {transport!r}")
        self.base_url = base_url.rstrip("/")
        self.transport: Transport = transport
        self._headers = _headers(token)
        self._timeout = timeout
        self._ws: Any = None
        self._ids = itertools.count(1)


# -- synchronous ------------------------------------------------------------------------------


class Client(_Endpoint):
    """A synchronous client (see the module docstring)."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        transport: Transport = "http",
        timeout: float = 30.0,
    ) -> None:
        super().__init__(base_url, token=token, transport=transport, timeout=timeout)
        self._http = httpx.Client(base_url=self.base_url, headers=self._headers, timeout=timeout)
        self._lock = threading.Lock()

    # -- plumbing

    def request(self, op: str, sid: str | None = None, body: dict[str, Any] | None = None) -> Any:
        """One session operation (``op`` of ``create, info, reset, step, state, verdict, fork, close``)."""
        if self.transport == "ws":
            return self._ws_request(op, sid, body)
        method, path = _ROUTES[op]
        try:
            response = self._http.request(method, path.format(sid=sid), json=body)
        except httpx.TransportError as err:
            raise _connection_error(err) from None
        return _check_http(response)

    def _ws_request(self, op: str, sid: str | None, body: dict[str, Any] | None) -> Any:
        from websockets.exceptions import WebSocketException
        from websockets.sync.client import connect

        with self._lock:
            try:
                if self._ws is None:
                    # Entered as a context manager (websockets >= 17.1 deprecates the bare form); closed in close().
                    self._ws = connect(
                        _ws_url(self.base_url),
                        additional_headers=self._headers,
                        open_timeout=self._timeout,
                        max_size=None,
                        compression=None,
                    ).__enter__()
                rid = next(self._ids)
                self._ws.send(_ws_message(op, sid, body, rid))
                reply = json.loads(self._ws.recv(timeout=self._timeout))
            except (OSError, TimeoutError, WebSocketException) as err:
                self._drop_ws()
                raise _connection_error(err) from None
        return _check_ws(reply, rid)

    def _drop_ws(self) -> None:
        if self._ws is not None:
            with contextlib.suppress(Exception):
                self._ws.close()
            self._ws = None

    def _get(self, path: str) -> Any:
        try:
            return _check_http(self._http.get(path))
        except httpx.TransportError as err:
            raise _connection_error(err) from None

    # -- the API

    def health(self) -> dict[str, Any]:
        """``/health``: status and load."""
        return dict(self._get("/health"))

    def worlds(self) -> list[dict[str, Any]]:
        """The worlds the server serves."""
        return list(self._get("/v1/worlds")["worlds"])

    def world(self, name: str) -> dict[str, Any]:
        """One world: tools (OpenAI format), task families, policy."""
        return dict(self._get(f"/v1/worlds/{name}"))

    def create(
        self,
        world: str = "helpdesk",
        *,
        task_id: str | None = None,
        family: str | None = None,
        seed: int | None = None,
        index: int | None = None,
        split: Split = "train",
        families: list[str] | tuple[str, ...] | None = None,
        max_steps: int = 30,
        reward: Literal["shaped", "sparse"] = "shaped",
    ) -> RemoteSession:
        """A new session: ``task_id``, or ``family`` + ``seed``, or the ``index``-th task of ``split``."""
        body = _spec(world, task_id, family, seed, index, split, families, max_steps, reward)
        return RemoteSession(self, SessionInfo.from_dict(self.request("create", None, body)))

    def session(self, session_id: str) -> RemoteSession:
        """A handle on an existing session."""
        return RemoteSession(self, SessionInfo.from_dict(self.request("info", session_id)))

    def close(self) -> None:
        """Close the connections (sessions created over a WebSocket close with it)."""
        with self._lock:
            self._drop_ws()
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RemoteSession:
    """A session on a server, stepped through a :class:`Client`."""

    def __init__(self, client: Client, info: SessionInfo) -> None:
        self.client = client
        self.info = info
        self.id = info.session_id

    def step(self, tool: str, args: dict[str, Any] | str | None = None) -> StepResult:
        """One tool call (never raises for a bad call: see ``StepResult.ok``)."""
        return StepResult.from_dict(self.client.request("step", self.id, {"tool": tool, "args": args}))

    def reset(
        self,
        *,
        task_id: str | None = None,
        family: str | None = None,
        seed: int | None = None,
        index: int | None = None,
        split: Split = "train",
        families: list[str] | tuple[str, ...] | None = None,
        max_steps: int = 30,
        reward: Literal["shaped", "sparse"] = "shaped",
    ) -> SessionInfo:
        """Start a new episode in this session."""
        body = _spec(None, task_id, family, seed, index, split, families, max_steps, reward)
        self.info = SessionInfo.from_dict(self.client.request("reset", self.id, body))
        return self.info

    def refresh(self) -> SessionInfo:
        self.info = SessionInfo.from_dict(self.client.request("info", self.id))
        return self.info

    def state(self) -> SessionState:
        return SessionState.from_dict(self.client.request("state", self.id))

    def state_hash(self) -> str:
        return self.state().state_hash

    def verdict(self) -> RemoteVerdict:
        """End the episode (if still running) and grade it."""
        return RemoteVerdict.from_dict(self.client.request("verdict", self.id))

    def fork(self) -> RemoteSession:
        """A new session continuing from this one's state."""
        return RemoteSession(self.client, SessionInfo.from_dict(self.client.request("fork", self.id)))

    def close(self) -> None:
        """Close the session (closing one already gone is not an error)."""
        with contextlib.suppress(RemoteError):
            self.client.request("close", self.id)

    def __enter__(self) -> RemoteSession:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


# -- asynchronous -----------------------------------------------------------------------------


class AsyncClient(_Endpoint):
    """An asynchronous client (see the module docstring). Over ``ws``, concurrent calls share one connection."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        transport: Transport = "http",
        timeout: float = 30.0,
    ) -> None:
        super().__init__(base_url, token=token, transport=transport, timeout=timeout)
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=self._headers, timeout=timeout)
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._connecting = asyncio.Lock()

    async def request(self, op: str, sid: str | None = None, body: dict[str, Any] | None = None) -> Any:
        """One session operation (see :meth:`Client.request`)."""
        if self.transport == "ws":
            return await self._ws_request(op, sid, body)
        method, path = _ROUTES[op]
        try:
            response = await self._http.request(method, path.format(sid=sid), json=body)
        except httpx.TransportError as err:
            raise _connection_error(err) from None
        return _check_http(response)

    async def _ensure_ws(self) -> Any:
        from websockets.asyncio.client import connect

        async with self._connecting:
            if self._ws is None:
                self._ws = await connect(
                    _ws_url(self.base_url),
                    additional_headers=self._headers,
                    open_timeout=self._timeout,
                    max_size=None,
                    compression=None,
                )
                self._reader = asyncio.create_task(self._read(self._ws))
        return self._ws

    async def _read(self, ws: Any) -> None:
        error: BaseException = RemoteError(0, "connection_error", "the WebSocket connection closed")
        try:
            async for raw in ws:
                reply = json.loads(raw)
                rid = reply.get("id") if isinstance(reply, dict) else None
                future = self._pending.pop(rid, None) if isinstance(rid, int) else None
                if future is not None and not future.done():
                    future.set_result(reply)
        except Exception as err:
            error = _connection_error(err)
        finally:
            if self._ws is ws:
                self._ws = None
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(error)
            self._pending.clear()

    async def _ws_request(self, op: str, sid: str | None, body: dict[str, Any] | None) -> Any:
        from websockets.exceptions import WebSocketException

        try:
            ws = await self._ensure_ws()
            rid = next(self._ids)
            future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            self._pending[rid] = future
            await ws.send(_ws_message(op, sid, body, rid))
            reply = await asyncio.wait_for(future, self._timeout)
        except (OSError, TimeoutError, WebSocketException) as err:
            raise _connection_error(err) from None
        return _check_ws(reply, rid)

    async def _get(self, path: str) -> Any:
        try:
            return _check_http(await self._http.get(path))
        except httpx.TransportError as err:
            raise _connection_error(err) from None

    async def health(self) -> dict[str, Any]:
        return dict(await self._get("/health"))

    async def worlds(self) -> list[dict[str, Any]]:
        return list((await self._get("/v1/worlds"))["worlds"])

    async def world(self, name: str) -> dict[str, Any]:
        return dict(await self._get(f"/v1/worlds/{name}"))

    async def create(
        self,
        world: str = "helpdesk",
        *,
        task_id: str | None = None,
        family: str | None = None,
        seed: int | None = None,
        index: int | None = None,
        split: Split = "train",
        families: list[str] | tuple[str, ...] | None = None,
        max_steps: int = 30,
        reward: Literal["shaped", "sparse"] = "shaped",
    ) -> AsyncRemoteSession:
        body = _spec(world, task_id, family, seed, index, split, families, max_steps, reward)
        return AsyncRemoteSession(self, SessionInfo.from_dict(await self.request("create", None, body)))

    async def session(self, session_id: str) -> AsyncRemoteSession:
        return AsyncRemoteSession(self, SessionInfo.from_dict(await self.request("info", session_id)))

    async def aclose(self) -> None:
        if self._ws is not None:
            ws, self._ws = self._ws, None
            with contextlib.suppress(Exception):
                await ws.close()
        if self._reader is not None:
            with contextlib.suppress(BaseException):
                await self._reader
            self._reader = None
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class AsyncRemoteSession:
    """A session on a server, stepped through an :class:`AsyncClient`."""

    def __init__(self, client: AsyncClient, info: SessionInfo) -> None:
        self.client = client
        self.info = info
        self.id = info.session_id

    async def step(self, tool: str, args: dict[str, Any] | str | None = None) -> StepResult:
        return StepResult.from_dict(await self.client.request("step", self.id, {"tool": tool, "args": args}))

    async def reset(
        self,
        *,
        task_id: str | None = None,
        family: str | None = None,
        seed: int | None = None,
        index: int | None = None,
        split: Split = "train",
        families: list[str] | tuple[str, ...] | None = None,
        max_steps: int = 30,
        reward: Literal["shaped", "sparse"] = "shaped",
    ) -> SessionInfo:
        body = _spec(None, task_id, family, seed, index, split, families, max_steps, reward)
        self.info = SessionInfo.from_dict(await self.client.request("reset", self.id, body))
        return self.info

    async def state(self) -> SessionState:
        return SessionState.from_dict(await self.client.request("state", self.id))

    async def verdict(self) -> RemoteVerdict:
        return RemoteVerdict.from_dict(await self.client.request("verdict", self.id))

    async def fork(self) -> AsyncRemoteSession:
        return AsyncRemoteSession(self.client, SessionInfo.from_dict(await self.client.request("fork", self.id)))

    async def close(self) -> None:
        with contextlib.suppress(RemoteError):
            await self.client.request("close", self.id)

    async def __aenter__(self) -> AsyncRemoteSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
