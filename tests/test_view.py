"""The run viewer over HTTP (Starlette's TestClient): figures, filters, the episode page, escaping, 404s, read-only."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from mirrorworld.agents.base import Agent, EpisodeContext, Message, assistant, tool_call
from mirrorworld.audit.runlog import audit_run
from mirrorworld.cli import main
from mirrorworld.core.registry import Registry, default
from mirrorworld.errors import AgentError
from mirrorworld.run import RunFile, run_episodes
from mirrorworld.view import app as view_app
from mirrorworld.view import cli as view_cli
from mirrorworld.view.app import CSP, MAX_TEXT, create_app
from mirrorworld.view.runs import flags_of, load_runs

SCRIPT = '<script>alert("pwned")</script>'
MIXED_EPISODES = 5


class MixedAgent(Agent):
    """The oracle with one episode of each kind: ``0`` passes (with a repeated read and a ``<script>`` in its
    text, so flagged), ``1`` errors (the agent's endpoint fails), ``2`` does nothing (fails), the rest pass."""

    name = "mixed"
    model = "test-model-7b"

    def __init__(self) -> None:
        self.episode = -1

    def reset(self, context: EpisodeContext) -> None:
        self.episode += 1
        self.gold = list(context.task.gold)
        self.step = 0

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> Message:
        self.step += 1
        n = self.step
        if self.episode == 1:
            raise AgentError("endpoint down: HTTP 503 from http://model.test/v1/chat/completions")
        if self.episode == 2:
            return assistant("")
        if self.episode == 0 and n <= 2:
            return assistant(f"Let me read the policy {SCRIPT}", [tool_call(f"pre_{n}", "get_policy", {})])
        i = n - 3 if self.episode == 0 else n - 1
        if i >= len(self.gold):
            return assistant("")
        call = self.gold[i]
        return assistant(None, [tool_call(f"call_{n}", call.tool, call.args)])

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "model": self.model, "temperature": 0.0}


def record_mixed_run(path: Path) -> Path:
    """A run file of :class:`MixedAgent` on the helpdesk world, with the metadata ``mirrorworld run`` writes."""
    world = default.get("helpdesk")
    agent = MixedAgent()
    meta = {
        "world": world.id,
        "world_hash": world.content_hash,
        "world_parts": world.score_parts(),
        "agent": agent.name,
        "agent_config": agent.describe(),
        "model": agent.model,
        "split": "test",
        "episodes": MIXED_EPISODES,
        "trials": 1,
        "versions": {"mirrorworld": "test"},
        "started": "2026-01-02T03:04:05+00:00",
    }
    run = RunFile.create(path, meta)
    try:
        run_episodes(world, agent, episodes=MIXED_EPISODES, split="test", on_record=run.add)
    finally:
        run.close()
    return path


