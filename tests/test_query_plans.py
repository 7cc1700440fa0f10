"""No query a world runs per episode grows with the world's size.

For every registered world, the SQL its tools, its task setup, its verifier
(guards, checks, claims) and its task generation actually run is captured while
gold solutions of every family are played and the read tools are called with
the gold's arguments (plus a search that matches nothing and one of two
letters), and each statement's ``EXPLAIN QUERY PLAN`` must be bounded:

* no ``SCAN`` of a table (with or without an index) but of the tables listed in
  :data:`FIXED`, whose size does not depend on the world's scale
  (:func:`test_fixed_tables_do_not_grow` checks each claim at two scales);
* no virtual-table scan without a constraint (an FTS ``MATCH``, a vocabulary
  range);
* a ``SEARCH`` whose key matches a set that grows with the scale (``status=?``)
  must read the index in the statement's order and stop at a ``LIMIT``: no
  temporary B-tree sorting that set.

Task generation's queries that every seed of a family asks alike (the
candidate lists a family draws from) and the personal-data index the verifier
builds once per world are read once per image (``Image.query`` keeps the
answer) and are exempt, as is what builds a value ``Image.derived`` keeps for
the image's life (once: a statement such a build asks twice is not); the
queries that depend on the seed are not.

Not a timing test: the plans and the data are deterministic.
"""

from __future__ import annotations

import random
import re
import sqlite3
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

import mirrorworld.core.store as store
from mirrorworld.core.registry import default
from mirrorworld.core.session import Session
from mirrorworld.core.store import Image, connect_image
from mirrorworld.core.text import like_pattern, search_query
from mirrorworld.core.world import World
from mirrorworld.verify.verifier import verify

SMALL, LARGE = 1.0, 4.0
SEEDS = 3
ONCE = "a value derived from the image (Image.derived: built once per image)"

COMMON = {
    "sim_clock": "one row: the session's simulated time",
    "mw_customer_search_config": "the full-text index's own settings (a few rows)",
}
HELPDESK = {
    "products": "the catalogue: two products per catalogue word",
    "teams": "the six support teams",
    "agents": "five agents per team",
    "articles": "the knowledge base: a fixed set of articles",
    "mw_ticket_subjects": "the distinct ticket subjects: the templates, however many tickets use them",
}
FIXED: dict[str, dict[str, str]] = {
    "helpdesk": {**COMMON, **HELPDESK},
    "helpdesk_v1": {**COMMON, **HELPDESK},
    "helpdesk_team": {
        **COMMON,
        **HELPDESK,
        "approval_requests": "empty in the image: only the episode's own requests",
    },
    "sales": {
        **COMMON,
        "products": "the catalogue",
        "sequences": "one row per numbered document kind",
        "parties": "the company, its employee and the firm list (which caps the customers at any scale)",
    },
}
"""World -> tables a query may scan, each with why its size does not depend on the scale."""
FIXED["sales_v1"] = FIXED["sales"]  # a drifted version: the same tables and queries

NO_MATCH = "Zzyzx Nomatch"
TWO_LETTERS = "zq"


@dataclass
class Capture:
    world: World
    statements: dict[str, str] = field(default_factory=dict)
    """Expanded SQL run on an episode's connection -> where it was first seen."""
    image_queries: list[tuple[str, tuple[Any, ...], str]] = field(default_factory=list)
    """(sql, params, where) asked of the pristine image per task (the seed-independent ones left out)."""


