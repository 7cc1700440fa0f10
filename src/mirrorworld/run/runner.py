"""The runner: agents × tasks × trials → graded, recorded episodes.

**Failures have a boundary.** The runner calls three kinds of code it does not
own, each inside :func:`~mirrorworld.errors.boundary`:

* the agent (``reset``, ``act``): an :class:`~mirrorworld.errors.AgentError` (an
  endpoint down, a bad response) and any other exception out of the agent's
  code are ``infrastructure`` failures: the agent's code is the harness that
  produces actions, not the behaviour being graded, so a bug in it never scores
  0 (an agent's mistakes are refused tool calls, which do);
* the world, through the chat encoding and its :class:`~mirrorworld.episodes.Episode`
  (``reset``, ``step``): a crashed tool or task is a ``world`` failure (the
  episode layer raises :class:`~mirrorworld.errors.WorldError` for it), a
  verdict that cannot be reached on the ending step a ``verifier`` one;
* the verifier (``finish``): a ``verifier`` failure.

The first failure stops the episode and is recorded with it
(:attr:`EpisodeRecord.failure`): such an episode is *errored*, not graded (its
``verdict`` is empty, ``passed`` false, ``score`` and ``reward`` 0.0), and the
summary counts it per boundary instead of in any pass rate.

A run is planned before it is played: :func:`plan_episodes` names every
episode (its place in the run, its task's :class:`~mirrorworld.core.task.TaskRef`,
its trial) without generating a task, and :func:`play_episodes` plays any
such list in one process. :func:`run_episodes` is the two in a row; a
scale-out (:mod:`mirrorworld.distributed`) sends slices of the same plan to
workers that play them with the same :func:`play_episodes`, so a record does
not depend on where it was played.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mirrorworld.agents.base import Agent, EpisodeContext
from mirrorworld.core.session import Event
from mirrorworld.core.task import Split, Task, TaskRef, split_seed
from mirrorworld.core.world import World
from mirrorworld.envs.chat import ChatEnv
from mirrorworld.episodes import Episode, Faults
from mirrorworld.errors import Failure, MirrorworldError, boundary
from mirrorworld.verify.judge import TextJudge
from mirrorworld.verify.verdict import Verdict

__all__ = ["EpisodeRecord", "Planned", "RunResult", "plan_episodes", "play_episodes", "run_episode", "run_episodes"]


@dataclass
class EpisodeRecord:
    """One episode, as stored in a run file.

    ``verdict`` is the stored form of the verdict (:meth:`Verdict.to_dict`, plus
    any key a runner adds, such as a team run's ``team``), empty for an episode
    that was not graded; :attr:`graded` reads it as a :class:`Verdict`.
    ``failure`` is the failure that stopped an errored episode and ``error`` its
    message. A record that has only an ``error`` (older run files, runners that
    record a message) is taken as an infrastructure failure of kind
    ``AgentError``, the only failure such records carried.
    """

    index: int
    task_id: str
    family: str
    seed: int
    split: str
    trial: int
    agent: str
    passed: bool
    score: float
    reward: float
    steps: int
    messages: list[dict[str, Any]]
    calls: list[dict[str, Any]]
    verdict: dict[str, Any]
    task: dict[str, Any]
    world_hash: str
    error: str | None = None
    seconds: float = 0.0
    failure: Failure | None = None
    usage: dict[str, int] | None = None
    """What the agent counted the episode to cost (a model's tokens and requests), when it counts."""

    def __post_init__(self) -> None:
        if self.failure is None and self.error is not None:
            self.failure = Failure("infrastructure", "AgentError", self.error)
        elif self.failure is not None and self.error is None:
            self.error = self.failure.message

    @property
    def errored(self) -> bool:
        """The episode stopped on a failure (see :attr:`failure`): it is not graded."""
        return self.failure is not None

    @property
    def graded(self) -> Verdict | None:
        """The verdict as a :class:`Verdict`; None when the episode was not graded.

        Raises :class:`~mirrorworld.errors.RunFileError` when the stored verdict is malformed.
        """
        if not self.verdict:
            return None
        return Verdict.from_dict(self.verdict)


@dataclass
class RunResult:
    """The records of a run, its summary and where it was saved."""

    records: list[EpisodeRecord]
    summary: dict[str, Any]
    path: Path | None = None
    meta: dict[str, Any] = field(default_factory=dict)


def _event(e: Event) -> dict[str, Any]:
    """A call as a run file records it: as the agent made and saw it (a drifted surface's call keeps what ran)."""
    d = asdict(e)
    d["rows"] = [list(r) for r in e.rows]
    shown = d.pop("presented", None)
    if shown is not None:
        d["ran"] = {"tool": e.tool, "args": d["args"], "error": d["error"]}
        d["tool"], d["args"] = shown["tool"], shown["args"]
        if not e.ok:
            d["error"] = shown["error"]
    return d


def run_episode(env: ChatEnv, agent: Agent, task: Task, *, index: int = 0, trial: int = 0) -> EpisodeRecord:
    """Play one episode of ``task`` with ``agent`` and grade it; a failure is recorded, never raised.

    See the module docstring for how a failure is attributed.
    """
    started = time.perf_counter()
    name = f"agent {agent.name}"
    ep: Episode | None = None
    verdict: Verdict | None = None
    failure: Failure | None = None
    try:
        with boundary("world", f"{env.world.name}: starting {task.id}"):
            env.reset(task=task)
        ep = env.episode
        assert ep is not None
        with boundary("infrastructure", name):
            agent.reset(EpisodeContext(env.world, task, seed=task.seed * 1000 + trial))
        while not ep.over:
            with boundary("infrastructure", name):
                message = agent.act(list(env.messages), env.tools)
            with boundary("world", f"{env.world.name}: stepping {task.id}"):
                env.step(message)
        with boundary("verifier", f"grading {task.id}"):
            verdict = ep.finish()
    except MirrorworldError as err:
        failure = ep.failure if ep is not None and ep.failure is not None else Failure.of(err)
        verdict = None
    record = EpisodeRecord(
        index=index,
        task_id=task.id,
        family=task.family,
        seed=task.seed,
        split=task.split,
        trial=trial,
        agent=agent.name,
        passed=verdict is not None and verdict.passed,
        score=verdict.score if verdict is not None else 0.0,
        reward=ep.total_reward if ep is not None and verdict is not None else 0.0,
        steps=ep.session.steps if ep is not None else 0,
        messages=list(env.messages) if ep is not None else [],
        calls=[_event(e) for e in ep.session.events] if ep is not None else [],
        verdict=verdict.to_dict() if verdict is not None else {},
        task=task.to_dict(),
        world_hash=env.world.content_hash,
        failure=failure,
        seconds=time.perf_counter() - started,
        usage=_usage(agent),
    )
    env.close()
    return record


def _usage(agent: Agent) -> dict[str, int] | None:
    """The agent's count of the episode's cost, kept only as small non-negative integers by name."""
    try:
        counted = agent.usage()
    except Exception:  # bookkeeping of the agent's own code: a bug in it costs the count, not the episode
        return None
    if not isinstance(counted, dict):
        return None
    return {
        str(k)[:40]: v
        for k, v in list(counted.items())[:16]
        if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**53
    } or None


@dataclass(frozen=True, slots=True)
class Planned:
    """One episode of a planned run: its place in the run, the task it plays and its trial.

    Small and picklable on purpose: it is what a scale-out sends to a worker,
    which regenerates the task from ``task`` (tasks are seeded, so the same ref
    is the same task in any process).
    """

    index: int
    task: TaskRef
    trial: int = 0


def plan_episodes(
    world: World,
    *,
    episodes: int,
    split: Split = "test",
    families: Sequence[str] | None = None,
    start: int = 0,
    trials: int = 1,
) -> list[Planned]:
    """The episodes of a run: ``episodes`` tasks of ``split`` from ``start``, cycling through families, ``trials`` each.

    The ``i``-th task is the one :meth:`World.task_for` gives for ``start + i``;
    no task is generated here. Unknown family names raise
    :class:`~mirrorworld.errors.RegistryError`.
    """
    names = list(families) if families else [f.name for f in world.families]
    for name in names:
        world.family(name)
    planned: list[Planned] = []
    for i in range(episodes):
        k = start + i
        ref = TaskRef(names[k % len(names)], split_seed(split, k // len(names)))
        base = len(planned)
        planned.extend([Planned(base + t, ref, t) for t in range(trials)])
    return planned


def play_episodes(
    world: World,
    agent: Agent,
    planned: Iterable[Planned],
    *,
    split: Split = "test",
    families: Sequence[str] | None = None,
    max_steps: int = 30,
    judge: TextJudge | None = None,
    on_record: Callable[[EpisodeRecord], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
    faults: Faults | None = None,
    concurrency: int = 1,
    make_agent: Callable[[], Agent] | None = None,
    make_env: Callable[..., ChatEnv] = ChatEnv,
) -> list[EpisodeRecord]:
    """Play planned episodes in this process; each record carries its planned index.

    ``make_env`` builds the chat encoding the episodes are played through,
    called as ``make_env(world, split=..., families=..., max_steps=...,
    judge=..., faults=...)``: :class:`~mirrorworld.envs.chat.ChatEnv` over the
    mirror by default; ``Twin.env`` plays them on the real twin
    (:mod:`mirrorworld.fidelity.episode`, one episode at a time: concurrency 1).

    With ``concurrency`` 1 the episodes are played in order by ``agent``. With
    more, that many worker threads play them at once, each with its own
    encoding of the world and its own agent from ``make_agent`` (``agent``
    plays in the first): an agent that waits on a model endpoint spends its
    time waiting, not computing, so threads overlap the waits. A record does
    not depend on the concurrency (episodes share nothing and are seeded by
    their task and trial); ``on_record`` and ``progress`` are called in the
    calling thread, in the order episodes finish, and the records are returned
    in planned order. The worker threads are daemons: an interrupt
    (``KeyboardInterrupt``) in the calling thread returns at once, abandoning
    the episodes in flight, none of which has been reported.

    A task that cannot be generated raises (:class:`~mirrorworld.errors.TaskError`):
    the run stops, as a broken family is a bug to fix, not an episode to record.
    ``progress(done, total)`` counts the records of this call.
    """
    if concurrency < 1:
        raise MirrorworldError(f"concurrency must be at least 1, not {concurrency}")
    todo = list(planned)
    options: dict[str, Any] = {
        "split": split,
        "families": list(families) if families else None,
        "max_steps": max_steps,
        "judge": judge,
        "faults": faults,
    }
    if concurrency > 1 and len(todo) > 1:
        if make_agent is None:
            raise MirrorworldError("playing episodes concurrently needs an agent per worker (make_agent)")
        return _play_concurrently(world, agent, make_agent, todo, concurrency, options, on_record, progress, make_env)
    env = make_env(world, **options)
    records: list[EpisodeRecord] = []
    for p in todo:
        record = run_episode(env, agent, world.task_at(p.task), index=p.index, trial=p.trial)
        records.append(record)
        if on_record is not None:
            on_record(record)
        if progress is not None:
            progress(len(records), len(todo))
    return records


def _play_concurrently(
    world: World,
    agent: Agent,
    make_agent: Callable[[], Agent],
    todo: list[Planned],
    concurrency: int,
    options: dict[str, Any],
    on_record: Callable[[EpisodeRecord], None] | None,
    progress: Callable[[int, int], None] | None,
    make_env: Callable[..., ChatEnv] = ChatEnv,
) -> list[EpisodeRecord]:
    """:func:`play_episodes` over worker threads (see there)."""
    jobs: queue.SimpleQueue[Planned] = queue.SimpleQueue()
    for p in todo:
        jobs.put(p)
    results: queue.SimpleQueue[EpisodeRecord | BaseException] = queue.SimpleQueue()
    stop = threading.Event()

    def work(player: Agent | None) -> None:
        try:
            mine = player if player is not None else make_agent()
            env = make_env(world, **options)
            while not stop.is_set():
                try:
                    p = jobs.get_nowait()
                except queue.Empty:
                    return
                results.put(run_episode(env, mine, world.task_at(p.task), index=p.index, trial=p.trial))
        except BaseException as err:  # handed to the calling thread, which raises it
            results.put(err)

    workers = [
        threading.Thread(target=work, args=(agent if i == 0 else None,), name=f"episode-worker-{i}", daemon=True)
        for i in range(min(concurrency, len(todo)))
    ]
    for t in workers:
        t.start()
    records: list[EpisodeRecord] = []
    try:
        while len(records) < len(todo):
            try:
                item = results.get(timeout=0.2)  # a bounded wait, so that an interrupt is seen at once
            except queue.Empty:
                if not any(t.is_alive() for t in workers) and results.empty():
                    raise MirrorworldError("the episode workers stopped before every episode was played") from None
                continue
            if isinstance(item, BaseException):
                raise item
            records.append(item)
            if on_record is not None:
                on_record(item)
            if progress is not None:
                progress(len(records), len(todo))
    finally:
        stop.set()
    return sorted(records, key=lambda r: r.index)


def run_episodes(
    world: World,
    agent: Agent,
    *,
    episodes: int,
    split: Split = "test",
    families: Sequence[str] | None = None,
    start: int = 0,
    trials: int = 1,
    max_steps: int = 30,
    judge: TextJudge | None = None,
    on_record: Callable[[EpisodeRecord], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
    faults: Faults | None = None,
    concurrency: int = 1,
    make_agent: Callable[[], Agent] | None = None,
    make_env: Callable[..., ChatEnv] = ChatEnv,
) -> list[EpisodeRecord]:
    """Run ``episodes`` tasks of ``split`` (cycling through families), each ``trials`` times.

    ``judge`` adds a model judge of the customer texts to grading (:mod:`mirrorworld.verify.judge`);
    ``faults`` injects seeded transient tool failures (:mod:`mirrorworld.episodes.faults`);
    ``concurrency`` and ``make_agent`` play episodes at once, ``make_env`` on another backend
    (:func:`play_episodes`). The same as :func:`plan_episodes` then :func:`play_episodes`.
    """
    planned = plan_episodes(world, episodes=episodes, split=split, families=families, start=start, trials=trials)
    return play_episodes(
        world,
        agent,
        planned,
        split=split,
        families=families,
        max_steps=max_steps,
        judge=judge,
        on_record=on_record,
        progress=progress,
        faults=faults,
        concurrency=concurrency,
        make_agent=make_agent,
        make_env=make_env,
    )
