"""Persistent reviewer pools: people who outlive any one review database, and their calibration history.

A review database (:mod:`~mirrorworld.review.store`) is one campaign: its
reviewers sign up in it and their grades stay in it. A **pool registry** — its
own SQLite file, ``pools.sqlite`` by default or ``$MIRRORWORLD_POOLS`` —
keeps the people across campaigns:

* a **pool** is named ``domain/skill`` (``helpdesk/refunds``) and covers a
  world and some of its task families (none named: all of them), at a skill
  ``level`` (``novice``, ``standard``, ``expert`` — free text, for people);
* a **member** is a stable identity: a sign-in name and a credential hash (the
  review store's scrypt format, so the same password signs them in
  everywhere). A member may belong to several pools;
* a **project** is a review database the registry has engaged a pool in,
  known by its resolved path (and a label, by default the file name);
* an **engagement** links a member to their reviewer account in a project;
* a **snapshot** records, at one time, each member's figures in one project as
  :func:`~mirrorworld.review.quality.quality_report` computes them — gold
  accuracy (with its counts), peer agreement (counts and Cohen's kappa),
  verifier agreement, median seconds per item, grades, whether paused. The
  counts are kept so pooled figures are exact: pooled gold accuracy is
  Σ correct / Σ gold, pooled peer agreement Σ agreeing pairs / Σ pairs,
  pooled verifier agreement is weighted by grades, and the pool's median
  seconds is the median of its members' medians.

**Engaging** a pool in a review database (:meth:`PoolRegistry.engage`) gives
every member an account there with their existing credential hash — no new
sign-up, the same password — or links the account of that name when it holds
the same hash; an account of that name with other credentials is a conflict,
and nothing is written. The store has no way to add a reviewer with a
precomputed hash, so the row goes in through this module's SQL inside a
``store.write()`` transaction, with exactly the columns and the
``reviewer_added`` event that ``ReviewStore.add_reviewer`` writes (the event
detail adds the pool). The review database is written first and the registry
second; engaging again is idempotent, so an interruption between the two is
mended by running it again.

**Routing.** An item's domain is its run's world and its family; a pool covers
it when the worlds match (the pool's world is a world name, title or env id:
``helpdesk``, ``Helpdesk-v0``, ``mirrorworld/Helpdesk-v0``; without a version
it matches every version) and the family is one of the pool's (or the pool
names none). :class:`Routing` answers :meth:`Routing.eligible`: a member
engaged in the project takes only items of their pools; a reviewer outside
every pool takes only items no pool covers, so nothing is stranded while
someone can take it. :func:`take_next_routed` serves the queue through that
filter: it asks :func:`~mirrorworld.review.queue.take_next` and, when the
queue's choice is not the reviewer's to take, hands it back (deletes that
ungraded assignment) and picks, in one transaction, the first eligible item by
the queue's own rules — an unseen eligible gold item on a gold turn, else the
first queued item in position order with room under its overlap (finished
reviews plus assignments younger than ``ASSIGNMENT_SECONDS``). That second
pick restates those rules because ``take_next`` takes no filter; an
``eligible`` argument to ``take_next`` would make it a one-liner.

Everything is parameterised SQL. Names are checked before anything is
written — pool names ``domain/skill`` of letters, digits, ``_ . -``; member
names by the review store's rule (1–64 printable characters, no spaces) — and
printed inert by the command line.

**Command line**: ``python -m mirrorworld.review.pools [--pools FILE]
create|add|engage|snapshot|show|export``; every error is one line.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import getpass
import io
import json
import os
import random
import re
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mirrorworld.errors import MirrorworldError
from mirrorworld.review.quality import QualityPolicy, quality_report
from mirrorworld.review.queue import take_next
from mirrorworld.review.store import (
    ASSIGNMENT_SECONDS,
    Item,
    Reviewer,
    ReviewStore,
    connect_durable,
    hash_password,
    transaction,
    verify_password,
)

__all__ = [
    "FORMAT",
    "CalibrationRow",
    "CalibrationTable",
    "Engaged",
    "Member",
    "Pool",
    "PoolRegistry",
    "Routing",
    "add_accounts",
    "main",
    "route",
    "take_next_routed",
]

FORMAT = "mirrorworld-pools/1"
EXPORT_FORMAT = "mirrorworld-pool-calibration/1"
ENV = "MIRRORWORLD_POOLS"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pools (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE COLLATE NOCASE, world TEXT NOT NULL,
    families TEXT NOT NULL, level TEXT NOT NULL, description TEXT NOT NULL, created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS members (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, pw TEXT NOT NULL, created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS pool_members (
    pool_id INTEGER NOT NULL REFERENCES pools(id), member_id INTEGER NOT NULL REFERENCES members(id),
    joined_at REAL NOT NULL, PRIMARY KEY (pool_id, member_id)
);
CREATE TABLE IF NOT EXISTS projects (
    id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, label TEXT NOT NULL, first_engaged_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS engagements (
    pool_id INTEGER NOT NULL REFERENCES pools(id), project_id INTEGER NOT NULL REFERENCES projects(id),
    member_id INTEGER NOT NULL REFERENCES members(id), reviewer_id INTEGER NOT NULL, engaged_at REAL NOT NULL,
    PRIMARY KEY (pool_id, project_id, member_id)
);
CREATE TABLE IF NOT EXISTS snapshots (
    id INTEGER PRIMARY KEY, pool_id INTEGER NOT NULL REFERENCES pools(id),
    project_id INTEGER NOT NULL REFERENCES projects(id), at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS calibration (
    snapshot_id INTEGER NOT NULL REFERENCES snapshots(id), member_id INTEGER NOT NULL REFERENCES members(id),
    reviews INTEGER NOT NULL, gold INTEGER NOT NULL, gold_correct INTEGER NOT NULL,
    peer_pairs INTEGER NOT NULL, peer_agree INTEGER NOT NULL, peer_kappa REAL,
    verifier_agree INTEGER NOT NULL, median_seconds REAL, paused INTEGER NOT NULL,
    PRIMARY KEY (snapshot_id, member_id)
);
"""