class _Recorder:
    """Trace callbacks on every clone, and the queries asked of the pristine image."""

    def __init__(self) -> None:
        self.where = "build"
        self.quiet = False
        self.statements: dict[str, str] = {}
        self.asked: list[tuple[str, tuple[Any, ...], str]] = []

    def connect(self, data: bytes) -> store.Clone:
        conn = connect_image(data)
        conn.set_trace_callback(self._trace)
        return conn

    def _trace(self, sql: str) -> None:
        if not self.quiet:
            self.statements.setdefault(sql, self.where)

    def wrap(self, image: Image) -> None:
        query = image.query

        def recorded(sql: str, params: tuple[Any, ...] = ()) -> Any:
            self.asked.append((sql, tuple(params), self.where))
            self.quiet = True
            try:
                return query(sql, params)
            finally:
                self.quiet = False

        image.query = recorded  # type: ignore[method-assign]
        derived = image.derived

        def built_once(key: Any, build: Any) -> Any:
            def build_recorded(im: Image) -> Any:
                where, self.where = self.where, ONCE
                try:
                    return build(im)
                finally:
                    self.where = where

            return derived(key, build_recorded)

        image.derived = built_once  # type: ignore[method-assign]


def _probe_args(world: World, spec_name: str, gold_args: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    spec = world.tools_by_name[spec_name]
    names = {p.name for p in spec.params}
    required = {p.name for p in spec.params if p.required}
    if not required:
        yield {}
    for args in gold_args:
        fit = {k: v for k, v in args.items() if k in names}
        if fit and required <= set(fit):
            yield fit
    for p in spec.params:
        others = required - {p.name}
        if others:
            continue
        if "enum" in p.schema:
            for choice in p.schema["enum"]:
                yield {p.name: choice}
        elif p.schema.get("type") == "string":
            yield {p.name: NO_MATCH}
            yield {p.name: TWO_LETTERS}


def _play(world: World, rec: _Recorder) -> None:
    reads = [t.name for t in world.tools if t.kind == "read"]
    for family in world.families:
        for seed in range(SEEDS):
            rec.where = f"generating {family.name}/{seed}"
            task = world.task(family.name, seed)
            gold_args = [dict(c.args) for c in task.gold if isinstance(c.args, dict)]
            rec.where = f"{task.id}: reads"
            with world.session(task) as s:
                _reads(s, reads, gold_args)
            rec.where = f"{task.id}: gold and verdict"
            s = world.session(task)
            try:
                for call in task.gold:
                    if world.tools_by_name[call.tool].kind == "terminal":
                        rec.where = f"{task.id}: reads after the gold's writes"
                        _reads(s, reads, gold_args)
                        rec.where = f"{task.id}: gold and verdict"
                    s.call(call.tool, call.args)
                verdict = verify(s)
                assert verdict.passed, (task.id, verdict.evidence)
            finally:
                s.close()


def _reads(s: Session, reads: list[str], gold_args: list[dict[str, Any]]) -> None:
    for name in reads:
        for args in _probe_args(s.world, name, gold_args):
            s.call(name, args)


_CAPTURES: dict[str, Capture] = {}


def capture(name: str) -> Capture:
    hit = _CAPTURES.get(name)
    if hit is not None:
        return hit
    rec = _Recorder()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(store, "connect_image", rec.connect)
        world = type(default.get(name))(scale=SMALL)
        rec.wrap(world.image)
        rec.where = "the personal-data index (built once per world)"
        world.customer_data(None)
        _play(world, rec)
    by_family: dict[str, dict[tuple[str, tuple[Any, ...]], set[str]]] = {}
    for sql, params, where in rec.asked:
        if where.startswith("generating "):
            family, seed = where.removeprefix("generating ").split("/")
            by_family.setdefault(family, {}).setdefault((sql, params), set()).add(seed)
    once = {(sql, params) for sql, params, where in rec.asked if where.startswith("the personal-data index")}
    derived_asks = Counter(sql for sql, _params, where in rec.asked if where == ONCE)  # a per-task key: asked again
    per_task = []
    for sql, params, where in rec.asked:
        if (sql, params) in once or (where == ONCE and derived_asks[sql] == 1):
            continue  # the verifier's index of the image's personal data, or a value derived once per image
        if where.startswith("generating "):
            family = where.removeprefix("generating ").split("/")[0]
            if len(by_family[family][(sql, params)]) == SEEDS:
                continue  # every seed asks it alike: answered once per image
        per_task.append((sql, params, where))
    cap = _CAPTURES[name] = Capture(world, rec.statements, per_task)
    return cap


_LARGE: dict[str, World] = {}


def large(name: str) -> World:
    if name not in _LARGE:
        _LARGE[name] = type(default.get(name))(scale=LARGE)
    return _LARGE[name]


# -- reading plans ------------------------------------------------------------------

_TABLE_REF = re.compile(
    r"\b(?:FROM|JOIN|INTO|UPDATE)\s+['\"]?(?:main['\"]?\.['\"]?)?(\w+)['\"]?(?:\s+(?:AS\s+)?(\w+))?", re.I
)
_NOT_ALIAS = {"WHERE", "ON", "JOIN", "LEFT", "INNER", "CROSS", "ORDER", "GROUP", "LIMIT", "USING", "SET", "VALUES"}
_SEARCH = re.compile(r"^SEARCH (\S+) USING (?:COVERING )?INDEX (\w+) \(([^)]*)\)")


def _aliases(sql: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for table, alias in _TABLE_REF.findall(sql):
        out[table] = table
        if alias and alias.upper() not in _NOT_ALIAS:
            out[alias] = table
    return out


def _table(name: str, aliases: dict[str, str]) -> str:
    name = name.removeprefix("main.")
    return aliases.get(name, name)


def _max_group(world: World, table: str, cols: list[str]) -> int:
    """The most rows one value of ``cols`` holds (``col=?`` never matches NULL, so NULLs hold none)."""
    if not cols:
        return int(world.image.query(f"SELECT COUNT(*) FROM {table}")[0][0])
    keys = ", ".join(cols)
    present = " AND ".join(f"{c} IS NOT NULL" for c in cols)
    row = world.image.query(f"SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM {table} WHERE {present} GROUP BY {keys})")
    return int(row[0][0] or 0)


def _index_columns(conn: sqlite3.Connection, index: str) -> list[str]:
    return [r[2] for r in conn.execute(f"PRAGMA index_info({index})")]


def unbounded(name: str, conn: sqlite3.Connection, sql: str, params: tuple[Any, ...] = ()) -> list[str]:
    """What in ``sql``'s plan reads a part of the tables that grows with the scale."""
    if not re.match(r"\s*(SELECT|INSERT|UPDATE|DELETE|WITH|REPLACE)\b", sql, re.I):
        return []
    plan = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    fixed = FIXED.get(name, COMMON)
    aliases = _aliases(sql)
    sorts = any("USE TEMP B-TREE" in d for d in plan)
    limited = re.search(r"\bLIMIT\s+\d", sql, re.I) is not None
    found = []
    for d in plan:
        scan = re.match(r"^SCAN (\S+)", d)
        if scan:
            table = _table(scan.group(1), aliases)
            unconstrained = "VIRTUAL TABLE INDEX 0:" in d
            if unconstrained or (table in tables and table not in fixed and "VIRTUAL TABLE" not in d):
                found.append(d)
            continue
        search = _SEARCH.match(d)
        if search is None:
            continue
        table = _table(search.group(1), aliases)
        if table in fixed:
            continue
        cols = _index_columns(conn, search.group(2))
        eq = [c for c in cols if re.search(rf"\b{c}=\?", search.group(3))]
        eq = eq[: next((i for i, c in enumerate(cols) if c not in eq), len(cols))]
        if cols and eq == cols[: len(eq)] and _grows(name, table, eq) and (sorts or not limited):
            found.append(f"{d} (its key's rows grow with the scale{', sorted' if sorts else ''}, no LIMIT bound)")
    return found


_GROWTH: dict[tuple[str, str, tuple[str, ...]], bool] = {}


def _grows(name: str, table: str, cols: list[str]) -> bool:
    key = (name, table, tuple(cols))
    if key not in _GROWTH:
        small = _max_group(capture(name).world, table, cols)
        big = _max_group(large(name), table, cols)
        _GROWTH[key] = big > 2 * max(small, 1)
    return _GROWTH[key]


def violations(name: str) -> list[str]:
    cap = capture(name)
    conn = connect_image(cap.world.image.data)
    try:
        out = []
        for sql, where in cap.statements.items():
            for d in unbounded(name, conn, sql):
                out.append(f"{where}: {d}\n    {sql[:300]}")
        for sql, params, where in cap.image_queries:
            for d in unbounded(name, conn, sql, params):
                out.append(f"{where} (pristine image): {d}\n    {sql[:300]} {params!r:.100}")
        return out
    finally:
        conn.close()


# -- the tests ------------------------------------------------------------------------


@pytest.mark.parametrize("name", default.names())
def test_every_query_is_bounded(name: str) -> None:
    found = violations(name)
    assert not found, f"{len(found)} unbounded plans in {name}:\n" + "\n".join(found)


@pytest.mark.parametrize("name", default.names())
def test_the_capture_covers_every_tool(name: str) -> None:
    cap = capture(name)
    assert len(cap.statements) > 50
    seen = " ".join(cap.statements).lower()
    for table in cap.world.image.tables:
        if table != "sim_clock" and cap.world.image.query(f"SELECT COUNT(*) FROM {table}")[0][0]:
            assert table in seen, f"no captured statement reads {table}"


@pytest.mark.parametrize("name", default.names())
def test_fixed_tables_do_not_grow(name: str) -> None:
    small, big = capture(name).world, large(name)
    present = {r[0] for r in small.image.query("SELECT name FROM sqlite_master WHERE type='table'")}
    for table, why in FIXED.get(name, COMMON).items():
        if table not in present:
            continue
        counts = [int(w.image.query(f"SELECT COUNT(*) FROM {table}")[0][0]) for w in (small, big)]
        assert counts[0] == counts[1], f"{table} ({why}) has {counts[0]} rows at scale {SMALL}, {counts[1]} at {LARGE}"


def test_the_check_catches_a_scan() -> None:
    conn = connect_image(capture("helpdesk").world.image.data)
    try:
        assert unbounded("helpdesk", conn, "SELECT id FROM tickets WHERE subject LIKE '%x%' ORDER BY id LIMIT 10")
        assert unbounded("helpdesk", conn, "SELECT id FROM tickets WHERE status='closed' ORDER BY updated_at LIMIT 20")
        assert unbounded("helpdesk", conn, "SELECT id FROM tickets WHERE status='closed'")
        assert not unbounded("helpdesk", conn, "SELECT id FROM tickets WHERE customer_id=3 ORDER BY updated_at")
        assert not unbounded("helpdesk", conn, "SELECT id FROM teams WHERE name LIKE '%x%'")
    finally:
        conn.close()


# -- the bounded searches answer exactly what a scan answers ----------------------------


def _scan_customers(db: sqlite3.Connection, query: str) -> list[dict[str, Any]]:
    p = like_pattern(search_query(query))
    rows = db.execute(
        "SELECT id, name, email, tier FROM customers WHERE name LIKE ? ESCAPE '\\' OR email LIKE ? ESCAPE '\\' "
        "OR phone LIKE ? ESCAPE '\\' ORDER BY id LIMIT 10",
        (p, p, p),
    )
    return [dict(zip(("id", "name", "email", "tier"), r, strict=True)) for r in rows]


def _scan_tickets(db: sqlite3.Connection, args: dict[str, Any]) -> list[dict[str, Any]]:
    clauses, params = [], []
    for col in ("customer_id", "status"):
        if col in args:
            clauses.append(f"{col}=?")
            params.append(args[col])
    if "query" in args:
        clauses.append("subject LIKE ? ESCAPE '\\'")
        params.append(like_pattern(search_query(args["query"])))
    cols = ("id", "customer_id", "subject", "status", "priority", "team_id", "created_at")
    where = " AND ".join(clauses)
    rows = db.execute(
        f"SELECT {', '.join(cols)} FROM tickets WHERE {where} ORDER BY created_at DESC, id DESC LIMIT 20", params
    )
    return [dict(zip(cols, r, strict=True)) for r in rows]


def _queries(rng: random.Random, texts: list[str], n: int) -> Iterator[str]:
    while n:
        src = rng.choice(texts)
        start = rng.randrange(len(src))
        q = src[start : start + rng.choice((2, 2, 3, 4, 7, 12))]
        q = q.upper() if rng.random() < 0.3 else q
        q = q + "zq" if rng.random() < 0.1 else q
        if len(" ".join(q.split())) >= 2:
            n -= 1
            yield q


def _check_searches(s: Session, rng: random.Random, n: int) -> None:
    db = s.db
    texts = [r[0] for r in db.execute("SELECT name || ' ' || email || ' ' || phone FROM customers")]
    subjects = [r[0] for r in db.execute("SELECT subject FROM tickets")]
    for q in _queries(rng, texts, n):
        got = s.call("search_customers", {"query": q})
        assert got.ok and got.data["customers"] == _scan_customers(db, q), q
    for q in _queries(rng, subjects, n):
        args: dict[str, Any] = {"query": q}
        if rng.random() < 0.5:
            args["status"] = rng.choice(("new", "open", "pending", "solved", "closed"))
        if rng.random() < 0.2:
            args["customer_id"] = rng.randint(1, 30)
        got = s.call("search_tickets", args)
        assert got.ok and got.data["tickets"] == _scan_tickets(db, args), args
    for status in ("new", "open", "pending", "solved", "closed"):
        assert s.call("search_tickets", {"status": status}).data["tickets"] == _scan_tickets(db, {"status": status})


def test_searches_match_the_scan_in_the_image_and_after_writes() -> None:
    world = default.get("helpdesk")
    rng = random.Random(7)
    task = world.task("update_email", 0)
    with world.session(task) as s:
        _check_searches(s, rng, 300)
        for call in task.gold:
            if call.tool != "respond":
                assert s.call(call.tool, call.args).ok
        new_email = next(c.args["email"] for c in task.gold if c.tool == "update_customer")
        assert [c["email"] for c in s.call("search_customers", {"query": new_email}).data["customers"]] == [new_email]
        s.db.execute("UPDATE customers SET name='Quentin Zyx' WHERE id=1")  # raw writes too (a task's setup)
        s.db.execute(
            "INSERT INTO tickets (customer_id, channel, subject, status, priority, sla_due_at, created_at, updated_at) "
            "VALUES (1, 'web', 'Quasar widget jammed', 'open', 'normal', 'x', '2099-01-01T00:00:00Z', 'x')"
        )
        assert s.call("search_customers", {"query": "quentin z"}).data["customers"][0]["id"] == 1
        assert s.call("search_tickets", {"query": "quasar"}).data["tickets"][0]["subject"] == "Quasar widget jammed"
        _check_searches(s, rng, 100)
    with world.session(task) as s:  # the episode's writes were rolled away with the rows they derive from
        assert s.call("search_customers", {"query": new_email}).data["customers"] == []
        assert s.call("search_customers", {"query": "quentin z"}).data["customers"] == []
        assert s.call("search_tickets", {"query": "quasar"}).data["tickets"] == []
        _check_searches(s, rng, 50)


def test_a_refused_call_leaves_the_search_index_as_it_was() -> None:
    world = default.get("helpdesk")
    task = world.task("update_email", 0)
    with world.session(task) as s:
        row = s.db.execute("SELECT id, email FROM customers WHERE id=2").fetchone()
        refused = s.call("update_customer", {"customer_id": row[0], "email": "nobody.verified@example.com"})
        assert not refused.ok
        assert s.call("search_customers", {"query": "nobody.verified"}).data["customers"] == []
        assert s.call("search_customers", {"query": row[1]}).data["customers"][0]["id"] == row[0]


def test_derived_search_tables_are_neither_tracked_nor_hashed() -> None:
    image = default.get("helpdesk").image
    assert not [t for t in image.tables if t.startswith("mw_")]
    names = {r[0] for r in image.query("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"mw_customer_search", "mw_customer_search_terms", "mw_ticket_subjects"} <= names
