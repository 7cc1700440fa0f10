"""One episode of one task: the only place that decides what a step pays and when the episode ends.

Every adapter (Gymnasium, chat, PettingZoo, the server, MCP, TRL, the runner,
the remote env) steps an :class:`Episode` and encodes the :class:`StepOutcome`
it returns; none owns episode logic. So one action sequence gives the same
results, rewards, flags and state through every adapter.

Life of an episode::

    Episode(world, task, options) ──step──► running ──end──► over ──step──► episode_over (nothing happens)
                                              │                 ▲
                                              └── finish() ─────┘  (the caller stops it)

**The end.** An episode *terminates* when the task reaches an end of its own:
the world's terminal tool (``respond``) is called, or, in a seated world, the
contact ends (the customer left). It *truncates* when the step budget
(``max_steps`` calls, refused calls included) runs out first, or when the
caller cuts it short (:meth:`Episode.truncate`, the team episode's cycle
limit). It is graded once, on the step that ends it (or by :meth:`finish`).

**After the end**, every call gets the same error, :data:`EPISODE_OVER`, with
reward 0.0, no state change, no step counted and no new verdict; the flags
stay as they were. This holds for every adapter alike (invariant 7).

**Rewards.** With ``reward="shaped"`` each step pays the potential-based
process-reward term (see :mod:`mirrorworld.verify.process`); the step that ends
the episode also settles the potential and pays the verdict's score, so an
episode's return (discounted with the options' ``gamma``) equals its
(discounted) score. With ``reward="sparse"`` only the score is paid, at the
end. The step budget is the episode's own (``max_steps``): a limit outside
the episode that cuts it first (a Gymnasium ``TimeLimit``) leaves it unsettled
and ungraded, so adapters pass their budget here and register none elsewhere.

**Failures.** A refused call is the agent's mistake: an ordinary outcome with
``ok=False``. Anything else that escapes a tool is a bug in the world; the
episode records it as a :class:`~mirrorworld.errors.Failure` and raises a
:class:`~mirrorworld.errors.WorldError` chained to it. A verifier that cannot
grade raises :class:`~mirrorworld.errors.VerifierError`, recorded likewise.
Neither is ever scored as 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from mirrorworld.core.seats import Seated
from mirrorworld.core.session import Session, ToolResult
from mirrorworld.core.task import Task
from mirrorworld.core.world import World
from mirrorworld.episodes.faults import Faults
from mirrorworld.episodes.outcome import EPISODE_OVER, StepOutcome
from mirrorworld.errors import Boundary, Failure, MirrorworldError, WorldError, error_for
from mirrorworld.verify.judge import TextJudge
from mirrorworld.verify.process import ProcessReward
from mirrorworld.verify.verdict import Verdict
from mirrorworld.verify.verifier import Verifier

__all__ = ["Episode", "EpisodeOptions", "RewardMode"]

RewardMode = Literal["shaped", "sparse"]

DEFAULT_MAX_STEPS = 30


@dataclass(frozen=True, slots=True)
class EpisodeOptions:
    """How an episode is run: its step budget and its reward mode."""

    max_steps: int | None = DEFAULT_MAX_STEPS
    """Calls (refused ones included) after which the episode truncates; None: no budget."""
    reward: RewardMode = "shaped"
    gamma: float = 1.0
    """The discount of the process reward's terms (``F = γΦ(s') − Φ(s)``): set it to the learner's."""
    judge: TextJudge | None = None
    """An optional model judge of the customer texts (:mod:`mirrorworld.verify.judge`); None: no model."""
    faults: Faults | None = None
    """Seeded transient tool failures and latency (:mod:`mirrorworld.episodes.faults`); None: none."""

    def __post_init__(self) -> None:
        if self.max_steps is not None and (
            isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int) or self.max_steps < 1
        ):
            raise MirrorworldError(f"max_steps must be a positive integer, not {self.max_steps!r}")
        if self.faults is not None and not isinstance(self.faults, Faults):
            raise MirrorworldError("faults must be a Faults (Faults.parse reads text or a mapping)")
        if self.reward not in ("shaped", "sparse"):
            raise MirrorworldError(f"reward must be shaped or sparse, not {str(self.reward)[:40]!r}")
        if isinstance(self.gamma, bool) or not isinstance(self.gamma, (int, float)) or not 0.0 < self.gamma <= 1.0:
            raise MirrorworldError(f"gamma must be a number in (0, 1], not {self.gamma!r}")


