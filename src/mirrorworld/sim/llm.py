"""Seats played by a language model behind any OpenAI-compatible endpoint: the customer, and any staff role.

:class:`LLMCustomer` keeps one chat with the model per episode. The system
message is the customer's briefing (their profile: who they are, what they
want, what only they know, how they behave). At each of the customer's turns
it adds what is new — messages from the agents, the result of its own last
tool call — and the model answers with one call of the tools of the seat
it plays (``role_tools``; in the helpdesk team ``check_email``,
``message_agent``, ``confirm_change``, ``leave_chat``) or with text only,
which means waiting.

:class:`LLMStaff` plays any staff role of any seated world the same way: its
system message is the world's policy and the role's briefing, its tools the
seat's; :func:`llm_staff` is the ``llm`` policy every staff role has in
``mirrorworld run --multi-agent`` (``--policy tier1=llm --model M``).

Transport is :class:`~mirrorworld.agents.openai.OpenAIAgent` (the official
SDK); an endpoint that is down raises :class:`~mirrorworld.errors.AgentError`,
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

__all__ = ["STAFF_SYSTEM", "SYSTEM", "LLMCustomer", "LLMStaff", "llm_customer", "llm_staff"]

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


class _ModelSeat(RolePolicy):
    """A seat played by a model: one chat per episode, one tool call (or a wait) per turn."""

    def __init__(self, agent: OpenAIAgent) -> None:
        self.agent = agent

    def reset(self, context: RoleContext) -> None:
        world = context.world
        self.tools = [world.tools_by_name[name].openai_schema() for name in seats_of(world).role_tools[context.role]]
        self.chat: list[Message] = []
        self._seen = 0
        self._pending_call: str | None = None
        self._turn = 0

    def _new(self, obs: RoleObservation) -> list[dict[str, Any]]:
        """The inbox messages not seen before (and a final one, always), marking them seen."""
        messages = obs.inbox.get("messages", [])
        new = [m for m in messages if (m.get("id") or 0) > self._seen or m.get("kind") == "final"]
        self._seen = max([self._seen, *(m["id"] for m in new if isinstance(m.get("id"), int))])
        return new

    def _ask(self, obs: RoleObservation, user: str) -> Action:
        """Tell the model ``user`` (after its last call's result) and play its answer."""
        if self._pending_call is not None:
            self.chat.append({"role": "tool", "tool_call_id": self._pending_call, "content": obs.last_result})
            self._pending_call = None
        self.chat.append({"role": "user", "content": user})
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


class LLMCustomer(_ModelSeat):
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
        super().__init__(agent)
        self.enforce_patience = enforce_patience

    def reset(self, context: RoleContext) -> None:
        super().reset(context)
        self.profile = CustomerProfile.from_task(context.task)
        self._idle = 0

    def act(self, obs: RoleObservation) -> Action:
        if obs.done:
            return None
        if not self.chat:
            self.chat.append({"role": "system", "content": SYSTEM.format(briefing=obs.briefing)})
        new = self._new(obs)
        if any(m.get("kind") == "final" for m in new):
            return None
        self._idle = 0 if new else self._idle + 1
        if self.enforce_patience and self._idle >= self.profile.patience:
            if self._pending_call is not None:
                self.chat.append({"role": "tool", "tool_call_id": self._pending_call, "content": obs.last_result})
                self._pending_call = None
            return ToolCall("leave_chat", {"ticket_id": self.profile.ticket_id, "reason": "Nobody is answering me."})
        return self._ask(obs, _render(new, "", str(obs.inbox.get("now", ""))))


STAFF_SYSTEM = (
    "You work as {role} in {title}. Act only through your tools: use exactly one tool per turn when you have "
    "something to do, or reply without a tool call to wait for the others. Every tool result is JSON. "
    "Follow this policy:\n\n{policy}\n\nYour briefing:\n{briefing}"
)


class LLMStaff(_ModelSeat):
    """A staff seat (any role of any seated world) played by a model behind an OpenAI-compatible endpoint.

    Its system message is the world's policy and the role's briefing; each of
    its turns tells the model what is new in its inbox (with the result of its
    last call answering that call) and plays the one tool call it answers with,
    or a wait for an answer without one.
    """

    name = "llm"

    def reset(self, context: RoleContext) -> None:
        super().reset(context)
        self._role = context.role
        self._title = context.world.id
        self._policy = context.world.policy

    def act(self, obs: RoleObservation) -> Action:
        if obs.done:
            return None
        if not self.chat:
            system = STAFF_SYSTEM.format(role=self._role, title=self._title, policy=self._policy, briefing=obs.briefing)
            self.chat.append({"role": "system", "content": system})
        new = self._new(obs)
        return self._ask(obs, _render_staff(new, str(obs.inbox.get("now", ""))))


def _render_staff(messages: list[dict[str, Any]], now: str) -> str:
    lines = [f"Time: {now}"]
    if messages:
        lines.append("New messages for you:")
        for m in messages:
            what = m.get("kind", "message")
            if m.get("from"):
                what += f" from {m['from']}"
            if m.get("topic"):
                what += f", topic {m['topic']}"
            if m.get("ref") is not None:
                what += f", ref {m['ref']}"
            lines.append(f"- [{what}] {m.get('body', '')}")
    else:
        lines.append("Nothing new.")
    lines.append("What do you do now?")
    return "\n".join(lines)


def llm_staff(**options: Any) -> LLMStaff:
    """The ``llm`` policy of every staff role, from the runner's ``--model`` and endpoint options
    (``--base-url`` or ``OPENAI_BASE_URL``, ``--api-key-env``, ``--temperature``, ``--timeout``, ``--retries``)."""
    from mirrorworld.agents.openai import DEFAULT_KEY_ENV

    model = options.get("model")
    if not model:
        raise RegistryError("an llm staff role needs --model (and --base-url or OPENAI_BASE_URL)")
    agent = OpenAIAgent(
        base_url=options.get("base_url"),
        model=str(model),
        api_key_env=str(options.get("api_key_env") or DEFAULT_KEY_ENV),
        sampling=Sampling(
            temperature=options.get("temperature", 0.0),
            top_p=options.get("top_p"),
            max_tokens=options.get("max_tokens"),
        ),
        timeout=float(options.get("timeout") or 120.0),
        retries=int(options["retries"]) if options.get("retries") is not None else 2,
    )
    return LLMStaff(agent)


def llm_customer(**options: Any) -> LLMCustomer:
    """The ``llm`` customer of the multi-agent runner, from its ``customer_base_url`` and ``customer_model`` options."""
    base_url, model = options.get("customer_base_url"), options.get("customer_model")
    if not base_url or not model:
        raise RegistryError("the llm customer needs --customer-base-url and --customer-model")
    return LLMCustomer(base_url=str(base_url), model=str(model))
