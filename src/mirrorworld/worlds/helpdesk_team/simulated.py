"""The parties a single agent does not play: the customer and the supervisor, played by the world.

A single agent (a session called with no role: the Gymnasium and chat
environments, the conformance checks, the verifier audit) plays the staff who
hold the chat (``rules.SOLO_ROLES``). It may not act as the customer or decide
its own approval requests (``rules.OWN_TOOLS``), so the world answers for those
parties inside the agent's own call, in the same transaction:

* a question to the task's customer (``ask_customer``) or a change proposed to
  them (``propose_account_change``) is answered by the task's seeded
  :class:`~mirrorworld.sim.customer.ScriptedCustomer`, playing honestly (the
  customer answers the question asked; evasive customers and patience belong
  to the team episode, where the customer has a seat). It reads a code from
  its own mailbox when asked for one, gives a wrong order number first when its
  profile has one, and confirms a change only when it is the one it asked for;
* an approval request is decided at once by the duty supervisor, who approves
  exactly what the refund policy allows (the rule of ``approval_policy``).

Nothing here runs when a party has a seat (a call with a role): the team
episode's customer and supervisor then answer for themselves.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from mirrorworld.core.codec import encode
from mirrorworld.core.task import Task, ToolCall
from mirrorworld.core.world import World
from mirrorworld.episodes.team import RoleObservation
from mirrorworld.sim.customer import CustomerProfile, ScriptedCustomer
from mirrorworld.sim.policies import RoleContext
from mirrorworld.worlds.helpdesk_team.rules import CUSTOMER, ROLE_TOOLS

__all__ = ["customer_answer"]

_MAILBOX_READS = 2
"""How many times the customer may open their mailbox before answering."""


def _profile(task: Task, answered_order_questions: int) -> CustomerProfile | None:
    if not isinstance(task.hidden.get("customer"), dict):
        return None
    profile = CustomerProfile.from_task(task)
    facts = dict(profile.facts)
    if answered_order_questions and "wrong_order_number" in facts:
        facts.pop("wrong_order_number")  # the wrong number was given already: the customer corrects it
    return dataclasses.replace(profile, honesty="honest", facts=facts)


def customer_answer(
    world: World,
    task: Task | None,
    message: dict[str, Any],
    *,
    answered_order_questions: int,
    read_mailbox: Callable[[], dict[str, Any]],
) -> ToolCall | None:
    """What the task's customer does about staff ``message`` (an inbox item): a reply, a confirmation, or None.

    ``answered_order_questions`` is how many earlier questions about the order
    number the customer has answered in this chat; ``read_mailbox`` opens the
    customer's mailbox (the result of ``check_email``). None when the task has
    no customer profile or the message is not in the customer's chat.
    """
    if task is None:
        return None
    profile = _profile(task, answered_order_questions)
    if profile is None or message.get("chat") != profile.ticket_id:
        return None
    customer = ScriptedCustomer(profile)
    customer.reset(RoleContext(world=world, task=task, role=CUSTOMER, seed=task.seed))
    obs = RoleObservation(
        role=CUSTOMER,
        briefing="",
        inbox={"now": "", "messages": [message]},
        last_result="",
        cycle=0,
        tools=ROLE_TOOLS[CUSTOMER],
        done=False,
    )
    for _ in range(_MAILBOX_READS + 1):
        action = customer.act(obs)
        if action is None or action.tool != "check_email":
            return action if action is not None and action.tool in ("message_agent", "confirm_change") else None
        obs = dataclasses.replace(obs, last_result=encode(read_mailbox()))
    return None
