"""An LLM evaluation end to end, against a local OpenAI-compatible server that fails in every way an endpoint fails.

The scripted server (:mod:`mirrorworld.agents.endpoint`) plays each task's gold
solution behind a real HTTP boundary and, per task, fails as told: a 4xx with a
body, 5xx, 429 with ``Retry-After``, a timeout, a body that is not JSON, a reply
without choices, tool-call arguments that are not JSON. ``mirrorworld run
--agent openai`` goes through the official SDK, so what is tested is what a
user gets: infrastructure errors counted apart from graded episodes, the first
error's reason printed, the exit status, the run's metadata, ``--resume`` and
Ctrl-C.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mirrorworld import make_world
from mirrorworld.agents.endpoint import ScriptedEndpoint
from mirrorworld.cli import main
from mirrorworld.run import RunFile, plan_episodes

pytest.importorskip("openai")

WORLD = make_world("helpdesk")
N = 12


def _task_ids(n: int = N) -> list[str]:
    return [WORLD.task_at(p.task).id for p in plan_episodes(WORLD, episodes=n, split="test")]


def _run(url: str, out: Path, *extra: str, model: str = "scripted") -> list[str]:
    return [
        "run",
        "--agent",
        "openai",
        "--base-url",
        url,
        "--model",
        model,
        "--episodes",
        str(N),
        "--out",
        str(out),
        "--no-progress",
        "--timeout",
        "1",
        "--retries",
        "1",
        *extra,
    ]


def _verdicts(path: Path) -> dict[int, tuple[bool, float, str]]:
    with RunFile.open(path) as run:
        return {
            e.index: (e.passed, e.score, json.dumps(e.verdict, sort_keys=True)) for e in run.episodes() if not e.errored
        }


FAULTS = {
    0: "http400",
    1: "http500",
    2: "http503_once",
    3: "http429_once",
    4: "timeout",
    5: "malformed",
    6: "bad_arguments",
    7: "no_choices",
}
ERRORED = {0, 1, 4, 5, 7}


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("clean") / "clean.sqlite"
    ids = _task_ids()
    with ScriptedEndpoint.for_run(WORLD, episodes=N, faults={ids[6]: "bad_arguments"}) as ep:
        assert main(_run(ep.url, out)) == 0
    return out


def test_every_endpoint_failure_is_counted_apart_and_resume_completes_the_run(
    tmp_path: Path, clean_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = _task_ids()
    out = tmp_path / "run.sqlite"
    with ScriptedEndpoint.for_run(
        WORLD, episodes=N, faults={ids[i]: kind for i, kind in FAULTS.items()}, hang_s=2.5, retry_after_s=1.0
    ) as ep:
        code = main([*_run(ep.url, out), "--json"])
        captured = capsys.readouterr()
        summary = json.loads(captured.out)
        # 5 of 12 errored: fewer than the graded, so the exit status is still 0, but the run is not complete.
        assert code == 0
        assert summary["errors"] == len(ERRORED)
        assert summary["errors_by_boundary"] == {"infrastructure": len(ERRORED)}
        assert summary["graded"] == N - len(ERRORED)
        assert summary["complete"] is False
        assert summary["pass_rate"] == round(summary["passed"] / summary["graded"], 4)
        # The first error is printed with the server's own reason.
        err = captured.err
        assert (
            f"first error: episode 0 ({ids[0]}): infrastructure AgentError: HTTP 400 from {ep.url}/chat/completions"
            in err
        )
        assert "Invalid 'messages[1].content': string too long." in err
        assert f"resume with: mirrorworld run --resume {out}" in err
        # Each failure says what it was.
        with RunFile.open(out) as run:
            episodes = {e.index: e for e in run.episodes()}
            meta = run.meta
        assert {i for i, e in episodes.items() if e.errored} == ERRORED
        assert "HTTP 500" in episodes[1].error
        assert "within 1 s (1 retries)" in episodes[4].error
        assert "not JSON" in episodes[5].error and "502 Bad Gateway" in episodes[5].error
        assert "choices[0].message" in episodes[7].error
        # The 503 and the 429 were retried, the 429 after its Retry-After; both episodes are graded and pass.
        for i in (2, 3):
            assert not episodes[i].errored and episodes[i].passed
        first_two = [r["at"] for r in ep.requests if r["task"] == ids[3] and r["turn"] == 0]
        assert len(first_two) == 2 and first_two[1] - first_two[0] >= 0.9
        # Bad tool-call arguments are the model's mistake: graded, not an error.
        assert not episodes[6].errored
        assert "error" in episodes[6].calls[0] or episodes[6].messages[3]["role"] == "tool"
        assert meta["summary"]["complete"] is False
        # Resume against the now healthy endpoint: only the errored episodes are played again.
        for i in ERRORED:
            ep.faults.pop(ids[i])
        before = len(ep.requests)
        assert main(["run", "--resume", str(out), "--no-progress", "--timeout", "1", "--base-url", ep.url]) == 0
        replayed = {r["task"] for r in ep.requests[before:]}
    assert replayed == {ids[i] for i in ERRORED}
    with RunFile.open(out) as run:
        assert len(run) == N and run.meta["summary"]["complete"] is True and run.meta["summary"]["errors"] == 0
    assert _verdicts(out) == _verdicts(clean_run)


def test_a_run_that_mostly_errors_exits_non_zero_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ScriptedEndpoint.for_run(WORLD, episodes=N) as ep:
        code = main(_run(ep.url, tmp_path / "r.sqlite", model="gpt-nonexistent"))
    err = capsys.readouterr().err
    assert code == 3
    assert "HTTP 404" in err and "The model `gpt-nonexistent` does not exist" in err
    assert f"{N} of {N} episodes errored (not graded)" in err


def test_max_errors_stops_an_unreachable_endpoint_early(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.sqlite"
    code = main([*_run("http://127.0.0.1:9/v1", out), "--retries", "0", "--max-errors", "1"])
    err = capsys.readouterr().err
    assert code == 3
    assert "cannot reach http://127.0.0.1:9/v1/chat/completions" in err
    assert "stopped after more than 1 errored episodes: resume with" in err
    with RunFile.open(out) as run:
        assert len(run) == 2
        assert run.meta["summary"]["stopped"].startswith("stopped after")


def test_the_run_file_records_model_endpoint_sampling_versions_and_usage_never_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MW_TEST_KEY", "sk-very-secret-value")
    out = tmp_path / "r.sqlite"
    with ScriptedEndpoint.for_run(WORLD, episodes=N) as ep:
        extra = ["--api-key-env", "MW_TEST_KEY", "--temperature", "0.3", "--top-p", "0.9", "--max-tokens", "256"]
        assert main([*_run(ep.url, out), *extra]) == 0
    assert {r["auth"] for r in ep.requests} == {"Bearer sk-very-secret-value"}
    with RunFile.open(out) as run:
        meta = run.meta
        episodes = list(run.episodes())
    config = meta["agent_config"]
    assert config["model"] == "scripted" and config["base_url"] == ep.url
    assert config["sampling"] == {"temperature": 0.3, "top_p": 0.9, "max_tokens": 256}
    assert config["api_key_env"] == "MW_TEST_KEY" and config["retries"] == 1 and config["timeout_s"] == 1.0
    assert meta["model"] == "scripted"
    assert set(meta["versions"]) >= {"mirrorworld", "python", "openai"}
    assert all(e.usage and e.usage["requests"] == e.steps and e.usage["total_tokens"] > 0 for e in episodes)
    assert meta["summary"]["usage"]["requests"] == sum(e.usage["requests"] for e in episodes if e.usage)
    assert b"sk-very-secret-value" not in out.read_bytes()


def test_concurrency_gives_the_same_records_in_the_same_order(tmp_path: Path, clean_run: Path) -> None:
    out = tmp_path / "r.sqlite"
    ids = _task_ids()
    with ScriptedEndpoint.for_run(WORLD, episodes=N, faults={ids[6]: "bad_arguments"}, delay_s=0.02) as ep:
        assert main([*_run(ep.url, out), "--concurrency", "4"]) == 0
    assert _verdicts(out) == _verdicts(clean_run)
    with sqlite3.connect(out) as conn:
        assert [r[0] for r in conn.execute("SELECT idx FROM episodes ORDER BY rowid")] != [] and sorted(
            r[0] for r in conn.execute("SELECT idx FROM episodes")
        ) == list(range(N))


def test_resume_refuses_to_change_the_run(tmp_path: Path, clean_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with RunFile.open(clean_run) as run:
        url = run.meta["options"]["base_url"]
    assert main(["run", "--resume", str(clean_run), "--episodes", "3", "--base-url", url]) == 1
    assert "--episodes was 12, not 3" in capsys.readouterr().err
    # The file names its server, but the key goes there only when the user names it again.
    assert main(["run", "--resume", str(clean_run)]) == 1
    assert f"was played against {url}: give --base-url {url} to resume it there" in capsys.readouterr().err
    assert main(["run", "--resume", str(tmp_path / "none.sqlite")]) == 2


def test_ctrl_c_saves_what_finished_and_prints_how_to_resume(tmp_path: Path, clean_run: Path) -> None:
    out = tmp_path / "r.sqlite"
    ids = _task_ids()
    with ScriptedEndpoint.for_run(WORLD, episodes=N, faults={ids[6]: "bad_arguments"}, delay_s=0.15) as ep:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "mirrorworld", *_run(ep.url, out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if out.exists():
                try:
                    with sqlite3.connect(f"file:{out}?mode=ro", uri=True) as conn:
                        if conn.execute("SELECT COUNT(*) FROM episodes").fetchone()[0] >= 2:
                            break
                except sqlite3.Error:
                    pass
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 130, stderr
        assert f"interrupted: resume with: mirrorworld run --resume {out}" in stderr
        assert "saved" in stdout and f"of {N} episodes to {out}" in stdout
        with RunFile.open(out) as run:
            summary: dict[str, Any] = run.meta["summary"]
            kept = len(run)
        assert summary["stopped"] == "interrupted" and summary["complete"] is False and 2 <= kept < N
        assert main(["run", "--resume", str(out), "--no-progress", "--base-url", ep.url]) == 0
    assert _verdicts(out) == _verdicts(clean_run)


def test_a_model_can_play_a_staff_role_in_the_team_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "team.sqlite"
    with ScriptedEndpoint([], record_bodies=True) as ep:
        argv = ["run", "--multi-agent", "--policy", "tier1=llm", "--model", "scripted", "--base-url", ep.url]
        assert main([*argv, "--episodes", "2", "--out", str(out), "--no-progress", "--timeout", "2"]) == 0
    bodies = [r["body"] for r in ep.requests]
    assert bodies, "the tier1 model was never asked"
    system = bodies[0]["messages"][0]["content"]
    assert system.startswith("You work as tier1 in mirrorworld/HelpdeskTeam-v0") and "policy" in system.lower()
    team = make_world("helpdesk_team")
    from mirrorworld.core.seats import seats_of

    assert {t["function"]["name"] for t in bodies[0]["tools"]} == set(seats_of(team).role_tools["tier1"])
    with RunFile.open(out) as run:
        meta = run.meta
        episodes = list(run.episodes())
    assert meta["policies"]["tier1"] == "llm" and meta["policy_config"]["tier1"]["model"] == "scripted"
    # A model that only waits is graded (and fails), never an errored episode.
    assert all(not e.errored and not e.passed for e in episodes)


def test_multi_agent_refuses_a_single_agent_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--multi-agent", "--agent", "openai", "--episodes", "1"]) == 1
    assert "--agent is for single-agent runs" in capsys.readouterr().err


def test_the_llm_eval_example_runs_offline() -> None:
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, str(root / "examples" / "llm_eval.py"), "--smoke"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "HTTP 400" in done.stderr and "resume with" in done.stderr
    assert "model scripted at http://127.0.0.1:" in done.stdout and " requests, " in done.stdout
