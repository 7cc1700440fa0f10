"""The benchmark's baseline: a tau-bench-style environment over the same data.

This is **not** part of mirrorworld's engine. It reproduces, as small and as
charitably as possible, how tau-bench runs an episode, so that ``mirrorworld
bench`` can report every figure as a ratio against it, measured in the same
process on the same machine and on exactly the same data:

* the world's pristine SQLite image is exported once to a JSON document
  ``{table: {rowid: {column: value}}}`` in a temporary file;
* **reset** reads and parses that file (tau-bench reloads its JSON database on
  every ``env.reset``; ``json.loads`` already yields a private copy, so no
  ``deepcopy`` is added on top) and applies the task's setup writes to the dicts;
* a **read tool** parses the JSON arguments, looks the record up in the dicts and
  returns ``json.dumps`` of it (tau-bench's tools are exactly this);
* a **write** is applied as the final row values the gold solution produced
  (captured once from mirrorworld), i.e. with no validation or business logic
  at all: cheaper than any real tool, so the baseline is favoured;
* **grading** is tau-bench's: hash the whole data state (``json.dumps`` with
  sorted keys, then SHA-256), reload the data, replay the gold writes on it, hash
  again and compare.

Nothing here is used outside the benchmark and its tests.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mirrorworld.core.state import RowChange
from mirrorworld.core.store import Image, connect_image
from mirrorworld.core.task import Task

__all__ = ["JsonBaseline", "Tables", "Write", "apply_writes", "dump_tables", "export_tables", "writes_from_changes"]

Tables = dict[str, dict[str, dict[str, Any]]]
"""``{table: {str(rowid): {column: value}}}``: the whole database as plain JSON data."""

Write = tuple[str, str, dict[str, Any] | None]
"""One row written: ``(table, str(rowid), row)``; ``None`` deletes the row."""

HIDDEN = frozenset({"security_pin", "risk_score"})
"""Columns the mirror's ``get_customer`` never returns (the baseline hides them too)."""


def dump_tables(conn: Any, tables: Iterable[str], columns: Mapping[str, tuple[str, ...]]) -> Tables:
    """Every row of ``tables`` on the SQLite connection ``conn``, as plain dicts keyed by rowid."""
    out: Tables = {}
    for t in tables:
        cols = columns[t]
        out[t] = {
            str(r[0]): dict(zip(cols, r[1:], strict=True))
            for r in conn.execute(f"SELECT rowid, * FROM {t} ORDER BY rowid")
        }
    return out


def export_tables(image: Image) -> Tables:
    """The pristine image's world tables (no change-tracking tables) as plain data."""
    conn = connect_image(image.data)
    try:
        return dump_tables(conn, image.tables, image.columns)
    finally:
        conn.close()


def writes_from_changes(changes: Iterable[RowChange]) -> list[Write]:
    """The row writes a mirror session made, in the baseline's form."""
    return [(c.table, str(c.pk), dict(c.after) if c.after is not None else None) for c in changes]


class JsonBaseline:
    """A tau-bench-style environment: the database is a JSON file reloaded per episode."""

    def __init__(self, path: Path, columns: Mapping[str, tuple[str, ...]]) -> None:
        self.path = path
        self.columns = dict(columns)

    @classmethod
    def export(cls, image: Image, path: Path) -> JsonBaseline:
        """Write ``image`` as JSON to ``path`` and return a baseline reading it."""
        path.write_text(json.dumps(export_tables(image)), encoding="utf-8")
        return cls(path, image.columns)

    # -- reset --------------------------------------------------------------

    def load(self) -> Tables:
        """A fresh private copy of the pristine data (tau-bench's ``load_data``)."""
        data: Tables = json.loads(self.path.read_text(encoding="utf-8"))
        return data

    def reset(self, task: Task | None = None) -> Tables:
        """Reload the data and apply ``task``'s setup writes."""
        data = self.load()
        if task is not None:
            for op in task.setup:
                rows = data[op.table]
                if op.op == "insert":
                    pk = op.values.get("id")
                    key = str(pk) if pk is not None else str(max((int(k) for k in rows), default=0) + 1)
                    row = dict.fromkeys(self.columns[op.table])
                    row.update(op.values)
                    row["id"] = int(key)
                    rows[key] = row
                else:
                    rows[str(op.pk)].update(op.values)
        return data

    # -- tools --------------------------------------------------------------

    @staticmethod
    def get_customer(data: Tables, customer_id: int) -> str:
        """The baseline's ``get_customer``: a dict lookup and ``json.dumps``."""
        row = data["customers"].get(str(customer_id))
        if row is None:
            return json.dumps({"error": {"code": "not_found", "message": f"no customer {customer_id}"}})
        return json.dumps({"customer": {k: v for k, v in row.items() if k not in HIDDEN}})

    def step(self, data: Tables, tool: str, args: str, writes: Iterable[Write] = ()) -> str:
        """One tool call with JSON arguments, tau-bench style.

        ``get_customer`` is a real lookup; any other tool only applies ``writes``
        (the rows the mirror's tool produced) and echoes its arguments.
        """
        try:
            kwargs = json.loads(args) if args else {}
            if tool == "get_customer":
                return self.get_customer(data, int(kwargs["customer_id"]))
            apply_writes(data, writes)
            return json.dumps({"ok": True, "tool": tool, "args": kwargs})
        except Exception as err:
            return f"Error: {err}"

    # -- grading ------------------------------------------------------------

    @staticmethod
    def state_hash(data: Tables) -> str:
        """SHA-256 of the whole data state (tau-bench's ``get_data_hash``)."""
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()

    def grade(self, data: Tables, task: Task, gold_writes: Iterable[Write]) -> bool:
        """Hash the agent's state, rebuild the gold state from scratch, hash it, compare."""
        got = self.state_hash(data)
        gold = self.reset(task)
        apply_writes(gold, gold_writes)
        return got == self.state_hash(gold)


def apply_writes(data: Tables, writes: Iterable[Write]) -> None:
    """Set (or delete) each written row."""
    for table, key, row in writes:
        if row is None:
            data[table].pop(key, None)
        else:
            data[table][key] = dict(row)
