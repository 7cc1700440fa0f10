"""``mirrorworld bench --server``: the session server under load, beside a FastAPI echo ceiling.

Everything runs on loopback, bounded in time. Two servers are started as
child processes, one uvicorn worker each, on ephemeral ports:

* the **echo ceiling** — a minimal FastAPI app: ``POST /echo`` returns its JSON
  body, ``WS /ws`` sends every message back. No server can answer a request
  faster than this on the same machine with the same stack;
* the **mirrorworld server** — :func:`mirrorworld.server.create_app` with its
  default middleware (auth check, body limit, one access-log line per request,
  written to a file).

One load-generator process (this one) drives them with ``clients`` concurrent
connections (default 32), each sending one request and waiting for its answer
before the next (no pipelining):

* **HTTP** — ``POST /v1/sessions/{id}/step`` of a read tool (``get_customer``),
  each client in its own session, over keep-alive HTTP/1.1; the ceiling gets the
  same body on ``POST /echo``;
* **WebSocket** — the same step as a ``/v1/ws`` message; the ceiling echoes it;
* **one client** — the same two, with a single client: the latency of a step
  without queueing behind 31 others;
* **sessions** — ``sessions`` (default 1,000) live sessions opened over one
  WebSocket, each on its own task; the server's resident memory (``VmRSS``) is
  read before and after.

Figures are requests per second and latency percentiles (µs) as measured by
the client, the ratio to the ceiling, and the server process's CPU time per
request (from ``/proc``), with the echo's CPU per request over the server's:
the load generator shares the cores, so throughput alone mixes in its cost. On a 2-core machine the load
generator and the server share the cores, which is the same for both servers.
Nothing here is asserted on in tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

__all__ = ["bench_server", "echo_app", "format_server_report"]

_STEP_BODY = orjson.dumps({"tool": "get_customer", "args": {"customer_id": 7}})


def echo_app() -> Any:
    """The ceiling: a minimal FastAPI app with a JSON echo endpoint and a WebSocket echo."""
    from fastapi import FastAPI, WebSocket
    from starlette.websockets import WebSocketDisconnect

    app = FastAPI()

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "healthy"}

    @app.post("/echo")
    async def echo(payload: dict[str, Any]) -> dict[str, Any]:
        return payload

    async def ws(websocket: WebSocket) -> None:
        await websocket.accept()
        with contextlib.suppress(WebSocketDisconnect):
            while True:
                await websocket.send_text(await websocket.receive_text())

    # A plain Starlette route: FastAPI's injection cannot resolve a locally imported annotation.
    app.router.add_websocket_route("/ws", ws)
    return app


def _child(kind: str, fd: int, log_path: str) -> None:
    """Entry point of a server child process (``kind``: ``echo`` or ``mirrorworld``)."""
    import logging

    import uvicorn

    from mirrorworld.server.config import ServerConfig
    from mirrorworld.server.run import run_async, settle_heap, uvicorn_config

    config = ServerConfig(max_sessions=100_000, max_steps_limit=10_000_000, idle_timeout_s=3600)
    if kind == "echo":
        app = echo_app()
    else:
        from mirrorworld.server.app import create_app

        logger = logging.getLogger("mirrorworld.server")
        handler = logging.FileHandler(log_path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
        app = create_app(config)
        settle_heap(app)  # as ``mirrorworld serve`` does
    sock = socket.socket(fileno=fd)
    server = uvicorn.Server(uvicorn_config(app, config, fd=None))
    run_async(server.serve(sockets=[sock]))


@contextlib.contextmanager
def _spawned(kind: str, log_path: str) -> Iterator[tuple[int, int]]:
    """A server child on an ephemeral loopback port: yields ``(port, pid)``; stopped on exit."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    port = sock.getsockname()[1]
    code = f"from mirrorworld.bench.server import _child; _child({kind!r}, {sock.fileno()}, {log_path!r})"
    proc = subprocess.Popen([sys.executable, "-c", code], pass_fds=(sock.fileno(),), stdin=subprocess.DEVNULL)
    sock.close()
    try:
        _wait_healthy(port, proc)
        yield port, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_healthy(port: int, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"benchmark server exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            if s.recv(64).startswith(b"HTTP/1.1 200"):
                return
        time.sleep(0.05)
    raise RuntimeError("benchmark server did not become healthy")


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


# -- load generation --------------------------------------------------------------------


async def _http_request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes, body: bytes
) -> tuple[int, bytes]:
    writer.write(head + body)
    status_line = await reader.readuntil(b"\r\n")
    length = 0
    while True:
        line = await reader.readuntil(b"\r\n")
        if line == b"\r\n":
            break
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    payload = await reader.readexactly(length) if length else b""
    return int(status_line.split(b" ", 2)[1]), payload


