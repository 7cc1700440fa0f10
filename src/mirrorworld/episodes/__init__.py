"""The episode layer: one episode's life, for one party (:class:`Episode`) or many (:class:`TeamEpisode`).

``Episode.step(tool, args) -> StepOutcome`` is the one place that decides what
a step pays, when an episode ends and what happens after the end; every
adapter encodes its :class:`StepOutcome`. :func:`select_task` is the one
resolution of the ways a caller names a task (``family/seed`` is parsed by
:class:`~mirrorworld.core.task.TaskRef` alone).
"""

from mirrorworld.episodes.episode import Episode, EpisodeOptions, RewardMode
from mirrorworld.episodes.faults import FAULT_KINDS, Faults
from mirrorworld.episodes.outcome import EPISODE_OVER, StepOutcome
from mirrorworld.episodes.select import check_split, select_task
from mirrorworld.episodes.team import WAIT, Action, RoleObservation, TeamEpisode, Turn

__all__ = [
    "EPISODE_OVER",
    "FAULT_KINDS",
    "WAIT",
    "Action",
    "Episode",
    "EpisodeOptions",
    "Faults",
    "RewardMode",
    "RoleObservation",
    "StepOutcome",
    "TeamEpisode",
    "Turn",
    "check_split",
    "select_task",
]
