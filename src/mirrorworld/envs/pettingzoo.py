"""Any world with seats as PettingZoo environments: ``AECEnv`` and ``ParallelEnv``.

Usage, as with any PettingZoo environment module::

    from mirrorworld.envs.pettingzoo import env_module, helpdesk_v0

    env = helpdesk_v0.env(max_cycles=40)           # AEC: one role at a time
    par = helpdesk_v0.parallel_env(max_cycles=40)  # Parallel: every role at once
    mine = env_module("my_world").parallel_env()   # any registered world that declares seats

Needs the ``multiagent`` extra (PettingZoo). The environments read the world
only through its seats (:class:`~mirrorworld.core.seats.Seated`) and step a
:class:`~mirrorworld.episodes.TeamEpisode`; they import no world.

**Agents** are the roles of the task's contact, in turn order (for the helpdesk
team: ``customer``, ``tier1``, ``supervisor`` and, for contacts that need it,
``tier2``; ``possible_agents`` lists every role the environment's task
families use). Pass ``customer=ScriptedCustomer()`` (or any
:class:`~mirrorworld.sim.policies.RolePolicy`) to simulate the world's
``simulated_role`` inside the environment: it then acts first in every cycle
and is not an agent.

**Observations** (partial: each role sees only its own seat, its briefing and
its inbox, as the world's seats define them) are
``{"observation": {...}}`` whose leaves are NumPy arrays with fixed dtypes:

* ``briefing``, ``inbox``, ``last_result`` — ASCII text as ``uint8`` arrays,
  zero-padded (:func:`decode_text`; :func:`to_role_observation` decodes a whole
  observation). ``inbox`` is JSON ``{"now", "messages"}``; ``last_result`` is the
  JSON result of the role's own last call, an error being
  ``{"error": {code, message}}``;
* ``cycle`` — the cycle number (``int64``);
* ``tool_mask`` — which actions the role can take (``int8``; all of them while
  the contact lasts: a call the world refuses is an error observation, not an
  illegal action).

**Actions** are ``{"tool": Discrete(n + 1), "args": Text}``: index 0 is
``wait``, index ``i`` the role's ``i``-th tool (``env.tools(agent)``), ``args``
the JSON arguments. A tool name instead of an index, a dict of arguments and
``None`` (wait) are accepted too. Nothing an agent sends raises: a tool outside
its seat is refused with ``not_permitted``, bad arguments get the session's
error result, and neither changes the state.

**One cycle** is one turn of every live agent (AEC) or one joint action
(Parallel; the joint action is applied in turn order). The episode terminates
for every agent when a final message is sent or the customer leaves, and
truncates after ``max_cycles`` cycles (or ``max_steps`` tool calls, when given).
After the end every action is refused with ``episode_over`` and changes
nothing, as in every adapter.

**Rewards** come from the shared verifier (see :class:`~mirrorworld.episodes.team.TeamEpisode`):
the team's score at the end (plus potential-based shaping with
``reward="shaped"``) for every agent, and ``-penalty`` for each hard rule an
agent's own calls broke. ``infos[agent]`` holds the agent's last call
(``tool``, ``ok``, ``error``) and, at the end, the ``verdict`` and its
``role_term``.

``reset(seed=s)`` starts task ``s`` of the split (families cycle); without a
seed the task index comes from the environment's seeded generator.
``options={"task": Task}`` or ``{"task_id": "family/seed"}`` picks a task.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding

try:
    from pettingzoo import AECEnv, ParallelEnv  # type: ignore[import-untyped]
    from pettingzoo.utils import AgentSelector, wrappers  # type: ignore[import-untyped]
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("mirrorworld.envs.pettingzoo needs PettingZoo: pip install 'mirrorworld[multiagent]'") from exc

from mirrorworld.core.registry import Registry, default
from mirrorworld.core.seats import Seated, seats_of
from mirrorworld.core.task import MAX_INDEX, Split, Task, ToolCall
from mirrorworld.core.world import World
from mirrorworld.episodes import EPISODE_OVER, WAIT, RoleObservation, TeamEpisode, check_split, select_task
from mirrorworld.errors import MirrorworldError
from mirrorworld.sim.policies import RoleContext, RolePolicy

__all__ = [
    "ARGS_LENGTH",
    "DEFAULT_WORLD",
    "TEXT_FIELDS",
    "EnvModule",
    "HelpdeskTeamAEC",
    "HelpdeskTeamParallel",
    "SeatedAEC",
    "SeatedParallel",
    "decode_text",
    "encode_text",
    "env_module",
    "helpdesk_v0",
    "to_role_observation",
]

TEXT_FIELDS: dict[str, int] = {"briefing": 2048, "inbox": 4096, "last_result": 8192}
"""The text leaves of an observation and their lengths in bytes."""

ARGS_LENGTH = 8192
"""Longest ``args`` text of an action."""

CYCLE_BOUND = 1_000_000
"""Upper bound of the ``cycle`` leaf (``max_cycles`` may be raised after construction)."""

_METADATA: dict[str, Any] = {"render_modes": ["ansi"], "name": "helpdesk_team_v0", "is_parallelizable": True}

DEFAULT_WORLD = "helpdesk_team"
"""The world the environments play when none is named."""

_CUT = "...[truncated]"
_NOT_ASCII = re.compile(f"[^{re.escape(string.printable)}]")


def encode_text(text: str, length: int) -> np.ndarray:
    """``text`` as a zero-padded ``uint8`` array of ``length`` bytes (non-printable characters become ``?``)."""
    clean = _NOT_ASCII.sub("?", text)
    if len(clean) > length:
        clean = clean[: length - len(_CUT)] + _CUT
    out = np.zeros(length, dtype=np.uint8)
    data = np.frombuffer(clean.encode("ascii"), dtype=np.uint8)
    out[: len(data)] = data
    return out


def decode_text(array: np.ndarray) -> str:
    """The text an :func:`encode_text` array holds."""
    raw = np.asarray(array, dtype=np.uint8).tobytes()
    end = raw.find(b"\x00")
    return (raw if end < 0 else raw[:end]).decode("ascii", "replace")


def _inbox_text(inbox: dict[str, Any], length: int) -> str:
    """The inbox as JSON within ``length`` bytes: the oldest messages go first when it does not fit."""
    messages = list(inbox.get("messages", []))
    while True:
        text = json.dumps({**inbox, "messages": messages}, separators=(",", ":"), ensure_ascii=True)
        if len(text) <= length or not messages:
            return text[:length]
        messages = messages[1:]


def to_role_observation(obs: Mapping[str, Any], role: str, tools: Sequence[str] = ()) -> RoleObservation:
    """Decode one agent's observation into the :class:`RoleObservation` the role policies read."""
    o = obs["observation"]
    inbox_text = decode_text(o["inbox"])
    try:
        inbox = json.loads(inbox_text) if inbox_text else {}
    except ValueError:
        inbox = {}
    return RoleObservation(
        role=role,
        briefing=decode_text(o["briefing"]),
        inbox=inbox if isinstance(inbox, dict) else {},
        last_result=decode_text(o["last_result"]),
        cycle=int(o["cycle"]),
        tools=tuple(tools),
        done=not bool(np.asarray(o["tool_mask"])[1:].any()),
    )


