"""Verifiers fitted from labels (:mod:`mirrorworld.review.fitting`), on fixed seeds.

Episodes are the gold solutions of ``refund_damaged`` tasks, perturbed: the
refund short by a number of cents, an internal note of a number of words, a
guarantee added to the final message. Labels come from a known verifier (a
"truth"), so what fitting should find is known:

* bar (i) — labels of a verifier with a tolerance of 5 cents; fitting from the
  hand-written verifier (exact) recovers 5 and agrees with every held-out label;
* bar (ii) — a hand-written verifier with a planted blind spot (25 cents
  accepted) against humans who fail anything over a cent: the fitted verifier
  agrees with the held-out labels by a clear margin more;
* text rules and the judge — the words of internal notes, a forbidden promise
  humans do not mind, and a judge threshold, fitted together;
* the fitted version accepted, written, loaded back and wrapped as a world
  with a content hash of its own; a version that regresses a case is refused.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from mirrorworld.agents.base import assistant, tool_call
from mirrorworld.core.claims import CustomerText
from mirrorworld.core.registry import default
from mirrorworld.core.task import Task
from mirrorworld.core.world import World
from mirrorworld.errors import MirrorworldError, VerifierError
from mirrorworld.review.fitting import (
    FitSpace,
    Label,
    OverrideVerifier,
    ThresholdJudge,
    VerifierParams,
    accept_fit,
    fit,
    load_override,
    override_world,
    regrade,
    split_labels,
)
from mirrorworld.review.regressions import RegressionCase, case_id, replayed, write_cases
from mirrorworld.verify import Verifier

REFUND = ("refunds.amount_cents", "order_lines.refunded_cents")
SPACE = FitSpace(numeric=(REFUND,))
DELTAS = (0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 20, 25, 30, 40)
NOTE = ("refund", "issued", "damaged", "item", "customer", "verified", "photos", "reviewed")


def tolerance(cents: float) -> VerifierParams:
    return VerifierParams(numeric=dict.fromkeys(REFUND, cents))


@pytest.fixture(scope="module")
def world() -> World:
    return default.get("helpdesk")


def messages(task: Task, *, short: int = 0, note: int = 0, guarantee: bool = False) -> list[dict[str, Any]]:
    """The gold solution as assistant messages: the refund ``short`` cents short, an internal note of ``note``
    words before the final message, a guarantee after it."""
    out = []
    for i, call in enumerate(task.gold):
        args = dict(call.args) if isinstance(call.args, dict) else {}
        if call.tool == "issue_refund":
            args["amount"] = round(args["amount"] - short / 100, 2)
        if call.tool == "respond":
            if note:
                ticket = next(ident for kind, ident in task.scope if kind == "ticket")
                body = " ".join(NOTE[:note])
                out.append(
                    assistant(
                        None, [tool_call("note", "reply_ticket", {"ticket_id": ticket, "body": body, "public": False})]
                    )
                )
            if guarantee:
                args["message"] += " We guarantee it."
        out.append(assistant(None, [tool_call(f"call_{i}", call.tool, args)]))
    return out


def labelled(world: World, episodes: Sequence[tuple[Task, list[dict[str, Any]]]], truth: Verifier) -> list[Label]:
    """Each episode labelled by ``truth`` (its rubric: truth's state and collateral gates)."""
    out = []
    for n, (task, msgs) in enumerate(episodes):
        with replayed(world, task, msgs) as ep:
            v = truth(ep.session)
        rubric = {f"gate:{g}": v.gates[g].passed for g in ("state", "collateral")}
        out.append(Label(f"{n:04d}", {"task": task.to_dict(), "messages": msgs}, v.passed, rubric))
    return out


@pytest.fixture(scope="module")
def refunds(world: World) -> list[tuple[Task, list[dict[str, Any]]]]:
    """160 refund_damaged episodes, each refund short by one of :data:`DELTAS` cents (seeded)."""
    rng = random.Random(20240611)
    out = []
    for seed in range(160):
        task = world.task("refund_damaged", seed)
        out.append((task, messages(task, short=rng.choice(DELTAS))))
    return out


def test_fitting_reproduces_a_known_verifier(world: World, refunds: list[Any]) -> None:
    """Bar (i): labels of a 5-cent tolerance; fitted from the exact verifier, the tolerance is recovered."""
    labels = labelled(world, refunds, OverrideVerifier(tolerance(5)))
    assert 30 < sum(lab.passed for lab in labels) < 130
    fitted = fit(world, [Label(lab.id, lab.record, lab.passed) for lab in labels], SPACE)
    assert dict(fitted.params.numeric) == dict.fromkeys(REFUND, 5.0)
    assert [str(c) for c in fitted.changes] == [
        "numeric order_lines.refunded_cents: 0 -> 5",
        "numeric refunds.amount_cents: 0 -> 5",
    ]
    test = fitted.agreement["test"]
    assert fitted.n_test == 48 and fitted.skipped == 0 and fitted.profile_mismatches == 0
    assert test["fitted"]["agreement"] == 1.0 and test["fitted"]["kappa"] == 1.0
    assert test["hand"]["agreement"] < 0.85
    print("bar (i):", *fitted.describe(), sep="\n  ")

    # With the overall verdicts scrambled, the rubric's gate answers still carry the tolerance.
    rng = random.Random(3)
    noisy = [Label(lab.id, lab.record, rng.random() < 0.5, lab.rubric) for lab in labels]
    assert fit(world, noisy, SPACE).params == fitted.params


def test_fitting_closes_a_planted_blind_spot(world: World, refunds: list[Any]) -> None:
    """Bar (ii): the hand-written verifier accepts refunds 25 cents short; humans fail anything over a cent."""
    hand = tolerance(25)
    labels = labelled(world, refunds, OverrideVerifier(tolerance(1)))
    fitted = fit(world, [Label(lab.id, lab.record, lab.passed) for lab in labels], SPACE, start=hand)
    assert dict(fitted.params.numeric) == dict.fromkeys(REFUND, 1.0)
    test = fitted.agreement["test"]
    assert test["fitted"]["agreement"] == 1.0
    assert test["fitted"]["agreement"] - test["hand"]["agreement"] >= 0.2
    assert test["fitted"]["kappa"] - test["hand"]["kappa"] >= 0.4
    assert fitted.profile_mismatches == 0
    print("bar (ii):", *fitted.describe(), sep="\n  ")


def scorer(task: Task, texts: Sequence[CustomerText], policy: str) -> Mapping[str, float]:
    """A stand-in for a model: a score in [0, 1) drawn from the final message's hash."""
    final = next((t.text for t in texts if t.channel == "final"), "")
    return {"quality": int(hashlib.sha256(final.encode()).hexdigest()[:8], 16) / 2**32}


def test_text_rules_and_the_judge_are_fitted(world: World) -> None:
    """Humans want internal notes of five words (the verifier asks three), do not mind a guarantee,
    and fail what a judge scores under 0.6."""
    rng = random.Random(11)
    episodes = []
    for seed in range(200, 320):
        task = world.task("refund_damaged", seed)
        episodes.append((task, messages(task, note=rng.choice((0, 1, 2, 3, 4, 5, 6, 7)), guarantee=rng.random() < 0.3)))
    truth = OverrideVerifier(
        VerifierParams(words={"ticket_messages.body": 5}, promises_off=("a guarantee",), judge_threshold=0.6),
        scorer=scorer,
    )
    labels = labelled(world, episodes, truth)
    space = FitSpace(words=("ticket_messages.body",), promises=("a guarantee",), judge=True)
    fitted = fit(world, labels, space, scorer=scorer)
    p = fitted.params
    assert p.words == {"ticket_messages.body": 5} and p.promises_off == ("a guarantee",)
    assert p.judge_threshold is not None and 0.5 < p.judge_threshold <= 0.6
    changed = {c.parameter: (c.old, c.new) for c in fitted.changes}
    assert changed["words ticket_messages.body"] == (3, 5) and changed["promise a guarantee"] == ("on", "off")
    assert fitted.agreement["test"]["fitted"]["agreement"] >= 0.97
    assert fitted.agreement["test"]["hand"]["agreement"] < 0.7
    assert fitted.profile_mismatches == 0
    print("text rules and judge:", *fitted.describe(), sep="\n  ")

    # The version's judge runs wherever a stock judge does.
    judge = ThresholdJudge(scorer, p.judge_threshold, p.judge_weights)
    task, msgs = episodes[0]
    with replayed(world, task, msgs) as ep:
        from mirrorworld.verify.claims import texts_to_grade

        lines = judge(task, texts_to_grade(ep.session), world.policy)
        assert bool(lines) == (scorer(task, texts_to_grade(ep.session), "")["quality"] < p.judge_threshold)
    with pytest.raises(VerifierError, match="needs the judge's scorer"):
        OverrideVerifier(p)
    with pytest.raises(MirrorworldError, match="fitting the judge needs a scorer"):
        fit(world, labels, space)


def test_a_fitted_version_is_accepted_and_loadable(world: World, refunds: list[Any], tmp_path: Path) -> None:
    labels = labelled(world, refunds[:60], OverrideVerifier(tolerance(5)))
    fitted = fit(world, labels, SPACE)
    assert fitted.params == tolerance(5)

    # A case humans failed (three cents short), marked fixed: the fitted version would pass it, so it is refused.
    task, _ = next((t, m) for t, m in refunds if len(t.gold) == 2)
    short = messages(task, short=3)
    case = RegressionCase(
        case_id(task.id, short), "helpdesk", task.to_dict(), short, False, False, "", "3 cents", status="fixed"
    )
    write_cases(tmp_path / "cases" / "strict.jsonl", [case])
    with pytest.raises(MirrorworldError, match="regresses 1 case"):
        accept_fit(fitted, tmp_path / "versions", by="ann", regressions=[tmp_path / "cases"])
    with pytest.raises(MirrorworldError, match="name of the person"):
        accept_fit(fitted, tmp_path / "versions", by=" ")

    path = accept_fit(fitted, tmp_path / "versions", by="ann")
    assert path.name == f"mirrorworld_Helpdesk-v0-{fitted.version}.json"
    doc = json.loads(path.read_text())
    assert doc["version"] == fitted.version == tolerance(5).digest() and doc["accepted_by"] == "ann"
    loaded = load_override(path, world)
    assert loaded.params == fitted.params and loaded.version == fitted.version

    # The version grades as the fitted verifier does, on a replay of any record.
    record = labels[0].record
    assert regrade(record, world, loaded.verifier()).passed == regrade(record, world, fitted.verifier()).passed
    assert regrade(record, world, OverrideVerifier(VerifierParams())) == regrade(record, world, Verifier())

    # Its world: the same tasks, a content hash of its own (the verifier part), built once, pickled whole.
    versioned = loaded.world_for(world)
    assert versioned is override_world(world, loaded.params)
    assert versioned.content_hash != world.content_hash
    assert {k for k, v in versioned.score_parts().items() if v != world.score_parts()[k]} == {"verifier"}
    assert override_world(world, tolerance(6)).content_hash not in (versioned.content_hash, world.content_hash)
    assert pickle.loads(pickle.dumps(versioned)).content_hash == versioned.content_hash
    assert versioned.task("refund_damaged", 3).digest() == world.task("refund_damaged", 3).digest()

    # Override files are input: a hand-edited one, another format, bad parameters are refused.
    edited = {**doc, "params": {**doc["params"], "numeric": dict.fromkeys(REFUND, 50)}}
    (tmp_path / "edited.json").write_text(json.dumps(edited))
    with pytest.raises(MirrorworldError, match="not the hash of its parameters"):
        load_override(tmp_path / "edited.json")
    (tmp_path / "other.json").write_text('{"format": "something"}')
    with pytest.raises(MirrorworldError, match="is not a mirrorworld-verifier-override/1 file"):
        load_override(tmp_path / "other.json")
    for bad, message in (
        ({"numeric": {"orders": 1}}, "not a 'table.column' name"),
        ({"numeric": {"refunds.amount_cents": -1}}, r"must be in \[0"),
        ({"numeric": {"refunds.amount_cents": float("inf")}}, "finite number"),
        ({"words": {"ticket_messages.body": 0}}, "integer in"),
        ({"sql": 1}, "have no field 'sql'"),
    ):
        with pytest.raises(MirrorworldError, match=message):
            VerifierParams.from_dict(bad)
    with pytest.raises(MirrorworldError, match=r"no compared numeric column orders\.nope"):
        VerifierParams(numeric={"orders.nope": 1}).check(world)
    with pytest.raises(MirrorworldError, match="no forbidden promise"):
        VerifierParams(promises_off=("anything goes",)).check(world)


def test_the_split_is_deterministic_and_disjoint() -> None:
    labels = [Label(str(i), {}, i % 2 == 0) for i in range(50)]
    train, test = split_labels(labels, 0.3, seed=1)
    assert len(test) == 15 and not {lab.id for lab in train} & {lab.id for lab in test}
    assert split_labels(list(reversed(labels)), 0.3, seed=1) == (train, test)
    assert split_labels(labels, 0.3, seed=2) != (train, test)


def test_labels_from_a_review_database(tmp_path: Path) -> None:
    """Adjudicated verdicts win, then the reviewers' majority; ties without adjudication are left out."""
    from mirrorworld.review.fitting import labels_from_store
    from mirrorworld.review.queue import SamplingPlan, build_queue, take_next
    from mirrorworld.review.store import ReviewInput, ReviewStore
    from mirrorworld.review.testing import make_runs

    store = ReviewStore(tmp_path / "review.sqlite")
    for run in make_runs(tmp_path, ("oracle", "claim"), episodes=2):
        store.add_run(run, audit=False)
    build_queue(store, SamplingPlan(overlap=2, overlap_share=1.0, gold_rate=0.0))
    judge = store.add_reviewer("judge", "judge-password", "adjudicator")
    for name, lenient in (("ann", True), ("ben", False)):
        reviewer = store.reviewer(store.add_reviewer(name, f"{name}-password"))
        assert reviewer is not None
        while (item_id := take_next(store, reviewer)) is not None:
            item = store.item(item_id)
            assert item is not None
            passed = lenient or item.agent == "oracle"
            store.submit_review(
                ReviewInput(item_id, reviewer.id, passed, rubric={"gate:state": item.agent == "oracle"})
            )
    claims = [i for i in store.items() if i.agent == "claim"]
    store.adjudicate(claims[0].id, judge, False, "nothing was done")
    labels = {int(lab.id): lab for lab in labels_from_store(store)}
    assert claims[1].id not in labels  # one pass, one fail, no adjudication
    assert labels[claims[0].id].passed is False and labels[claims[0].id].rubric == {"gate:state": False}
    oracle = [lab for i, lab in labels.items() if i != claims[0].id]
    assert len(oracle) == 2 and all(lab.passed and lab.rubric == {"gate:state": True} for lab in oracle)
    assert all(lab.record["task"]["world"] == "helpdesk" and lab.record["messages"] for lab in labels.values())


def test_a_versions_tolerance_applies_in_ordinary_episodes(world: World) -> None:
    """The episode layer grades a version's world with the version's verifier, not the stock one."""
    from mirrorworld.envs.chat import ChatEnv

    task = world.task("refund_damaged", 3)
    refund = next(c for c in task.gold if c.tool == "issue_refund")
    near = [
        c if c is not refund else type(c)(c.tool, {**c.args, "amount": round(c.args["amount"] - 0.03, 2)})
        for c in task.gold
    ]

    def play(w: World) -> bool:
        env = ChatEnv(w, reward="sparse")
        try:
            env.reset(task=w.task("refund_damaged", 3))
            for i, call in enumerate(near):
                fn = {"name": call.tool, "arguments": json.dumps(call.args)}
                env.step({"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}", "function": fn}]})
                if env.done:
                    break
            return bool(env.verdict().passed)
        finally:
            env.close()

    assert not play(world)  # three cents short: the hand-written verifier fails it
    assert play(override_world(world, tolerance(5)))  # within the version's five cents
    assert not play(override_world(world, tolerance(2)))


