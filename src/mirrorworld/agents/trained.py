"""``trained``: a policy that ``mirrorworld train`` trained on a world's action menu, as a chat agent.

The policy chooses among the calls of an action menu
(:class:`~mirrorworld.envs.menu.Menu`) built from what it has been shown. As a
chat agent it keeps the same menu over the conversation: the user's first
message is the instruction, each tool message is a result it was shown, any
later user message is something another party said. Every text reaches the
menu exactly as :class:`~mirrorworld.envs.gymnasium.MirrorEnv` hands it to a
trained policy (``observed_instruction`` and ``observed_result`` there), so the
features are those it was trained on, on whatever backend answers the calls:
the agent reads messages only, never a database, so it plays on the mirror and
on the real system alike (``mirrorworld fidelity --agents trained --checkpoint PATH``).

It acts greedily (the most likely call of the menu); a menu that holds no call
leaves it nothing to do, and it ends its turn with a short message.

Loading: ``TrainedAgent.load(PATH)`` takes ``policy.pt`` (or the folder
``mirrorworld train --out`` wrote) and reads the menu's size, the network's
width and the world from ``results.json`` beside it. The world an episode is
played in must be the one the policy was trained on.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from mirrorworld.agents.base import Agent, EpisodeContext, Message, assistant, tool_call
from mirrorworld.errors import MirrorworldError

__all__ = ["TrainedAgent"]

DONE = "I have done what the request needs."
"""The agent's last message when its menu holds no call."""


class TrainedAgent(Agent):
    """A menu policy trained by ``mirrorworld train``, playing through tool calls (see the module docstring)."""

    name = "trained"

    def __init__(self, policy: Any, *, world: str, slots: int, max_steps: int, source: str, digest: str) -> None:
        self.policy = policy
        self.world_name = world
        self.slots = slots
        self.max_steps = max_steps
        self.source = source
        self.digest = digest
        self._menu: Any = None
        self._read = 0
        self._calls = 0

    @classmethod
    def load(cls, path: str | Path) -> TrainedAgent:
        """The policy at ``path`` (``policy.pt`` or its folder), with ``results.json`` beside it."""
        from mirrorworld.train.ppo import MenuPolicy, _torch

        p = Path(path)
        weights = p / "policy.pt" if p.is_dir() else p
        results_path = weights.parent / "results.json"
        if not weights.is_file() or not results_path.is_file():
            raise MirrorworldError(f"{path}: a trained policy is policy.pt with results.json beside it")
        try:
            results = json.loads(results_path.read_text(encoding="utf-8"))
            args = results["args"]
            world, slots, hidden = str(args["world"]), int(args["slots"]), int(args["hidden"])
            max_steps = int(args["max_steps"])
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
            raise MirrorworldError(f"{results_path}: not the results of mirrorworld train ({err})") from None
        from mirrorworld.core.registry import default
        from mirrorworld.envs.menu import Menu

        spec_world = default.get(world)
        layout = Menu(spec_world.tools, spec_world.menu_macros(), slots, max_steps)
        torch = _torch()
        policy = MenuPolicy(layout, hidden=hidden)  # type: ignore[arg-type]
        blob = weights.read_bytes()
        try:
            state = torch.load(weights, map_location="cpu", weights_only=True)
            policy.load_state_dict(state)
        except Exception as err:  # a file torch cannot read, or weights of another shape
            raise MirrorworldError(f"{weights}: not a policy trained on {world}'s menu ({str(err)[:200]})") from None
        policy.eval()
        return cls(
            policy,
            world=world,
            slots=slots,
            max_steps=max_steps,
            source=str(weights),
            digest=hashlib.sha256(blob).hexdigest(),
        )

    def reset(self, context: EpisodeContext) -> None:
        from mirrorworld.envs.menu import Menu

        world = context.world
        if world.name != self.world_name:
            raise MirrorworldError(f"the policy was trained on {self.world_name}, not on {world.name}")
        self._menu = Menu(world.tools, world.menu_macros(), self.slots, self.max_steps)
        self._read = 0
        self._calls = 0

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> Message:
        from mirrorworld.envs.gymnasium import observed_instruction, observed_result
        from mirrorworld.envs.menu import call_args
        from mirrorworld.train.ppo import greedy_action

        menu = self._menu
        if menu is None:
            raise MirrorworldError("reset() the trained agent before it acts")
        started = self._read > 0
        for msg in messages[self._read :]:
            role, content = msg.get("role"), msg.get("content")
            text = content if isinstance(content, str) else ""
            if role == "user" and not started:
                menu.start(observed_instruction(text))
                started = True
            elif role == "tool":
                menu.shown(observed_result(text))
            elif role == "user":
                menu.note(observed_result(text))
        self._read = len(messages)
        menu.refresh(over=False)
        if not menu.items:
            return assistant(DONE)
        slot = greedy_action(self.policy, menu.features(), menu.mask())
        call = menu.choose(slot)
        if call is None:
            return assistant(DONE)
        self._calls += 1
        return assistant(None, [tool_call(f"call_{self._calls}", call.tool, call_args(call))])

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "policy": self.source, "sha256": self.digest, "world": self.world_name}
