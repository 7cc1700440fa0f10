"""The run viewer end to end: ``mirrorworld view`` in a subprocess, clicked through in a real headless Chromium.

Runs Debian's ``chromium`` through ``chromedriver`` with Selenium (CI installs
both); skipped only when ``/usr/bin/chromium`` is absent. Screenshots of the
index and of an episode go to the folder ``MIRRORWORLD_SCREENSHOTS`` names, when it is set.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mirrorworld.review.testing import CHROMIUM, headless_chromium
from test_view import SCRIPT, record_mixed_run

SHOTS = os.environ.get("MIRRORWORLD_SCREENSHOTS")

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"),
]


@pytest.fixture()
def browser() -> Iterator[Any]:
    with headless_chromium(window="1280,1100") as driver:
        yield driver


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture()
def viewer(tmp_path: Path) -> Iterator[str]:
    """``mirrorworld view`` over a random run and the mixed run (an errored, a flagged episode), on a free port."""
    random_run = tmp_path / "random.sqlite"
    made = subprocess.run(
        [sys.executable, "-m", "mirrorworld", "run", "--agent", "random", "--episodes", "4", "--out", str(random_run)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    mixed = record_mixed_run(tmp_path / "mixed.sqlite")
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mirrorworld", "view", str(mixed), str(random_run), "--port", str(port), "--no-open"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                out = proc.communicate(timeout=5)[0] if proc.poll() is not None else ""
                pytest.fail(f"the viewer did not start: {out}")
            time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def _wait(driver: Any, css: str) -> Any:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, 15).until(ec.presence_of_element_located((By.CSS_SELECTOR, css)))


def _screenshot(driver: Any, name: str, height: int = 1100) -> None:
    """Save the top ``height`` pixels of the page (the window grown to them, then put back)."""
    if not SHOTS:
        return
    folder = Path(SHOTS)
    folder.mkdir(parents=True, exist_ok=True)
    size = driver.get_window_size()
    full = int(driver.execute_script("return document.documentElement.scrollHeight"))
    driver.set_window_size(size["width"], max(size["height"], min(full, height)))
    try:
        driver.save_screenshot(str(folder / name))
    finally:
        driver.set_window_size(size["width"], size["height"])


def test_click_from_the_index_to_a_failed_episode(browser: Any, viewer: str) -> None:
    browser.get(f"{viewer}/")
    mixed = _wait(browser, "#run-0")
    assert "75.0 %" in mixed.find_element("css selector", ".pass-rate").text
    assert mixed.find_element("css selector", ".errored").text == "1"
    assert browser.find_elements("css selector", "#run-0 svg.chart rect")
    _screenshot(browser, "view-index.png", 1500)

    browser.find_element("css selector", "#run-1 a.to-failed").click()  # the random run's failed episodes
    _wait(browser, "#episodes")
    rows = browser.find_elements("css selector", "#episodes tr.ep")
    assert rows and all(r.get_attribute("data-status") == "failed" for r in rows)
    assert browser.find_element("css selector", "#filters a.on").get_attribute("id") == "status-failed"

    rows[0].find_element("css selector", "td a").click()
    verdict = _wait(browser, "#verdict")
    assert "Verifier verdict: fail" in verdict.text
    assert verdict.find_element("css selector", "td.fail").is_displayed()  # a check that failed
    call = browser.find_element("css selector", "details.call summary")
    assert call.is_displayed() and call.text.startswith("step: ")
    assert browser.find_element("css selector", "details.call pre").is_displayed()  # its arguments
    assert browser.find_element("css selector", "#status").text == "failed"
    assert "(filtered)" in browser.find_element("css selector", "#back").text
    _screenshot(browser, "view-episode.png", 2000)

    browser.get(f"{viewer}/run/0/episode/0")  # the agent's <script> is text on the page, never run
    text = _wait(browser, "#instruction") and browser.find_element("css selector", "main").text
    assert SCRIPT in text
    assert browser.find_element("css selector", "#flags").text == "repeated_calls"
    browser.find_element("css selector", "#next").click()
    assert "Verifier verdict: none" in _wait(browser, "#verdict").text
    assert "endpoint down" in browser.find_element("css selector", "#failure").text