_POOL_PART = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}"
_POOL_NAME = re.compile(rf"{_POOL_PART}/{_POOL_PART}")
_WORLD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./-]{0,79}")
_FAMILY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_LEVEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")
_HASH = re.compile(r"scrypt\$\d{1,8}\$\d{1,3}\$\d{1,3}\$[0-9a-f]{2,128}\$[0-9a-f]{64}")
_VERSIONED = re.compile(r"(.*)-v(\d+)")
MAX_DESCRIPTION = 500


def _shown(value: str, limit: int = 64) -> str:
    """A name in an error message: escaped, bounded, quoted."""
    return repr(ascii(value)[1:-1][:limit])


def _check(pattern: re.Pattern[str], value: object, what: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        shown = _shown(value) if isinstance(value, str) else type(value).__name__
        raise MirrorworldError(f"{what} {shown} is not allowed ({_RULES[what]})")
    return value


_RULES = {
    "pool name": "domain/skill, each 1-40 letters, digits, '_', '.' or '-'",
    "world": "1-80 letters, digits, '_', '.', '/' or '-'",
    "family": "1-64 letters, digits, '_', '.' or '-'",
    "level": "1-32 letters, digits, '_' or '-'",
}


def check_member_name(name: object) -> str:
    """``name`` if the review store would accept it as a reviewer name (1–64 printable, no spaces)."""
    if (
        not isinstance(name, str)
        or not name
        or len(name) > 64
        or any(ch.isspace() or not ch.isprintable() for ch in name)
    ):
        shown = _shown(name) if isinstance(name, str) else type(name).__name__
        raise MirrorworldError(f"member name {shown} is not allowed (1-64 printable characters without spaces)")
    return name


def _world_key(world: str) -> tuple[str, str]:
    """(base, version) of a world name, title or env id, for matching: case, namespace and ``_`` ignored."""
    w = world.lower().rpartition("/")[2]
    m = _VERSIONED.fullmatch(w)
    base, version = (m.group(1), m.group(2)) if m else (w, "")
    return base.replace("_", ""), version


def world_matches(pool_world: str, run_world: str) -> bool:
    """Whether a pool's world names a run's world (a pool world without version matches every version)."""
    pb, pv = _world_key(pool_world)
    rb, rv = _world_key(run_world)
    return pb == rb and (not pv or pv == rv)


@dataclass(frozen=True)
class Pool:
    id: int
    name: str
    world: str
    families: tuple[str, ...]
    level: str
    description: str
    created_at: float

    def covers(self, world: str, family: str) -> bool:
        """Whether an item of ``family`` in a run of ``world`` is in this pool's domain."""
        return world_matches(self.world, world) and (not self.families or family in self.families)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "families": list(self.families)}


@dataclass(frozen=True)
class Member:
    id: int
    name: str
    created_at: float


@dataclass(frozen=True)
class Engaged:
    """One member's account in a review database after :meth:`PoolRegistry.engage`."""

    member: str
    reviewer_id: int
    created: bool
    """True when the account was made now; False when the account of that name (same hash) was linked."""


@dataclass(frozen=True)
class CalibrationRow:
    """A member's figures in one project at one snapshot (``member`` is None for the pooled row)."""

    snapshot: int
    at: float
    project: str
    project_path: str
    member: str | None
    reviews: int
    gold: int
    gold_correct: int
    peer_pairs: int
    peer_agree: int
    peer_kappa: float | None
    verifier_agree: int
    median_seconds: float | None
    paused: int

    @property
    def gold_accuracy(self) -> float | None:
        return self.gold_correct / self.gold if self.gold else None

    @property
    def peer_agreement(self) -> float | None:
        return self.peer_agree / self.peer_pairs if self.peer_pairs else None

    @property
    def verifier_agreement(self) -> float | None:
        return self.verifier_agree / self.reviews if self.reviews else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["gold_accuracy"] = self.gold_accuracy
        d["peer_agreement"] = self.peer_agreement
        d["verifier_agreement"] = self.verifier_agreement
        return d