def record_runs(directory: Path) -> list[Path]:
    """An oracle run and a random run through ``mirrorworld run``, and the mixed run: three run files."""
    oracle, random_run = directory / "oracle.sqlite", directory / "random.sqlite"
    assert main(["run", "--agent", "oracle", "--episodes", "6", "--out", str(oracle), "--no-progress"]) == 0
    assert main(["run", "--agent", "random", "--episodes", "6", "--out", str(random_run), "--no-progress"]) == 0
    return [oracle, random_run, record_mixed_run(directory / "mixed.sqlite")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return record_runs(tmp_path_factory.mktemp("view-runs"))


@pytest.fixture(scope="module")
def client(runs: list[Path]) -> Iterator[TestClient]:
    with TestClient(create_app(load_runs(runs)), base_url="http://127.0.0.1") as c:
        yield c


def _shown(html: str) -> list[int]:
    """The episode indices an episode list shows, in order."""
    return [int(i) for i in re.findall(r'<tr class="ep" data-status="\w+" data-index="(\d+)"', html)]


def _cell(html: str, name: str, card: int) -> str:
    section = html.split(f'id="run-{card}"')[1].split("</section>")[0]
    found = re.search(rf'<td class="{name}">([^<]*)</td>', section)
    assert found is not None, name
    return found.group(1)


# -- the index ------------------------------------------------------------------------


def test_the_index_shows_every_run_with_its_figures(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    html = page.text
    assert [_cell(html, "pass-rate", i) for i in range(3)] == ["100.0 %", "0.0 %", "75.0 %"]
    # The mixed run: 5 planned, 4 graded, 1 errored; the errored one is beside the rate, not a failure (3/5 = 60 %).
    assert [_cell(html, c, 2) for c in ("planned", "recorded", "graded", "passed", "errored")] == [
        "5",
        "5",
        "4",
        "3",
        "1",
    ]
    assert [_cell(html, c, 0) for c in ("planned", "graded", "passed", "errored")] == ["6", "6", "6", "0"]
    mixed = html.split('id="run-2"')[1]
    assert "test-model-7b" in mixed and "mirrorworld/Helpdesk-v0" in mixed and "<dd>mixed</dd>" in mixed
    assert html.count('<svg xmlns="http://www.w3.org/2000/svg"') == 3
    assert "Pass rate per family" in html and ">refund_damaged</text>" in html
    assert 'href="/run/2?status=failed"' in html
    assert re.search(r'class="muted note ungraded">No bar: no graded episode in \w+\.</p>', mixed)  # the errored one


def test_a_family_bar_is_its_pass_rate(client: TestClient) -> None:
    oracle = client.get("/run/0").text
    bars = re.findall(r"<rect [^>]*><title>([0-9.]+)</title></rect>", oracle)
    assert bars and set(bars) == {"1.000"}
    random_run = client.get("/run/1").text
    assert not re.findall(r'<rect [^>]*height="(?!0\.0")', random_run)  # every bar of a 0 % run is flat


# -- the episode list and its filters ----------------------------------------------------


def test_filters_pick_episodes_by_status(client: TestClient) -> None:
    assert _shown(client.get("/run/2").text) == [0, 1, 2, 3, 4]
    assert _shown(client.get("/run/2?status=passed").text) == [0, 3, 4]
    assert _shown(client.get("/run/2?status=failed").text) == [2]
    errored = client.get("/run/2?status=errored").text
    assert _shown(errored) == [1]
    assert "infrastructure: AgentError: endpoint down: HTTP 503" in errored
    assert _shown(client.get("/run/0?status=failed").text) == []
    assert "No episode matches these filters." in client.get("/run/0?status=failed").text
    assert _shown(client.get("/run/1?status=failed").text) == [0, 1, 2, 3, 4, 5]


def test_filters_combine(client: TestClient, runs: list[Path]) -> None:
    with RunFile.open(runs[2]) as run:
        records = {r.index: r for r in run.episodes()}
    assert flags_of(records[0]) == ("repeated_calls",)
    assert _shown(client.get("/run/2?flagged=1").text) == [0]
    assert _shown(client.get("/run/2?flagged=1&status=passed").text) == [0]
    assert _shown(client.get("/run/2?flagged=1&status=failed").text) == []
    family = records[2].family
    assert _shown(client.get("/run/2", params={"family": family}).text) == [2]
    assert _shown(client.get("/run/2", params={"family": family, "status": "failed"}).text) == [2]
    assert _shown(client.get("/run/2", params={"family": family, "status": "passed"}).text) == []
    assert _shown(client.get("/run/2", params={"family": "no_such_family"}).text) == []
    page = client.get("/run/2", params={"family": family, "status": "failed"}).text
    assert f'id="family">{family}</strong>' in page
    assert f'href="/run/2/episode/2?status=failed&amp;family={family}"' in page  # the filter goes with the link


def test_bad_filters_are_400_pages(client: TestClient) -> None:
    for query in ("status=maybe", "flagged=yes", "page=0", "page=x", "family=" + "f" * 2000):
        page = client.get(f"/run/0?{query}")
        assert page.status_code == 400, query
        assert "mirrorworld view" in page.text


def test_long_lists_are_paged(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(view_app, "PAGE_ROWS", 2)
    first = client.get("/run/1").text
    assert _shown(first) == [0, 1] and "page 1 of 3" in first and 'href="/run/1?page=2"' in first
    assert _shown(client.get("/run/1?page=3").text) == [4, 5]
    assert client.get("/run/1?page=4").status_code == 404


def test_flags_are_what_the_verdict_notes(runs: list[Path]) -> None:
    with RunFile.open(runs[2]) as run:
        passed, errored = run.episode(3), run.episode(1)
    assert flags_of(passed) == () and flags_of(errored) == ()
    verdict = json.loads(json.dumps(passed.verdict))
    verdict["breakdown"]["policy"]["violations"] = [{"rule": "refund_limit", "hard": False, "step": 2}]
    verdict["breakdown"]["communication"]["evidence"] = ["judge: promises a refund the policy forbids"]
    verdict["breakdown"]["guards"]["rows_restored"] = 1
    assert flags_of(replace(passed, verdict=verdict)) == ("judge", "policy:refund_limit", "rows_restored")


def test_audit_run_detectors_flag_episodes_too(runs: list[Path], client: TestClient) -> None:
    audited = audit_run(runs[1], default.get("helpdesk"))
    by_audit = {e["index"]: {f"audit:{f['rule']}" for f in e["flags"]} for e in audited["episodes_flagged"]}
    assert by_audit, "the random agent trips no detector: pick a seed that does"
    (viewed,) = load_runs([runs[1]])
    assert viewed.audit_error is None
    with RunFile.open(runs[1]) as run:
        verdict_flags = {r.index: set(flags_of(r)) for r in run.episodes()}
    for row in viewed.rows:
        assert set(row.flags) == verdict_flags[row.index] | by_audit.get(row.index, set()), row.index
    flagged = sorted(i for i, f in verdict_flags.items() if f or i in by_audit)
    assert _shown(client.get("/run/1?flagged=1").text) == flagged
    some = next(iter(by_audit))
    page = client.get(f"/run/1/episode/{some}").text
    assert all(f'<span class="tag">{flag}</span>' in page for flag in by_audit[some])

    (skipped,) = load_runs([runs[1]], audit=False)
    assert all(not f.startswith("audit:") for r in skipped.rows for f in r.flags)
    with TestClient(create_app([skipped])) as c:
        assert "No audit-run flags: skipped (--no-audit)" in c.get("/").text


def test_a_world_that_is_not_installed_still_shows_its_runs(runs: list[Path]) -> None:
    nothing = Registry()
    (viewed,) = load_runs([runs[2]], registry=nothing)
    assert viewed.audit_error is not None and "helpdesk" in viewed.audit_error
    with TestClient(create_app([viewed], registry=nothing)) as c:
        assert "No audit-run flags: " in c.get("/").text
        page = c.get("/run/0/episode/0")
        assert page.status_code == 200
        assert "The episode could not be replayed: RegistryError" in page.text
        assert 'Verifier verdict: <span class="pass">pass</span>' in page.text  # the record is all still shown


# -- the episode page -------------------------------------------------------------------


def test_the_episode_page_is_the_review_rendering(client: TestClient) -> None:
    page = client.get("/run/0/episode/0")
    assert page.status_code == 200
    html = page.text
    for part in ('<p id="instruction">', "<h2>Conversation</h2>", 'id="changes"', 'id="verdict"'):
        assert part in html
    assert 'Verifier verdict: <span class="pass">pass</span>' in html
    assert "the end state is what the task asked for" in html  # a gate of the rubric, with its result
    calls = re.findall(r"step: <code>(\w+)</code>", html)
    assert calls and '<div class="muted">result</div>' in html
    assert 'href="/run/0/episode/1" id="next"' in html and 'id="prev"' not in html


def test_an_errored_episode_shows_its_failure_and_no_verdict(client: TestClient) -> None:
    html = client.get("/run/2/episode/1").text
    assert '<span class="status errored" id="status">errored</span>' in html
    assert "Verifier verdict: none" in html and "errored before it could be graded" in html
    assert "endpoint down: HTTP 503" in html


def test_prev_and_next_follow_the_filtered_list(client: TestClient) -> None:
    html = client.get("/run/2/episode/3?status=passed").text
    assert 'href="/run/2/episode/0?status=passed" id="prev"' in html
    assert 'href="/run/2/episode/4?status=passed" id="next"' in html
    assert 'href="/run/2?status=passed" id="back"' in html
    plain = client.get("/run/2/episode/3").text
    assert 'href="/run/2/episode/2" id="prev"' in plain


def test_agent_text_is_escaped(client: TestClient) -> None:
    html = client.get("/run/2/episode/0").text
    assert SCRIPT not in html
    assert "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;" in html
    assert "<script" not in html


# -- untrusted run files ---------------------------------------------------------------


@pytest.fixture(scope="module")
def hostile(runs: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The mixed run with hostile text in its rows: markup and a bidi override in names, a huge message,
    a tool call of the wrong shape."""
    path = tmp_path_factory.mktemp("hostile") / "hostile.sqlite"
    shutil.copy(runs[2], path)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(
            "UPDATE episodes SET family=?, task_id=? WHERE idx=0",
            ('<img src=x onerror="alert(1)">', "evil\u202etxt.exe/0"),
        )
        messages = json.loads(conn.execute("SELECT messages FROM episodes WHERE idx=3").fetchone()[0])
        messages[1]["content"] = "A" * (3 * MAX_TEXT)
        conn.execute("UPDATE episodes SET messages=? WHERE idx=3", (json.dumps(messages),))
        bad = [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [{"id": [1], "function": "x"}]}]
        conn.execute("UPDATE episodes SET messages=? WHERE idx=4", (json.dumps(bad),))
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('model', ?)", (json.dumps("</dd><script>x()</script>"),))
    conn.close()
    return path


def test_hostile_text_in_a_run_file_renders_inert(hostile: Path) -> None:
    with TestClient(create_app(load_runs([hostile])), base_url="http://127.0.0.1") as c:
        pages = [c.get(u) for u in ("/", "/run/0", "/run/0/episode/0", "/run/0/episode/3", "/run/0/episode/4")]
        assert [p.status_code for p in pages[:4]] == [200, 200, 200, 200]
        assert pages[4].status_code == 409  # a record the episode rendering cannot read: an error page, not a 500
        for p in pages:
            assert "<img" not in p.text and "<script" not in p.text and "\u202e" not in p.text
        assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in pages[1].text
        assert "evil\\u202etxt.exe/0" in pages[1].text  # the bidi override shown as its escape
        assert "&lt;/dd&gt;&lt;script&gt;" in pages[0].text
        long_page = pages[3].text
        assert "A" * (MAX_TEXT + 1) not in long_page and "A" * MAX_TEXT + "…" in long_page  # cut, the cut marked
        assert len(long_page) < 2 * MAX_TEXT


def test_bad_run_and_episode_numbers_are_404_pages(client: TestClient) -> None:
    for url in (
        "/run/3",
        "/run/x",
        "/run/-1",
        "/run/99999999999999999999999999",
        "/run/0/episode/6",
        "/run/0/episode/-1",
        "/run/0/episode/1e3",
        "/run/0/episode/99999999999999999999999999",
        "/run/3/episode/0",
        "/nowhere",
        "/run/0/episode/0/more",
    ):
        page = client.get(url)
        assert page.status_code == 404, url
        assert page.headers["content-type"].startswith("text/html") and 'id="error"' in page.text, url


# -- read-only ----------------------------------------------------------------------------


def test_every_route_only_reads(client: TestClient) -> None:
    app = client.app
    for route in app.routes:  # type: ignore[attr-defined]
        assert set(route.methods) <= {"GET", "HEAD"}, route.path
    for url in ("/", "/run/0", "/run/0/episode/0", "/static/view.css"):
        for method in ("POST", "PUT", "PATCH", "DELETE"):
            resp = client.request(method, url, content=b"x=1")
            assert resp.status_code == 405, (method, url)
            assert resp.headers["allow"] == "GET, HEAD"
        head = client.head(url)
        assert head.status_code == 200 and head.content == b""
    for url in ("/", "/run/1", "/run/1/episode/2", "/run/2/episode/1"):
        resp = client.get(url)
        assert "<form" not in resp.text and "<script" not in resp.text and "method=" not in resp.text
        assert resp.headers["content-security-policy"] == CSP
        assert "script-src" not in CSP and "form-action 'none'" in CSP
        assert resp.headers["x-frame-options"] == "DENY"


# -- the command --------------------------------------------------------------------------


@pytest.fixture()
def served(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, str, int]]:
    calls: list[tuple[Any, str, int]] = []
    monkeypatch.setattr(view_app, "serve", lambda app, host, port: calls.append((app, host, port)))
    return calls


def test_the_command_checks_the_files_then_serves_on_loopback(
    runs: list[Path], served: list[tuple[Any, str, int]], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    opened: list[Any] = []
    monkeypatch.setattr(view_cli.threading, "Timer", lambda *a, **k: opened.append(a) or _NoTimer())
    assert main(["view", str(runs[0]), str(runs[2]), "--no-open"]) == 0
    assert [(host, port) for _, host, port in served] == [("127.0.0.1", 8600)]
    assert opened == []
    assert "2 runs, 11 episodes: viewer on http://127.0.0.1:8600/" in capsys.readouterr().out
    with TestClient(served[0][0]) as c:
        assert c.get("/run/1/episode/1").status_code == 200
    assert main(["view", str(runs[0]), "--port", "9123"]) == 0
    assert served[-1][1:] == ("127.0.0.1", 9123) and opened and opened[0][1] is view_cli.webbrowser.open
    assert main(["view", str(runs[0]), "--host", "0.0.0.0", "--no-open"]) == 0
    assert "no sign-in" in capsys.readouterr().out


class _NoTimer:
    daemon = False

    def start(self) -> None:
        pass


def test_a_bad_file_is_one_error_line_before_serving(
    runs: list[Path], tmp_path: Path, served: list[tuple[Any, str, int]], capsys: Any
) -> None:
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database\n" * 100)
    foreign = tmp_path / "foreign.sqlite"
    sqlite3.connect(foreign).execute("CREATE TABLE t (x)").connection.close()
    broken_task = tmp_path / "broken-task.sqlite"
    shutil.copy(runs[0], broken_task)
    with sqlite3.connect(broken_task) as conn:
        conn.execute("UPDATE episodes SET task='{\"world\": 1}' WHERE idx=2")
    conn.close()
    for bad, said in (
        (garbage, "is not a mirrorworld run file"),
        (foreign, "it has no meta table"),
        (tmp_path / "missing.sqlite", "no run file at"),
        (broken_task, "episode 2: its task is malformed"),
    ):
        assert main(["view", str(runs[0]), str(bad), "--no-open"]) == 2, bad
        err = capsys.readouterr().err
        assert err.startswith("mirrorworld: error: ") and said in err, err
        assert err.count("\n") == 1, err
    assert served == []
    assert main(["view", str(runs[0]), "--port", "70000", "--no-open"]) == 1
    assert "--port must be from 1 to 65535" in capsys.readouterr().err


def test_without_the_review_extra_the_command_names_it(
    runs: list[Path], monkeypatch: pytest.MonkeyPatch, served: list[tuple[Any, str, int]], capsys: Any
) -> None:
    monkeypatch.setitem(sys.modules, "starlette", None)
    assert main(["view", str(runs[0]), "--no-open"]) == 1
    err = capsys.readouterr().err
    assert "the run viewer needs the review extra: pip install -e '.[review]'" in err and err.count("\n") == 1
    assert served == []
