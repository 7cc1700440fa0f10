"""A customer played by a language model behind any OpenAI-compatible endpoint.

:class:`LLMCustomer` keeps one chat with the model per episode. The system
message is the customer's briefing (their profile: who they are, what they
want, what only they know, how they behave). At each of the customer's turns
it adds what is new — messages from the agents, the result of its own last
tool call — and the model answers with one call of the tools of the seat
it plays (``role_tools``; in the helpdesk team ``check_email``,
``message_agent``, ``confirm_change``, ``leave_chat``) or with text only,
which means waiting.

Transport is :class:`~mirrorworld.agents.openai.OpenAIAgent` (standard
library only); an endpoint that is down raises :class:`~mirrorworld.errors.AgentError`,
which the runner records as an errored episode, never as the team's failure.

Patience is kept outside the model: after ``patience`` turns in a row with
nothing new from the agents, the customer leaves (``leave_chat``), as the
scripted one does.

:func:`llm_customer` is the factory a world's ``policy_menu`` names (the
helpdesk team's ``llm`` customer): it takes the multi-agent runner's options.
"""

from __future__ import annotations

import json
from typing import Any

from mirrorworld.agents.base import Message
from mirrorworld.agents.openai import OpenAIAgent, Sampling
from mirrorworld.core.seats import seats_of
from mirrorworld.core.task import ToolCall
from mirrorworld.episodes.team import Action, RoleObservation
from mirrorworld.errors import RegistryError
from mirrorworld.sim.customer import CustomerProfile
from mirrorworld.sim.policies import RoleContext, RolePolicy

__all__ = ["SYSTEM", "LLMCustomer", "llm_customer"]

SYSTEM = (
    "You are role-playing a customer in a live support chat. Stay in character; never reveal that you are "
    "simulated. Use exactly one tool per turn when you have something to do, or reply without a tool call to "
    "wait for the agent. Only state facts from your briefing or your mailbox.\n\n{briefing}"
)


def _render(messages: list[dict[str, Any]], last_result: str, now: str) -> str:
    lines = [f"Time: {now}"]
    if messages:
        lines.append("New messages from the support team:")
        for m in messages:
            what = m.get("kind", "message")
            if m.get("topic"):
                what += f", topic {m['topic']}"
            if m.get("ref") is not None:
                what += f", ref {m['ref']}"
            lines.append(f"- [{what}] {m.get('body', '')}")
    else:
        lines.append("Nothing new from the support team.")
    if last_result:
        lines.append(f"Result of your last action: {last_result}")
    lines.append("What do you do now?")
    return "\n".join(lines)


def _as_text(args: Any) -> str:
    if isinstance(args, str):
        return args
    return json.dumps(args if args is not None else {}, default=str)


class LLMCustomer(RolePolicy):
    """A model-played customer. See the module docstring."""

    name = "llm"

    def __init__(
        self,
        *,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        agent: OpenAIAgent | None = None,
        temperature: float = 0.0,
        timeout: float = 60.0,
        enforce_patience: bool = True,
    ) -> None:
        if agent is None:
            if not base_url or not model:
                raise ValueError("LLMCustomer needs base_url and model (or an agent)")
            agent = OpenAIAgent(
                base_url=base_url, model=model, api_key=api_key, sampling=Sampling(temperature), timeout=timeout
            )
        self.agent = agent
        self.enforce_patience = enforce_patience

    def reset(self, context: RoleContext) -> None:
        world = context.world
        self.profile = CustomerProfile.from_task(context.task)
        self.tools = [world.tools_by_name[name].openai_schema() for name in seats_of(world).role_tools[context.role]]
        self.chat: list[Message] = []
        self._seen = 0
        self._idle = 0
        self._pending_call: str | None = None
        self._turn = 0

    def act(self, obs: RoleObservation) -> Action:
        if obs.done:
            return None
        if not self.chat:
            self.chat.append({"role": "system", "content": SYSTEM.format(briefing=obs.briefing)})
        messages = obs.inbox.get("messages", [])
        new = [m for m in messages if (m.get("id") or 0) > self._seen or m.get("kind") == "final"]
        if any(m.get("kind") == "final" for m in new):
            return None
        self._seen = max([self._seen, *(m["id"] for m in new if isinstance(m.get("id"), int))])
        if self._pending_call is not None:
            self.chat.append({"role": "tool", "tool_call_id": self._pending_call, "content": obs.last_result})
            self._pending_call = None
        self._idle = 0 if new else self._idle + 1
        if self.enforce_patience and self._idle >= self.profile.patience:
            return ToolCall("leave_chat", {"ticket_id": self.profile.ticket_id, "reason": "Nobody is answering me."})
        self.chat.append({"role": "user", "content": _render(new, "", str(obs.inbox.get("now", "")))})
        reply = self.agent.act(list(self.chat), self.tools)
        calls = reply.get("tool_calls") or []
        self._turn += 1
        if not calls or not isinstance(calls, list) or not isinstance(calls[0], dict):
            self.chat.append({"role": "assistant", "content": reply.get("content") or ""})
            return None
        call = calls[0]
        raw_fn = call.get("function")
        fn: dict[str, Any] = raw_fn if isinstance(raw_fn, dict) else {}
        call_id = str(call.get("id") or f"call_{self._turn}")
        raw_name = fn.get("name")
        name = raw_name if isinstance(raw_name, str) else "<malformed>"
        args = fn.get("arguments")
        if args is not None and not isinstance(args, (str, dict)):
            args = json.dumps(args, default=str)
        self.chat.append(
            {
                "role": "assistant",
                "content": reply.get("content"),
                "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": name, "arguments": _as_text(args)}}
                ],
            }
        )
        self._pending_call = call_id
        return ToolCall(name, args if args is not None else {})


def llm_customer(**options: Any) -> LLMCustomer:
    """The ``llm`` customer of the multi-agent runner, from its ``customer_base_url`` and ``customer_model`` options."""
    base_url, model = options.get("customer_base_url"), options.get("customer_model")
    if not base_url or not model:
        raise RegistryError("the llm customer needs --customer-base-url and --customer-model")
    return LLMCustomer(base_url=str(base_url), model=str(model))
