"""Sessions: one episode of one world, stepped one tool call at a time.

A :class:`Session` owns a private SQLite connection cloned from its world's
pristine image, with the task's setup applied. ``call`` runs a tool:

* a ``read`` tool runs against the current state and must not write;
* a ``write`` tool runs inside ``SAVEPOINT``: it commits whole, or, if the tool
  raises :class:`ToolError` (an agent mistake or a business rule), rolls back
  whole and the agent gets ``{code, message}``;
* a ``terminal`` tool (``respond``) records the final message and ends the
  episode.

Any other exception raised by a tool is a bug in the world: the call is rolled
back and the exception propagates. Nothing the agent sends can raise out of
``call``: bad JSON, unknown tools and wrong types are error results.

Every call is recorded as an :class:`Event` with the rows it changed and the
rule violations it caused; the verifier reads these events, never the agent's
own account of what it did.

Two neighbours hold what is not stepping: :mod:`mirrorworld.core.codec` (the
JSON of arguments and results, with the rules for bad input) and
:mod:`mirrorworld.core.state` (state hash, changes, diff, fork), which the
methods of the same names call.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from mirrorworld.core import state as _state
from mirrorworld.core.codec import MAX_ARGS_CHARS, encode, jsonable, parse_args
from mirrorworld.core.state import Row, RowChange
from mirrorworld.core.store import Clone, RowKey
from mirrorworld.core.tools import Surface, ToolKind, ToolSpec, show_input
from mirrorworld.errors import SessionClosedError, ToolError, WorldError

if TYPE_CHECKING:
    from mirrorworld.core.store import Image
    from mirrorworld.core.task import Task
    from mirrorworld.core.world import World

__all__ = ["MAX_ARGS_CHARS", "Event", "Presented", "RowChange", "Session", "ToolContext", "ToolResult", "Violation"]

CLOCK_STEP = timedelta(minutes=1)
"""Simulated time that passes with each committed write."""

TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True)
class Violation:
    """A business rule broken by a committed call (or found by a guard)."""

    rule: str
    message: str
    hard: bool
    step: int


@dataclass(slots=True)
class ToolResult:
    """What a tool call returns to the agent."""

    ok: bool
    data: Any = None
    error: dict[str, Any] | None = None
    done: bool = False

    def content(self) -> str:
        """The result as the JSON text an agent reads (ASCII-only, canonical)."""
        return encode(self.data if self.ok else {"error": self.error})


@dataclass(frozen=True, slots=True)
class Presented:
    """A call as a drifted surface presented it: the tool and arguments sent, the error shown (None: none)."""

    tool: str
    args: dict[str, Any] | None
    error: dict[str, Any] | None = None


@dataclass(slots=True)
class Event:
    """One tool call as it happened (treat as read-only)."""

    step: int
    tool: str
    kind: ToolKind | None
    args: dict[str, Any] | None
    ok: bool
    error: dict[str, Any] | None
    rows: tuple[RowKey, ...] = ()
    violations: tuple[Violation, ...] = ()
    role: str | None = None
    """The party that made the call in a world with seats (None: a single agent, who plays no seat)."""
    data: Any = None
    """What a successful call returned: what its caller was shown (the verifier reads it, never changes it)."""
    presented: Presented | None = None
    """The call as its caller made and saw it, when a drifted surface presents ``tool`` under another
    name, signature or error codes (``ToolSpec.surface``); None when the call ran as sent. ``tool``,
    ``args`` and ``error`` are the base world's (what rules, guards and claims read)."""

    def signature(self) -> str:
        """Tool and canonical arguments: equal for repeated identical calls."""
        return self.tool + json.dumps(self.args, sort_keys=True, default=str)


_COLUMN_NAMES: dict[str, tuple[str, ...]] = {}


def _columns(sql: str, cur: sqlite3.Cursor) -> tuple[str, ...]:
    """The result column names of ``sql`` (the statements come from world code, so the cache is bounded)."""
    cols = _COLUMN_NAMES.get(sql)
    if cols is None:
        cols = _COLUMN_NAMES[sql] = tuple(d[0] for d in cur.description)
    return cols


