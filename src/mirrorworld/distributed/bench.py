"""The scale-out figure: episodes per second with ``workers`` Ray actors against one, in the same run.

:func:`scaling` plays the same planned run (the oracle agent on fresh tasks of
the test split, each graded: task generation, the gold's replay, the
episode's tool calls and the verifier, the work of a real evaluation) three
ways: in this process without Ray (the floor), on a pool of one actor and on
a pool of ``workers`` actors. Pools are warm before the clock starts (each
actor has built its world's image and played one chunk of other tasks), and
chunks are large enough that Ray's per-call cost is amortised, so the ratio
measures how the episode work itself spreads. The figure is the ratio
``rate(workers) / rate(1)``; on a machine with as many cores as workers its
ceiling is ``workers`` (the driver, which receives the records, shares those
cores). Both pools stay up for the whole measurement and take turns, and the
rates are medians over rounds, so a neighbour's load on a shared machine
falls on both sides of the ratio alike.

``mirrorworld bench --ray [ADDRESS] --workers 2`` and
``python -m mirrorworld.distributed`` print it.
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from mirrorworld.agents.scripted import OracleAgent
from mirrorworld.core.world import World
from mirrorworld.distributed.cluster import connected
from mirrorworld.distributed.pool import EpisodePool
from mirrorworld.errors import MirrorworldError
from mirrorworld.run.runner import plan_episodes, play_episodes

__all__ = ["format_scaling", "main", "scaling"]


def scaling(
    world: World,
    episodes: int = 1200,
    workers: int = 2,
    *,
    address: str | None = None,
    chunk_size: int | None = None,
    rounds: int = 3,
) -> dict[str, Any]:
    """Episodes/s locally, on one actor and on ``workers`` actors, and the ratio of the last two.

    ``address`` is a running cluster (None: a local Ray with ``workers`` CPUs).
    Each pool plays ``rounds`` runs of tasks it has not seen, the two pools
    taking turns on the same tasks; the rates are the medians. ``cpu_ceiling``
    is the median, over the rounds, of what a CPU-bound loop reaches on the
    ``workers`` actors against one (:func:`_ceiling`): on a machine whose
    cores are shared with others it says how much of the ideal was there to
    take. Returns ``{"world", "episodes", "workers", "chunk_size", "rounds",
    "local_per_s", "one_worker_per_s", "workers_per_s", "ratio", "cpu_ceiling"}``.
    """
    planned = plan_episodes(world, episodes=episodes, split="test")
    warm = plan_episodes(world, episodes=max(8, workers * 4), split="train")
    agent = OracleAgent()
    fresh: World = pickle.loads(pickle.dumps(world))  # the spec, as a worker receives it
    fresh.image  # noqa: B018 - built before the clock starts, as a warm actor's is
    n_local = max(1, episodes // 4)
    started = time.perf_counter()
    play_episodes(fresh, agent, planned[:n_local])
    local = n_local / (time.perf_counter() - started)
    rates: dict[int, list[float]] = {1: [], workers: []}
    ceilings: list[float] = []
    with connected(address, workers=workers):
        # Both pools live side by side (half a CPU each, so 1 + workers fit on ``workers`` CPUs; an
        # idle actor uses none) and take turns, so a neighbour's load falls on both alike.
        pools = {k: EpisodePool(world, agent, workers=k, num_cpus=0.5) for k in rates}
        try:
            for k, pool in pools.items():
                pool.play(warm, chunk_size=max(1, len(warm) // k))
            for r in range(rounds):
                # Tasks never played before in every round (a pool's caches would flatter a replay),
                # the same ones for both pools.
                fresh_tasks = planned if r == 0 else plan_episodes(world, episodes=episodes, start=r * episodes)
                for k, pool in pools.items():
                    started = time.perf_counter()
                    records = pool.play(fresh_tasks, chunk_size=chunk_size)
                    rates[k].append(len(records) / (time.perf_counter() - started))
                ceilings.append(_ceiling(pools[workers]) if workers > 1 else 1.0)
        finally:
            for pool in pools.values():
                pool.close()
    one, many = statistics.median(rates[1]), statistics.median(rates[workers])
    return {
        "world": world.id,
        "episodes": episodes,
        "workers": workers,
        "chunk_size": chunk_size or "guided",
        "local_per_s": round(local, 1),
        "rounds": rounds,
        "one_worker_per_s": round(one, 1),
        "workers_per_s": round(many, 1),
        "ratio": round(many / one, 3),
        "cpu_ceiling": round(statistics.median(ceilings), 3),
    }


_SPIN = 3_000_000
"""Additions per actor in the ceiling's loop (about a tenth of a second)."""


def _ceiling(pool: EpisodePool) -> float:
    """How many times one actor's pure-Python throughput the pool's actors reach together, now.

    Every actor runs the same CPU-bound loop at once; ``workers`` means each
    had a core to itself, less means the cores are shared (a neighbour's load,
    the driver, Ray's own processes). Measured on the pool's own actors, after
    each round: the ceiling of the episode ratio beside it.
    """
    ray = pool._ray
    alone = ray.get(pool.actors[0].spin.remote(_SPIN))
    together = ray.get([a.spin.remote(_SPIN) for a in pool.actors])
    return float(len(together) * alone / max(together))


def format_scaling(report: dict[str, Any]) -> str:
    return (
        f"{report['world']}: {report['episodes']} oracle episodes, chunks: {report['chunk_size']}\n"
        f"  in process, no Ray   {report['local_per_s']:>9.1f} episodes/s\n"
        f"  1 Ray worker         {report['one_worker_per_s']:>9.1f} episodes/s\n"
        f"  {report['workers']} Ray workers        {report['workers_per_s']:>9.1f} episodes/s\n"
        f"  scaling              {report['ratio']:>9.2f}x (ideal {report['workers']}x)\n"
        f"  CPU ceiling          {report['cpu_ceiling']:>9.2f}x (a pure-Python loop on the same actors, same rounds)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mirrorworld.distributed [--world W] [--episodes N] [--workers K] [--address A] [--json]``."""
    from mirrorworld.core.registry import default

    p = argparse.ArgumentParser(prog="python -m mirrorworld.distributed", description=__doc__.splitlines()[0])
    p.add_argument("--world", default="helpdesk")
    p.add_argument("--episodes", type=int, default=1200)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--address", default=None)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    try:
        if args.episodes < 1 or args.workers < 1:
            raise MirrorworldError("--episodes and --workers must be at least 1")
        report = scaling(default.get(args.world), args.episodes, args.workers, address=args.address)
    except MirrorworldError as err:
        print(f"mirrorworld: error: {err}", file=sys.stderr)
        return 1
    print(json.dumps(report, indent=2) if args.json else format_scaling(report))
    return 0
