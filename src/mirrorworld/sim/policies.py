"""Policies for the roles of a team: the interface and the scripted staff.

A :class:`RolePolicy` plays one role. At each of its turns it gets that role's
:class:`~mirrorworld.episodes.team.RoleObservation` and answers with one tool call
or ``None`` (wait). ``reset`` hands it a :class:`RoleContext` whose ``task`` is
privileged: only gold policies and test doubles may read it (the gold staff
read the task's gold plan; the scripted customer reads only its own profile,
``task.hidden["customer"]``).

Scripted staff shipped here:

* :class:`GoldStaff` — plays its role's share of the task's gold trajectory,
  waiting for the other parties' hand-offs and taking what only the customer
  knows (order numbers, codes) from what the customer actually said; when an
  answer lacks it, it asks again;
* :class:`DiligentSupervisor` — opens the order of every pending approval
  request and approves exactly what the policy allows;
* :class:`RubberStampSupervisor` — approves every request unread (a test
  double: the supervisor the per-role penalty exists for);
* :class:`OverreachingStaff` — gold staff who ask for and refund $50 more
  than the line allows (a test double for the supervisor's judgement);
* :class:`IdlePolicy`, :class:`RefusePolicy`, :class:`ClaimPolicy` — null
  baselines: wait forever, refuse at once, claim success without acting.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from mirrorworld.core.seats import seats_of
from mirrorworld.core.task import Task, ToolCall
from mirrorworld.core.world import World
from mirrorworld.episodes.team import Action, RoleObservation

__all__ = [
    "CLAIM",
    "REFUSAL",
    "ClaimPolicy",
    "DiligentSupervisor",
    "GoldStaff",
    "IdlePolicy",
    "OverreachingStaff",
    "RefusePolicy",
    "RoleContext",
    "RolePolicy",
    "RubberStampSupervisor",
    "extract",
]

REFUSAL = "I'm sorry, but I can't help with that request."
CLAIM = "All done! I've taken care of everything you asked for and your issue is fully resolved."

_ORDER = re.compile(r"#\s*(\d{1,9})\b")
_NUMBER = re.compile(r"(?<![\d.])(\d{1,9})(?![\d.])")
_CODE = re.compile(r"(?<!\d)(\d{6})(?!\d)")


def extract(fact: str, text: str | None) -> Any:
    """The value of ``fact`` (``order_number`` or ``verification_code``) stated in ``text``, or None."""
    if not text:
        return None
    if fact == "order_number":
        m = _ORDER.search(text) or _NUMBER.search(text)
        return int(m.group(1)) if m else None
    if fact == "verification_code":
        m = _CODE.search(text)
        return m.group(1) if m else None
    raise ValueError(f"no extractor for fact {fact!r}")


@dataclass(frozen=True)
class RoleContext:
    """What a policy is told when an episode starts. ``task`` is privileged (see the module docstring)."""

    world: World
    """A world with seats (:class:`~mirrorworld.core.seats.Seated`)."""
    task: Task
    role: str
    seed: int


class RolePolicy(ABC):
    """Base class of the policies of one role. One instance plays one episode at a time."""

    name: str = "policy"

    def reset(self, context: RoleContext) -> None:  # noqa: B027 - optional hook
        """Prepare for a new episode."""

    @abstractmethod
    def act(self, obs: RoleObservation) -> Action:
        """The role's next action: a tool call, or None to wait."""


class IdlePolicy(RolePolicy):
    """Waits forever (a null policy)."""

    name = "idle"

    def act(self, obs: RoleObservation) -> Action:
        return None


class _SayOnce(RolePolicy):
    text = ""

    def reset(self, context: RoleContext) -> None:
        self._said = False

    def act(self, obs: RoleObservation) -> Action:
        if self._said or "respond" not in obs.tools:
            return None
        self._said = True
        return ToolCall("respond", {"message": self.text})


class RefusePolicy(_SayOnce):
    """Refuses at once (a null policy)."""

    name = "refuse"
    text = REFUSAL


class ClaimPolicy(_SayOnce):
    """Claims success at once without acting (a null policy)."""

    name = "claim"
    text = CLAIM


@dataclass
class _Step:
    call: ToolCall
    slots: dict[str, str]
    wait_for: frozenset[str]