@dataclass(frozen=True)
class CalibrationTable:
    """A pool's calibration history: member rows and pooled rows, oldest snapshot first."""

    pool: Pool
    members: tuple[str, ...]
    rows: tuple[CalibrationRow, ...]
    pooled: tuple[CalibrationRow, ...]

    def history(self, member: str) -> list[CalibrationRow]:
        """One member's rows over time, across projects."""
        return [r for r in self.rows if r.member == member]

    def projects(self) -> list[str]:
        return list(dict.fromkeys(r.project_path for r in self.pooled))

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": EXPORT_FORMAT,
            "pool": self.pool.to_dict(),
            "members": list(self.members),
            "rows": [r.to_dict() for r in self.rows],
            "pooled": [r.to_dict() for r in self.pooled],
        }


_COLUMNS = (
    "kind", "pool", "member", "project", "project_path", "snapshot", "at", "reviews", "gold", "gold_correct",
    "gold_accuracy", "peer_pairs", "peer_agree", "peer_agreement", "peer_kappa", "verifier_agreement",
    "median_seconds", "paused",
)  # fmt: skip


def _cell(value: Any) -> Any:
    """A CSV cell that a spreadsheet will not run: text starting with = + - @ gets a leading quote."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return "" if value is None else value


def _csv(table: CalibrationTable) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(_COLUMNS)
    for kind, rows in (("member", table.rows), ("pooled", table.pooled)):
        for r in rows:
            d = r.to_dict()
            values = {**d, "kind": kind, "pool": table.pool.name, "member": r.member or ""}
            writer.writerow([_cell(values[c]) for c in _COLUMNS])
    return out.getvalue()


_SQLITE_HEADER = b"SQLite format 3\x00"


def _check_file(path: Path) -> None:
    """Refuse an existing ``path`` that is neither empty nor a pool registry, without writing to it."""
    try:
        with path.open("rb") as f:
            header = f.read(len(_SQLITE_HEADER))
    except OSError as err:
        raise MirrorworldError(f"{path} cannot be read as a pool registry ({err.strerror or err})") from None
    if not header:
        return
    if header != _SQLITE_HEADER:
        raise MirrorworldError(f"{path} is not a pool registry (not an SQLite file)")
    wal = path.with_name(path.name + "-wal")
    mode = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?{mode}", uri=True, timeout=30)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if not tables:
                return
            row = conn.execute("SELECT value FROM meta WHERE key='format'").fetchone() if "meta" in tables else None
        finally:
            conn.close()
        found = None if row is None else json.loads(row[0])
    except (sqlite3.DatabaseError, ValueError, TypeError) as err:
        raise MirrorworldError(f"{path} is not a pool registry ({err})") from None
    if found != FORMAT:
        what = "a review database" if isinstance(found, str) and found.startswith("mirrorworld-review") else None
        raise MirrorworldError(f"{path} is not a pool registry ({what or 'an SQLite file of another program'})")


def default_path() -> Path:
    """``$MIRRORWORLD_POOLS`` when set, else ``pools.sqlite`` in the working directory."""
    return Path(os.environ.get(ENV) or "pools.sqlite")


class PoolRegistry:
    """The pool registry at ``path`` (default :func:`default_path`), created when missing. See the module docstring.

    Like the review store it holds no open connection; ``clock`` stamps
    snapshots and engagements.
    """

    def __init__(self, path: str | Path | None = None, *, clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path) if path is not None else default_path()
        self.clock = clock
        if self.path.exists() or self.path.is_symlink():
            _check_file(self.path)
        else:
            if not self.path.parent.is_dir():
                raise MirrorworldError(f"cannot create {self.path}: the folder {self.path.parent} does not exist")
        try:
            with self._write() as conn:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (json.dumps(FORMAT),))
        except sqlite3.DatabaseError as err:
            raise MirrorworldError(f"{self.path} is not a pool registry ({err})") from None

    # -- connections -------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        try:
            return connect_durable(self.path)
        except sqlite3.Error as err:
            raise MirrorworldError(f"cannot open {self.path} ({err})") from None

    def _write(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        return transaction(self._connect, write=True)

    def _read(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        return transaction(self._connect, write=False)

    # -- pools and members -------------------------------------------------------------

    def create_pool(
        self,
        name: str,
        *,
        world: str,
        families: Sequence[str] = (),
        level: str = "standard",
        description: str = "",
    ) -> Pool:
        """A new pool ``domain/skill`` covering ``families`` of ``world`` (none: every family)."""
        _check(_POOL_NAME, name, "pool name")
        _check(_WORLD, world, "world")
        fams = tuple(sorted({_check(_FAMILY, f, "family") for f in families}))
        _check(_LEVEL, level, "level")
        if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
            raise MirrorworldError(f"a description has at most {MAX_DESCRIPTION} characters")
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM pools WHERE name=?", (name,)).fetchone():
                raise MirrorworldError(f"there is already a pool named {_shown(name)}")
            conn.execute(
                "INSERT INTO pools (name, world, families, level, description, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (name, world, json.dumps(list(fams)), level, description, self.clock()),
            )
        return self.pool(name)

    @staticmethod
    def _pool(row: Sequence[Any]) -> Pool:
        return Pool(row[0], row[1], row[2], tuple(json.loads(row[3])), row[4], row[5], row[6])

    def pool(self, name: str, conn: sqlite3.Connection | None = None) -> Pool:
        """The pool named ``name`` (any case)."""
        sql = "SELECT id, name, world, families, level, description, created_at FROM pools WHERE name=?"
        if conn is not None:
            row = conn.execute(sql, (name,)).fetchone()
        else:
            with self._read() as c:
                row = c.execute(sql, (name,)).fetchone()
        if row is None:
            raise MirrorworldError(f"there is no pool named {_shown(str(name))}")
        return self._pool(row)

    def pools(self) -> list[Pool]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT id, name, world, families, level, description, created_at FROM pools ORDER BY name"
            ).fetchall()
        return [self._pool(r) for r in rows]

    def add_member(self, pool: str, name: str, *, password: str | None = None, pw_hash: str | None = None) -> Member:
        """Put ``name`` in ``pool``: a new member with ``password`` (or a precomputed store ``pw_hash``).

        A member who exists already joins the pool; a password or hash given
        for them must be theirs (a member's credentials never change here).
        """
        check_member_name(name)
        if password is not None and pw_hash is not None:
            raise MirrorworldError("give a password or a hash, not both")
        if password is not None and len(password) < 8:
            raise MirrorworldError("a password has at least 8 characters")
        if pw_hash is not None and not (isinstance(pw_hash, str) and _HASH.fullmatch(pw_hash)):
            raise MirrorworldError("a credential hash is the review store's scrypt$n$r$p$salt$hash")
        with self._read() as conn:
            row = conn.execute("SELECT pw FROM members WHERE name=?", (name,)).fetchone()
        if row is not None:
            same = (password is None or verify_password(password, row[0])) and (pw_hash is None or pw_hash == row[0])
            if not same:
                raise MirrorworldError(f"member {_shown(name)} exists with other credentials")
        elif password is None and pw_hash is None:
            raise MirrorworldError(f"{_shown(name)} is not a member yet: give a password (or a hash)")
        new_hash = pw_hash if pw_hash is not None else hash_password(password) if password is not None else None
        now = self.clock()
        with self._write() as conn:
            p = self.pool(pool, conn)
            existing = conn.execute("SELECT id FROM members WHERE name=?", (name,)).fetchone()
            if existing is None:
                if new_hash is None:  # someone removed the member meanwhile: impossible here, but say so
                    raise MirrorworldError(f"{_shown(name)} is not a member yet: give a password (or a hash)")
                cur = conn.execute("INSERT INTO members (name, pw, created_at) VALUES (?, ?, ?)", (name, new_hash, now))
                member_id = int(cur.lastrowid or 0)
            else:
                member_id = int(existing[0])
            conn.execute("INSERT OR IGNORE INTO pool_members VALUES (?, ?, ?)", (p.id, member_id, now))
            created = float(conn.execute("SELECT created_at FROM members WHERE id=?", (member_id,)).fetchone()[0])
        return Member(member_id, name, created)

    def has_member(self, name: str) -> bool:
        with self._read() as conn:
            return conn.execute("SELECT 1 FROM members WHERE name=?", (name,)).fetchone() is not None

    def members(self, pool: str) -> list[Member]:
        with self._read() as conn:
            p = self.pool(pool, conn)
            rows = conn.execute(
                "SELECT m.id, m.name, m.created_at FROM members m JOIN pool_members pm ON pm.member_id=m.id"
                " WHERE pm.pool_id=? ORDER BY m.name",
                (p.id,),
            ).fetchall()
        return [Member(int(r[0]), r[1], float(r[2])) for r in rows]

    # -- projects ----------------------------------------------------------------------

    def engage(self, pool: str, review_db: str | Path, *, label: str | None = None) -> list[Engaged]:
        """Give every member of ``pool`` their account in ``review_db`` (created when missing). See the docstring."""
        if label is not None and (not isinstance(label, str) or len(label) > 200):
            raise MirrorworldError("a project label has at most 200 characters")
        store = ReviewStore(review_db)
        path = str(store.path.resolve())
        with self._read() as conn:
            p = self.pool(pool, conn)
            members = conn.execute(
                "SELECT m.id, m.name, m.pw FROM members m JOIN pool_members pm ON pm.member_id=m.id"
                " WHERE pm.pool_id=? ORDER BY m.name",
                (p.id,),
            ).fetchall()
        done: list[tuple[int, Engaged]] = []
        now = store.clock()
        with store.write() as conn:
            for member_id, name, pw in members:
                row = conn.execute("SELECT id, pw FROM reviewers WHERE name=?", (name,)).fetchone()
                if row is not None and row[1] != pw:
                    raise MirrorworldError(
                        f"{store.path} already has a reviewer named {_shown(name)} with other credentials:"
                        " nothing was engaged"
                    )
                if row is not None:
                    done.append((int(member_id), Engaged(name, int(row[0]), False)))
                    continue
                rid = _insert_account(store, conn, name, pw, now, {"pool": p.name})
                done.append((int(member_id), Engaged(name, rid, True)))
        shown_label = label if label is not None else store.path.name[:200]
        at = self.clock()
        with self._write() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO projects (path, label, first_engaged_at) VALUES (?, ?, ?)",
                (path, shown_label, at),
            )
            if label is not None:
                conn.execute("UPDATE projects SET label=? WHERE path=?", (label, path))
            project_id = int(conn.execute("SELECT id FROM projects WHERE path=?", (path,)).fetchone()[0])
            for member_id, e in done:
                conn.execute(
                    "INSERT OR REPLACE INTO engagements VALUES (?, ?, ?, ?, ?)",
                    (p.id, project_id, member_id, e.reviewer_id, at),
                )
        return [e for _, e in done]

    def _project(self, conn: sqlite3.Connection, store: ReviewStore) -> tuple[int, str, str]:
        row = conn.execute("SELECT id, label, path FROM projects WHERE path=?", (str(store.path.resolve()),)).fetchone()
        if row is None:
            raise MirrorworldError(f"no pool was ever engaged in {store.path}")
        return int(row[0]), str(row[1]), str(row[2])

    def record_calibration(
        self, pool: str, review_db: str | Path, *, policy: QualityPolicy | None = None
    ) -> CalibrationTable:
        """Snapshot each engaged member's quality figures in ``review_db``; return the pool's whole table.

        The figures are :func:`~mirrorworld.review.quality.quality_report`'s,
        with the database's own quality policy unless ``policy`` is given.
        """
        store = ReviewStore(review_db, create=False)
        with self._read() as conn:
            p = self.pool(pool, conn)
            project_id, _, _ = self._project(conn, store)
            engaged = conn.execute(
                "SELECT member_id, reviewer_id FROM engagements WHERE pool_id=? AND project_id=? ORDER BY member_id",
                (p.id, project_id),
            ).fetchall()
            if not engaged:
                raise MirrorworldError(f"pool {_shown(p.name)} was never engaged in {store.path}")
        report = {q.reviewer_id: q for q in quality_report(store, policy)}
        with self._write() as conn:
            cur = conn.execute(
                "INSERT INTO snapshots (pool_id, project_id, at) VALUES (?, ?, ?)", (p.id, project_id, self.clock())
            )
            snapshot = int(cur.lastrowid or 0)
            for member_id, reviewer_id in engaged:
                q = report.get(int(reviewer_id))
                if q is None:  # the account is gone from the review database: nothing to record
                    continue
                agree = round((q.verifier_agreement or 0.0) * q.reviews)
                conn.execute(
                    "INSERT INTO calibration VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        snapshot,
                        member_id,
                        q.reviews,
                        q.gold,
                        q.gold_correct,
                        q.peer_pairs,
                        q.peer_agree,
                        q.peer_kappa,
                        agree,
                        q.median_seconds,
                        int(q.paused),
                    ),
                )
        return self.calibration(pool)

    def calibration(self, pool: str) -> CalibrationTable:
        """The pool's calibration history: each member's rows and the pooled rows, per snapshot, oldest first."""
        with self._read() as conn:
            p = self.pool(pool, conn)
            members = tuple(
                r[0]
                for r in conn.execute(
                    "SELECT m.name FROM members m JOIN pool_members pm ON pm.member_id=m.id WHERE pm.pool_id=?"
                    " ORDER BY m.name",
                    (p.id,),
                )
            )
            rows = conn.execute(
                "SELECT s.id, s.at, pr.label, pr.path, m.name, c.reviews, c.gold, c.gold_correct, c.peer_pairs,"
                " c.peer_agree, c.peer_kappa, c.verifier_agree, c.median_seconds, c.paused"
                " FROM snapshots s JOIN projects pr ON pr.id=s.project_id"
                " JOIN calibration c ON c.snapshot_id=s.id JOIN members m ON m.id=c.member_id"
                " WHERE s.pool_id=? ORDER BY s.at, s.id, m.name",
                (p.id,),
            ).fetchall()
        member_rows = tuple(CalibrationRow(*r) for r in rows)
        pooled: list[CalibrationRow] = []
        by_snapshot: dict[int, list[CalibrationRow]] = {}
        for r in member_rows:
            by_snapshot.setdefault(r.snapshot, []).append(r)
        for snapshot, group in by_snapshot.items():
            medians = [r.median_seconds for r in group if r.median_seconds is not None]
            first = group[0]
            pooled.append(
                CalibrationRow(
                    snapshot=snapshot,
                    at=first.at,
                    project=first.project,
                    project_path=first.project_path,
                    member=None,
                    reviews=sum(r.reviews for r in group),
                    gold=sum(r.gold for r in group),
                    gold_correct=sum(r.gold_correct for r in group),
                    peer_pairs=sum(r.peer_pairs for r in group),
                    peer_agree=sum(r.peer_agree for r in group),
                    peer_kappa=None,
                    verifier_agree=sum(r.verifier_agree for r in group),
                    median_seconds=statistics.median(medians) if medians else None,
                    paused=sum(r.paused for r in group),
                )
            )
        return CalibrationTable(p, members, member_rows, tuple(pooled))

    def export_calibration(self, pool: str, path: str | Path, format: str = "json") -> Path:
        """Write the pool's calibration table to ``path`` as ``json`` or ``csv``, whole or not at all."""
        from mirrorworld.outputs import check_output_path, write_atomic

        if format not in ("json", "csv"):
            raise MirrorworldError(f"the export format is json or csv, not {_shown(str(format), 20)}")
        out = check_output_path(path)
        table = self.calibration(pool)
        data = json.dumps(table.to_dict(), indent=2) + "\n" if format == "json" else _csv(table)
        return write_atomic(out, data)

    # -- routing -----------------------------------------------------------------------

    def route(self, store: ReviewStore) -> Routing:
        """Who may take what in ``store``'s review database (see :class:`Routing`)."""
        path = str(store.path.resolve())
        with self._read() as conn:
            pools = [
                self._pool(r)
                for r in conn.execute(
                    "SELECT id, name, world, families, level, description, created_at FROM pools ORDER BY name"
                )
            ]
            by_id = {p.id: p.name for p in pools}
            engaged = conn.execute(
                "SELECT e.pool_id, e.reviewer_id FROM engagements e JOIN projects pr ON pr.id=e.project_id"
                " WHERE pr.path=? ORDER BY e.pool_id, e.reviewer_id",
                (path,),
            ).fetchall()
        reviewer_pools: dict[int, set[str]] = {}
        for pool_id, reviewer_id in engaged:
            reviewer_pools.setdefault(int(reviewer_id), set()).add(by_id[int(pool_id)])
        engaged_pools = {name for names in reviewer_pools.values() for name in names}
        return Routing(
            pools=tuple(p for p in pools if p.name in engaged_pools),
            reviewer_pools={r: frozenset(n) for r, n in reviewer_pools.items()},
            run_worlds={int(r["id"]): str(r["world"]) for r in store.runs()},
        )


def _insert_account(
    store: ReviewStore, conn: sqlite3.Connection, name: str, pw_hash: str, now: float, detail: dict[str, Any]
) -> int:
    """Insert a reviewer with a precomputed hash: the columns and event of ``ReviewStore.add_reviewer``."""
    cur = conn.execute(
        "INSERT INTO reviewers (name, role, pw, created_at) VALUES (?, ?, ?, ?)", (name, "reviewer", pw_hash, now)
    )
    rid = int(cur.lastrowid or 0)
    store.log(conn, rid, "reviewer_added", {"name": name, "role": "reviewer", **detail})
    return rid


def add_accounts(store: ReviewStore, names: Sequence[str], pw_hash: str) -> dict[str, int]:
    """Reviewer accounts ``names`` in ``store`` holding ``pw_hash``, in one transaction; name → reviewer id.

    What :meth:`PoolRegistry.engage` does for members, for accounts without a
    pool (simulated reviewers: one hash computed once instead of one scrypt
    each). A name that exists is refused unless its account holds the same hash.
    """
    for name in names:
        check_member_name(name)
    if not _HASH.fullmatch(pw_hash):
        raise MirrorworldError("a credential hash is the review store's scrypt$n$r$p$salt$hash")
    out: dict[str, int] = {}
    now = store.clock()
    with store.write() as conn:
        for name in names:
            row = conn.execute("SELECT id, pw FROM reviewers WHERE name=?", (name,)).fetchone()
            if row is not None and row[1] != pw_hash:
                raise MirrorworldError(f"{store.path} already has a reviewer named {_shown(name)}")
            out[name] = int(row[0]) if row is not None else _insert_account(store, conn, name, pw_hash, now, {})
    return out


@dataclass(frozen=True)
class Routing:
    """Which reviewers of one review database may take which items (see the module docstring).

    ``pools`` are the pools engaged in the database; ``reviewer_pools`` maps a
    reviewer id to the pools they were engaged through; ``run_worlds`` maps a
    run id to its world id. Build it with :meth:`PoolRegistry.route` (or
    :func:`route`), and again after engaging more pools or importing runs.
    """

    pools: tuple[Pool, ...]
    reviewer_pools: Mapping[int, frozenset[str]]
    run_worlds: Mapping[int, str] = field(default_factory=dict)

    def pools_of(self, item: Item) -> frozenset[str]:
        """The pools whose domain holds ``item``."""
        world = self.run_worlds.get(item.run_id, "")
        return frozenset(p.name for p in self.pools if p.covers(world, item.family))

    def eligible(self, reviewer: Reviewer | int, item: Item) -> bool:
        """Whether ``reviewer`` may take ``item``: a member only their pools' items, anyone else only unpooled ones."""
        rid = reviewer if isinstance(reviewer, int) else reviewer.id
        mine = self.reviewer_pools.get(rid)
        theirs = self.pools_of(item)
        return bool(mine & theirs) if mine else not theirs


def route(store: ReviewStore, registry: PoolRegistry) -> Routing:
    """The routing of ``store``'s review database by the pools ``registry`` engaged in it."""
    return registry.route(store)


def take_next_routed(store: ReviewStore, reviewer: Reviewer, routing: Routing) -> int | None:
    """:func:`~mirrorworld.review.queue.take_next` through ``routing``: the next item this reviewer may take.

    The queue's choice stands when the reviewer may take it. Otherwise it is
    handed back and the first eligible item is chosen by the queue's rules
    (see the module docstring); None when there is none.
    """
    got = take_next(store, reviewer)
    if got is None:
        return None
    item = store.item(got)
    if item is not None and routing.eligible(reviewer, item):
        return got
    was_gold = item is not None and item.gold_answer is not None
    return _reroute(store, reviewer, routing, gold_turn=was_gold)


def _reroute(store: ReviewStore, reviewer: Reviewer, routing: Routing, *, gold_turn: bool) -> int | None:
    now = store.clock()
    with store.write() as conn:
        open_rows = conn.execute(
            "SELECT a.item_id FROM assignments a LEFT JOIN reviews v ON v.item_id=a.item_id AND"
            " v.reviewer_id=a.reviewer_id WHERE a.reviewer_id=? AND v.id IS NULL ORDER BY a.started_at, a.item_id",
            (reviewer.id,),
        ).fetchall()
        for (item_id,) in open_rows:  # hand back what is not theirs; resume what is
            held = store.item(int(item_id), conn)
            if held is not None and routing.eligible(reviewer, held):
                return int(item_id)
            conn.execute("DELETE FROM assignments WHERE item_id=? AND reviewer_id=?", (item_id, reviewer.id))
        seen = {int(r[0]) for r in conn.execute("SELECT item_id FROM assignments WHERE reviewer_id=?", (reviewer.id,))}
        choice: int | None = None
        if gold_turn:
            golds = [
                i.id
                for i in store.items(conn, "i.gold_answer IS NOT NULL")
                if i.id not in seen and routing.eligible(reviewer, i)
            ]
            if golds:
                done = int(
                    conn.execute("SELECT COUNT(*) FROM reviews WHERE reviewer_id=?", (reviewer.id,)).fetchone()[0]
                )
                choice = random.Random(f"{store.secret}/routed/{reviewer.id}/{done}").choice(sorted(golds))
        if choice is None:
            taken = dict(
                conn.execute(
                    "SELECT a.item_id, COUNT(*) FROM assignments a LEFT JOIN reviews v ON v.item_id=a.item_id"
                    " AND v.reviewer_id=a.reviewer_id WHERE v.id IS NOT NULL OR a.started_at > ? GROUP BY a.item_id",
                    (now - ASSIGNMENT_SECONDS,),
                ).fetchall()
            )
            queued = store.items(conn, "i.position IS NOT NULL AND i.gold_answer IS NULL")
            for i in sorted(queued, key=lambda i: i.position or 0):
                if i.id not in seen and taken.get(i.id, 0) < i.overlap and routing.eligible(reviewer, i):
                    choice = i.id
                    break
        if choice is None:
            return None
        conn.execute("INSERT INTO assignments VALUES (?, ?, ?)", (choice, reviewer.id, now))
        return choice


# -- command line --------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (no usage block)."""

    def error(self, message: str) -> Any:
        from mirrorworld.inert import inert

        self.exit(2, f"mirrorworld: error: {inert(message, 500, lines=False)} (see --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m mirrorworld.review.pools",
        description="Reviewer pools that outlive review databases: members, engagements, calibration history.",
        epilog="example: python -m mirrorworld.review.pools create helpdesk/refunds --world helpdesk"
        " --family refund_damaged --family refund_with_approval",
    )
    return add_arguments(parser)


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the pools options and subcommands to ``parser`` (this module's and ``mirrorworld review pools``)."""
    parser.add_argument("--pools", default=None, help=f"the pool registry (default: ${ENV} or pools.sqlite)")
    sub = parser.add_subparsers(dest="pools_command", required=True, parser_class=type(parser))
    c = sub.add_parser("create", help="create a pool domain/skill")
    c.add_argument("name", help="domain/skill, e.g. helpdesk/refunds")
    c.add_argument("--world", required=True, help="the world the pool covers (name, title or env id)")
    c.add_argument("--family", action="append", default=[], help="a task family it covers (repeat; none: all)")
    c.add_argument("--level", default="standard", help="skill level (default: standard)")
    c.add_argument("--description", default="", help="what the pool is for")
    a = sub.add_parser("add", help="add a member to a pool (new members give a password on standard input)")
    a.add_argument("pool")
    a.add_argument("name", help="the member's sign-in name")
    a.add_argument("--from-db", default=None, metavar="DB", help="take the credentials of NAME's account in DB")
    e = sub.add_parser("engage", help="give the pool's members their accounts in a review database")
    e.add_argument("pool")
    e.add_argument("db", help="the review database (created when missing)")
    e.add_argument("--label", default=None, help="the project's label (default: the file name)")
    s = sub.add_parser("snapshot", help="record the members' calibration figures in a review database")
    s.add_argument("pool")
    s.add_argument("db")
    w = sub.add_parser("show", help="list the pools, or one pool's members and calibration history")
    w.add_argument("pool", nargs="?")
    w.add_argument("--json", action="store_true", help="print the calibration table as JSON")
    x = sub.add_parser("export", help="write a pool's calibration table")
    x.add_argument("pool")
    x.add_argument("out")
    x.add_argument("--format", choices=("json", "csv"), default="json")
    return parser


def _fig(value: float | None, pattern: str = "{:.2f}") -> str:
    return "-" if value is None else pattern.format(value)


def _read_password(stdin: Any) -> str:
    if stdin.isatty():
        return getpass.getpass("password: ")
    line = stdin.readline()
    return str(line).rstrip("\r\n")


def _account_hash(db: str, name: str) -> str:
    store = ReviewStore(db, create=False)
    with store.read() as conn:
        row = conn.execute("SELECT pw FROM reviewers WHERE name=?", (name,)).fetchone()
    if row is None:
        raise MirrorworldError(f"{db} has no reviewer named {_shown(name)}")
    return str(row[0])


def _run(args: argparse.Namespace, out: Any, stdin: Any) -> int:
    from mirrorworld.inert import inert

    def say(*parts: object) -> None:
        print(" ".join(inert(p, 300, lines=False) for p in parts), file=out)

    reg = PoolRegistry(args.pools)
    if args.pools_command == "create":
        p = reg.create_pool(
            args.name, world=args.world, families=args.family, level=args.level, description=args.description
        )
        say(f"created pool {p.name}: world {p.world}, families {', '.join(p.families) or 'all'}, level {p.level}")
    elif args.pools_command == "add":
        check_member_name(args.name)
        reg.pool(args.pool)
        if args.from_db is not None:
            m = reg.add_member(args.pool, args.name, pw_hash=_account_hash(args.from_db, args.name))
        elif reg.has_member(args.name):
            m = reg.add_member(args.pool, args.name)
        else:
            m = reg.add_member(args.pool, args.name, password=_read_password(stdin))
        say(f"{m.name} is in {args.pool}")
    elif args.pools_command == "engage":
        done = reg.engage(args.pool, args.db, label=args.label)
        made = sum(e.created for e in done)
        say(f"engaged {args.pool} in {args.db}: {made} accounts made, {len(done) - made} linked")
    elif args.pools_command == "snapshot":
        table = reg.record_calibration(args.pool, args.db)
        say(f"recorded {args.pool} in {args.db}: {len(table.pooled)} snapshots in its history")
    elif args.pools_command == "show":
        if args.pool is None:
            for p in reg.pools():
                say(f"{p.name}  world {p.world}  families {', '.join(p.families) or 'all'}  level {p.level}")
            return 0
        table = reg.calibration(args.pool)
        if args.json:
            print(json.dumps(table.to_dict(), indent=2), file=out)
            return 0
        p = table.pool
        say(f"pool {p.name}: world {p.world}, families {', '.join(p.families) or 'all'}, level {p.level}")
        say(f"members: {', '.join(table.members) or 'none'}")
        say("when                 project              member            graded gold   peers  verifier  s/item")
        for r in [*table.rows, *table.pooled]:
            when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(r.at))
            say(
                f"{when:<20} {r.project[:20]:<20} {(r.member or '(pool)')[:16]:<16} {r.reviews:>7} "
                f"{_fig(r.gold_accuracy):>5} {_fig(r.peer_agreement):>6} {_fig(r.verifier_agreement):>9} "
                f"{_fig(r.median_seconds, '{:.0f}'):>7}"
            )
    elif args.pools_command == "export":
        written = reg.export_calibration(args.pool, args.out, args.format)
        say(f"wrote {written}")
    return 0


def main(argv: Sequence[str] | None = None, *, out: Any = None, stdin: Any = None) -> int:
    """The command line; returns the exit status. Errors are one line on standard error."""
    return run(_parser().parse_args(argv), out=out, stdin=stdin)


def run(args: argparse.Namespace, *, out: Any = None, stdin: Any = None) -> int:
    """Carry out parsed pools arguments (:func:`add_arguments`); errors are one line on standard error."""
    from mirrorworld.inert import inert

    try:
        return _run(args, out or sys.stdout, stdin or sys.stdin)
    except (MirrorworldError, sqlite3.Error, OSError) as err:
        print(f"mirrorworld: error: {inert(err, 2000, lines=False)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
