"""Edge cases: a flagged item becomes a task variant, an admin accepts it, it is replayed and served as a task.

The variant used throughout: the line of a ``refund_damaged`` task was already
refunded $10.00, so the gold refunds the rest; the recorded behaviour refunds a
cent less than the rest and humans fail it. The hand-written verifier fails it
too (the case is ``fixed``); a verifier made lenient by five cents passes it,
and the replay of the case file says so (``regressed``).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mirrorworld.agents.base import assistant, tool_call
from mirrorworld.core.registry import Registry, default
from mirrorworld.core.task import Task
from mirrorworld.core.world import World
from mirrorworld.errors import MirrorworldError
from mirrorworld.review.edge_cases import (
    EDGE_SEEDS,
    EdgeCaseFamily,
    accept,
    edge_case_world,
    export_cases,
    list_cases,
    propose,
    reject,
)
from mirrorworld.review.fitting import OverrideVerifier, VerifierParams
from mirrorworld.review.queue import SamplingPlan, build_queue, take_next
from mirrorworld.review.regressions import check_cases, load_cases
from mirrorworld.review.store import ReviewInput, ReviewStore
from mirrorworld.review.testing import make_runs
from mirrorworld.verify import Verifier

LENIENT = VerifierParams(numeric={"refunds.amount_cents": 5, "order_lines.refunded_cents": 5})


@dataclass
class Setup:
    store: ReviewStore
    item: int
    ann: int
    ben: int
    root: int
    task: Task


@pytest.fixture(scope="module")
def world() -> World:
    return default.get("helpdesk")


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    """A review database with one oracle episode of refund_damaged/0, graded by ann (who flags it) and ben."""
    (run,) = make_runs(tmp_path, ("oracle",), episodes=1)
    store = ReviewStore(tmp_path / "review.sqlite")
    store.add_run(run, audit=False)
    build_queue(store, SamplingPlan(overlap=2, overlap_share=1.0, gold_rate=0.0))
    ann, ben = store.add_reviewer("ann", "ann-password"), store.add_reviewer("ben", "ben-password")
    root = store.add_reviewer("root", "root-password", "admin")
    item = None
    for rid, flag in ((ann, True), (ben, False)):
        reviewer = store.reviewer(rid)
        assert reviewer is not None
        item = take_next(store, reviewer)
        assert item is not None
        store.submit_review(ReviewInput(item, rid, True, reason="refunded as asked", flag_edge_case=flag))
    assert item is not None
    task = Task.from_dict(store.record(item)["task"])
    assert task.family == "refund_damaged"
    yield Setup(store, item, ann, ben, root, task)


def _refund(task: Task) -> tuple[int, int, int]:
    call = next(c for c in task.gold if c.tool == "issue_refund")
    assert isinstance(call.args, dict)
    return int(call.args["order_id"]), int(call.args["line_id"]), round(float(call.args["amount"]) * 100)


def _money(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02d}"


def variant(task: Task) -> dict[str, Any]:
    """The partly-refunded line; the behaviour refunds the rest less one cent."""
    order, line, price = _refund(task)
    rest = price - 1000
    said = f"I've refunded the remaining ${_money(rest)} on order #{order}."
    behaviour = [
        assistant(
            None,
            [
                tool_call(
                    "c1",
                    "issue_refund",
                    {"order_id": order, "line_id": line, "amount": (rest - 1) / 100, "reason": "damaged"},
                )
            ],
        ),
        assistant(None, [tool_call("c2", "respond", {"message": said})]),
    ]
    return {
        "instruction": task.instruction.replace(
            "I'd like my money back please.",
            f"You already refunded $10.00 of it; I'd like the remaining ${_money(rest)} back please.",
        ),
        "setup": [
            {
                "op": "insert",
                "table": "refunds",
                "values": {
                    "order_id": order,
                    "order_line_id": line,
                    "amount_cents": 1000,
                    "reason": "damaged",
                    "approval_id": None,
                    "override_reason": None,
                    "created_at": "2026-02-20T10:00:00Z",
                },
            },
            {"op": "update", "table": "order_lines", "pk": line, "values": {"refunded_cents": 1000}},
        ],
        "gold": [
            {
                "tool": "issue_refund",
                "args": {"order_id": order, "line_id": line, "amount": rest / 100, "reason": "damaged"},
            },
            {"tool": "respond", "args": {"message": said}},
        ],
        "checks": [
            {
                "name": "line refunded in full",
                "kind": "field",
                "params": {"table": "order_lines", "id": line, "field": "refunded_cents", "equals": price},
            }
        ],
        "facts": [{"label": "refund amount", "value": _money(rest), "kind": "money"}],
        "messages": behaviour,
        "expected_passed": False,
        "reason": "a line already partly refunded: the rest is owed to the cent",
    }


def test_propose_accept_replay_and_seed_space(setup: Setup, world: World, tmp_path: Path) -> None:
    store, task = setup.store, setup.task
    case_id = propose(store, setup.item, setup.ann, variant(task))
    (proposed,) = list_cases(store, "proposed")
    assert proposed.id == case_id and proposed.author == "ann" and proposed.case is None

    with pytest.raises(MirrorworldError, match="only an admin"):
        accept(store, case_id, setup.ann)
    with pytest.raises(MirrorworldError, match="only an admin"):
        accept(store, case_id, setup.ben)
    case = accept(store, case_id, setup.root)
    assert list_cases(store, "proposed") == [] and list_cases(store, "accepted")[0].case == case
    with pytest.raises(MirrorworldError, match="is accepted, not proposed"):
        accept(store, case_id, setup.root)

    # The regression case: the variant task whole, the behaviour, the human verdict; the verifier already agrees.
    assert case.source["kind"] == "edge_case" and case.flags == ["edge case"] and case.status == "fixed"
    assert not case.human_passed and not case.verifier_passed
    assert case.task["seed"] == EDGE_SEEDS[0] and case.task["family"] == task.family
    assert case.task["seed"] % 5 == 0  # test split

    path = tmp_path / "regressions" / "edge_cases.jsonl"
    cases, new = export_cases(store, path)
    assert new == 1 and cases == [case] and load_cases(path) == [case]
    assert export_cases(store, path)[1] == 0

    # Replayed as audit-verifiers and the test suite replay case files: the original verifier passes the case,
    registry = Registry()
    registry.register("helpdesk", lambda **_: world, env_id=world.id)
    summary = check_cases([path.parent], registry, world="helpdesk")
    assert summary["cases"] == 1 and summary["agree"] == 1 and summary["regressed"] == []
    # a verifier made lenient by five cents fails it: the case regresses,
    lenient = check_cases([path], verifier=OverrideVerifier(LENIENT))
    assert lenient["regressed"] == [case.id] and lenient["results"][0]["verifier"] is True
    # and the stock verifier given as one agrees with the default path.
    assert check_cases([path], verifier=Verifier())["regressed"] == []

    # The seed space: the variant at its seed, every other seed as before; the content hash says so.
    grown = edge_case_world(world, [path])
    variant_task = grown.task(task.family, EDGE_SEEDS[0])
    assert variant_task.digest() == Task.from_dict(case.task).digest()
    assert grown.task(task.family, task.seed).digest() == world.task(task.family, task.seed).digest()
    family = grown.family(task.family)
    assert isinstance(family, EdgeCaseFamily) and family.variant_seeds == [EDGE_SEEDS[0]]
    assert grown.content_hash != world.content_hash
    changed = {k for k, v in grown.score_parts().items() if world.score_parts()[k] != v}
    assert changed == {"tasks"}
    again = edge_case_world(world, load_cases(path))
    assert again.content_hash == grown.content_hash
    assert again.task(task.family, EDGE_SEEDS[0]).digest() == variant_task.digest()
    revived = pickle.loads(pickle.dumps(grown))
    assert revived.content_hash == grown.content_hash
    assert revived.task(task.family, EDGE_SEEDS[0]).digest() == variant_task.digest()
    # The variant task is a task like any other: its gold passes on the grown world.
    with grown.session(variant_task) as s:
        for call in variant_task.gold:
            assert s.call(call.tool, call.args).ok
        assert Verifier()(s).passed


def test_reject_and_who_may_propose(setup: Setup) -> None:
    store = setup.store
    with pytest.raises(MirrorworldError, match="has not flagged item"):
        propose(store, setup.item, setup.ben, variant(setup.task))
    case_id = propose(store, setup.item, setup.ann, variant(setup.task))
    with pytest.raises(MirrorworldError, match="only an admin"):
        reject(store, case_id, setup.ann, "not interesting")
    with pytest.raises(MirrorworldError, match="is empty"):
        reject(store, case_id, setup.root, "  ")
    reject(store, case_id, setup.root, "covered by refund_with_approval")
    (rejected,) = list_cases(store, "rejected")
    assert rejected.reason == "covered by refund_with_approval" and rejected.decided_by == setup.root
    with pytest.raises(MirrorworldError, match="is rejected, not proposed"):
        accept(store, case_id, setup.root)
    with pytest.raises(MirrorworldError, match="status is one of"):
        list_cases(store, "maybe")
    assert store.check_consistency() == []
    # An admin may propose without having flagged the item.
    assert propose(store, setup.item, setup.root, variant(setup.task)) > case_id


def _hostile(task: Task) -> list[tuple[str, Any, str]]:
    order, line, price = _refund(task)
    base = variant(task)

    def edit(**changes: Any) -> dict[str, Any]:
        return {**base, **changes}

    op = base["setup"][0]
    return [
        ("not an object", ["setup"], "must be an object"),
        ("unknown field", edit(sql="DROP TABLE orders"), "has no field 'sql'"),
        ("no verdict", {k: v for k, v in base.items() if k != "expected_passed"}, "expected_passed must be"),
        ("nothing changed", {"expected_passed": False, "reason": "same"}, "changes nothing"),
        ("unknown table", edit(setup=[{**op, "table": "sqlite_master"}]), "names no table"),
        (
            "column injection",
            edit(
                setup=[
                    {
                        "op": "update",
                        "table": "order_lines",
                        "pk": line,
                        "values": {"refunded_cents=0; DROP TABLE orders; --": 1},
                    }
                ]
            ),
            "names no column of order_lines",
        ),
        ("missing row", edit(setup=[{**base["setup"][1], "pk": 10**9}]), "which does not exist"),
        ("clash", edit(setup=[{**op, "values": {**op["values"], "id": 1}}]), "cannot be applied"),
        (
            "clock",
            edit(setup=[{"op": "update", "table": "sim_clock", "pk": 1, "values": {"now": "soon"}}]),
            "sim_clock",
        ),
        ("nan", edit(setup=[{**op, "values": {**op["values"], "amount_cents": float("nan")}}]), "not a finite number"),
        ("surrogate", edit(instruction="hi \ud800"), "lone surrogate"),
        ("nul", edit(reason="a\x00b"), "NUL"),
        ("long", edit(instruction="x" * 9000), "longer than 8000"),
        ("huge", edit(messages=[assistant("y" * 7000)] * 12), "larger than 64000 bytes"),
        ("many ops", edit(setup=[base["setup"][1]] * 40), "more than 32 entries"),
        ("unknown tool", edit(gold=[{"tool": "drop_database", "args": {}}]), "names no tool"),
        ("bad check", edit(checks=[{"name": "x", "kind": "sql", "params": {}}]), "must be 'field'"),
        ("check table", edit(checks=[{"name": "x", "kind": "count", "params": {"table": "nope"}}]), "names no table"),
        ("user message", edit(messages=[{"role": "user", "content": "approve everything"}]), "must be 'assistant'"),
        ("fact kind", edit(facts=[{"label": "a", "value": "b", "kind": "secret"}]), "must be one of money"),
        (
            "gold fails",
            edit(gold=[{"tool": "issue_refund", "args": {"order_id": order, "line_id": line, "amount": price}}]),
            "is not a working task",
        ),
        (
            "gold misses",
            edit(checks=[{**base["checks"][0], "params": {**base["checks"][0]["params"], "equals": price + 1}}]),
            "does not pass the variant",
        ),
    ]


def test_hostile_variants_are_refused_with_clear_errors(setup: Setup) -> None:
    for name, data, message in _hostile(setup.task):
        with pytest.raises(MirrorworldError, match=message) as err:
            propose(setup.store, setup.item, setup.ann, data)
        text = str(err.value)
        assert text.startswith("edge case:") and "\n" not in text and len(text) < 400, name
    assert list_cases(setup.store) == []
