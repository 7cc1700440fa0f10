"""``mirrorworld serve`` / ``mcp`` (through ``mirrorworld.server.cli``), graceful shutdown on SIGTERM, and the
server benchmark's report (its figures are only checked to be there, never against a clock)."""

from __future__ import annotations

import argparse
import math
import signal
import socket
import subprocess
import sys
import time

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from mirrorworld.errors import MirrorworldError  # noqa: E402
from mirrorworld.server import cli  # noqa: E402


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="mirrorworld")
    cli.register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def test_register_adds_serve_and_mcp() -> None:
    args = parse("serve", "--port", "9000", "--world", "helpdesk", "--step-rate", "50", "--idle-timeout", "60")
    assert args.func is cli.cmd_serve and args.port == 9000 and args.world == ["helpdesk"] and args.step_rate == 50
    args = parse("mcp", "--task-id", "triage/3")
    assert args.func is cli.cmd_mcp and args.task_id == "triage/3" and args.world == "helpdesk"
    assert set(cli.COMMANDS) == {"serve", "mcp"}


def test_user_errors_are_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("MIRRORWORLD_TOKEN", raising=False)
    with pytest.raises(MirrorworldError, match="token"):
        cli.cmd_serve(parse("serve", "--host", "0.0.0.0"))
    with pytest.raises(MirrorworldError, match="no world"):
        cli.cmd_serve(parse("serve", "--world", "atlantis"))
    assert cli.main(["serve", "--host", "0.0.0.0", "--port", "1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("mirrorworld: error:")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_shuts_down_gracefully_on_sigterm() -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mirrorworld.server.cli", "serve", "--port", str(port), "--idle-timeout", "30"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/health").status_code == 200:
                    break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(proc.communicate()[1]) from None
                time.sleep(0.1)
        with httpx.Client(base_url=url) as c:
            for _ in range(2):
                assert c.post("/v1/sessions", json={}).status_code == 201
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    # uvicorn finishes its shutdown, then re-raises the signal so the exit status says what stopped it
    assert proc.returncode in (0, -signal.SIGTERM), err
    lines = err.strip().splitlines()
    assert any("shut down: closed 2 sessions" in line for line in lines), err
    assert any("POST /v1/sessions 201" in line for line in lines)  # one access-log line per request


def test_the_server_benchmark_reports_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("websockets")
    from mirrorworld.bench.server import bench_server, format_server_report

    report = bench_server(clients=4, seconds=0.3, sessions=20)
    for key in ("echo_http", "http", "echo_ws", "ws", "http_1", "ws_1"):
        figures = report[key]
        assert figures["requests"] > 0 and figures["errors"] == 0, key
        assert all(math.isfinite(figures[k]) and figures[k] > 0 for k in ("rate", "p50_us", "p99_us")), key
    assert report["http"]["vs_echo"] > 0 and report["ws"]["vs_echo"] > 0
    memory = report["memory"]
    assert memory["sessions"] == 20 and memory["failures"] == 0 and memory["rss_after_mb"] > 0
    assert report["access_log_lines"] > 0
    text = format_server_report(report)
    assert "mirrorworld step, WS" in text and "FastAPI echo, HTTP" in text and "live sessions" in text
