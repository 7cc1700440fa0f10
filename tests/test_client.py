"""The typed client, synchronous and asynchronous, over HTTP and over the WebSocket."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("websockets")

from mirrorworld import make_world
from mirrorworld.client import (
    AsyncClient,
    Client,
    RemoteError,
    RemoteVerdict,
    SessionInfo,
    SessionState,
    StepResult,
)
from mirrorworld.server import BackgroundServer, ServerConfig

TRANSPORTS = ["http", "ws"]

# Calls whose results carry the awkward parts of JSON: non-ASCII text, escapes, a lone surrogate, errors.
AWKWARD: list[tuple[str, Any]] = [
    ("search_customers", {"query": "Brown"}),
    ("search_customers", {"query": 'Zoë \u202e\u0000 "quoted" \\ back'}),
    ("search_customers", '{"query": "\\udc80\\udc80"}'),
    ("get_customer", {"customer_id": "x"}),
    ("no_such_tool", None),
    ("reply_ticket", {"ticket_id": 11, "body": "Dear Zoë — ✓ 😀", "public": False}),
    ("get_ticket", {"ticket_id": 11}),
    ("get_policy", {}),
]


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    with BackgroundServer(ServerConfig(access_log=False)) as s:
        yield s


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_sync_client_plays_an_episode(server: BackgroundServer, transport: Any) -> None:
    world = make_world("helpdesk")
    task = world.task("update_email", 1)
    with Client(server.url, transport=transport) as client:
        assert client.health()["status"] == "healthy"
        assert client.worlds()[0]["name"] == "helpdesk"
        with client.create("helpdesk", task_id=task.id, max_steps=10) as session:
            assert isinstance(session.info, SessionInfo) and session.info.instruction == task.instruction
            with world.session(task) as local:
                for call in task.gold:
                    result = session.step(call.tool, call.args)
                    assert isinstance(result, StepResult) and result.ok and result.error is None
                    assert result.content == local.call(call.tool, call.args).content()
                st = session.state()
                assert isinstance(st, SessionState) and st.state_hash == local.state_hash() and st.terminated
            assert result.verdict is not None and result.verdict["passed"]
            verdict = session.verdict()
            assert isinstance(verdict, RemoteVerdict) and verdict.passed and verdict.score == 1.0
            assert set(verdict.to_dict()) == {"passed", "score", "breakdown", "evidence"}
        with pytest.raises(RemoteError) as err:
            client.session(session.id)
        assert err.value.status == 410 and err.value.code == "session_closed"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_results_are_byte_identical_to_local_ones(server: BackgroundServer, transport: Any) -> None:
    world = make_world("helpdesk")
    task = world.task("kb_answer", 2)
    with (
        Client(server.url, transport=transport) as client,
        client.create(task_id=task.id) as remote,
        world.session(task) as local,
    ):
        for tool, args in AWKWARD:
            got = remote.step(tool, args)
            want = local.call(tool, args)
            assert got.content == want.content(), tool
            assert got.ok == want.ok
            if not want.ok:
                assert got.error == want.error
        assert remote.state_hash() == local.state_hash()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_fork_reset_and_errors(server: BackgroundServer, transport: Any) -> None:
    with Client(server.url, transport=transport) as client:
        session = client.create(family="cancel_order", seed=1)
        session.step("cancel_order", {"order_id": 523, "reason": "customer_request"})
        twin = session.fork()
        assert twin.id != session.id and twin.state_hash() == session.state_hash()
        info = session.reset(task_id="triage/2")
        assert info.task_id == "triage/2" and session.state().step == 0
        assert twin.state().step == 1
        with pytest.raises(RemoteError) as err:
            client.create(family="no_such_family", seed=1)
        assert (err.value.status, err.value.code) == (404, "unknown_task")
        with pytest.raises(RemoteError) as err:
            client.create(max_steps=0)
        assert (err.value.status, err.value.code) == (400, "invalid_request")
        with pytest.raises(RemoteError):
            client.session("nope")
        twin.close()
        twin.close()  # closing twice is harmless
        session.close()


def test_a_dead_server_is_a_connection_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for transport in TRANSPORTS:
        with Client(f"http://127.0.0.1:{port}", transport=transport, timeout=2) as client:  # type: ignore[arg-type]
            with pytest.raises(RemoteError) as err:
                client.create()
            assert err.value.code == "connection_error" and err.value.status == 0


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_async_client_runs_sessions_concurrently(server: BackgroundServer, transport: Any) -> None:
    world = make_world("helpdesk")

    async def main() -> None:
        async with AsyncClient(server.url, transport=transport) as client:
            assert (await client.health())["status"] == "healthy"
            assert (await client.world("helpdesk"))["id"] == world.id

            async def one(seed: int) -> float:
                task = world.task("cancel_order", seed)
                async with await client.create(task_id=task.id) as session:
                    for call in task.gold:
                        result = await session.step(call.tool, call.args)
                        assert result.ok
                    twin = await session.fork()
                    assert (await twin.state()).state_hash == (await session.state()).state_hash
                    await twin.close()
                    return (await session.verdict()).score

            scores = await asyncio.gather(*(one(seed) for seed in range(1, 9)))
            assert scores == [1.0] * 8
            with pytest.raises(RemoteError) as err:
                await client.session("nope")
            assert err.value.code == "unknown_session"

    asyncio.run(main())


def test_the_token_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    token = "a-long-enough-token"
    with BackgroundServer(ServerConfig(access_log=False, token=token)) as s:
        for transport in TRANSPORTS:
            with Client(s.url, transport=transport, token=token) as client:  # type: ignore[arg-type]
                client.create().close()
            monkeypatch.setenv("MIRRORWORLD_TOKEN", token)
            with Client(s.url, transport=transport) as client:  # type: ignore[arg-type]
                client.create().close()
            monkeypatch.delenv("MIRRORWORLD_TOKEN")
        with Client(s.url) as client, pytest.raises(RemoteError) as err:
            client.create()
        assert (err.value.status, err.value.code) == (401, "unauthorized")
