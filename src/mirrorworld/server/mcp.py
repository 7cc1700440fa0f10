"""A session's tools as an MCP server, on the official ``mcp`` SDK (1.x, low-level API).

Two transports:

* **streamable HTTP**, inside the session server: ``/v1/sessions/{id}/mcp``
  serves the tools of session ``id`` (stateless JSON responses; create the
  session first with ``POST /v1/sessions``). Auth and limits are the server's;
  a request's body is read whole before the SDK sees it, so that a client
  hanging up mid-body is no error of the SDK's (which would log it as one).
* **stdio**, with ``mirrorworld mcp --world helpdesk --task-id refund_damaged/3``
  (or ``python -m mirrorworld.server.mcp ...``): one session of one task for the
  life of the process, for desktop MCP clients.

The tools are the world's, in the MCP form of their one ``@tool`` declaration
(:func:`mirrorworld.core.schemas.mcp_tool`). A call runs
exactly like ``Session.call``: a bad argument, an unknown tool or a refused
action is a result with ``isError: true`` whose ``structuredContent`` is
``{"error": {code, message}}`` (the SDK's own JSON-schema check is turned off
so the world's coercion and error codes apply). ``_meta.mirrorworld`` of a
result carries the step count, the shaped reward, whether the episode is over
and, on the call that ends it, the verdict. Resources: ``mirrorworld://task``
(the instruction) and ``mirrorworld://policy``.

Why 1.x: the 2.x line renamed FastMCP and moved its HTTP client to a new
package, and OpenEnv's client (``openenv``, via ``fastmcp<4``) still requires
``mcp<2``; pinning 1.x lets one environment hold the server, the MCP client
and OpenEnv.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyUrl

from mirrorworld.core.schemas import mcp_tool
from mirrorworld.errors import MirrorworldError
from mirrorworld.options import registry_of
from mirrorworld.server.openenv import mcp_call_result
from mirrorworld.server.options import add_mcp_arguments
from mirrorworld.server.sessions import ApiError, SessionManager
from mirrorworld.server.wire import error_response, internal_error, log

__all__ = ["build_mcp_server", "main", "run_stdio", "session_mcp_app"]

_PATH = re.compile(r"/v1/sessions/([^/]+)/mcp/?$")

Locate = Callable[[Server[Any, Any]], tuple[str, str]]
"""Given the server (inside a request), the session id and the client key to use."""


def _error_result(err: ApiError) -> types.CallToolResult:
    body = err.body()
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(body, separators=(",", ":")))],
        structuredContent=body,
        isError=True,
    )


def build_mcp_server(manager: SessionManager, locate: Locate, *, instructions: str | None = None) -> Server[Any, Any]:
    """An MCP server whose tools act on the session ``locate`` names for each request."""
    server: Server[Any, Any] = Server("mirrorworld", instructions=instructions)

    @server.list_tools()  # type: ignore[untyped-decorator, no-untyped-call, misc]
    async def list_tools() -> list[types.Tool]:
        sid, _ = locate(server)
        world = manager.get(sid).world if sid in manager else manager.world(manager.world_names[0])
        return [types.Tool(**mcp_tool(t)) for t in world.tools]

    @server.call_tool(validate_input=False)  # type: ignore[untyped-decorator, no-untyped-call, misc]
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        try:
            sid, client = locate(server)
            out = manager.step(sid, name, arguments, client)
        except ApiError as err:
            return _error_result(err)
        except Exception as err:  # the world, task or verifier failed: say so, not the exception's text
            log.exception("internal error on an MCP tool call")
            return _error_result(internal_error(err))
        result = mcp_call_result(out)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=result["content"][0]["text"])],
            structuredContent=result["structuredContent"],
            isError=result["isError"],
            _meta=result["_meta"],
        )

    @server.list_resources()  # type: ignore[untyped-decorator, no-untyped-call, misc]
    async def list_resources() -> list[types.Resource]:
        return [
            types.Resource(uri=AnyUrl("mirrorworld://task"), name="task", mimeType="text/plain"),
            types.Resource(uri=AnyUrl("mirrorworld://policy"), name="policy", mimeType="text/markdown"),
        ]

    @server.read_resource()  # type: ignore[untyped-decorator, no-untyped-call, misc]
    async def read_resource(uri: AnyUrl) -> Iterable[ReadResourceContents]:
        sid, _ = locate(server)
        live = manager.get(sid)
        if str(uri) == "mirrorworld://task":
            return [ReadResourceContents(content=live.episode.task.instruction, mime_type="text/plain")]
        if str(uri) == "mirrorworld://policy":
            return [ReadResourceContents(content=live.world.policy, mime_type="text/markdown")]
        raise ValueError(f"unknown resource {uri}")

    return server


def _http_locate(server: Server[Any, Any]) -> tuple[str, str]:
    request = server.request_context.request
    if request is None:
        raise ApiError(400, "invalid_request", "no HTTP request")
    path = request.scope.get("path", "")
    match = _PATH.search(path)
    if match is None:
        raise ApiError(404, "unknown_session", "no session in the path")
    peer = request.scope.get("client")
    return match.group(1), str(peer[0]) if peer else "unknown"


def session_mcp_app(
    manager: SessionManager,
) -> tuple[Callable[..., Any], Callable[[], contextlib.AbstractAsyncContextManager[Any]]]:
    """The ASGI handler of ``/v1/sessions/{id}/mcp`` and the lifespan context it needs."""
    server = build_mcp_server(manager, _http_locate)
    security = None
    if manager.config.token is None:
        # Unauthenticated servers are on loopback: refuse other Host headers (DNS rebinding).
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1", "127.0.0.1:*", "localhost", "localhost:*", "[::1]", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    http = StreamableHTTPSessionManager(app=server, stateless=True, json_response=True, security_settings=security)

    async def handle(scope: Any, receive: Any, send: Any) -> None:
        match = _PATH.search(scope.get("path", ""))
        sid = match.group(1) if match else ""
        if sid not in manager:
            try:
                manager.get(sid)
            except ApiError as err:
                await error_response(err)(scope, receive, send)
                return
        if scope.get("method") == "POST":
            body = await _read_body(receive)
            if body is None:
                return  # the client went away: no one to answer
            receive = _replay(body, receive)
        await http.handle_request(scope, receive, send)

    @contextlib.asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        async with http.run():
            yield

    return handle, lifespan


async def _read_body(receive: Callable[[], Any]) -> bytes | None:
    """The whole body of an HTTP request, or None if the client disconnected first."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Callable[[], Any]) -> Callable[[], Any]:
    """A ``receive`` that gives ``body`` as one message, then whatever ``receive`` gives (a disconnect)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Any:
        return pending.pop() if pending else await receive()

    return replayed


async def run_stdio(manager: SessionManager, session_id: str) -> None:
    """Serve session ``session_id`` over stdin/stdout until the client closes."""
    from mcp.server.stdio import stdio_server

    live = manager.get(session_id)
    instructions = (
        f"You are working in {live.world.id}. Read the policy (resource mirrorworld://policy or the get_policy "
        f"tool) and use the tools to resolve this task:\n\n{live.episode.task.instruction}"
    )
    server = build_mcp_server(manager, lambda _: (session_id, "stdio"), instructions=instructions)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def run(args: argparse.Namespace) -> int:
    """``mirrorworld mcp``: one session over stdio."""
    from mirrorworld.server.config import ServerConfig

    manager = SessionManager(ServerConfig(access_log=False), registry_of(args))
    spec: dict[str, Any] = {"world": args.world, "split": args.split, "max_steps": args.max_steps}
    for key in ("task_id", "family", "seed"):
        if getattr(args, key) is not None:
            spec[key] = getattr(args, key)
    try:
        live = manager.create(spec, "stdio")
    except ApiError as err:
        raise MirrorworldError(err.message) from None
    try:
        anyio.run(run_stdio, manager, live.id)
    finally:
        manager.close_all()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mirrorworld.server.mcp``: the same as ``mirrorworld mcp``."""
    p = argparse.ArgumentParser(prog="mirrorworld mcp", description="Serve one session's tools over MCP stdio.")
    add_mcp_arguments(p)
    try:
        return run(p.parse_args(argv))
    except MirrorworldError as err:
        print(f"mirrorworld: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