class Episode:
    """A running episode: a session, its process reward, its end and its verdict. See the module docstring."""

    def __init__(
        self,
        world: World,
        task: Task,
        options: EpisodeOptions | None = None,
        *,
        max_steps: int | None = None,
        reward: RewardMode | None = None,
        _session: Session | None = None,
        _process: ProcessReward | None = None,
    ) -> None:
        if options is None:
            options = EpisodeOptions(
                max_steps=DEFAULT_MAX_STEPS if max_steps is None else max_steps, reward=reward or "shaped"
            )
        elif max_steps is not None or reward is not None:
            raise MirrorworldError("pass either options or max_steps/reward, not both")
        self.world = world
        self.task = task
        self.options = options
        self.session: Session = world.session(task) if _session is None else _session
        self.process = _process or ProcessReward(self.session, gamma=float(options.gamma))
        self.verdict: Verdict | None = None
        self.failure: Failure | None = None
        """A world or verifier failure that stopped the episode (None: none happened)."""
        self.total_reward = 0.0
        """The return so far under the episode's reward mode."""
        self._truncated = False
        self._ended = False
        self._seated = isinstance(world, Seated)
        self._shaped = options.reward == "shaped"

    # -- state -------------------------------------------------------------------

    @property
    def max_steps(self) -> int | None:
        return self.options.max_steps

    @property
    def over(self) -> bool:
        """The episode has ended (terminated, truncated, finished or failed): every further call is refused."""
        return self._ended

    @property
    def terminated(self) -> bool:
        """The task reached an end of its own (see the module docstring)."""
        return self.session.done or (self._seated and not self._truncated and self._contact_over())

    @property
    def truncated(self) -> bool:
        """The step budget ran out, or the caller cut the episode short, before it terminated."""
        if self._truncated:
            return True
        limit = self.options.max_steps
        return limit is not None and not self.terminated and self.session.steps >= limit

    def _contact_over(self) -> bool:
        world = self.world
        return isinstance(world, Seated) and world.contact_over(self.session)

    # -- stepping ------------------------------------------------------------------

    def step(self, tool: str, args: Any = None, *, role: str | None = None) -> StepOutcome:
        """Run one tool call and return what it did.

        Never raises for anything an agent sends: an unknown tool, malformed
        arguments or a refused action is an outcome with ``ok=False``. A call
        after the end is refused with ``episode_over`` and changes nothing.
        Raises :class:`~mirrorworld.errors.WorldError` when a tool crashes (a
        world bug) and :class:`~mirrorworld.errors.VerifierError` when the
        ending step cannot be graded; both are recorded in :attr:`failure`.
        ``role`` is the party making the call in a world with seats (the team
        episode passes the caller's seat; see ``Session.call``).
        """
        if self._ended:
            return self._refused(tool)
        s = self.session
        try:
            faults = self.options.faults
            if faults is None:
                result = s.call(tool, args, role=role)
            else:
                result = self._call_with_faults(faults, tool, args, role)
            limit = self.options.max_steps
            reached = s.done or (self._seated and self._contact_over())  # an end of the task's own
            end = reached or (limit is not None and s.steps >= limit)
        except Exception as err:
            raise self._failed(err, "world", f"{self.world.name}: tool {str(tool)[:60]!r} crashed") from err
        try:
            shaping = self.process.step(episode_over=end)
        except Exception as err:
            raise self._failed(err, "verifier", f"the process reward of {self.task.id} failed") from err
        reward = shaping if self._shaped else 0.0
        verdict = None
        if end:
            verdict = self._grade()
            reward += verdict.score
        self.total_reward += reward
        terminated = reached
        return StepOutcome(
            tool if isinstance(tool, str) and len(tool) <= 200 else str(tool)[:200],
            result,
            reward,
            terminated,
            end and not terminated,
            s.steps,
            s.view,
            s.viewed,
            verdict,
        )

    def _call_with_faults(self, faults: Faults, tool: Any, args: Any, role: str | None) -> ToolResult:
        """A call under injected faults: latency first, then a transient failure or the call itself."""
        s = self.session
        if faults.latency_s:
            s.advance(faults.latency_s)
        spec = self.world.tools_by_name.get(tool) if isinstance(tool, str) else None
        step = s.steps + 1
        fault = faults.draw(self.task.id, step, spec.kind if spec is not None else None)
        if fault is None:
            return s.call(tool, args, role=role)
        error = Faults.error(fault, self.task.id, step)
        if fault != "lost_response":
            return s.refuse(tool, error, role=role)
        result = s.call(tool, args, role=role)
        return ToolResult(False, error=error, done=result.done) if result.ok else result

    def _refused(self, tool: Any) -> StepOutcome:
        s = self.session
        return StepOutcome(
            tool[:200] if isinstance(tool, str) else f"<{type(tool).__name__}>",
            ToolResult(False, error=dict(EPISODE_OVER), done=True),
            0.0,
            self.terminated,
            self.truncated,
            s.steps,
            s.view,
            s.viewed,
            None,
            True,
        )

    def _grade(self) -> Verdict:
        self._ended = True
        try:
            grade = self.session.world.grader(self.options.judge) or Verifier(self.options.judge)
            verdict = grade(self.session)
        except Exception as err:
            raise self._failed(err, "verifier", f"grading {self.task.id} failed") from err
        self.verdict = verdict
        return verdict

    def _failed(self, err: Exception, crossed: Boundary, what: str) -> MirrorworldError:
        """End the episode on ``err`` and record it as the episode's :attr:`failure`.

        A :class:`MirrorworldError` keeps the boundary it names and is re-raised
        here as it is; anything else is attributed to ``crossed`` (a ``KeyError``
        out of a tool is a world bug) and the error to raise, chained to it, is returned.
        """
        error = err if isinstance(err, MirrorworldError) else error_for(crossed)(f"{what}: {type(err).__name__}: {err}")
        self._ended = True
        if self.failure is None:
            self.failure = Failure.of(error)
        if error is err:
            raise err
        return error

    def finish(self) -> Verdict:
        """End the episode now and grade it; the verdict once graded.

        An episode that had not ended is cut short by the caller (the agent
        stopped without a final message): it ends as truncated. Settles the
        process reward (its last term and the score are added to
        :attr:`total_reward`). An episode that failed before it could be graded
        raises the error of the boundary that failed (a
        :class:`~mirrorworld.errors.WorldError` after a crashed tool).
        """
        if self.verdict is not None:
            return self.verdict
        if self.failure is not None:
            raise error_for(self.failure.boundary)(f"{self.task.id} cannot be graded: {self.failure.message}")
        if not self.terminated:
            self._truncated = True
        shaping = self.process.step(episode_over=True)
        verdict = self._grade()
        self.total_reward += (shaping if self._shaped else 0.0) + verdict.score
        return verdict

    truncate = finish
    """Cut the episode short (a cycle limit): it ends as truncated and is graded now."""

    # -- copies and lifetime ---------------------------------------------------------

    def fork(self) -> Episode:
        """An independent copy of this episode, mid-way: state, events, process reward, verdict and flags.

        The copy's state comes from ``Session.fork()``; if that does not
        reproduce the state hash, the committed calls are replayed on a fresh
        session of the task instead (calls are deterministic given the state).
        The two episodes then evolve apart.
        """
        parent = self.session
        twin = parent.fork()
        if twin.state_hash() != parent.state_hash():
            twin.close()
            twin = self.world.session(self.task)
            for event in parent.events:
                if event.ok and event.kind in ("write", "terminal"):
                    twin.call(event.tool, event.args, role=event.role)
            twin.continue_from(parent)
            if twin.state_hash() != parent.state_hash():
                twin.close()
                raise WorldError("fork could not reproduce the parent's state")
        copy = Episode(self.world, self.task, self.options, _session=twin, _process=self.process.forked(twin))
        copy.verdict = self.verdict
        copy.failure = self.failure
        copy.total_reward = self.total_reward
        copy._truncated = self._truncated
        copy._ended = self._ended
        return copy

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> Episode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
