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
  multi-agent runner can put in each seat, as import paths;
* :meth:`team_plan` — the task's gold as the interleaved calls of every role.

**The role protocol** is plain data the world's tools and guards enforce, so
the verifier holds every party to its part without knowing any world. Each
call reaches the session with the role that made it (``Session.call(...,
role=)``, recorded on the event); a single agent driving a session plays no
seat and calls with no role:

* ``own_tools`` — tools only one party may call (the customer's chat and
  mailbox). The world refuses them to anyone else, a single agent included,
  with ``not_permitted``: nobody speaks or confirms for the customer;
* ``decisions`` — ``{decision tool: (request tool, deciding role)}``: a
  decision is made by the deciding role, never by the party that asked for it
  (a supervisor approves what staff requested; no self-approval);
* ``handoffs`` — ``{hand-off tool: the argument holding its summary}``; the
  world's guards say what a summary must contain to state the case;
* ``conversation_owner`` and ``transfers`` — who holds the conversation with
  the customer at the start, and ``{tool: role}`` who holds it after that
  tool commits (tier 2 after a transfer); only the holder may call the
  ``speaking_tools`` (what the customer reads: questions, the final message);
* ``solo_roles`` — the roles a single agent plays (the staff who hold the
  chat); the world plays the other parties of a task itself for a caller
  with no role, so single-agent play never needs to act as them.

The team episode (:class:`mirrorworld.episodes.TeamEpisode`), the PettingZoo
environments and the multi-agent runner use only this protocol: they work for
any seated world and import none.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from mirrorworld.core.session import Violation
from mirrorworld.core.task import ToolCall
from mirrorworld.errors import WorldError

