"""SQLite images: the pristine state of a world, cloned cheaply per episode.

An :class:`Image` is a world's database for one ``(data_seed, scale)``, built
once and kept as serialized bytes. Sessions get their own connection holding a
copy of it. Every episode runs inside one outer transaction on that connection,
so handing a connection back to the image rolls the episode away and leaves the
exact pristine bytes behind; the connection is then reused by the next episode
(``ROLLBACK`` costs microseconds where ``deserialize`` costs a millisecond).

Change tracking is done by the database itself: a trigger on every world
table (but the ``untracked`` ones, such as the simulated clock, which the
session keeps itself) hands the ``(table, rowid)`` of each row written to the
connection's ``written`` list, through a function registered on every clone.
The session drains that list after each tool call: the rows a call wrote are
exactly those logged between its savepoint and its release (a call that rolls
back discards its log), and their union is every row written since the image
was pristine. Comparing a touched row with the same row of the pristine image
tells whether it really changed: a write followed by its undo leaves no
difference.

The image keeps its pages as the build wrote them, never ``VACUUM``-ed:
a vacuum rebuilds every index packed full, so the first row an episode
inserts into one splits a page, and a task's setup (a new ticket and its
message) split 4-5 pages at scale 100 (a reset that grew with world size). A
build's own inserts leave the slack of random-order insertion in its index
pages, and a setup's rows fit in place at any scale; the image is about 3%
larger for it.

Sessions share the image: a live session costs a fixed share of a bounded
set of clones plus the rows it wrote, at any world size (:meth:`Image.lend`;
a session beyond the limit parks with its overlay of written rows and gets a
clone back, overlay replayed, when next used). The options, measured on the
helpdesk world on a 2-core machine (scale 1: a 0.7 MB image; scale 100: 59 MB):

* a private copy per session (``deserialize``): 1.0 MB per session at scale 1,
  62 MB at scale 100, and a fresh one costs a copy (80-100 ms at scale 100);
* a page-level copy-on-write file or VFS under one connection per session:
  the connection alone, its schema parsed and no page written, holds
  240-390 KB, so 100,000 live sessions need 24-39 GB before any write;
* forked worker processes sharing the image's pages: 3.2-3.6 MB of private
  memory per process after one episode;
* clones lent to the sessions in use, the others parked as row overlays
  (chosen): 20-60 KB per live session after a write at both scales, and a
  fresh session takes a clone from a parked one (a rollback, a few row reads
  and the task's setup) instead of copying anything.

Pages: a small image is built with 1 KiB pages (:data:`SMALL_PAGE_SIZE`),
a large one with SQLite's 4 KiB (:data:`PAGE_SIZE`); the world picks by its
scale (``World.page_size``). A transaction copies each page it first writes
into its rollback journal and a rollback copies it back, so a fresh session
(the parked tenant's rollback, then the task's setup) moves every page its
rows touch twice. With a small image there are up to 64 resident clones,
which a run of fresh sessions visits in turn, so those pages are cold: at
scale 1 a fresh session took 66-110 µs with 4 KiB pages and 43-55 µs with
1 KiB (2-core machine, p50 over 300, clones all lent). A large image has 4-8
clones, whose pages stay warm, and a fresh session costs the same with
either size (32-39 µs at scale 100); building it with 1 KiB pages, four
times as many, took 37 s instead of 13 s at scale 100 (23% longer at scale
10).

What it costs: a session used after parking replays its overlay (one
statement per row it wrote), so a workload stepping more sessions round
robin than there are clones pays that on every step; ``MIRRORWORLD_RESIDENT_MB``
raises the budget.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import json
import os
import sqlite3
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Any, Protocol, TypeVar

from mirrorworld.errors import WorldError

__all__ = ["Clone", "Image", "RowKey", "Tenant", "connect_image", "encode_row"]

RowKey = tuple[str, int]
"""A row's identity: ``(table, rowid)``."""

T = TypeVar("T")

_TRIGGER = "CREATE TRIGGER mw_{op}_{t} AFTER {OP} ON {t} BEGIN SELECT mw_log({i}, {ref}.rowid); END;"

PAGE_SIZE = 4096
"""SQLite's default page size, the one a large image is built with (see the module docstring)."""

SMALL_PAGE_SIZE = 1024
"""The page size of a small image, whose many resident clones a fresh session cycles through."""

POOL_SIZE = 64
"""Most idle connections an image keeps for reuse."""

RESIDENT_BYTES = int(os.environ.get("MIRRORWORLD_RESIDENT_MB", "256")) << 20
"""Memory the clones lent to sessions of one image may hold together (``MIRRORWORLD_RESIDENT_MB``)."""

MIN_RESIDENT, MAX_RESIDENT = 4, 64
"""Bounds on how many sessions of one image hold a clone at once, whatever the image's size."""

