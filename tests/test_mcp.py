"""A session's tools over MCP, checked with the official SDK's own client (streamable HTTP and stdio)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from mirrorworld import make_world
from mirrorworld.client import Client
from mirrorworld.server import BackgroundServer, ServerConfig


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    with BackgroundServer(ServerConfig(access_log=False)) as s:
        yield s


async def exercise(session: ClientSession, task_id: str) -> None:
    world = make_world("helpdesk")
    family, _, seed = task_id.partition("/")
    task = world.task(family, int(seed))
    tools = (await session.list_tools()).tools
    assert [t.name for t in tools] == list(world.tool_names)
    by_name = {t.name: t for t in tools}
    assert by_name["get_customer"].inputSchema == world.tools_by_name["get_customer"].parameters_schema

    ok = await session.call_tool("get_customer", {"customer_id": 3})
    assert not ok.isError and ok.structuredContent is not None
    assert ok.structuredContent["customer"]["id"] == 3
    assert json.loads(ok.content[0].text) == ok.structuredContent  # type: ignore[union-attr]

    for args, code in (
        ({"customer_id": "not a number"}, "invalid_arguments"),
        ({"customer_id": 3, "extra": True}, "invalid_arguments"),
        ({}, "invalid_arguments"),
    ):
        bad = await session.call_tool("get_customer", args)
        assert bad.isError and bad.structuredContent is not None
        assert bad.structuredContent["error"]["code"] == code and bad.structuredContent["error"]["message"]
    unknown = await session.call_tool("no_such_tool", {})
    assert unknown.isError and unknown.structuredContent["error"]["code"] == "unknown_tool"  # type: ignore[index]

    text = (await session.read_resource("mirrorworld://task")).contents[0]
    assert text.text == task.instruction  # type: ignore[union-attr]
    for call in task.gold:
        result = await session.call_tool(call.tool, call.args)
        assert not result.isError, result
    meta: dict[str, Any] = result.meta["mirrorworld"]  # type: ignore[index]
    assert meta["done"] and meta["verdict"]["passed"]


def test_streamable_http_serves_a_sessions_tools(server: BackgroundServer) -> None:
    with Client(server.url) as client:
        remote = client.create(task_id="cancel_order/2")
        before = remote.state()

        async def main() -> None:
            url = f"{server.url}/v1/sessions/{remote.id}/mcp"
            async with streamable_http_client(url) as (read, write, _), ClientSession(read, write) as session:
                await session.initialize()
                await exercise(session, "cancel_order/2")

        asyncio.run(main())
        after = remote.state()
        assert after.terminated and after.state_hash != before.state_hash
        assert remote.verdict().passed  # the MCP calls acted on this very session
        remote.close()


def test_mcp_on_an_unknown_session_is_refused(server: BackgroundServer) -> None:
    import httpx

    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    headers = {"accept": "application/json, text/event-stream"}
    r = httpx.post(f"{server.url}/v1/sessions/nope/mcp", json=body, headers=headers)
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_session"


def test_stdio_serves_one_session() -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mirrorworld.server.mcp", "--world", "helpdesk", "--task-id", "update_email/1"],
    )

    async def main() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.instructions is not None and "update_email" not in init.instructions
            assert make_world("helpdesk").task("update_email", 1).instruction in init.instructions
            await exercise(session, "update_email/1")

    asyncio.run(main())


def test_stdio_reports_a_bad_task_in_one_line(capfd: pytest.CaptureFixture[str]) -> None:
    from mirrorworld.server.mcp import main

    assert main(["--task-id", "no_such_family/1"]) == 1
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("mirrorworld: error:") and "no_such_family" in err[0]
