"""Multi-agent runs: the gold team passes every family, null teams score 0,
rewards are per role (team reward plus each role's own term), the team episode
holds every role to its seat, and ``mirrorworld run --multi-agent`` runs,
records and summarises a team."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from mirrorworld import make_world
from mirrorworld.errors import MirrorworldError, RegistryError
from mirrorworld.run import RunFile
from mirrorworld.run.multiagent import (
    GOLD_TEAM,
    add_arguments,
    main,
    make_policies,
    run_multi_agent,
    run_team_episode,
    run_team_episodes,
    summarize_team,
)
from mirrorworld.sim import RoleContext, TeamEpisode

WORLD = make_world("helpdesk_team")
FAMILIES = [f.name for f in WORLD.families]


def test_the_gold_team_passes_every_family() -> None:
    records = run_team_episodes(WORLD, make_policies(WORLD, GOLD_TEAM), episodes=40, split="test")
    assert {r.family for r in records} == set(FAMILIES)
    failed = [(r.task_id, r.verdict["evidence"]) for r in records if not r.passed]
    assert failed == []
    for r in records:
        assert r.returns == pytest.approx(dict.fromkeys(WORLD.task_roles(WORLD.task(r.family, r.seed)), 1.0))
        assert r.role_terms == dict.fromkeys(r.returns, 0.0)
        assert not r.customer_left and not r.truncated
    summary = summarize_team(records)
    assert summary["pass_rate"] == 1.0
    assert summary["roles"] == {"customer": 1.0, "tier1": 1.0, "supervisor": 1.0, "tier2": 1.0}
    assert summary["families"]["team_escalation"]["roles"]["tier2"] == 1.0
    assert "tier2" not in summary["families"]["team_wrong_order"]["roles"]


def test_the_gold_team_passes_on_the_train_split_too() -> None:
    records = run_team_episodes(WORLD, make_policies(WORLD, GOLD_TEAM), episodes=24, split="train")
    assert all(r.passed for r in records), [r.task_id for r in records if not r.passed]


@pytest.mark.parametrize(
    "names",
    [
        {"customer": "idle", "tier1": "idle", "supervisor": "idle", "tier2": "idle"},
        {"tier1": "idle", "supervisor": "idle", "tier2": "idle"},
        {"tier1": "refuse", "tier2": "refuse"},
        {"tier1": "claim", "tier2": "idle"},
    ],
    ids=["all-idle", "idle-staff", "refuse", "claim"],
)
def test_null_teams_score_zero(names: dict[str, str]) -> None:
    records = run_team_episodes(WORLD, make_policies(WORLD, names), episodes=8, split="test", max_cycles=25)
    assert [r.score for r in records] == [0.0] * 8
    assert all(v == 0.0 for r in records for v in r.returns.values())


def test_a_supervisor_who_approves_a_policy_breaking_refund_is_penalised() -> None:
    task = WORLD.task("team_refund_approval", 4)
    stamp = run_team_episode(WORLD, task, make_policies(WORLD, {"tier1": "overreaching", "supervisor": "rubber-stamp"}))
    assert not stamp.passed
    assert stamp.role_terms == {"customer": 0.0, "tier1": 0.0, "supervisor": -1.0}
    assert stamp.returns == {"customer": 0.0, "tier1": 0.0, "supervisor": -1.0}
    assert stamp.violations == {"supervisor": [stamp.violations["supervisor"][0]]}
    assert "approval_policy" in stamp.violations["supervisor"][0]
    careful = run_team_episode(WORLD, task, make_policies(WORLD, {"tier1": "overreaching", "supervisor": "diligent"}))
    assert careful.role_terms["supervisor"] == 0.0 and careful.returns["supervisor"] == 0.0
    harsh = run_team_episode(
        WORLD, task, make_policies(WORLD, {"tier1": "overreaching", "supervisor": "rubber-stamp"}), penalty=2.5
    )
    assert harsh.returns["supervisor"] == -2.5
    # A rubber stamp on a request the policy allows costs nothing.
    fine = run_team_episode(WORLD, task, make_policies(WORLD, {"supervisor": "rubber-stamp"}))
    assert fine.passed and fine.returns["supervisor"] == 1.0


def test_shaped_and_sparse_returns_agree() -> None:
    task = WORLD.task("team_verify_identity", 6)
    ep = TeamEpisode(WORLD, task, reward="shaped")
    policies = make_policies(WORLD, GOLD_TEAM)
    for role in ep.roles:
        policies[role].reset(RoleContext(WORLD, task, role, task.seed))
    intermediate = []
    while not ep.over:
        for role in ep.roles:
            if ep.over:
                break
            action = policies[role].act(ep.observe(role))
            ep.act(role, None if action is None else action.tool, None if action is None else action.args)
            intermediate.append(ep.pop_rewards())
        ep.end_cycle()
    intermediate.append(ep.pop_rewards())
    assert any(r["tier1"] > 0 for r in intermediate[:-2])  # shaping pays as progress is made, before the end
    assert sum(r["tier1"] for r in intermediate) == pytest.approx(1.0)
    sparse = run_team_episode(WORLD, task, make_policies(WORLD, GOLD_TEAM), reward="sparse")
    assert sparse.returns == pytest.approx(ep.returns)
    ep.close()


def test_the_episode_holds_every_role_to_its_seat() -> None:
    task = WORLD.task("team_refund_approval", 0)
    ep = TeamEpisode(WORLD, task)
    events = len(ep.session.events)
    result = ep.act("tier1", "decide_approval", {"request_id": 1, "order_id": 1, "decision": "approve", "note": "x"})
    assert result is not None and not result.ok and result.error is not None
    assert result.error["code"] == "not_permitted"
    assert len(ep.session.events) == events  # never reached the session
    assert ep.turns[-1].role == "tier1" and ep.turns[-1].step is None
    assert ep.act("customer", "wait") is None and ep.turns[-1].tool is None
    with pytest.raises(MirrorworldError, match="not a party"):
        ep.act("tier2", "respond", {"message": "hi"})
    assert ep.act("tier1", "respond", {"message": "Bye."}) is not None
    assert ep.over and ep.verdict is not None and not ep.verdict.passed
    events = len(ep.session.events)
    after = ep.act("tier1", "respond", {"message": "again"})
    assert after is not None and not after.ok and after.error is not None
    assert after.error["code"] == "episode_over"
    assert len(ep.session.events) == events  # nothing happens after the end
    ep.close()


def test_unknown_policy_names_are_refused() -> None:
    with pytest.raises(RegistryError, match="no tier1 policy named 'genius'"):
        make_policies(WORLD, {"tier1": "genius"})
    with pytest.raises(RegistryError, match="customer-base-url"):
        make_policies(WORLD, {"customer": "llm"})


# -- the command line ---------------------------------------------------------------------------


def test_run_multi_agent_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "team.sqlite"
    assert main(["--episodes", "8", "--json", "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["pass_rate"] == 1.0 and summary["episodes"] == 8
    assert summary["roles"] == {"customer": 1.0, "tier1": 1.0, "supervisor": 1.0, "tier2": 1.0}
    assert summary["policies"] == GOLD_TEAM
    with RunFile.open(out) as run:
        episodes = list(run.episodes())
        assert run.meta["summary"]["roles"] == summary["roles"]
    assert len(episodes) == 8 and all(e.passed for e in episodes)
    assert episodes[0].verdict["team"]["returns"]["tier1"] == 1.0
    assert {m["role"] for e in episodes for m in e.messages} >= {"customer", "tier1", "supervisor", "tier2"}

    from mirrorworld.cli import main as cli

    assert cli(["show", str(out), "0"]) == 0
    assert "tier1:" in capsys.readouterr().out


def test_the_table_summary_shows_per_role_rewards(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "team.sqlite"
    argv = ["--episodes", "4", "--families", "team_refund_approval", "--tier1", "overreaching"]
    assert main([*argv, "--supervisor", "rubber-stamp", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "supervisor" in text and "-1.000" in text and "penalised roles: supervisor 4" in text


def test_add_arguments_extends_the_run_parser(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The run command's parser (world, episodes, split, ...) plus ``add_arguments``: what the CLI wires up."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--world", default="helpdesk")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--split", choices=("train", "test"), default="test")
    parser.add_argument("--families", default=None)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--max-steps", type=int, default=30)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--out", default=None)
    parser.add_argument("--json", action="store_true")
    add_arguments(parser)
    args = parser.parse_args(
        ["--multi-agent", "--episodes", "2", "--tier1", "refuse", "--json", "--out", str(tmp_path / "r.sqlite")]
    )
    assert args.multi_agent and args.tier1 == "refuse" and args.max_cycles == 40
    assert run_multi_agent(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["pass_rate"] == 0.0 and summary["roles"]["tier1"] == 0.0
    with pytest.raises(MirrorworldError, match="helpdesk_team"):
        run_multi_agent(parser.parse_args(["--world", "crm", "--multi-agent"]))
