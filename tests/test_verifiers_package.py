"""The exported verifiers package under the real verifiers (0.3.x), evaluated against a scripted model.

``tests/test_hub.py`` drives the package's environment class with a stand-in
for verifiers; here verifiers itself loads the package, runs its own
evaluation loop against the bundled OpenAI-compatible scripted endpoint, and
scores what the model did: gold calls earn 1.0, the model was sent the
world's tools with their argument schemas and the policy, and an endpoint
failure is recorded as the rollout's error.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

vf = pytest.importorskip("verifiers")
pytest.importorskip("openai")

from mirrorworld import make_world  # noqa: E402
from mirrorworld.agents.endpoint import ScriptedEndpoint  # noqa: E402
from mirrorworld.ship import hub  # noqa: E402
from mirrorworld.ship.artifact import Artifact, pack  # noqa: E402

N = 4


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    root = tmp_path_factory.mktemp("vfpkg")
    out = hub.export_verifiers(Artifact.open(pack("helpdesk", root / "art")), root / "env")
    name = "mirrorworld_helpdesk_v0"
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(out))
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            del sys.modules[key]


def _evaluate(package: ModuleType, faults: dict[str, str] | None = None) -> tuple[list[dict[str, Any]], Any]:
    from verifiers.legacy.types import ClientConfig

    env = package.load_environment(num_train_examples=1, num_eval_examples=N)
    world = make_world("helpdesk")
    tasks = [world.task_for("test", i) for i in range(N)]
    with ScriptedEndpoint(tasks, faults=faults, record_bodies=True) as endpoint:
        client = ClientConfig(api_key_var="MW_VF_TEST_KEY", api_base_url=endpoint.url, max_retries=0)
        out = env.evaluate_sync(client=client, model="scripted", num_examples=N, max_concurrent=2)
        return sorted(out["outputs"], key=lambda o: o["example_id"]), endpoint


def test_verifiers_evaluates_the_package_and_gold_earns_one(
    package: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MW_VF_TEST_KEY", "not-a-secret")
    outputs, endpoint = _evaluate(package)
    assert [o["reward"] for o in outputs] == [1.0] * N
    assert all(o["error"] is None and o["metrics"]["mirrorworld_passed"] == 1.0 for o in outputs)
    world = make_world("helpdesk")
    body = endpoint.requests[0]["body"]
    sent = {t["function"]["name"]: t["function"]["parameters"] for t in body["tools"]}
    assert sent["issue_refund"] == world.tools_by_name["issue_refund"].parameters_schema  # schemas, not names
    assert set(sent) == set(world.tool_names)
    system = body["messages"][0]
    assert system["role"] == "system" and "Customer Support Policy" in system["content"]  # the policy


def test_an_endpoint_failure_is_the_rollouts_error(package: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MW_VF_TEST_KEY", "not-a-secret")
    world = make_world("helpdesk")
    broken = world.task_for("test", 1).id
    outputs, _ = _evaluate(package, faults={broken: "http500"})
    by_task = {o["info"]["task_id"]: o for o in outputs}
    assert by_task[broken]["error"] is not None  # verifiers records it as an errored rollout
    assert all(o["reward"] == 1.0 for t, o in by_task.items() if t != broken)
