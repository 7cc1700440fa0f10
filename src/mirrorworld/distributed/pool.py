"""A pool of Ray actors playing a planned run in chunks, merged back in plan order.

:func:`run_on_ray` is :func:`mirrorworld.run.run_episodes` spread over a Ray
cluster: the run is planned on the driver (:func:`~mirrorworld.run.runner.plan_episodes`:
task refs, no task generated), split into chunks, and each chunk is played by
one of ``workers`` actors (:class:`~mirrorworld.distributed.worker.EpisodeWorker`)
with the runner's own per-episode code. What crosses the network per chunk:
the chunk's :class:`~mirrorworld.run.runner.Planned` refs in (a few dozen
bytes each), its episode records out. Once per actor: the world's spec (its
class and parameters), the agent and the judge, pickled.

**One run, whatever the pool.** Records are handed to ``on_record`` in plan
order (a chunk that finishes early waits for the ones before it), so a run
file written from a pool holds the same episodes, in the same order, with the
same verdicts and state hashes as a local run of the same plan; only each
record's ``seconds`` differs.

**A lost worker is infrastructure.** When an actor dies (its process killed,
its node gone) the episodes of the chunks it held (the one it was playing and
the one queued behind it) are recorded as errored at
the ``infrastructure`` boundary (:class:`~mirrorworld.errors.WorkerError`),
never scored. Ray restarts the actor (``max_restarts``); one that keeps dying
is retired, and once every actor is retired the rest of the run is recorded
the same way. An error a worker's code raised on purpose (a task that cannot
be generated) stops the run as it would locally.

**Throughput.** Each actor keeps its world's image and caches warm across
chunks, and up to two chunks are in flight per actor, so an actor starts its
next chunk while the driver reads the last. Unless a size is given, chunks
shrink as the run goes (guided scheduling): each is a quarter of an actor's
share of what is left, between 4 and 64 episodes. Early chunks are large
enough to amortise Ray's per-call cost (a millisecond or so) over dozens of
episodes; the last ones are small, so no actor sits idle at the end while
another plays a long chunk.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from mirrorworld.agents.base import Agent
from mirrorworld.core.task import Split
from mirrorworld.core.world import World
from mirrorworld.distributed.cluster import connected, last_line, require_ray
from mirrorworld.distributed.worker import EpisodeWorker, WorkerInfo
from mirrorworld.episodes import Faults
from mirrorworld.errors import Failure, MirrorworldError, WorkerError
from mirrorworld.run.runner import EpisodeRecord, Planned, plan_episodes
from mirrorworld.verify.judge import TextJudge

__all__ = ["EpisodePool", "lost_record", "run_on_ray"]

_IN_FLIGHT = 2
"""Chunks queued per actor: one playing, one waiting."""

_RETIRE_AFTER = 3
"""An actor that died this many times is given no more chunks."""

_MIN_CHUNK, _MAX_CHUNK = 4, 64
"""Bounds of a chunk's size when the caller names none (see the module docstring)."""


def lost_record(planned: Planned, *, split: str, agent: str, world_hash: str, error: BaseException) -> EpisodeRecord:
    """The record of an episode a worker lost: errored at the infrastructure boundary, not graded."""
    ref = planned.task
    failure = Failure.of(WorkerError(f"worker lost while playing {ref}: {type(error).__name__}: {error}"[:2000]))
    return EpisodeRecord(
        index=planned.index,
        task_id=str(ref),
        family=ref.family,
        seed=ref.seed,
        split=split,
        trial=planned.trial,
        agent=agent,
        passed=False,
        score=0.0,
        reward=0.0,
        steps=0,
        messages=[],
        calls=[],
        verdict={},
        task={"id": str(ref), "family": ref.family, "seed": ref.seed, "split": split},
        world_hash=world_hash,
        failure=failure,
    )