class _Core:
    """What the AEC and the parallel environment share: spaces, actions, observations, the episode."""

    def __init__(
        self,
        world: str | World | None,
        *,
        split: Split,
        families: Sequence[str] | None,
        max_cycles: int,
        reward: Literal["shaped", "sparse"],
        penalty: float,
        customer: RolePolicy | None,
        max_steps: int | None,
        registry: Registry | None,
    ) -> None:
        if world is None:
            world = DEFAULT_WORLD
        if isinstance(world, str):
            world = (registry or default).get(world)
        seats = seats_of(world)
        if reward not in ("shaped", "sparse"):
            raise MirrorworldError(f"reward must be shaped or sparse, not {reward!r}")
        self.world = world
        self.seats: Seated = seats
        self.max_steps = max_steps
        self.split: Split = check_split(split)
        self.families = tuple(families) if families else None
        for f in self.families or ():
            world.family(f)
        self.max_cycles = max_cycles
        self.reward: Literal["shaped", "sparse"] = reward
        self.penalty = penalty
        self.customer = customer
        if customer is not None and seats.simulated_role is None:
            raise MirrorworldError(f"world {world.name} has no simulated role for a customer policy to play")
        self.simulated = seats.simulated_role if customer is not None else None
        names = self.families or tuple(f.name for f in world.families)
        used = {r for f in names for r in seats.task_roles(world.task(f, 0))}
        self.possible_agents: list[str] = [r for r in seats.roles if r in used and r != self.simulated]
        self.tools: dict[str, tuple[str, ...]] = {r: seats.role_tools[r] for r in self.possible_agents}
        self.observation_spaces: dict[str, spaces.Dict] = {}
        self.action_spaces: dict[str, spaces.Dict] = {}
        for r in self.possible_agents:
            n = len(self.tools[r]) + 1
            leaves: dict[str, spaces.Space[Any]] = {
                name: spaces.Box(0, 255, shape=(length,), dtype=np.uint8) for name, length in TEXT_FIELDS.items()
            }
            leaves["cycle"] = spaces.Box(0, CYCLE_BOUND, shape=(), dtype=np.int64)
            leaves["tool_mask"] = spaces.Box(0, 1, shape=(n,), dtype=np.int8)
            self.observation_spaces[r] = spaces.Dict({"observation": spaces.Dict(leaves)})
            self.action_spaces[r] = spaces.Dict(
                {
                    "tool": spaces.Discrete(n),
                    "args": spaces.Text(ARGS_LENGTH, min_length=0, charset=string.printable),
                }
            )
        self.episode: TeamEpisode | None = None
        self.rng: np.random.Generator | None = None

    # -- episodes ------------------------------------------------------------------

    def start(self, seed: int | None, options: dict[str, Any] | None) -> TeamEpisode:
        if seed is not None:
            self.rng, _ = seeding.np_random(int(seed))
        elif self.rng is None:
            self.rng, _ = seeding.np_random()
        options = options or {}
        task = options.get("task")
        if task is not None and not isinstance(task, Task):
            raise MirrorworldError("options['task'] must be a Task")
        index = None
        if task is None and options.get("task_id") is None:
            index = int(seed) if seed is not None else int(self.rng.integers(0, MAX_INDEX + 1))
        task = select_task(
            self.world, split=self.split, families=self.families, task=task, task_id=options.get("task_id"), index=index
        )
        if self.episode is not None:
            self.episode.close()
        self.episode = TeamEpisode(
            self.world,
            task,
            max_cycles=self.max_cycles,
            reward=self.reward,
            penalty=self.penalty,
            max_steps=self.max_steps,
        )
        if self.customer is not None and self.simulated is not None:
            self.customer.reset(RoleContext(self.world, task, self.simulated, task.seed))
        return self.episode

    @property
    def ep(self) -> TeamEpisode:
        if self.episode is None:
            raise MirrorworldError("call reset() first")
        return self.episode

    def agents_of(self, ep: TeamEpisode) -> list[str]:
        return [r for r in ep.roles if r in self.possible_agents]

    def cycle_start(self) -> None:
        """The simulated customer's turn, first in every cycle."""
        ep, role = self.ep, self.simulated
        if self.customer is not None and role is not None and not ep.over and role in ep.roles:
            action = self.customer.act(ep.observe(role))
            if action is None:
                ep.act(role, None)
            else:
                ep.act(role, action.tool, action.args)

    # -- actions -------------------------------------------------------------------

    def parse(self, agent: str, action: Any) -> tuple[str | None, Any]:
        """(tool name or None for wait, arguments) of an agent's action, tolerating junk."""
        if action is None:
            return None, None
        if isinstance(action, ToolCall):
            return action.tool, action.args
        raw: Any
        args: Any = None
        if isinstance(action, Mapping):
            raw = action.get("tool")
            args = action.get("args")
        else:
            raw = action
        tools = self.tools[agent]
        if isinstance(raw, np.ndarray) and raw.ndim == 0 and raw.dtype.kind in "iu":
            raw = int(raw)  # a 0-d array, as vectorised samplers give a Discrete action
        name: str | None
        if raw is None:
            name = None
        elif isinstance(raw, str):
            name = raw
        elif isinstance(raw, (int, np.integer)) and not isinstance(raw, bool):
            i = int(raw)
            name = WAIT if i == 0 else tools[i - 1] if 0 < i <= len(tools) else f"#{i}"
        else:
            name = f"<{type(raw).__name__}>"
        if isinstance(args, np.ndarray):
            args = str(args)
        if args is not None and not isinstance(args, (str, Mapping)):
            args = "\x00"  # not JSON: the session answers with invalid_json
        return name, args

    def apply(self, agent: str, action: Any) -> dict[str, Any]:
        """Play one agent's action; return its info."""
        tool, args = self.parse(agent, action)
        result = self.ep.act(agent, tool, args)
        info: dict[str, Any] = {"tool": None if tool in (None, WAIT) else tool, "ok": True}
        if result is not None and not result.ok:
            info["ok"] = False
            info["error"] = result.error
        return info

    # -- observations ----------------------------------------------------------------

    def observe(self, agent: str) -> dict[str, Any]:
        ep = self.ep
        o = ep.observe(agent)
        mask = np.zeros(len(self.tools[agent]) + 1, dtype=np.int8)
        mask[0] = 1
        if not o.done:
            mask[:] = 1
        return {
            "observation": {
                "briefing": encode_text(o.briefing, TEXT_FIELDS["briefing"]),
                "inbox": encode_text(_inbox_text(o.inbox, TEXT_FIELDS["inbox"]), TEXT_FIELDS["inbox"]),
                "last_result": encode_text(o.last_result, TEXT_FIELDS["last_result"]),
                "cycle": np.array(min(o.cycle, CYCLE_BOUND), dtype=np.int64),
                "tool_mask": mask,
            }
        }

    def final_info(self, agent: str) -> dict[str, Any]:
        ep = self.ep
        verdict = ep.verdict
        if verdict is None:
            return {}
        return {
            "verdict": verdict.to_dict(),
            "role_term": ep.role_terms().get(agent, 0.0),
            "customer_left": ep.customer_left,
        }

    def render(self) -> str:
        ep = self.episode
        if ep is None:
            return ""
        lines = [f"{ep.task.id}  cycle {ep.cycle}/{ep.max_cycles}"]
        for t in ep.turns[-8:]:
            what = "wait" if t.tool is None else f"{t.tool} {'ok' if t.ok else (t.error or {}).get('code')}"
            lines.append(f"  [{t.cycle}] {t.role}: {what}")
        if ep.verdict is not None:
            lines.append(f"  verdict: {'passed' if ep.verdict.passed else 'failed'}")
        return "\n".join(lines)


