"""Attacks on a real server on a loopback port, each with the behaviour that answers it.

* request heads: huge headers are refused (431) and hold no memory, a head
  trickled in or never sent is timed out (408);
* a client hanging up mid-body is a 499 access line, not a logged server bug;
* request values in the log are inert: no forged lines, no terminal escapes,
  bounded length;
* a WebSocket text message that is not UTF-8 is a clean 1007 close;
* the OpenAPI document declares every path parameter, so a schema-driven
  fuzzer reaches every operation;
* web pages cannot drive an unauthenticated server: Host, Origin and body type
  are checked; sessions per client are bounded by default off loopback;
* sessions owned by an open WebSocket connection never expire; an over-limit
  body on OpenEnv's ``/mcp`` is a 413.

The attacks that watch the server's memory or its log run it in a child
process (``served``) whose stderr is the log; the others use
``BackgroundServer`` in this process.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")
ws_sync = pytest.importorskip("websockets.sync.client")
ws_exceptions = pytest.importorskip("websockets.exceptions")

from mirrorworld.errors import MirrorworldError  # noqa: E402
from mirrorworld.server import ApiError, BackgroundServer, ServerConfig, SessionManager  # noqa: E402
from mirrorworld.server.app import create_app  # noqa: E402
from mirrorworld.server.run import run_async, uvicorn_config  # noqa: E402

STEP = {"tool": "get_customer", "args": {"customer_id": 3}}

_CHILD = """
import json, socket, sys
import uvicorn
from mirrorworld.server.app import create_app
from mirrorworld.server.config import ServerConfig
from mirrorworld.server.run import configure_logging, run_async, uvicorn_config

