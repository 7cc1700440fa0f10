"""End to end in a real headless Chromium: sign in, grade with the keyboard, watch the stats change.

Runs Debian's ``chromium`` through ``chromedriver`` with Selenium (CI installs
both); skipped only when ``/usr/bin/chromium`` is absent.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mirrorworld.review.app import create_app
from mirrorworld.review.queue import SamplingPlan, build_queue
from mirrorworld.review.stats import StatsOptions
from mirrorworld.review.store import ReviewStore
from mirrorworld.review.testing import CHROMIUM, headless_chromium, make_runs, running

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"),
]


@pytest.fixture()
def browser() -> Iterator[Any]:
    with headless_chromium(window="1280,1000") as driver:
        yield driver


def _keys(driver: Any, *keys: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    chain = ActionChains(driver)
    for k in keys:
        chain.send_keys(k)
    chain.perform()


def _wait(driver: Any, css: str) -> Any:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, 15).until(ec.presence_of_element_located((By.CSS_SELECTOR, css)))


def _sign_in(driver: Any, base: str, name: str, password: str) -> None:
    from selenium.webdriver.common.keys import Keys

    driver.get(f"{base}/login")
    _wait(driver, "#name").send_keys(name)
    driver.find_element("css selector", "#password").send_keys(password, Keys.ENTER)
    _wait(driver, "#next, #paused")


def _grade_with_keyboard(driver: Any, verdict: str, reason: str, *, flag: str | None = None) -> None:
    """From any page with a "next" button: take an item and grade it using only the keyboard."""
    from selenium.webdriver.common.keys import Keys

    _keys(driver, "n")
    form = _wait(driver, "#grade-form")
    assert not driver.find_elements("css selector", "#verdict"), "the verdict is shown before grading"
    _keys(driver, verdict, "1")  # pass/fail, then cycle the first rubric row to "pass"
    _keys(driver, "r")
    _keys(driver, reason, Keys.ESCAPE)
    if flag:
        _keys(driver, flag)
    assert driver.find_element("css selector", "#rubric_0").get_attribute("value") == "pass"
    assert int(driver.find_element("css selector", "#reason_keys").get_attribute("value")) >= len(reason)
    _keys(driver, "s")
    _wait(driver, "#verdict")
    assert form is not None
    mine = driver.find_element("css selector", "#your-grade").text
    assert ("pass" if verdict == "p" else "fail") in mine


def test_grade_with_the_keyboard_and_watch_the_stats(browser: Any, tmp_path: Path) -> None:
    runs = make_runs(tmp_path, ("oracle", "claim"), episodes=3)
    store = ReviewStore(tmp_path / "review.sqlite")
    for p in runs:
        store.add_run(p, audit=False)
    build_queue(store, SamplingPlan(overlap_share=0.0, gold_rate=0.0))
    store.add_reviewer("alice", "alice-password", "reviewer")
    store.add_reviewer("boss", "boss-password", "admin")
    app = create_app(store, stats_options=StatsOptions(resamples=200))

    with running(app) as base:
        _sign_in(browser, base, "alice", "alice-password")
        _grade_with_keyboard(browser, "p", "The refund matches the order.", flag="h")
        _grade_with_keyboard(browser, "f", "Nothing was done.")
        browser.get(f"{base}/stats")
        assert "403" in _wait(browser, "h1").text  # a reviewer does not see the statistics

        browser.find_element("css selector", "header button").click()  # sign out
        _sign_in(browser, base, "boss", "boss-password")
        browser.get(f"{base}/stats")
        assert _wait(browser, "#n-reviews").text == "2"
        vh_before = int(browser.find_element("css selector", "#vh-n").text)
        assert vh_before == 2

        browser.get(f"{base}/queue")
        _wait(browser, "#next")
        _grade_with_keyboard(browser, "f", "The customer was not answered.")
        browser.get(f"{base}/stats")
        assert _wait(browser, "#n-reviews").text == "3"
        assert int(browser.find_element("css selector", "#vh-n").text) == 3
        assert browser.find_element("css selector", "#disagreements").is_displayed()

        browser.get(f"{base}/drift")
        assert _wait(browser, "svg.chart") is not None
        browser.get(f"{base}/reviewers")
        assert "alice" in _wait(browser, "#quality").text

    reviews = store.reviews()
    assert [r.reviewer for r in reviews] == ["alice", "alice", "boss"]
    assert reviews[0].passed and reviews[0].flag_hacking and reviews[0].rubric
    assert reviews[0].reason == "The refund matches the order."
    assert store.check_consistency() == []