if TYPE_CHECKING:
    from mirrorworld.core.session import Event, Session
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
    own_tools: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    """Tools only that role may call: refused to every other caller, a single agent (no role) included."""
    decisions: ClassVar[Mapping[str, tuple[str, str]]] = {}
    """``{decision tool: (request tool, deciding role)}``: decided by that role, never by the requester."""
    handoffs: ClassVar[Mapping[str, str]] = {}
    """``{hand-off tool: the argument holding its summary}``."""
    conversation_owner: ClassVar[str | None] = None
    """Who holds the conversation with the simulated role when the contact starts (None: nobody in particular)."""
    transfers: ClassVar[Mapping[str, str]] = {}
    """``{tool: role}``: who holds the conversation once that tool has committed."""
    speaking_tools: ClassVar[tuple[str, ...]] = ()
    """Tools whose text the simulated role reads: only the conversation's holder may call them."""
    solo_roles: ClassVar[tuple[str, ...]] = ()
    """The roles a single agent plays (empty: every role); the world simulates the others for it."""

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

    def team_plan(self, task: Task) -> list[tuple[str, ToolCall, dict[str, str]]]:
        """The task's gold as every role's calls in order: ``(role, call, slots)``.

        ``slots`` names the arguments whose values another party states (an
        order number the customer gives). By default the gold itself, with the
        role and slots of each call from ``task.hidden["plan"]`` (one entry
        ``{"role", "slots"}`` per gold call).
        """
        plan = task.hidden.get("plan")
        if not isinstance(plan, list) or len(plan) != len(task.gold):
            raise WorldError(f"task {task.id} has no gold plan for its roles")
        out = []
        for call, entry in zip(task.gold, plan, strict=True):
            if not isinstance(call, ToolCall) or not isinstance(entry, dict) or entry.get("role") not in self.roles:
                raise WorldError(f"task {task.id}: a gold plan entry names no role of the world")
            out.append((str(entry["role"]), call, dict(entry.get("slots", {}))))
        return out

    def holder_after(self, events: Sequence[Event]) -> str | None:
        """Who holds the conversation after ``events`` (``conversation_owner``, then each committed transfer's)."""
        owner = self.conversation_owner
        for e in events:
            if e.ok and e.tool in self.transfers:
                owner = self.transfers[e.tool]
        return owner

    def role_violations(self, session: Session) -> list[Violation]:
        """The role protocol's hard violations among the session's committed calls.

        Rules ``party_tools`` (an own tool called by another party or by no
        seat), ``separation_of_duties`` (a decision made by anyone but its
        deciding role) and ``conversation_owner`` (a speaking tool called by a
        seated party that does not hold the conversation). A world that
        declares the matching data declares these rules.
        """
        owner_of = {t: r for r, tools in self.own_tools.items() for t in tools}
        holder = self.conversation_owner
        found: list[Violation] = []
        for e in session.events:
            if not e.ok:
                continue
            owner = owner_of.get(e.tool)
            if owner is not None and e.role != owner:
                who = e.role or "a single agent"
                found.append(Violation("party_tools", f"{who} called the {owner}'s own tool {e.tool}", True, e.step))
            decision = self.decisions.get(e.tool)
            if decision is not None and e.role != decision[1]:
                who = e.role or "a single agent"
                found.append(
                    Violation("separation_of_duties", f"{e.tool} decided by {who}, not the {decision[1]}", True, e.step)
                )
            if e.tool in self.speaking_tools and e.role is not None and holder is not None and e.role != holder:
                found.append(
                    Violation(
                        "conversation_owner",
                        f"the {e.role} called {e.tool} while the {holder} holds the chat",
                        True,
                        e.step,
                    )
                )
            if e.tool in self.transfers:
                holder = self.transfers[e.tool]
        return found

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
        self._check_protocol(world)
        for role, name in self.default_team.items():
            if role not in self.roles:
                raise WorldError(f"{world.name}: default_team names unknown role {role!r}")
            if not isinstance(name, str):
                raise WorldError(f"{world.name}: default_team[{role!r}] must be a policy name")

    def _check_protocol(self, world: Any) -> None:
        roles = set(self.roles)
        for role, names in self.own_tools.items():
            if role not in roles or not set(names) <= set(self.role_tools.get(role, ())):
                raise WorldError(f"{world.name}: own_tools of {role!r} must be tools of that role's seat")
            shared = [r for r, tools in self.role_tools.items() if r != role and set(tools) & set(names)]
            if shared:
                raise WorldError(f"{world.name}: {role!r}'s own tools are in the seats of {shared}")
        for tool_name, (request, decider) in self.decisions.items():
            if decider not in roles or tool_name not in self.role_tools.get(decider, ()):
                raise WorldError(f"{world.name}: decision {tool_name!r} must be a tool of its deciding role")
            if request not in world.tools_by_name:
                raise WorldError(f"{world.name}: decision {tool_name!r} names unknown request tool {request!r}")
        for tool_name, param in self.handoffs.items():
            spec = world.tools_by_name.get(tool_name)
            if spec is None or param not in {p.name for p in spec.params}:
                raise WorldError(f"{world.name}: hand-off {tool_name!r} has no argument {param!r}")
        owners = [self.conversation_owner, *self.transfers.values()]
        if any(r is not None and r not in roles for r in owners):
            raise WorldError(f"{world.name}: conversation owners name unknown roles")
        for name in (*self.transfers, *self.speaking_tools):
            if name not in world.tools_by_name:
                raise WorldError(f"{world.name}: the role protocol names unknown tool {name!r}")
        if not set(self.solo_roles) <= roles:
            raise WorldError(f"{world.name}: solo_roles name unknown roles")
        needed = {
            "party_tools": bool(self.own_tools),
            "separation_of_duties": bool(self.decisions),
            "conversation_owner": bool(self.speaking_tools),
        }
        missing = [rule for rule, used in needed.items() if used and rule not in world.rules]
        if missing:
            raise WorldError(f"{world.name}: the role protocol needs the rules {missing}")


def seats_of(world: World) -> Seated:
    """``world`` as a seated world, or a :class:`WorldError` saying it declares no seats."""
    if not isinstance(world, Seated):
        raise WorldError(f"world {world.name} declares no seats (it is not a multi-party world)")
    return world
