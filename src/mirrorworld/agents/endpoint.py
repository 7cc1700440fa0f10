"""A scripted OpenAI-compatible chat-completions server: a stand-in model that plays gold solutions and fails on demand.

It lets an evaluation run end to end offline (``examples/llm_eval.py``) and
lets tests put the whole LLM path under every failure an endpoint has. For
each request to ``POST /v1/chat/completions`` it finds the task from the
conversation's first user message (the instruction the chat encoding sends),
and answers the *n*-th assistant turn with the task's *n*-th gold call as an
OpenAI tool call, then with a final message without tool calls. It reports
deterministic token counts in ``usage`` (a quarter of the characters sent and
returned). A conversation about a task it was not given gets a polite final
message, which the verifier grades as any model's answer.

**Tasks that open alike.** Two tasks of a family can send the same
instruction (``triage the new tickets #801, #802, #803``) and differ only in
what the tools show. Given the ``world`` (:meth:`for_run` passes it), the
server tells them apart the way an agent would: its first turn is a *probe*,
a read call whose result differs between those tasks (a read tool called with
arguments taken from their gold calls, chosen once when the server starts, by
playing it on a fresh session of each task), and the tool result the client
sends back names the task; the gold follows from the second turn, and a
task's fault applies from there. Without the world, or when no read tells the
tasks apart, the first of them is played.

``faults`` maps a task id to how that task's conversation fails (:data:`FAULTS`):

* ``model_not_found``: HTTP 404 with an OpenAI-style body, every time; a
  request for a model other than ``model`` gets the same answer;
* ``http400``: HTTP 400 with an OpenAI-style ``invalid_request_error`` body;
* ``http500``: HTTP 500, every time;
* ``http503_once``: HTTP 503 on the first request, then normal answers;
* ``http429_once``: HTTP 429 with ``Retry-After: retry_after_s`` on the first
  request, then normal answers (:attr:`requests` shows the wait);
* ``timeout``: no answer for ``hang_s`` seconds, every time;
* ``malformed``: HTTP 200 whose body is not JSON;
* ``no_choices``: HTTP 200 JSON without ``choices``;
* ``bad_arguments``: the first turn's tool call has arguments that are not
  JSON (the model's mistake, graded), then the gold as usual.

Faults can be changed while the server runs (:attr:`faults` is read per
request), so a test can clear them and resume a run. ``delay_s`` makes every
answer take that long, as a model's would. Nothing here is a model:
it is the oracle behind an HTTP boundary.

Run it alone with ``python -m mirrorworld.agents.endpoint --world helpdesk
--episodes 20`` (it prints its base URL and serves until interrupted).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from mirrorworld.agents.base import tool_call
from mirrorworld.core.task import Task

__all__ = ["FAULTS", "ScriptedEndpoint", "main"]

FAULTS = (
    "model_not_found",
    "http400",
    "http500",
    "http503_once",
    "http429_once",
    "timeout",
    "malformed",
    "no_choices",
    "bad_arguments",
)
"""The ways a conversation can be made to fail (see the module docstring)."""

_MAX_BODY = 32 << 20
_UNKNOWN = "I am sorry, I cannot help with that request."


def _error_body(message: str, kind: str, code: str | None) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}}).encode()


class ScriptedEndpoint:
    """The scripted server. See the module docstring.

    Use it as a context manager (or :meth:`start` / :meth:`stop`); :attr:`url`
    is its base URL (``http://127.0.0.1:PORT/v1``). :attr:`requests` records
    every request: its path, ``Authorization`` header, model, task id, turn,
    the fault applied (or None), its arrival time (``time.monotonic``) and,
    with ``record_bodies``, the decoded request body.
    """

    def __init__(
        self,
        tasks: Iterable[Task],
        *,
        world: Any = None,
        faults: Mapping[str, str] | None = None,
        model: str = "scripted",
        retry_after_s: float = 1.0,
        hang_s: float = 5.0,
        delay_s: float = 0.0,
        record_bodies: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.tasks: dict[str, Task] = {}
        alike: dict[str, list[Task]] = defaultdict(list)
        for task in tasks:
            self.tasks.setdefault(task.instruction, task)
            if task not in alike[task.instruction]:
                alike[task.instruction].append(task)
        self.probes: dict[str, tuple[dict[str, Any], dict[str, Task]]] = {}
        """Per instruction several tasks send: the probe call and the task each of its results names."""
        if world is not None:
            for instruction, group in alike.items():
                if len(group) > 1:
                    probe = _probe(world, group)
                    if probe is not None:
                        self.probes[instruction] = probe
        self.faults: dict[str, str] = dict(faults or {})
        for task_id, kind in self.faults.items():
            if kind not in FAULTS:
                raise ValueError(f"no fault {kind!r} for {task_id} (known: {', '.join(FAULTS)})")
        self.model = model
        self.retry_after_s = retry_after_s
        self.hang_s = hang_s
        self.delay_s = delay_s
        self.record_bodies = record_bodies
        self.requests: list[dict[str, Any]] = []
        self._attempts: dict[tuple[str, int], int] = defaultdict(int)
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer((host, port), _handler(self))
        self.server.daemon_threads = True
        self.url = f"http://{host}:{self.server.server_address[1]}/v1"
        self._thread: threading.Thread | None = None

    @classmethod
    def for_run(
        cls,
        world: Any,
        *,
        episodes: int,
        split: str = "test",
        families: list[str] | None = None,
        start: int = 0,
        **options: Any,
    ) -> ScriptedEndpoint:
        """A server scripted with the tasks ``mirrorworld run`` would play with the same options."""
        from mirrorworld.run.runner import plan_episodes

        planned = plan_episodes(world, episodes=episodes, split=split, families=families, start=start)  # type: ignore[arg-type]
        return cls((world.task_at(p.task) for p in planned), world=world, **options)

    def start(self) -> ScriptedEndpoint:
        self._thread = threading.Thread(target=self.server.serve_forever, name="scripted-endpoint", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> ScriptedEndpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def answer(self, body: Any) -> tuple[int, dict[str, str], bytes, dict[str, Any]]:
        """The response to one request body: status, headers, body bytes, and what :attr:`requests` records."""
        seen: dict[str, Any] = {"model": None, "task": None, "turn": None, "fault": None}
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return 400, {}, _error_body("messages is required", "invalid_request_error", None), seen
        seen["model"] = body.get("model")
        messages = [m for m in body["messages"] if isinstance(m, dict)]
        if body.get("model") != self.model:
            msg = f"The model `{str(body.get('model'))[:80]}` does not exist or you do not have access to it."
            return 404, {}, _error_body(msg, "invalid_request_error", "model_not_found"), seen
        first_user = next((m.get("content") for m in messages if m.get("role") == "user"), None)
        task = self.tasks.get(first_user) if isinstance(first_user, str) else None
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        probe = self.probes.get(first_user) if isinstance(first_user, str) else None
        if probe is not None:
            if turn == 0:
                seen.update(task=None, turn=0, fault="probe")
                return 200, {}, self._reply(probe[0], "probe", 0, messages), seen
            answer = next((m.get("content") for m in messages if m.get("tool_call_id") == "probe"), None)
            task = probe[1].get(answer, task) if isinstance(answer, str) else task
            turn -= 1  # the gold starts after the probe
        seen.update(task=task.id if task else None, turn=turn)
        fault = self.faults.get(task.id) if task is not None else None
        with self._lock:
            attempt = self._attempts[(task.id if task else "", turn)]
            self._attempts[(task.id if task else "", turn)] += 1
        if fault in ("http503_once", "http429_once") and (turn > 0 or attempt > 0):
            fault = None
        if fault == "bad_arguments" and turn > 0:
            fault = None
        seen["fault"] = fault
        if fault == "model_not_found":
            msg = f"The model `{self.model}` does not exist or you do not have access to it."
            return 404, {}, _error_body(msg, "invalid_request_error", "model_not_found"), seen
        if fault == "http400":
            msg = "Invalid 'messages[1].content': string too long."
            return 400, {}, _error_body(msg, "invalid_request_error", "string_above_max_length"), seen
        if fault == "http500":
            return (
                500,
                {},
                _error_body("The server had an error while processing your request.", "server_error", None),
                seen,
            )
        if fault == "http503_once":
            return 503, {}, _error_body("The engine is currently overloaded.", "server_error", None), seen
        if fault == "http429_once":
            headers = {"Retry-After": f"{self.retry_after_s:g}"}
            return 429, headers, _error_body("Rate limit reached.", "rate_limit_error", "rate_limit_exceeded"), seen
        if fault == "timeout":
            time.sleep(self.hang_s)
        elif self.delay_s:
            time.sleep(self.delay_s)
        if fault == "malformed":
            return 200, {}, b"<html><body>502 Bad Gateway</body></html>", seen
        if fault == "no_choices":
            return 200, {}, json.dumps({"id": "x", "object": "chat.completion"}).encode(), seen
        message: dict[str, Any]
        if task is None:
            message = {"role": "assistant", "content": _UNKNOWN}
        elif fault == "bad_arguments":
            name = task.gold[0].tool if task.gold else "respond"
            message = {"role": "assistant", "content": None, "tool_calls": [tool_call("c0", name, '{"id": ')]}
        else:
            step = turn - (1 if self.faults.get(task.id) == "bad_arguments" else 0)
            if step < len(task.gold):
                call = task.gold[step]
                message = {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [tool_call(f"c{turn}", call.tool, call.args)],
                }
            else:
                message = {"role": "assistant", "content": ""}
        return 200, {}, self._reply(message, task.id if task else "unknown", turn, messages), seen

    def _reply(self, message: dict[str, Any], name: str, turn: int, messages: list[dict[str, Any]]) -> bytes:
        sent = sum(len(str(m.get("content") or "")) for m in messages)
        out = len(json.dumps(message))
        payload = {
            "id": f"chatcmpl-{name}-{turn}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if "tool_calls" in message else "stop"}
            ],
            "usage": {"prompt_tokens": sent // 4, "completion_tokens": out // 4, "total_tokens": sent // 4 + out // 4},
        }
        return json.dumps(payload).encode()


def _probe(world: Any, group: list[Task]) -> tuple[dict[str, Any], dict[str, Task]] | None:
    """A read call whose result differs between every task of ``group``, and the task each result names."""
    from mirrorworld.envs.chat import ChatEnv

    tried: list[tuple[str, dict[str, Any]]] = []
    for task in group:
        for call in task.gold:
            args = call.args if isinstance(call.args, dict) else {}
            for spec in world.tools:
                if spec.kind != "read" or not spec.params:
                    continue
                picked = {p.name: args[p.name] for p in spec.params if p.name in args}
                complete = picked and all(p.name in picked for p in spec.params if p.required)
                if complete and (spec.name, picked) not in tried:
                    tried.append((spec.name, picked))
    chat = ChatEnv(world)
    try:
        for name, args in tried[:50]:
            message = {"role": "assistant", "content": None, "tool_calls": [tool_call("probe", name, args)]}
            seen: dict[str, Task] = {}
            for task in group:
                chat.reset(task=task)
                replies = chat.step(message)
                seen[str(replies[0]["content"])] = task
            if len(seen) == len(group):
                return message, seen
    finally:
        chat.close()
    return None


def _handler(endpoint: ScriptedEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            at = time.monotonic()
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if not 0 <= length <= _MAX_BODY:
                self._send(413, {}, _error_body("request too large", "invalid_request_error", None))
                return
            raw = self.rfile.read(length)
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {}, _error_body(f"no route {self.path[:80]}", "invalid_request_error", None))
                return
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            status, headers, data, seen = endpoint.answer(body)
            seen.update(path=self.path, auth=self.headers.get("Authorization"), at=at)
            if endpoint.record_bodies:
                seen["body"] = body
            endpoint.requests.append(seen)
            self._send(status, headers, data)

        def _send(self, status: int, headers: dict[str, str], data: bytes) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout)
                pass

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


def main(argv: list[str] | None = None) -> int:
    """``python -m mirrorworld.agents.endpoint``: serve the scripted model until interrupted."""
    from mirrorworld.core.registry import default
    from mirrorworld.errors import MirrorworldError

    p = argparse.ArgumentParser(prog="python -m mirrorworld.agents.endpoint", description=__doc__.split("\n\n")[0])
    p.add_argument("--world", default="helpdesk", help="the world whose tasks it plays (default: helpdesk)")
    p.add_argument("--episodes", type=int, default=20, help="tasks it knows, as `mirrorworld run` plans them")
    p.add_argument("--split", choices=("train", "test"), default="test")
    p.add_argument("--model", default="scripted", help="the model name it answers to (default: scripted)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--fault", action="append", default=[], metavar="TASK_ID=KIND", help=f"one of {', '.join(FAULTS)}")
    args = p.parse_args(argv)
    faults = dict(item.partition("=")[::2] for item in args.fault)
    try:
        world = default.get(args.world)
        endpoint = ScriptedEndpoint.for_run(
            world, episodes=args.episodes, split=args.split, model=args.model, faults=faults, port=args.port
        )
    except (ValueError, OSError, MirrorworldError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"serving the scripted model {args.model!r} at {endpoint.url}", flush=True)
    try:
        endpoint.server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        endpoint.server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
