"""A session's state: its hash, its changes, the diff of two sessions, a fork.

A session's state is its world's pristine image plus what the episode wrote
(the task's setup included). Only two kinds of row can differ from the image:
the *touched* rows, which the image's triggers log on every write to a
tracked table (see :mod:`mirrorworld.core.store`), and the rows of the
untracked tables (the simulated clock), which are few and always read whole.
Every function here reads just those rows (:func:`state_keys`), so its cost
grows with what the episode wrote, not with the size of the world.

* :func:`state_hash` — SHA-256 over the image's digest and each row that
  differs from the pristine image, in key order. A row written and then
  restored counts as unchanged, so equal states hash equal whatever path led
  to them. The clock is state too, and every committed write advances it.
* :func:`changes` — the rows that differ from the task's initial state (after
  setup), as :class:`RowChange`; what the verifier grades.
* :func:`diff` — the rows that differ between two sessions of one image.
* :func:`fork` — an independent copy mid-episode: a pristine connection of
  the image with the parent's touched rows replayed onto it. Deserialising
  the parent's database would not do: it shows only committed pages, and an
  episode never commits. The replay costs one statement per touched row.

:class:`~mirrorworld.core.session.Session` exposes each as a method
(``session.state_hash()``, ``session.changes()``, ``a.diff(b)``,
``session.fork()``); the functions read the session's bookkeeping and never
change the session they are given.
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mirrorworld.core.store import RowKey, encode_row
from mirrorworld.errors import WorldError

if TYPE_CHECKING:
    from mirrorworld.core.session import Session
    from mirrorworld.core.store import Image

__all__ = ["RowChange", "changes", "diff", "fork", "row", "state_hash", "state_keys"]

Row = tuple[Any, ...]


@dataclass(frozen=True)
class RowChange:
    """One row that differs between two states (``before`` is ``None`` for an insert, ``after`` for a delete)."""

    table: str
    pk: int
    before: dict[str, Any] | None
    after: dict[str, Any] | None

    @property
    def kind(self) -> str:
        """``insert``, ``delete`` or ``update``."""
        if self.before is None:
            return "insert"
        if self.after is None:
            return "delete"
        return "update"

    @property
    def fields(self) -> dict[str, tuple[Any, Any]]:
        """Changed fields as ``{column: (before, after)}``."""
        before = self.before or {}
        after = self.after or {}
        cols = list(after) if after else list(before)
        return {c: (before.get(c), after.get(c)) for c in cols if before.get(c) != after.get(c)}


def state_keys(session: Session) -> list[RowKey]:
    """The touched rows plus every row of the untracked tables (the clock): all that may differ, sorted."""
    with session._hold() as conn:
        return _keys(session, conn)


def _keys(session: Session, conn: sqlite3.Connection) -> list[RowKey]:
    session._settle()
    keys = set(session._touched)
    image = session.image
    for table in image.untracked:
        keys.update((table, int(r[0])) for r in conn.execute(f"SELECT rowid FROM {table}"))
        keys.update(image.untracked_keys(table))
    return sorted(keys)


def row(session: Session, key: RowKey) -> Row | None:
    """Row ``key`` as it is in the session now (``None``: absent)."""
    with session._hold() as conn:
        return row_in(conn, session.image, key)


def row_in(conn: sqlite3.Connection, image: Image, key: RowKey) -> Row | None:
    """Row ``key`` as it is in ``conn``, a clone of ``image``."""
    found = conn.execute(image.select_sql(key[0]), (key[1],)).fetchone()
    return tuple(found) if found is not None else None


def rows_now(session: Session, conn: sqlite3.Connection) -> dict[RowKey, Row | None]:
    """Every row that may differ from the image (:func:`state_keys`), as it is in the session's ``conn``."""
    image = session.image
    return {key: row_in(conn, image, key) for key in _keys(session, conn)}


def state_hash(session: Session) -> str:
    """A canonical hash of the whole state, equal for equal states (see the module docstring)."""
    image = session.image
    h = hashlib.sha256(image.digest.encode())
    with session._hold() as conn:
        for key, now in rows_now(session, conn).items():
            if now != image.pristine_row(key):
                h.update(f"{key[0]}|{key[1]}|{encode_row(now)}\n".encode())
    return h.hexdigest()


