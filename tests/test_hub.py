"""Hub exports of a world artifact: an OpenEnv environment and a verifiers environment package.

The exports of a real packed artifact are byte-identical twice; the OpenEnv
manifest parses (and passes OpenEnv's own parser and structure check when
``openenv`` is installed) and names the artifact; the generated server serves
the world's OpenEnv routes behind its token, and the generated client plays an
episode; the generated verifiers package imports without verifiers, and its
core and its environment class (driven by a stand-in for the verifiers
module, as verifiers' rollout loop drives it) pay 1.0 for the task's gold
calls and 0.0 for none.
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import importlib
import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

artifact_mod = pytest.importorskip(
    "mirrorworld.ship.artifact", reason="mirrorworld.ship.artifact (mirrorworld pack) is not importable"
)

from mirrorworld import make_world  # noqa: E402
from mirrorworld.errors import MirrorworldError  # noqa: E402
from mirrorworld.ship import hub  # noqa: E402
from mirrorworld.ship.hub_cli import main as export_main  # noqa: E402

Artifact = artifact_mod.Artifact
TOKEN = "hub-test-token-0123"
TASK = ("refund_damaged", 1)


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return Artifact.open(artifact_mod.pack("helpdesk", tmp_path_factory.mktemp("art")))


@pytest.fixture(scope="module")
def openenv_dir(artifact: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return hub.export_openenv(artifact, tmp_path_factory.mktemp("oe") / "env")


@pytest.fixture(scope="module")
def verifiers_dir(artifact: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return hub.export_verifiers(artifact, tmp_path_factory.mktemp("vf") / "env")


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def load_file(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- both formats ---------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", hub.FORMATS)
def test_an_export_is_byte_identical_twice(fmt: str, artifact: Any, tmp_path: Path) -> None:
    first = tree(hub.export(fmt, artifact, tmp_path / "a"))
    assert first == tree(hub.export(fmt, artifact.path, tmp_path / "b"))
    again = artifact_mod.pack("helpdesk", tmp_path / "repacked")  # the whole way from the world
    assert tree(hub.export(fmt, again, tmp_path / "a")) == first  # and a previous export is replaced whole
    wheel = f"wheels/{artifact.path.name}"
    assert hashlib.sha256(first[wheel]).hexdigest() == artifact.digest
    facts = json.loads(first[hub.EXPORT_FILE])
    assert facts["artifact"] == {"file": wheel, "sha256": artifact.digest, "size": artifact.size}
    assert facts["content_hash"] == artifact.manifest.content_hash and facts["env_id"] == "mirrorworld/Helpdesk-v0"
    assert facts["manifest"] == artifact.manifest.to_dict() and facts["target"] == fmt


def test_an_export_refuses_a_directory_that_is_not_one(artifact: Any, tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(MirrorworldError, match="not an export"):
        hub.export_openenv(artifact, tmp_path)
    assert (tmp_path / "mine.txt").read_text() == "keep me"
    with pytest.raises(MirrorworldError, match="unknown export format"):
        hub.export("gguf", artifact, tmp_path / "x")


def test_the_pin_names_the_artifact_alone(artifact: Any, openenv_dir: Path, verifiers_dir: Path) -> None:
    version = artifact.path.name.removeprefix("mirrorworld-").removesuffix("-py3-none-any.whl")
    assert artifact.manifest.content_hash in version  # a local label no public index holds
    pin = f"=={version}"
    assert pin in (openenv_dir / "server" / "requirements.txt").read_text()
    for root in (openenv_dir, verifiers_dir):
        text = (root / "pyproject.toml").read_text()
        assert pin in text and f'path = "wheels/{artifact.path.name}"' in text
        assert f'artifact_sha256 = "{artifact.digest}"' in text


# -- OpenEnv --------------------------------------------------------------------------------


def test_the_openenv_manifest_names_the_artifact(artifact: Any, openenv_dir: Path) -> None:
    text = (openenv_dir / "openenv.yaml").read_text()
    m = artifact.manifest
    try:
        import yaml
    except ImportError:  # pragma: no cover - pyyaml is in the dev environment
        assert f'sha256: "{artifact.digest}"' in text and f'content_hash: "{m.content_hash}"' in text
        return
    doc = yaml.safe_load(text)
    assert doc["name"] == "mirrorworld_helpdesk_v0" and doc["app"] == "server.app:app" and doc["port"] == 8000
    assert doc["validation"]["reward"]["range"] == list(m.reward_range)
    assert doc["validation"]["capabilities"]["declared_tools"] == list(m.tools)
    mw = doc["mirrorworld"]
    assert (mw["env_id"], mw["version"], mw["content_hash"]) == (m.env_id, m.version, m.content_hash)
    assert mw["artifact"] == {
        "file": f"wheels/{artifact.path.name}",
        "sha256": artifact.digest,
        "size": artifact.size,
        "requirement": mw["artifact"]["requirement"],
    }
    assert mw["parts"] == dict(m.parts)


def test_openenvs_own_checks_accept_the_layout(artifact: Any, openenv_dir: Path) -> None:
    pytest.importorskip("openenv")
    from openenv.cli._cli_utils import validate_env_structure
    from openenv.cli._validation import validate_multi_mode_deployment
    from openenv.validation.parsers.openenv_yaml import OpenEnvYamlParser

    validate_env_structure(openenv_dir)  # raises on a missing required file
    parsed = OpenEnvYamlParser().parse(openenv_dir)
    assert parsed.name == "mirrorworld_helpdesk_v0" and list(parsed.capabilities.declared_tools) == list(
        artifact.manifest.tools
    )
    _, issues = validate_multi_mode_deployment(openenv_dir)
    assert all("uv.lock" in issue for issue in issues), issues  # a lock needs the index: the user's `uv lock`


@pytest.fixture()
def server_app(openenv_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    monkeypatch.setenv("MIRRORWORLD_HOST", "127.0.0.1")
    monkeypatch.setenv("MIRRORWORLD_TOKEN", TOKEN)
    yield load_file(openenv_dir / "server" / "app.py", "_hub_test_server_app")


def test_the_openenv_server_serves_the_world_behind_its_token(server_app: ModuleType) -> None:
    from fastapi.testclient import TestClient

    task = make_world("helpdesk").task(*TASK)
    with TestClient(server_app.app) as client:
        assert client.get("/health").json()["status"] == "healthy"
        assert client.post("/reset", json={"task_id": task.id}).status_code == 401
        auth = {"Authorization": f"Bearer {TOKEN}"}
        first = client.post("/reset", json={"task_id": task.id}, headers=auth).json()
        assert first["observation"]["instruction"] == task.instruction
        sid = first["metadata"]["session_id"]
        total = 0.0
        for call in task.gold:
            body = client.post(
                "/step", json={"session_id": sid, "action": {"tool": call.tool, "args": call.args}}, headers=auth
            ).json()
            total += body["reward"] or 0.0
        assert body["done"] and body["observation"]["verdict"]["passed"] and total == pytest.approx(1.0)


def test_the_openenv_server_refuses_another_build(server_app: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server_app, "CONTENT_HASH", "0" * 16)
    with pytest.raises(MirrorworldError, match="install the bundled artifact"):
        server_app.check_world()


def test_the_openenv_server_refuses_the_network_without_a_token(
    openenv_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("fastapi")
    monkeypatch.setenv("MIRRORWORLD_HOST", "0.0.0.0")
    monkeypatch.delenv("MIRRORWORLD_TOKEN", raising=False)
    with pytest.raises(SystemExit, match=r"^mirrorworld: error: .* needs a bearer token"):
        load_file(openenv_dir / "server" / "app.py", "_hub_test_server_open")


def test_the_openenv_client_plays_an_episode(openenv_dir: Path) -> None:
    pytest.importorskip("openenv")
    from mirrorworld.server import BackgroundServer, ServerConfig

    client_mod = load_file(openenv_dir / "client.py", "_hub_test_client")
    task = make_world("helpdesk").task(*TASK)
    config = ServerConfig(worlds=("helpdesk",), token=TOKEN, access_log=False)
    with BackgroundServer(config) as server, client_mod.MirrorworldEnv(base_url=server.url, token=TOKEN).sync() as env:
        assert env.reset(task_id=task.id).observation["instruction"] == task.instruction
        for call in task.gold:
            result = env.step({"tool": call.tool, "args": call.args})
        assert result.done and result.observation["verdict"]["passed"]


# -- verifiers ------------------------------------------------------------------------------


@pytest.fixture()
def package(verifiers_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    name = "mirrorworld_helpdesk_v0"
    monkeypatch.syspath_prepend(str(verifiers_dir))
    for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
        monkeypatch.delitem(sys.modules, key)
    module = importlib.import_module(name)
    yield module
    for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
        del sys.modules[key]


def test_the_package_imports_without_verifiers(package: ModuleType, verifiers_dir: Path, artifact: Any) -> None:
    m = artifact.manifest
    assert (m.content_hash, m.env_id) == (package.CONTENT_HASH, package.ENV_ID)
    for source in (verifiers_dir / package.__name__).glob("*.py"):
        tree_ = ast.parse(source.read_text())
        top = [n for n in tree_.body if isinstance(n, (ast.Import, ast.ImportFrom))]  # imports at module level
        names = [a.name for n in top if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in top if isinstance(n, ast.ImportFrom)]
        assert not [n for n in names if n.split(".")[0] in ("verifiers", "datasets")], (source.name, names)
    if importlib.util.find_spec("verifiers") is not None:  # pragma: no cover - not in this environment
        pytest.skip("verifiers is installed here")
    with pytest.raises(ImportError, match="needs verifiers"):
        package.load_environment()


def test_the_package_refuses_another_build(package: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(package.rollout, "CONTENT_HASH", "f" * 16)
    with pytest.raises(MirrorworldError, match="install the bundled artifact"):
        package.rollout.open_world()


def test_rows_carry_the_task_not_its_gold(package: ModuleType) -> None:
    world = package.rollout.open_world()
    rows = package.rollout.dataset_rows(world, "test", 6, ["refund_damaged", "cancel_order"])
    assert [r["info"]["split"] for r in rows] == ["test"] * 6
    for row in rows:
        info = row["info"]
        task = world.task(info["family"], info["seed"])
        assert info["task_id"] == task.id and info["world"] == "helpdesk" and row["answer"] == ""
        system, user = row["prompt"]
        assert system["role"] == "system" and world.policy in system["content"]
        assert user == {"role": "user", "content": task.instruction}
        final = task.gold[-1].args["message"]
        assert final not in json.dumps(row)  # the gold's final message is a canary
    assert {r["info"]["family"] for r in rows} == {"refund_damaged", "cancel_order"}


def test_the_tools_are_the_worlds_with_their_schemas(package: ModuleType) -> None:
    world = package.rollout.open_world()
    defs = package.rollout.tool_defs(world)
    assert [d["name"] for d in defs] == [t.name for t in world.tools]
    for d, t in zip(defs, world.tools, strict=True):
        assert d["parameters"] == t.openai_schema()["function"]["parameters"]
        assert d["parameters"]["type"] == "object"


def openai_calls(calls: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": c.tool, "arguments": json.dumps(c.args)}}
            for i, c in enumerate(calls)
        ],
    }


def object_calls(calls: Any) -> Any:
    """The same calls as verifiers' message objects present them (attributes, flat tool calls)."""
    return SimpleNamespace(
        role="assistant",
        content="",
        tool_calls=[
            SimpleNamespace(id=f"c{i}", name=c.tool, arguments=json.dumps(c.args)) for i, c in enumerate(calls)
        ],
    )


