"""The helpdesk team world: the helpdesk's contact center, staffed by a team.

``HelpdeskTeamWorld`` is the helpdesk (same schema, data generator, tools and
rules) extended by:

* four tables (``team_schema.sql``): team messages (every hand-off),
  approval requests, verification codes, account changes;
* the hand-off protocol and the customer's own tools (``tools.py``);
* roles and the tools each may call (``rules.ROLE_TOOLS``), and what each role
  sees (``views.py``);
* the team's rules and policy, and task families that need more than one
  party (``tasks.py``).

As a :class:`~mirrorworld.core.world.World` it is an ordinary world, and a
single agent driving a session plays the staff (tier 1, then tier 2 after a
transfer): the customer and the supervisor answer inside its calls
(:mod:`.simulated`), it may not call their tools, and the gold trajectory of
every task (the staff's calls) solves it. The multi-agent environments
(:mod:`mirrorworld.envs.pettingzoo`) put one party behind each role and hold
them to their tools; their gold is the team's interleaved trajectory
(:meth:`HelpdeskTeamWorld.team_plan`). Either way the role protocol (who
speaks for the customer, who approves, who holds the chat after a transfer,
what a hand-off states) is hard rules the guards find from the role recorded
on each call.
"""

from __future__ import annotations

import random
import re
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from mirrorworld.core.claims import ClaimRule, CustomerText
from mirrorworld.core.seats import Seated
from mirrorworld.core.session import Session, Violation
from mirrorworld.core.task import EntityRef, Task, TaskFamily, ToolCall
from mirrorworld.core.tolerance import Tolerance
from mirrorworld.core.tools import ToolSpec
from mirrorworld.core.world import AuditHooks, Rule
from mirrorworld.worlds.helpdesk.world import HelpdeskWorld
from mirrorworld.worlds.helpdesk_team import claims, guards, macros, views
from mirrorworld.worlds.helpdesk_team.audit import TeamAudit
from mirrorworld.worlds.helpdesk_team.rules import (
    CUSTOMER,
    DECISIONS,
    HANDOFFS,
    OWN_TOOLS,
    ROLE_TOOLS,
    ROLES,
    RULES,
    SOLO_ROLES,
    SPEAKING_TOOLS,
    SUPERVISOR,
    TIER1,
    TIER2,
    TRANSFERS,
)
from mirrorworld.worlds.helpdesk_team.tasks import FAMILIES, TeamFamily
from mirrorworld.worlds.helpdesk_team.tools import TOOLS

__all__ = ["HelpdeskTeamWorld"]

_HERE = Path(__file__).resolve().parent
TEAM_SCHEMA = _HERE / "team_schema.sql"

_TEAM_OWNERS: dict[str, tuple[str, str]] = {
    # table: (entity kind, column holding the entity id)
    "team_messages": ("ticket", "ticket_id"),
    "approval_requests": ("order", "order_id"),
    "verification_codes": ("customer", "customer_id"),
    "account_changes": ("customer", "customer_id"),
}


_ORDER = re.compile(r"#\s*(\d{1,9})\b")
_NUMBER = re.compile(r"(?<![\d.])(\d{1,9})(?![\d.])")
_CODE = re.compile(r"(?<!\d)(\d{6})(?!\d)")

_POLICIES = "mirrorworld.sim.policies"
_TEAM_POLICIES = "mirrorworld.worlds.helpdesk_team.policies"


