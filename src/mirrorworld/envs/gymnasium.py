"""Worlds as Gymnasium environments.

Observations are a ``Dict`` of what an agent could see on its screen:

* ``instruction`` — the task as the agent reads it;
* ``view`` — a one-line header of the record last opened;
* ``records`` — the records opened so far (``ticket:801,order:428``);
* ``last_result`` — the last tool result as JSON (an error is ``{"error": {code, message}}``);
* ``tool_mask`` — which tools can be called now (all of them until the episode ends, none after);
* ``step`` — the number of calls made.

Actions are ``{"tool_name": Discrete(n), "tool_args": Text}`` where the text is
the JSON arguments; ``env.unwrapped.tool_names[i]`` names tool ``i``. A string
tool name and a dict of arguments are accepted too.

``reset(seed=s)`` starts task ``s`` of the split; without a seed the task index
is drawn from the environment's generator. ``options={"task": Task}`` or
``{"task_id": "family/seed"}`` picks a task. The episode terminates when the
agent calls the world's terminal tool (``respond``) and truncates at
``max_steps``. On the step that ends it ``info["verdict"]`` holds the verdict
as a dict. A step after the end is answered, as by every adapter, with the
``episode_over`` error, reward 0, unchanged flags and state, and no verdict
(:mod:`mirrorworld.episodes`).

Rewards: with ``reward="sparse"`` only the verdict's score, at the end. With
``reward="shaped"`` (default) also the potential-based process reward over
progress an agent can see (target records opened, the world's milestones),
discounted with ``gamma`` (set it to the learner's): its discounted terms sum
to zero, so the return is the score (see :mod:`mirrorworld.verify.process`).
The step budget is the env's own: ``max_steps`` (``gym.make(id, max_steps=N)``).
The ids are registered without a ``max_episode_steps``, so ``gym.make`` adds no
``TimeLimit``. An outer ``TimeLimit`` (``gym.make(id, max_episode_steps=N)`` or
one wrapped by hand) is invisible to the env: if it cuts the episode before
``max_steps``, that last step carries no verdict and the shaping stays unsettled
(up to the potential reached). Give the budget as ``max_steps`` instead.

``render_mode="ansi"``: ``render()`` returns the episode so far as text, a
``[step n] view`` line, then the instruction, every call with its arguments and
the result the agent got, and the verdict once the episode has ended; all of it
inert and bounded (:mod:`mirrorworld.envs.ansi`). Without it, ``render()``
returns None and the env keeps no log.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from typing import Any, Literal, SupportsFloat, overload

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from gymnasium.vector.utils import read_from_shared_memory

from mirrorworld.core.registry import Registry, default
from mirrorworld.core.session import MAX_ARGS_CHARS
from mirrorworld.core.task import MAX_INDEX, Split, Task
from mirrorworld.core.world import World
from mirrorworld.episodes import Episode, EpisodeOptions, Faults, check_split, select_task
from mirrorworld.errors import MirrorworldError
from mirrorworld.verify.judge import TextJudge

__all__ = [
    "CHARSET",
    "MAX_TEXT",
    "MirrorEnv",
    "ObservationText",
    "SharedTexts",
    "decode_action",
    "env_spaces",
    "observed_instruction",
    "observed_result",
]

CHARSET = frozenset(string.printable)
"""Every observation string is printable ASCII (JSON escapes the rest)."""

MAX_TEXT = 16_000
"""Longest observation string; longer tool results are cut with a marker."""

_CUT = "...[truncated]"


def _clip(text: str) -> str:
    if len(text) <= MAX_TEXT:
        return text
    return text[: MAX_TEXT - len(_CUT)] + _CUT


_NOT_PRINTABLE = re.compile(f"[^{re.escape(string.printable)}]")


def _ascii(text: str) -> str:
    """``text`` with every character outside ``CHARSET`` replaced by ``?``."""
    if text.isascii() and text.isprintable():  # the common case, without the regex
        return text
    return _NOT_PRINTABLE.sub("?", text)


def observed_instruction(text: str) -> str:
    """A task's instruction as the ``instruction`` observation shows it."""
    return _ascii(text)


def observed_result(text: str) -> str:
    """A tool result's JSON text as the ``last_result`` observation shows it."""
    return _clip(text)


class ObservationText(spaces.Text):
    """The text of an observation field: a :class:`~gymnasium.spaces.Text` that survives shared memory.

    ``AsyncVectorEnv`` (with its default ``shared_memory=True``) reads its
    observation buffers once, when it starts, and relies on what it read being
    a view of the shared memory; Gymnasium's reader for ``Text`` returns strings,
    so every later observation would come back as the buffer's first reading.
    The reader registered for this space returns :class:`SharedTexts`, a
    sequence that decodes the buffer when it is read (and, copied, keeps what
    the buffer held then), so vectorised text observations stay intact.
    """


