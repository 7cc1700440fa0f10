"""The trained agent: a menu policy playing through tool calls makes exactly the calls it makes in its menu env."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mirrorworld.agents import make_agent
from mirrorworld.cli import main
from mirrorworld.envs.chat import ChatEnv
from mirrorworld.envs.gymnasium import MirrorEnv
from mirrorworld.envs.menu import ActionMenu, Menu
from mirrorworld.errors import MirrorworldError
from mirrorworld.run.runner import run_episode
from mirrorworld.worlds.helpdesk import HelpdeskWorld

torch = pytest.importorskip("torch")

from mirrorworld.train.ppo import MenuPolicy, run_greedy  # noqa: E402 - needs torch

SLOTS, HIDDEN, MAX_STEPS = 24, 16, 8


def _policy_dir(tmp_path: Path, world: HelpdeskWorld, seed: int) -> tuple[Path, object]:
    torch.manual_seed(seed)
    policy = MenuPolicy(Menu(world.tools, world.menu_macros(), SLOTS, MAX_STEPS), hidden=HIDDEN)  # type: ignore[arg-type]
    policy.eval()
    out = tmp_path / f"run{seed}"
    out.mkdir()
    torch.save(policy.state_dict(), out / "policy.pt")
    args = {"world": "helpdesk", "slots": SLOTS, "hidden": HIDDEN, "max_steps": MAX_STEPS}
    (out / "results.json").write_text(json.dumps({"args": args}), encoding="utf-8")
    return out, policy


def _given(args: dict[str, object]) -> dict[str, object]:
    """A call's arguments without the optional ones left out (a run file records them as null)."""
    return {k: v for k, v in args.items() if v is not None}


@pytest.mark.parametrize("seed", [0, 1])
def test_the_agent_makes_the_calls_its_policy_makes_in_the_menu_env(tmp_path: Path, seed: int) -> None:
    world = HelpdeskWorld()
    folder, policy = _policy_dir(tmp_path, world, seed)
    agent = make_agent("trained", policy=str(folder / "policy.pt"))
    assert agent.describe()["sha256"] and agent.describe()["world"] == "helpdesk"
    compared = 0
    for i in range(6):
        task = world.task_for("test", i)
        env = ActionMenu(MirrorEnv(world, split="test", max_steps=MAX_STEPS), slots=SLOTS)
        passed, menu_calls = run_greedy(policy, env, options={"task_id": task.id})
        env.close()
        record = run_episode(ChatEnv(world, split="test", max_steps=MAX_STEPS), agent, task)
        assert not record.errored, record.failure
        chat_calls = [(c["tool"], _given(c["args"])) for c in record.calls]
        assert chat_calls[: len(menu_calls)] == [(tool, _given(args)) for tool, args in menu_calls]
        assert record.passed == passed
        compared += len(menu_calls)
    assert compared >= 6


def test_a_folder_loads_and_another_world_is_refused(tmp_path: Path) -> None:
    world = HelpdeskWorld()
    folder, _ = _policy_dir(tmp_path, world, 3)
    agent = make_agent("trained", policy=str(folder))
    from mirrorworld.worlds.sales import SalesWorld

    sales = SalesWorld()
    record = run_episode(ChatEnv(sales, split="test"), agent, sales.task_for("test", 0))
    # A policy of another world: the caller asked for it.
    assert record.failure is not None and record.failure.boundary == "caller"
    assert "trained on helpdesk" in record.failure.message


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({}, "policy.pt with results.json"),
        ({"policy.pt": b"not torch", "results.json": b"{}"}, "not the results of mirrorworld train"),
        (
            {
                "policy.pt": b"not torch",
                "results.json": b'{"args": {"world": "helpdesk", "slots": 24, "hidden": 16, "max_steps": 8}}',
            },
            "not a policy trained on helpdesk",
        ),
    ],
)
def test_bad_policy_files_are_one_clear_error(tmp_path: Path, files: dict[str, bytes], message: str) -> None:
    for name, blob in files.items():
        (tmp_path / name).write_bytes(blob)
    with pytest.raises(MirrorworldError, match=message):
        make_agent("trained", policy=str(tmp_path / "policy.pt"))


def test_fidelity_refuses_policy_options_it_cannot_use(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["fidelity", "--agents", "oracle", "--checkpoint", str(tmp_path)]) != 0
    assert "--checkpoint is the trained agent's option" in capsys.readouterr().err
    assert main(["fidelity", "--agents", "trained"]) != 0
    assert "needs --checkpoint" in capsys.readouterr().err
    assert main(["fidelity", "--agents", "random", "--model", "m"]) != 0
    assert "--model is the openai agent's option" in capsys.readouterr().err
    assert main(["fidelity", "--checkpoint", str(tmp_path)]) != 0
    assert "--checkpoint is an agent's option" in capsys.readouterr().err


def test_run_plays_the_trained_agent_and_refuses_options_it_cannot_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mirrorworld.run.trajectories import RunFile

    folder, _ = _policy_dir(tmp_path, HelpdeskWorld(), 4)
    out = tmp_path / "run.sqlite"
    argv = ["run", "--world", "helpdesk", "--agent", "trained", "--checkpoint", str(folder), "--episodes", "3"]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 0
    with RunFile.open(str(out)) as run:
        assert run.meta["options"]["checkpoint"] == str(folder)
        assert len(list(run.episodes())) == 3
    capsys.readouterr()
    assert main(["run", "--agent", "random", "--checkpoint", str(folder), "--episodes", "1", "--no-progress"]) != 0
    assert "--checkpoint is an option of the trained agent" in capsys.readouterr().err
    assert main(["run", "--agent", "oracle", "--twin-option", "tax_rounding=line", "--episodes", "1"]) != 0
    assert "--twin-option changes the twin" in capsys.readouterr().err