class _TeamEnv:
    """What both PettingZoo APIs share: the episode core, the spaces and the role accessors."""

    def __init__(
        self,
        world: str | World | None = None,
        *,
        split: Split = "train",
        families: Sequence[str] | None = None,
        max_cycles: int = 40,
        reward: Literal["shaped", "sparse"] = "shaped",
        penalty: float = 1.0,
        customer: RolePolicy | None = None,
        max_steps: int | None = None,
        registry: Registry | None = None,
        render_mode: str | None = None,
    ) -> None:
        super().__init__()
        self._core = _Core(
            world,
            split=split,
            families=families,
            max_cycles=max_cycles,
            reward=reward,
            penalty=penalty,
            customer=customer,
            max_steps=max_steps,
            registry=registry,
        )
        self.possible_agents = list(self._core.possible_agents)
        self.observation_spaces = dict(self._core.observation_spaces)
        self.action_spaces = dict(self._core.action_spaces)
        self.render_mode = render_mode
        self.agents: list[str] = []
        self.metadata: dict[str, Any] = {**_METADATA, "name": f"{self._core.world.name}_v0"}

    @property
    def max_cycles(self) -> int:
        return self._core.max_cycles

    @max_cycles.setter
    def max_cycles(self, value: int) -> None:
        self._core.max_cycles = int(value)

    @property
    def world(self) -> World:
        return self._core.world

    def contacts(self, agent: str) -> tuple[str, ...]:
        """The roles ``agent`` can hand work off to."""
        return self._core.seats.contacts_of(agent)

    @property
    def episode(self) -> TeamEpisode | None:
        """The running episode (its session, turns and verdict)."""
        return self._core.episode

    def tools(self, agent: str) -> tuple[str, ...]:
        """The tool names of ``agent``'s action indices 1..n (index 0 is ``wait``)."""
        return self._core.tools[agent]

    def tool_schemas(self, agent: str) -> list[dict[str, Any]]:
        """``agent``'s tools in OpenAI function-calling format, in action-index order (for model-backed agents)."""
        return [self._core.world.tools_by_name[name].openai_schema() for name in self._core.tools[agent]]

    def observation_space(self, agent: str) -> spaces.Dict:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Dict:
        return self.action_spaces[agent]

    def role_observation(self, agent: str) -> RoleObservation:
        """``agent``'s observation as the role policies read it (no encoding round trip)."""
        return self._core.ep.observe(agent)


