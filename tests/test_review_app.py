"""The review app over HTTP: sign-in, signed sessions, CSRF, roles, the blind view, malformed forms."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from itsdangerous import URLSafeTimedSerializer
from starlette.testclient import TestClient

from mirrorworld.review.app import SESSION_COOKIE, create_app
from mirrorworld.review.queue import SamplingPlan, build_queue
from mirrorworld.review.stats import StatsOptions
from mirrorworld.review.store import ReviewStore
from mirrorworld.review.testing import ReviewerClient, make_runs

BASE = "http://127.0.0.1"
PASSWORDS = {"alice": "alice-password", "bob": "bob-password", "judge": "judge-password", "boss": "boss-password"}


@dataclass
class App:
    store: ReviewStore
    app: Any
    signed_in: dict[str, ReviewerClient] = field(default_factory=dict)

    def client(self, name: str | None = None) -> ReviewerClient:
        c = ReviewerClient(TestClient(self.app, base_url=BASE))
        if name is not None:
            assert c.sign_in(name, PASSWORDS[name]).status_code == 303
        return c


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return make_runs(tmp_path_factory.mktemp("runs"), ("oracle", "claim"), episodes=6)


@pytest.fixture()
def env(tmp_path: Path, runs: list[Path]) -> Iterator[App]:
    store = ReviewStore(tmp_path / "review.sqlite")
    for p in runs:
        store.add_run(p, audit=False)
    build_queue(store, SamplingPlan(overlap=2, overlap_share=1.0, gold_rate=0.0))
    for name, role in (("alice", "reviewer"), ("bob", "reviewer"), ("judge", "adjudicator"), ("boss", "admin")):
        store.add_reviewer(name, PASSWORDS[name], role)  # type: ignore[arg-type]
    yield App(store, create_app(store, stats_options=StatsOptions(resamples=100)))


# -- sign-in and sessions ----------------------------------------------------------


def test_sign_in_needs_the_right_password_and_form_token(env: App) -> None:
    c = env.client()
    assert c.http.get("/queue", follow_redirects=False).headers["location"] == "/login"
    assert c.sign_in("alice", "not-her-password").status_code == 401
    page = c.http.get("/login")
    token = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert token is not None
    bad = c.http.post("/login", data={"csrf": "forged", "name": "alice", "password": PASSWORDS["alice"]})
    assert bad.status_code == 403
    fresh = TestClient(env.app, base_url=BASE)  # no sign-in cookie: a form token from elsewhere is useless
    stolen = fresh.post("/login", data={"csrf": token.group(1), "name": "alice", "password": PASSWORDS["alice"]})
    assert stolen.status_code == 403
    ok = c.sign_in("alice", PASSWORDS["alice"])
    assert ok.status_code == 303
    cookie = ok.headers["set-cookie"]
    assert "HttpOnly" in cookie and "samesite=strict" in cookie.lower()
    assert c.http.get("/queue").status_code == 200


def test_a_client_signed_in_already_keeps_its_session(env: App) -> None:
    c = env.client("alice")
    token = c.csrf
    again = c.sign_in("alice", PASSWORDS["alice"])  # as after a sign-in whose answer was lost
    assert again.status_code == 303 and again.headers["location"] == "/queue"
    assert c.csrf == token and c.take() is not None


def test_repeated_failed_sign_ins_lock_the_name_out(env: App) -> None:
    c = env.client()
    for _ in range(5):
        assert c.sign_in("bob", "guess-guess").status_code == 401
    assert c.sign_in("bob", PASSWORDS["bob"]).status_code == 429
    assert c.sign_in("alice", PASSWORDS["alice"]).status_code == 303  # other names are unaffected


def test_forged_and_ended_sessions_are_refused(env: App) -> None:
    c = env.client("alice")
    good = c.http.cookies[SESSION_COOKIE]
    token = URLSafeTimedSerializer(env.store.secret, salt="mirrorworld-review/session").loads(good)
    for forged in (
        good[:-2] + ("AA" if not good.endswith("AA") else "BB"),
        URLSafeTimedSerializer("another secret", salt="mirrorworld-review/session").dumps(token),
        token,
        URLSafeTimedSerializer(env.store.secret, salt="mirrorworld-review/session").dumps("made-up-token"),
    ):
        other = TestClient(env.app, base_url=BASE, cookies={SESSION_COOKIE: forged})
        assert other.get("/queue", follow_redirects=False).headers["location"] == "/login"
    assert c.http.post("/logout", data={"csrf": c.csrf}, follow_redirects=False).status_code == 303
    replay = TestClient(env.app, base_url=BASE, cookies={SESSION_COOKIE: good})
    assert replay.get("/queue", follow_redirects=False).headers["location"] == "/login"


def test_every_form_needs_its_token_and_this_origin(env: App) -> None:
    c = env.client("boss")
    for path in ("/take", "/logout", "/reviewers", "/reviewers/1/pause", "/item/1/adjudicate"):
        assert c.http.post(path, data={"csrf": "wrong"}).status_code == 403, path
        assert c.http.post(path, data={"name": "x"}).status_code == 403, path
    cross = c.http.post("/take", data={"csrf": c.csrf}, headers={"Origin": "https://evil.example"})
    assert cross.status_code == 403
    same = c.http.post("/take", data={"csrf": c.csrf}, headers={"Origin": BASE}, follow_redirects=False)
    assert same.status_code == 303


def test_pages_carry_security_headers(env: App) -> None:
    resp = env.client("alice").http.get("/queue")
    assert "script-src 'self'" in resp.headers["content-security-policy"]
    assert resp.headers["x-frame-options"] == "DENY"
    assert "<script" not in resp.text.replace('<script src="/static/app.js" defer></script>', "")


# -- roles -----------------------------------------------------------------------


def test_each_role_sees_what_it_may(env: App) -> None:
    alice, judge, boss = env.client("alice"), env.client("judge"), env.client("boss")
    for path in ("/stats", "/stats.json", "/drift", "/reviewers"):
        assert alice.http.get(path).status_code == 403, path
    assert judge.http.get("/stats").status_code == 200
    assert judge.http.get("/drift").status_code == 200
    assert judge.http.get("/reviewers").status_code == 403
    for path in ("/stats", "/stats.json", "/drift", "/reviewers"):
        assert boss.http.get(path).status_code == 200, path
    some = env.store.items()[0].id
    assert alice.http.get(f"/item/{some}").status_code == 404  # never taken: not even its existence shows
    assert alice.http.get("/item/99999").status_code == 404
    assert judge.http.get(f"/item/{some}").status_code == 200
    adjudicate = alice.http.post(f"/item/{some}/adjudicate", data={"csrf": alice.csrf, "verdict": "pass"})
    assert adjudicate.status_code == 403
    assert judge.http.post(f"/item/{some}/gold", data={"csrf": judge.csrf}).status_code == 403
    add = alice.http.post("/reviewers", data={"csrf": alice.csrf, "name": "mallory", "password": "x" * 12})
    assert add.status_code == 403 and len(env.store.reviewers()) == 4


def test_the_verdict_stays_hidden_until_the_reviewer_has_graded(env: App) -> None:
    alice, bob = env.client("alice"), env.client("bob")
    item_id = alice.take()
    assert item_id is not None
    record = env.store.record(item_id)
    secrets_of_the_verdict = [e.split(": ", 1)[1] for e in record["verdict"]["evidence"]]
    blind = alice.http.get(f"/item/{item_id}").text
    assert 'id="grade-form"' in blind and 'id="verdict"' not in blind
    assert record["task"]["instruction"].split('"')[0] in blind
    for text in secrets_of_the_verdict:
        assert text not in blind
    assert record["agent"] not in re.sub(r"<[^>]+>", " ", blind).split()  # the agent's name could anchor too
    assert bob.take() == item_id  # overlap 2: bob grades the same item
    assert bob.grade(item_id, False, reason="<script>alert('bob')</script> nothing was done").status_code == 303
    assert 'id="verdict"' not in alice.http.get(f"/item/{item_id}").text  # bob's grade reveals nothing to alice
    assert alice.grade(item_id, True, reason="fine", rubric_0="pass").status_code == 303
    after = alice.http.get(f"/item/{item_id}").text
    assert 'id="verdict"' in after and 'id="your-grade"' in after
    assert "alert('bob')" not in after and 'id="all-reviews"' not in after  # peers' grades: adjudicators only
    full = env.client("judge").http.get(f"/item/{item_id}").text
    assert "&lt;script&gt;alert" in full and "<script>alert" not in full


def test_posting_a_grade_twice_stores_it_once(env: App) -> None:
    alice = env.client("alice")
    item_id = alice.take()
    assert item_id is not None
    assert alice.grade(item_id, True, reason="first").status_code == 303
    assert alice.grade(item_id, False, reason="second").status_code == 303
    (review,) = env.store.reviews()
    assert review.passed and review.reason == "first"


def test_adjudication_and_gold_promotion(env: App) -> None:
    alice, bob, judge, boss = env.client("alice"), env.client("bob"), env.client("judge"), env.client("boss")
    item_id = alice.take()
    assert item_id is not None and bob.take() == item_id
    alice.grade(item_id, True, "looks done")
    bob.grade(item_id, False, "nothing changed", hacking="on")
    stats = judge.http.get("/stats.json").json()
    (d,) = [d for d in stats["disagreements"] if d["item"] == item_id]
    assert "human_vs_human" in d["kinds"] and d["human"] is None and d["adjudicated"] is None
    assert boss.http.post(f"/item/{item_id}/gold", data={"csrf": boss.csrf}).status_code == 400
    resp = judge.http.post(
        f"/item/{item_id}/adjudicate", data={"csrf": judge.csrf, "verdict": "fail", "reason": "no refund was made"}
    )
    assert resp.status_code == 200
    assert env.store.adjudications()[item_id]["passed"] is False
    stats = judge.http.get("/stats.json").json()
    (d,) = [d for d in stats["disagreements"] if d["item"] == item_id]
    assert d["human"] is False and d["adjudicated"] is False
    assert boss.http.post(f"/item/{item_id}/gold", data={"csrf": boss.csrf}).status_code == 200
    item = env.store.item(item_id)
    assert item is not None and item.gold_answer is False


def test_admins_pause_resume_and_add_reviewers(env: App) -> None:
    boss = env.client("boss")
    alice_id = next(r.id for r in env.store.reviewers() if r.name == "alice")
    boss.http.post(f"/reviewers/{alice_id}/pause", data={"csrf": boss.csrf})
    alice = env.client("alice")
    assert alice.take() is None
    assert "paused" in alice.http.get("/queue").text
    boss.http.post(f"/reviewers/{alice_id}/resume", data={"csrf": boss.csrf})
    assert alice.take() is not None
    resp = boss.http.post(
        "/reviewers", data={"csrf": boss.csrf, "name": "carol", "password": "carol-pass", "role": "reviewer"}
    )
    assert resp.status_code == 200 and any(r.name == "carol" for r in env.store.reviewers())
    bad = boss.http.post(
        "/reviewers", data={"csrf": boss.csrf, "name": "dave", "password": "short", "role": "reviewer"}
    )
    assert bad.status_code == 400
    assert boss.http.post("/reviewers/999/pause", data={"csrf": boss.csrf}).status_code == 404


# -- malformed input ----------------------------------------------------------------


def test_malformed_bodies_are_refused_and_change_nothing(env: App) -> None:
    alice = env.client("alice")
    item_id = alice.take()
    assert item_id is not None
    url = f"/item/{item_id}/review"
    ok = f"csrf={alice.csrf}&verdict=pass"
    cases = [
        (b"csrf=" + alice.csrf.encode() + b"&verdict=pass&reason=%FF%FE", "application/x-www-form-urlencoded"),
        (b"\xff\xfe\x00garbage", "application/x-www-form-urlencoded"),
        (ok.encode(), "application/json"),
        (ok.encode(), "multipart/form-data; boundary=x"),
        ((ok + "&verdict=fail").encode(), "application/x-www-form-urlencoded"),
        ((ok + "&reason=a%00b").encode(), "application/x-www-form-urlencoded"),
        ((ok + "&reason=" + "x" * 70_000).encode(), "application/x-www-form-urlencoded"),
        ((ok + "&" + "&".join(f"f{k}=1" for k in range(200))).encode(), "application/x-www-form-urlencoded"),
        ((ok + "&is_admin=1").encode(), "application/x-www-form-urlencoded"),
        ((ok + "&reason_keys=-5").encode(), "application/x-www-form-urlencoded"),
        ((ok + "&reason_keys=%EF%BC%95").encode(), "application/x-www-form-urlencoded"),  # a fullwidth digit
        ((ok + "&rubric_0=maybe").encode(), "application/x-www-form-urlencoded"),
        ((ok + "&rubric_99=pass").encode(), "application/x-www-form-urlencoded"),
        ((ok + "&hacking=yes").encode(), "application/x-www-form-urlencoded"),
        (f"csrf={alice.csrf}&verdict=maybe".encode(), "application/x-www-form-urlencoded"),
        (b"", "application/x-www-form-urlencoded"),
    ]
    for body, ctype in cases:
        resp = alice.http.post(url, content=body, headers={"content-type": ctype})
        assert 400 <= resp.status_code < 500, (body[:60], resp.status_code)
    assert alice.http.post("/item/not-a-number/review", data={"csrf": alice.csrf}).status_code == 404
    assert env.store.reviews() == [] and env.store.check_consistency() == []
    resp = alice.http.post(
        url, content=ok.encode(), headers={"content-type": "application/x-www-form-urlencoded"}, follow_redirects=False
    )
    assert resp.status_code == 303 and len(env.store.reviews()) == 1


FIELDS = [
    "csrf",
    "verdict",
    "reason",
    "rubric_0",
    "rubric_1",
    "rubric_7",
    "hacking",
    "task_wrong",
    "edge_case",
    "reason_keys",
    "reason_pasted",
    "other",
    "",
]
VALUES = st.one_of(
    st.sampled_from(["pass", "fail", "on", "0", "1", "", "PASS", "-1", "99999999", "\x00", "%", "&", "="]),
    st.text(max_size=40),
)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=8), st.booleans())
def test_any_form_post_leaves_the_database_consistent(env: App, fields: dict[str, str], real_token: bool) -> None:
    store = env.store
    if "alice" not in env.signed_in:  # hypothesis reuses the fixture: sign in once
        env.signed_in["alice"] = env.client("alice")
    alice = env.signed_in["alice"]
    item_id = alice.take()
    if item_id is None:
        return
    data = dict(fields)
    if real_token:
        data["csrf"] = alice.csrf
    before = len(store.reviews())
    resp = alice.http.post(f"/item/{item_id}/review", data=data, follow_redirects=False)
    after = store.reviews()
    assert resp.status_code in (303, 400, 403, 415), resp.status_code
    if resp.status_code == 303:
        assert len(after) == before + 1
        review = after[-1]
        assert review.item_id == item_id and review.passed == (data["verdict"] == "pass")
        assert review.reason == data.get("reason", "").replace("\r\n", "\n")
    else:
        assert len(after) == before
    assert store.check_consistency() == []
