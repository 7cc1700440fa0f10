"""One episode of a task: the session, its process reward and its verdict.

Both the Gymnasium and the chat adapters step an :class:`Episode`; neither owns
logic the other needs.
"""

from __future__ import annotations

from typing import Any

from mirrorworld.core.session import Session, ToolResult
from mirrorworld.core.task import Split, Task
from mirrorworld.core.world import World
from mirrorworld.verify.process import ProcessReward
from mirrorworld.verify.verdict import Verdict
from mirrorworld.verify.verifier import Verifier

__all__ = ["Episode", "pick_task"]


def pick_task(world: World, split: Split, index: int, families: tuple[str, ...] | None) -> Task:
    """The task for ``index`` in ``split`` (families cycle; seeds never cross splits)."""
    return world.task_for(split, index, families)


class Episode:
    """A running episode with shaped reward and a verdict at its end."""

    def __init__(self, world: World, task: Task, *, max_steps: int) -> None:
        self.world = world
        self.task = task
        self.max_steps = max_steps
        self.session: Session = world.session(task)
        self.process = ProcessReward(self.session)
        self.verdict: Verdict | None = None
        self.total_reward = 0.0
        """Shaped return so far: process terms plus the score once graded."""

    @property
    def over(self) -> bool:
        return self.verdict is not None

    @property
    def terminated(self) -> bool:
        return self.session.done

    @property
    def truncated(self) -> bool:
        return not self.session.done and self.session.steps >= self.max_steps

    def call(self, tool: str, args: Any) -> tuple[ToolResult, float]:
        """Run one call; return its result and the shaping reward it earned."""
        result = self.session.call(tool, args)
        end = self.session.done or self.session.steps >= self.max_steps
        shaping = self.process.step(episode_over=end)
        self.total_reward += shaping
        if end and self.verdict is None:
            self._grade()
        return result, shaping

    def _grade(self) -> Verdict:
        self.verdict = Verifier()(self.session)
        self.total_reward += self.verdict.score
        return self.verdict

    def finish(self) -> Verdict:
        """End the episode now (the agent stopped) and grade it."""
        if self.verdict is None:
            self.total_reward += self.process.step(episode_over=True)
            return self._grade()
        return self.verdict

    def close(self) -> None:
        self.session.close()
