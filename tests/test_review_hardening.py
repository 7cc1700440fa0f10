"""The review app and database against attacks: sign-in throttling, opaque ids, foreign files, hostile text.

One test (or a small group) per attack: each reproduces it and checks what
happens now.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import re
import sqlite3
import stat
import sys
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from itsdangerous import URLSafeTimedSerializer
from starlette.testclient import TestClient

import mirrorworld.review.store as store_module
from mirrorworld.review.__main__ import main
from mirrorworld.review.app import DEVICE_COOKIE, LOGIN_COOKIE, SESSION_COOKIE, create_app
from mirrorworld.review.cli import inert
from mirrorworld.review.queue import SamplingPlan, build_queue, take_next
from mirrorworld.review.store import ITEM_IDS, ReviewInput, ReviewStore, SignInLimits
from mirrorworld.review.testing import ReviewerClient, make_runs, running

BASE = "http://127.0.0.1"
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return make_runs(tmp_path_factory.mktemp("runs"), ("oracle", "claim"), episodes=6)


@pytest.fixture()
def store(tmp_path: Path) -> ReviewStore:
    s = ReviewStore(tmp_path / "review.sqlite")
    s.add_reviewer("boss", "boss-password", "admin")
    return s


class CountingHash:
    """Counts password-hash checks (each one is a guess the server evaluated)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        self._lock = threading.Lock()
        self._real = store_module.verify_password
        monkeypatch.setattr(store_module, "verify_password", self)

    def __call__(self, password: str, stored: str) -> bool:
        with self._lock:
            self.calls += 1
        return self._real(password, stored)


def _form(http: Any) -> str:
    """GET the sign-in page (setting its nonce cookie on ``http``); the form's token."""
    found = _CSRF.search(http.get("/login").text)
    assert found is not None
    return found.group(1)


# -- 6. sign-in ------------------------------------------------------------------------