def changes(session: Session) -> list[RowChange]:
    """Rows that differ from the task's initial state (after setup), in key order."""
    initial = session._initial
    image = session.image
    out = []
    with session._hold() as conn:
        for key, after in rows_now(session, conn).items():
            before = initial[key] if key in initial else image.pristine_row(key)
            if before != after:
                out.append(_change(image, key, before, after))
    return out


def diff(a: Session, b: Session) -> list[RowChange]:
    """Rows that differ between ``a``'s state (before) and ``b``'s (after), in key order.

    Raises :class:`~mirrorworld.errors.WorldError` unless both sessions are of
    the same image (rows of two images share no meaning).
    """
    a._check_open()
    b._check_open()
    if b.image is not a.image:
        raise WorldError("diff needs two sessions of the same world image")
    image = a.image
    out = []
    with a._hold() as ca, b._hold() as cb:
        for key in sorted(set(_keys(a, ca)) | set(_keys(b, cb))):
            before, after = row_in(ca, image, key), row_in(cb, image, key)
            if before != after:
                out.append(_change(image, key, before, after))
    return out


def _change(image: Image, key: RowKey, before: Row | None, after: Row | None) -> RowChange:
    cols = image.columns[key[0]]
    return RowChange(
        key[0],
        key[1],
        dict(zip(cols, before, strict=True)) if before is not None else None,
        dict(zip(cols, after, strict=True)) if after is not None else None,
    )


def replay(conn: sqlite3.Connection, image: Image, rows: dict[RowKey, Row | None]) -> None:
    """Write ``rows`` (as :func:`rows_now` gives them) onto ``conn``, a pristine clone of ``image``.

    Only what differs from the pristine row is written: nothing for a row
    written back to its pristine values, an update of just the changed
    columns (so only the indexes on those columns are touched), an insert
    under the same rowid for a new row (so no delete action of the schema
    fires), a delete for a removed one. New rows go in parents first, then
    the updates, then the deletes children first (:attr:`Image.table_rank`),
    so every foreign key holds as each statement runs. Only where it cannot
    (a new row referring to a newer one of its own table) are the checks
    deferred to the end of the set, from that statement on: switching the
    deferral expires every statement the connection has compiled, so it is
    kept off the usual path.
    """
    inserts: list[tuple[int, str, tuple[Any, ...]]] = []
    updates: list[tuple[str, tuple[Any, ...]]] = []
    deletes: list[tuple[int, str, tuple[Any, ...]]] = []
    rank = image.table_rank
    for key, values in rows.items():
        before = image.pristine_row(key)
        if values is None:
            if before is not None:
                deletes.append((-rank[key[0]], f"DELETE FROM {key[0]} WHERE rowid=?", (key[1],)))
        elif before is None:
            inserts.append((rank[key[0]], image.replay_sql(key[0])[1], (key[1], *values)))
        else:
            changed = tuple(
                i for i, (a, b) in enumerate(zip(values, before, strict=True)) if a != b or type(a) is not type(b)
            )
            if changed:
                updates.append((image.update_sql(key[0], changed), (*(values[i] for i in changed), key[1])))
    # Stable sorts: rows of one table keep their key (rowid) order.
    inserts.sort(key=lambda w: w[0])
    deletes.sort(key=lambda w: w[0])
    deferred = False
    for sql, params in [*((s, p) for _, s, p in inserts), *updates, *((s, p) for _, s, p in deletes)]:
        try:
            conn.execute(sql, params)
        except sqlite3.IntegrityError:
            if deferred:
                raise
            conn.execute("PRAGMA defer_foreign_keys=ON")
            deferred = True
            conn.execute(sql, params)
    if deferred:
        conn.execute("PRAGMA defer_foreign_keys=OFF")


def fork(session: Session) -> Session:
    """An independent copy of ``session``, mid-episode, events included (see the module docstring)."""
    with session._hold() as conn:
        rows = rows_now(session, conn)
    twin = type(session)(session.world, session.image, session.task, _overlay=rows)
    twin.continue_from(session)
    twin._initial_rows = session._initial
    twin._touched = set(session._touched)
    return twin