def _head(method: str, path: str, body: bytes) -> bytes:
    return (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()


async def _http_client(port: int, path: str | None, until: float, warm: float, lat: list[float]) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    errors = 0
    try:
        if path is None:  # a mirrorworld session of its own
            create = orjson.dumps({"family": "refund_damaged", "seed": 1, "max_steps": 10_000_000})
            status, payload = await _http_request(reader, writer, _head("POST", "/v1/sessions", create), create)
            if status != 201:
                raise RuntimeError(f"could not create a session: {status} {payload[:200]!r}")
            path = f"/v1/sessions/{orjson.loads(payload)['session_id']}/step"
        head = _head("POST", path, _STEP_BODY)
        clock = time.perf_counter
        while True:
            t0 = clock()
            if t0 >= until:
                break
            status, _ = await _http_request(reader, writer, head, _STEP_BODY)
            if status != 200:
                errors += 1
            if t0 >= warm:
                lat.append(clock() - t0)
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
    return errors


async def _ws_client(port: int, echo: bool, until: float, warm: float, lat: list[float]) -> int:
    from websockets.asyncio.client import connect

    errors = 0
    async with connect(f"ws://127.0.0.1:{port}/{'ws' if echo else 'v1/ws'}", max_size=2**22, compression=None) as ws:
        if echo:
            message = orjson.dumps({"op": "step", "id": 1, "session_id": "x", "tool": "get_customer", "args": {}})
        else:
            await ws.send(
                orjson.dumps({"op": "create", "family": "refund_damaged", "seed": 1, "max_steps": 10_000_000})
            )
            sid = orjson.loads(await ws.recv())["data"]["session_id"]
            message = orjson.dumps({"op": "step", "id": 1, "session_id": sid, **orjson.loads(_STEP_BODY)})
        text = message.decode()
        clock = time.perf_counter
        while True:
            t0 = clock()
            if t0 >= until:
                break
            await ws.send(text)
            reply = await ws.recv()
            if not echo and b'"error"' in (reply if isinstance(reply, bytes) else reply.encode())[:40]:
                errors += 1
            if t0 >= warm:
                lat.append(clock() - t0)
    return errors


async def _load(
    kind: str, port: int, clients: int, seconds: float, echo: bool, pid: int | None = None
) -> dict[str, Any]:
    """``clients`` concurrent clients for ``seconds`` after a warm-up; with ``pid``, that server's CPU per request.

    The CPU is read when the warm-up ends and when the clients stop, so it
    covers exactly the requests that are counted.
    """
    lat: list[float] = []
    start = time.perf_counter()
    warm = start + min(0.5, seconds / 4)
    until = warm + seconds
    if kind == "http":
        jobs = [_http_client(port, "/echo" if echo else None, until, warm, lat) for _ in range(clients)]
    else:
        jobs = [_ws_client(port, echo, until, warm, lat) for _ in range(clients)]
    cpu: list[float | None] = []

    async def sample_at_warm() -> None:
        await asyncio.sleep(max(0.0, warm - time.perf_counter()))
        cpu.append(None if pid is None else _cpu_seconds(pid))

    sampler = asyncio.ensure_future(sample_at_warm())
    errors = sum(await asyncio.gather(*jobs))
    await sampler
    out = _figures(lat, seconds, errors)
    before, after = cpu[0], (None if pid is None else _cpu_seconds(pid))
    if before is not None and after is not None and out["requests"]:
        out["cpu_us"] = round((after - before) / out["requests"] * 1e6, 1)
    return out


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of process ``pid`` (Linux ``/proc``; None elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _figures(lat: list[float], seconds: float, errors: int) -> dict[str, Any]:
    lat.sort()

    def pct(p: float) -> float:
        return round(lat[min(len(lat) - 1, int(p / 100 * len(lat)))] * 1e6, 1) if lat else float("nan")

    return {
        "requests": len(lat),
        "rate": round(len(lat) / seconds, 1),
        "p50_us": pct(50),
        "p90_us": pct(90),
        "p99_us": pct(99),
        "errors": errors,
    }


async def _sessions(port: int, pid: int, count: int) -> dict[str, Any]:
    from websockets.asyncio.client import connect

    from mirrorworld.core.registry import default

    families = [f.name for f in default.get("helpdesk").families]
    before = _rss_mb(pid)
    started = time.perf_counter()
    async with connect(f"ws://127.0.0.1:{port}/v1/ws", max_size=2**22, compression=None) as ws:
        window = 64
        sent = received = 0
        failures = 0
        while received < count:
            while sent < count and sent - received < window:
                spec = {"op": "create", "id": sent, "family": families[sent % len(families)], "seed": sent}
                await ws.send(orjson.dumps(spec).decode())
                sent += 1
            reply = orjson.loads(await ws.recv())
            received += 1
            failures += "error" in reply
        elapsed = time.perf_counter() - started
        after = _rss_mb(pid)
    return {
        "sessions": count,
        "failures": failures,
        "create_rate": round(count / elapsed, 1),
        "rss_before_mb": round(before, 1),
        "rss_after_mb": round(after, 1),
        "mb_per_session": round((after - before) / count, 3),
    }


def bench_server(
    *, clients: int = 32, seconds: float = 3.0, sessions: int = 1000, quick: bool = False
) -> dict[str, Any]:
    """Run the server benchmark (see the module docstring) and return its report."""
    if quick:
        seconds, sessions = min(seconds, 1.0), min(sessions, 200)
    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    report: dict[str, Any] = {
        "clients": clients,
        "seconds": seconds,
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
    }
    with tempfile.TemporaryDirectory() as tmp:
        log_path = str(Path(tmp) / "server.log")
        with _spawned("echo", log_path) as (port, pid):
            report["echo_http"] = asyncio.run(_load("http", port, clients, seconds, echo=True, pid=pid))
            report["echo_ws"] = asyncio.run(_load("ws", port, clients, seconds, echo=True, pid=pid))
        with _spawned("mirrorworld", log_path) as (port, pid):
            report["http"] = asyncio.run(_load("http", port, clients, seconds, echo=False, pid=pid))
            report["ws"] = asyncio.run(_load("ws", port, clients, seconds, echo=False, pid=pid))
            single = max(seconds / 3, 0.2)
            report["http_1"] = asyncio.run(_load("http", port, 1, single, echo=False))
            report["ws_1"] = asyncio.run(_load("ws", port, 1, single, echo=False))
            report["memory"] = asyncio.run(_sessions(port, pid, sessions))
        with open(log_path) as f:
            report["access_log_lines"] = sum(1 for _ in f)
    for kind in ("http", "ws"):
        ceiling = report[f"echo_{kind}"]["rate"]
        report[kind]["vs_echo"] = round(report[kind]["rate"] / ceiling, 3) if ceiling else None
        echo_cpu, cpu = report[f"echo_{kind}"].get("cpu_us"), report[kind].get("cpu_us")
        report[kind]["cpu_vs_echo"] = round(echo_cpu / cpu, 3) if echo_cpu and cpu else None
    report["targets"] = {
        "ws_rate": 5000,
        "http_rate": 4000,
        "sessions": 1000,
        "sessions_max_mb": 5000,
    }
    return report


def format_server_report(report: dict[str, Any]) -> str:
    """The report as a small table."""
    lines = [
        f"server benchmark: {report['clients']} concurrent clients, {report['seconds']:g} s per run, "
        f"{report['cpus']} CPUs, Python {report['python']}",
        f"{'':24}{'req/s':>10}{'p50 µs':>10}{'p90 µs':>10}{'p99 µs':>10}{'vs echo':>9}{'errors':>8}"
        f"{'server CPU µs':>15}{'vs echo':>9}",
    ]
    for key, label in (
        ("echo_http", "FastAPI echo, HTTP"),
        ("http", "mirrorworld step, HTTP"),
        ("echo_ws", "FastAPI echo, WS"),
        ("ws", "mirrorworld step, WS"),
        ("http_1", "  one client, HTTP"),
        ("ws_1", "  one client, WS"),
    ):
        r = report[key]
        ratio = f"{r['vs_echo']:.2f}" if r.get("vs_echo") is not None else ""
        cpu = f"{r['cpu_us']:,.1f}" if r.get("cpu_us") is not None else ""
        cpu_ratio = f"{r['cpu_vs_echo']:.2f}" if r.get("cpu_vs_echo") is not None else ""
        lines.append(
            f"{label:24}{r['rate']:>10,.0f}{r['p50_us']:>10,.0f}{r['p90_us']:>10,.0f}{r['p99_us']:>10,.0f}"
            f"{ratio:>9}{r['errors']:>8}{cpu:>15}{cpu_ratio:>9}"
        )
    m = report["memory"]
    lines.append(
        f"{m['sessions']} live sessions: server RSS {m['rss_before_mb']:.0f} -> {m['rss_after_mb']:.0f} MB "
        f"({m['mb_per_session']:.2f} MB each), created at {m['create_rate']:,.0f}/s, {m['failures']} failures"
    )
    t = report["targets"]
    lines.append(
        f"targets: WS >= {t['ws_rate']:,}/s, HTTP >= {t['http_rate']:,}/s, "
        f">= {t['sessions']:,} sessions within {t['sessions_max_mb']:,} MB"
    )
    return "\n".join(lines)
