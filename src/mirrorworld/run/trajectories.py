"""Run files: trajectories and verdicts in one SQLite file.

A run file holds a ``meta`` table (format, world, agent, options, summary) and
one ``episodes`` row per episode with its OpenAI-format messages, the recorded
tool calls, the verdict, the task and the world's content hash. Each episode is
committed on its own, so an interrupted run keeps every finished episode.

An errored episode (see :mod:`mirrorworld.run.runner`) has an empty verdict
(``{}``), its failure as JSON ``{boundary, kind, message}`` in the ``failure``
column and the failure's message in ``error``. Files written before the
``failure`` column existed still open: their episodes' failures are derived
from ``error`` (:class:`~mirrorworld.run.runner.EpisodeRecord`).

A run file is untrusted input, and :meth:`RunFile.open` treats it so:

* the file is opened read-only, and its schema is checked before anything is
  read from it: ``meta`` and ``episodes`` must be ordinary tables (not views,
  which can hide an endless recursive query, nor virtual tables), with the
  columns a run file has and no generated column, and no trigger may sit on
  them. ``trusted_schema`` is off, so nothing in the schema runs a function
  that is not harmless;
* reading is bounded: temporary results stay in memory (nothing spills to
  disk), no single value may exceed :data:`MAX_VALUE_BYTES`, and a statement
  that runs more virtual-machine steps than a read of a file of that size
  needs (:data:`STEPS_PER_BYTE` per byte of the file, at least
  :data:`MIN_STEPS`) is interrupted;
* every value read is checked: ``meta`` whole when the file is opened (each
  key text, each value JSON), each episode as it is read (column types, JSON
  shapes and depth through :func:`~mirrorworld.run.untrusted.loads`, each
  recorded call a tool name with its arguments, the verdict through
  :meth:`~mirrorworld.verify.verdict.Verdict.from_dict`).

Whatever is wrong is a one-line :class:`~mirrorworld.errors.RunFileError`
naming the file (and the episode and the field), never another exception, a
hang or a disk filled with temporary files.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

from mirrorworld.errors import Failure, RunFileError
from mirrorworld.run.runner import EpisodeRecord
from mirrorworld.run.untrusted import loads
from mirrorworld.verify.verdict import Verdict

__all__ = ["FORMAT", "MAX_VALUE_BYTES", "MIN_STEPS", "STEPS_PER_BYTE", "RunFile"]

FORMAT = "mirrorworld-run/1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS episodes (
    idx INTEGER PRIMARY KEY, task_id TEXT NOT NULL, family TEXT NOT NULL, seed INTEGER NOT NULL,
    split TEXT NOT NULL, trial INTEGER NOT NULL, agent TEXT NOT NULL, passed INTEGER NOT NULL,
    score REAL NOT NULL, reward REAL NOT NULL, steps INTEGER NOT NULL, messages TEXT NOT NULL,
    calls TEXT NOT NULL, verdict TEXT NOT NULL, task TEXT NOT NULL, world_hash TEXT NOT NULL,
    error TEXT, seconds REAL NOT NULL, failure TEXT, usage TEXT
);
"""
_JSON_FIELDS = ("messages", "calls", "verdict", "task")
_COLUMNS = [f.name for f in fields(EpisodeRecord)]
_SHAPES: dict[str, tuple[type, ...]] = {
    "index": (int,),
    "task_id": (str,),
    "family": (str,),
    "seed": (int,),
    "split": (str,),
    "trial": (int,),
    "agent": (str,),
    "passed": (int,),
    "score": (int, float),
    "reward": (int, float),
    "steps": (int,),
    "messages": (list,),
    "calls": (list,),
    "verdict": (dict,),
    "task": (dict,),
    "world_hash": (str,),
    "error": (str, type(None)),
    "seconds": (int, float),
    "failure": (dict, type(None)),
    "usage": (dict, type(None)),
}
"""The type each column must hold once read (JSON columns decoded)."""

MAX_VALUE_BYTES = 128 << 20
"""Largest single value (a text or a blob) a reader takes from a run file."""
MIN_STEPS = 50_000_000
STEPS_PER_BYTE = 200
"""A statement on an opened run file may run ``max(MIN_STEPS, STEPS_PER_BYTE * file size)`` VM steps.

Reading a table costs a few dozen steps per row and a row takes far more than
a byte, so a read of any real run file stays well inside the budget; only a
query that does more than read what the file holds (which the schema check
already refuses) can reach it.
"""
_OPTIONAL = ("failure", "usage")
"""Columns a run file written before they existed lacks (read as NULL)."""
_TICK = 1000
"""VM steps between two calls of the progress handler that counts them."""
_TABLES = ("meta", "episodes")


