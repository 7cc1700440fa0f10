"""The human loop end to end, over HTTP, with simulated reviewers.

A training-like loop plays rounds of episodes and sends each round's rollouts
to a review server through the review API; simulated reviewers (seeded, 95%
accurate, their truth the hand-written verifier's verdict) take them blind
and grade them through the same API; after each round the loop reads the
agreement between the verifier and the humans back. Halfway, the verifier is
changed on purpose (a refund 10 cents short is let through): agreement falls,
and the drift report's per-version alarm fires. Before the change, a reviewer
flags a short refund as an edge case and authors a task variant through the
API; an admin accepts it, and the regression case it became passes the
hand-written verifier and fails the changed one.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from mirrorworld import make_world
from mirrorworld.agents.scripted import CallListAgent, OracleAgent, RandomAgent
from mirrorworld.core.task import Task, ToolCall
from mirrorworld.core.world import World
from mirrorworld.review.app import create_app
from mirrorworld.review.client import ReviewAPI
from mirrorworld.review.fitting import OverrideVerifier, VerifierParams, override_world, regrade
from mirrorworld.review.regressions import RegressionCase, check_cases, write_cases
from mirrorworld.review.simulated import Grader, SimulatedReviewer
from mirrorworld.review.stats import StatsOptions
from mirrorworld.review.store import ReviewStore
from mirrorworld.review.testing import running
from mirrorworld.run import run_episodes
from mirrorworld.verify import Verifier
from test_review_edge_cases import variant

LENIENT = VerifierParams(numeric={"refunds.amount_cents": 50, "order_lines.refunded_cents": 50})
"""The verifier changed on purpose: a refund within 50 cents of the owed amount passes."""
REVIEWERS = [SimulatedReviewer(f"sim{i}", seed=i, accuracy=0.95) for i in range(5)]


class ShortRefund(CallListAgent):
    """The gold, with every refund 10 cents short (what the changed verifier lets through)."""

    name = "short_refund"

    def __init__(self) -> None:
        self.retries = 0

    def plan(self, context: Any) -> list[ToolCall]:
        return [
            ToolCall(c.tool, {**c.args, "amount": round(c.args["amount"] - 0.10, 2)}) if c.tool == "issue_refund" else c
            for c in context.task.gold
        ]


def _round(world: World, r: int) -> list[Any]:
    """One round of rollouts: the oracle, a random agent and the short refunder, on fresh tasks."""
    start = 100 * r
    played = [
        *run_episodes(world, OracleAgent(), episodes=6, start=start),
        *run_episodes(world, RandomAgent(seed=r), episodes=4, start=start),
        *run_episodes(world, ShortRefund(), episodes=6, start=start, families=["refund_damaged"]),
    ]
    return [replace(record, index=i) for i, record in enumerate(played)]  # one run: one place each


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[tuple[ReviewStore, str, dict[str, str]]]:
    store = ReviewStore(tmp_path / "review.sqlite")
    tokens = {"pipeline": store.create_token("pipeline", role="admin", create=True)[1]}
    tokens |= {r.name: store.create_token(r.name, role="reviewer", create=True)[1] for r in REVIEWERS}
    # The changed verifier's episodes are of another build: the agreement report pools them, with the warning.
    app = create_app(store, stats_options=StatsOptions(resamples=200, allow_incomparable=True))
    with running(app) as url:
        yield store, url, tokens


def test_the_loop_reads_agreement_back_a_drift_alarm_fires_and_an_edge_case_becomes_a_regression(
    served: tuple[ReviewStore, str, dict[str, str]], tmp_path: Path
) -> None:
    store, url, tokens = served
    base = make_world("helpdesk")
    clients = ExitStack()
    pipeline = clients.enter_context(ReviewAPI(url, tokens["pipeline"]))
    people = {r.name: (clients.enter_context(ReviewAPI(url, tokens[r.name])), Grader(r)) for r in REVIEWERS}
    with clients:
        _loop(store, base, pipeline, people, tmp_path)


def _loop(store: ReviewStore, base: World, pipeline: ReviewAPI, people: dict[str, Any], tmp_path: Path) -> None:
    changed = override_world(base, LENIENT)
    rng = random.Random(0)
    agreement: list[float] = []
    authored: tuple[str, int] | None = None

    for r in range(4):
        world = base if r < 2 else changed
        records = _round(world, r)
        sent = pipeline.submit(f"round-{r}", world, records)
        assert len(sent["items"]) == len(records)
        # Reviewers take items blind until the queue is empty, in a shuffled order of turns.
        busy = True
        while busy:
            busy = False
            for name in rng.sample(sorted(people), len(people)):
                api, grader = people[name]
                item = api.take()
                if item is None:
                    continue
                busy = True
                record = store.record(item["id"])
                truth = regrade(record, base, Verifier()).passed  # what people want: the hand-written bar
                stored = store.item(item["id"])
                assert stored is not None
                grade = grader.grade(stored, truth)
                task = Task.from_dict(record["task"])
                # The edge case: refund_damaged/0 short-refunded (its variant, a line refunded $10 before, is
                # one the changed verifier lets through 1 cent short: the order has other lines to refund).
                short = record["agent"] == "short_refund" and task.id == "refund_damaged/0"
                flags = ["edge_case"] if short and authored is None and r < 2 else []
                api.review(item["id"], grade.passed, rubric=grade.rubric, reason=grade.reason, flags=flags)
                if flags:
                    authored = (name, item["id"])
                    api._call("POST", f"/items/{item['id']}/edge-cases", body={"variant": variant(task)})
        figures = pipeline.agreement()["verifier_vs_human"]
        agreement.append(figures["agreement"]["value"])

    # Agreement read back each round (pooled over every item so far): high while the verifier is the
    # hand-written one, falling with every round graded by the changed one.
    assert min(agreement[:2]) >= 0.85, agreement
    assert agreement[1] > agreement[2] > agreement[3] and agreement[3] < agreement[1] - 0.1, agreement
    # The drift report compares verifier versions (the world's content hash): the change raises the alarm.
    drift = pipeline.drift()
    assert any(a["alarm"] == "version_agreement_drop" for a in drift["alarms"]), drift["alarms"]

    # The edge case authored through the API: an admin accepts it; the regression case it becomes
    # passes the hand-written verifier and fails the changed one.
    assert authored is not None
    (case,) = pipeline._call("GET", "/edge-cases")["edge_cases"]
    assert case["status"] == "proposed" and case["author"] == authored[0]
    with pytest.raises(Exception, match="admin"):
        people[authored[0]][0]._call("POST", f"/edge-cases/{case['id']}/accept", body={})
    accepted = pipeline._call("POST", f"/edge-cases/{case['id']}/accept", body={})
    assert accepted["status"] == "accepted"
    cases = tmp_path / "edge-cases.jsonl"
    write_cases(cases, [RegressionCase.from_dict(accepted["regression"])])
    assert check_cases([cases])["regressed"] == []
    lenient = check_cases([cases], verifier=OverrideVerifier(LENIENT))
    assert lenient["regressed"] == [accepted["regression"]["id"]], lenient["results"]
