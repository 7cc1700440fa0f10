"""The review API: tokens and roles on every route, submission and sampling, grading over HTTP, long-polls,
webhooks, the label export, hostile input, and schemathesis fuzzing of the published OpenAPI schema."""

from __future__ import annotations

import hashlib
import hmac
import json
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from mirrorworld.review.__main__ import main
from mirrorworld.review.api import ROUTES, ApiConfig, Op
from mirrorworld.review.app import create_app
from mirrorworld.review.client import ReviewAPI, ReviewAPIError
from mirrorworld.review.drift import compute_drift
from mirrorworld.review.quality import QualityPolicy
from mirrorworld.review.queue import SamplingPlan, build_queue
from mirrorworld.review.stats import StatsOptions, compute_stats
from mirrorworld.review.store import ROLES, ReviewStore
from mirrorworld.review.testing import make_runs, running
from mirrorworld.run import RunFile

BASE = "http://127.0.0.1"
STATS = StatsOptions(resamples=50)
CONFIG = ApiConfig(webhook_backoff=0.05, webhook_timeout=2.0, webhook_attempts=3, db_poll=0.2)
PEOPLE = {"boss": "admin", "judge": "adjudicator", "alice": "reviewer", "bob": "reviewer"}


@dataclass(frozen=True)
class Run:
    meta: dict[str, Any]
    episodes: list[dict[str, Any]]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    out = {}
    for path in make_runs(tmp_path_factory.mktemp("runs"), ("oracle", "claim"), episodes=4):
        with RunFile.open(path) as rf:
            out[path.stem] = Run(rf.meta, [asdict(r) for r in rf.episodes()])
    return out


@dataclass
class Env:
    store: ReviewStore
    app: Any
    http: TestClient
    tokens: dict[str, str] = field(default_factory=dict)

    def call(self, method: str, path: str, who: str | None = "boss", **kw: Any) -> httpx.Response:
        headers = dict(kw.pop("headers", {}))
        if who is not None:
            headers["Authorization"] = f"Bearer {self.tokens.get(who, who)}"
        return self.http.request(method, "/api/v1" + path, headers=headers, **kw)

    def submit(self, run: Run, name: str = "loop", **sample: Any) -> dict[str, Any]:
        body = {
            "run": {"name": name, "world": run.meta["world"], "meta": {"world_hash": run.meta["world_hash"]}},
            "episodes": run.episodes,
            "sample": sample,
        }
        resp = self.call("POST", "/episodes", json=body)
        assert resp.status_code == 200, resp.text
        result: dict[str, Any] = resp.json()
        return result

    def take(self, who: str) -> dict[str, Any] | None:
        resp = self.call("POST", "/queue/take", who)
        assert resp.status_code == 200, resp.text
        item: dict[str, Any] | None = resp.json()["item"]
        return item