STATEMENTS = 512
"""Compiled statements a clone keeps: every statement of a world's tools, setups and replays (a world has 100-200
shapes; sqlite3's default of 128 would recompile, at 20-90 µs each, what falls out)."""

QUERY_MEMO = 4096
"""Most distinct parameterised pristine-image queries whose answers an image keeps (:meth:`Image.query`)."""


def encode_row(row: tuple[Any, ...] | None) -> str:
    """A canonical text form of a row, stable across processes and hash seeds."""
    return json.dumps(row, separators=(",", ":"), ensure_ascii=True)


class Clone(sqlite3.Connection):
    """A connection holding a copy of an image.

    ``written`` receives ``(table index, rowid)`` for every row written to a
    tracked table (the index is into :attr:`Image.tracked`), in write order,
    duplicates included; whoever reads it clears it.
    """

    written: list[tuple[int, int]]
    reader: sqlite3.Cursor
    """A cursor kept for queries whose rows are fetched at once (saves making one per query)."""


class Tenant(Protocol):
    """What an image asks of a session it lends a clone to (see :meth:`Image.lend`).

    ``_pins`` counts the operations using the clone now and ``_sticky`` says a
    caller holds the raw connection (``Session.db``): either keeps the clone
    where it is. ``_used`` orders tenants by their last use. ``_park`` is
    called under the image's lock on a tenant neither pinned nor sticky: it
    keeps what its episode wrote, rolls the clone back to pristine, gives it
    up and returns it.
    """

    _pins: int
    _sticky: bool
    _used: int

    def _park(self) -> Clone: ...


def connect_image(data: bytes) -> Clone:
    """A new in-memory connection holding a copy of ``data``."""
    conn = sqlite3.connect(
        ":memory:", isolation_level=None, check_same_thread=False, factory=Clone, cached_statements=STATEMENTS
    )
    conn.written = []
    log = conn.written.append

    def mw_log(table: int, rowid: int) -> None:
        log((table, rowid))

    conn.create_function("mw_log", 2, mw_log)
    conn.deserialize(data)
    conn.execute("PRAGMA foreign_keys=ON")
    conn.reader = conn.cursor()
    return conn


