"""Reviews are never lost: a real server process killed mid-write under concurrent reviewers, then restarted.

Four reviewers grade over HTTP at once against ``python -m mirrorworld.review
serve``; the server is killed with SIGKILL three times while they do and
started again each time. Every grade the server acknowledged must be in the
database, the database must pass its consistency checks after every kill, and
once the reviewers finish every queued item has exactly its quota of grades.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from mirrorworld.errors import MirrorworldError
from mirrorworld.review.queue import SamplingPlan, build_queue
from mirrorworld.review.store import ReviewStore
from mirrorworld.review.testing import ReviewerClient, make_runs

REVIEWERS = [f"r{k}" for k in range(4)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, db: Path, log: Path) -> None:
        self.db, self.log = db, log
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "mirrorworld.review",
                    "serve",
                    "--db",
                    str(self.db),
                    "--port",
                    str(self.port),
                    "--no-audit",
                    "--gold-rate",
                    "0",
                    "--overlap-share",
                    "0",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("the server did not start:\n" + self.log.read_text())

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


def test_killed_server_loses_no_acknowledged_review(tmp_path: Path) -> None:
    runs = make_runs(tmp_path, ("oracle", "claim", "random"), episodes=9)
    store = ReviewStore(tmp_path / "review.sqlite")
    for p in runs:
        store.add_run(p, audit=False)
    build_queue(store, SamplingPlan(overlap=2, overlap_share=1.0, gold_rate=0.0))
    store.add_reviewer("admin", "admin-password", "admin")
    for name in REVIEWERS:
        store.add_reviewer(name, f"{name}-password")
    quota = {i.id: i.overlap for i in store.items() if i.position is not None}

    server = Server(tmp_path / "review.sqlite", tmp_path / "server.log")
    acked: list[tuple[int, str]] = []
    lock = threading.Lock()
    up = threading.Event()
    finished: set[str] = set()
    interrupted: list[str] = []

    def reviewer(name: str) -> None:
        http = httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=10)
        client = ReviewerClient(http)
        signed_in = False
        try:
            while True:
                up.wait(30)
                try:
                    if not signed_in:
                        assert client.sign_in(name, f"{name}-password").status_code == 303
                        signed_in = True
                    item_id = client.take()
                    if item_id is None:
                        finished.add(name)
                        return
                    resp = client.grade(item_id, item_id % 3 != 0, reason=f"{name} graded {item_id}")
                except (httpx.TransportError, httpx.RemoteProtocolError, MirrorworldError):
                    # The server is down, or answered a page of its own while (re)starting (no form on
                    # it): wait for it and keep the same session.
                    with lock:
                        interrupted.append(name)
                    time.sleep(0.05)
                    continue
                if resp.status_code == 303:
                    with lock:
                        acked.append((item_id, name))
        finally:
            http.close()

    threads = [threading.Thread(target=reviewer, args=(n,), daemon=True) for n in REVIEWERS]
    try:
        server.start()
        up.set()
        for t in threads:
            t.start()
        for kill in range(3):
            target = 8 * (kill + 1)
            deadline = time.monotonic() + 30
            while len(acked) < target and time.monotonic() < deadline:
                time.sleep(0.005)
            up.clear()
            server.kill()  # mid-write: four reviewers are posting grades as fast as they can
            with lock:
                acknowledged = list(acked)
            assert store.check_consistency() == [], f"after kill {kill + 1}"
            stored = {(r.item_id, r.reviewer) for r in store.reviews()}
            assert set(acknowledged) <= stored, f"after kill {kill + 1}: acknowledged grades are missing"
            server.start()
            up.set()
        for t in threads:
            t.join(60)
        assert finished == set(REVIEWERS)
    finally:
        up.set()
        server.stop()

    reviews = store.reviews()
    assert set(acked) <= {(r.item_id, r.reviewer) for r in reviews}
    assert Counter(r.item_id for r in reviews) == Counter(quota)
    assert all(r.reason == f"{r.reviewer} graded {r.item_id}" for r in reviews)
    assert store.check_consistency() == []
    assert len(interrupted) >= 3  # the reviewers really were cut off, each time
    log = (tmp_path / "server.log").read_text()
    assert "Traceback" not in log, log


@pytest.mark.parametrize("junk", [b"", b"\x00" * 4096, b"SQLite format 3\x00" + b"\x01" * 200])
def test_a_damaged_database_is_refused_with_one_line(tmp_path: Path, junk: bytes) -> None:
    db = tmp_path / "review.sqlite"
    db.write_bytes(junk)
    out = subprocess.run(
        [sys.executable, "-m", "mirrorworld.review", "stats", "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    if junk == b"":  # an empty file is a new, empty database
        assert out.returncode == 0, out.stderr
        return
    assert out.returncode == 1
    assert out.stderr.startswith("mirrorworld: error: ") and out.stderr.count("\n") == 1, out.stderr
