"""Running agents over tasks, recording trajectories, summarising metrics."""

from mirrorworld.run.metrics import summarize
from mirrorworld.run.runner import (
    EpisodeRecord,
    Planned,
    RunResult,
    plan_episodes,
    play_episodes,
    run_episode,
    run_episodes,
)
from mirrorworld.run.trajectories import RunFile

__all__ = [
    "EpisodeRecord",
    "Planned",
    "RunFile",
    "RunResult",
    "plan_episodes",
    "play_episodes",
    "run_episode",
    "run_episodes",
    "summarize",
]
