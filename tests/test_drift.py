"""Declared drift: each kind of change derives a world whose hash moves, whose gold passes and whose null agents fail;
what an agent meets on the new API; the drift report's ablation; fault injection."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from collections.abc import Callable

import pytest

from mirrorworld.agents import make_agent
from mirrorworld.core.registry import default
from mirrorworld.core.world import World
from mirrorworld.drift import (
    AddArgument,
    AddDistractorTools,
    AddEnumValue,
    Change,
    ChangeErrorCode,
    MoveParameter,
    ParaphraseTools,
    RemoveEnumValue,
    RemoveTool,
    RenameArgument,
    RenameTool,
    RetypeArgument,
    RevisePolicy,
    ShiftCustomer,
    derive,
)
from mirrorworld.drift.report import StaleOracle, ablation_worlds, drift_report
from mirrorworld.envs.chat import ChatEnv
from mirrorworld.episodes import Episode, EpisodeOptions, Faults
from mirrorworld.errors import MirrorworldError, WorldError
from mirrorworld.run.runner import run_episode
from mirrorworld.testing import check_world
from mirrorworld.verify.verifier import verify
from mirrorworld.worlds.helpdesk.world import HelpdeskWorld
from mirrorworld.worlds.helpdesk_team.world import HelpdeskTeamWorld


def _derived(changes: list[Change], n: int, base: type[World] = HelpdeskWorld) -> World:
    cls = derive(base, version=50 + n, changes=changes, name=f"drift_case_{n}", title=f"{base.title}Case{n}")
    return cls()


def _gold_session(world: World, family: str, seed: int = 0) -> tuple[object, object]:
    task = world.task(family, seed)
    s = world.session(task)
    for call in task.gold:
        result = s.call(call.tool, call.args)
        assert result.ok, (call, result.error)
    return task, s


# Each kind of drift, with what an agent meets afterwards: (changes, a check on the derived world).
def _renamed(w: World) -> None:
    assert "issue_refund" not in w.tools_by_name and "create_refund" in w.tools_by_name
    s = w.session(w.task("refund_damaged", 0))
    assert s.call("issue_refund", {}).error["code"] == "unknown_tool"
    assert "create_refund" in w.policy and "issue_refund" not in w.policy


def _removed(w: World) -> None:
    assert "list_teams" not in w.tools_by_name
    assert w.session().call("list_teams", {}).error["code"] == "unknown_tool"


def _argument_added(w: World) -> None:
    task = w.task("sla_escalation", 0)
    call = next(c for c in task.gold if c.tool == "escalate_ticket")
    assert call.args["severity"] == "sev2"
    s = w.session(task)
    before = s.state_hash()
    without = {k: v for k, v in call.args.items() if k != "severity"}
    assert s.call("escalate_ticket", without).error["code"] == "invalid_arguments"
    assert s.call("escalate_ticket", {**call.args, "severity": "sev9"}).error["code"] == "invalid_arguments"
    assert s.state_hash() == before


def _argument_renamed(w: World) -> None:
    task = w.task("update_email", 0)
    call = next(c for c in task.gold if c.tool == "update_customer")
    assert "email_address" in call.args and "email" not in call.args
    s = w.session(task)
    old = {**{k: v for k, v in call.args.items() if k != "email_address"}, "email": call.args["email_address"]}
    assert s.call("update_customer", old).error["code"] == "invalid_arguments"


def _retyped(w: World) -> None:
    task = w.task("refund_with_approval", 0)
    call = next(c for c in task.gold if c.tool == "request_approval")
    assert isinstance(call.args["amount"], int)
    schema = w.tools_by_name["request_approval"].parameters_schema["properties"]["amount"]
    assert schema["type"] == "integer"
    s = w.session(task)
    dollars = {**call.args, "amount": f"{call.args['amount'] / 100:.2f}"}
    assert s.call("request_approval", dollars).error["code"] == "invalid_arguments"


def _enum_replaced(w: World) -> None:
    enum = w.tools_by_name["issue_refund"].parameters_schema["properties"]["reason"]["enum"]
    assert "incorrect_item" in enum and "wrong_item" not in enum
    golds = [w.task("refund_damaged", seed).gold for seed in range(12)]
    reasons = {c.args["reason"] for g in golds for c in g if c.tool == "issue_refund"}
    assert "wrong_item" not in reasons and "incorrect_item" in reasons


def _error_code(w: World) -> None:
    task = w.task("triage", 0)
    s = w.session(task)
    tid = next(i for kind, i in task.targets if kind == "ticket")
    s.call("set_priority", {"ticket_id": tid, "priority": "low"})
    refused = [e for e in s.events if not e.ok]
    if refused:  # a low priority below the customer's floor: reported under the new code, recorded under the old
        assert refused[-1].presented is not None and refused[-1].presented.error["code"] == "forbidden"
        assert refused[-1].error["code"] == "policy_refused"


def _moved(w: World) -> None:
    assert w.parameters["approval_threshold_cents"] == 15_000
    assert "$150.00" in w.policy and "$200.00" not in w.policy
    assert "150.00" in w.rules["refund_approval"].description
    shown = json.dumps([t.openai_schema() for t in w.tools])
    assert "$200.00" not in shown and "$150.00" in shown  # the figure as every description states it


def _policy(w: World) -> None:
    assert w.policy.rstrip().endswith("Refunds are processed within 3 business days.")


def _distractors(w: World) -> None:
    extra = [t for t in w.tools if t.name not in HelpdeskWorld().tools_by_name]
    assert len(extra) == 5 and all(t.kind == "read" for t in extra)
    assert w.tools[-1].kind == "terminal"


def _paraphrased(w: World) -> None:
    base = HelpdeskWorld()
    assert any(t.description != base.tools_by_name[t.name].description for t in w.tools)
    assert [t.name for t in w.tools] == [t.name for t in base.tools]


KINDS: dict[str, tuple[list[Change], Callable[[World], None]]] = {
    "rename_tool": ([RenameTool("issue_refund", "create_refund")], _renamed),
    "remove_tool": ([RemoveTool("list_teams")], _removed),
    "add_argument": (
        [
            AddArgument(
                "escalate_ticket", "severity", required=True, enum=("sev1", "sev2"), gold="sev2", description="x"
            )
        ],
        _argument_added,
    ),
    "rename_argument": ([RenameArgument("update_customer", "email", "email_address")], _argument_renamed),
    "retype_argument": ([RetypeArgument("request_approval", "amount", "cents")], _retyped),
    "enum_values": (
        [
            AddEnumValue("issue_refund", "reason", "incorrect_item", means="wrong_item"),
            RemoveEnumValue("issue_refund", "reason", "wrong_item", use_instead="incorrect_item"),
        ],
        _enum_replaced,
    ),
    "error_code": ([ChangeErrorCode("policy_refused", "forbidden")], _error_code),
    "move_parameter": ([MoveParameter("approval_threshold_cents", 15_000, policy=(("$200.00", "$150.00"),))], _moved),
    "revise_policy": ([RevisePolicy(new="Refunds are processed within 3 business days.")], _policy),
    "distractors": ([AddDistractorTools(5, seed=3)], _distractors),
    "paraphrase": ([ParaphraseTools(seed=1)], _paraphrased),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_of_drift_derives_a_conforming_world(kind: str) -> None:
    changes, check = KINDS[kind]
    world = _derived(changes, sorted(KINDS).index(kind))
    base = HelpdeskWorld()
    assert world.content_hash != base.content_hash
    moved = [p for p, h in world.score_parts().items() if h != base.score_parts()[p]]
    assert moved and set(moved) <= {"tools", "tool_schemas", "rules", "policy", "world"}
    check_world(world, seeds=1)  # gold passes with score 1; no-op, refusal and claim-success score 0
    check(world)


def test_customer_drift_on_a_seated_world_shifts_every_simulated_customer() -> None:
    world = _derived([ShiftCustomer(patience_factor=0.5, honesty="evasive")], 90, base=HelpdeskTeamWorld)
    base = HelpdeskTeamWorld()
    assert world.content_hash != base.content_hash
    assert world.score_parts()["simulator"] != base.score_parts()["simulator"]
    family = world.families[0].name
    shifted, original = world.task(family, 0).hidden["customer"], base.task(family, 0).hidden["customer"]
    assert shifted["honesty"] == "evasive"
    assert shifted["patience"] == max(1, round(original.get("patience", 12) * 0.5))
    with pytest.raises(WorldError, match="seats"):
        derive(HelpdeskTeamWorld, version=91, changes=[RenameTool("issue_refund", "x_refund")], name="team_bad")()


def test_helpdesk_v1_is_an_ordinary_registered_world() -> None:
    v0, v1 = default.get("helpdesk"), default.get("helpdesk_v1")
    assert v1.id == "mirrorworld/Helpdesk-v1" and default.spec("mirrorworld/Helpdesk-v1").name == "helpdesk_v1"
    assert v1.content_hash != v0.content_hash
    check_world(v1, seeds=2)
    assert pickle.loads(pickle.dumps(v1)).content_hash == v1.content_hash
    # the same seed is the same ticket and customer in both versions (the gold follows the API)
    a, b = v0.task("update_email", 3), v1.task("update_email", 3)
    assert a.instruction == b.instruction and a.setup == b.setup and a.gold != b.gold
    assert v0.image.digest == v1.image.digest


def test_the_hash_of_a_drifted_world_is_the_same_in_another_process() -> None:
    code = "from mirrorworld.core.registry import default; print(default.get('helpdesk_v1').content_hash)"
    env = {**os.environ, "PYTHONHASHSEED": "987"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == default.get("helpdesk_v1").content_hash


def test_a_drifted_call_is_recorded_as_made_and_as_run() -> None:
    v1 = default.get("helpdesk_v1")
    task = v1.task("refund_damaged", 1)
    record = run_episode(ChatEnv(v1), make_agent("oracle"), task)
    assert record.passed
    refund = next(c for c in record.calls if c["tool"] == "create_refund")
    assert refund["ran"]["tool"] == "issue_refund"
    s = v1.session(task)
    result = s.call("create_refund", {"order_id": 1, "line_id": 10**6, "amount": 1, "reason": "damaged"})
    assert not result.ok and "issue_refund" not in json.dumps(result.error)


def test_renamed_names_are_rewritten_in_refusals() -> None:
    world = _derived([RenameArgument("issue_refund", "approval_id", "approval_ref")], 70)
    task = world.task("refund_with_approval", 0)
    refund = next(c for c in task.gold if c.tool == "issue_refund")
    s = world.session(task)
    args = {k: v for k, v in refund.args.items() if k != "approval_ref"}
    err = s.call("issue_refund", args).error
    assert err["code"] == "policy_refused" and "approval_ref" in err["message"] and "approval_id" not in err["message"]


def test_bad_declarations_are_refused_with_the_change_named() -> None:
    with pytest.raises(WorldError, match="no tool named nope"):
        _derived([RenameTool("nope", "other")], 71)
    with pytest.raises(WorldError, match="cannot be removed"):
        _derived([RemoveTool("respond")], 72)
    with pytest.raises(WorldError, match="policy has no text"):
        _derived([RevisePolicy(old="no such sentence", new="x")], 73).policy  # noqa: B018
    with pytest.raises(WorldError, match="no parameter"):
        _derived([MoveParameter("refund_window", 3)], 74)
    with pytest.raises(WorldError, match="needs the value the gold sends"):
        AddArgument("respond", "tone", required=True, description="d")
    world = _derived([RemoveTool("issue_refund")], 75)
    with pytest.raises(MirrorworldError, match="removes"):
        world.task("refund_damaged", 0)


def test_drift_report_names_an_injected_change_first() -> None:
    old = HelpdeskWorld()
    new = derive(
        HelpdeskWorld,
        version=80,
        name="drift_injected",
        title="HelpdeskInjected",
        changes=[
            ParaphraseTools(seed=2),
            ChangeErrorCode("not_found", "missing"),
            RenameTool("set_priority", "update_priority"),  # the regression, on purpose
            RevisePolicy(new="Be kind."),
        ],
    )()
    report = drift_report(old, new, lambda w: StaleOracle(old), per_family=2)
    overall = next(d for d in report.families if d.family == "all")
    assert overall.passed_a == overall.n_a and overall.passed_b < overall.n_b
    assert report.ablation[0].changes == ("tool set_priority renamed to update_priority",)
    assert report.ablation[0].overall.delta < 0
    assert all(r.overall.delta == 0 for r in report.ablation[1:])
    triage = next(d for d in report.families if d.family == "triage")
    assert triage.passed_b == 0


def test_ablation_applies_dependent_changes_under_the_old_names() -> None:
    from mirrorworld.worlds.helpdesk_v1 import CHANGES

    groups = ablation_worlds(HelpdeskWorld, CHANGES)
    covered = sorted(i for g, _ in groups for i in g)
    assert covered == list(range(len(CHANGES)))
    for group, cls in groups:
        world = cls()
        assert world.tool_names  # builds: every change is stated in the names the old version has
        if group == [1, 2]:
            enum = world.tools_by_name["issue_refund"].parameters_schema["properties"]["reason"]["enum"]
            assert "incorrect_item" in enum and "wrong_item" not in enum


def test_drift_command_writes_a_report_and_a_plot(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    from pathlib import Path

    from mirrorworld.cli import main

    plot = Path(str(tmp_path)) / "drift.svg"
    args = ["drift", "--world", "helpdesk", "--from", "v0", "--to", "v1", "--episodes", "4", "--family", "triage"]
    assert main([*args, "--plot", str(plot), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "tier_floor" in out.split("ablation")[1].splitlines()[1]
    assert plot.read_text().startswith("<svg")
    assert main([*args, "--no-ablation", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["families"][0]["family"] == "triage" and data["ablation"] == []
    assert main(["drift", "--world", "helpdesk", "--to", "v7"]) != 0
    assert "no registered world is mirrorworld/Helpdesk-v7" in capsys.readouterr().err


# -- faults -------------------------------------------------------------------------------


def _fault_run(agent: str, faults: Faults, n: int = 90) -> list[tuple[str, bool, bool]]:
    world = default.get("helpdesk")
    env = ChatEnv(world, faults=faults)
    out = []
    for i in range(n):
        task = world.task_for("test", i)
        record = run_episode(env, make_agent(agent), task, index=i)
        wrote_failed = any(not c["ok"] and c["error"].get("retryable") and c["kind"] == "write" for c in record.calls)
        out.append((task.id, record.passed, wrote_failed))
    return out


def test_faults_at_ten_percent_an_oracle_that_retries_passes_and_one_that_does_not_fails_its_faulted_writes() -> None:
    faults = Faults(rate=0.1, seed=7)
    retrying = _fault_run("oracle_retry", faults)
    assert all(passed for _, passed, _ in retrying)
    assert sum(w for _, _, w in retrying) >= 5  # the faults did hit writes
    plain = _fault_run("oracle", faults)
    assert [passed for _, passed, _ in plain] == [not w for _, _, w in plain]


def test_faults_are_the_same_in_another_process() -> None:
    code = (
        "import json, sys; sys.path.insert(0, 'tests'); from test_drift import _fault_run; "
        "from mirrorworld.episodes import Faults; print(json.dumps(_fault_run('oracle', Faults(rate=0.2, seed=3), 30)))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "4242"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    here = [list(r) for r in _fault_run("oracle", Faults(rate=0.2, seed=3), 30)]
    assert json.loads(out.stdout) == here


def test_a_faulted_call_changes_nothing_and_latency_moves_the_clock() -> None:
    world = default.get("helpdesk")
    task = world.task("update_email", 0)
    call = next(c for c in task.gold if c.tool == "verify_identity")
    ep = Episode(world, task, EpisodeOptions(faults=Faults(rate=0.999, seed=1, kinds=("unavailable",))))
    before = ep.session.state_hash()
    outcome = ep.step(call.tool, call.args)
    assert not outcome.result.ok and outcome.result.error["code"] == "unavailable"
    assert outcome.result.error["retryable"] is True
    assert ep.session.state_hash() == before and ep.session.steps == 1
    slow = Episode(world, task, EpisodeOptions(faults=Faults(latency_s=90)))
    clock = slow.session.clock
    assert slow.step("get_policy", {}).result.ok
    assert slow.session.clock == clock.replace("09:00:00", "09:01:30")


def test_a_lost_response_retried_blindly_is_a_duplicate_write_the_agent_answers_for() -> None:
    faults = Faults(rate=0.5, seed=5, kinds=("lost_response",), writes_only=True)
    plain = _fault_run("oracle", faults, 30)
    assert all(passed for _, passed, _ in plain)  # the writes happened; only their answers were lost
    world = default.get("helpdesk")
    env = ChatEnv(world, faults=faults)
    repeated = 0
    for i in range(30):
        record = run_episode(env, make_agent("oracle_retry"), world.task_for("test", i), index=i)
        repeated += record.verdict["breakdown"]["guards"]["repeated_calls"] if record.verdict else 0
    assert repeated > 0  # each blind retry of a write that did happen is graded as a repeated write


def test_faults_reach_every_adapter_and_bad_options_are_refused() -> None:
    from mirrorworld.envs.gymnasium import MirrorEnv

    env = MirrorEnv("helpdesk", faults="rate=0.99,seed=2,kinds=timeout")
    env.reset(seed=0)
    world = env.world
    action = {"tool_name": world.tool_index("get_policy"), "tool_args": "{}"}
    _obs, _r, _term, _trunc, info = env.step(action)
    assert info["error"]["code"] == "timeout"
    for bad in ("rate=2", "rate=0.1,kinds=meteor", "speed=3", "rate"):
        with pytest.raises(MirrorworldError):
            Faults.parse(bad)
    task = world.task("triage", 0)
    graded = verify_with_faults(world, task)
    assert graded


def verify_with_faults(world: World, task: object) -> bool:
    ep = Episode(world, task, EpisodeOptions(faults=Faults(rate=0.3, seed=9)))  # type: ignore[arg-type]
    for call in task.gold:  # type: ignore[attr-defined]
        while True:
            outcome = ep.step(call.tool, call.args)
            if outcome.result.ok or not outcome.result.error.get("retryable"):
                break
    return bool(verify(ep.session).passed)


def test_a_presented_value_the_base_tool_refuses_is_an_error_in_the_presented_names() -> None:
    v1 = default.get("helpdesk_v1")
    task = v1.task("refund_with_approval", 0)
    call = next(c for c in task.gold if c.tool == "request_approval")
    s = v1.session(task)
    before = s.state_hash()
    err = s.call("request_approval", {**call.args, "amount": 10**15}).error
    assert err["code"] == "invalid_arguments" and "request_approval" in err["message"]
    err = s.call("create_refund", {"order_id": 1, "line_id": 1, "amount": "1e400", "reason": "damaged"}).error
    assert err["code"] == "invalid_arguments" and "issue_refund" not in err["message"]
    assert s.state_hash() == before


def test_run_takes_faults_and_records_them(tmp_path: object) -> None:
    from pathlib import Path

    from mirrorworld.cli import main
    from mirrorworld.run import RunFile

    out = Path(str(tmp_path)) / "f.sqlite"
    argv = ["run", "--world", "helpdesk", "--agent", "oracle_retry", "--episodes", "18", "--no-progress"]
    assert main([*argv, "--faults", "rate=0.1,seed=7", "--out", str(out)]) == 0
    with RunFile.open(out) as run:
        assert run.meta["faults"]["rate"] == 0.1
        records = list(run.episodes())
    assert all(r.passed for r in records)
    assert any(not c["ok"] and c["error"].get("retryable") for r in records for c in r.calls)
    assert main([*argv, "--faults", "rate=2"]) != 0


def test_bench_drift_reports_every_figure_as_a_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    from mirrorworld.cli import main

    assert main(["bench", "--drift", "--quick", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    names = [f["name"] for f in report["figures"]]
    assert len(names) == 4 and all(f["ratio"] and f["ratio"] > 0 for f in report["figures"])


def test_an_action_described_in_the_presented_tools_words_is_backed() -> None:
    v1 = default.get("helpdesk_v1")
    task = v1.task("refund_damaged", 2)
    with v1.session(task) as s:
        for call in task.gold[:-1]:
            assert s.call(call.tool, call.args).ok
        message = task.gold[-1].args["message"] + " I have created the refund in our system."
        assert s.call("respond", {"message": message}).ok
        assert verify(s).passed  # create_refund was called: "created" is backed
    with v1.session(task) as s:
        message = task.gold[-1].args["message"] + " I have created the refund in our system."
        assert s.call("respond", {"message": message}).ok
        assert not verify(s).passed  # nothing was created