class SeatedAEC(_TeamEnv, AECEnv[str, dict[str, Any], Any]):  # type: ignore[misc]  # PettingZoo is untyped
    """A seated world, one role at a time (AEC). See the module docstring."""

    metadata = _METADATA

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        ep = self._core.start(seed, options)
        self.agents = self._core.agents_of(ep)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos: dict[str, dict[str, Any]] = {a: {} for a in self.agents}
        self._selector = AgentSelector(self.agents)
        self.agent_selection = self._selector.reset()
        self._core.cycle_start()
        self._after_step()
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)

    def observe(self, agent: str) -> dict[str, Any]:
        return self._core.observe(agent)

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            if action is not None:  # a call after the end: refused as everywhere, then PettingZoo's removal
                tool, _ = self._core.parse(agent, action)
                self.infos[agent] = {**self.infos[agent], "tool": tool, "ok": False, "error": dict(EPISODE_OVER)}
            self._was_dead_step(None)
            return
        self._cumulative_rewards[agent] = 0.0
        ep = self._core.ep
        self.infos[agent] = self._core.apply(agent, action)
        if self._selector.is_last() and not ep.over:
            ep.end_cycle()
            self._core.cycle_start()
        self._after_step()
        self.agent_selection = self._selector.next()
        self._accumulate_rewards()
        self._deads_step_first()

    def _after_step(self) -> None:
        ep = self._core.ep
        earned = ep.pop_rewards()
        self.rewards = {a: earned.get(a, 0.0) for a in self.agents}
        if ep.over:
            terminated = ep.terminated
            for a in self.agents:
                self.terminations[a] = terminated
                self.truncations[a] = not terminated
                self.infos[a] = {**self.infos.get(a, {}), **self._core.final_info(a)}

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return self._core.render()

    def close(self) -> None:
        if self._core.episode is not None:
            self._core.episode.close()
            self._core.episode = None


