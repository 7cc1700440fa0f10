"""Seats: the multi-party protocol a world declares when several parties act in one episode.

A seated world (a contact center with a customer, tier 1, a supervisor and
tier 2) is an ordinary :class:`~mirrorworld.core.world.World` that also
inherits :class:`Seated` and says:

* ``roles`` — every role, in turn order (within a cycle the first acts first);
* ``role_tools`` — the tools each role's seat offers, in action-index order.
  Who may call what is data: the episode layer refuses a call outside the
  caller's seat with ``not_permitted`` before it reaches the session. A single
  agent driving a session directly is not bound by seats;
* ``contacts`` — whom each role can hand work off to (by default every other role);
* ``simulated_role`` — the role a simulator may play inside an environment
  (the customer), or None;
* :meth:`task_roles` — which roles a task's contact involves;
* :meth:`briefing` and :meth:`inbox` — what each role sees: its briefing at the
  start, then the simulated time and the messages addressed to it. Nothing
  else of the task reaches a role (partial observability);
* :meth:`contact_over` — whether the contact ended without a final message
  (the customer left);
* :meth:`extract_slot` — how a scripted role reads a value (an order number) it
  needs from what another party wrote;
* :meth:`policy_menu` and ``default_team`` — the named role policies the
  multi-agent runner can put in each seat, as import paths.

The team episode (:class:`mirrorworld.episodes.TeamEpisode`), the PettingZoo
environments and the multi-agent runner use only this protocol: they work for
any seated world and import none.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from mirrorworld.errors import WorldError

if TYPE_CHECKING:
    from mirrorworld.core.session import Session
    from mirrorworld.core.task import Task
    from mirrorworld.core.world import World

__all__ = ["Seated", "seats_of"]


class Seated(ABC):
    """Mixin of a world with seats. See the module docstring."""

    roles: ClassVar[tuple[str, ...]]
    """Every role, in turn order."""
    role_tools: ClassVar[Mapping[str, tuple[str, ...]]]
    """The tools each role may call, in action-index order."""
    contacts: ClassVar[Mapping[str, tuple[str, ...]] | None] = None
    """Whom each role can hand work off to (None: every other role)."""
    simulated_role: ClassVar[str | None] = None
    """The role a simulator may play inside an environment (the customer), if any."""
    default_team: ClassVar[Mapping[str, str]] = {}
    """The policy name (a key of :meth:`policy_menu`) each role plays by default."""

    def task_roles(self, task: Task) -> tuple[str, ...]:
        """The roles ``task``'s contact involves, in turn order (by default all of them)."""
        return self.roles

    @abstractmethod
    def briefing(self, task: Task, role: str) -> str:
        """What ``role`` knows when the contact starts."""

    @abstractmethod
    def inbox(self, session: Session, role: str) -> dict[str, Any]:
        """The simulated time and the latest messages addressed to ``role``: ``{"now", "messages"}``."""

    def contact_over(self, session: Session) -> bool:
        """Whether the contact ended without a final message (by default it never does)."""
        return False

    def extract_slot(self, slot: str, text: str | None) -> Any:
        """The value of ``slot`` (an order number) stated in ``text``, or None (by default none is read)."""
        return None

    def policy_menu(self) -> Mapping[str, Mapping[str, str]]:
        """For each role, the policies it can be played by: ``{role: {name: "package.module:Class"}}``.

        Each path names a ``RolePolicy`` class (or a factory taking the runner's
        options as keyword arguments). By default a role can be played by the
        generic baselines only (gold, idle, refuse, claim).
        """
        return {}

    def contacts_of(self, role: str) -> tuple[str, ...]:
        """The roles ``role`` can hand work off to."""
        if self.contacts is not None:
            return tuple(self.contacts.get(role, ()))
        return tuple(r for r in self.roles if r != role)

    def check_seats(self) -> None:
        """Raise :class:`WorldError` unless the seats are consistent with the world's tools."""
        world: Any = self
        if not self.roles or len(set(self.roles)) != len(self.roles):
            raise WorldError(f"{world.name}: roles must be distinct and at least one")
        if set(self.role_tools) != set(self.roles):
            raise WorldError(f"{world.name}: role_tools must name exactly the roles {list(self.roles)}")
        for role, names in self.role_tools.items():
            unknown = [n for n in names if n not in world.tools_by_name]
            if unknown:
                raise WorldError(f"{world.name}: role {role} names unknown tools {unknown}")
            if len(set(names)) != len(names):
                raise WorldError(f"{world.name}: role {role} lists a tool twice")
        orphans = set(world.tool_names) - {n for names in self.role_tools.values() for n in names}
        if orphans:
            raise WorldError(f"{world.name}: tools no role may call: {sorted(orphans)}")
        for role, others in (self.contacts or {}).items():
            bad = [r for r in (role, *others) if r not in self.roles]
            if bad:
                raise WorldError(f"{world.name}: contacts name unknown roles {bad}")
        if self.simulated_role is not None and self.simulated_role not in self.roles:
            raise WorldError(f"{world.name}: simulated_role {self.simulated_role!r} is not a role")
        for role, name in self.default_team.items():
            if role not in self.roles:
                raise WorldError(f"{world.name}: default_team names unknown role {role!r}")
            if not isinstance(name, str):
                raise WorldError(f"{world.name}: default_team[{role!r}] must be a policy name")


def seats_of(world: World) -> Seated:
    """``world`` as a seated world, or a :class:`WorldError` saying it declares no seats."""
    if not isinstance(world, Seated):
        raise WorldError(f"world {world.name} declares no seats (it is not a multi-party world)")
    return world
