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

As a :class:`~mirrorworld.core.world.World` it is an ordinary world: a
session can call any tool, the gold trajectory of every task solves it, and
the verifier grades the episode as it grades any other. The multi-agent
environments (:mod:`mirrorworld.envs.pettingzoo`) put one party behind each
role and hold them to their tools.
"""

from __future__ import annotations

import hashlib
import random
import sqlite3
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from mirrorworld.core.session import Session, Violation
from mirrorworld.core.task import EntityRef, Task, TaskFamily
from mirrorworld.core.tools import ToolSpec
from mirrorworld.core.world import _CORE_DIR, _VERIFY_DIR, AuditHooks, Rule
from mirrorworld.errors import WorldError
from mirrorworld.worlds.helpdesk.world import HelpdeskWorld
from mirrorworld.worlds.helpdesk_team import guards, views
from mirrorworld.worlds.helpdesk_team.audit import TeamAudit
from mirrorworld.worlds.helpdesk_team.rules import ROLE_TOOLS, ROLES, RULES
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


class HelpdeskTeamWorld(HelpdeskWorld):
    """The helpdesk staffed by a team: customer, tier 1, supervisor, tier 2. See the module docstring."""

    name = "helpdesk_team"
    title = "HelpdeskTeam"
    version = 0
    source_dir = _HERE

    roles: tuple[str, ...] = ROLES
    """Every role, in turn order."""
    role_tools: Mapping[str, tuple[str, ...]] = ROLE_TOOLS
    """The tools each role may call, in action-index order."""

    hidden_columns = HelpdeskWorld.hidden_columns
    volatile_columns = {  # noqa: RUF012 - read-only by convention
        **HelpdeskWorld.volatile_columns,
        "team_messages": ("created_at",),
        "approval_requests": ("created_at", "decided_at"),
        "verification_codes": ("created_at",),
        "account_changes": ("created_at", "decided_at"),
    }

    def __init__(self, *, scale: float = 1.0, data_seed: int = 0) -> None:
        super().__init__(scale=scale, data_seed=data_seed)
        for role, names in self.role_tools.items():
            unknown = [n for n in names if n not in self.tools_by_name]
            if unknown:
                raise WorldError(f"{self.name}: role {role} names unknown tools {unknown}")
        orphans = set(self.tool_names) - {n for names in self.role_tools.values() for n in names}
        if orphans:
            raise WorldError(f"{self.name}: tools no role may call: {sorted(orphans)}")

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
        return guards.disclosed(session) + guards.refunds_off_approval(session)

    def audit_hooks(self) -> AuditHooks:
        return TeamAudit(self)

    @cached_property
    def content_hash(self) -> str:
        """Hash of the team world and of the helpdesk world it extends (see ``World.content_hash``)."""
        h = hashlib.sha256(f"{self.id}|{self.data_seed}|{self.scale}".encode())
        for folder in (self.source_dir, Path(HelpdeskWorld.source_dir), _CORE_DIR, _VERIFY_DIR):
            for path in sorted(folder.rglob("*")):
                if path.is_file() and path.suffix in (".py", ".sql", ".md", ".json"):
                    h.update(path.name.encode())
                    h.update(path.read_bytes())
        return h.hexdigest()[:16]

    # -- the team --------------------------------------------------------------

    def task_roles(self, task: Task) -> tuple[str, ...]:
        """The roles a task's contact involves, in turn order."""
        family = self.family(task.family)
        wanted = family.roles if isinstance(family, TeamFamily) else self.roles
        return tuple(r for r in self.roles if r in wanted)

    def briefing(self, task: Task, role: str) -> str:
        """What ``role`` knows when the contact starts (see :mod:`.views`)."""
        return views.briefing(task, role)

    def inbox(self, session: Session, role: str) -> dict[str, Any]:
        """The simulated time and the messages addressed to ``role`` (see :mod:`.views`)."""
        return views.inbox(session, role)

    def contact_over(self, session: Session) -> bool:
        """Whether the contact ended without a final message (the customer left)."""
        return views.contact_over(session)