def _schema_fault(conn: sqlite3.Connection) -> str | None:
    """What keeps ``conn``'s schema from being a run file's, or None (see the module docstring)."""
    objects = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    for table in _TABLES:
        found = [(t, sql) for t, name, _tbl, sql in objects if isinstance(name, str) and name.lower() == table]
        if not found:
            return f"it has no {table} table"
        kind, sql = found[0]
        if kind != "table":
            return f"its {table} is a {kind}, not a table"
        if not isinstance(sql, str) or not sql.lstrip()[:12].upper().startswith("CREATE TABLE"):
            return f"its {table} is not an ordinary table"
        if any(t == "trigger" and isinstance(tbl, str) and tbl.lower() == table for t, _n, tbl, _s in objects):
            return f"its {table} table has a trigger"
        if any(row[6] for row in conn.execute(f"PRAGMA table_xinfo({table})")):
            return f"its {table} table has generated or hidden columns"
    present = {row[1] for row in conn.execute("PRAGMA table_info(meta)")}
    if not {"key", "value"} <= present:
        return "its meta table lacks columns"
    return None


def _guard(conn: sqlite3.Connection, size: int) -> list[int]:
    """Bound what any statement on ``conn`` may do (see the module docstring); return the step counter.

    The counter (one item, in ticks of :data:`_TICK` steps) is zeroed before each statement.
    """
    conn.execute("PRAGMA trusted_schema=OFF")
    conn.execute("PRAGMA temp_store=MEMORY")
    conn.execute("PRAGMA query_only=ON")
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    budget = max(MIN_STEPS, STEPS_PER_BYTE * size) // _TICK
    ticks = [0]

    def progress() -> int:
        ticks[0] += 1
        return 1 if ticks[0] > budget else 0

    conn.set_progress_handler(progress, _TICK)
    return ticks


