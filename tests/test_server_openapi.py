"""The published OpenAPI schema, exercised by schemathesis.

For every operation, schemathesis generates requests from the schema: valid
ones (positive mode), whose answers must be documented and match the
documented response schema, and invalid ones (negative mode), which must be
refused with a structured 4xx error. Neither kind may ever get a 5xx. Path
parameters are mostly random ids (unknown sessions); some are swapped for a
live session's id so that the session routes are reached too, and that
session's state is checked afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("fastapi")
schemathesis = pytest.importorskip("schemathesis")
httpx = pytest.importorskip("httpx")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis.generation import GenerationMode  # noqa: E402

from mirrorworld.server import BackgroundServer, ServerConfig  # noqa: E402

EXAMPLES = 30


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    with BackgroundServer(ServerConfig(access_log=False, max_sessions=100_000, max_steps_limit=10)) as s:
        yield s


@pytest.fixture(scope="module")
def operations(server: BackgroundServer) -> list[Any]:
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    ops = [result.ok() for result in schema.get_all_operations()]
    assert len(ops) >= 15
    return ops


@pytest.fixture(scope="module")
def live(server: BackgroundServer) -> Iterator[str]:
    with httpx.Client(base_url=server.url) as c:
        sid = c.post("/v1/sessions", json={"task_id": "triage/1", "max_steps": 10}).json()["session_id"]
        yield str(sid)


def fuzz(operation: Any, mode: GenerationMode, live: str) -> None:
    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(case: Any) -> None:
        params = case.path_parameters or {}
        if "session_id" in params and len(str(case.body)) % 2 == 0 and case.method.upper() != "DELETE":
            params["session_id"] = live
        response = case.call(timeout=10)
        assert response.status_code < 500, (case.method, case.formatted_path, response.text)
        assert response.headers["content-type"][0].startswith("application/json")  # schemathesis: a list
        if mode is GenerationMode.POSITIVE:
            case.validate_response(response)
        elif response.status_code >= 400:
            body = response.json()
            assert ("error" in body and "code" in body["error"]) or body.get("jsonrpc") == "2.0", body

    try:
        run()
    except Unsatisfiable:
        assert mode is GenerationMode.NEGATIVE  # an operation without inputs has no invalid requests


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=lambda m: m.value)
def test_every_operation_answers_as_documented(
    operations: list[Any], mode: GenerationMode, live: str, server: BackgroundServer
) -> None:
    with httpx.Client(base_url=server.url) as c:
        assert c.get(f"/v1/sessions/{live}/state").status_code == 200
    for operation in operations:
        fuzz(operation, mode, live)
    with httpx.Client(base_url=server.url) as c:
        after = c.get(f"/v1/sessions/{live}/state")
    # still live and consistent (a fuzzed reset may have restarted its episode, so its step may be lower)
    assert after.status_code == 200 and 0 <= after.json()["step"] <= after.json()["max_steps"]
