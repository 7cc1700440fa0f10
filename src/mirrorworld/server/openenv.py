"""The OpenEnv protocol, so OpenEnv's clients (and TRL's OpenEnv integration) work unchanged.

OpenEnv (``openenv`` on PyPI) talks to an environment server through:

* ``GET /health`` → ``{"status": "healthy"}``, ``GET /metadata`` → name and
  description, ``GET /schema`` → JSON schemas of action, observation and state;
* ``WS /ws`` — one session per connection: the client sends
  ``{"type": "reset", "data": {...}}``, ``{"type": "step", "data": ACTION}``,
  ``{"type": "state"}``, ``{"type": "mcp", "data": JSONRPC}`` and
  ``{"type": "close"}``; the server answers ``{"type": "observation", "data":
  {"observation", "reward", "done", "metadata"}}``, ``{"type": "state", "data":
  STATE}``, ``{"type": "mcp", "data": JSONRPC}`` or ``{"type": "error", "data":
  {"message", "code"}}``. ``/ws?session_id=ID`` attaches to an existing session
  instead (it is then left open when the connection closes);
* ``POST /reset``, ``POST /step``, ``GET /state`` over HTTP. OpenEnv's own
  server runs each HTTP call on a fresh environment; here ``/reset`` creates a
  session and returns its id in ``metadata.session_id``, which ``/step``
  (body field ``session_id``) and ``/state`` (query ``session_id``) then use;
* ``POST /mcp`` — JSON-RPC 2.0 with ``tools/list``, ``tools/call`` (params
  ``name``, ``arguments``, ``session_id``), ``openenv/session/create`` and
  ``openenv/session/close``. A body that is not JSON is a JSON-RPC parse
  error; a body over the server's limit is refused like any other (``413``).

An action is ``{"tool": NAME, "args": {...}}`` (``args`` may be the JSON text
of an object), or one of OpenEnv's MCP actions, so ``MCPToolClient`` works
unchanged: ``{"type": "call_tool", "tool_name": NAME, "arguments": {...}}``
(``CallToolAction``) and ``{"type": "list_tools"}`` (``ListToolsAction``, which
takes no step). The observation of a step carries ``ok``, ``result`` (the
agent-visible JSON), ``view``, ``records``, ``step`` and, on the call that ends
the episode, ``verdict`` (also in ``metadata``); a ``call_tool`` step adds
``tool_name`` and ``error``. That of a reset carries the ``instruction`` and
the tools as MCP descriptors with their input schemas (both also in
``metadata``). The reward is the same shaped reward as ``MirrorEnv``'s.
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

from fastapi import FastAPI, Request, WebSocket
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.websockets import WebSocketDisconnect

from mirrorworld.core.schemas import mcp_tool
from mirrorworld.server.models import CreateRequest, ErrorResponse
from mirrorworld.server.sessions import ApiError, LiveSession, RawJSON, SessionManager
from mirrorworld.server.wire import (
    API_VERSION,
    JSON_TYPE,
    access,
    body_schema,
    client_of,
    dumps,
    guarded,
    internal_error,
    json_response,
    log,
    parse_json,
    step_args,
)

__all__ = ["add_openenv_routes", "jsonrpc", "mcp_tools"]

_WS_CODES = {
    "invalid_json": "INVALID_JSON",
    "invalid_request": "VALIDATION_ERROR",
    "too_many_sessions": "CAPACITY_REACHED",
    "unknown_session": "SESSION_ERROR",
    "session_closed": "SESSION_ERROR",
    "session_expired": "SESSION_ERROR",
    "no_session": "SESSION_ERROR",
}


class ToolAction(BaseModel):
    """An OpenEnv action: one tool call."""

    model_config = ConfigDict(extra="forbid")
    tool: str = Field(description="The tool's name.")
    args: dict[str, Any] | str | None = Field(default=None, description="Arguments: an object or its JSON text.")


class CallToolAction(BaseModel):
    """OpenEnv's MCP action for one tool call (``openenv.core.env_server.mcp_types.CallToolAction``)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["call_tool"]
    tool_name: str = Field(description="The tool's name.")
    arguments: dict[str, Any] | None = Field(default=None, description="The tool's arguments.")
    metadata: dict[str, Any] | None = None