def test_concurrent_wrong_passwords_are_evaluated_at_most_the_limit(
    store: ReviewStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """40 wrong passwords for one name at once: only the limit's worth reach the hash check."""
    hashes = CountingHash(monkeypatch)
    limit = SignInLimits().per_name_client
    attempts = 40
    statuses: list[int] = []
    ready = threading.Barrier(attempts)
    lock = threading.Lock()
    with running(create_app(store)) as base:

        def guess(k: int) -> None:
            with httpx.Client(base_url=base, timeout=60) as http:
                token = _form(http)
                ready.wait(60)
                resp = http.post("/login", data={"csrf": token, "name": "boss", "password": f"guess-{k}"})
                with lock:
                    statuses.append(resp.status_code)

        threads = [threading.Thread(target=guess, args=(k,)) for k in range(attempts)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    assert len(statuses) == attempts
    assert hashes.calls == limit, f"{hashes.calls} of {attempts} concurrent guesses were evaluated"
    assert Counter(statuses) == {401: limit, 429: attempts - limit}
    with store.read() as conn:
        (failed,) = conn.execute("SELECT COUNT(*) FROM events WHERE kind='sign_in_failed'").fetchone()
    assert failed == limit


def test_a_sign_in_form_serves_one_post(store: ReviewStore, monkeypatch: pytest.MonkeyPatch) -> None:
    app = create_app(store)
    first = TestClient(app, base_url=BASE)
    token = _form(first)
    nonce = first.cookies[LOGIN_COOKIE]
    wrong = first.post("/login", data={"csrf": token, "name": "boss", "password": "guess-guess"})
    assert wrong.status_code == 401
    hashes = CountingHash(monkeypatch)
    for password in ("guess-again", "boss-password"):  # the same form and cookie, posted again
        replay = TestClient(app, base_url=BASE, cookies={LOGIN_COOKIE: nonce})
        resp = replay.post("/login", data={"csrf": token, "name": "boss", "password": password})
        assert resp.status_code == 403 and "sent already" in resp.text
        assert SESSION_COOKIE not in resp.cookies
    assert hashes.calls == 0  # a spent form is refused before any password is looked at
    # A form that signed someone in cannot sign in a second browser either.
    c = TestClient(app, base_url=BASE)
    token = _form(c)
    nonce = c.cookies[LOGIN_COOKIE]
    form = {"csrf": token, "name": "boss", "password": "boss-password"}
    assert c.post("/login", data=form, follow_redirects=False).status_code == 303
    again = TestClient(app, base_url=BASE, cookies={LOGIN_COOKIE: nonce})
    resp = again.post("/login", data=form, follow_redirects=False)
    assert resp.status_code == 403 and SESSION_COOKIE not in resp.cookies
    # A browser that sent its form twice (a double click) and was signed in by the first is sent on.
    twice = TestClient(app, base_url=BASE, cookies={LOGIN_COOKIE: nonce, SESSION_COOKIE: c.cookies[SESSION_COOKIE]})
    resp = twice.post("/login", data=form, follow_redirects=False)
    assert resp.status_code == 303 and resp.headers["location"] == "/queue"


def test_a_password_sprayed_across_names_is_limited_per_client(
    store: ReviewStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    limits = SignInLimits()
    app = create_app(store)
    hashes = CountingHash(monkeypatch)
    sprayer = TestClient(app, base_url=BASE, client=("203.0.113.5", 4000))
    codes = []
    for k in range(limits.per_client + 5):
        token = _form(sprayer)
        codes.append(sprayer.post("/login", data={"csrf": token, "name": f"user{k}", "password": "Summer2024!"}))
    assert [r.status_code for r in codes] == [401] * limits.per_client + [429] * 5
    assert hashes.calls == limits.per_client
    # The limit is the sprayer's: someone else still signs in.
    other = ReviewerClient(TestClient(app, base_url=BASE, client=("198.51.100.7", 4000)))
    assert other.sign_in("boss", "boss-password").status_code == 303


def test_an_attacker_cannot_lock_the_admin_out(store: ReviewStore) -> None:
    app = create_app(store)
    admin = ReviewerClient(TestClient(app, base_url=BASE))  # the admin's own browser, signed in before
    assert admin.sign_in("boss", "boss-password").status_code == 303
    assert DEVICE_COOKIE in admin.http.cookies
    assert admin.http.post("/logout", data={"csrf": admin.csrf}).status_code == 200
    # From the same address (think: one office, one proxy), an attacker guesses until locked out.
    attacker = ReviewerClient(TestClient(app, base_url=BASE))
    for _ in range(SignInLimits().per_name_client):
        assert attacker.sign_in("boss", "guess-guess").status_code == 401
    assert attacker.sign_in("boss", "boss-password").status_code == 429  # locked: even the right password
    # The admin's browser is counted apart and signs in.
    assert admin.sign_in("boss", "boss-password").status_code == 303
    # A forged device cookie is no device.
    forged = TestClient(app, base_url=BASE, cookies={DEVICE_COOKIE: admin.http.cookies[DEVICE_COOKIE][:-3] + "AAA"})
    assert ReviewerClient(forged).sign_in("boss", "boss-password").status_code == 429


def test_limits_per_name_client_per_client_and_per_name(store: ReviewStore) -> None:
    """The three limits of :class:`SignInLimits`, through the store, from many addresses."""
    limits = SignInLimits(per_name_client=2, per_client=3, per_name=4)
    nonces = iter(range(10_000))

    def attempt(name: str, password: str, client: str, device: str | None = None) -> str:
        return store.sign_in(
            name, password, client=client, nonce=f"n{next(nonces)}", device=device, limits=limits
        ).outcome

    # per (name, client): an address locks only itself out of a name.
    assert [attempt("boss", "x" * 9, "10.0.0.1") for _ in range(3)] == ["wrong", "wrong", "locked"]
    assert attempt("boss", "boss-password", "10.0.0.2") == "ok"
    # per client across names.
    assert [attempt(f"n{k}", "x" * 9, "10.0.0.3") for k in range(4)] == ["wrong"] * 3 + ["locked"]
    # per name across clients: a distributed guesser hits the ceiling...
    for k in range(4, 8):
        attempt("boss", "x" * 9, f"10.0.1.{k}")
    assert attempt("boss", "boss-password", "10.0.2.1") == "locked"
    # ...which a known browser of the admin's is exempt from, within its own allowance.
    assert attempt("boss", "boss-password", "10.0.2.1", device="the-admins-laptop") == "ok"
    assert [attempt("boss", "x" * 9, "10.0.2.1", device="stolen") for _ in range(3)] == ["wrong", "wrong", "locked"]
    # The window ends: the address may try again.
    t = store.clock() + limits.window + 1
    store.clock = lambda: t
    assert attempt("boss", "boss-password", "10.0.0.1") == "ok"
    assert store.sign_in("boss", "boss-password", client="10.0.0.9", nonce="n0", limits=limits).outcome == "replayed"


def test_session_tokens_are_stored_as_hashes(store: ReviewStore) -> None:
    app = create_app(store)
    c = ReviewerClient(TestClient(app, base_url=BASE))
    assert c.sign_in("boss", "boss-password").status_code == 303
    signer = URLSafeTimedSerializer(store.secret, salt="mirrorworld-review/session")
    token = signer.loads(c.http.cookies[SESSION_COOKIE])
    files = [store.path, Path(f"{store.path}-wal")]
    assert all(token.encode() not in f.read_bytes() for f in files if f.exists())
    with store.read() as conn:
        (stored,) = conn.execute("SELECT token FROM sessions").fetchone()
    assert stored == hashlib.sha256(token.encode()).hexdigest()
    # What the database holds is no key: a cookie carrying it signs nobody in.
    copied = TestClient(app, base_url=BASE, cookies={SESSION_COOKIE: signer.dumps(stored)})
    assert copied.get("/queue", follow_redirects=False).headers["location"] == "/login"
    assert c.http.get("/queue").status_code == 200


def _serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[Path, str]:
    monkeypatch.setattr("mirrorworld.review.app.serve", lambda app, host, port, allowed_hosts=(): None)
    db = tmp_path / "review.sqlite"
    assert main(["serve", "--db", str(db), "--no-audit"]) == 0
    return db, capsys.readouterr().out


def test_the_admin_password_is_not_printed_into_a_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # output captured: not a terminal
    db, out = _serve(tmp_path, monkeypatch, capsys)
    where = Path(f"{db}.admin-password")
    password = where.read_text().strip()
    assert password and password not in out and str(where) in out
    assert stat.S_IMODE(where.stat().st_mode) == 0o600
    assert ReviewStore(db).authenticate("admin", password) is not None
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_the_admin_password_is_shown_on_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Tty())
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    db, out = _serve(tmp_path, monkeypatch, capsys)
    found = re.search(r"password (\S+) \(shown once\)", out)
    assert found is not None and ReviewStore(db).authenticate("admin", found.group(1)) is not None
    assert not Path(f"{db}.admin-password").exists()


# -- 7. gold items look like any other ------------------------------------------------


def _imported(tmp_path: Path, runs: list[Path], seed: int | None) -> ReviewStore:
    """A gold run imported first, then a normal run: the order that made the gold ids a block."""
    rng = None if seed is None else random.Random(seed)
    store = ReviewStore(tmp_path / f"review-{seed}.sqlite", rng=rng)
    oracle, claim = runs
    store.add_run(oracle, gold=True, audit=False)
    store.add_run(claim, audit=False)
    return store


@pytest.mark.parametrize("seed", range(8))
def test_gold_items_cannot_be_told_apart_by_their_ids(tmp_path: Path, runs: list[Path], seed: int) -> None:
    items = _imported(tmp_path, runs, seed).items()
    gold = sorted(i.id for i in items if i.gold_answer is not None)
    other = sorted(i.id for i in items if i.gold_answer is None)
    assert len(gold) == len(other) == 6
    # No threshold on the id separates them...
    assert not (gold[-1] < other[0] or other[-1] < gold[0])
    # ...nor does any one range of ids hold the gold items and nothing else.
    labels = [i.gold_answer is not None for i in sorted(items, key=lambda i: i.id)]
    blocks = sum(1 for k, g in enumerate(labels) if g and (k == 0 or not labels[k - 1]))
    assert blocks > 1
    # And the ids do not follow the import order.
    ranks = {i.id: r for r, i in enumerate(sorted(items, key=lambda i: i.id))}
    assert [ranks[i.id] for i in items] != sorted(ranks.values())


def test_item_ids_are_drawn_and_are_what_reviewers_see(tmp_path: Path, runs: list[Path]) -> None:
    store = _imported(tmp_path, runs, None)
    items = store.items()
    ids = [i.id for i in items]
    assert len(set(ids)) == len(ids) and all(i in ITEM_IDS for i in ids)
    assert [(i.run_id, i.episode) for i in items] == sorted((i.run_id, i.episode) for i in items)
    assert store.add_run(runs[1], audit=False)[1] == 0  # importing again adds nothing, keeps the ids
    assert [i.id for i in store.items()] == ids
    build_queue(store, SamplingPlan(gold_rate=1.0))
    store.add_reviewer("ann", "ann-password")
    c = ReviewerClient(TestClient(create_app(store), base_url=BASE))
    assert c.sign_in("ann", "ann-password").status_code == 303
    gold_id = c.take()
    assert gold_id in {i.id for i in items if i.gold_answer is not None}
    page = c.http.get(f"/item/{gold_id}")
    assert page.status_code == 200 and f"Item {gold_id}" in page.text


# -- 11. a file that is not a review database --------------------------------------


def _foreign_sqlite(path: Path, wal: bool, table: str = "people (name TEXT)") -> None:
    conn = sqlite3.connect(path)
    if wal:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"CREATE TABLE {table}")
    conn.commit()
    conn.close()


def _junk(path: Path, data: bytes) -> None:
    path.write_bytes(data)


FOREIGN: dict[str, Callable[[Path], None]] = {
    "sqlite": lambda p: _foreign_sqlite(p, wal=False),
    "sqlite-wal": lambda p: _foreign_sqlite(p, wal=True),
    "junk": lambda p: _junk(p, b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8),
    "sqlite-header-junk": lambda p: _junk(p, b"SQLite format 3\x00" + b"\xff" * 300),
    "meta-without-format": lambda p: _foreign_sqlite(p, wal=False, table="meta (key TEXT, value TEXT)"),
}


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.mark.parametrize("kind", sorted(FOREIGN))
@pytest.mark.parametrize("command", ["serve", "add-user", "stats", "export-disagreements"])
def test_a_foreign_file_is_refused_and_left_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], kind: str, command: str
) -> None:
    monkeypatch.setattr("mirrorworld.review.app.serve", lambda app, host, port, allowed_hosts=(): None)
    monkeypatch.setattr("sys.stdin", io.StringIO("a-long-password\n"))
    data = tmp_path / "data"
    data.mkdir()
    db = data / "other.db"
    FOREIGN[kind](db)
    before = _snapshot(data)
    argv = {
        "serve": ["serve", "--db", str(db), "--no-audit"],
        "add-user": ["add-user", "zoe", "--db", str(db)],
        "stats": ["stats", "--db", str(db)],
        "export-disagreements": ["export-disagreements", "--db", str(db), "--out", str(tmp_path / "cases.jsonl")],
    }[command]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"mirrorworld: error: {db} ") and "not a review database" in err, err
    assert err.count("\n") == 1
    assert _snapshot(data) == before  # byte-identical, and nothing written beside it


