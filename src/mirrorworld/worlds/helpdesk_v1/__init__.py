"""Helpdesk v1: the helpdesk after a release, declared as changes to v0 (:mod:`mirrorworld.drift`).

What changed, in the words of a release note:

* refunds are created with ``create_refund`` (``issue_refund`` is gone), and the
  reason ``wrong_item`` is now ``incorrect_item`` (refunds and approvals alike);
* approval requests take the amount in integer cents;
* escalations state a severity (``sev1``, ``sev2``, ``sev3``);
* ``update_customer`` takes ``email_address`` for the e-mail;
* refusals by policy are reported as ``forbidden`` (was ``policy_refused``);
* gold-tier customers' tickets are at least ``high`` priority (was ``normal``);
* refunds above $150.00 (was $200.00) need a supervisor's approval;
* the policy has a section on escalation severity.

Every command runs on it (``--world helpdesk_v1`` or ``mirrorworld/Helpdesk-v1``);
``mirrorworld drift --world helpdesk --from v0 --to v1`` measures an agent on both.
"""

from __future__ import annotations

from pathlib import Path

from mirrorworld.core.registry import WorldSpec
from mirrorworld.drift import (
    AddArgument,
    AddEnumValue,
    ChangeErrorCode,
    MoveParameter,
    RemoveEnumValue,
    RenameArgument,
    RenameTool,
    RetypeArgument,
    RevisePolicy,
    derive,
)
from mirrorworld.worlds.helpdesk.world import HelpdeskWorld

__all__ = ["CHANGES", "SPEC", "HelpdeskV1"]

CHANGES = (
    RenameTool("issue_refund", "create_refund"),
    AddEnumValue("create_refund", "reason", "incorrect_item", means="wrong_item"),
    RemoveEnumValue("create_refund", "reason", "wrong_item", use_instead="incorrect_item"),
    AddEnumValue("request_approval", "reason", "incorrect_item", means="wrong_item"),
    RemoveEnumValue("request_approval", "reason", "wrong_item", use_instead="incorrect_item"),
    RetypeArgument("request_approval", "amount", "cents"),
    AddArgument(
        "escalate_ticket",
        "severity",
        required=True,
        enum=("sev1", "sev2", "sev3"),
        gold="sev2",
        description="sev1: a security incident or an outage; sev2: a breached response-time target; sev3: other.",
    ),
    RenameArgument("update_customer", "email", "email_address"),
    ChangeErrorCode("policy_refused", "forbidden"),
    MoveParameter("tier_floor", {"gold": "high"}, policy=(("gold → normal", "gold → high"),)),
    MoveParameter("approval_threshold_cents", 15_000, policy=(("$200", "$150"),)),
    RevisePolicy(
        note="escalation severity",
        new=(
            "## Escalation severity\n"
            "- Every escalation states a severity: `sev1` for a security incident or an\n"
            "  outage, `sev2` for a ticket past its response-time target, `sev3` otherwise."
        ),
    ),
)
"""The changes from Helpdesk v0, in order (each names tools as the changes before it left them)."""

HelpdeskV1 = derive(
    HelpdeskWorld,
    version=1,
    changes=CHANGES,
    name="helpdesk_v1",
    module=__name__,
    qualname="HelpdeskV1",
    source_dir=Path(__file__).resolve().parent,
)

SPEC = WorldSpec.of(HelpdeskV1, description="the helpdesk after a release: renamed tools, moved rules (drift)")