class SharedTexts(Sequence[str]):
    """The texts of one observation field across a vector's environments, read from shared memory."""

    def __init__(self, space: spaces.Text, codes: np.ndarray) -> None:
        self._chars = space.character_list
        self._codes = codes

    def __len__(self) -> int:
        return int(self._codes.shape[0])

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[str, ...]: ...

    def __getitem__(self, i: int | slice) -> str | tuple[str, ...]:
        if isinstance(i, slice):
            return tuple(self[j] for j in range(*i.indices(len(self))))
        chars, n = self._chars, len(self._chars)
        return "".join(chars[c] for c in self._codes[i].tolist() if c < n)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (SharedTexts, tuple, list)):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SharedTexts({tuple(self)!r})"


@read_from_shared_memory.register(ObservationText)
def _read_observation_text(space: ObservationText, shared_memory: Any, n: int = 1) -> SharedTexts:
    codes = np.frombuffer(shared_memory.get_obj(), dtype=np.int32).reshape((n, space.max_length))
    return SharedTexts(space, codes)


def env_spaces(n_tools: int, max_steps: int) -> tuple[spaces.Dict, spaces.Dict]:
    """The observation and action spaces of an environment over ``n_tools`` tools (see the module docstring)."""
    text = ObservationText(MAX_TEXT, min_length=0, charset=string.printable)
    observation = spaces.Dict(
        {
            "instruction": text,
            "view": text,
            "records": text,
            "last_result": text,
            "tool_mask": spaces.MultiBinary(n_tools),
            "step": spaces.Box(0, max_steps, shape=(), dtype=np.int64),
        }
    )
    action = spaces.Dict(
        {
            "tool_name": spaces.Discrete(n_tools),
            "tool_args": spaces.Text(MAX_ARGS_CHARS, min_length=0, charset=string.printable),
        }
    )
    return observation, action


def decode_action(action: Any, tool_names: tuple[str, ...]) -> tuple[str, Any]:
    """(tool name, arguments) of a Gymnasium action, tolerating any junk.

    The tool may be an index into ``tool_names`` or a name; the arguments JSON
    text or a dict. Anything else becomes a name or argument text that the
    session answers with an error observation.
    """
    try:
        raw = action["tool_name"]
        args = action.get("tool_args", "")
    except (TypeError, KeyError, AttributeError):
        raw, args = None, None
    if isinstance(raw, np.ndarray) and raw.size == 1 and raw.dtype.kind in "iu":
        raw = int(raw.reshape(()))  # a 0-d or one-element array, as vectorised samplers and TorchRL give one
    if type(raw) is int and 0 <= raw < len(tool_names):
        name = tool_names[raw]
    elif isinstance(raw, str):
        name = raw
    elif isinstance(raw, (int, np.integer)) and 0 <= int(raw) < len(tool_names):
        name = tool_names[int(raw)]
    elif isinstance(raw, (int, np.integer)):
        name = f"#{int(raw)}"
    else:
        name = f"<{type(raw).__name__}>"
    if not isinstance(args, (str, dict)) and args is not None:
        args = "\x00"  # not JSON: the session answers with invalid_json
    return name, args