class Image:
    """The pristine database of one world build, with a pool of clones.

    ``build`` receives an empty connection and must create and fill the world's
    tables; the image then adds change tracking (to every table not named in
    ``untracked``) and freezes the result.

    Clones are lent to sessions (:meth:`lend`), at most :attr:`resident_limit`
    at once: :data:`RESIDENT_BYTES` worth of copies of this image, within
    :data:`MIN_RESIDENT` and :data:`MAX_RESIDENT`. A session beyond that limit
    takes the clone of the session used least recently that nothing is using
    now, which parks: it keeps the rows its episode wrote (its overlay) and
    gets a clone back, with the overlay replayed, when it is next used. So the
    memory of a live session is a fixed share of the resident clones plus what
    it wrote, however large the image; when every resident session is in use,
    the image opens a clone beyond the limit rather than wait.
    """

    def __init__(
        self,
        build: Callable[[sqlite3.Connection], None],
        *,
        untracked: Iterable[str] = (),
        page_size: int = PAGE_SIZE,
    ) -> None:
        if type(page_size) is not int or not 512 <= page_size <= 65536 or page_size & (page_size - 1):
            raise WorldError(f"an image's page size is a power of two from 512 to 65536, not {page_size}")
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA page_size={page_size}")
        build(conn)
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' "
                "AND name NOT LIKE 'mw_%' ORDER BY name"
            )
        ]
        if not tables:
            raise WorldError("a world image needs at least one table")
        skip = set(untracked)
        tracked = [t for t in tables if t not in skip]
        for i, t in enumerate(tracked):
            for op, ref in (("INSERT", "NEW"), ("UPDATE", "NEW"), ("DELETE", "OLD")):
                conn.execute(_TRIGGER.format(op=op.lower(), OP=op, t=t, ref=ref, i=i))
            # An UPDATE that changes a rowid must record the old row too.
            conn.execute(
                f"CREATE TRIGGER mw_updold_{t} AFTER UPDATE ON {t} WHEN OLD.rowid <> NEW.rowid "
                f"BEGIN SELECT mw_log({i}, OLD.rowid); END;"
            )
        # Not vacuumed: the index pages keep room for an episode's rows (see the module docstring).
        self.tables: tuple[str, ...] = tuple(tables)
        self.tracked: tuple[str, ...] = tuple(tracked)
        self.untracked: tuple[str, ...] = tuple(t for t in tables if t in skip)
        self.columns: dict[str, tuple[str, ...]] = {
            t: tuple(r[1] for r in conn.execute(f"PRAGMA table_info({t})")) for t in tables
        }
        self.data: bytes = conn.serialize()
        self.digest: str = self._digest(conn)
        conn.close()
        # A read-only clone used to look up pristine rows; nothing ever writes to it.
        self._pristine = connect_image(self.data)
        self._pristine.execute("PRAGMA query_only=ON")
        self._pristine_lock = threading.Lock()
        self._pool: list[Clone] = []
        self._pool_lock = threading.Lock()
        self._tenants: dict[int, tuple[weakref.ref[Tenant], Clone, int]] = {}
        self.resident_limit: int = max(MIN_RESIDENT, min(MAX_RESIDENT, RESIDENT_BYTES // max(1, len(self.data))))
        """Most sessions that hold a clone at once (beyond it, the least recently used parks)."""
        self.lock = self._pool_lock
        """Held while clones change hands: a session pins itself under it (see :class:`Tenant`)."""
        self.clock = itertools.count()
        """Ticks of use, shared by this image's sessions (``Tenant._used``)."""
        self._select = {t: f"SELECT * FROM {t} WHERE rowid=?" for t in tables}
        self._replay: dict[str, tuple[str, str]] = {}
        self._updates: dict[tuple[str, tuple[int, ...]], str] = {}
        self._untracked_keys: dict[str, tuple[RowKey, ...]] = {}
        self._kept: dict[str, tuple[tuple[Any, ...], ...]] = {}
        self._memo: OrderedDict[tuple[str, tuple[Any, ...]], tuple[tuple[Any, ...], ...]] = OrderedDict()
        self._derived: dict[Hashable, Any] = {}

    def _digest(self, conn: sqlite3.Connection) -> str:
        h = hashlib.sha256()
        for t in self.tables:
            h.update(t.encode())
            for row in conn.execute(f"SELECT rowid, * FROM {t} ORDER BY rowid"):
                h.update(encode_row(tuple(row)).encode())
                h.update(b"\n")
        return h.hexdigest()

    @property
    def nbytes(self) -> int:
        return len(self.data)

    def acquire(self) -> Clone:
        """A connection in pristine state with an episode transaction open (and an empty log)."""
        with self._pool_lock:
            conn = self._pool.pop() if self._pool else None
        if conn is None:
            conn = connect_image(self.data)
        conn.execute("BEGIN")
        conn.written.clear()
        return conn

    def lend(self, tenant: Tenant) -> Clone:
        """A clone for ``tenant``, in pristine state with an episode transaction open.

        Takes an idle clone, else, at :attr:`resident_limit`, the clone of the
        least recently used tenant that is neither pinned nor sticky (which
        parks), else a new one. The caller must hold :attr:`lock` and pin the
        tenant before releasing it.
        """
        conn = self._pool.pop() if self._pool else None
        if conn is None and len(self._tenants) >= self.resident_limit:
            conn = self._evict()
        if conn is None:
            conn = connect_image(self.data)
        elif conn.in_transaction:  # the clone of a tenant that is gone
            conn.execute("ROLLBACK")
        conn.execute("BEGIN")
        conn.written.clear()
        self._tenants[id(tenant)] = (weakref.ref(tenant), conn, tenant._used)
        return conn

    def _evict(self) -> Clone | None:
        """The clone of the tenant to park (or of one that is gone), taken from it; None if all are busy.

        Second chance over the tenants in lending order: one used since it was
        last looked at, or in use now, goes to the back with its use noted; the
        first that is neither parks. Amortised, a constant number of looks.
        """
        tenants = self._tenants
        for _ in range(2 * len(tenants) + 1):
            key = next(iter(tenants))
            ref, conn, seen = tenants[key]
            t = ref()
            if t is None:  # dropped without being closed: its clone is free
                del tenants[key]
                return conn
            if t._pins or t._sticky or t._used != seen:
                del tenants[key]
                tenants[key] = (ref, conn, t._used)
                continue
            del tenants[key]
            return t._park()
        return None

    def vacate(self, tenant: Tenant, conn: Clone, *, reusable: bool = True) -> None:
        """``tenant`` gives its clone back (it closes, or cannot trust the clone); caller holds :attr:`lock`."""
        self._tenants.pop(id(tenant), None)
        if reusable and conn.in_transaction and len(self._pool) < POOL_SIZE:
            conn.execute("ROLLBACK")
            self._pool.append(conn)
        else:
            conn.close()

    @property
    def resident(self) -> int:
        """How many sessions hold a clone now."""
        return len(self._tenants)

    def release(self, conn: Clone, *, reusable: bool = True) -> None:
        """Roll an episode away and keep the connection for the next one."""
        if reusable and conn.in_transaction:
            conn.execute("ROLLBACK")
            with self._pool_lock:
                if len(self._pool) < POOL_SIZE:
                    self._pool.append(conn)
                    return
        conn.close()

    def pristine_row(self, key: RowKey) -> tuple[Any, ...] | None:
        """The row as it is in the pristine image, or None if it did not exist."""
        with self._pristine_lock:
            row = self._pristine.execute(self._select[key[0]], (key[1],)).fetchone()
        return tuple(row) if row is not None else None

    def untracked_keys(self, table: str) -> tuple[RowKey, ...]:
        """The rows of an untracked table in the pristine image."""
        keys = self._untracked_keys.get(table)
        if keys is None:
            rows = self.query(f"SELECT rowid FROM {table}")
            keys = self._untracked_keys[table] = tuple((table, int(r[0])) for r in rows)
        return keys

    def pristine_rows(self, keys: Iterable[RowKey]) -> dict[RowKey, tuple[Any, ...] | None]:
        return {k: self.pristine_row(k) for k in keys}

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[tuple[Any, ...], ...]:
        """Run a read-only query on the pristine image (task generation uses this).

        The image never changes, so answers are kept and handed out as they
        are, immutable: a family drawing from a table's candidates scans it once
        per image and pays nothing per task that grows with the table. A query
        without parameters (a candidate list; world code holds a bounded number
        of them) is kept for the image's life; one with parameters (a lookup of
        one row, drawn afresh for each task) among the :data:`QUERY_MEMO` most
        recently used, so lookups never push a candidate list out.
        """
        if not params:
            rows = self._kept.get(sql)
            if rows is None:
                rows = self._kept[sql] = self._scan(sql, params)
            return rows
        key = (sql, params)
        memo = self._memo
        rows = memo.get(key)
        if rows is not None:
            try:  # noqa: SIM105 - a context manager per hit costs more than the lookup it guards
                memo.move_to_end(key)
            except KeyError:  # another thread has just evicted it
                pass
            return rows
        rows = self._scan(sql, params)
        memo[key] = rows
        while len(memo) > QUERY_MEMO:
            with contextlib.suppress(KeyError):
                memo.popitem(last=False)
        return rows

    def derived(self, key: Hashable, build: Callable[[Image], T]) -> T:
        """A value computed from the pristine image on first use and kept for the image's life.

        For what task generation reads on every task beyond a candidate list
        (the teams by queue, every figure the knowledge base states): built
        once per image, so a task pays a dictionary lookup where it would
        repeat queries and parsing. ``key`` names the value (world code holds
        a bounded number of them, such as the function that builds it);
        ``build`` must be a pure function of the image. The value is shared by
        every caller, so it must never be changed.
        """
        try:
            return self._derived[key]  # type: ignore[no-any-return]
        except KeyError:
            return self._derived.setdefault(key, build(self))  # type: ignore[no-any-return]

    def _scan(self, sql: str, params: tuple[Any, ...]) -> tuple[tuple[Any, ...], ...]:
        with self._pristine_lock:
            return tuple(tuple(r) for r in self._pristine.execute(sql, params))

    @functools.cached_property
    def table_rank(self) -> dict[str, int]:
        """Each table's place in an order where a table comes after every table its foreign keys refer to.

        A reference back to a table earlier in a cycle (or to the table itself)
        is left out; :func:`~mirrorworld.core.state.replay` defers the checks
        where one is met.
        """
        with self._pristine_lock:
            refers = {
                t: {str(r[2]) for r in self._pristine.execute(f"PRAGMA foreign_key_list({t})")} - {t}
                for t in self.tables
            }
        rank: dict[str, int] = {}
        visiting: set[str] = set()

        def place(t: str) -> None:
            if t in rank or t in visiting:
                return
            visiting.add(t)
            for parent in sorted(refers[t]):
                if parent in refers:
                    place(parent)
            visiting.discard(t)
            rank[t] = len(rank)

        for t in self.tables:
            place(t)
        return rank

    def select_sql(self, table: str) -> str:
        return self._select[table]

    def update_sql(self, table: str, columns: tuple[int, ...]) -> str:
        """An update of the columns at positions ``columns`` of a row of ``table``: ``(*values, rowid)``."""
        key = (table, columns)
        sql = self._updates.get(key)
        if sql is None:
            cols = self.columns[table]
            sql = self._updates[key] = f"UPDATE {table} SET {','.join(f'{cols[i]}=?' for i in columns)} WHERE rowid=?"
        return sql

    def replay_sql(self, table: str) -> tuple[str, str]:
        """Statements writing a whole row of ``table``: update ``(*values, rowid)``, insert ``(rowid, *values)``."""
        sql = self._replay.get(table)
        if sql is None:
            cols = self.columns[table]
            sql = self._replay[table] = (
                f"UPDATE {table} SET {','.join(f'{c}=?' for c in cols)} WHERE rowid=?",
                f"INSERT INTO {table} (rowid,{','.join(cols)}) VALUES ({','.join('?' * (len(cols) + 1))})",
            )
        return sql