class ListToolsAction(BaseModel):
    """OpenEnv's MCP action listing the tools; it is not a step of the episode."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["list_tools"]
    metadata: dict[str, Any] | None = None


class ToolObservation(BaseModel):
    """An OpenEnv observation of a step (a reset adds ``instruction`` and ``tools``).

    ``tools`` are MCP tool descriptors (``name``, ``description``,
    ``inputSchema``). A step taken with a ``call_tool`` action adds
    ``tool_name`` and ``error`` (always null: a refused call is a result,
    ``{"error": {code, message}}``, as OpenEnv's MCP types specify), so
    OpenEnv's ``MCPToolClient`` reads it as a ``CallToolObservation``.
    """

    ok: bool = True
    result: Any = None
    view: str = ""
    records: str = ""
    step: int = 0
    instruction: str | None = None
    tools: list[dict[str, Any]] | None = None
    verdict: dict[str, Any] | None = None
    tool_name: str | None = None
    error: dict[str, Any] | None = None


class SessionState(BaseModel):
    """An OpenEnv state."""

    episode_id: str | None = None
    step_count: int = 0
    session_id: str | None = None
    task_id: str | None = None
    state_hash: str | None = None
    done: bool = False


class OpenEnvReset(CreateRequest):
    """OpenEnv's reset body: its ``episode_id`` plus the task fields of ``CreateRequest``."""

    episode_id: str | None = Field(default=None, max_length=255)
    session_id: str | None = Field(default=None, max_length=100, description="Reset this session instead.")


class OpenEnvStep(BaseModel):
    """OpenEnv's step body, with the session to step."""

    model_config = ConfigDict(extra="forbid", strict=True)
    action: ToolAction | CallToolAction | ListToolsAction
    session_id: str = Field(max_length=100)
    timeout_s: float | None = Field(default=None, gt=0)
    request_id: str | None = Field(default=None, max_length=255)


# -- shared by HTTP and WebSocket --------------------------------------------------------


def _reset_payload(live: LiveSession, episode_id: str | None = None) -> dict[str, Any]:
    """A reset's reply: the instruction and the tools with their schemas (also in ``metadata``, which
    OpenEnv's ``MCPToolClient`` keeps when it reads the observation as a tool list)."""
    info = live.info()
    return {
        "observation": {
            "ok": True,
            "result": None,
            "view": info["view"],
            "records": info["records"],
            "step": info["step"],
            "instruction": info["instruction"],
            "tools": [mcp_tool(t) for t in live.world.tools],
        },
        "reward": None,
        "done": False,
        "metadata": {
            "session_id": live.id,
            "episode_id": episode_id or live.id,
            "task_id": info["task_id"],
            "world": info["world"],
            "max_steps": info["max_steps"],
            "instruction": info["instruction"],
        },
    }


def _mcp_action(action: dict[str, Any]) -> tuple[str, Any] | None:
    """``(tool, arguments)`` of an OpenEnv ``call_tool`` action; None for ``list_tools``."""
    kind = action.get("type")
    allowed = {"type", "metadata"} | ({"tool_name", "arguments"} if kind == "call_tool" else set())
    extra = sorted(set(action) - allowed)
    if extra:
        raise ApiError(400, "invalid_request", f"action.{str(extra[0])[:40]}: unknown field")
    if action.get("metadata") is not None and not isinstance(action["metadata"], dict):
        raise ApiError(400, "invalid_request", "action.metadata: an object is required")
    if kind == "list_tools":
        return None
    tool, args = action.get("tool_name"), action.get("arguments")
    if not isinstance(tool, str) or len(tool) > 200:
        raise ApiError(400, "invalid_request", "action.tool_name: a string of at most 200 characters is required")
    if args is not None and not isinstance(args, dict):
        raise ApiError(400, "invalid_request", "action.arguments: an object is required")
    return tool, args


def _step_payload(manager: SessionManager, sid: str, action: Any, client: str) -> dict[str, Any]:
    """A step's reply. ``action`` is ``{tool, args}`` or one of OpenEnv's MCP actions
    (``{"type": "call_tool", "tool_name", "arguments"}``; ``{"type": "list_tools"}``, which
    lists the tools without taking a step)."""
    if not isinstance(action, dict):
        raise ApiError(400, "invalid_request", "action: an object {tool, args} is required")
    mcp: tuple[str, Any] | None = None
    if "type" in action:
        if action["type"] not in ("call_tool", "list_tools"):
            raise ApiError(400, "invalid_request", "action.type: call_tool or list_tools (or send {tool, args})")
        mcp = _mcp_action(action)
        if mcp is None:
            live = manager.get(sid)
            return {
                "observation": {"tools": [mcp_tool(t) for t in live.world.tools]},
                "reward": None,
                "done": bool(manager.state(sid)["done"]),
                "metadata": {"session_id": sid},
            }
    tool, args = mcp if mcp is not None else step_args(action)
    out = manager.step(sid, tool, args, client)
    obs: dict[str, Any] = {
        "ok": out["ok"],
        "result": out["result"],
        "view": out["view"],
        "records": out["records"],
        "step": out["step"],
    }
    meta: dict[str, Any] = {"session_id": sid, "terminated": out["terminated"], "truncated": out["truncated"]}
    if mcp is not None:
        obs |= {"tool_name": tool, "error": None}
    if "verdict" in out:
        obs["verdict"] = out["verdict"]
        meta["verdict"] = out["verdict"]
    return {"observation": obs, "reward": out["reward"], "done": out["done"], "metadata": meta}


def _state_payload(manager: SessionManager, sid: str | None, episode_id: str | None = None) -> dict[str, Any]:
    if sid is None:
        return SessionState().model_dump()
    st = manager.state(sid)
    return {
        "episode_id": episode_id or sid,
        "step_count": st["step"],
        "session_id": sid,
        "task_id": st["task_id"],
        "state_hash": st["state_hash"],
        "done": st["done"],
    }


def _reset(manager: SessionManager, data: dict[str, Any], client: str, current: str | None) -> tuple[LiveSession, str]:
    """Reset ``current`` (same world) or create a session; returns it and the episode id."""
    data = dict(data)
    episode_id = data.pop("episode_id", None)
    if episode_id is not None and (not isinstance(episode_id, str) or len(episode_id) > 255):
        raise ApiError(400, "invalid_request", "episode_id: a string of at most 255 characters is required")
    target = data.pop("session_id", None) or current
    if target is not None:
        live = manager.get(target)
        world = data.pop("world", None)
        if world is None or manager.world(world) is live.world:
            return manager.reset(target, data), episode_id or target
        data["world"] = world
    return manager.create(data, client), episode_id or ""


def mcp_tools(manager: SessionManager, world_name: str | None = None) -> list[dict[str, Any]]:
    """The tools of a world as MCP tool descriptors."""
    world = manager.world(world_name or manager.world_names[0])
    return [mcp_tool(t) for t in world.tools]


def mcp_call_result(out: dict[str, Any]) -> dict[str, Any]:
    """A step's result as an MCP ``CallToolResult`` (``isError`` when the call failed)."""
    raw = out["result"]
    text = raw.text if isinstance(raw, RawJSON) else dumps(raw).decode()
    structured = json.loads(text)
    if not isinstance(structured, dict):
        structured = {"result": structured}
    meta = {"step": out["step"], "done": out["done"], "reward": out["reward"]}
    if "verdict" in out:
        meta["verdict"] = out["verdict"]
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
        "isError": not out["ok"],
        "_meta": {"mirrorworld": meta},
    }


