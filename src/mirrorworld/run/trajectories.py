"""Run files: trajectories and verdicts in one SQLite file.

A run file holds a ``meta`` table (format, world, agent, options, summary) and
one ``episodes`` row per episode with its OpenAI-format messages, the recorded
tool calls, the verdict, the task and the world's content hash. Each episode is
committed on its own, so an interrupted run keeps every finished episode.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

from mirrorworld.errors import RunFileError
from mirrorworld.run.runner import EpisodeRecord

__all__ = ["FORMAT", "RunFile"]

FORMAT = "mirrorworld-run/1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS episodes (
    idx INTEGER PRIMARY KEY, task_id TEXT NOT NULL, family TEXT NOT NULL, seed INTEGER NOT NULL,
    split TEXT NOT NULL, trial INTEGER NOT NULL, agent TEXT NOT NULL, passed INTEGER NOT NULL,
    score REAL NOT NULL, reward REAL NOT NULL, steps INTEGER NOT NULL, messages TEXT NOT NULL,
    calls TEXT NOT NULL, verdict TEXT NOT NULL, task TEXT NOT NULL, world_hash TEXT NOT NULL,
    error TEXT, seconds REAL NOT NULL
);
"""
_JSON_FIELDS = ("messages", "calls", "verdict", "task")
_COLUMNS = [f.name for f in fields(EpisodeRecord)]


class RunFile:
    """A run file opened for reading or writing."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path

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
            fmt = conn.execute("SELECT value FROM meta WHERE key='format'").fetchone()
        except sqlite3.DatabaseError:
            raise RunFileError(f"{p} is not a mirrorworld run file") from None
        if fmt is None or json.loads(fmt[0]) != FORMAT:
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
        return {k: json.loads(v) for k, v in self._conn.execute("SELECT key, value FROM meta")}

    def set_meta(self, key: str, value: Any) -> None:
        with self._conn:
            self._conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def add(self, record: EpisodeRecord) -> None:
        """Append an episode; the run file numbers episodes in the order they are added."""
        record.index = len(self)
        row = []
        for name in _COLUMNS:
            value = getattr(record, name)
            row.append(json.dumps(value, default=str) if name in _JSON_FIELDS else value)
        cols = ",".join(_COLUMNS).replace("index", "idx")
        with self._conn:
            self._conn.execute(f"INSERT INTO episodes ({cols}) VALUES ({','.join('?' * len(_COLUMNS))})", row)

    def _record(self, row: tuple[Any, ...]) -> EpisodeRecord:
        values = dict(zip(_COLUMNS, row, strict=True))
        for name in _JSON_FIELDS:
            values[name] = json.loads(values[name])
        values["passed"] = bool(values["passed"])
        return EpisodeRecord(**values)

    def episodes(self) -> Iterator[EpisodeRecord]:
        cols = ",".join(_COLUMNS).replace("index", "idx")
        for row in self._conn.execute(f"SELECT {cols} FROM episodes ORDER BY idx"):
            yield self._record(row)

    def episode(self, index: int) -> EpisodeRecord:
        cols = ",".join(_COLUMNS).replace("index", "idx")
        row = self._conn.execute(f"SELECT {cols} FROM episodes WHERE idx=?", (index,)).fetchone()
        if row is None:
            raise RunFileError(f"{self.path} has no episode {index}")
        return self._record(row)

    def __len__(self) -> int:
        return int(self._conn.execute("SELECT COUNT(*) FROM episodes").fetchone()[0])
