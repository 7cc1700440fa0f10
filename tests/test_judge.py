"""The optional model judge of customer texts: off by default, a second reader when given, a boundary when down."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from mirrorworld import make_world
from mirrorworld.agents.judge import OpenAIJudge
from mirrorworld.episodes import Episode, EpisodeOptions
from mirrorworld.errors import AgentError
from mirrorworld.verify.verifier import Verifier

WORLD = make_world("helpdesk")


class Judge:
    """A local chat-completions endpoint answering with a fixed reply; requests are kept."""

    def __init__(self, reply: Any, status: int = 200) -> None:
        self.reply, self.status = reply, status
        self.requests: list[dict[str, Any]] = []
        judge = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                judge.requests.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                content = judge.reply if isinstance(judge.reply, str) else json.dumps(judge.reply)
                payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
                self.send_response(judge.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def judge_factory() -> Iterator[Any]:
    made: list[Judge] = []

    def make(reply: Any, status: int = 200) -> Judge:
        made.append(Judge(reply, status))
        return made[-1]

    yield make
    for j in made:
        j.close()


def _gold_verdict(judge: Any) -> Any:
    task = WORLD.task("refund_damaged", 0)
    with WORLD.session(task) as s:
        for c in task.gold:
            s.call(c.tool, c.args)
        return Verifier(judge)(s)


def test_an_acceptable_reply_changes_nothing(judge_factory: Any) -> None:
    j = judge_factory({"acceptable": True, "problems": []})
    verdict = _gold_verdict(OpenAIJudge(base_url=j.url, model="grader", api_key="k"))
    assert verdict.passed
    sent = j.requests[0]
    assert sent["model"] == "grader" and "refunded" in sent["messages"][1]["content"]


def test_an_unacceptable_reply_fails_communication(judge_factory: Any) -> None:
    j = judge_factory({"acceptable": False, "problems": ["promises a refund the policy does not grant"]})
    verdict = _gold_verdict(OpenAIJudge(base_url=j.url, model="grader"))
    assert not verdict.passed and not verdict.gates["communication"].passed
    assert any(e.startswith("judge: promises") for e in verdict.gates["communication"].evidence)


@pytest.mark.parametrize(("reply", "status"), [("not json", 200), ({"ok": 1}, 200), ({"acceptable": True}, 500)])
def test_a_judge_that_cannot_answer_is_an_infrastructure_failure(judge_factory: Any, reply: Any, status: int) -> None:
    j = judge_factory(reply, status)
    task = WORLD.task("refund_damaged", 0)
    judge = OpenAIJudge(base_url=j.url, model="grader", retries=0)
    with Episode(WORLD, task, EpisodeOptions(judge=judge)) as ep:
        *work, last = task.gold
        for c in work:
            ep.step(c.tool, c.args)
        with pytest.raises(AgentError):
            ep.step(last.tool, last.args)
        assert ep.failure is not None and ep.failure.boundary == "infrastructure" and ep.verdict is None


def test_without_a_judge_grading_needs_no_model() -> None:
    assert Verifier().judge is None and EpisodeOptions().judge is None
    assert _gold_verdict(None).passed


def test_the_command_line_grades_with_a_judge(judge_factory: Any, tmp_path: Any) -> None:
    from mirrorworld.cli import main
    from mirrorworld.run.trajectories import RunFile

    j = judge_factory({"acceptable": False, "problems": ["rude"]})
    out = tmp_path / "run.sqlite"
    argv = ["run", "--agent", "oracle", "--episodes", "2", "--no-progress", "--out", str(out)]
    assert main([*argv, "--judge-base-url", j.url, "--judge-model", "grader", "--json"]) == 0
    with RunFile.open(out) as rf:
        records = list(rf.episodes())
        assert rf.meta["judge"] == {"base_url": j.url, "model": "grader"}
    assert records and not any(r.passed for r in records) and len(j.requests) == len(records)
    assert main(["run", "--agent", "oracle", "--episodes", "1", "--judge-model", "grader"]) == 1  # a one-line error
