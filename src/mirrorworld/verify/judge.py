"""An optional model judge for the text rules, off by default.

The claim checker (:mod:`mirrorworld.verify.claims`) reads customer texts
deterministically. A :class:`TextJudge` adds a second reader: any callable that
gets the task and the episode's customer texts and returns evidence lines (an
empty list: nothing wrong). A line fails the communication gate. The verifier
calls it after the deterministic rules, only when one is given
(``Verifier(judge=...)``, ``EpisodeOptions(judge=...)``); mirrorworld ships an
OpenAI-compatible one (:class:`mirrorworld.agents.judge.OpenAIJudge`). A judge
that cannot answer raises, and the episode is recorded as failed at the
boundary it names (an endpoint down is ``infrastructure``), never scored 0.

Its agreement with human reviewers is what the review app measures for any
verifier: run the same episodes with and without a judge and compare.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from mirrorworld.core.claims import CustomerText
from mirrorworld.core.task import Task

__all__ = ["TextJudge"]


class TextJudge(Protocol):
    """Reads an episode's customer texts; returns one evidence line per problem (none: acceptable)."""

    def __call__(self, task: Task, texts: Sequence[CustomerText], policy: str) -> list[str]: ...
