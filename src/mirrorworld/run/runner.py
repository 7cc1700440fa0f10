"""The runner: agents × tasks × trials → graded, recorded episodes."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mirrorworld.agents.base import Agent, EpisodeContext
from mirrorworld.core.session import Event
from mirrorworld.core.task import Split, Task
from mirrorworld.core.world import World
from mirrorworld.envs.chat import ChatEnv
from mirrorworld.errors import AgentError

__all__ = ["EpisodeRecord", "RunResult", "run_episode", "run_episodes"]


@dataclass
class EpisodeRecord:
    """One graded episode, as stored in a run file."""

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


@dataclass
class RunResult:
    """The records of a run, its summary and where it was saved."""

    records: list[EpisodeRecord]
    summary: dict[str, Any]
    path: Path | None = None
    meta: dict[str, Any] = field(default_factory=dict)


def _event(e: Event) -> dict[str, Any]:
    d = asdict(e)
    d["rows"] = [list(r) for r in e.rows]
    return d


def run_episode(env: ChatEnv, agent: Agent, task: Task, *, index: int = 0, trial: int = 0) -> EpisodeRecord:
    """Play one episode of ``task`` with ``agent`` and grade it."""
    started = time.perf_counter()
    env.reset(task=task)
    error = None
    try:
        agent.reset(EpisodeContext(env.world, task, seed=task.seed * 1000 + trial))
        while not env.done:
            env.step(agent.act(list(env.messages), env.tools))
    except AgentError as err:
        error = str(err)
    ep = env.episode
    assert ep is not None
    verdict = ep.finish()
    record = EpisodeRecord(
        index=index,
        task_id=task.id,
        family=task.family,
        seed=task.seed,
        split=task.split,
        trial=trial,
        agent=agent.name,
        passed=verdict.passed and error is None,
        score=verdict.score if error is None else 0.0,
        reward=ep.total_reward if error is None else 0.0,
        steps=ep.session.steps,
        messages=list(env.messages),
        calls=[_event(e) for e in ep.session.events],
        verdict=verdict.to_dict(),
        task=task.to_dict(),
        world_hash=env.world.content_hash,
        error=error,
        seconds=time.perf_counter() - started,
    )
    env.close()
    return record


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
    on_record: Callable[[EpisodeRecord], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[EpisodeRecord]:
    """Run ``episodes`` tasks of ``split`` (cycling through families), each ``trials`` times."""
    env = ChatEnv(world, split=split, families=list(families) if families else None, max_steps=max_steps)
    records: list[EpisodeRecord] = []
    total = episodes * trials
    for i in range(episodes):
        task = world.task_for(split, start + i, families)
        for trial in range(trials):
            record = run_episode(env, agent, task, index=len(records), trial=trial)
            records.append(record)
            if on_record is not None:
                on_record(record)
            if progress is not None:
                progress(len(records), total)
    return records