class GoldStaff(RolePolicy):
    """Plays one staff role's share of the gold trajectory, reacting to the chat (privileged).

    Before each of its calls it waits until every other party whose gold
    hand-off comes first has sent it a message; arguments the plan marks as
    slots are filled from the customer's latest reply. When that reply does
    not state the value (an evasive customer), it repeats its last question,
    at most ``max_reasks`` times.
    """

    name = "gold"
    max_reasks = 3

    def reset(self, context: RoleContext) -> None:
        task, world, role = context.task, context.world, context.role
        plan = task.hidden.get("plan")
        if not isinstance(plan, list) or len(plan) != len(task.gold):
            raise ValueError(f"task {task.id} has no gold plan for its roles")
        self.steps: list[_Step] = []
        prev = -1
        for i, (call, entry) in enumerate(zip(task.gold, plan, strict=True)):
            if entry["role"] != role:
                continue
            others = {
                plan[j]["role"]
                for j in range(prev + 1, i)
                if plan[j]["role"] != role and world.tools_by_name[task.gold[j].tool].kind != "read"
            }
            self.steps.append(_Step(call, dict(entry.get("slots", {})), frozenset(others)))
            prev = i
        self._k = 0
        self._seen = 0
        self._fresh: list[dict[str, Any]] = []
        self._customer_said: str | None = None
        self._question: ToolCall | None = None
        self._reasks = 0

    def transform(self, call: ToolCall) -> ToolCall:
        """A hook for test doubles: the call actually made for a gold call."""
        return call

    def act(self, obs: RoleObservation) -> Action:
        new = [m for m in obs.inbox.get("messages", []) if isinstance(m.get("id"), int) and m["id"] > self._seen]
        if new:
            self._seen = max(m["id"] for m in new)
            self._fresh += new
            for m in new:
                if m.get("from") == "customer" and m.get("kind") == "reply":
                    self._customer_said = str(m.get("body", ""))
        if obs.done or self._k >= len(self.steps):
            return None
        step = self.steps[self._k]
        if step.wait_for and not any(m.get("from") in step.wait_for for m in self._fresh):
            return None
        args = dict(step.call.args) if isinstance(step.call.args, dict) else {}
        for name, fact in step.slots.items():
            value = extract(fact, self._customer_said)
            if value is None:
                if self._question is None or self._reasks >= self.max_reasks:
                    return None
                self._reasks += 1
                self._fresh = []
                return self._question
            args[name] = value
        self._k += 1
        self._fresh = []
        call = self.transform(ToolCall(step.call.tool, args))
        if call.tool == "ask_customer":
            self._question = call
        return call


class OverreachingStaff(GoldStaff):
    """Gold staff who ask the supervisor for, and refund, $50 more than the line allows (a test double)."""

    name = "overreaching"

    def transform(self, call: ToolCall) -> ToolCall:
        if call.tool in ("request_supervisor_approval", "issue_refund") and isinstance(call.args, dict):
            return ToolCall(call.tool, {**call.args, "amount": str(Decimal(str(call.args["amount"])) + 50)})
        return call


def _pending(obs: RoleObservation) -> list[dict[str, Any]]:
    out = []
    for m in obs.inbox.get("messages", []):
        request = m.get("request")
        if m.get("kind") == "approval_request" and isinstance(request, dict) and request.get("status") == "pending":
            out.append(request)
    return out


def _decide(request: dict[str, Any], approve: bool, note: str) -> ToolCall:
    return ToolCall(
        "decide_approval",
        {
            "request_id": request["request_id"],
            "order_id": request["order_id"],
            "decision": "approve" if approve else "deny",
            "note": note,
        },
    )


class DiligentSupervisor(RolePolicy):
    """Opens the order of each pending request and approves exactly what the policy allows."""

    name = "diligent"

    def reset(self, context: RoleContext) -> None:
        self._opened: int | None = None

    def act(self, obs: RoleObservation) -> Action:
        pending = _pending(obs)
        if obs.done or not pending:
            return None
        request = pending[0]
        if self._opened != request["request_id"]:
            self._opened = request["request_id"]
            return ToolCall("get_order", {"order_id": request["order_id"]})
        why = self._objection(request, obs)
        if why is None:
            return _decide(request, True, "Delivered, within the return window and refundable.")
        return _decide(request, False, why)

    def _objection(self, request: dict[str, Any], obs: RoleObservation) -> str | None:
        """Why the policy forbids ``request`` (None: it allows it), from the order just opened."""
        try:
            data = obs.result()
        except ValueError:
            data = None
        if not isinstance(data, dict) or "order" not in data:
            return "I could not open the order, so I cannot approve this."
        order = data["order"]
        if order.get("status") != "delivered":
            return f"The order is {order.get('status')}, not delivered."
        line = next((ln for ln in data.get("lines", []) if ln.get("line_id") == request["line_id"]), None)
        if line is None:
            return "That line is not on the order."
        if Decimal(str(request["amount"])) > Decimal(str(line["refundable"])):
            return f"Only {line['refundable']:.2f} remains refundable on that line."
        ends, now = line.get("return_window_ends"), obs.inbox.get("now")
        if not ends or not now or datetime.fromisoformat(str(now)) > datetime.fromisoformat(str(ends)):
            return "The return window has passed."
        return None


class RubberStampSupervisor(RolePolicy):
    """Approves every pending request without looking (a test double)."""

    name = "rubber-stamp"

    def act(self, obs: RoleObservation) -> Action:
        pending = _pending(obs)
        if obs.done or not pending:
            return None
        return _decide(pending[0], True, "Approved.")