@pytest.mark.parametrize("shape", [openai_calls, object_calls])
def test_the_gold_calls_earn_one(package: ModuleType, shape: Any) -> None:
    world = package.rollout.open_world()
    task = world.task(*TASK)
    run = package.rollout.Rollout(world, json.dumps({"task_id": task.id}), max_steps=10)
    replies = run.step(shape(task.gold))
    assert [r["tool_call_id"] for r in replies] == [f"c{i}" for i in range(len(task.gold))] and run.over
    result = run.finish(None)
    run.close()
    assert result["passed"] and result["terminated"] and not result["truncated"]
    assert package.rollout.score(result) == 1.0 and package.mirrorworld_score({"mirrorworld": result}) == 1.0


def test_no_calls_earn_zero(package: ModuleType) -> None:
    world = package.rollout.open_world()
    task = world.task(*TASK)
    for last in (None, {"role": "assistant", "content": "I have refunded you."}):
        run = package.rollout.Rollout(world, {"task_id": task.id})
        result = run.finish(last)
        run.close()
        assert not result["passed"] and package.rollout.score(result) == 0.0
    assert package.mirrorworld_score({}) == 0.0


def fake_verifiers() -> Any:
    """Enough of the verifiers module for the generated class: the base, the decorators, the errors."""

    class Error(Exception):
        pass

    class InfraError(Error):
        pass

    class MultiTurnEnv:
        def __init__(self, **kwargs: Any) -> None:
            self.kwargs = kwargs

    return SimpleNamespace(
        MultiTurnEnv=MultiTurnEnv, Error=Error, InfraError=InfraError, stop=lambda f: f, cleanup=lambda f: f
    )