def test_an_empty_file_or_an_sqlite_file_without_tables_becomes_a_review_database(tmp_path: Path) -> None:
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    blank = tmp_path / "blank.sqlite"
    conn = sqlite3.connect(blank)
    conn.execute("PRAGMA user_version=7")
    conn.close()
    for path in (empty, blank):
        ReviewStore(path, create=False).add_reviewer("ann", "ann-password")
        assert ReviewStore(path).authenticate("ann", "ann-password") is not None


# -- 8. hostile text in the terminal ------------------------------------------------

HOSTILE = "fam\x1b]0;owned\x07\x1b[2J[red]RED[/red]\r\u202e\x9b31m"


@pytest.fixture()
def hostile_db(tmp_path: Path, runs: list[Path]) -> Path:
    """A review database whose run text is hostile, with disagreements so it is printed."""
    store = ReviewStore(tmp_path / "hostile.sqlite")
    store.add_run(runs[1], audit=False)
    with store.write() as conn:
        for item in store.items(conn):
            checks = [{**c.to_dict(), "group": f"{HOSTILE}: check"} for c in item.checks]
            conn.execute(
                "UPDATE items SET family=?, task_id=?, checks=? WHERE id=?",
                (HOSTILE, f"{HOSTILE}/task", json.dumps(checks), item.id),
            )
    build_queue(store, SamplingPlan(gold_rate=0.0, overlap=1))
    ann = store.reviewer(store.add_reviewer("ann", "ann-password"))
    assert ann is not None
    while (item_id := take_next(store, ann)) is not None:
        taken = store.item(item_id)
        assert taken is not None
        rubric = {taken.checks[0].key: not taken.checks[0].verifier} if taken.checks else {}
        store.submit_review(ReviewInput(item_id, ann.id, not taken.verifier_passed, rubric=rubric))
    return store.path