def test_the_fit_command_reports_and_accepts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``mirrorworld review fit`` on a review database graded by simulated reviewers."""
    from mirrorworld.cli import main
    from mirrorworld.review.queue import SamplingPlan, build_queue
    from mirrorworld.review.simulated import SimulatedReviewer, simulate
    from mirrorworld.review.store import ReviewStore
    from mirrorworld.review.testing import make_runs

    db = tmp_path / "review.sqlite"
    store = ReviewStore(db)
    for run in make_runs(tmp_path, ("oracle", "claim"), episodes=9):
        store.add_run(run, audit=False)
    build_queue(store, SamplingPlan(gold_rate=0.0))
    simulate(store, [SimulatedReviewer(f"sim{i}", seed=i, accuracy=1.0) for i in range(2)])
    group = "refunds.amount_cents,order_lines.refunded_cents"
    assert main(["review", "fit", "--db", str(db), "--numeric", group, "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "18 labels" in out and "test hand: agreement" in out and "test fitted: agreement" in out
    versions = tmp_path / "versions"
    argv = ["review", "fit", "--db", str(db), "--numeric", group, "--accept", str(versions), "--by", "ann", "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["agreement"]["test"]["fitted"]["agreement"] == 1.0 and Path(report["accepted"]).is_file()
    for bad, message in (
        (["--db", str(tmp_path / "none.sqlite"), "--numeric", group], "no review database"),
        (["--db", str(db)], "name what to fit"),
        (["--db", str(db), "--numeric", "orders.nope"], "nope"),
        (["--db", str(db), "--numeric", group, "--accept", str(versions)], "--by"),
    ):
        assert main(["review", "fit", *bad]) == 1
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err