def jsonrpc(manager: SessionManager, request: Any, client: str, session: str | None = None) -> dict[str, Any]:
    """Answer one JSON-RPC 2.0 request of OpenEnv's ``/mcp`` (see the module docstring)."""
    rid = request.get("id") if isinstance(request, dict) else None
    if not isinstance(rid, (str, int)) or isinstance(rid, bool):
        rid = None

    def fail(code: int, message: str) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}

    if not isinstance(request, dict) or request.get("jsonrpc") != "2.0" or not isinstance(request.get("method"), str):
        return fail(-32600, "Invalid Request: a JSON-RPC 2.0 object with a method is required")
    params = request.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        return fail(-32602, "Invalid params: params must be an object")
    method = request["method"]
    try:
        if method == "tools/list":
            sid = params.get("session_id") or session
            world = manager.get(sid).world.name if isinstance(sid, str) else params.get("world")
            result: dict[str, Any] = {"tools": mcp_tools(manager, world if isinstance(world, str) else None)}
        elif method == "tools/call":
            sid = params.get("session_id") or session
            if not isinstance(sid, str):
                return fail(-32602, "Invalid params: 'session_id' is required")
            name = params.get("name")
            if not isinstance(name, str):
                return fail(-32602, "Invalid params: 'name' is required")
            args = params.get("arguments")
            if args is not None and not isinstance(args, (dict, str)):
                return fail(-32602, "Invalid params: 'arguments' must be an object")
            result = mcp_call_result(manager.step(sid, name, args, client))
        elif method == "openenv/session/create":
            spec = {k: v for k, v in params.items() if k != "session_id"}
            result = {"session_id": manager.create(spec, client).id}
        elif method == "openenv/session/close":
            sid = params.get("session_id")
            if not isinstance(sid, str):
                return fail(-32602, "Invalid params: 'session_id' is required")
            manager.close(sid)
            result = {"session_id": sid, "closed": True}
        else:
            return fail(-32601, f"Method not found: {method[:60]}")
    except ApiError as err:
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": err.message, "data": err.body()}}
    except Exception as err:  # a world, task or verifier failure: a JSON-RPC error naming it, never a tool result
        log.exception("internal error on a JSON-RPC call")
        api = internal_error(err)
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": api.message, "data": api.body()}}
    return {"jsonrpc": "2.0", "id": rid, "result": result}


