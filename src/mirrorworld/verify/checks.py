"""Evaluating a task's declared checks against a database state.

Check kinds are generic, so every world gets them:

* ``field`` — ``{table, id, field, equals}``: one column of one row;
* ``count`` — ``{table, where, min?, max?}``: how many rows match ``where``;
* ``sum`` — ``{table, column, where, equals}``: the sum of a column over rows.

``where`` maps column names to required values. Table and column names are
checked against the image's schema before any SQL is built; values are always
bound parameters.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mirrorworld.core.store import Image
from mirrorworld.core.task import Check
from mirrorworld.errors import VerifierError

if TYPE_CHECKING:
    from mirrorworld.core.task import Task
    from mirrorworld.core.world import World

__all__ = ["evaluate_check", "initial_potential", "potential"]


def _columns(image: Image, table: str, names: list[str]) -> None:
    cols = image.columns.get(table)
    if cols is None:
        raise VerifierError(f"check names unknown table {table!r}")
    for n in names:
        if n not in cols:
            raise VerifierError(f"check names unknown column {table}.{n}")


def _where(where: Mapping[str, Any]) -> tuple[str, tuple[Any, ...]]:
    if not where:
        return "1", ()
    parts = [f"{k} IS ?" for k in where]
    return " AND ".join(parts), tuple(where.values())


def evaluate_check(db: sqlite3.Connection, image: Image, check: Check) -> bool:
    """Whether ``check`` holds in the state of ``db``."""
    p = check.params
    if check.kind == "field":
        _columns(image, p["table"], [p["field"]])
        row = db.execute(f"SELECT {p['field']} FROM {p['table']} WHERE rowid=?", (p["id"],)).fetchone()
        return row is not None and row[0] == p["equals"]
    if check.kind == "count":
        where = p.get("where", {})
        _columns(image, p["table"], list(where))
        clause, params = _where(where)
        n = db.execute(f"SELECT COUNT(*) FROM {p['table']} WHERE {clause}", params).fetchone()[0]
        return bool(n >= p.get("min", 0) and ("max" not in p or n <= p["max"]))
    if check.kind == "sum":
        where = p.get("where", {})
        _columns(image, p["table"], [p["column"], *where])
        clause, params = _where(where)
        total = db.execute(f"SELECT COALESCE(SUM({p['column']}), 0) FROM {p['table']} WHERE {clause}", params)
        return bool(total.fetchone()[0] == p["equals"])
    raise VerifierError(f"unknown check kind {check.kind!r} in check {check.name!r}")


def initial_potential(world: World, task: Task) -> float:
    """Φ(s₀): the potential of a task's initial state (computed once per task, kept with the task's cache)."""
    prep = world.prepared(task)
    if prep.initial_potential is None:
        with world.session(task) as s:
            prep.initial_potential = potential(s.db, s.image, task.checks)
    return prep.initial_potential


def potential(db: sqlite3.Connection, image: Image, checks: tuple[Check, ...]) -> float:
    """Φ(s): the fraction of the task's checks that hold (0 when there are none)."""
    if not checks:
        return 0.0
    return sum(evaluate_check(db, image, c) for c in checks) / len(checks)