def test_stats_print_run_text_inert(hostile_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", "--db", str(hostile_db), "--resamples", "20"]) == 0
    out = capsys.readouterr().out
    assert "verifier vs human" in out and "item " in out
    for raw in ("\x1b", "\x07", "\r", "\u202e", "\x9b"):
        assert raw not in out, repr(raw)
    assert "[red]RED[/red]" in out  # shown as text, not read as markup
    assert "\\x1b]0;owned\\x07" in out and "\\u202e" in out
    assert main(["stats", "--db", str(hostile_db), "--resamples", "20", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)  # JSON escapes control characters itself
    assert HOSTILE in report["by_family"]


def test_inert_and_error_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert inert("ok [b]x[/b] ünï ✓") == "ok [b]x[/b] ünï ✓"
    assert inert("a\nb\x1b[2Jc\x00") == "a\\nb\\x1b[2Jc\\x00"
    assert inert("x" * 600).endswith("…") and len(inert("x" * 600)) == 501
    bad = tmp_path / "no\x1b]0;owned\x07here.sqlite"
    assert main(["stats", "--db", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and err.count("\n") == 1
    assert "no\\x1b]0;owned\\x07here.sqlite" in err


# -- ids too long for a row, the Host of a rebinding page, bounded request heads ------------


def test_ids_too_long_for_a_row_are_404_not_a_server_error(store: ReviewStore, runs: list[Path]) -> None:
    for p in runs:
        store.add_run(p, audit=False)
    c = ReviewerClient(TestClient(create_app(store), base_url=BASE))
    assert c.sign_in("boss", "boss-password").status_code == 303
    for ident in ("99999999999999999999", "9223372036854775808", "9" * 5000):
        for method, path in (
            ("GET", f"/item/{ident}"),
            ("POST", f"/item/{ident}/review"),
            ("POST", f"/reviewers/{ident}/pause"),
            ("POST", f"/reviewers/{ident}/resume"),
        ):
            resp = c.http.request(method, path, data={"csrf": c.csrf}, follow_redirects=False)
            assert resp.status_code == 404, (method, path[:40], resp.status_code)


def test_a_rebinding_page_is_refused_by_host(store: ReviewStore) -> None:
    from mirrorworld.review.app import HostGuard

    guarded = TestClient(HostGuard(create_app(store)), base_url=BASE)
    assert guarded.get("/login").status_code == 200
    assert guarded.get("/login", headers={"host": "evil.example"}).status_code == 421
    allowed = TestClient(HostGuard(create_app(store), ("review.team.internal",)), base_url=BASE)
    assert allowed.get("/login", headers={"host": "review.team.internal"}).status_code == 200


def test_review_serve_bounds_request_heads(tmp_path: Path, runs: list[Path]) -> None:
    import socket
    import subprocess
    import sys
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "mirrorworld.review", "serve", "--db", str(tmp_path / "r.sqlite")),
            *("--port", str(port), "--no-audit", *map(str, runs)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.1)
        with socket.create_connection(("127.0.0.1", port), timeout=20) as conn:
            conn.sendall(b"GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * 200_000 + b"\r\n\r\n")
            status = conn.recv(64)
        assert status.startswith(b"HTTP/1.1 431"), status
    finally:
        proc.terminate()
        proc.wait(10)
        assert proc.stderr is not None
        log = proc.stderr.read()
        proc.stderr.close()
    assert b"Traceback" not in log