class RunFile:
    """A run file opened for reading (:meth:`open`, untrusted) or writing (:meth:`create`)."""

    def __init__(self, conn: sqlite3.Connection, path: Path, steps: list[int] | None = None) -> None:
        self._conn = conn
        self.path = path
        self._steps = steps
        try:
            present = {row[1] for row in self._rows("PRAGMA table_info(episodes)")}
        except RunFileError:
            conn.close()
            raise
        if not {"idx"} | set(_COLUMNS) - {"index", *_OPTIONAL} <= present:
            conn.close()
            raise RunFileError(f"{path} is not a {FORMAT} run file (its episodes table lacks columns)")
        selected = [("idx" if c == "index" else c) if c in present or c == "index" else "NULL" for c in _COLUMNS]
        self._select = ",".join(selected)
        try:
            counts = next(self._rows("SELECT COUNT(*), COUNT(DISTINCT idx) FROM episodes"))
        except RunFileError:
            conn.close()
            raise
        if counts[0] != counts[1]:
            conn.close()
            raise RunFileError(f"{path}: its episodes repeat an index (a run file holds each episode once)")

    @classmethod
    def create(cls, path: str | Path, meta: dict[str, Any]) -> RunFile:
        """A new run file at ``path``, which must not exist (not even as a dangling symbolic link)."""
        p = Path(path)
        if p.exists() or p.is_symlink():
            raise RunFileError(f"{p} already exists")
        p.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(p)
            conn.executescript(_SCHEMA)
            with conn:
                conn.executemany(
                    "INSERT INTO meta VALUES (?, ?)",
                    [("format", json.dumps(FORMAT))] + [(k, json.dumps(v)) for k, v in meta.items()],
                )
        except sqlite3.Error as err:
            raise RunFileError(f"cannot create a run file at {p}: {err}") from None
        return cls(conn, p)

    @classmethod
    def open(cls, path: str | Path) -> RunFile:
        """The run file at ``path``, read-only, its schema and ``meta`` checked (see the module docstring)."""
        p = Path(path)
        if not p.is_file():
            raise RunFileError(f"no run file at {p}")
        try:
            size = p.stat().st_size
            conn = sqlite3.connect(f"{p.resolve().as_uri()}?mode=ro", uri=True)
        except (OSError, sqlite3.Error):
            raise RunFileError(f"{p} is not a mirrorworld run file") from None
        try:
            steps = _guard(conn, size)
            fault = _schema_fault(conn)
        except sqlite3.Error:
            conn.close()
            raise RunFileError(f"{p} is not a mirrorworld run file") from None
        if fault is not None:
            conn.close()
            raise RunFileError(f"{p} is not a {FORMAT} run file ({fault})")
        run = cls(conn, p, steps)
        try:
            fmt = run._meta_rows("key='format'").get("format")
            if fmt != FORMAT:
                raise RunFileError(f"{p} is not a {FORMAT} run file")
            run.meta  # noqa: B018 - every value checked now, so that a reader of one episode refuses the file too
        except RunFileError:
            run.close()
            raise
        return run

    def __enter__(self) -> RunFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._conn.close()

    @property
    def meta(self) -> dict[str, Any]:
        """The run's metadata (its ``summary`` once the run finished); values are untrusted JSON."""
        return self._meta_rows()

    def _meta_rows(self, where: str = "1") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in self._rows(f"SELECT key, value FROM meta WHERE {where}"):
            if not isinstance(key, str):
                raise RunFileError(f"{self.path}: a meta key is not text")
            shown = f"{self.path}: meta {key[:60]!r}"
            if not isinstance(value, str):
                raise RunFileError(f"{shown} is not JSON text")
            out[key] = loads(value, shown)
        return out

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
        if self._steps is not None:
            self._steps[0] = 0
        try:
            yield from self._conn.execute(sql, params)
        except sqlite3.DatabaseError as err:
            raise RunFileError(f"{self.path} cannot be read: {err}") from None
        except OverflowError:
            raise RunFileError(f"{self.path} cannot be read: a number out of SQLite's range") from None

    def set_meta(self, key: str, value: Any) -> None:
        with self._conn:
            self._conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def add(self, record: EpisodeRecord, *, keep_index: bool = False) -> None:
        """Append an episode. The run file numbers episodes in the order they are added, unless
        ``keep_index``: then the record keeps its own index (a planned run's), which must be free."""
        if not keep_index:
            record.index = len(self)
        row = []
        for name in _COLUMNS:
            value = getattr(record, name)
            if name == "failure":
                value = None if value is None else json.dumps(value.to_dict())
            elif name in _JSON_FIELDS or name == "usage":
                value = None if value is None and name == "usage" else json.dumps(value, default=str)
            row.append(value)
        cols = ",".join("idx" if c == "index" else c for c in _COLUMNS)
        try:
            with self._conn:
                self._conn.execute(f"INSERT INTO episodes ({cols}) VALUES ({','.join('?' * len(_COLUMNS))})", row)
        except sqlite3.IntegrityError:
            raise RunFileError(f"{self.path} already holds episode {record.index}") from None

    @classmethod
    def append_to(cls, path: str | Path) -> RunFile:
        """The run file at ``path`` opened to add episodes (to resume a run), after :meth:`open` checked it whole.

        A file written before a column existed gets it (``ALTER TABLE``), so
        that what is added keeps everything a record holds.
        """
        with cls.open(path) as checked:
            for _ in checked.episodes():
                pass
        p = Path(path)
        try:
            conn = sqlite3.connect(p)
            present = {row[1] for row in conn.execute("PRAGMA table_info(episodes)")}
            for name in _OPTIONAL:
                if name not in present:
                    conn.execute(f"ALTER TABLE episodes ADD COLUMN {name} TEXT")
        except sqlite3.Error as err:
            raise RunFileError(f"cannot write to the run file {p}: {err}") from None
        return cls(conn, p)

    def discard(self, indices: Iterable[int]) -> None:
        """Remove these episodes (an errored episode about to be played again)."""
        with self._conn:
            self._conn.executemany("DELETE FROM episodes WHERE idx=?", [(int(i),) for i in indices])

    def _record(self, row: tuple[Any, ...]) -> EpisodeRecord:
        values = dict(zip(_COLUMNS, row, strict=True))
        where = f"{self.path}: episode {values['index']!r}"[:300]
        for name in (*_JSON_FIELDS, *_OPTIONAL):
            if values[name] is None:
                continue
            if not isinstance(values[name], str):
                raise RunFileError(f"{where}: {name} is not JSON text")
            values[name] = loads(values[name], f"{where}: {name}")
        for name, types in _SHAPES.items():
            value = values[name]
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                got = "null" if value is None else type(value).__name__
                raise RunFileError(f"{where}: {name} is {got}, not {' or '.join(t.__name__ for t in types)}")
        for name in ("messages", "calls"):
            if not all(isinstance(item, dict) for item in values[name]):
                raise RunFileError(f"{where}: {name} holds something other than objects")
        for call in values["calls"]:
            if not isinstance(call.get("tool"), str) or not isinstance(call.get("args"), (dict, type(None))):
                raise RunFileError(f"{where}: calls holds a call without a tool name and its arguments")
        for name in ("score", "reward", "seconds"):
            if not math.isfinite(values[name]):
                raise RunFileError(f"{where}: {name} is not a finite number")
        if values["passed"] not in (0, 1) or values["steps"] < 0 or values["trial"] < 0 or values["seconds"] < 0:
            raise RunFileError(f"{where}: passed, steps, trial or seconds is out of range")
        usage = values["usage"]
        if usage is not None and not all(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**53 for v in usage.values()
        ):
            raise RunFileError(f"{where}: usage holds something other than counts")
        values["passed"] = bool(values["passed"])
        values["failure"] = None if values["failure"] is None else Failure.from_dict(values["failure"])
        try:
            if values["verdict"]:
                Verdict.from_dict(values["verdict"])
        except RunFileError as err:
            raise RunFileError(f"{where}: {err}") from None
        return EpisodeRecord(**values)

    def episodes(self) -> Iterator[EpisodeRecord]:
        for row in self._rows(f"SELECT {self._select} FROM episodes ORDER BY idx"):
            yield self._record(row)

    def episode(self, index: int) -> EpisodeRecord:
        if not -(2**63) <= index < 2**63:
            raise RunFileError(f"{self.path} has no episode {index}")
        row = next(self._rows(f"SELECT {self._select} FROM episodes WHERE idx=?", (index,)), None)
        if row is None:
            raise RunFileError(f"{self.path} has no episode {index}")
        return self._record(row)

    def __len__(self) -> int:
        return int(next(self._rows("SELECT COUNT(*) FROM episodes"))[0])
