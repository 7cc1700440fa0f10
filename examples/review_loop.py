"""Human review inside a training loop, over the review API: rollouts out, grades and agreement back.

A stand-in for a training run plays the helpdesk world: each "update" plays a
few episodes with a policy that mixes the oracle (solves the task) and a
random agent (fails it), the oracle's share growing update after update as a
learning agent's success would. Every ``--review-every`` updates the loop
sends the rollouts since the last round to a review server through
:class:`mirrorworld.review.client.ReviewAPI` (``POST /api/v1/episodes``,
``sample.size`` of them queued by the queue's stratified sampling), long-polls
their status (``GET /api/v1/items?wait=``) while reviewers grade them, and
prints the round: how many were queued and resolved, and the humans'
agreement with the verifier so far (``GET /api/v1/agreement``).

The review server is the real review app (``create_app``) served in-process
on a loopback port (:func:`mirrorworld.review.testing.running`) over a
throw-away review database. The reviewers are scripted and work in a thread
over the same API, each with its own token: take an item (shown blind, as the
page shows it), grade it, take the next. They stand in for people who read
the episode and judge it correctly ``--accuracy`` of the time: the truth they
judge by is the verdict the loop recorded for that rollout, and a seeded draw
per reviewer and item decides when they slip. So the agreement printed is the
reviewers' accuracy, measured the way a campaign measures it.

    python examples/review_loop.py                   # 12 updates of 6 episodes, a round every 4
    python examples/review_loop.py --accuracy 0.7    # sloppier reviewers: agreement drops
    python examples/review_loop.py --smoke           # 4 updates of 3 episodes, as CI runs it

Needs the ``review`` extra (the app) and httpx (the client).
"""

from __future__ import annotations

import argparse
import random
import secrets
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mirrorworld.agents import make_agent
from mirrorworld.core.registry import default
from mirrorworld.review.app import create_app
from mirrorworld.review.client import ReviewAPI
from mirrorworld.review.stats import StatsOptions
from mirrorworld.review.store import ReviewStore
from mirrorworld.review.testing import running
from mirrorworld.run import EpisodeRecord, run_episodes


@dataclass(frozen=True)
class Args:
    updates: int = 12
    """Training updates in all."""
    episodes: int = 6
    """Rollouts per update."""
    review_every: int = 4
    """Updates between two review rounds."""
    sample: int = 8
    """Rollouts of a round queued for review."""
    reviewers: int = 3
    accuracy: float = 0.9
    """How often a scripted reviewer judges an episode as it really went."""
    seed: int = 0


SMOKE = Args(updates=4, episodes=3, review_every=2, sample=4, reviewers=2)


def play(update: int, args: Args, first: int) -> list[EpisodeRecord]:
    """One update's rollouts: the oracle with probability ``update / updates``, else the random agent."""
    world = default.get("helpdesk")
    rng = random.Random(f"{args.seed}/policy/{update}")
    out = []
    for k in range(args.episodes):
        skilled = rng.random() < update / args.updates
        agent = make_agent("oracle") if skilled else make_agent("random", seed=args.seed + first + k)
        (record,) = run_episodes(world, agent, episodes=1, split="train", start=first + k, max_steps=8)
        out.append(record)
    return out


def review_round(url: str, tokens: dict[str, str], truth: dict[int, bool], args: Args) -> None:
    """Scripted reviewers taking turns over the API: take the next item, grade it, until the queue has none left."""
    clients = {name: ReviewAPI(url, token) for name, token in tokens.items()}
    try:
        graded = 1
        while graded:
            graded = 0
            for name, api in clients.items():
                item = api.take()
                if item is None:
                    continue
                slip = random.Random(f"{args.seed}/{name}/{item['id']}").random() >= args.accuracy
                passed = truth[item["id"]] != slip
                api.review(item["id"], passed, reason="resolved as asked" if passed else "the task was not done")
                graded += 1
    finally:
        for api in clients.values():
            api.close()


def fmt(estimate: dict[str, Any]) -> str:
    return "n/a" if estimate["value"] is None else f"{estimate['value']:.2f}"


def main(args: Args) -> None:
    world = default.get("helpdesk")
    folder = Path(tempfile.mkdtemp(prefix="review-loop-"))
    store = ReviewStore(folder / "review.sqlite", rng=random.Random(args.seed))
    store.add_reviewer("pipeline", secrets.token_urlsafe(16), "admin")
    _, pipeline = store.create_token("pipeline", label="the training loop")
    tokens = {
        f"sim-{i}": store.create_token(f"sim-{i}", create=True, label="scripted reviewer")[1]
        for i in range(args.reviewers)
    }
    truth: dict[int, bool] = {}
    app = create_app(store, stats_options=StatsOptions(resamples=100, seed=args.seed))
    with running(app) as url, ReviewAPI(url, pipeline) as api:
        pending: list[EpisodeRecord] = []
        played = 0
        for update in range(1, args.updates + 1):
            rollouts = play(update, args, played)
            played += len(rollouts)
            pending += rollouts
            if update % args.review_every:
                continue
            records = [replace(r, index=i) for i, r in enumerate(pending)]
            sent = api.submit(
                f"loop/update-{update}",
                world,
                records,
                sample={"size": args.sample, "overlap": 2, "overlap_share": 0.5, "seed": args.seed},
            )
            for rec, row in zip(records, sent["items"], strict=True):
                truth[row["item"]] = rec.passed
            graders = threading.Thread(target=review_round, args=(url, tokens, truth, args), daemon=True)
            graders.start()
            queued, started = sent["queued"], time.monotonic()
            items: list[dict[str, Any]] = []
            while time.monotonic() - started < 60:  # long-polls: each answer comes when an item is settled
                items = api.status(queued, wait=10)["items"]
                if all(i["status"] in ("reviewed", "adjudicated") for i in items):
                    break
            took = time.monotonic() - started
            graders.join(60)
            resolved = sum(i["resolved"] for i in items)
            report = api.agreement()["verifier_vs_human"]
            print(
                f"round {update // args.review_every} (update {update}): {len(records)} rollouts, "
                f"{sum(r.passed for r in records)} passed; {len(queued)} of them queued "
                f"({sent['newly_queued']} queued in all), {resolved} resolved and {len(items) - resolved} tied "
                f"in {took:.1f} s; agreement with the verifier {fmt(report['agreement'])} "
                f"(kappa {fmt(report['kappa'])}) over {report['n']} items so far"
            )
            pending = []
        labels = list(api.labels_all())
    grades = sum(len(item["reviews"]) for item in labels)
    print(f"{grades} grades of {len(labels)} items by {args.reviewers} scripted reviewers, through the API")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, value in vars(Args()).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    parser.add_argument("--smoke", action="store_true", help="the size CI runs")
    ns = parser.parse_args()
    main(SMOKE if ns.smoke else Args(**{k: v for k, v in vars(ns).items() if k != "smoke"}))
