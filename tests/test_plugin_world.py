"""Worlds are plug-ins: a world from a distribution of its own works in every command.

``tests/plugins/tinyworld`` is packaged the way a third party would package a
world: a ``pyproject.toml`` whose ``mirrorworld.worlds`` entry point names the
world's ``WorldSpec``. It is installed once per test session with pip into a
temporary folder (no index, no build isolation, no dependencies: the project's
virtualenv is left alone) and found only through ``PYTHONPATH``, so every check
runs in a subprocess. Nothing in mirrorworld names the tiny world: the run, the
verifier audit, the server, Gymnasium, PettingZoo, TRL and ``check_world`` find
it through the registry alone.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import TinyWorld
from mirrorworld.audit.verifiers import _cross_process
from mirrorworld.cli import main
from mirrorworld.core.registry import Registry, default
from mirrorworld.errors import WorldError
from mirrorworld.run.trajectories import RunFile

PLUGIN = Path(__file__).resolve().parent / "plugins" / "tinyworld"


@pytest.fixture(scope="session")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the tiny world's distribution is installed into (put it on ``PYTHONPATH``)."""
    pytest.importorskip("setuptools", reason="building the plug-in without build isolation needs setuptools")
    root = tmp_path_factory.mktemp("plugin")
    source = root / "source"
    shutil.copytree(PLUGIN, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = root / "site"
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-compile"]
    done = subprocess.run(
        [*command, "--target", str(target), str(source)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (target / "tinyworld" / "schema.sql").is_file() and (target / "tinyworld" / "policy.md").is_file()
    return target


def _env(plugin: Path) -> dict[str, str]:
    paths = [str(plugin), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "PYTHONDONTWRITEBYTECODE": "1"}


def _python(plugin: Path, *args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=_env(plugin),
        cwd=cwd,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def _script(plugin: Path, code: str, cwd: Path) -> str:
    done = _python(plugin, "-c", textwrap.dedent(code), cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_plugin_is_found_through_its_entry_point_only(plugin: Path, tmp_path: Path) -> None:
    assert "tiny" not in default.names()
    out = _script(
        plugin,
        """
        import json
        from mirrorworld.core.registry import default
        spec = default.spec("tiny")
        world = default.get("mirrorworld/Tiny-v0")
        print(json.dumps([spec.factory, world.id, world.name, list(world.tool_names)]))
        """,
        tmp_path,
    )
    assert json.loads(out) == [
        "tinyworld.world:TinyWorld",
        "mirrorworld/Tiny-v0",
        "tiny",
        ["find_member", "list_loans", "renew_loan", "message_desk", "respond"],
    ]
    helped = _python(plugin, "-m", "mirrorworld", "run", "--help", cwd=tmp_path)
    assert helped.returncode == 0 and "tiny" in helped.stdout
    listed = _python(plugin, "-m", "mirrorworld", "worlds", cwd=tmp_path)
    assert listed.returncode == 0 and "mirrorworld/Tiny-v0\t5 tools\t2 task families" in listed.stdout


def test_an_unknown_world_is_one_line_naming_the_plugin(plugin: Path, tmp_path: Path) -> None:
    done = _python(plugin, "-m", "mirrorworld", "run", "--world", "atlantis", cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "mirrorworld: error: no world named 'atlantis' "
        "(known: helpdesk, helpdesk_team, helpdesk_v1, sales, sales_v1, tiny)"
    ]


def test_run_passes_every_episode_and_writes_a_run_file(plugin: Path, tmp_path: Path) -> None:
    out = tmp_path / "tiny.sqlite"
    argv = ["run", "--world", "tiny", "--agent", "oracle", "--episodes", "4", "--json", "--out", str(out)]
    done = _python(plugin, "-m", "mirrorworld", *argv, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["episodes"] == 4 and summary["pass_rate"] == 1.0
    assert set(summary["families"]) == {"renew_loan", "deny_renewal"}
    with RunFile.open(out) as run:
        assert run.meta["world"] == "mirrorworld/Tiny-v0"
        episodes = list(run.episodes())
    assert len(episodes) == 4 and all(e.passed for e in episodes)


def test_the_verifier_audit_meets_every_bar(plugin: Path, tmp_path: Path) -> None:
    done = _python(
        plugin, "-m", "mirrorworld", "audit-verifiers", "--world", "tiny", "--seeds", "2", "--json", cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    report = json.loads(done.stdout)
    assert report["world"] == "mirrorworld/Tiny-v0" and report["meets_bars"], report["failed_bars"]
    assert report["determinism"]["cross_process"] is True
    assert set(report["families"]) == {"renew_loan", "deny_renewal"}
    assert all(f["mutants_total"] > 0 and f["mutation_score"] == 1.0 for f in report["families"].values())


def test_the_command_line_uses_the_registry_it_is_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    registry = Registry()
    registry.register("tiny", TinyWorld)
    out = tmp_path / "run.sqlite"
    assert main(["run", "--episodes", "2", "--json", "--no-progress", "--out", str(out)], registry=registry) == 0
    assert json.loads(capsys.readouterr().out)["pass_rate"] == 1.0
    with RunFile.open(out) as run:
        assert run.meta["world"] == "mirrorworld/Tiny-v0"
    assert main(["tools", "--world", "helpdesk"], registry=registry) == 1
    assert capsys.readouterr().err == "mirrorworld: error: no world named 'helpdesk' (known: tiny)\n"
    with pytest.raises(SystemExit):
        main(["run", "--help"], registry=registry)
    assert "one of: tiny (default: tiny)" in " ".join(capsys.readouterr().out.split())


def test_the_audit_rebuilds_a_world_no_registry_names_in_another_process(tiny: TinyWorld) -> None:
    assert "tiny" not in default.names()
    assert _cross_process(tiny, ["bump"], 1) is True


def test_a_world_that_cannot_travel_to_another_process_is_a_clear_error() -> None:
    class Local(TinyWorld):
        pass

    with pytest.raises(WorldError, match=r"cannot be rebuilt in another process.*--no-cross-process"):
        _cross_process(Local(), ["bump"], 1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_plays_an_episode_of_the_plugin(plugin: Path, tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    httpx = pytest.importorskip("httpx")
    from mirrorworld.client import Client

    port = _free_port()
    command = ["-m", "mirrorworld", "serve", "--world", "tiny", "--port", str(port), "--no-access-log"]
    proc = subprocess.Popen(
        [sys.executable, *command], env=_env(plugin), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/health").status_code == 200:
                    break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(proc.communicate()[1].decode()) from None
                time.sleep(0.1)
        with Client(url, transport="http") as client:
            assert [w["name"] for w in client.worlds()] == ["tiny"]
            session = client.create("tiny", family="deny_renewal", seed=0)
            assert session.info.world == "mirrorworld/Tiny-v0" and "respond" in session.info.tools
            email = re.search(r"\(([^)]+@[^)]+)\)", session.info.instruction)
            title = re.search(r"renew (.+) for me", session.info.instruction)
            assert email and title
            found = session.step("find_member", {"email": email.group(1)})
            assert found.ok, found.result
            loans = session.step("list_loans", {"member_id": found.result["member"]["id"]})
            loan = next(x for x in loans.result["loans"] if x["title"] == title.group(1))
            refused = session.step("renew_loan", {"loan_id": loan["loan_id"]})
            assert not refused.ok and refused.result["error"]["code"] == "policy_refused"
            answer = f"I can't renew {title.group(1)}: it reached the renewal limit. It is due on {loan['due_on']}."
            last = session.step("respond", {"message": answer})
            assert last.terminated and last.verdict is not None and last.verdict["passed"], last.verdict
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def test_gymnasium_makes_the_plugin_by_its_id(plugin: Path, tmp_path: Path) -> None:
    out = _script(
        plugin,
        """
        import json
        import gymnasium as gym
        import mirrorworld

        env = gym.make("mirrorworld/Tiny-v0")
        obs, info = env.reset(seed=0)
        names = env.unwrapped.tool_names
        obs, reward, terminated, truncated, info = env.step(
            {"tool_name": names.index("list_loans"), "tool_args": json.dumps({"member_id": 1})}
        )
        print(json.dumps([list(names), bool(terminated), "loans" in str(obs["last_result"])]))
        """,
        tmp_path,
    )
    assert json.loads(out) == [["find_member", "list_loans", "renew_loan", "message_desk", "respond"], False, True]


def test_pettingzoo_seats_the_member_and_the_librarian(plugin: Path, tmp_path: Path) -> None:
    pytest.importorskip("pettingzoo")
    out = _script(
        plugin,
        """
        import json
        from mirrorworld.envs.pettingzoo import env_module

        env = env_module("tiny").parallel_env()
        obs, infos = env.reset(seed=0)
        agents = list(env.agents)
        tools = {a: list(env.tools(a)) for a in agents}
        say = {"tool": 1, "args": json.dumps({"member_id": 1, "body": "Any news?"})}
        look = {"tool": 1 + tools["librarian"].index("list_loans"), "args": json.dumps({"member_id": 1})}
        obs, rewards, terms, truncs, infos = env.step({"member": say, "librarian": look})
        print(json.dumps([agents, tools, sorted(rewards), infos["librarian"]["ok"], any(terms.values())]))
        """,
        tmp_path,
    )
    agents, tools, rewarded, ok, ended = json.loads(out)
    assert agents == ["member", "librarian"] and rewarded == ["librarian", "member"]
    assert tools == {"member": ["message_desk"], "librarian": ["find_member", "list_loans", "renew_loan", "respond"]}
    assert ok is True and ended is False


def test_trl_environment_and_check_world(plugin: Path, tmp_path: Path) -> None:
    out = _script(
        plugin,
        """
        import json, sys
        import mirrorworld
        from mirrorworld.integrations.trl import environment_factory
        from mirrorworld.testing import check_world

        env = environment_factory("tiny")()
        instruction = env.reset(task_id="renew_loan/0")
        result = json.loads(env.list_loans(member_id=1))
        check_world(mirrorworld.make_world("tiny"), seeds=3)
        heavy = sorted(m for m in ("trl", "torch", "transformers") if m in sys.modules)
        print(json.dumps(["front desk" in instruction, "loans" in result, env.get_reward(), heavy]))
        """,
        tmp_path,
    )
    assert json.loads(out) == [True, True, 0.0, []]
