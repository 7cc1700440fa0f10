"""Running agents over tasks, recording trajectories, summarising metrics."""

from mirrorworld.run.metrics import summarize
from mirrorworld.run.runner import EpisodeRecord, RunResult, run_episode, run_episodes
from mirrorworld.run.trajectories import RunFile

__all__ = ["EpisodeRecord", "RunFile", "RunResult", "run_episode", "run_episodes", "summarize"]