@pytest.fixture(scope="module")
def people(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A review database with PEOPLE and a token each, made once (passwords are scrypt-hashed: slow on purpose)."""
    path = tmp_path_factory.mktemp("people") / "review.sqlite"
    store = ReviewStore(path)
    tokens = {name: store.create_token(name, role=role, create=True)[1] for name, role in PEOPLE.items()}  # type: ignore[arg-type]
    return path, tokens


def make_env(path: Path, people: tuple[Path, dict[str, str]], config: ApiConfig = CONFIG) -> Env:
    path.write_bytes(people[0].read_bytes())  # every connection is closed: the database is whole in its file
    store = ReviewStore(path)
    app = create_app(store, stats_options=STATS, api=config)
    return Env(store, app, TestClient(app, base_url=BASE), dict(people[1]))


@pytest.fixture()
def env(tmp_path: Path, people: tuple[Path, dict[str, str]]) -> Iterator[Env]:
    e = make_env(tmp_path / "review.sqlite", people)
    yield e
    e.http.close()


def path_of(op: Op) -> str:
    return (
        op.path.replace("{item_id}", "1")
        .replace("{webhook_id}", "1")
        .replace("{token_id}", "1")
        .replace("{case_id}", "1")
    )


def request_of(op: Op) -> dict[str, Any]:
    kw: dict[str, Any] = {"params": {"ids": "1"}} if op.handler == "items" else {}
    if op.body is not None:
        kw["json"] = {}
    return kw


# -- tokens and roles ----------------------------------------------------------------------


@pytest.mark.parametrize("op", [op for op in ROUTES if op.role], ids=lambda op: f"{op.method} {op.path}")
def test_every_route_needs_a_live_token(env: Env, op: Op) -> None:
    revoked, secret = env.store.create_token("boss")
    env.store.revoke_token(revoked.id)
    expired = env.store.create_token("boss", expires_in=1)[1]
    env.store.clock = lambda: time.time() + 5
    for who, headers in [
        (None, {}),
        (None, {"Authorization": "Basic Ym9zczpib3Nz"}),
        (None, {"Authorization": "Bearer "}),
        ("mwr_forged", {}),
        (secret, {}),
        (expired, {}),
    ]:
        resp = env.call(op.method, path_of(op), who, headers=headers, **request_of(op))
        assert resp.status_code == 401, (who, resp.text)
        assert resp.json()["error"]["code"] == "unauthorized"
        assert resp.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize("op", [op for op in ROUTES if op.role], ids=lambda op: f"{op.method} {op.path}")
def test_roles_are_enforced_on_every_route(env: Env, op: Op) -> None:
    assert op.role is not None
    for who, role in PEOPLE.items():
        resp = env.call(op.method, path_of(op), who, **request_of(op))
        if ROLES.index(role) < ROLES.index(op.role):
            assert resp.status_code == 403, (who, resp.text)
            assert resp.json()["error"] == {
                "code": "forbidden",
                "message": f"this route is for the {op.role} role and above",
            }
        else:
            assert resp.status_code not in (401, 403), (who, resp.text)
            assert resp.status_code < 500 and resp.headers["content-type"] == "application/json"


def test_a_token_is_stored_hashed_and_never_above_its_reviewer(env: Env) -> None:
    listed, secret = env.store.create_token("alice", label="sim")
    assert secret.startswith("mwr_") and listed.role == "reviewer"
    with env.store.read() as conn:
        stored = {r[0] for r in conn.execute("SELECT token FROM api_tokens")}
    assert hashlib.sha256(secret.encode()).hexdigest() in stored and secret not in stored
    with pytest.raises(Exception, match="cannot be admin"):
        env.store.create_token("alice", role="admin")
    _reader, low = env.store.create_token("boss", role="adjudicator")
    assert env.call("GET", "/me", low).json()["role"] == "adjudicator"
    assert env.call("GET", "/tokens", low).status_code == 403  # an admin's read-only token is read-only
    made = env.call("POST", "/tokens", json={"reviewer": "sim-1", "create_reviewer": True}).json()
    assert made["role"] == "reviewer" and env.call("GET", "/me", made["token"]).json()["reviewer"] == "sim-1"
    assert made["token"] not in env.call("GET", "/tokens").text
    assert env.call("POST", "/tokens", json={"reviewer": "nobody"}).status_code == 404
    assert env.call("DELETE", f"/tokens/{made['id']}").json() == {"deleted": True}
    assert env.call("GET", "/me", made["token"]).status_code == 401
    assert env.call("DELETE", f"/tokens/{made['id']}").status_code == 404


def test_the_cli_creates_lists_and_revokes_tokens(env: Env, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(env.store.path)
    assert main(["token", "create", "--db", db, "--name", "pipeline", "--role", "admin", "--create"]) == 0
    printed = capsys.readouterr().out
    secret = printed.split(": ")[1].split()[0]
    assert env.call("GET", "/me", secret).json()["role"] == "admin"
    out = tmp_path / "token.txt"
    assert main(["token", "create", "--db", db, "--name", "alice", "--out", str(out)]) == 0
    assert secret not in capsys.readouterr().out and stat.S_IMODE(out.stat().st_mode) == 0o600
    assert env.call("GET", "/me", out.read_text().strip()).json()["reviewer"] == "alice"
    assert main(["token", "create", "--db", db, "--name", "alice", "--role", "admin"]) == 1
    assert "cannot be admin" in capsys.readouterr().err
    assert main(["token", "list", "--db", db, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    (mine,) = [t for t in listed if t["reviewer"] == "pipeline"]
    assert main(["token", "revoke", "--db", db, str(mine["id"])]) == 0
    assert env.call("GET", "/me", secret).status_code == 401
    assert main(["token", "revoke", "--db", db, str(mine["id"])]) == 1


# -- submission and sampling ---------------------------------------------------------------


def test_submitted_episodes_are_queued_by_the_sampling_rules(env: Env, runs: dict[str, Run]) -> None:
    sent = env.submit(runs["oracle"], "loop/1", size=3, overlap=2, overlap_share=1.0)
    assert sent["run"]["name"] == "api:loop/1" and sent["added"] == 4 and sent["newly_queued"] == 3
    ids = [row["item"] for row in sent["items"]]
    assert [row["index"] for row in sent["items"]] == [0, 1, 2, 3] and all(row["new"] for row in sent["items"])
    in_queue = {i.id for i in env.store.items() if i.position is not None}
    assert set(sent["queued"]) == in_queue == {row["item"] for row in sent["items"] if row["queued"]}
    assert len({i.stratum for i in env.store.items() if i.id in in_queue}) == 3  # three strata, one each
    states = env.call("GET", "/items", params={"ids": ",".join(map(str, ids))}, who="judge").json()["items"]
    assert [s["status"] for s in states].count("queued") == 3 and [s["status"] for s in states].count("not_queued") == 1
    assert all(s["required_reviews"] == 2 for s in states if s["status"] == "queued")
    assert all(s["verifier"]["passed"] and s["human"] is None for s in states)
    again = env.submit(runs["oracle"], "loop/1", size=0)  # sent twice (a retried request): nothing new
    assert [row["item"] for row in again["items"]] == ids and again["added"] == 0
    assert not any(row["new"] for row in again["items"])
    more = env.submit(runs["claim"], "loop/2", size=2)
    assert more["newly_queued"] == 2 and len({i.id for i in env.store.items() if i.position is not None}) == 5
    every = env.submit(runs["claim"], "loop/3")  # no size: every episode not queued yet
    assert len(every["queued"]) == 4 and all(i.position is not None for i in env.store.items())
    runs_meta = {r["path"]: r["meta"] for r in env.store.runs()}
    assert runs_meta["api:loop/2"]["world_hash"] == runs["claim"].meta["world_hash"]
    assert runs_meta["api:loop/2"]["agent"] == "claim"


def _broken(runs: dict[str, Run], change: Any) -> dict[str, Any]:
    episode = json.loads(json.dumps(runs["oracle"].episodes[0]))
    change(episode)
    return {"run": {"name": "x", "world": "helpdesk"}, "episodes": [episode]}


MALFORMED: list[tuple[str, Any, str]] = [
    ("missing field", lambda e: e.pop("task_id"), "episodes.0.task_id: missing"),
    ("unknown field", lambda e: e.update(extra=1), "episodes.0.extra: unknown field"),
    ("wrong type", lambda e: e.update(score="high"), "episodes.0: episode 0: score is str, not int or float"),
    ("bool as an int", lambda e: e.update(steps=True), "steps is bool, not int"),
    ("not a list", lambda e: e.update(messages={}), "messages is dict, not list"),
    ("call without a tool", lambda e: e["calls"].append({"args": {}}), "calls holds a call without a tool name"),
    ("bad verdict", lambda e: e.update(verdict={"passed": "yes"}), "episodes.0: episode 0: "),
    ("task not a task", lambda e: e.update(task={"world": "helpdesk"}), "episodes.0.task: not a task record"),
    ("task checks", lambda e: e["task"].update(checks=[{"name": "x"}]), "episodes.0.task: not a task record"),
    ("huge int", lambda e: e.update(seed=2**70), "episodes.0.seed: out of range"),
    ("negative steps", lambda e: e.update(steps=-1), "out of range"),
    ("usage not counts", lambda e: e.update(usage={"tokens": "many"}), "usage holds something other than counts"),
]


@pytest.mark.parametrize(("case", "change", "message"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_episodes_are_refused_naming_the_field(
    env: Env, runs: dict[str, Run], case: str, change: Any, message: str
) -> None:
    resp = env.call("POST", "/episodes", json=_broken(runs, change))
    assert resp.status_code == 400, resp.text
    assert resp.json()["error"]["code"] == "invalid" and message in resp.json()["error"]["message"], resp.json()
    assert env.store.items() == [] and env.store.runs() == []


BAD_BODIES: list[tuple[str, Any, str]] = [
    ("unknown top-level field", {"run": {"name": "x", "world": "w"}, "episodes": [{}], "extra": 1}, "extra: unknown"),
    ("unknown run field", {"run": {"name": "x", "world": "w", "path": "/etc"}, "episodes": [{}]}, "run.path: unknown"),
    ("a run name with a space", {"run": {"name": "a b", "world": "w"}, "episodes": [{}]}, "run.name: String should"),
    ("no episodes", {"run": {"name": "x", "world": "w"}, "episodes": []}, "episodes: List should have at least 1"),
    ("a list", [1, 2], "the body: Input should be"),
    ("a string size", {"run": {"name": "x", "world": "w"}, "episodes": [{}], "sample": {"size": "3"}}, "sample.size"),
    ("an unknown sample field", {"run": {"name": "x", "world": "w"}, "episodes": [{}], "sample": {"n": 3}}, "sample.n"),
]


@pytest.mark.parametrize(("case", "body", "message"), BAD_BODIES, ids=[b[0] for b in BAD_BODIES])
def test_bodies_that_do_not_fit_the_model_are_400(env: Env, case: str, body: Any, message: str) -> None:
    resp = env.call("POST", "/episodes", json=body)
    assert resp.status_code == 400 and message in resp.json()["error"]["message"], resp.text


def test_hostile_requests_are_4xx_never_5xx(env: Env, runs: dict[str, Run]) -> None:
    def check(resp: httpx.Response, status: int, code: str) -> None:
        assert resp.status_code == status, resp.text[:300]
        assert resp.headers["content-type"] == "application/json" and resp.json()["error"]["code"] == code

    huge = b'{"run": {"name": "x", "world": "w"}, "episodes": [' + b'{"a": 1},' * 4_000_000 + b"{}]}"
    check(env.call("POST", "/episodes", content=huge, headers={"Content-Type": "application/json"}), 413, "too_large")

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"passed": true, "reason": "'
        for _ in range(100):
            yield b"x" * 4096
        yield b'"}'

    check(env.call("POST", "/items/1/review", "alice", content=chunks()), 413, "too_large")
    for body, says in [
        (b"{", "not valid JSON"),
        (b"\xff\xfe", "not UTF-8"),
        (b"[" * 5000 + b"]" * 5000, "deeper than"),
        (b'{"run": {"name": "x", "world": "w"}, "episodes": [{"score": NaN}]}', "NaN or Infinity"),
        (b'{"run": {"name": "x", "world": "\\ud800"}, "episodes": [{}]}', "lone surrogate"),
        (b'{"run": {"name": "x", "world": "w", "meta": {"n": ' + b"9" * 5000 + b'}}, "episodes": [{}]}', "JSON"),
    ]:
        resp = env.call("POST", "/episodes", content=body, headers={"Content-Type": "application/json"})
        check(resp, 400, "invalid_json")
        assert says in resp.json()["error"]["message"], (body[:40], resp.json())
    check(env.call("POST", "/episodes", data={"run": "x"}), 415, "unsupported_media_type")
    check(env.call("POST", "/queue/take", "alice", json={"x": 1}), 400, "invalid")
    for bad in ("abc", "1" * 19, "-1", "1.5", "%00", "9" * 18):
        check(env.call("GET", f"/items/{bad}", "judge"), 404, "not_found")
    check(env.call("GET", "/items", "judge", params={"ids": "1,x"}), 400, "invalid")
    check(env.call("GET", "/items", "judge", params={"ids": ",".join(["1"] * 501)}), 400, "invalid")
    check(env.call("GET", "/items", "judge", params={"ids": "1", "wait": "61"}), 400, "invalid")
    check(env.call("GET", "/items", "judge", params={"ids": "1", "wait": "nan"}), 400, "invalid")
    check(env.call("GET", "/items?ids=1&ids=2", "judge"), 400, "invalid")
    check(env.call("GET", "/labels", "judge", params={"limit": "0"}), 400, "invalid")
    check(env.call("GET", "/me", "judge", params={"debug": "1"}), 400, "invalid")
    check(env.call("GET", "/nowhere"), 404, "not_found")
    wrong = env.call("PUT", "/items/1")
    check(wrong, 405, "method_not_allowed")
    assert wrong.headers["allow"] == "GET"
    env.submit(runs["oracle"])
    assert env.call("GET", "/items", "judge", params={"ids": "1,2"}).json()["missing"] == [1, 2]


# -- grading through the API -----------------------------------------------------------------


def test_reviewers_take_items_blind_and_grade_them(env: Env, runs: dict[str, Run]) -> None:
    env.submit(runs["claim"], size=2, overlap=2, overlap_share=1.0)
    item = env.take("alice")
    assert item is not None and env.take("alice") == item  # an open item comes back first
    shown = json.dumps(item)
    assert '"verifier"' not in shown and '"passed"' not in shown and '"score"' not in shown
    assert item["instruction"] and item["steps"] and {r["key"] for r in item["rubric"]} >= {"gate:state"}
    assert set(item["rubric"][0]) == {"key", "label"}
    not_mine = next(i.id for i in env.store.items() if i.id != item["id"])
    assert env.call("POST", f"/items/{not_mine}/review", "alice", json={"passed": True}).status_code == 404
    assert env.call("POST", f"/items/{item['id']}/review", "bob", json={"passed": True}).status_code == 404
    bad = env.call(
        "POST", f"/items/{item['id']}/review", "alice", json={"passed": True, "rubric": {"check:nope": True}}
    )
    assert bad.status_code == 400 and "no rubric row" in bad.json()["error"]["message"]
    assert env.call("POST", f"/items/{item['id']}/review", "alice", json={"passed": "yes"}).status_code == 400
    grade = {"passed": True, "rubric": {"gate:state": False}, "reason": "looks done", "flags": ["edge_case"]}
    first = env.call("POST", f"/items/{item['id']}/review", "alice", json=grade).json()
    assert first["created"] and not first["paused"]
    again = env.call("POST", f"/items/{item['id']}/review", "alice", json=grade).json()
    assert again == {**first, "created": False}
    (row,) = env.store.reviews(None, "v.item_id=?", (item["id"],))
    assert row.rubric == {"gate:state": False} and row.flag_edge_case and row.reason == "looks done"
    state = env.call("GET", f"/items/{item['id']}", "judge").json()
    assert state["status"] == "in_review" and state["reviews"] == 1 and state["human"] is None
    bob = env.take("bob")
    assert bob is not None and bob["id"] == item["id"]  # the overlapped item goes to a second reviewer
    env.call("POST", f"/items/{item['id']}/review", "bob", json={"passed": True})
    state = env.call("GET", f"/items/{item['id']}", "judge").json()
    assert state["status"] == "reviewed" and state["human"] == {"passed": True, "adjudicated": False}
    env.store.adjudicate(item["id"], env.store.reviewers()[1].id, False, "nothing was done")
    state = env.call("GET", f"/items/{item['id']}", "judge").json()
    assert state["status"] == "adjudicated" and state["human"] == {"passed": False, "adjudicated": True}


def test_a_grade_through_the_api_runs_the_quality_check(env: Env, runs: dict[str, Run], tmp_path: Path) -> None:
    path = make_runs(tmp_path, ("oracle",), episodes=3)[0]
    env.store.add_run(path, gold=True, audit=False)
    build_queue(env.store, SamplingPlan(gold_rate=1.0))
    env.store.set_meta("quality", QualityPolicy(min_gold=2, min_gold_accuracy=0.9).to_dict())
    answers = []
    for _ in range(2):
        item = env.take("alice")
        assert item is not None
        answers.append(env.call("POST", f"/items/{item['id']}/review", "alice", json={"passed": False}).json())
    assert [a["paused"] for a in answers] == [False, True]  # two gold items graded wrong: paused, as on the page
    assert env.call("POST", "/queue/take", "alice").json() == {"item": None, "reason": "paused"}
    assert env.call("POST", "/queue/take", "bob").json()["item"] is not None


# -- status and long-polls -------------------------------------------------------------------


def _later(seconds: float, fn: Any) -> threading.Thread:
    def run() -> None:
        time.sleep(seconds)
        fn()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_a_long_poll_returns_when_a_review_lands(env: Env, runs: dict[str, Run]) -> None:
    sent = env.submit(runs["oracle"], size=2, overlap=1, overlap_share=0.0)
    ids = ",".join(map(str, sent["queued"]))
    item = env.take("alice")
    assert item is not None
    began = time.monotonic()
    short = env.call("GET", "/items", "judge", params={"ids": ids, "wait": "0.3"}).json()
    assert short["changed"] == [] and 0.3 <= time.monotonic() - began < 2
    grader = TestClient(env.app, base_url=BASE)
    later = _later(
        0.5,
        lambda: grader.post(
            f"/api/v1/items/{item['id']}/review",
            json={"passed": True},
            headers={"Authorization": f"Bearer {env.tokens['alice']}"},
        ),
    )
    began = time.monotonic()
    polled = env.call("GET", "/items", "judge", params={"ids": ids, "wait": "20"}).json()
    took = time.monotonic() - began
    later.join()
    assert 0.5 <= took < 3, took
    assert polled["changed"] == [item["id"]] and polled["waited"] < 3
    (state,) = [s for s in polled["items"] if s["id"] == item["id"]]
    assert state["resolved"] and state["human"] == {"passed": True, "adjudicated": False}

    other = next(i for i in sent["queued"] if i != item["id"])
    assert env.take("bob") is not None
    elsewhere = ReviewStore(env.store.path)  # another process's store: no in-process notice, the database poll sees it
    bob = elsewhere.reviewers()[3]
    from mirrorworld.review.api import submit_grade
    from mirrorworld.review.store import ReviewInput

    later = _later(0.5, lambda: submit_grade(elsewhere, ReviewInput(other, bob.id, False, "not done")))
    began = time.monotonic()
    polled = env.call("GET", "/items", "judge", params={"ids": ids, "wait": "20"}).json()
    later.join()
    assert polled["changed"] == [other] and time.monotonic() - began < 3
    began = time.monotonic()  # every listed item settled: no waiting at all
    assert env.call("GET", "/items", "judge", params={"ids": ids, "wait": "20"}).json()["changed"] == []
    assert time.monotonic() - began < 1


# -- webhooks --------------------------------------------------------------------------------


class Receiver(ThreadingHTTPServer):
    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.got: list[tuple[dict[str, str], bytes]] = []
        self.arrived = threading.Event()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                server = self.server
                assert isinstance(server, Receiver)
                server.got.append((dict(self.headers), body))
                server.arrived.set()
                self.send_response(server.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"


def _wait(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_webhook_gets_the_resolved_verdict(env: Env, runs: dict[str, Run]) -> None:
    ok, broken = Receiver(), Receiver(status=500)
    try:
        hook = env.call("POST", "/webhooks", json={"url": ok.url, "events": ["item.resolved"]})
        assert hook.status_code == 201 and hook.json()["secret"]
        secret = hook.json()["secret"]
        assert env.call("POST", "/webhooks", json={"url": broken.url}).status_code == 201
        assert "secret" not in json.dumps(env.call("GET", "/webhooks").json()).replace('"secret": null', "")
        env.submit(runs["claim"], size=1, overlap=1, overlap_share=0.0)
        item = env.take("alice")
        assert item is not None
        env.call("POST", f"/items/{item['id']}/review", "alice", json={"passed": True, "reason": "done"})
        assert ok.arrived.wait(10)
        headers, body = ok.got[0]
        assert headers["X-Mirrorworld-Signature"] == "sha256=" + hmac.new(secret.encode(), body, "sha256").hexdigest()
        sent = json.loads(body)
        assert sent["event"] == "item.resolved" and sent["item"]["id"] == item["id"]
        assert sent["item"]["status"] == "reviewed" and sent["item"]["human"] == {"passed": True, "adjudicated": False}
        assert sent["item"]["verifier"]["passed"] is False
        env.store.adjudicate(item["id"], env.store.reviewers()[1].id, False, "the claim is false")
        _wait(lambda: len(ok.got) == 2)
        assert json.loads(ok.got[1][1])["item"]["human"] == {"passed": False, "adjudicated": True}
        _wait(lambda: len(broken.got) == 6)  # 3 attempts for each of the two verdicts, then given up
        _wait(lambda: all(h["deliveries"]["pending"] == 0 for h in env.call("GET", "/webhooks").json()["webhooks"]))
        good, bad = env.call("GET", "/webhooks").json()["webhooks"]
        assert good["deliveries"] == {"pending": 0, "delivered": 2, "failed": 0}
        assert bad["deliveries"] == {"pending": 0, "delivered": 0, "failed": 2}
        assert {(d["attempts"], d["http_status"], d["error"]) for d in bad["recent"]} == {(3, 500, "HTTP 500")}
        env.call("POST", f"/items/{item['id']}/review", "alice", json={"passed": True})  # no new state: no delivery
        time.sleep(0.3)
        assert len(ok.got) == 2
        assert env.call("DELETE", f"/webhooks/{bad['id']}").json() == {"deleted": True}
        assert env.call("DELETE", f"/webhooks/{bad['id']}").status_code == 404
        assert [h["id"] for h in env.call("GET", "/webhooks").json()["webhooks"]] == [good["id"]]
    finally:
        for server in (ok, broken):
            server.shutdown()
            server.server_close()


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/x",
        "http://user:pw@example.com/",
        "http:///nohost",
        "file:///etc/passwd",
        "http://a b/",
        "http://example.com:99999/",
        "javascript:alert(1)",
    ],
)
def test_webhook_urls_are_checked(env: Env, url: str) -> None:
    resp = env.call("POST", "/webhooks", json={"url": url})
    assert resp.status_code == 400 and resp.json()["error"]["message"].startswith("url: ")


def test_webhooks_can_be_restricted_to_configured_hosts(tmp_path: Path, people: tuple[Path, dict[str, str]]) -> None:
    env = make_env(tmp_path / "r.sqlite", people, ApiConfig(webhook_hosts=("hooks.example.com",)))
    assert env.call("POST", "/webhooks", json={"url": "http://127.0.0.1:9/x"}).status_code == 400
    assert env.call("POST", "/webhooks", json={"url": "https://HOOKS.example.com/x"}).status_code == 201
    assert env.call("POST", "/webhooks", json={"url": "http://x/", "events": ["item.created"]}).status_code == 400


# -- reports and labels ---------------------------------------------------------------------


def test_agreement_and_drift_are_the_reports(env: Env, runs: dict[str, Run]) -> None:
    env.submit(runs["oracle"], "a", size=4, overlap=1, overlap_share=0.0)
    env.submit(runs["claim"], "b", size=4, overlap=1, overlap_share=0.0)
    for who in ("alice", "bob") * 4:
        item = env.take(who)
        if item is not None:
            env.call("POST", f"/items/{item['id']}/review", who, json={"passed": True})
    got = env.call("GET", "/agreement", "judge").json()
    assert got == json.loads(json.dumps(compute_stats(env.store, STATS)))
    assert got["items_reviewed"] == 8 and got["verifier_vs_human"]["confusion"]["verifier_fail_human_pass"] == 4
    assert env.call("GET", "/drift", "judge").json() == json.loads(json.dumps(compute_drift(env.store)))
    foreign = {
        "run": {"name": "c", "world": "helpdesk", "meta": {"world_hash": "0" * 64}},
        "episodes": runs["oracle"].episodes,
    }
    assert env.call("POST", "/episodes", json=foreign).status_code == 200
    refused = env.call("GET", "/agreement", "judge")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "incomparable"


def test_labels_export_every_grade_page_by_page(env: Env, runs: dict[str, Run]) -> None:
    sent = env.submit(runs["claim"], "labelled", size=3, overlap=2, overlap_share=1.0)
    graded: dict[int, list[str]] = {}
    for who in ("alice", "bob", "alice", "bob", "alice", "bob"):
        item = env.take(who)
        assert item is not None
        grade = {"passed": who == "alice", "rubric": {"gate:state": who == "alice"}, "reason": f"{who} says so"}
        if who == "bob":
            grade["flags"] = ["hacking", "task_wrong"]
        env.call("POST", f"/items/{item['id']}/review", who, json={**grade, "reason_keys": 3})
        graded.setdefault(item["id"], []).append(who)
    first = sorted(graded)[0]
    judge = env.store.reviewers()[1]
    env.store.adjudicate(first, judge.id, False, "nothing changed")
    pages, after = [], 0
    while True:
        page = env.call("GET", "/labels", "judge", params={"after": after, "limit": 1}).json()
        pages.append(page)
        if page["next"] is None:
            break
        after = page["next"]
    labels = [item for page in pages for item in page["items"]]
    assert [x["item"] for x in labels] == sorted(graded) and len(pages) == 3
    by_id = {x["item"]: x for x in labels}
    rows = {row["item"]: row["index"] for row in sent["items"]}
    for item_id, label in by_id.items():
        record = runs["claim"].episodes[rows[item_id]]
        assert (label["run"], label["episode"], label["task_id"], label["family"]) == (
            "api:labelled",
            record["index"],
            record["task_id"],
            record["family"],
        )
        assert label["verifier"] == {
            "passed": False,
            "score": record["score"],
            "reward": record["reward"],
            "error": None,
        }
        assert [(r["reviewer"], r["passed"], r["rubric"]) for r in label["reviews"]] == [
            ("alice", True, {"gate:state": True}),
            ("bob", False, {"gate:state": False}),
        ]
        assert [r["flags"] for r in label["reviews"]] == [[], ["hacking", "task_wrong"]]
        assert label["reviews"][1]["reason"] == "bob says so" and label["reviews"][0]["seconds"] >= 0
        assert {r["reviewer_id"] for r in label["reviews"]} == {r.id for r in env.store.reviewers()[2:]}
        assert {c["key"] for c in label["checks"]} >= {"gate:state"}
    assert by_id[first]["adjudication"]["passed"] is False and by_id[first]["adjudication"]["by"] == "judge"
    assert by_id[first]["human"] is False
    assert all(by_id[i]["human"] is None and by_id[i]["adjudication"] is None for i in by_id if i != first)  # ties


# -- the client ------------------------------------------------------------------------------


def test_the_client_drives_the_loop_over_http(tmp_path: Path, people: tuple[Path, dict[str, str]]) -> None:
    env = make_env(tmp_path / "review.sqlite", people)
    path = make_runs(tmp_path, ("claim",), episodes=3)[0]
    from mirrorworld.core.registry import default

    with RunFile.open(path) as rf:
        records = list(rf.episodes())
    with running(env.app) as url, ReviewAPI(url, env.tokens["boss"]) as api, ReviewAPI(url, env.tokens["alice"]) as me:
        sent = api.submit("c/1", default.get("helpdesk"), records, sample={"size": 2, "overlap": 1})
        assert len(sent["queued"]) == 2
        from_file = api.submit_run_file(path, sample={"size": 0})
        assert from_file["run"]["name"] == "api:claim" and from_file["added"] == 3
        assert me.me()["role"] == "reviewer"
        with pytest.raises(ReviewAPIError) as refused:
            me.status(sent["queued"])
        assert (refused.value.status, refused.value.code) == (403, "forbidden")
        item = me.take()
        assert item is not None
        assert me.review(item["id"], False, rubric={"gate:state": False}, reason="the claim is false")["created"]
        status = api.status(sent["queued"], wait=0.2)
        assert {s["status"] for s in status["items"]} == {"reviewed", "queued"}
        assert api.item(item["id"])["human"] == {"passed": False, "adjudicated": False}
        assert api.agreement()["items_reviewed"] == 1 and "alarms" in api.drift()
        assert [x["item"] for x in api.labels_all(limit=1)] == [item["id"]]
        hook = api.add_webhook("http://127.0.0.1:9/hook")
        assert [h["id"] for h in api.webhooks()] == [hook["id"]]
        api.delete_webhook(hook["id"])
        made = api.create_token("sim-9", create_reviewer=True)
        api.revoke_token(made["id"])
        with ReviewAPI(url, made["token"]) as gone, pytest.raises(ReviewAPIError, match="unauthorized"):
            gone.me()
        with pytest.raises(ReviewAPIError) as bad:
            api.submit("c/2", "helpdesk", [{**asdict(records[0]), "score": "high"}])
        assert bad.value.code == "invalid" and "score is str" in bad.value.message


# -- the schema, and fuzzing it --------------------------------------------------------------


def test_the_schema_documents_every_route(env: Env) -> None:
    schema = env.call("GET", "/openapi.json", None).json()
    assert schema["openapi"] == "3.1.0"
    for op in ROUTES:
        doc = schema["paths"]["/api/v1" + op.path][op.method.lower()]
        assert str(op.status) in doc["responses"] and "400" in doc["responses"]
        assert ("security" in doc) == (op.role is not None)
        if op.role:
            assert {"401", "403"} <= set(doc["responses"]) and op.role in doc["description"]
        if op.body is not None:
            assert "413" in doc["responses"] and doc["requestBody"]["required"]
    episode = schema["components"]["schemas"]["EpisodeRecord"]
    assert episode["additionalProperties"] is False and "task_id" in episode["required"]


schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis.generation import GenerationMode  # noqa: E402
from schemathesis.specs.openapi.checks import positive_data_acceptance  # noqa: E402

EXAMPLES = 20
SEMANTIC = {"submit", "review", "add_webhook", "add_token", "propose_edge_case", "accept_edge_case", "reject_edge_case"}
"""Operations whose bodies follow rules no schema says (an episode's verdict and task, an item this reviewer
took, a webhook host, a reviewer name): a schema-valid body may be refused (400), so valid data need not pass."""


def test_every_operation_answers_as_documented(
    tmp_path: Path, runs: dict[str, Run], people: tuple[Path, dict[str, str]]
) -> None:
    env = make_env(tmp_path / "fuzz.sqlite", people, ApiConfig(max_wait=0.05, webhook_hosts=("fuzz.invalid",)))
    env.submit(runs["oracle"], size=4)
    schema = schemathesis.openapi.from_asgi("/api/v1/openapi.json", env.app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == len(ROUTES) - 1  # every route but the schema itself
    auth = {"Authorization": f"Bearer {env.tokens['boss']}"}
    live = [i.id for i in env.store.items()]

    def fuzz(operation: Any, mode: GenerationMode) -> None:
        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def run(case: Any) -> None:
            params = case.path_parameters or {}
            if "item_id" in params and len(str(params)) % 2 == 0:
                params["item_id"] = live[len(str(case.body)) % len(live)]  # real items too, some taken by the admin
            response = case.call(headers=auth)
            assert response.status_code < 500, (case.method, case.formatted_path, response.text)
            assert response.headers["content-type"][0] == "application/json"
            if mode is GenerationMode.POSITIVE:
                excluded = [positive_data_acceptance] if operation.definition.raw.get("operationId") in SEMANTIC else []
                case.validate_response(response, headers=auth, excluded_checks=excluded)
            elif response.status_code >= 400:
                body = response.json()
                assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body

        try:
            run()
        except Unsatisfiable:
            assert mode is GenerationMode.NEGATIVE  # an operation without inputs has no invalid requests

    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            fuzz(operation, mode)
    assert env.call("GET", "/me").json()["reviewer"] == "boss"  # the admin's token survived the fuzzing
    assert env.store.check_consistency() == []
