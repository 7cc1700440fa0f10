"""The customer simulator: a deterministic, seeded customer for team episodes.

A customer is a :class:`CustomerProfile` — who they are, what they want
(``goal``), what only they know (``facts``: an order number, perhaps a wrong
one they will give first, the new email they want), how they write
(``persona``), whether they dodge the first question (``honesty``) and how
long they wait in silence before leaving (``patience``). Task families draw
the profile from the task's seed (``task.hidden["customer"]``); it is the
customer's own knowledge and reaches no other role.

:class:`ScriptedCustomer` plays a profile by rules, so the same episode plays
the same way in any process:

* a question with topic ``order_number`` is answered with the order number —
  the wrong one first if the profile has one, the right one when asked again;
* a question with topic ``verification_code`` makes the customer open their
  mailbox (``check_email``) and read the newest code back;
* any other question is answered with the goal;
* a request to confirm a change is confirmed when the change is the one the
  customer asked for and declined otherwise (dual control);
* an evasive customer dodges the first question they are asked;
* when no agent has written for ``patience`` turns in a row, the customer
  leaves the chat (``leave_chat``), and the contact ends unresolved.

Its wording varies with the persona, never the facts it states.

It speaks the contact-center protocol of the helpdesk team, as data: the
tools ``message_agent``, ``check_email``, ``confirm_change`` and
``leave_chat``, and inbox messages of kind ``question`` (with a ``topic``),
``confirmation_request`` and ``final``. It imports no world.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mirrorworld.core.task import Task, ToolCall
from mirrorworld.episodes.team import Action, RoleObservation
from mirrorworld.sim.policies import RoleContext, RolePolicy

__all__ = ["CustomerProfile", "ScriptedCustomer"]

_CODE = re.compile(r"(?<!\d)(\d{6})(?!\d)")
_CHANGE = re.compile(r"set the (\w+) on your account to (.+)\.$")
"""The wording of a confirmation request (``propose_account_change``): which field, which new value."""


@dataclass(frozen=True)
class CustomerProfile:
    """A simulated customer. See the module docstring."""

    name: str
    email: str
    ticket_id: int
    goal: str
    facts: Mapping[str, Any] = field(default_factory=dict)
    persona: str = "polite"
    honesty: str = "honest"
    patience: int = 12

    @classmethod
    def from_task(cls, task: Task) -> CustomerProfile:
        """The profile a team task draws for its customer (``task.hidden["customer"]``)."""
        data = task.hidden.get("customer")
        if not isinstance(data, dict):
            raise ValueError(f"task {task.id} has no customer profile")
        return cls(
            name=str(data["name"]),
            email=str(data["email"]),
            ticket_id=int(data["ticket_id"]),
            goal=str(data["goal"]),
            facts=dict(data.get("facts", {})),
            persona=str(data.get("persona", "polite")),
            honesty=str(data.get("honesty", "honest")),
            patience=int(data.get("patience", 12)),
        )


_SAY = {
    "order": {
        "polite": "Sure! It's order #{n}.",
        "terse": "#{n}",
        "anxious": "Oh no, is something wrong? It's order #{n}.",
    },
    "correction": {
        "polite": "Oh, I'm so sorry - I checked my receipt and it's order #{n}.",
        "terse": "My mistake. #{n}",
        "anxious": "Oh dear, sorry! I looked again, it's order #{n}.",
    },
    "code": {
        "polite": "Got it - the code is {c}.",
        "terse": "{c}",
        "anxious": "I think it's {c}... did that work?",
    },
    "no_code": {
        "polite": "I'm sorry, I don't see any code in my mailbox.",
        "terse": "No email.",
        "anxious": "There's nothing in my mailbox, is that bad?",
    },
    "dodge": {
        "polite": "Hmm, I don't have that in front of me right now. Do you really need it?",
        "terse": "Why do you need that?",
        "anxious": "I'm not sure where to find that... is it important?",
    },
    "goal": {
        "polite": "Thanks for asking! {goal}",
        "terse": "{goal}",
        "anxious": "I just really need this sorted: {goal}",
    },
    "leave": {
        "polite": "I've waited a long time without an answer, so I'll try again another day.",
        "terse": "Too slow. Bye.",
        "anxious": "Nobody is answering me... I'm leaving.",
    },
}


class ScriptedCustomer(RolePolicy):
    """A rule-based customer playing a :class:`CustomerProfile`. See the module docstring."""

    name = "scripted"

    def __init__(self, profile: CustomerProfile | None = None) -> None:
        self.fixed_profile = profile

    def reset(self, context: RoleContext) -> None:
        self.profile = self.fixed_profile or CustomerProfile.from_task(context.task)
        self._handled: set[int] = set()
        self._idle = 0
        self._dodged = False
        self._gave_wrong = False
        self._reading: int | None = None

    def _say(self, key: str, **values: Any) -> str:
        forms = _SAY[key]
        return forms.get(self.profile.persona, forms["polite"]).format(**values)

    def _message(self, text: str) -> ToolCall:
        return ToolCall("message_agent", {"ticket_id": self.profile.ticket_id, "message": text})

    def act(self, obs: RoleObservation) -> Action:
        if obs.done:
            return None
        messages = obs.inbox.get("messages", [])
        if any(m.get("kind") == "final" for m in messages):
            return None
        if self._reading is not None:
            return self._read_code(obs)
        todo = [
            m
            for m in messages
            if m.get("kind") in ("question", "confirmation_request")
            and isinstance(m.get("id"), int)
            and m["id"] not in self._handled
        ]
        if not todo:
            self._idle += 1
            if self._idle >= self.profile.patience:
                return ToolCall("leave_chat", {"ticket_id": self.profile.ticket_id, "reason": self._say("leave")})
            return None
        self._idle = 0
        m = todo[0]
        if m["kind"] == "confirmation_request":
            self._handled.add(m["id"])
            return self._confirm(m)
        if self.profile.honesty == "evasive" and not self._dodged:
            self._dodged = True
            self._handled.add(m["id"])
            return self._message(self._say("dodge"))
        topic = m.get("topic")
        if topic == "verification_code":
            self._reading = m["id"]
            return ToolCall("check_email", {"ticket_id": self.profile.ticket_id})
        self._handled.add(m["id"])
        facts = self.profile.facts
        if topic == "order_number" and facts.get("order_number") is not None:
            wrong = facts.get("wrong_order_number")
            if wrong is not None and not self._gave_wrong:
                self._gave_wrong = True
                return self._message(self._say("order", n=wrong))
            key = "correction" if wrong is not None else "order"
            return self._message(self._say(key, n=facts["order_number"]))
        return self._message(self._say("goal", goal=self.profile.goal))

    def _read_code(self, obs: RoleObservation) -> Action:
        question, self._reading = self._reading, None
        if question is not None:
            self._handled.add(question)
        try:
            data = obs.result()
        except ValueError:
            data = None
        emails = data.get("emails", []) if isinstance(data, dict) else []
        for email in emails:  # newest first
            m = _CODE.search(str(email.get("body", "")))
            if m:
                return self._message(self._say("code", c=m.group(1)))
        return self._message(self._say("no_code"))

    def _confirm(self, message: dict[str, Any]) -> ToolCall:
        m = _CHANGE.search(str(message.get("body", "")))
        wanted = self.profile.facts.get(f"new_{m.group(1)}") if m else None
        ok = m is not None and wanted is not None and m.group(2).strip().lower() == str(wanted).strip().lower()
        return ToolCall(
            "confirm_change",
            {"ticket_id": self.profile.ticket_id, "change_id": message.get("ref"), "confirm": ok},
        )