class HelpdeskTeamWorld(HelpdeskWorld, Seated):
    """The helpdesk staffed by a team: customer, tier 1, supervisor, tier 2. See the module docstring."""

    name = "helpdesk_team"
    title = "HelpdeskTeam"
    version = 0
    source_dir = _HERE

    roles: ClassVar[tuple[str, ...]] = ROLES
    """Every role, in turn order."""
    role_tools: ClassVar[Mapping[str, tuple[str, ...]]] = ROLE_TOOLS
    """The tools each role may call, in action-index order."""
    contacts: ClassVar[Mapping[str, tuple[str, ...]] | None] = {
        CUSTOMER: (TIER1, TIER2),
        TIER1: (CUSTOMER, SUPERVISOR, TIER2),
        SUPERVISOR: (TIER1, TIER2),
        TIER2: (CUSTOMER, SUPERVISOR),
    }
    simulated_role: ClassVar[str | None] = CUSTOMER
    default_team: ClassVar[Mapping[str, str]] = {
        CUSTOMER: "scripted",
        TIER1: "gold",
        SUPERVISOR: "diligent",
        TIER2: "gold",
    }
    own_tools: ClassVar[Mapping[str, tuple[str, ...]]] = OWN_TOOLS
    decisions: ClassVar[Mapping[str, tuple[str, str]]] = DECISIONS
    handoffs: ClassVar[Mapping[str, str]] = HANDOFFS
    conversation_owner: ClassVar[str | None] = TIER1
    transfers: ClassVar[Mapping[str, str]] = TRANSFERS
    speaking_tools: ClassVar[tuple[str, ...]] = SPEAKING_TOOLS
    solo_roles: ClassVar[tuple[str, ...]] = SOLO_ROLES

    hidden_columns = HelpdeskWorld.hidden_columns
    volatile_columns = {  # noqa: RUF012 - read-only by convention
        **HelpdeskWorld.volatile_columns,
        "team_messages": ("created_at",),
        "approval_requests": ("created_at", "decided_at"),
        "verification_codes": ("created_at",),
        "account_changes": ("created_at", "decided_at"),
    }
    tolerances: ClassVar[Mapping[str, Mapping[str, Tolerance]]] = {
        **HelpdeskWorld.tolerances,
        "team_messages": {
            "body": Tolerance.text(
                "what a party says in the chat or a hand-off, in its own words (the customer's own replies are "
                "theirs: the text rule does not judge them)",
                echo=False,
            ),
            "ref_id": Tolerance.id("the id of the request or change a message is about, of whichever table"),
        },
        "approval_requests": {
            "summary": Tolerance.text("the case as the requester sums it up"),
            "note": Tolerance.text(
                "the supervisor's note on the decision (a word such as 'Approved.' is one)", words=1, echo=False
            ),
        },
        "approvals": {"note": Tolerance.text("the supervisor's note on the decision", words=1, echo=False)},
        "verification_codes": {"code": Tolerance.id("drawn from the code's row id: another code sent first shifts it")},
    }
    optional_rows: ClassVar[Mapping[str, str]] = {
        **HelpdeskWorld.optional_rows,
        "team_messages": "a question, an answer or a note in the chat of the contact",
        "verification_codes": "another code emailed to the customer's own address",
        "approval_requests": "a supervisor approval asked for and not needed: a refund still needs its own",
    }

    def __init__(self, *, scale: float = 1.0, data_seed: int = 0) -> None:
        super().__init__(scale=scale, data_seed=data_seed)
        self.check_seats()

    def declare_tools(self) -> Sequence[ToolSpec]:
        return TOOLS

    def declare_rules(self) -> Sequence[Rule]:
        return RULES

    def declare_families(self) -> Sequence[TaskFamily]:
        return FAMILIES

    def generate(self, conn: sqlite3.Connection, rng: random.Random, scale: float) -> None:
        super().generate(conn, rng, scale)
        conn.executescript(TEAM_SCHEMA.read_text(encoding="utf-8"))

    def owner(self, table: str, row: dict[str, Any]) -> EntityRef | None:
        spec = _TEAM_OWNERS.get(table)
        if spec is not None:
            return (spec[0], int(row[spec[1]]))
        return super().owner(table, row)

    def guards(self, session: Session) -> list[Violation]:
        return (
            guards.disclosed(session)
            + guards.refunds_off_approval(session)
            + guards.roles(session)
            + guards.handoff_summaries(session)
        )

    def audit_hooks(self) -> AuditHooks:
        return TeamAudit(self)

    def customer_texts(self, session: Session) -> list[CustomerText]:
        return claims.customer_texts(session)

    def menu_macros(self) -> Mapping[str, Sequence[str]]:
        return macros.MACROS

    def claim_rules(self) -> Sequence[ClaimRule]:
        return claims.claim_rules(tuple(t.name for t in self.tools if t.kind == "write"))

    # -- the team --------------------------------------------------------------

    def task_roles(self, task: Task) -> tuple[str, ...]:
        """The roles a task's contact involves, in turn order."""
        family = self.family(task.family)
        wanted = family.roles if isinstance(family, TeamFamily) else self.roles
        return tuple(r for r in self.roles if r in wanted)

    def team_plan(self, task: Task) -> list[tuple[str, ToolCall, dict[str, str]]]:
        """The team's gold: every role's calls, interleaved (``task.hidden["team"]``, see :mod:`.tasks`)."""
        team = task.hidden.get("team")
        if not isinstance(team, list):
            return super().team_plan(task)
        return [(str(e["role"]), ToolCall(str(e["tool"]), dict(e["args"])), dict(e.get("slots", {}))) for e in team]

    def briefing(self, task: Task, role: str) -> str:
        """What ``role`` knows when the contact starts (see :mod:`.views`)."""
        return views.briefing(task, role)

    def inbox(self, session: Session, role: str) -> dict[str, Any]:
        """The simulated time and the messages addressed to ``role`` (see :mod:`.views`)."""
        return views.inbox(session, role)

    def contact_over(self, session: Session) -> bool:
        """Whether the contact ended without a final message (the customer left)."""
        return views.contact_over(session)

    def extract_slot(self, slot: str, text: str | None) -> Any:
        """The ``order_number`` (an int) or ``verification_code`` (six digits) stated in ``text``, or None."""
        if not text:
            return None
        if slot == "order_number":
            m = _ORDER.search(text) or _NUMBER.search(text)
            return int(m.group(1)) if m else None
        if slot == "verification_code":
            m = _CODE.search(text)
            return m.group(1) if m else None
        raise ValueError(f"no extractor for slot {slot!r}")

    def policy_menu(self) -> Mapping[str, Mapping[str, str]]:
        staff = {
            "gold": f"{_POLICIES}:GoldStaff",
            "refuse": f"{_POLICIES}:RefusePolicy",
            "idle": f"{_POLICIES}:IdlePolicy",
        }
        return {
            CUSTOMER: {
                "scripted": "mirrorworld.sim.customer:ScriptedCustomer",
                "llm": "mirrorworld.sim.llm:llm_customer",
                "idle": f"{_POLICIES}:IdlePolicy",
            },
            TIER1: {
                **staff,
                "claim": f"{_POLICIES}:ClaimPolicy",
                "overreaching": f"{_TEAM_POLICIES}:OverreachingStaff",
            },
            SUPERVISOR: {
                "diligent": f"{_TEAM_POLICIES}:DiligentSupervisor",
                "rubber-stamp": f"{_TEAM_POLICIES}:RubberStampSupervisor",
                "idle": f"{_POLICIES}:IdlePolicy",
            },
            TIER2: staff,
        }