# -- routes -------------------------------------------------------------------------------

_STATE_QUERY: dict[str, Any] = {
    "parameters": [
        {
            "name": "session_id",
            "in": "query",
            "required": False,
            "description": "The session (from the metadata of /reset); without it, an empty state.",
            "schema": {"type": "string"},
        }
    ]
}
_JSONRPC_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            JSON_TYPE: {
                "schema": {
                    "type": "object",
                    "description": "A JSON-RPC 2.0 request (see the methods in the module docstring).",
                    "required": ["jsonrpc", "method"],
                    "properties": {
                        "jsonrpc": {"type": "string", "enum": ["2.0"]},
                        "id": {"type": ["string", "integer", "null"]},
                        "method": {"type": "string"},
                        "params": {"type": "object"},
                    },
                }
            }
        },
    }
}


def add_openenv_routes(app: FastAPI, manager: SessionManager) -> None:
    """Register the OpenEnv routes on ``app`` (``/health`` is the server's own)."""

    errors: dict[int | str, dict[str, Any]] = {
        400: {"model": ErrorResponse, "description": "Malformed request"},
        404: {"model": ErrorResponse, "description": "Unknown session, world or task"},
        410: {"model": ErrorResponse, "description": "Session closed or expired"},
        429: {"model": ErrorResponse, "description": "Rate or session limit"},
        503: {"model": ErrorResponse, "description": "Session capacity reached"},
    }

    async def metadata(request: Request) -> Response:
        names = ", ".join(manager.world_names)
        return json_response(
            {
                "name": "mirrorworld",
                "description": f"Mirror worlds of enterprise software ({names}): one tool call per step.",
                "version": API_VERSION,
                "author": "mirrorworld",
                "documentation_url": None,
                "readme_content": None,
            }
        )

    async def schema(request: Request) -> Response:
        return json_response(
            {
                "action": ToolAction.model_json_schema(),
                "mcp_actions": [CallToolAction.model_json_schema(), ListToolsAction.model_json_schema()],
                "observation": ToolObservation.model_json_schema(),
                "reset_observation": ToolObservation.model_json_schema(),
                "state": SessionState.model_json_schema(),
            }
        )

    async def reset(request: Request) -> Response:
        data = parse_json(await request.body())
        if not isinstance(data, dict):
            raise ApiError(400, "invalid_request", "the body must be a JSON object")
        live, episode_id = _reset(manager, data, client_of(request.scope), None)
        return json_response(_reset_payload(live, episode_id or None))

    async def step(request: Request) -> Response:
        data = parse_json(await request.body(), empty_ok=False)
        if not isinstance(data, dict):
            raise ApiError(400, "invalid_request", "the body must be a JSON object")
        sid = data.get("session_id")
        if not isinstance(sid, str):
            raise ApiError(400, "no_session", "session_id is required: take it from the metadata of /reset")
        unknown = set(data) - {"action", "session_id", "timeout_s", "request_id"}
        if unknown:
            raise ApiError(400, "invalid_request", f"{sorted(unknown)[0]}: unknown field")
        return json_response(_step_payload(manager, sid, data.get("action"), client_of(request.scope)))

    async def state(request: Request) -> Response:
        return json_response(_state_payload(manager, request.query_params.get("session_id")))

    async def mcp(request: Request) -> Response:
        body = await request.body()  # a body over the limit raises here: a 413, not a parse error
        try:
            data = parse_json(body, empty_ok=False)
        except ApiError:
            return json_response({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
        return json_response(jsonrpc(manager, data, client_of(request.scope)))

    for method, path, handler, extra, summary in (
        ("GET", "/metadata", metadata, None, "OpenEnv: environment metadata"),
        ("GET", "/schema", schema, None, "OpenEnv: action, observation and state schemas"),
        ("POST", "/reset", reset, body_schema(OpenEnvReset, manager.config), "OpenEnv: create (or reset) a session"),
        ("POST", "/step", step, body_schema(OpenEnvStep, manager.config), "OpenEnv: one tool call in a session"),
        ("GET", "/state", state, _STATE_QUERY, "OpenEnv: a session's state"),
        ("POST", "/mcp", mcp, _JSONRPC_BODY, "OpenEnv: JSON-RPC tools/list and tools/call"),
    ):
        app.add_api_route(
            path,
            guarded(handler),
            methods=[method],
            summary=summary,
            responses=errors,
            openapi_extra=extra,
            tags=["openenv"],
        )

    @app.websocket("/ws")
    async def ws(websocket: WebSocket) -> None:
        await serve_openenv_ws(websocket, manager)


async def serve_openenv_ws(websocket: WebSocket, manager: SessionManager) -> None:
    """One OpenEnv WebSocket connection: one session, created at the first reset (or attached)."""
    await websocket.accept()
    client = client_of(websocket.scope)
    started = time.perf_counter()
    count = 0
    sid: str | None = None
    owned = False
    episode_id: str | None = None
    attached = websocket.query_params.get("session_id")
    if attached is not None:
        try:
            manager.get(attached).attached.add("openenv-ws")
            sid = attached
        except ApiError as err:
            await websocket.send_text(_ws_error(err))
            await websocket.close()
            return
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                break
            raw = message.get("text")
            if raw is None:
                raw = message.get("bytes") or b""
            count += 1
            try:
                if len(raw) > manager.config.max_body_bytes:
                    raise ApiError(413, "payload_too_large", "the message is too large")
                msg = parse_json(raw, empty_ok=False)
                if not isinstance(msg, dict):
                    raise ApiError(400, "invalid_request", "a message must be a JSON object")
                kind = msg.get("type")
                data = msg.get("data", {})
                if kind == "close":
                    break
                if kind == "reset":
                    if not isinstance(data, dict):
                        raise ApiError(400, "invalid_request", "data must be an object")
                    previous = sid
                    live, episode_id = _reset(manager, data, client, sid)
                    if live.id != previous:
                        if previous is not None and owned and previous in manager:
                            manager.close(previous, "replaced by a reset")
                        sid, owned = live.id, True
                        live.attached.add("openenv-ws")
                    reply: dict[str, Any] = {"type": "observation", "data": _reset_payload(live, episode_id or None)}
                elif kind == "step":
                    if sid is None:
                        raise ApiError(409, "no_session", "send a reset before the first step")
                    reply = {"type": "observation", "data": _step_payload(manager, sid, data, client)}
                elif kind == "state":
                    reply = {"type": "state", "data": _state_payload(manager, sid, episode_id or None)}
                elif kind == "mcp":
                    reply = {"type": "mcp", "data": jsonrpc(manager, data, client, sid)}
                else:
                    raise ApiError(400, "unknown_type", f"unknown message type {str(kind)[:40]!r}")
                await websocket.send_text(dumps(reply).decode())
            except ApiError as err:
                await websocket.send_text(_ws_error(err))
            except Exception as err:
                log.exception("internal error on an OpenEnv WebSocket message")
                await websocket.send_text(_ws_error(internal_error(err)))
    except WebSocketDisconnect:
        pass
    finally:
        if sid is not None and sid in manager:
            live = manager.get(sid)
            live.attached.discard("openenv-ws")
            if owned:
                manager.close(sid, "its WebSocket connection closed")
        if manager.config.access_log:
            access.info("%s WS /ws %d messages %.2fs", client, count, time.perf_counter() - started)


def _ws_error(err: ApiError) -> str:
    code = _WS_CODES.get(err.code, "UNKNOWN_TYPE" if err.code == "unknown_type" else "EXECUTION_ERROR")
    return dumps({"type": "error", "data": {"message": err.message, "code": code, "error": err.code}}).decode()
