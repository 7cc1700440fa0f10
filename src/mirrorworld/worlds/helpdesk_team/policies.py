"""Scripted policies that only make sense in the helpdesk team (named by its ``policy_menu``).

* :class:`DiligentSupervisor` — opens the order of every pending approval
  request and approves exactly what the policy allows;
* :class:`RubberStampSupervisor` — approves every request unread (a test
  double: the supervisor the per-role penalty exists for);
* :class:`OverreachingStaff` — gold staff who ask for and refund $50 more
  than the line allows (a test double for the supervisor's judgement).

The generic baselines (gold staff, idle, refuse, claim) are in
:mod:`mirrorworld.sim.policies`, the customer simulators in
:mod:`mirrorworld.sim.customer` and :mod:`mirrorworld.sim.llm`.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from mirrorworld.core.task import ToolCall
from mirrorworld.core.tools import json_number
from mirrorworld.episodes.team import Action, RoleObservation
from mirrorworld.sim.policies import GoldStaff, RoleContext, RolePolicy

__all__ = ["DiligentSupervisor", "OverreachingStaff", "RubberStampSupervisor"]


class OverreachingStaff(GoldStaff):
    """Gold staff who ask the supervisor for, and refund, $50 more than the line allows (a test double)."""

    name = "overreaching"

    def transform(self, call: ToolCall) -> ToolCall:
        if call.tool in ("request_supervisor_approval", "issue_refund") and isinstance(call.args, dict):
            more = json_number(Decimal(str(call.args["amount"])) + 50)
            return ToolCall(call.tool, {**call.args, "amount": more})
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
