"""The session server over HTTP and its own WebSocket protocol: lifecycle, errors, limits, auth, logs, shutdown.

Every server here runs on a background thread bound to an ephemeral loopback
port (``BackgroundServer``) and is shut down and joined by its fixture.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")
ws_sync = pytest.importorskip("websockets.sync.client")

from mirrorworld import make_world  # noqa: E402
from mirrorworld.errors import MirrorworldError  # noqa: E402
from mirrorworld.server import BackgroundServer, ServerConfig, SessionManager  # noqa: E402
from mirrorworld.server.config import is_loopback  # noqa: E402

STEP = {"tool": "get_customer", "args": {"customer_id": 3}}
CANCEL = {"tool": "cancel_order", "args": {"order_id": 523, "reason": "customer_request"}}


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    with BackgroundServer(ServerConfig(access_log=False)) as s:
        yield s


@pytest.fixture()
def http(server: BackgroundServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=10) as c:
        yield c


def create(http: httpx.Client, **spec: Any) -> str:
    r = http.post("/v1/sessions", json={"family": "cancel_order", "seed": 1, **spec})
    assert r.status_code == 201, r.text
    return str(r.json()["session_id"])


def state(http: httpx.Client, sid: str) -> dict[str, Any]:
    r = http.get(f"/v1/sessions/{sid}/state")
    assert r.status_code == 200, r.text
    return dict(r.json())


def is_error(r: httpx.Response, status: int, code: str) -> None:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and body["error"]["code"] == code and body["error"]["message"], body


# -- lifecycle --------------------------------------------------------------------


def test_health_and_worlds(http: httpx.Client) -> None:
    assert http.get("/health").json()["status"] == "healthy"
    worlds = http.get("/v1/worlds").json()["worlds"]
    assert "helpdesk" in [w["name"] for w in worlds]
    detail = http.get("/v1/worlds/helpdesk").json()
    assert detail["id"] == "mirrorworld/Helpdesk-v0" and "respond" in [t["function"]["name"] for t in detail["tools"]]
    is_error(http.get("/v1/worlds/nope"), 404, "unknown_world")


def test_a_session_from_create_to_close(http: httpx.Client) -> None:
    world = make_world("helpdesk")
    task = world.task("cancel_order", 1)
    r = http.post("/v1/sessions", json={"family": "cancel_order", "seed": 1, "max_steps": 10})
    assert r.status_code == 201
    info = r.json()
    sid = info["session_id"]
    assert info["task_id"] == "cancel_order/1" and info["instruction"] == task.instruction
    assert info["step"] == 0 and not info["done"] and info["max_steps"] == 10
    assert http.get(f"/v1/sessions/{sid}").json()["task_id"] == "cancel_order/1"

    pristine = state(http, sid)["state_hash"]
    total = 0.0
    with world.session(task) as local:
        assert pristine == local.state_hash()
        for i, call in enumerate(task.gold):
            out = http.post(f"/v1/sessions/{sid}/step", json={"tool": call.tool, "args": call.args}).json()
            total += out["reward"]
            expected = local.call(call.tool, call.args)
            assert out["ok"] and json.dumps(out["result"], separators=(",", ":")) == expected.content()
            assert out["step"] == i + 1
        assert state(http, sid)["state_hash"] == local.state_hash()
    # shaping terms sum to zero over an episode: the return is the verdict's score
    assert out["terminated"] and out["done"] and out["verdict"]["passed"] and total == pytest.approx(1.0)
    verdict = http.post(f"/v1/sessions/{sid}/verdict").json()
    assert verdict["passed"] and verdict["score"] == 1.0 and verdict["task_id"] == "cancel_order/1"
    over = http.post(f"/v1/sessions/{sid}/step", json=STEP).json()
    assert not over["ok"] and over["result"]["error"]["code"] == "episode_over"

    assert http.delete(f"/v1/sessions/{sid}").json() == {"session_id": sid, "closed": True}
    is_error(http.get(f"/v1/sessions/{sid}/state"), 410, "session_closed")
    is_error(http.delete(f"/v1/sessions/{sid}"), 410, "session_closed")
    is_error(http.get("/v1/sessions/never-was/state"), 404, "unknown_session")


def test_reset_starts_a_new_episode_in_the_same_session(http: httpx.Client) -> None:
    sid = create(http)
    http.post(f"/v1/sessions/{sid}/step", json=CANCEL)
    r = http.post(f"/v1/sessions/{sid}/reset", json={"task_id": "kb_answer/1"})
    assert r.status_code == 200 and r.json()["session_id"] == sid and r.json()["task_id"] == "kb_answer/1"
    assert state(http, sid)["step"] == 0
    with make_world("helpdesk").session(make_world("helpdesk").task("kb_answer", 1)) as local:
        assert state(http, sid)["state_hash"] == local.state_hash()


@pytest.mark.parametrize(
    ("spec", "task_id"),
    [
        ({"task_id": "triage/3"}, "triage/3"),
        ({"family": "update_email", "seed": 5}, "update_email/5"),
        ({"seed": 4, "split": "test"}, None),
        ({"index": 11, "split": "train", "families": ["kb_answer", "triage"]}, None),
    ],
)
def test_task_selection_matches_the_local_environments(
    http: httpx.Client, spec: dict[str, Any], task_id: str | None
) -> None:
    world = make_world("helpdesk")
    r = http.post("/v1/sessions", json=spec)
    assert r.status_code == 201, r.text
    if task_id is None:  # the index-th task of the split, as MirrorEnv.reset(seed=index) picks it
        families = tuple(spec["families"]) if "families" in spec else None
        task_id = world.task_for(spec["split"], spec.get("index", spec.get("seed")), families).id
    assert r.json()["task_id"] == task_id


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"world": "nope"}, 404, "unknown_world"),
        ({"family": "nope", "seed": 1}, 404, "unknown_task"),
        ({"families": ["nope"]}, 404, "unknown_task"),
        ({"task_id": "cancel_order"}, 400, "invalid_request"),
        ({"task_id": "cancel_order/x"}, 400, "invalid_request"),
        ({"family": "cancel_order"}, 400, "invalid_request"),
        ({"seed": -1}, 400, "invalid_request"),
        ({"seed": 1.5}, 400, "invalid_request"),
        ({"seed": True}, 400, "invalid_request"),
        ({"max_steps": 0}, 400, "invalid_request"),
        ({"max_steps": 5000}, 400, "invalid_request"),
        ({"split": "dev"}, 400, "invalid_request"),
        ({"colour": "red"}, 400, "invalid_request"),
        ([1, 2], 400, "invalid_request"),
    ],
)
def test_bad_create_requests_are_structured_errors(http: httpx.Client, body: Any, status: int, code: str) -> None:
    before = http.get("/health").json()["sessions"]
    is_error(http.post("/v1/sessions", json=body), status, code)
    assert http.get("/health").json()["sessions"] == before


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"",
        b"[]",
        b'"tool"',
        b'{"tool": 5}',
        b'{"args": {}}',
        b'{"tool": "get_customer", "args": 5}',
        b'{"tool": "get_customer", "args": {}, "extra": 1}',
        json.dumps({"tool": "x" * 300}).encode(),
        b'{"tool": "get_customer", "args": {"customer_id": NaN}}',
        b"[" * 100_000 + b"]" * 100_000,
        "\udcff".encode("utf-8", "surrogatepass"),
    ],
)
def test_malformed_steps_are_request_errors_and_change_nothing(http: httpx.Client, body: bytes) -> None:
    sid = create(http)
    before = state(http, sid)
    r = http.post(f"/v1/sessions/{sid}/step", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] in ("invalid_json", "invalid_request"), r.text
    assert state(http, sid) == before


@pytest.mark.parametrize(
    "args",
    [
        "{bad json",
        "[1]",
        {"customer_id": "x"},
        {"customer_id": 3, "unknown": 1},
        {"customer_id": 10**30},
        '{"customer_id": "\\udc80"}',
        {"customer_id": "\u202e\x00"},
    ],
)
def test_bad_tool_calls_are_error_observations(http: httpx.Client, args: Any) -> None:
    sid = create(http)
    before = state(http, sid)["state_hash"]
    out = http.post(f"/v1/sessions/{sid}/step", json={"tool": "cancel_order", "args": args})
    assert out.status_code == 200
    body = out.json()
    assert not body["ok"] and set(body["result"]["error"]) >= {"code", "message"}
    assert state(http, sid)["state_hash"] == before


def test_fork_continues_from_the_parents_state_and_then_diverges(http: httpx.Client) -> None:
    sid = create(http)
    assert http.post(f"/v1/sessions/{sid}/step", json=CANCEL).json()["ok"]
    r = http.post(f"/v1/sessions/{sid}/fork")
    assert r.status_code == 201
    twin = r.json()["session_id"]
    assert twin != sid and r.json()["step"] == 1
    assert state(http, twin)["state_hash"] == state(http, sid)["state_hash"]
    note = {"tool": "reply_ticket", "args": {"ticket_id": 11, "body": "twin only", "public": False}}
    assert http.post(f"/v1/sessions/{twin}/step", json=note).json()["ok"]
    assert state(http, twin)["state_hash"] != state(http, sid)["state_hash"]
    assert state(http, sid)["step"] == 1 and not state(http, sid)["done"]


# -- the WebSocket protocol --------------------------------------------------------


def test_websocket_protocol(server: BackgroundServer, http: httpx.Client) -> None:
    url = server.url.replace("http://", "ws://") + "/v1/ws"
    with ws_sync.connect(url) as ws:

        def ask(msg: Any) -> dict[str, Any]:
            ws.send(msg if isinstance(msg, str) else json.dumps(msg))
            return dict(json.loads(ws.recv()))

        created = ask({"op": "create", "id": "c1", "family": "cancel_order", "seed": 1})
        assert created["id"] == "c1"
        sid = created["data"]["session_id"]
        step = ask({"op": "step", "id": 2, "session_id": sid, **STEP})
        assert step["id"] == 2 and step["data"]["ok"] and step["data"]["result"]["customer"]["id"] == 3
        assert ask({"op": "state", "id": 3, "session_id": sid})["data"]["step"] == 1
        fork = ask({"op": "fork", "id": 4, "session_id": sid})["data"]["session_id"]
        assert ask({"op": "info", "id": 5, "session_id": fork})["data"]["step"] == 1
        assert ask({"op": "ping", "id": 6}) == {"id": 6, "data": {"pong": True}}
        for bad, code in (
            ("{nope", "invalid_json"),
            ("[]", "invalid_request"),
            ({"op": "fly", "id": 7}, "invalid_request"),
            ({"op": "step", "id": 8, "tool": "get_customer"}, "invalid_request"),
            ({"op": "step", "id": 9, "session_id": "nope", **STEP}, "unknown_session"),
            ({"op": "state", "id": 10, "session_id": sid, "junk": 1}, "invalid_request"),
            ({"op": "ping", "id": {"a": 1}}, "invalid_request"),
        ):
            reply = ask(bad)
            assert reply["error"]["code"] == code, (bad, reply)
        assert ask({"op": "state", "id": 11, "session_id": sid})["data"]["step"] == 1  # untouched by the junk
        assert ask({"op": "verdict", "id": 12, "session_id": sid})["data"]["passed"] is False
        assert ask({"op": "close", "id": 13, "session_id": sid})["data"]["closed"]
    # sessions created over the connection are closed with it
    deadline = time.monotonic() + 5
    while http.get(f"/v1/sessions/{fork}").status_code != 410 and time.monotonic() < deadline:
        time.sleep(0.02)
    is_error(http.get(f"/v1/sessions/{fork}"), 410, "session_closed")


def test_websocket_route_without_the_gate_speaks_the_same_protocol() -> None:
    """The gate serves ``/v1/ws`` itself; the FastAPI route (the app used without the gate) answers alike."""
    from starlette.testclient import TestClient

    from mirrorworld.server.app import create_app

    transcripts = []
    for inner in (False, True):
        gate = create_app(ServerConfig(access_log=False))
        with TestClient(gate.app if inner else gate) as c, c.websocket_connect("/v1/ws") as ws:
            replies = []
            for msg in (
                {"op": "create", "id": 1, "family": "cancel_order", "seed": 1},
                {"op": "ping", "id": 2},
                {"op": "fly", "id": 3},
            ):
                ws.send_text(json.dumps(msg))
                replies.append(json.loads(ws.receive_text()))
            sid = replies[0]["data"]["session_id"]
            ws.send_text(json.dumps({"op": "step", "id": 4, "session_id": sid, **STEP}))
            step = json.loads(ws.receive_text())
            assert step["data"]["result"]["customer"]["id"] == 3
            replies.append({**step, "data": {k: v for k, v in step["data"].items() if k != "session_id"}})
        assert sid not in gate.manager  # closed with its connection
        replies[0]["data"].pop("session_id")
        transcripts.append(replies)
    assert transcripts[0] == transcripts[1]
    assert transcripts[0][1] == {"id": 2, "data": {"pong": True}}
    assert transcripts[0][2]["error"]["code"] == "invalid_request"


# -- limits --------------------------------------------------------------------------


def test_body_and_message_size_limits() -> None:
    with BackgroundServer(ServerConfig(access_log=False, max_body_bytes=4096)) as s, httpx.Client(base_url=s.url) as c:
        sid = create(c)
        before = state(c, sid)
        big = {"tool": "reply_ticket", "args": {"ticket_id": 11, "body": "x" * 10_000}}
        is_error(c.post(f"/v1/sessions/{sid}/step", json=big), 413, "payload_too_large")
        is_error(c.post("/v1/sessions", json={"family": "x" * 10_000}), 413, "payload_too_large")

        def chunks() -> Iterator[bytes]:  # no Content-Length: the limit applies while streaming
            for _ in range(10):
                yield b" " * 1000

        is_error(c.post("/v1/sessions", content=chunks()), 413, "payload_too_large")
        is_error(c.post(f"/v1/sessions/{sid}/step", content=chunks()), 413, "payload_too_large")
        assert state(c, sid) == before
        with ws_sync.connect(s.url.replace("http://", "ws://") + "/v1/ws") as ws:
            ws.send(json.dumps({"op": "step", "id": 1, "session_id": sid, **big}))
            with pytest.raises(Exception):  # noqa: B017 - the server closes the connection (1009)
                ws.recv(timeout=5)
        assert state(c, sid) == before


def test_session_limits() -> None:
    config = ServerConfig(access_log=False, max_sessions=3, max_sessions_per_client=2)
    with BackgroundServer(config) as s, httpx.Client(base_url=s.url) as c:
        first = create(c)
        create(c)
        is_error(c.post("/v1/sessions", json={}), 429, "too_many_sessions")  # this client's limit
        s.manager.create({}, client="someone-else")
        is_error(c.post("/v1/sessions", json={}), 503, "too_many_sessions")  # the server's limit
        is_error(c.post(f"/v1/sessions/{first}/fork"), 503, "too_many_sessions")
        c.delete(f"/v1/sessions/{first}")
        assert c.post("/v1/sessions", json={}).status_code == 201


def test_step_rate_limit_per_client() -> None:
    with BackgroundServer(ServerConfig(access_log=False, step_rate=5)) as s, httpx.Client(base_url=s.url) as c:
        sid = create(c, max_steps=100)
        codes = [c.post(f"/v1/sessions/{sid}/step", json=STEP).status_code for _ in range(12)]
        assert codes[:5] == [200] * 5 and 429 in codes
        limited = c.post(f"/v1/sessions/{sid}/step", json=STEP)
        is_error(limited, 429, "rate_limited")
        assert int(limited.headers["retry-after"]) >= 1
        assert state(c, sid)["step"] == codes.count(200)  # refused calls never reached the session


def test_idle_sessions_are_evicted_with_a_clear_error() -> None:
    with BackgroundServer(ServerConfig(access_log=False, idle_timeout_s=0.5)) as s, httpx.Client(base_url=s.url) as c:
        sid = create(c)
        busy = create(c)
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            assert c.post(f"/v1/sessions/{busy}/step", json=STEP).status_code == 200  # in use: kept
            time.sleep(0.05)
        r = c.post(f"/v1/sessions/{sid}/step", json=STEP)
        is_error(r, 410, "session_expired")
        assert "without use" in r.json()["error"]["message"]
        assert s.manager.stats()["expired"] >= 1 and busy in s.manager


def test_the_manager_evicts_on_its_own_clock() -> None:
    now = [0.0]
    manager = SessionManager(ServerConfig(idle_timeout_s=10, max_sessions=2), clock=lambda: now[0])
    a = manager.create({})
    now[0] = 5.0
    b = manager.create({})
    now[0] = 12.0
    c = manager.create({})  # full: the idle one makes room
    assert a.id not in manager and b.id in manager and c.id in manager
    manager.close_all()
    with pytest.raises(MirrorworldError, match="atlantis"):
        SessionManager(ServerConfig(worlds=("atlantis",)))


# -- auth ----------------------------------------------------------------------------


def test_serving_off_loopback_requires_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MIRRORWORLD_TOKEN", raising=False)
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3")
    with pytest.raises(MirrorworldError, match="token"):
        ServerConfig(host="0.0.0.0").checked()
    with pytest.raises(MirrorworldError, match="8 printable"):
        ServerConfig(host="0.0.0.0", token="short").checked()
    assert ServerConfig(host="0.0.0.0", token="s3cret-token").checked().token == "s3cret-token"
    monkeypatch.setenv("MIRRORWORLD_TOKEN", "from-the-environment")
    assert ServerConfig(host="0.0.0.0").checked().token == "from-the-environment"


def test_bearer_token_is_enforced_everywhere_but_health() -> None:
    token = "correct-horse-battery"
    with BackgroundServer(ServerConfig(access_log=False, token=token)) as s, httpx.Client(base_url=s.url) as c:
        assert c.get("/health").status_code == 200
        is_error(c.post("/v1/sessions", json={}), 401, "unauthorized")
        is_error(c.post("/v1/sessions", json={}, headers={"Authorization": "Bearer wrong"}), 401, "unauthorized")
        is_error(c.get("/openapi.json"), 401, "unauthorized")
        ok = c.post("/v1/sessions", json={}, headers={"Authorization": f"Bearer {token}"})
        assert ok.status_code == 201
        is_error(c.post(f"/v1/sessions/{ok.json()['session_id']}/step", json=STEP), 401, "unauthorized")
        url = s.url.replace("http://", "ws://")
        for path in ("/v1/ws", "/ws"):
            with pytest.raises(Exception, match="403"):
                ws_sync.connect(url + path)
            with ws_sync.connect(url + path, additional_headers={"Authorization": f"Bearer {token}"}):
                pass


# -- operations ----------------------------------------------------------------------


def test_one_access_log_line_per_request(caplog: pytest.LogCaptureFixture) -> None:
    with BackgroundServer(ServerConfig()) as s, httpx.Client(base_url=s.url) as c:
        caplog.set_level(logging.INFO, logger="mirrorworld.server.access")
        caplog.clear()
        sid = create(c)
        c.post(f"/v1/sessions/{sid}/step", json=STEP)
        c.post(f"/v1/sessions/{sid}/step", content=b"{junk")
        c.get("/nope")
        time.sleep(0.1)
        lines = [r.getMessage() for r in caplog.records if r.name == "mirrorworld.server.access"]
    assert len(lines) == 4 and all("\n" not in line for line in lines)
    assert "POST /v1/sessions 201" in lines[0] and f"POST /v1/sessions/{sid}/step 200" in lines[1]
    assert " 400 " in lines[2] and "GET /nope 404" in lines[3]


def test_unknown_routes_and_methods_are_structured_errors(http: httpx.Client) -> None:
    is_error(http.get("/v2/everything"), 404, "not_found")
    is_error(http.put("/v1/sessions"), 405, "method_not_allowed")


def test_graceful_shutdown_closes_every_session_and_frees_the_port() -> None:
    s = BackgroundServer(ServerConfig(access_log=False)).start()
    with httpx.Client(base_url=s.url) as c:
        for _ in range(3):
            create(c)
    assert len(s.manager) == 3
    s.stop()
    assert len(s.manager) == 0 and not s._thread.is_alive()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", s.port), timeout=1):
        pass
