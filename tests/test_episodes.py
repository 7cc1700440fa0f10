"""The episode layer: one end, one task-id parser, forks, failures with a boundary, the registry of specs."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from typing import Any

import pytest

from mirrorworld import make_world
from mirrorworld.core.registry import Registry, WorldSpec, default
from mirrorworld.core.task import TaskRef
from mirrorworld.envs.gymnasium import MirrorEnv
from mirrorworld.episodes import EPISODE_OVER, Episode, EpisodeOptions, select_task
from mirrorworld.errors import (
    Failure,
    MirrorworldError,
    RegistryError,
    TaskRefError,
    VerifierError,
    WorldError,
    boundary_of,
)
from mirrorworld.worlds.helpdesk import HelpdeskWorld

# -- one end ----------------------------------------------------------------------------------------


def _write_call(world: HelpdeskWorld) -> tuple[str, dict[str, Any]]:
    task = world.task("refund_damaged", 0)
    call = next(c for c in task.gold if world.tools_by_name[c.tool].kind == "write")
    assert isinstance(call.args, dict)
    return call.tool, call.args


def test_a_write_after_truncation_changes_nothing(helpdesk: HelpdeskWorld) -> None:
    env = MirrorEnv(helpdesk, max_steps=2)
    env.reset(options={"task_id": "refund_damaged/0"})
    for _ in range(2):
        _, _, terminated, truncated, info = env.step({"tool_name": "get_policy", "tool_args": "{}"})
    assert truncated and not terminated and "verdict" in info
    ep = env.episode
    assert ep is not None
    before, changes, steps = env.state_hash(), ep.session.changes(), ep.session.steps
    tool, args = _write_call(helpdesk)
    obs, reward, terminated, truncated, info = env.step({"tool_name": tool, "tool_args": json.dumps(args)})
    assert json.loads(obs["last_result"]) == {"error": EPISODE_OVER}
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert "verdict" not in info and not obs["tool_mask"].any()
    assert env.state_hash() == before and ep.session.changes() == changes and ep.session.steps == steps


def test_no_reward_is_paid_after_termination(helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("refund_damaged", 0)
    env = MirrorEnv(helpdesk)
    env.reset(options={"task": task})
    total = 0.0
    for call in task.gold:
        _, reward, terminated, _, info = env.step({"tool_name": call.tool, "tool_args": json.dumps(call.args)})
        total += float(reward)
    assert terminated and info["verdict"]["passed"] and total == pytest.approx(1.0)
    for _ in range(3):
        _, reward, terminated, truncated, info = env.step({"tool_name": task.gold[-1].tool, "tool_args": "{}"})
        assert (reward, terminated, truncated) == (0.0, True, False) and "verdict" not in info


def test_finish_truncates_a_running_episode_and_grades_it_once(helpdesk: HelpdeskWorld) -> None:
    with Episode(helpdesk, helpdesk.task("cancel_order", 3)) as ep:
        ep.step("get_policy", {})
        verdict = ep.finish()
        assert ep.over and ep.truncated and not ep.terminated and ep.finish() is verdict
        late = ep.step("get_policy", {})
        assert late.after_end and late.error == EPISODE_OVER and late.verdict is None and late.boundary == "agent"


def test_sparse_episodes_pay_only_the_score(helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("refund_damaged", 0)
    with Episode(helpdesk, task, EpisodeOptions(reward="sparse")) as ep:
        rewards = [ep.step(c.tool, c.args).reward for c in task.gold]
    assert rewards[:-1] == [0.0] * (len(rewards) - 1) and rewards[-1] == 1.0


@pytest.mark.parametrize("bad", [{"max_steps": 0}, {"max_steps": True}, {"reward": "dense"}])
def test_episode_options_are_checked(bad: dict[str, Any]) -> None:
    with pytest.raises(MirrorworldError):
        EpisodeOptions(**bad)


def test_a_fork_continues_apart_from_its_parent(helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("refund_damaged", 0)
    with Episode(helpdesk, task) as ep:
        *work, last = task.gold
        for call in work:
            ep.step(call.tool, call.args)
        copy = ep.fork()
        try:
            assert copy.session.state_hash() == ep.session.state_hash()
            assert copy.total_reward == ep.total_reward and copy.session.steps == ep.session.steps
            end = copy.step(last.tool, last.args)
            assert end.terminated and end.verdict is not None and end.verdict.passed
            assert not ep.over and ep.session.final_message is None and copy.session.final_message is not None
            assert ep.step(last.tool, last.args).verdict == end.verdict
        finally:
            copy.close()


# -- failures have a boundary -------------------------------------------------------------------------


def test_a_crashing_tool_is_a_world_error_recorded_on_the_episode(faulty_helpdesk: Any) -> None:
    task = faulty_helpdesk.task("refund_damaged", 0)
    with Episode(faulty_helpdesk, task) as ep:
        with pytest.raises(WorldError) as info:
            ep.step("refund_then_crash", {"order_id": task.targets[0][1]})
        assert isinstance(info.value.__cause__, KeyError)
        assert ep.failure is not None and ep.failure.boundary == "world" and ep.over
        assert ep.session.changes() == []  # the call was rolled back whole
        assert ep.step("get_policy", {}).error == EPISODE_OVER
        with pytest.raises(WorldError, match="cannot be graded"):
            ep.finish()


def test_a_crashing_verifier_is_a_verifier_error(helpdesk: HelpdeskWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    from mirrorworld.verify import verifier

    def broken(self: Any, session: Any) -> Any:
        raise ZeroDivisionError("bug")

    monkeypatch.setattr(verifier.Verifier, "__call__", broken)
    with Episode(helpdesk, helpdesk.task("cancel_order", 3)) as ep:
        with pytest.raises(VerifierError):
            ep.finish()
        assert ep.failure is not None and ep.failure.boundary == "verifier"


def test_boundaries_of_errors() -> None:
    assert boundary_of(WorldError("x")) == "world"
    assert boundary_of(KeyError("x")) == "world"
    assert boundary_of(ConnectionError("x")) == "infrastructure"
    assert boundary_of(RegistryError("x")) == "caller"
    assert Failure.from_dict(Failure.of(VerifierError("v")).to_dict()) == Failure("verifier", "VerifierError", "v")
    assert Failure.from_dict({"boundary": "<script>", "kind": 3}).boundary == "infrastructure"
    assert Failure.from_dict("junk").boundary == "infrastructure"


# -- naming tasks -----------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["refund/", "/3", "refund", "refund/-1", "refund/1.5", "refund/٣", "a/99999999999", 7])
def test_task_refs_reject_anything_but_family_slash_seed(text: Any) -> None:
    with pytest.raises(TaskRefError):
        TaskRef.parse(text)


def test_task_refs_round_trip(helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("refund_damaged", 15)
    assert TaskRef.parse(task.id) == task.ref and str(task.ref) == task.id
    assert helpdesk.task_at(task.id) is task


def test_select_task_precedence(helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("triage", 5)
    assert select_task(helpdesk, task=task, task_id="refund_damaged/0") is task
    assert select_task(helpdesk, task_id="triage/5", family="refund_damaged", seed=1) is task
    assert select_task(helpdesk, family="triage", seed=5) is task
    assert select_task(helpdesk, split="test", index=4) is helpdesk.task_for("test", 4)
    with pytest.raises(RegistryError):
        select_task(helpdesk, families=["nope"], index=0)
    with pytest.raises(MirrorworldError):
        select_task(helpdesk, index=-1)
    with pytest.raises(MirrorworldError):
        select_task(helpdesk, split="dev", index=0)  # type: ignore[arg-type]


# -- the registry of specs ----------------------------------------------------------------------------


def test_the_default_registry_is_discovered_from_entry_points() -> None:
    specs = {s.name: s for s in default.specs()}
    assert {"helpdesk", "sales", "helpdesk_team"} <= set(specs)
    for spec in specs.values():
        assert default.get(spec.name).id == spec.env_id
    assert default.spec("mirrorworld/Helpdesk-v0") is specs["helpdesk"]


def test_a_registry_refuses_bad_specs_and_unknown_names() -> None:
    for bad in [("Bad Name", "ns/X-v0", "m:a"), ("ok", "no-version", "m:a"), ("ok", "ns/X-v0", "not a path")]:
        with pytest.raises(RegistryError):
            WorldSpec(*bad)
    reg = Registry([WorldSpec("wrong", "mirrorworld/Wrong-v3", "mirrorworld.worlds.helpdesk.world:HelpdeskWorld")])
    with pytest.raises(WorldError, match="spec says"):
        reg.get("wrong")
    with pytest.raises(RegistryError, match="known: wrong"):
        reg.get("nope")


def test_worlds_pickle_as_their_spec_and_rebuild_in_another_process(helpdesk: HelpdeskWorld) -> None:
    blob = pickle.dumps(helpdesk)
    assert len(blob) < 500  # the class and its parameters, never the database
    code = (
        "import pickle, sys; w = pickle.loads(sys.stdin.buffer.read()); "
        "t = w.task('refund_damaged', 0); s = w.session(t); "
        "[s.call(c.tool, c.args) for c in t.gold]; print(w.content_hash, s.state_hash())"
    )
    out = subprocess.run([sys.executable, "-c", code], input=blob, capture_output=True, check=True, timeout=120)
    task = helpdesk.task("refund_damaged", 0)
    with helpdesk.session(task) as s:
        for c in task.gold:
            s.call(c.tool, c.args)
        assert out.stdout.decode().split() == [helpdesk.content_hash, s.state_hash()]


def test_an_extending_world_hashes_the_folders_it_inherits() -> None:
    team = make_world("helpdesk_team")
    folders = {p.name for p in type(team).sources()}
    assert {"helpdesk_team", "helpdesk", "core", "verify", "episodes"} <= folders