config = ServerConfig(**json.loads(sys.argv[2]))
configure_logging()
app = create_app(config)
sock = socket.socket(fileno=int(sys.argv[1]))
run_async(uvicorn.Server(uvicorn_config(app, config, fd=None)).serve(sockets=[sock]))
"""


class Served:
    """A server in a child process: its port, its pid and its log (the child's stderr)."""

    def __init__(self, port: int, pid: int, log: Path) -> None:
        self.port = port
        self.pid = pid
        self.log = log
        self.url = f"http://127.0.0.1:{port}"

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def wait_for(self, pattern: str, timeout: float = 10.0) -> str:
        """The first log line matching ``pattern`` (a regex), waiting for it to be written."""
        deadline = time.monotonic() + timeout
        while True:
            for line in self.text().splitlines():
                if re.search(pattern, line):
                    return line
            if time.monotonic() > deadline:
                raise AssertionError(f"no log line matches {pattern!r}:\n{self.text()[-3000:]}")
            time.sleep(0.05)


@contextlib.contextmanager
def served(tmp_path: Path, **config: Any) -> Iterator[Served]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    log = tmp_path / "server.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(sock.fileno()), json.dumps(config)],
            pass_fds=(sock.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=err,
            stderr=err,
        )
    sock.close()
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield Served(port, proc.pid, log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def child(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One child server for the log and memory attacks (short head timeout, access log on)."""
    if not Path("/proc/self/status").exists():
        pytest.skip("reads the server's memory from /proc")
    with served(tmp_path_factory.mktemp("served"), head_timeout_s=1.0, max_body_bytes=65_536) as s:
        yield s


def raw(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    """Send ``data`` on a fresh connection and read until the server closes it (or resets it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        return read_all(s)


def read_all(s: socket.socket) -> bytes:
    out = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := s.recv(65536):
            out += chunk
    return out


def response(s: socket.socket) -> bytes:
    """One whole HTTP response from ``s`` (its head, and the body its Content-Length promises)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        assert chunk, data
        data += chunk
    top, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?i)content-length: *(\d+)", top).group(1))  # type: ignore[union-attr]
    while len(body) < length:
        body += s.recv(65536)
    return data


def head(path: str = "/health", *lines: str, method: str = "GET") -> bytes:
    return "\r\n".join([f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", *lines, "", ""]).encode()


_JSON_POST = ("Content-Type: application/json", "Accept: application/json, text/event-stream", "Content-Length: 1000")


def no_tracebacks(log: str) -> None:
    assert "Traceback" not in log and "ERROR" not in log and "internal error" not in log, log[-3000:]


# -- 1. request heads ------------------------------------------------------------------


def test_huge_headers_are_refused_and_hold_no_memory(child: Served) -> None:
    """Connections sending 40 MB headers are closed after the head limit; the server's memory barely moves."""
    with httpx.Client(base_url=child.url) as c:
        for _ in range(20):
            assert c.get("/health").status_code == 200
    time.sleep(0.5)
    before = child.rss_kib()
    size = 40 * 1024 * 1024
    chunk = b"a" * (1024 * 1024)
    accepted: list[int] = []
    answers: list[bytes] = []
    hold = threading.Event()

    def attack() -> None:
        with socket.create_connection(("127.0.0.1", child.port), timeout=30) as s:
            sent = 0
            try:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
                while sent < size:
                    s.sendall(chunk)
                    sent += len(chunk)
                s.sendall(b"\r\n\r\n")
            except OSError:  # the server closed the connection mid-head
                pass
            accepted.append(sent)
            hold.wait(30)  # hold the connection open while the server's memory is read
            with contextlib.suppress(OSError):
                answers.append(read_all(s))

    threads = [threading.Thread(target=attack) for _ in range(4)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while len(accepted) < len(threads) and time.monotonic() < deadline:
        time.sleep(0.05)
    during = child.rss_kib()
    hold.set()
    for t in threads:
        t.join(30)
    after = child.rss_kib()
    print(f"\nserver RSS: before {before} KiB, during 4 x 40 MB headers {during} KiB, after {after} KiB")
    assert len(accepted) == 4 and all(n < size for n in accepted), accepted  # never read to the end
    assert during - before < 24 * 1024 and after - before < 24 * 1024, (before, during, after)
    assert not any(a.startswith(b"HTTP/1.1 200") for a in answers), answers
    with httpx.Client(base_url=child.url) as c:
        assert c.get("/health").status_code == 200  # and it still serves


def test_long_lines_and_heads_are_answered_431(child: Served) -> None:
    one_line = raw(child.port, head("/health", "X-Long: " + "b" * 20_000))
    assert one_line.startswith(b"HTTP/1.1 431"), one_line[:200]
    assert json.loads(one_line.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "header_too_large"
    many = raw(child.port, head("/health", *(f"X-{i}: {'c' * 1000}" for i in range(80))))
    assert many == b"" or many.startswith(b"HTTP/1.1 431"), many[:200]  # (a reset may overtake the answer)
    url = raw(child.port, head("/v1/sessions/" + "d" * 20_000))
    assert url.startswith(b"HTTP/1.1 414"), url[:200]


def test_a_trickled_or_missing_head_is_timed_out(child: Served) -> None:
    """Slow-loris: a head sent a line at a time, or never, is closed with 408 (the child's timeout is 1 s)."""
    with socket.create_connection(("127.0.0.1", child.port), timeout=10) as s:
        started = time.monotonic()
        s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        answer = b""
        with contextlib.suppress(OSError):
            for i in range(100):
                s.sendall(f"X-{i}: y\r\n".encode())
                s.settimeout(0.2)
                try:
                    answer = s.recv(65536)
                    break
                except TimeoutError:
                    continue
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert time.monotonic() - started < 10  # closed long before the client gave up
    with socket.create_connection(("127.0.0.1", child.port), timeout=10) as s:
        assert read_all(s).startswith(b"HTTP/1.1 408")  # a connection that sends nothing


def test_keep_alive_connections_still_serve_many_requests(child: Served) -> None:
    """The head bounds reset per request: one connection sends many heads (one byte at a time for one of them)."""
    with socket.create_connection(("127.0.0.1", child.port), timeout=10) as s:
        for _ in range(50):
            s.sendall(head("/health"))
            assert response(s).startswith(b"HTTP/1.1 200")
        for byte in head("/health"):
            s.sendall(bytes([byte]))
        assert response(s).startswith(b"HTTP/1.1 200")


# -- 2. a client hanging up mid-body ---------------------------------------------------------


def test_a_client_hanging_up_mid_body_is_not_a_server_error(child: Served) -> None:
    sid = httpx.post(f"{child.url}/v1/sessions", json={}).json()["session_id"]
    for path in ("/v1/sessions", f"/v1/sessions/{sid}/step", f"/v1/sessions/{sid}/mcp", "/mcp", "/reset", "/step"):
        with socket.create_connection(("127.0.0.1", child.port), timeout=10) as s:
            s.sendall(head(path, *_JSON_POST, method="POST") + b'{"tool": ')
        child.wait_for(rf"POST {re.escape(path)} 499 ")
    no_tracebacks(child.text())


# -- 3. log injection ----------------------------------------------------------------------


def test_request_values_are_logged_inert(child: Served) -> None:
    forged = "/v1/sessions/x%0a2020-01-01%2000:00:00,000%20INFO%20forged%20line%1b[2J%e2%80%a8"
    assert httpx.get(child.url + forged).status_code == 404
    long_id = "e" * 8000
    assert httpx.get(f"{child.url}/v1/sessions/{long_id}").status_code == 404
    child.wait_for(r"GET /v1/sessions/x\\n2020")
    child.wait_for(r"GET /v1/sessions/eeee")
    log = child.text()
    assert "\x1b" not in log and "\u2028" not in log
    assert not any(line.startswith("2020-01-01") for line in log.splitlines())
    assert max(len(line) for line in log.splitlines()) < 1000


# -- 4. WebSocket text that is not UTF-8 ------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/ws", "/ws"])
def test_a_text_message_that_is_not_utf8_is_a_clean_1007(child: Served, path: str) -> None:
    with ws_sync.connect(f"ws://127.0.0.1:{child.port}{path}") as ws:
        ws.send(b'{"op": "ping", "id": "\xff\xfe"}', text=True)
        with pytest.raises(ws_exceptions.ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1007
    child.wait_for(rf"WS {re.escape(path)} 0 messages")
    no_tracebacks(child.text())
    with ws_sync.connect(f"ws://127.0.0.1:{child.port}/v1/ws") as ws:  # and valid text is still served
        ws.send(json.dumps({"op": "ping", "id": "é"}))
        assert json.loads(ws.recv(timeout=10)) == {"id": "é", "data": {"pong": True}}


# -- 5. the OpenAPI document -------------------------------------------------------------


def test_the_openapi_document_is_valid_and_declares_every_path_parameter() -> None:
    schemathesis = pytest.importorskip("schemathesis")
    with BackgroundServer(ServerConfig(access_log=False)) as s:
        document = httpx.get(f"{s.url}/openapi.json").json()
        schema = schemathesis.openapi.from_url(f"{s.url}/openapi.json")
        schema.validate()  # against the OpenAPI meta-schema
        declared = 0
        for path, operations in document["paths"].items():
            template = set(re.findall(r"{([^}]+)}", path))
            for method, operation in operations.items():
                params = {p["name"] for p in operation.get("parameters", []) if p["in"] == "path"}
                assert params == template, (method, path, params)
                assert all(p["required"] for p in operation.get("parameters", []) if p["in"] == "path")
                declared += len(params)
        assert declared == 8
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) == sum(len(ops) for ops in document["paths"].values())
        for operation in operations:  # a fuzzer fills every path parameter and reaches the route
            fill(operation)


def fill(operation: Any) -> None:
    from hypothesis import HealthCheck, given, settings

    @given(case=operation.as_strategy())
    @settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(case: Any) -> None:
        assert "{" not in case.formatted_path, case.formatted_path
        assert case.call(timeout=10).status_code < 500

    run()


# -- 12. web pages and the unauthenticated server ---------------------------------------------


def test_web_pages_cannot_drive_the_loopback_server() -> None:
    with BackgroundServer(ServerConfig(access_log=False)) as s, httpx.Client(base_url=s.url, timeout=10) as c:
        own = f"127.0.0.1:{s.port}"
        body = json.dumps({"task_id": "triage/1"})
        # a cross-site simple request (a form or fetch with a text/plain body)
        r = c.post("/v1/sessions", content=body, headers={"Content-Type": "text/plain", "Origin": "http://evil.test"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "cross_origin"
        for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
            r = c.post("/v1/sessions", content=body, headers={"Content-Type": kind})
            assert r.status_code == 415 and r.json()["error"]["code"] == "unsupported_media_type"
        assert c.post("/reset", content=body, headers={"Content-Type": "text/plain"}).status_code == 415
        assert c.post("/mcp", content=b"{}", headers={"Content-Type": "text/plain"}).status_code == 415
        assert len(s.manager) == 0
        # DNS rebinding: the page's own name, pointed at 127.0.0.1
        sid = c.post("/v1/sessions", json={}).json()["session_id"]
        rebound = {"Host": f"evil.test:{s.port}", "Origin": f"http://evil.test:{s.port}"}
        for path in (f"/v1/sessions/{sid}", "/health", "/v1/worlds", f"/state?session_id={sid}"):
            r = c.get(path, headers=rebound)
            assert r.status_code == 421 and r.json()["error"]["code"] == "misdirected_request", path
        assert c.get(f"/v1/sessions/{sid}/state", headers={"Host": "evil.test"}).status_code == 421
        # what is still served: loopback names, the server's own pages, clients that send no Origin
        for host in (own, f"localhost:{s.port}", "localhost", f"[::1]:{s.port}"):
            assert c.get(f"/v1/sessions/{sid}", headers={"Host": host}).status_code == 200, host
        same = c.post("/v1/sessions", json={}, headers={"Origin": f"http://{own}"})
        assert same.status_code == 201
        assert c.post(f"/v1/sessions/{sid}/step", json=STEP, headers={"Content-Type": "application/json"}).is_success
        assert c.post(f"/v1/sessions/{sid}/step", content=json.dumps(STEP)).is_success  # no type: JSON
        assert c.post(f"/v1/sessions/{sid}/verdict", headers={"Content-Type": "text/plain"}).is_success  # no body
        # WebSocket handshakes from a page of another origin (cross-site WebSocket hijacking)
        for path in ("/v1/ws", "/ws"):
            with pytest.raises(ws_exceptions.InvalidStatus) as refused:
                ws_sync.connect(f"ws://{own}{path}", origin="http://evil.test")  # type: ignore[arg-type]
            assert refused.value.response.status_code == 403
            with ws_sync.connect(f"ws://{own}{path}", origin=f"http://{own}") as ws:  # type: ignore[arg-type]
                ws.send(json.dumps({"op": "ping", "id": 1} if path == "/v1/ws" else {"type": "state"}))
                assert json.loads(ws.recv(timeout=10))


def test_allowed_hosts_and_origins_are_configurable() -> None:
    config = ServerConfig(access_log=False, allowed_hosts=("dev.box",), allowed_origins=("http://app.test:3000",))
    with BackgroundServer(config) as s, httpx.Client(base_url=s.url, timeout=10) as c:
        assert c.get("/health", headers={"Host": f"dev.box:{s.port}"}).status_code == 200
        assert c.get("/health", headers={"Host": "other.box"}).status_code == 421
        assert c.post("/v1/sessions", json={}, headers={"Origin": "http://app.test:3000"}).status_code == 201
        assert c.post("/v1/sessions", json={}, headers={"Origin": "http://app.test:3001"}).status_code == 403
    token = "s3cret-token"
    with BackgroundServer(ServerConfig(access_log=False, token=token)) as s, httpx.Client(base_url=s.url) as c:
        auth = {"Authorization": f"Bearer {token}"}
        # with a token, any Host (a proxy names the server as it likes); Origin is still checked
        assert c.post("/v1/sessions", json={}, headers={**auth, "Host": "env.example.org"}).status_code == 201
        assert c.post("/v1/sessions", json={}, headers={**auth, "Origin": "http://evil.test"}).status_code == 403


def test_the_allowed_hosts_and_origins_are_checked_and_reach_the_command_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from mirrorworld.server import cli

    for bad in ({"allowed_hosts": ("evil.test/x",)}, {"allowed_origins": ("evil.test",)}, {"head_timeout_s": 0}):
        with pytest.raises(MirrorworldError):
            ServerConfig(**bad).checked()  # type: ignore[arg-type]
    seen: list[ServerConfig] = []
    monkeypatch.setattr("mirrorworld.server.run.serve", lambda config, registry: seen.append(config.checked()))
    argv = ["serve", "--allowed-host", "dev.box", "--allowed-origin", "http://app.test:3000"]
    assert cli.main(argv) == 0
    assert seen[0].allowed_hosts == ("dev.box",) and seen[0].allowed_origins == ("http://app.test:3000",)
    assert cli.main(["serve", "--allowed-origin", "app.test"]) == 1
    assert capsys.readouterr().err.count("\n") == 1  # one readable line


def test_sessions_per_client_are_bounded_by_default_off_loopback() -> None:
    assert ServerConfig(host="0.0.0.0", token="s3cret-token").sessions_per_client() == 1024
    assert ServerConfig().sessions_per_client() == ServerConfig().max_sessions  # one client: every local process
    assert ServerConfig(max_sessions_per_client=3).sessions_per_client() == 3
    manager = SessionManager(ServerConfig(host="0.0.0.0", token="s3cret-token", max_sessions=8))
    for _ in range(2):
        manager.create({}, "203.0.113.7")
    with pytest.raises(ApiError, match="too_many_sessions"):
        manager.create({}, "203.0.113.7")
    manager.create({}, "203.0.113.8")  # another client still has room
    manager.close_all()


# -- 13. sessions of an open connection; /mcp over the limit -----------------------------------


def test_sessions_of_an_open_websocket_never_expire() -> None:
    config = ServerConfig(access_log=False, idle_timeout_s=1.0)
    with BackgroundServer(config) as s, httpx.Client(base_url=s.url, timeout=10) as c:
        loose = c.post("/v1/sessions", json={}).json()["session_id"]
        with ws_sync.connect(s.url.replace("http://", "ws://") + "/v1/ws") as ws:

            def ask(msg: dict[str, Any]) -> dict[str, Any]:
                ws.send(json.dumps(msg))
                return dict(json.loads(ws.recv(timeout=10)))

            sid = ask({"op": "create", "id": 1, "task_id": "triage/1"})["data"]["session_id"]
            fork = ask({"op": "fork", "id": 2, "session_id": sid})["data"]["session_id"]
            deadline = time.monotonic() + 30
            while loose in s.manager:  # (asking over HTTP would keep it in use)
                assert time.monotonic() < deadline
                time.sleep(0.1)
            time.sleep(1.5)  # the sweeper has run again past the timeout
            assert c.get(f"/v1/sessions/{loose}").json()["error"]["code"] == "session_expired"
            assert ask({"op": "step", "id": 3, "session_id": sid, **STEP})["data"]["ok"] is True
            assert ask({"op": "state", "id": 4, "session_id": fork})["data"]["step"] == 0
        deadline = time.monotonic() + 10
        while c.get(f"/v1/sessions/{sid}").status_code != 410:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert c.get(f"/v1/sessions/{fork}").json()["error"]["code"] == "session_closed"


def test_an_over_limit_body_on_openenv_mcp_is_413() -> None:
    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit applies while the body streams in
        for _ in range(10):
            yield b" " * 1000

    with BackgroundServer(ServerConfig(access_log=False, max_body_bytes=4096)) as s, httpx.Client(base_url=s.url) as c:
        for body in (chunks(), b" " * 10_000):
            r = c.post("/mcp", content=body)
            assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large"
        assert c.post("/mcp", content=b"{oops").json()["error"]["code"] == -32700  # a small bad body: parse error


# -- the h11 protocol (when httptools is not installed) -------------------------------------------


def test_without_httptools_h11_bounds_the_head_and_its_time() -> None:
    from mirrorworld.server.protocols import _h11_protocol

    config = ServerConfig(access_log=False, head_timeout_s=1.0)
    app = create_app(config)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn_config(app, config, http=_h11_protocol(config)))
    thread = threading.Thread(target=run_async, args=(server.serve(sockets=[sock]),), daemon=True)
    thread.start()
    try:
        while not server.started:
            assert thread.is_alive()
            time.sleep(0.01)
        assert raw(port, head("/health", "Connection: close")).startswith(b"HTTP/1.1 200")
        unfinished = head("/health", *(f"X-{i}: {'c' * 1000}" for i in range(80)))[:-2]  # h11 bounds a head in progress
        too_big = raw(port, unfinished)
        assert too_big == b"" or too_big.startswith(b"HTTP/1.1 400"), too_big[:200]
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            assert read_all(s).startswith(b"HTTP/1.1 408")
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


# -- 7. pipelining, ping floods and slow bodies -------------------------------------------


def test_pipelined_requests_to_a_slow_reader_hold_bounded_memory(child: Served) -> None:
    """50 MB of pipelined requests, read slowly, then a hang-up: memory stays bounded and nothing is logged."""
    before = child.rss_kib()
    burst = head("/health") * 2000
    with socket.create_connection(("127.0.0.1", child.port), timeout=10) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(0.05)
        sent = 0
        deadline = time.monotonic() + 5
        while sent < 50_000_000 and time.monotonic() < deadline:  # tries to send 50 MB in 5 s
            try:
                sent += s.send(burst)
            except TimeoutError:
                with contextlib.suppress(TimeoutError):
                    s.recv(4096)  # read slowly
        during = child.rss_kib()
    time.sleep(1)
    print(f"\nserver RSS: before {before} KiB, after {sent} bytes pipelined {during} KiB")
    assert sent < 50_000_000 and during - before < 64 * 1024  # the server stopped reading
    with socket.create_connection(("127.0.0.1", child.port), timeout=10) as s:  # a hang-up with answers pending
        s.sendall(head("/v1/worlds") * 5000)
    with socket.create_connection(("127.0.0.1", child.port), timeout=10) as s:
        s.sendall(head("/health", "Connection: close"))
        assert read_all(s).startswith(b"HTTP/1.1 200")
    time.sleep(0.5)
    no_tracebacks(child.text())


def test_a_websocket_ping_flood_that_is_never_read_holds_bounded_memory(child: Served) -> None:
    """Pings sent to a client that reads nothing: the server stops reading instead of queueing the pongs."""
    before = child.rss_kib()
    ping = bytes([0x89, 0xFD, 0x00, 0x7D]) + b"\x00\x00\x00\x00" + b"p" * 125  # masked ping, 125 bytes
    with socket.create_connection(("127.0.0.1", child.port), timeout=10) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(
            head(
                "/v1/ws",
                "Upgrade: websocket",
                "Connection: Upgrade",
                "Sec-WebSocket-Version: 13",
                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
            )
        )
        s.settimeout(0.5)
        sent = 0
        with contextlib.suppress(TimeoutError, OSError):
            while sent < 50_000_000:
                sent += s.send(ping * 1000)
        during = child.rss_kib()
    time.sleep(0.5)
    print(f"\nserver RSS: before {before} KiB, after {sent} bytes of pings never read {during} KiB")
    assert sent < 50_000_000  # the server stopped reading
    assert during - before < 64 * 1024
    no_tracebacks(child.text())


def test_a_body_that_does_not_arrive_is_timed_out(tmp_path: Path) -> None:
    """Slow body: a complete head and one byte of a 1000-byte body is answered 408 within the body timeout."""
    if not Path("/proc/self/status").exists():
        pytest.skip("runs the server in a child process")
    with served(tmp_path, body_timeout_s=1.0) as s:
        conns = [socket.create_connection(("127.0.0.1", s.port), timeout=10) for _ in range(20)]
        started = time.monotonic()
        try:
            for c in conns:
                c.sendall(head("/v1/sessions", *_JSON_POST, method="POST") + b"{")
            for c in conns:
                assert read_all(c).startswith(b"HTTP/1.1 408")
            assert time.monotonic() - started < 8
        finally:
            for c in conns:
                c.close()
        with socket.create_connection(("127.0.0.1", s.port), timeout=10) as c:  # a body in time is served
            c.sendall(head("/v1/sessions", "Content-Type: application/json", "Content-Length: 2", method="POST"))
            time.sleep(0.3)
            c.sendall(b"{}")
            assert response(c).startswith(b"HTTP/1.1 20")
        time.sleep(0.5)
        no_tracebacks(s.text())


def test_the_body_timeout_is_checked() -> None:
    with pytest.raises(MirrorworldError, match="body_timeout_s"):
        ServerConfig(body_timeout_s=0).checked()