def play(env: Any, info: dict[str, Any], turns: list[Any]) -> dict[str, Any]:
    """verifiers' loop: setup; per model turn, stop checks then the env's response; cleanup at the end."""

    async def go() -> dict[str, Any]:
        state: dict[str, Any] = {"info": info, "trajectory": []}
        state = await env.setup_state(state)
        for message in turns:
            state["trajectory"].append({"completion": [message]})
            if await env.no_tool_calls(state):
                break
            await env.env_response([message], state)
            if state.get("final_env_response") is not None:
                break
        await env.grade(state)
        assert package_key not in state  # the live episode left the state when it was graded
        return state

    package_key = "mirrorworld_rollout"
    return asyncio.run(go())


def test_the_environment_class_steps_episodes_and_pays_the_verdict(package: ModuleType) -> None:
    vf = fake_verifiers()
    world = package.rollout.open_world()
    env = package._environment_class(vf)(world=world, max_steps=10, dataset=None)
    task = world.task(*TASK)
    info = package.rollout.dataset_rows(world, "train", 1)[0]["info"] | {"task_id": task.id}

    gold = play(env, info, [openai_calls([c]) for c in task.gold])
    assert gold["mirrorworld"]["score"] == 1.0 and gold["final_env_response"][0]["role"] == "tool"

    text = task.gold[-1].args["message"]  # the last call as a plain reply: the final message, as in chat
    said = play(env, info, [openai_calls([c]) for c in task.gold[:-1]] + [{"role": "assistant", "content": text}])
    assert said["mirrorworld"]["score"] == 1.0

    nothing = play(env, info, [{"role": "assistant", "content": "Sorry, I cannot help."}])
    assert nothing["mirrorworld"]["score"] == 0.0 and package.mirrorworld_passed(nothing) == 0.0

    junk = {"role": "assistant", "content": None, "tool_calls": [{"id": "j", "function": {"name": "nope"}}]}
    refused = play(env, info, [junk, {"role": "assistant", "content": "bye"}])
    assert refused["mirrorworld"]["score"] == 0.0 and refused.get("error") is None  # an agent mistake, not a failure


# -- the command ------------------------------------------------------------------------------


def test_the_command_packs_a_world_and_exports_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert export_main(["export", "--format", "verifiers", "helpdesk", "--out", str(tmp_path / "vf")]) == 0
    out = capsys.readouterr().out
    assert "verifiers export of mirrorworld/Helpdesk-v0" in out and (tmp_path / "vf" / "pyproject.toml").is_file()
    wheel = next((tmp_path / "vf" / "wheels").iterdir())
    assert export_main(["export", "--format", "openenv", str(wheel), "--out", str(tmp_path / "oe"), "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["artifact"]["sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert facts["target"] == "openenv"


@pytest.mark.parametrize(
    "source, message",
    [("no_such_world", "no world named"), ("missing.whl", "no artifact at"), ("junk.whl", "not a zip file")],
)
def test_the_command_says_what_is_wrong_in_one_line(
    source: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "junk.whl").write_bytes(b"not a wheel")
    path = str(tmp_path / source) if source.endswith(".whl") else source
    assert export_main(["export", "--format", "openenv", path, "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("mirrorworld: error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()
