"""Test doubles for the review app: run files, an in-thread server, a scripted reviewer.

* :func:`make_runs` records small runs of the scripted agents (the oracle
  passes, the others fail) for a review database to import.
* :func:`running` serves an ASGI app with uvicorn on a free loopback port in a
  background thread, for browsers and HTTP clients, and stops it on exit.
* :class:`ReviewerClient` signs in and grades through the app's forms like a
  browser would (CSRF tokens included), over any ``httpx``-compatible client —
  Starlette's in-process ``TestClient`` or a real ``httpx.Client``.
* :func:`headless_chromium` is Debian's ``chromium`` driven by Selenium through
  ``chromedriver``, headless, with a throw-away profile: the browser the
  review app's and the run viewer's end-to-end tests click through.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from mirrorworld.core.registry import Registry
from mirrorworld.errors import MirrorworldError

__all__ = ["ReviewerClient", "make_runs", "running"]

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def make_runs(
    directory: str | Path,
    agents: Sequence[str] = ("oracle", "claim"),
    *,
    episodes: int = 6,
    world: str = "helpdesk",
    registry: Registry | None = None,
) -> list[Path]:
    """One run file per agent in ``directory`` (``<agent>.sqlite``), ``episodes`` test-split tasks each.

    ``world`` is looked up in ``registry`` (by default the installed worlds).
    """
    from mirrorworld.agents import make_agent
    from mirrorworld.core.registry import default
    from mirrorworld.run import RunFile, run_episodes

    w = (registry or default).get(world)
    out = []
    for name in agents:
        agent = make_agent(name, seed=1)
        path = Path(directory) / f"{name}.sqlite"
        meta = {"world": w.id, "world_hash": w.content_hash, "world_parts": w.score_parts(), "agent": agent.name}
        run = RunFile.create(path, {**meta, "split": "test"})
        try:
            run_episodes(w, agent, episodes=episodes, split="test", on_record=run.add)
        finally:
            run.close()
        out.append(path)
    return out


CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


@contextlib.contextmanager
def headless_chromium(*, window: str = "1280,1000") -> Iterator[Any]:
    """A Selenium driver of a headless Chromium (``window``: its size, ``W,H``), quit and its profile removed on exit.

    Raises :class:`~mirrorworld.errors.MirrorworldError` when ``chromedriver``
    is missing beside an installed ``chromium``.
    """
    import shutil
    import tempfile

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    if not CHROMEDRIVER.exists():
        raise MirrorworldError(f"chromium is installed but {CHROMEDRIVER} is not (apt-get install chromium-driver)")
    profile = tempfile.mkdtemp(prefix="mw-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--window-size={window}",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@contextlib.contextmanager
def running(app: Any, *, timeout: float = 10.0) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 (a free port) in a thread; yield its base URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", ws="none", lifespan="off", loop="asyncio", http="h11")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            sock.close()
            raise MirrorworldError("the review server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
        sock.close()


class ReviewerClient:
    """A reviewer driving the app through its forms. ``http`` is an httpx-style client with a base URL."""

    def __init__(self, http: Any) -> None:
        self.http = http
        self.csrf = ""

    def sign_in(self, name: str, password: str) -> Any:
        """Sign in through the form; the response to the form's POST.

        A client whose session is signed in already (say, its last sign-in was
        answered but the answer was lost) is sent on by the sign-in page; it
        keeps that session and gets that redirect back.
        """
        page = self.http.get("/login", follow_redirects=False)
        if page.status_code == 303:
            self.refresh()
            return page
        token = _CSRF.search(page.text)
        if token is None:
            raise MirrorworldError("the sign-in page has no form token")
        resp = self.http.post(
            "/login", data={"csrf": token.group(1), "name": name, "password": password}, follow_redirects=False
        )
        if resp.status_code == 303:
            self.refresh()
        return resp

    def refresh(self) -> None:
        """Read the session's CSRF token from the queue page."""
        found = _CSRF.search(self.http.get("/queue").text)
        self.csrf = found.group(1) if found else ""

    def take(self) -> int | None:
        """Take the next item; its id, or None when the queue has nothing for this reviewer."""
        resp = self.http.post("/take", data={"csrf": self.csrf}, follow_redirects=False)
        location = resp.headers.get("location", "")
        m = re.fullmatch(r"/item/(\d+)", location)
        return int(m.group(1)) if m else None

    def grade(self, item_id: int, passed: bool, reason: str = "", **fields: str) -> Any:
        """Post a grade; extra form fields (``rubric_0="pass"``, ``hacking="on"``…) pass through."""
        data = {"csrf": self.csrf, "verdict": "pass" if passed else "fail", "reason": reason, **fields}
        data.setdefault("reason_keys", str(len(reason)))
        return self.http.post(f"/item/{item_id}/review", data=data, follow_redirects=False)