class ToolContext:
    """What a tool function sees: the session's database and its bookkeeping.

    Tools query through ``one``/``all``/``execute`` (parameterised SQL only),
    read the simulated time with ``now`` (not from the ``sim_clock`` row, which
    is brought up to date only when the session's database is looked at), report broken rules with
    ``violation``, mark records as on screen with ``show`` and end the episode
    with ``finish``.
    """

    __slots__ = ("_reader", "_violations", "db", "session")

    def __init__(self, session: Session) -> None:
        self.session = session
        conn = session._conn
        assert conn is not None, "a tool runs on an attached session"
        self.db: sqlite3.Connection = conn
        self._reader = session._cursor
        self._violations: list[Violation] = []

    def one(self, sql: str, params: tuple[Any, ...] = ()) -> dict[str, Any] | None:
        cur = self._reader.execute(sql, params)
        row = cur.fetchone()
        if row is None:
            return None
        return dict(zip(_columns(sql, cur), row))  # noqa: B905 - the columns are the row's

    def all(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        cur = self._reader.execute(sql, params)
        cols = _columns(sql, cur)
        return [dict(zip(cols, r)) for r in cur.fetchall()]  # noqa: B905 - the columns are the rows'

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        return self.db.execute(sql, params)

    def param(self, name: str) -> Any:
        """The world's business-rule parameter ``name`` (``World.parameters``): the figure a tool enforces."""
        return self.session.world.parameters[name]

    @property
    def role(self) -> str | None:
        """The party making this call in a world with seats; None for a single agent (see ``Session.call``)."""
        return self.session.role

    def now(self) -> str:
        """The simulated time, ISO 8601 UTC."""
        return self.session.clock

    def now_dt(self) -> datetime:
        return datetime.fromisoformat(self.session.clock)

    def violation(self, rule: str, message: str) -> None:
        """Record that this call breaks ``rule`` (kept only if the call commits)."""
        spec = self.session.world.rules.get(rule)
        if spec is None:
            raise WorldError(f"unknown rule {rule!r}")
        self._violations.append(Violation(rule, message, spec.hard, self.session.steps))

    def show(self, ref: str, summary: str) -> None:
        """Put a record on the agent's screen (the observation's view)."""
        self.session._show(ref, summary)

    def finish(self, message: str) -> None:
        """End the episode with ``message`` as the final reply to the customer."""
        self.session.final_message = message
        self.session.done = True


class Session:
    """One isolated episode. Create with ``World.session(task)``."""

    def __init__(
        self, world: World, image: Image, task: Task | None, *, _overlay: dict[RowKey, Row | None] | None = None
    ) -> None:
        self.world = world
        self.image = image
        self.task = task
        self._closed = False
        self.events: list[Event] = []
        self.steps = 0
        self.done = False
        self.final_message: str | None = None
        self.role: str | None = None
        """The party making the current (or last) call: ``call``'s ``role``."""
        self.view = ""
        self.viewed: tuple[str, ...] = ()
        """The records the agent has had on screen, oldest first (at most 20)."""
        self._tools = world.tools_by_name
        self._initial_rows: dict[RowKey, tuple[Any, ...] | None] | None = None if task is not None else {}
        self.clock = ""
        self._clock_synced = True
        """Whether the ``sim_clock`` row holds ``clock`` (it is written when the database is looked at)."""
        self._touched: set[RowKey] = set()
        self._conn: Clone | None = None
        self._overlay = _overlay
        """While parked: every row that may differ from the image, as it is (None: the task's setup alone)."""
        self._pins = 0
        self._sticky = False
        self._used = 0
        self._changed = _overlay is not None
        """Whether the state may differ from the task's initial state (a write, raw access, a fork)."""
        with image.lock:
            self._pins = 1
            try:
                self._attach()
                if task is not None and _overlay is None:
                    prep = world.prepared(task)
                    if prep.clock is None:
                        prep.clock = self._read_clock()
                    self.clock = prep.clock
                elif _overlay is None:
                    self.clock = self._read_clock()
            except BaseException:
                if self._conn is not None:
                    image.vacate(self, self._conn, reusable=False)
                    self._conn = None
                self._closed = True
                raise
            finally:
                self._pins = 0
                self._used = next(image.clock)

    # -- residency: a session holds a clone of the image while it is used ---

    def _attach(self) -> None:
        """Take a clone from the image and bring it to this session's state (caller holds the image's lock)."""
        conn = self.image.lend(self)
        try:
            overlay = self._overlay
            if overlay is None:
                if self.task is not None:
                    self.world.apply_setup(conn, self.task)
            else:
                _state.replay(conn, self.image, overlay)
        except BaseException:
            self.image.vacate(self, conn, reusable=False)
            raise
        self._conn = conn
        self._written = conn.written
        self._cursor = conn.reader
        self._overlay = None
        changed = self._changed
        self._absorb()  # the rows just brought back are this session's state, not new writes
        self._changed = changed

    def _park(self) -> Clone:
        """Keep what this episode wrote, give the clone up rolled back (see :class:`~mirrorworld.core.store.Tenant`)."""
        conn = self._conn
        assert conn is not None
        self._settle()
        if self._changed:
            self._overlay = _state.rows_now(self, conn)
        self._conn = None
        conn.execute("ROLLBACK")
        return conn

    @contextlib.contextmanager
    def borrow(self) -> Iterator[sqlite3.Connection]:
        """The session's connection for the block, for graders (not for agents).

        Unlike :attr:`db`, the session may park again after the block: use
        this in code that runs on every step. Rows written through it count
        as touched, and as written by no call.
        """
        with self._hold() as conn:
            self._settle()
            yield conn

    def _pin(self, *, release_db: bool = False) -> None:
        """Keep the session's clone in place (attached first if it was parked); the caller unpins.

        ``release_db``: a connection taken from ``db`` is good until the next call, which this is.
        """
        with self.image.lock:
            if release_db:
                self._sticky = False
            self._pins += 1
            if self._conn is None:
                try:
                    self._attach()
                except BaseException:
                    self._pins -= 1
                    raise

    @contextlib.contextmanager
    def _hold(self) -> Iterator[Clone]:
        """The session's clone, attached if it was parked and kept in place for the block."""
        self._check_open()
        image = self.image
        self._pin()
        try:
            yield self._conn  # type: ignore[misc]
        finally:
            self._pins -= 1
            self._used = next(image.clock)

    @property
    def resident(self) -> bool:
        """Whether the session holds a clone of the image now (a parked one gets one back when used)."""
        return self._conn is not None

    # -- stepping -----------------------------------------------------------

    def call(self, tool: str, args: Mapping[str, Any] | str | None = None, *, role: str | None = None) -> ToolResult:
        """Run one tool call atomically and record it. Never raises for agent input.

        ``role`` is the party making the call in a world with seats, as the
        episode layer knows it (the caller's seat, never an argument an agent
        writes); it is recorded on the call's :class:`Event` and tools read it
        as ``ToolContext.role``. None is a single agent, who plays no seat: a
        seated world refuses it the tools of the parties it simulates.
        """
        if self._closed:
            raise SessionClosedError("session is closed")
        self.role = role
        self.steps += 1
        step = self.steps
        # Not ``repr``: an integer may be too long for Python to print.
        name = tool if isinstance(tool, str) else show_input(tool)
        if self.done:
            return self._fail(step, name, None, None, ToolError("episode_over", "the episode has ended"))
        spec = self._tools.get(name) if isinstance(tool, str) else None
        if spec is None:
            shown = name if len(name) <= 60 else name[:57] + "..."
            return self._fail(
                step, name[:200], None, None, ToolError("unknown_tool", f"no tool named {json.dumps(shown)}")
            )
        try:
            parsed = parse_args(args)
            kwargs = spec.validate(parsed)
        except ToolError as err:
            return self._fail(step, name, spec.kind, None, err)
        surface = spec.surface
        presented = None
        if surface is not None:  # a drifted surface: run the tool it presents, record both (Event.presented)
            presented = Presented(spec.name, jsonable(kwargs))
            spec = surface.inner
            try:
                kwargs = surface.inward(kwargs)
            except ToolError as err:
                return self._fail(step, spec.name, spec.kind, None, err, presented, surface)
        image = self.image
        self._pin(release_db=True)
        try:
            if spec.kind == "read":
                return self._run_read(step, spec, kwargs, surface, presented)
            return self._run_write(step, spec, kwargs, surface, presented)
        finally:
            self._pins -= 1
            self._used = next(image.clock)

    def _run_read(
        self,
        step: int,
        spec: ToolSpec,
        kwargs: dict[str, Any],
        surface: Surface | None = None,
        presented: Presented | None = None,
    ) -> ToolResult:
        ctx = ToolContext(self)
        view, viewed = self.view, self.viewed
        try:
            data = spec.func(ctx, **kwargs)
        except ToolError as err:
            self.view, self.viewed = view, viewed
            return self._fail(step, spec.name, spec.kind, kwargs, err, presented, surface)
        except BaseException:
            self.view, self.viewed = view, viewed
            raise
        self.events.append(
            Event(
                step, spec.name, spec.kind, jsonable(kwargs), True, None, role=self.role, data=data, presented=presented
            )
        )
        return ToolResult(True, data)

    def _run_write(
        self,
        step: int,
        spec: ToolSpec,
        kwargs: dict[str, Any],
        surface: Surface | None = None,
        presented: Presented | None = None,
    ) -> ToolResult:
        written = self._written
        if written:  # rows written outside ``call`` (setup, a fork's replay, a grader): not this call's
            self._absorb()
        ctx = ToolContext(self)
        saved_view = (self.view, self.viewed)
        self._cursor.execute("SAVEPOINT mw_call")
        try:
            data = spec.func(ctx, **kwargs)
        except ToolError as err:
            self._undo_call()
            self.view, self.viewed = saved_view
            return self._fail(step, spec.name, spec.kind, kwargs, err, presented, surface)
        except BaseException:
            self._undo_call()
            self.view, self.viewed = saved_view
            raise
        self._cursor.execute("RELEASE mw_call")
        rows: tuple[RowKey, ...] = ()
        if written:
            rows = self._absorb()
            self.clock = _tick(self.clock)
            self._clock_synced = False
            self._changed = True
        self.events.append(
            Event(
                step,
                spec.name,
                spec.kind,
                jsonable(kwargs),
                True,
                None,
                rows,
                tuple(ctx._violations),
                self.role,
                data,
                presented,
            )
        )
        return ToolResult(True, data, done=self.done)

    def _undo_call(self) -> None:
        """Roll the current call back whole, and forget the rows it wrote."""
        self._cursor.execute("ROLLBACK TO mw_call")
        self._cursor.execute("RELEASE mw_call")
        self._written.clear()
        self.done, self.final_message = False, None

    def _absorb(self) -> tuple[RowKey, ...]:
        """Move the connection's log of written rows into ``touched``; return them sorted."""
        names = self.image.tracked
        written = self._written
        if len(written) == 1:
            i, pk = written[0]
            rows: tuple[RowKey, ...] = ((names[i], pk),)
        else:
            rows = tuple(sorted({(names[i], pk) for i, pk in written}))
        written.clear()
        self._touched.update(rows)
        self._changed = True
        return rows

    def refuse(self, tool: str, error: Mapping[str, Any], *, role: str | None = None) -> ToolResult:
        """Record a call to ``tool`` that the system failed before running it (an injected fault), changing nothing.

        It counts as a step and is recorded as a refused call with ``error``
        (``{code, message, ...}``), as a production system's timeout would be.
        """
        if self._closed:
            raise SessionClosedError("session is closed")
        self.role = role
        self.steps += 1
        spec = self._tools.get(tool)
        error = dict(error)
        if spec is not None and spec.surface is not None:
            inner = spec.surface.inner
            self.events.append(
                Event(
                    self.steps,
                    inner.name,
                    inner.kind,
                    None,
                    False,
                    error,
                    role=role,
                    presented=Presented(tool, None, error),
                )
            )
        else:
            name = tool if len(tool) <= 200 else tool[:200]
            self.events.append(Event(self.steps, name, spec.kind if spec else None, None, False, error, role=role))
        return ToolResult(False, error=error, done=self.done)

    def advance(self, seconds: float) -> None:
        """Move the simulated clock forward by ``seconds`` (latency), as committed writes move it by a minute."""
        if seconds <= 0 or not self.clock:
            return
        t = datetime.fromisoformat(self.clock.replace("Z", "+00:00")) + timedelta(seconds=round(seconds))
        self.clock = t.strftime("%Y-%m-%dT%H:%M:%SZ")
        self._clock_synced = False

    def _fail(
        self,
        step: int,
        name: str,
        kind: ToolKind | None,
        kwargs: dict[str, Any] | None,
        err: ToolError,
        presented: Presented | None = None,
        surface: Surface | None = None,
    ) -> ToolResult:
        error = err.as_dict()
        args = jsonable(kwargs) if kwargs is not None else None
        if presented is not None and surface is not None:
            shown = surface.error(err).as_dict()
            presented = Presented(presented.tool, presented.args, shown)
            error_seen = shown
        else:
            error_seen = error
        self.events.append(Event(step, name, kind, args, False, error, role=self.role, presented=presented))
        return ToolResult(False, error=error_seen, done=self.done)

    def _show(self, ref: str, summary: str) -> None:
        self.view = summary
        viewed = self.viewed
        if ref in viewed:
            viewed = tuple(r for r in viewed if r != ref)
        self.viewed = (viewed if len(viewed) < 20 else viewed[-19:]) + (ref,)

    # -- clock --------------------------------------------------------------

    def _read_clock(self) -> str:
        assert self._conn is not None
        row = self._conn.execute("SELECT now FROM sim_clock WHERE id=1").fetchone()
        if row is None:
            raise WorldError("world image has no sim_clock row")
        return str(row[0])

    def _settle(self) -> None:
        """Bring the bookkeeping up to date before the database is looked at from outside a call."""
        if self._conn is None:  # parked: the overlay is up to date
            return
        if self._written:
            self._absorb()  # rows written through ``db`` or ``borrow``
        if not self._clock_synced:
            self._conn.execute("UPDATE sim_clock SET now=? WHERE id=1", (self.clock,))
            self._clock_synced = True

    # -- state --------------------------------------------------------------

    @property
    def db(self) -> sqlite3.Connection:
        """The session's connection, for graders and tests (not for agents).

        Rows written through it count as touched, and as written by no call.
        The connection stays the session's until its next call or its close
        (then it may be lent to another session of the image), or, taken
        inside a :meth:`borrow` block, until the block ends: code that runs on
        every step should use :meth:`borrow`.
        """
        outside = self._pins == 0  # inside ``borrow`` the block keeps the connection in place
        with self._hold() as conn:
            if outside:
                self._sticky = True
            self._settle()
        return conn

    def touched(self) -> list[RowKey]:
        """Every row of the world's tables written since the pristine image, setup included.

        (A row written through ``db`` inside a savepoint that was rolled back
        stays listed: that only costs a comparison.)
        """
        if self._conn is not None:
            with self._hold():
                self._settle()
        return sorted(self._touched)

    def _snapshot_touched(self) -> dict[RowKey, tuple[Any, ...] | None]:
        with self._hold() as conn:
            self._settle()
            return {k: _state.row_in(conn, self.image, k) for k in sorted(self._touched)}

    @property
    def _initial(self) -> dict[RowKey, tuple[Any, ...] | None]:
        """The rows the task's setup wrote, as they are in its initial state (looked up on first use)."""
        if self._initial_rows is None:
            assert self.task is not None
            self._initial_rows = self.world.initial_rows(self.task)
        return self._initial_rows

    def state_hash(self) -> str:
        """A canonical hash of the whole state, equal for equal states.

        Computed from the pristine image's digest and the rows that differ from
        it: a row written and then restored counts as unchanged. (The simulated
        clock is state too, and every committed write advances it.) See
        :func:`mirrorworld.core.state.state_hash`.
        """
        return _state.state_hash(self)

    def changes(self) -> list[RowChange]:
        """Rows that differ from the task's initial state (after setup)."""
        return _state.changes(self)

    def diff(self, other: Session) -> list[RowChange]:
        """Rows that differ between this session's state (before) and ``other``'s (after)."""
        return _state.diff(self, other)

    def fork(self) -> Session:
        """An independent copy of this session, mid-episode, events included.

        The copy starts from a pristine connection of the image and replays the
        parent's touched rows (a deserialised image would show only committed
        pages, and an episode never commits). See :func:`mirrorworld.core.state.fork`.
        """
        return _state.fork(self)

    def continue_from(self, parent: Session) -> None:
        """Take over ``parent``'s episode bookkeeping (calls, steps, screen, clock).

        For a session that already holds the parent's state: a fork, or a
        replay of the parent's committed calls.
        """
        self.events = list(parent.events)
        self.steps = parent.steps
        self.done = parent.done
        self.final_message = parent.final_message
        self.view = parent.view
        self.viewed = parent.viewed
        if self.clock != parent.clock:
            self.clock = parent.clock
            self._clock_synced = False
            self._changed = True

    # -- lifecycle ----------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError("session is closed")

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Discard the episode; the connection returns to the image's pool."""
        if not self._closed:
            with self.image.lock:
                self._closed = True
                self._overlay = None
                conn, self._conn = self._conn, None
                if conn is not None:
                    self.image.vacate(self, conn)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@functools.lru_cache(maxsize=4096)
def _tick(clock: str) -> str:
    """The clock one step after ``clock`` (episodes walk the same few minutes, hence the cache)."""
    t = datetime.fromisoformat(clock) + CLOCK_STEP
    return t.isoformat().replace("+00:00", "Z")
