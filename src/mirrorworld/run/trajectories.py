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

A run file is untrusted input: every episode read is checked (column types, JSON
shapes, the verdict through :meth:`~mirrorworld.verify.verdict.Verdict.from_dict`)
and a malformed one is a one-line :class:`~mirrorworld.errors.RunFileError`
naming the file, the episode and the field.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

from mirrorworld.errors import Failure, RunFileError
from mirrorworld.run.runner import EpisodeRecord
from mirrorworld.verify.verdict import Verdict

__all__ = ["FORMAT", "RunFile"]

FORMAT = "mirrorworld-run/1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS episodes (
    idx INTEGER PRIMARY KEY, task_id TEXT NOT NULL, family TEXT NOT NULL, seed INTEGER NOT NULL,
    split TEXT NOT NULL, trial INTEGER NOT NULL, agent TEXT NOT NULL, passed INTEGER NOT NULL,
    score REAL NOT NULL, reward REAL NOT NULL, steps INTEGER NOT NULL, messages TEXT NOT NULL,
    calls TEXT NOT NULL, verdict TEXT NOT NULL, task TEXT NOT NULL, world_hash TEXT NOT NULL,
    error TEXT, seconds REAL NOT NULL, failure TEXT
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
}
"""The type each column must hold once read (JSON columns decoded)."""


def _loads(text: Any) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None


class RunFile:
    """A run file opened for reading or writing."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path
        try:
            present = {row[1] for row in conn.execute("PRAGMA table_info(episodes)")}
        except sqlite3.DatabaseError:
            conn.close()
            raise RunFileError(f"{path} is not a mirrorworld run file") from None
        if not {"idx"} | set(_COLUMNS) - {"index", "failure"} <= present:
            conn.close()
            raise RunFileError(f"{path} is not a {FORMAT} run file (its episodes table lacks columns)")
        selected = [("idx" if c == "index" else c) if c in present or c == "index" else "NULL" for c in _COLUMNS]
        self._select = ",".join(selected)

    @classmethod
    def create(cls, path: str | Path, meta: dict[str, Any]) -> RunFile:
        p = Path(path)
        if p.exists():
            raise RunFileError(f"{p} already exists")
        p.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(p)
        conn.executescript(_SCHEMA)
        with conn:
            conn.executemany(
                "INSERT INTO meta VALUES (?, ?)",
                [("format", json.dumps(FORMAT))] + [(k, json.dumps(v)) for k, v in meta.items()],
            )
        return cls(conn, p)

    @classmethod
    def open(cls, path: str | Path) -> RunFile:
        p = Path(path)
        if not p.is_file():
            raise RunFileError(f"no run file at {p}")
        try:
            conn = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
        except sqlite3.DatabaseError:
            raise RunFileError(f"{p} is not a mirrorworld run file") from None
        try:
            fmt = conn.execute("SELECT value FROM meta WHERE key='format'").fetchone()
        except sqlite3.DatabaseError:
            conn.close()
            raise RunFileError(f"{p} is not a mirrorworld run file") from None
        if fmt is None or _loads(fmt[0]) != FORMAT:
            conn.close()
            raise RunFileError(f"{p} is not a {FORMAT} run file")
        return cls(conn, p)

    def __enter__(self) -> RunFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._conn.close()

    @property
    def meta(self) -> dict[str, Any]:
        """The run's metadata (its ``summary`` once the run finished); values are untrusted JSON."""
        out: dict[str, Any] = {}
        for key, value in self._rows("SELECT key, value FROM meta"):
            try:
                out[str(key)] = json.loads(value)
            except (TypeError, ValueError):
                raise RunFileError(f"{self.path}: meta {str(key)[:60]!r} is not valid JSON") from None
        return out

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
        try:
            yield from self._conn.execute(sql, params)
        except sqlite3.DatabaseError as err:
            raise RunFileError(f"{self.path} cannot be read: {err}") from None

    def set_meta(self, key: str, value: Any) -> None:
        with self._conn:
            self._conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def add(self, record: EpisodeRecord) -> None:
        """Append an episode; the run file numbers episodes in the order they are added."""
        record.index = len(self)
        row = []
        for name in _COLUMNS:
            value = getattr(record, name)
            if name == "failure":
                value = None if value is None else json.dumps(value.to_dict())
            elif name in _JSON_FIELDS:
                value = json.dumps(value, default=str)
            row.append(value)
        cols = ",".join("idx" if c == "index" else c for c in _COLUMNS)
        with self._conn:
            self._conn.execute(f"INSERT INTO episodes ({cols}) VALUES ({','.join('?' * len(_COLUMNS))})", row)

    def _record(self, row: tuple[Any, ...]) -> EpisodeRecord:
        values = dict(zip(_COLUMNS, row, strict=True))
        where = f"{self.path}: episode {values['index']!r}"[:300]
        for name in (*_JSON_FIELDS, "failure"):
            if values[name] is None:
                continue
            if not isinstance(values[name], str):
                raise RunFileError(f"{where}: {name} is not JSON text")
            try:
                values[name] = json.loads(values[name])
            except ValueError:
                raise RunFileError(f"{where}: {name} is not valid JSON") from None
        for name, types in _SHAPES.items():
            value = values[name]
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                got = "null" if value is None else type(value).__name__
                raise RunFileError(f"{where}: {name} is {got}, not {' or '.join(t.__name__ for t in types)}")
        for name in ("messages", "calls"):
            if not all(isinstance(item, dict) for item in values[name]):
                raise RunFileError(f"{where}: {name} holds something other than objects")
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
        row = next(self._rows(f"SELECT {self._select} FROM episodes WHERE idx=?", (index,)), None)
        if row is None:
            raise RunFileError(f"{self.path} has no episode {index}")
        return self._record(row)

    def __len__(self) -> int:
        return int(self._conn.execute("SELECT COUNT(*) FROM episodes").fetchone()[0])