class EpisodePool:
    """``workers`` Ray actors, each hosting ``world`` (rebuilt from its spec) and ``agent``.

    Needs Ray connected (:func:`~mirrorworld.distributed.cluster.connected`).
    Each actor asks for ``num_cpus`` CPUs; the pool waits up to
    ``ready_timeout`` seconds for every actor to be placed and to have built
    its world's image, and raises a one-line error if the cluster cannot
    place them (too few CPUs for ``workers``).
    """

    def __init__(
        self,
        world: World,
        agent: Agent,
        *,
        workers: int,
        split: Split = "test",
        families: Sequence[str] | None = None,
        max_steps: int = 30,
        judge: TextJudge | None = None,
        faults: Faults | None = None,
        num_cpus: float = 1.0,
        max_restarts: int = 2,
        ready_timeout: float = 300.0,
    ) -> None:
        if workers < 1:
            raise MirrorworldError("--workers must be at least 1")
        ray = require_ray()
        self._ray = ray
        self.world = world
        self.agent_name = agent.name
        self.split: Split = split
        actor = ray.remote(num_cpus=num_cpus, max_restarts=max_restarts, max_task_retries=0)(EpisodeWorker)
        families = list(families) if families else None
        try:
            self.actors = [
                actor.remote(
                    world, agent, split=split, families=families, max_steps=max_steps, judge=judge, faults=faults
                )
                for _ in range(workers)
            ]
        except (TypeError, ValueError) as err:  # cloudpickle's refusal of an agent or judge
            raise MirrorworldError(f"the agent {agent.name} cannot be sent to Ray workers: {err}"[:500]) from None
        self._deaths = [0] * workers
        try:
            self.infos: list[WorkerInfo] = ray.get([a.info.remote() for a in self.actors], timeout=ready_timeout)
        except ray.exceptions.GetTimeoutError:
            self.close()
            cpus = ray.cluster_resources().get("CPU", 0)
            raise MirrorworldError(
                f"{workers} workers of {num_cpus:g} CPU were not all placed within {ready_timeout:g} s "
                f"(the cluster has {cpus:g} CPUs)"
            ) from None
        except ray.exceptions.RayError as err:
            self.close()
            raise MirrorworldError(f"the Ray workers failed to start: {last_line(err)}") from None

    @property
    def workers(self) -> int:
        return len(self.actors)

    def play(
        self,
        planned: Sequence[Planned],
        *,
        chunk_size: int | None = None,
        on_record: Callable[[EpisodeRecord], None] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> list[EpisodeRecord]:
        """Play ``planned`` over the pool; records come back (and go to ``on_record``) in plan order."""
        ray = self._ray
        todo = list(planned)
        total = len(todo)
        cursor = 0
        in_flight: dict[Any, tuple[int, int, list[Planned]]] = {}
        sent = 0
        # A death fails the chunk being played and the one queued behind it: it counts once, for
        # the chunks sent before the failure was seen.
        counted = [-1] * self.workers
        done: dict[int, EpisodeRecord] = {}
        ordered: list[EpisodeRecord] = []

        def next_chunk() -> list[Planned]:
            nonlocal cursor
            size = chunk_size or max(_MIN_CHUNK, min(_MAX_CHUNK, math.ceil((total - cursor) / (self.workers * 4))))
            chunk = todo[cursor : cursor + size]
            cursor += len(chunk)
            return chunk

        def submit(k: int) -> None:
            nonlocal sent
            if cursor < total and self._deaths[k] < _RETIRE_AFTER:
                chunk = next_chunk()
                in_flight[self.actors[k].play.remote(chunk)] = (k, sent, chunk)
                sent += 1

        def emit(records: list[EpisodeRecord]) -> None:
            for r in records:
                done[r.index] = r
            while len(ordered) < total and todo[len(ordered)].index in done:
                record = done.pop(todo[len(ordered)].index)
                ordered.append(record)
                if on_record is not None:
                    on_record(record)
                if progress is not None:
                    progress(len(ordered), total)

        for _ in range(_IN_FLIGHT):
            for k in range(self.workers):
                submit(k)
        while in_flight:
            (ref,), _ = ray.wait(list(in_flight), num_returns=1)
            k, seq, chunk = in_flight.pop(ref)
            try:
                records = ray.get(ref).unpack()
            except ray.exceptions.RayActorError as err:
                if seq > counted[k]:
                    self._deaths[k] += 1
                    counted[k] = sent - 1  # the last chunk sent so far
                records = [self._lost(p, err) for p in chunk]
            except ray.exceptions.RayTaskError as err:
                cause = err.cause if isinstance(getattr(err, "cause", None), BaseException) else None
                if isinstance(cause, MirrorworldError):
                    raise cause from None
                records = [self._lost(p, err) for p in chunk]
            except ray.exceptions.RayError as err:  # an object lost with its node
                records = [self._lost(p, err) for p in chunk]
            emit(records)
            submit(k)
            if not in_flight and cursor < total:  # every actor retired: the rest is lost too
                gone = WorkerError("every Ray worker of the pool died")
                emit([self._lost(p, gone) for p in todo[cursor:]])
                cursor = total
        return ordered

    def _lost(self, planned: Planned, err: BaseException) -> EpisodeRecord:
        return lost_record(
            planned, split=self.split, agent=self.agent_name, world_hash=self.world.content_hash, error=err
        )

    def close(self) -> None:
        """Stop the actors (their worlds go with them)."""
        for a in self.actors:
            self._ray.kill(a)
        self.actors = []

    def __enter__(self) -> EpisodePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_on_ray(
    world: World,
    agent: Agent,
    *,
    episodes: int,
    workers: int | None = None,
    address: str | None = None,
    split: Split = "test",
    families: Sequence[str] | None = None,
    start: int = 0,
    trials: int = 1,
    max_steps: int = 30,
    judge: TextJudge | None = None,
    faults: Faults | None = None,
    chunk_size: int | None = None,
    on_record: Callable[[EpisodeRecord], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[EpisodeRecord]:
    """:func:`mirrorworld.run.run_episodes` over ``workers`` Ray actors (see the module docstring).

    ``address`` is where Ray runs (:mod:`mirrorworld.distributed.cluster`; None
    starts a local instance with ``workers`` CPUs). ``workers`` defaults to the
    cluster's CPU count.
    """
    planned = plan_episodes(world, episodes=episodes, split=split, families=families, start=start, trials=trials)
    if workers is not None and workers < 1:
        raise MirrorworldError("--workers must be at least 1")
    with connected(address, workers=workers) as ray:
        n = workers if workers is not None else max(1, int(ray.cluster_resources().get("CPU", 1)))
        with EpisodePool(
            world, agent, workers=n, split=split, families=families, max_steps=max_steps, judge=judge, faults=faults
        ) as pool:
            return pool.play(planned, chunk_size=chunk_size, on_record=on_record, progress=progress)