class MirrorEnv(gym.Env[dict[str, Any], dict[str, Any]]):
    """A mirror world as a Gymnasium environment. See the module docstring."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4}  # noqa: RUF012 - Gymnasium declares it so

    def __init__(
        self,
        world: str | World = "helpdesk",
        *,
        split: Split = "train",
        families: tuple[str, ...] | list[str] | None = None,
        max_steps: int = 30,
        reward: Literal["shaped", "sparse"] = "shaped",
        gamma: float = 1.0,
        judge: TextJudge | None = None,
        scale: float = 1.0,
        data_seed: int = 0,
        registry: Registry | None = None,
        render_mode: str | None = None,
        faults: Faults | str | Mapping[str, Any] | None = None,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise MirrorworldError(f"render_mode must be one of {self.metadata['render_modes']}, not {render_mode!r}")
        if isinstance(world, str):
            world = (registry or default).get(world, scale=scale, data_seed=data_seed)
        self.options = EpisodeOptions(
            max_steps=max_steps, reward=reward, gamma=gamma, judge=judge, faults=Faults.parse(faults)
        )
        self.world = world
        self.split: Split = check_split(split)
        self.families = tuple(families) if families else None
        if self.families:
            for f in self.families:
                world.family(f)
        self.max_steps = max_steps
        self.reward_mode = reward
        self.render_mode = render_mode
        self.tool_names: tuple[str, ...] = world.tool_names
        n = len(self.tool_names)
        self.observation_space, self.action_space = env_spaces(n, max_steps)
        self._all = np.ones(n, dtype=np.int8)
        self._none = np.zeros(n, dtype=np.int8)
        self._step_values = [np.array(i, dtype=np.int64) for i in range(min(max_steps, 1024) + 1)]
        self._episode: Episode | None = None
        self._obs: dict[str, Any] | None = None
        self._last_view, self._last_view_text = "", ""
        self._last_viewed: tuple[str, ...] = ()
        self._last_records = ""
        self._log: list[tuple[str, Any, str]] | None = [] if render_mode == "ansi" else None
        """What the agent sent and saw at each step, kept only to be rendered."""

    # -- Gymnasium API -------------------------------------------------------

    # Seeding NumPy's generator costs more than restoring a world, and a seeded
    # reset rarely needs it: the generator is created from the seed on first use.
    _rng: np.random.Generator | None = None
    _rng_seed: int | None = None

    @property  # type: ignore[override]
    def _np_random(self) -> np.random.Generator | None:
        if self._rng_seed is not None:
            self._rng, self._np_random_seed = seeding.np_random(self._rng_seed)
            self._rng_seed = None
        return self._rng

    @_np_random.setter
    def _np_random(self, value: np.random.Generator | None) -> None:
        self._rng, self._rng_seed = value, None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        if seed is not None:
            self._rng_seed = int(seed)
            self._np_random_seed = int(seed)
        else:
            super().reset()
        options = options or {}
        task = options.get("task")
        if task is not None and not isinstance(task, Task):
            raise MirrorworldError("options['task'] must be a Task")
        index = None
        if task is None and options.get("task_id") is None:
            index = seed if seed is not None else int(self.np_random.integers(0, MAX_INDEX + 1))
        task = select_task(
            self.world, split=self.split, families=self.families, task=task, task_id=options.get("task_id"), index=index
        )
        if self._episode is not None:
            self._episode.close()
        self._episode = Episode(self.world, task, self.options)
        self._instruction = observed_instruction(task.instruction)
        if self._log is not None:
            self._log = []
        obs = self._observe("")
        return obs, {"task_id": task.id, "family": task.family, "split": task.split}

    def step(self, action: dict[str, Any]) -> tuple[dict[str, Any], SupportsFloat, bool, bool, dict[str, Any]]:
        ep = self._episode
        if ep is None:
            raise MirrorworldError("call reset() before step()")
        name, args = decode_action(action, self.tool_names)
        outcome = ep.step(name, args)
        obs = self._observe(observed_result(outcome.content()))
        if self._log is not None:
            self._log.append((name, args, obs["last_result"]))
        return obs, outcome.reward, outcome.terminated, outcome.truncated, outcome.info()

    def render(self) -> str | None:
        """With ``render_mode="ansi"``, the episode so far as text (see the module docstring); else None."""
        if self.render_mode != "ansi" or self._obs is None or self._episode is None:
            return None
        from mirrorworld.envs.ansi import Transcript

        o, ep = self._obs, self._episode
        out = Transcript(f"[step {int(o['step'])}] {o['view']}".rstrip())
        out.said("task", self._instruction)
        for name, args, result in self._log or ():
            out.called(name, args, result)
        if ep.over:
            out.ended(ep.verdict, failure=ep.failure.message if ep.failure is not None else None)
        return out.text()

    def close(self) -> None:
        if self._episode is not None:
            self._episode.close()
            self._episode = None

    # -- extras ----------------------------------------------------------------

    def state_hash(self) -> str:
        """The canonical hash of the current episode's state."""
        if self._episode is None:
            raise MirrorworldError("call reset() first")
        return self._episode.session.state_hash()

    @property
    def episode(self) -> Episode | None:
        return self._episode

    def _view_text(self, view: str) -> str:
        if view != self._last_view:
            self._last_view, self._last_view_text = view, _ascii(view)
        return self._last_view_text

    def _records_text(self, viewed: tuple[str, ...]) -> str:
        if viewed is not self._last_viewed:
            self._last_viewed, self._last_records = viewed, ",".join(viewed)
        return self._last_records

    def _observe(self, last_result: str) -> dict[str, Any]:
        ep = self._episode
        assert ep is not None
        s = ep.session
        k = min(s.steps, self.max_steps)
        obs = {
            "instruction": self._instruction,
            "view": self._view_text(s.view),
            "records": self._records_text(s.viewed),
            "last_result": last_result,
            # Fresh arrays every time: callers keep observations (Gymnasium's checker insists).
            "tool_mask": (self._none if ep.over else self._all).copy(),
            "step": self._step_values[k].copy() if k < len(self._step_values) else np.array(k, dtype=np.int64),
        }
        self._obs = obs
        return obs
