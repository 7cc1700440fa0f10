"""The OpenEnv protocol, checked with the real ``openenv`` package: its client and its runtime validator."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("openenv")
httpx = pytest.importorskip("httpx")

from openenv.cli._validation import validate_running_environment  # noqa: E402
from openenv.core.generic_client import GenericEnvClient  # noqa: E402

from mirrorworld import make_world  # noqa: E402
from mirrorworld.server import BackgroundServer, ServerConfig  # noqa: E402


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    with BackgroundServer(ServerConfig(access_log=False)) as s:
        yield s


def test_openenvs_runtime_validator_passes(server: BackgroundServer) -> None:
    report = validate_running_environment(server.url)
    failed = [c for c in report["criteria"] if not c["passed"]]
    assert report["passed"] and not failed, failed
    assert report["mode"] == "simulation" and report["standard_profile"] == "openenv-http/1.x"


def test_openenvs_generic_client_plays_an_episode(server: BackgroundServer) -> None:
    task = make_world("helpdesk").task("cancel_order", 3)
    with GenericEnvClient(base_url=server.url).sync() as env:
        first = env.reset(task_id=task.id, max_steps=10)
        assert first.observation["instruction"] == task.instruction and not first.done and first.reward is None
        assert "cancel_order" in [t["name"] for t in first.observation["tools"]]
        assert all(t["inputSchema"]["type"] == "object" for t in first.observation["tools"])
        session_id = first.metadata["session_id"] if first.metadata else None
        assert session_id in server.manager

        bad = env.step({"tool": "cancel_order", "args": {"order_id": "x"}})
        assert not bad.observation["ok"] and bad.observation["result"]["error"]["code"] == "invalid_arguments"
        total = 0.0
        for call in task.gold:
            result = env.step({"tool": call.tool, "args": call.args})
            assert result.observation["ok"], result.observation
            total += result.reward or 0.0
        assert result.done and result.observation["verdict"]["passed"] and total == pytest.approx(1.0)
        state = env.state()
        assert state["episode_id"] == session_id and state["step_count"] == len(task.gold) + 1 and state["done"]

        again = env.reset(family="kb_answer", seed=1)  # a reset reuses the connection's session
        assert again.metadata is not None and again.metadata["session_id"] == session_id
        assert env.state()["step_count"] == 0
    assert session_id not in server.manager  # closed with the connection


def test_openenv_errors_are_error_frames(server: BackgroundServer) -> None:
    async def main() -> None:
        env = GenericEnvClient(base_url=server.url)
        async with env:
            with pytest.raises(RuntimeError, match="reset"):
                await env.step({"tool": "get_policy"})
            with pytest.raises(RuntimeError, match="no world"):
                await env.reset(world="nope")
            await env.reset(seed=2)
            with pytest.raises(RuntimeError, match="tool"):
                await env.step({"not": "an action"})
            ok = await env.step({"tool": "get_policy", "args": "{}"})
            assert ok.observation["ok"]

    asyncio.run(main())


def test_http_reset_step_state(server: BackgroundServer) -> None:
    with httpx.Client(base_url=server.url) as c:
        schema = c.get("/schema").json()
        assert {"action", "observation", "state"} <= set(schema) and "tool" in schema["action"]["properties"]
        assert c.get("/metadata").json()["name"] == "mirrorworld"
        r = c.post("/reset", json={"seed": 3, "episode_id": "ep-1"}).json()
        sid = r["metadata"]["session_id"]
        assert r["metadata"]["episode_id"] == "ep-1" and r["observation"]["step"] == 0
        step = c.post("/step", json={"action": {"tool": "get_policy"}, "session_id": sid}).json()
        assert step["observation"]["ok"] and step["done"] is False
        assert c.get("/state", params={"session_id": sid}).json()["step_count"] == 1
        assert c.get("/state").json() == {
            "episode_id": None,
            "step_count": 0,
            "session_id": None,
            "task_id": None,
            "state_hash": None,
            "done": False,
        }
        missing = c.post("/step", json={"action": {"tool": "get_policy"}})
        assert missing.status_code == 400 and missing.json()["error"]["code"] == "no_session"
        assert c.post("/step", json={"action": {}, "session_id": sid}).status_code == 400
        assert c.post("/step", json={"action": {"tool": "get_policy"}, "session_id": "nope"}).status_code == 404
        c.delete(f"/v1/sessions/{sid}")


def rpc(c: Any, method: str, params: Any = None, rid: Any = 1) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        body["params"] = params
    r = c.post("/mcp", json=body)
    assert r.status_code == 200
    return dict(r.json())


def test_openenvs_json_rpc_mcp_endpoint(server: BackgroundServer) -> None:
    with httpx.Client(base_url=server.url) as c:
        tools = rpc(c, "tools/list")["result"]["tools"]
        assert [t["name"] for t in tools] == list(make_world("helpdesk").tool_names)
        sid = rpc(c, "openenv/session/create", {"task_id": "triage/1"})["result"]["session_id"]
        call = rpc(c, "tools/call", {"session_id": sid, "name": "get_ticket", "arguments": {"ticket_id": 801}})
        assert call["result"]["isError"] is False and call["result"]["structuredContent"]["ticket"]["id"] == 801
        bad = rpc(c, "tools/call", {"session_id": sid, "name": "get_ticket", "arguments": {"ticket_id": "x"}})
        assert bad["result"]["isError"] and bad["result"]["structuredContent"]["error"]["code"] == "invalid_arguments"
        assert rpc(c, "tools/call", {"name": "get_ticket"})["error"]["code"] == -32602
        assert rpc(c, "nope/nope")["error"]["code"] == -32601
        assert rpc(c, "tools/list", params=[1])["error"]["code"] == -32602
        assert c.post("/mcp", json={}).json()["error"]["code"] == -32600
        assert c.post("/mcp", content=b"{oops").json()["error"]["code"] == -32700
        assert rpc(c, "openenv/session/close", {"session_id": sid})["result"]["closed"]
        gone = rpc(c, "tools/call", {"session_id": sid, "name": "get_policy"})
        assert gone["error"]["data"]["error"]["code"] == "session_closed"


# -- OpenEnv's MCP client: MCPToolClient with a task id, CallToolAction, ListToolsAction ---------------------------


def test_mcp_tool_client_resets_onto_a_task_and_plays_it_to_a_verdict(server: BackgroundServer) -> None:
    from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation, ListToolsObservation
    from openenv.core.mcp_client import MCPToolClient

    world = make_world("helpdesk")
    task = world.task("refund_damaged", 3)
    with MCPToolClient(base_url=server.url).sync() as env:
        first = env.reset(task_id=task.id)
        assert isinstance(first.observation, ListToolsObservation)
        assert [t.name for t in first.observation.tools] == list(world.tool_names)
        refund = next(t for t in first.observation.tools if t.name == "issue_refund")
        assert refund.input_schema == world.tools_by_name["issue_refund"].parameters_schema
        assert first.metadata["task_id"] == task.id and first.metadata["instruction"] == task.instruction
        assert [t.name for t in env.list_tools()] == list(world.tool_names)
        assert env.state().step_count == 0  # listing the tools is not a step
        last = None
        for call in task.gold:
            last = env.step(CallToolAction(tool_name=call.tool, arguments=call.args))
            assert isinstance(last.observation, CallToolObservation)
            assert last.observation.tool_name == call.tool and last.observation.error is None
        assert last is not None and last.done
        assert last.metadata["verdict"]["passed"] is True
        # A refused call is a result the agent reads, not a transport error.
        env.reset(task_id=task.id)
        refused = env.step(CallToolAction(tool_name="issue_refund", arguments={"order_id": "x"}))
        assert refused.observation.result["error"]["code"] == "invalid_arguments" and not refused.done


def test_mcp_tool_client_call_tool_returns_the_result(server: BackgroundServer) -> None:
    from openenv.core.mcp_client import MCPToolClient

    with MCPToolClient(base_url=server.url).sync() as env:
        env.reset(task_id="cancel_order/0")
        policy = env.call_tool("get_policy")
        assert policy and "cancel" in json_text(policy).lower()


def json_text(value: Any) -> str:
    import json

    return value if isinstance(value, str) else json.dumps(value)


@pytest.mark.parametrize(
    ("action", "message"),
    [
        ({"type": "call_tool"}, "tool_name"),
        ({"type": "call_tool", "tool_name": "get_policy", "arguments": [1]}, "arguments"),
        ({"type": "call_tool", "tool_name": "get_policy", "extra": 1}, "unknown field"),
        ({"type": "list_tools", "tool_name": "x"}, "unknown field"),
        ({"type": "drop_tables"}, "action.type"),
        ({"type": "call_tool", "tool_name": "x" * 500}, "tool_name"),
    ],
)
def test_malformed_mcp_actions_are_400s_and_take_no_step(
    server: BackgroundServer, action: dict[str, Any], message: str
) -> None:
    with httpx.Client(base_url=server.url) as c:
        sid = c.post("/reset", json={"task_id": "cancel_order/0"}).json()["metadata"]["session_id"]
        r = c.post("/step", json={"session_id": sid, "action": action})
        assert r.status_code == 400 and message in r.text, r.text
        assert c.get("/state", params={"session_id": sid}).json()["step_count"] == 0