class SeatedParallel(_TeamEnv, ParallelEnv[str, dict[str, Any], Any]):  # type: ignore[misc]  # PettingZoo is untyped
    """A seated world, every role at once (Parallel). See the module docstring."""

    metadata = _METADATA

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        ep = self._core.start(seed, options)
        self.agents = self._core.agents_of(ep)
        self._core.cycle_start()
        ep.pop_rewards()
        infos: dict[str, dict[str, Any]] = {a: {} for a in self.agents}
        obs = {a: self._core.observe(a) for a in self.agents}
        if ep.over:  # the simulated customer left before anyone acted
            infos = {a: self._core.final_info(a) for a in self.agents}
        return obs, infos

    def step(
        self, actions: Mapping[str, Any]
    ) -> tuple[dict[str, Any], dict[str, float], dict[str, bool], dict[str, bool], dict[str, dict[str, Any]]]:
        ep = self._core.ep
        agents = list(self.agents)
        infos: dict[str, dict[str, Any]] = {a: {"tool": None, "ok": True} for a in agents}
        for agent in agents:
            if ep.over:
                break
            infos[agent] = self._core.apply(agent, actions.get(agent))
        if not ep.over:
            ep.end_cycle()
            self._core.cycle_start()
        earned = ep.pop_rewards()
        rewards = {a: earned.get(a, 0.0) for a in agents}
        obs = {a: self._core.observe(a) for a in agents}
        over = ep.over
        terminated = over and ep.terminated
        terminations = dict.fromkeys(agents, terminated)
        truncations = dict.fromkeys(agents, over and not terminated)
        if over:
            infos = {a: {**infos[a], **self._core.final_info(a)} for a in agents}
            self.agents = []
        return obs, rewards, terminations, truncations, infos

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return self._core.render()

    def close(self) -> None:
        if self._core.episode is not None:
            self._core.episode.close()
            self._core.episode = None


HelpdeskTeamAEC = SeatedAEC
"""The AEC environment (its default world is the helpdesk team)."""
HelpdeskTeamParallel = SeatedParallel
"""The parallel environment (its default world is the helpdesk team)."""


@dataclass(frozen=True)
class EnvModule:
    """A PettingZoo-style environment module for one world: ``env()``, ``raw_env()``, ``parallel_env()``."""

    world: str
    __name__: str

    def raw_env(self, **kwargs: Any) -> SeatedAEC:
        """The AEC environment without wrappers."""
        return SeatedAEC(**{"world": self.world, **kwargs})

    def env(self, **kwargs: Any) -> AECEnv[str, dict[str, Any], Any]:
        """The AEC environment, wrapped as PettingZoo environments conventionally are (order enforcing)."""
        return wrappers.OrderEnforcingWrapper(self.raw_env(**kwargs))

    def parallel_env(self, **kwargs: Any) -> SeatedParallel:
        """The parallel environment."""
        return SeatedParallel(**{"world": self.world, **kwargs})


def env_module(world: str) -> EnvModule:
    """The environment module of a registered seated world (``env_module("helpdesk_team").env()``)."""
    return EnvModule(world, f"{world}_v0")


helpdesk_v0 = env_module(DEFAULT_WORLD)
"""``from mirrorworld.envs.pettingzoo import helpdesk_v0``: ``helpdesk_v0.env()``, ``helpdesk_v0.parallel_env()``."""
raw_env = helpdesk_v0.raw_env
env = helpdesk_v0.env
parallel_env = helpdesk_v0.parallel_env
