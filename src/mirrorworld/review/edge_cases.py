"""Edge cases: task variants written by reviewers, accepted by an admin, kept as regression cases and tasks.

A reviewer who flags an item as an edge case (``flag_edge_case``) can write it
down as a **variant** of the item's task, in the task's own terms
(:mod:`mirrorworld.core.task`):

* ``instruction`` — what the agent reads instead (optional);
* ``setup`` — :class:`~mirrorworld.core.task.SetupOp` writes applied after the
  task's own, on its initial state (a line already partly refunded, a
  changed address);
* what the verifier should expect — ``checks`` and ``facts`` replacing the
  task's (optional), ``gold``, the calls that solve the variant (optional: the
  task's own), and ``expected_passed``, the human verdict on the recorded
  behaviour under the variant; ``messages`` are that behaviour (optional: the
  item's assistant messages), ``reason`` why the case matters.

Everything in a variant is untrusted input and is checked before anything is
stored: its size, every field's type and bound, every write against the
world's tables and columns (and applied to a real session), every tool name
against the world's tools, every check against the schema. The variant task
must prove itself as every task does: its gold solution replays and passes
the verifier, and doing nothing fails.

Proposals live in the review database's ``edge_cases`` table (created here,
beside the store's own). An **admin** accepts or rejects one (anyone else is
refused). Accepting gives the variant its task seed and makes it a regression
case (:mod:`mirrorworld.review.regressions`): the variant task whole, the
messages to replay, the expected human verdict, ``flags: ["edge case"]``,
``source.kind: "edge_case"``; it is ``fixed`` when the current verifier
already grades the behaviour as expected, ``open`` otherwise. Such cases go
through the same path as adjudicated disagreements: :func:`export_cases`
writes them to a case file, which ``audit-verifiers`` and the test suite
replay with :func:`~mirrorworld.review.regressions.check_cases`.

**Seeds.** An accepted variant of family ``f`` takes the next seed of
:data:`EDGE_SEEDS` for ``f`` (``2_147_000_000``, ``+5``, ``+10`` …: all of
the test split, so no variant is ever a training task), fixed at acceptance.
:func:`edge_case_world` builds a world whose families return the variants at
those seeds (:class:`EdgeCaseFamily`) and generate every other seed as before;
the variants feed its ``tasks`` score part, so its content hash says which
cases it holds. It is a wrapper (a subclass built at run time, sharing the
world's image), not an edit of the world: the world's own files stay the
version that generates its families.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from mirrorworld.core.registry import Registry, default
from mirrorworld.core.store import Image
from mirrorworld.core.task import MAX_SEED, Check, Fact, SetupOp, Task, TaskFamily, ToolCall
from mirrorworld.core.world import World
from mirrorworld.errors import MirrorworldError
from mirrorworld.review.regressions import RegressionCase, case_id, load_cases, run_case, write_cases

if TYPE_CHECKING:
    import random
    from pathlib import Path

    from mirrorworld.review.store import ReviewStore

__all__ = [
    "EDGE_SEEDS",
    "EdgeCase",
    "EdgeCaseFamily",
    "Variant",
    "accept",
    "edge_case_world",
    "export_cases",
    "list_cases",
    "propose",
    "reject",
    "variant_task",
]

EDGE_SEEDS = range(2_147_000_000, MAX_SEED + 1, 5)
"""The task seeds of accepted variants, per family, in order of acceptance (all test-split seeds)."""

STATUSES = ("proposed", "accepted", "rejected")

MAX_VARIANT_BYTES = 64_000
MAX_TEXT = 8000
MAX_OPS = 32
MAX_CALLS = 32
MAX_CHECKS = 16
MAX_FACTS = 8
MAX_MESSAGES = 100
MAX_ARGS_BYTES = 16_000

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS edge_cases ("
    " id INTEGER PRIMARY KEY, item_id INTEGER NOT NULL REFERENCES items(id),"
    " author_id INTEGER NOT NULL REFERENCES reviewers(id),"
    " status TEXT NOT NULL CHECK (status IN ('proposed', 'accepted', 'rejected')),"
    " variant TEXT NOT NULL, created_at REAL NOT NULL, decided_by INTEGER REFERENCES reviewers(id),"
    " decided_at REAL, reason TEXT, regression TEXT)",
    "CREATE INDEX IF NOT EXISTS edge_cases_by_status ON edge_cases (status, id)",
)
"""``regression`` holds the accepted case (its JSON), with the seed it was given."""

T = TypeVar("T")

_READY: weakref.WeakSet[ReviewStore] = weakref.WeakSet()
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z\Z")
_FACT_KINDS = ("money", "number", "date", "id", "text", "email")


def _ensure(store: ReviewStore) -> None:
    """Create the ``edge_cases`` table in the store's database when it is missing (once per store object)."""
    if store in _READY:
        return
    with store.write() as conn:
        for statement in _SCHEMA:
            conn.execute(statement)
    _READY.add(store)


# -- checking a variant -----------------------------------------------------------------------------


def _refuse(where: str, what: str) -> MirrorworldError:
    return MirrorworldError(f"edge case: {where} {what}")


def _text(value: Any, where: str, *, limit: int = MAX_TEXT, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise _refuse(where, "must be text")
    if len(value) > limit:
        raise _refuse(where, f"is longer than {limit} characters")
    if not empty and not value.strip():
        raise _refuse(where, "is empty")
    if "\x00" in value:
        raise _refuse(where, "holds a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _refuse(where, "is not valid text (a lone surrogate)") from None
    return value


def _scalar(value: Any, where: str) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise _refuse(where, "is an integer SQLite cannot hold")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _refuse(where, "is not a finite number")
        return value
    if isinstance(value, str):
        return _text(value, where, empty=True)
    raise _refuse(where, "must be a number, text, true/false or null")


def _mapping(value: Any, where: str, allowed: Iterable[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _refuse(where, "must be an object")
    unknown = sorted(set(value) - set(allowed), key=str)
    if unknown:
        raise _refuse(where, f"has no field {ascii(unknown[0])[:60]}")
    return value


def _list(value: Any, where: str, limit: int) -> list[Any]:
    if not isinstance(value, list):
        raise _refuse(where, "must be a list")
    if len(value) > limit:
        raise _refuse(where, f"has more than {limit} entries")
    return value


def _int(value: Any, where: str, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value < 2**63:
        raise _refuse(where, f"must be an integer of at least {low}")
    return value


def _each(value: Any, where: str, limit: int, parse: Callable[[Any, str], T]) -> list[T]:
    return [parse(v, f"{where}[{i}]") for i, v in enumerate(_list(value, where, limit))]


def _table(image: Image, value: Any, where: str) -> tuple[str, tuple[str, ...]]:
    name = _text(value, where, limit=100)
    cols = image.columns.get(name)
    if cols is None:
        raise _refuse(where, f"names no table of the world ({ascii(name)[:60]})")
    return name, tuple(cols)


def _column(cols: Sequence[str], value: Any, table: str, where: str) -> str:
    name = _text(value, where, limit=100)
    if name not in cols:
        raise _refuse(where, f"names no column of {table} ({ascii(name)[:60]})")
    return name


def _setup_op(world: World, d: Any, where: str) -> SetupOp:
    d = _mapping(d, where, ("op", "table", "values", "pk"))
    op = d.get("op")
    if op not in ("insert", "update"):
        raise _refuse(f"{where}.op", "must be 'insert' or 'update'")
    table, cols = _table(world.image, d.get("table"), f"{where}.table")
    values = d.get("values")
    if not isinstance(values, dict) or not 0 < len(values) <= 64:
        raise _refuse(f"{where}.values", "must be an object of 1 to 64 columns")
    checked = {_column(cols, k, table, f"{where}.values"): _scalar(v, f"{where}.values.{k}") for k, v in values.items()}
    pk = d.get("pk")
    if op == "update":
        pk = _int(pk, f"{where}.pk", 1)
    elif pk is not None:
        raise _refuse(f"{where}.pk", "is for updates (an insert names its id among its values)")
    clock_ok = op == "update" and set(checked) == {"now"} and _TIMESTAMP.match(str(checked["now"]))
    if table in world.image.untracked and not clock_ok:
        raise _refuse(where, f"may only set {table}.now to a time like 2026-03-05T09:00:00Z")
    return SetupOp(op, table, checked, pk)


def _call(world: World, d: Any, where: str) -> ToolCall:
    d = _mapping(d, where, ("tool", "args"))
    tool = _text(d.get("tool"), f"{where}.tool", limit=100)
    if tool not in world.tools_by_name:
        raise _refuse(f"{where}.tool", f"names no tool of the world ({ascii(tool)[:60]})")
    args = d.get("args", {})
    if not isinstance(args, dict):
        raise _refuse(f"{where}.args", "must be an object")
    if len(json.dumps(args, default=str)) > MAX_ARGS_BYTES:
        raise _refuse(f"{where}.args", f"are longer than {MAX_ARGS_BYTES} characters")
    _json(args, f"{where}.args")
    return ToolCall(tool, args)


def _json(value: Any, where: str, depth: int = 0) -> None:
    if depth > 8:
        raise _refuse(where, "nests too deep")
    if isinstance(value, dict):
        for k, v in value.items():
            _text(k, f"{where} key", limit=100)
            _json(v, f"{where}.{k}", depth + 1)
    elif isinstance(value, list):
        for i, v in enumerate(_list(value, where, 100)):
            _json(v, f"{where}[{i}]", depth + 1)
    else:
        _scalar(value, where)


def _where(image: Image, table: str, cols: Sequence[str], value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict) or len(value) > 16:
        raise _refuse(where, "must be an object of at most 16 columns")
    return {_column(cols, k, table, where): _scalar(v, f"{where}.{k}") for k, v in value.items()}


def _check(world: World, d: Any, where: str) -> Check:
    d = _mapping(d, where, ("name", "kind", "params"))
    name = _text(d.get("name"), f"{where}.name", limit=100)
    kind = d.get("kind")
    p = d.get("params")
    image = world.image
    if kind == "field":
        p = _mapping(p, f"{where}.params", ("table", "id", "field", "equals"))
        table, cols = _table(image, p.get("table"), f"{where}.params.table")
        params = {
            "table": table,
            "id": _int(p.get("id"), f"{where}.params.id", 1),
            "field": _column(cols, p.get("field"), table, f"{where}.params.field"),
            "equals": _scalar(p.get("equals"), f"{where}.params.equals"),
        }
    elif kind == "count":
        p = _mapping(p, f"{where}.params", ("table", "where", "min", "max"))
        table, cols = _table(image, p.get("table"), f"{where}.params.table")
        params = {"table": table, "where": _where(image, table, cols, p.get("where", {}), f"{where}.params.where")}
        for bound in ("min", "max"):
            if bound in p:
                params[bound] = _int(p[bound], f"{where}.params.{bound}")
    elif kind == "sum":
        p = _mapping(p, f"{where}.params", ("table", "column", "where", "equals"))
        table, cols = _table(image, p.get("table"), f"{where}.params.table")
        equals = p.get("equals")
        if isinstance(equals, bool) or not isinstance(equals, (int, float)):
            raise _refuse(f"{where}.params.equals", "must be a number")
        params = {
            "table": table,
            "column": _column(cols, p.get("column"), table, f"{where}.params.column"),
            "where": _where(image, table, cols, p.get("where", {}), f"{where}.params.where"),
            "equals": _scalar(equals, f"{where}.params.equals"),
        }
    else:
        raise _refuse(f"{where}.kind", "must be 'field', 'count' or 'sum'")
    return Check(name, str(kind), params)


def _fact(d: Any, where: str) -> Fact:
    d = _mapping(d, where, ("label", "value", "kind", "distractors"))
    kind = d.get("kind")
    if kind not in _FACT_KINDS:
        raise _refuse(f"{where}.kind", f"must be one of {', '.join(_FACT_KINDS)}")
    distractors = tuple(
        _text(x, f"{where}.distractors[{i}]", limit=200)
        for i, x in enumerate(_list(d.get("distractors", []), f"{where}.distractors", 16))
    )
    label = _text(d.get("label"), f"{where}.label", limit=100)
    return Fact(label, _text(d.get("value"), f"{where}.value", limit=200), kind, distractors)


def _messages(value: Any, where: str) -> list[dict[str, Any]]:
    out = []
    for i, m in enumerate(_list(value, where, MAX_MESSAGES)):
        at = f"{where}[{i}]"
        m = _mapping(m, at, ("role", "content", "tool_calls"))
        if m.get("role") != "assistant":
            raise _refuse(f"{at}.role", "must be 'assistant' (the behaviour replayed is the agent's)")
        content = m.get("content")
        msg: dict[str, Any] = {
            "role": "assistant",
            "content": None if content is None else _text(content, at, empty=True),
        }
        calls = []
        for j, c in enumerate(_list(m.get("tool_calls") or [], f"{at}.tool_calls", 16)):
            cw = f"{at}.tool_calls[{j}]"
            c = _mapping(c, cw, ("id", "type", "function"))
            fn = _mapping(c.get("function"), f"{cw}.function", ("name", "arguments"))
            args = fn.get("arguments", "{}")
            if isinstance(args, dict):
                args = json.dumps(args)
            calls.append(
                {
                    "id": _text(c.get("id", f"call_{i}_{j}"), f"{cw}.id", limit=100),
                    "type": "function",
                    "function": {
                        "name": _text(fn.get("name"), f"{cw}.function.name", limit=100),
                        "arguments": _text(args, f"{cw}.function.arguments", limit=MAX_ARGS_BYTES, empty=True),
                    },
                }
            )
        if calls:
            msg["tool_calls"] = calls
        out.append(msg)
    return out


@dataclass(frozen=True)
class Variant:
    """A variant as proposed, checked (:meth:`parse`); ``None`` keeps the task's own. See the module docstring."""

    expected_passed: bool
    reason: str
    instruction: str | None = None
    setup: tuple[SetupOp, ...] = ()
    gold: tuple[ToolCall, ...] | None = None
    checks: tuple[Check, ...] | None = None
    facts: tuple[Fact, ...] | None = None
    messages: tuple[dict[str, Any], ...] | None = None

    @classmethod
    def parse(cls, data: Any, world: World) -> Variant:
        """A variant from untrusted JSON data, checked against ``world`` (a one-line :class:`MirrorworldError`)."""
        try:
            size = len(json.dumps(data, default=str))
        except (TypeError, ValueError) as err:
            raise _refuse("the variant", f"is not JSON data ({err})") from None
        if size > MAX_VARIANT_BYTES:
            raise _refuse("the variant", f"is larger than {MAX_VARIANT_BYTES} bytes")
        d = _mapping(
            data,
            "the variant",
            ("expected_passed", "reason", "instruction", "setup", "gold", "checks", "facts", "messages"),
        )
        if not isinstance(d.get("expected_passed"), bool):
            raise _refuse("expected_passed", "must be true or false (the human verdict on the behaviour)")
        instruction = d.get("instruction")
        setup = tuple(
            _setup_op(world, op, f"setup[{i}]") for i, op in enumerate(_list(d.get("setup", []), "setup", MAX_OPS))
        )
        gold, checks, facts, messages = d.get("gold"), d.get("checks"), d.get("facts"), d.get("messages")
        variant = cls(
            expected_passed=d["expected_passed"],
            reason=_text(d.get("reason"), "reason", limit=2000),
            instruction=None if instruction is None else _text(instruction, "instruction"),
            setup=setup,
            gold=None if gold is None else tuple(_each(gold, "gold", MAX_CALLS, lambda c, w: _call(world, c, w))),
            checks=None
            if checks is None
            else tuple(_each(checks, "checks", MAX_CHECKS, lambda c, w: _check(world, c, w))),
            facts=None if facts is None else tuple(_each(facts, "facts", MAX_FACTS, _fact)),
            messages=None if messages is None else tuple(_messages(messages, "messages")),
        )
        if variant.checks is not None and len({c.name for c in variant.checks}) != len(variant.checks):
            raise _refuse("checks", "must have different names")
        if variant.gold is not None and not variant.gold:
            raise _refuse("gold", "is empty: a variant's gold solution makes at least one call")
        unchanged = variant.instruction is None and not variant.setup and variant.gold is None
        if unchanged and variant.checks is None and variant.facts is None:
            raise _refuse("the variant", "changes nothing in the task (no instruction, setup, gold, checks or facts)")
        return variant

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"expected_passed": self.expected_passed, "reason": self.reason}
        if self.instruction is not None:
            out["instruction"] = self.instruction
        if self.setup:
            out["setup"] = [
                {"op": s.op, "table": s.table, "values": s.values, **({"pk": s.pk} if s.pk is not None else {})}
                for s in self.setup
            ]
        if self.gold is not None:
            out["gold"] = [{"tool": c.tool, "args": c.args} for c in self.gold]
        if self.checks is not None:
            out["checks"] = [{"name": c.name, "kind": c.kind, "params": c.params} for c in self.checks]
        if self.facts is not None:
            out["facts"] = [
                {"label": f.label, "value": f.value, "kind": f.kind, "distractors": list(f.distractors)}
                for f in self.facts
            ]
        if self.messages is not None:
            out["messages"] = list(self.messages)
        return out


def variant_task(
    world: World, base: Task, variant: Variant, *, seed: int | None = None, item: int | None = None
) -> Task:
    """The task ``variant`` makes of ``base``, proved solvable on ``world`` (a :class:`MirrorworldError` if not).

    The setup is applied to a real session (every update must hit a row), the
    gold solution is replayed and must pass the verifier, and a do-nothing
    episode must fail.
    """
    from mirrorworld.verify import Verifier

    if base.world != world.name or base.family not in world.families_by_name:
        raise _refuse("the item's task", f"is not a task of world {world.name}")
    hidden = {**base.hidden, "edge_case": {"base": base.id, **({"item": item} if item is not None else {})}}
    task = replace(
        base,
        seed=base.seed if seed is None else seed,
        instruction=variant.instruction if variant.instruction is not None else base.instruction,
        setup=(*base.setup, *variant.setup),
        gold=variant.gold if variant.gold is not None else base.gold,
        checks=variant.checks if variant.checks is not None else base.checks,
        facts=variant.facts if variant.facts is not None else base.facts,
        hidden=hidden,
    )
    try:
        with world.session(task) as s:
            for i, op in enumerate(variant.setup):
                if (
                    op.op == "update"
                    and s.db.execute(f"SELECT 1 FROM {op.table} WHERE rowid=?", (op.pk,)).fetchone() is None
                ):
                    raise _refuse(f"setup[{i}]", f"updates {op.table} {op.pk}, which does not exist")
        world.gold(task)
        with world.session(task) as s:
            for call in task.gold:
                s.call(call.tool, call.args)
            gold = Verifier()(s)
        with world.session(task) as s:
            idle = Verifier()(s)
    except sqlite3.Error as err:
        raise _refuse("the setup", f"cannot be applied: {err}") from None
    except MirrorworldError as err:
        if str(err).startswith("edge case:"):
            raise
        raise _refuse("the variant", f"is not a working task: {err}") from None
    if not gold.passed:
        raise _refuse("the gold solution", f"does not pass the variant: {'; '.join(gold.evidence)[:300]}")
    if idle.passed:
        raise _refuse("the variant", "passes an episode that does nothing: its checks ask for nothing")
    return task


# -- the proposals --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EdgeCase:
    """A stored proposal; ``case`` is its regression case once accepted."""

    id: int
    item_id: int
    author_id: int
    author: str
    status: str
    variant: dict[str, Any]
    created_at: float
    decided_by: int | None
    decided_at: float | None
    reason: str | None
    case: RegressionCase | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "item_id": self.item_id,
            "author_id": self.author_id,
            "author": self.author,
            "status": self.status,
            "variant": self.variant,
            "created_at": self.created_at,
            "decided_by": self.decided_by,
            "decided_at": self.decided_at,
            "reason": self.reason,
            "case": None if self.case is None else self.case.to_dict(),
        }


def _item_task(store: ReviewStore, item_id: int) -> tuple[Task, list[dict[str, Any]]]:
    if store.item(item_id) is None:
        raise MirrorworldError(f"no item {item_id}")
    record = store.record(item_id)
    try:
        task = Task.from_dict(record["task"])
    except (KeyError, TypeError, ValueError) as err:
        raise MirrorworldError(f"item {item_id} holds no readable task ({err})") from None
    messages = [
        {k: m[k] for k in ("role", "content", "tool_calls") if k in m}
        for m in record.get("messages", [])
        if isinstance(m, dict) and m.get("role") == "assistant"
    ]
    return task, messages


def propose(store: ReviewStore, item_id: int, author_id: int, variant: Any, *, registry: Registry | None = None) -> int:
    """Store a proposed variant of item ``item_id`` by ``author_id``; return the edge case's id.

    The author must have flagged the item as an edge case in their review of
    it (an adjudicator or admin may propose without one) and must not be
    paused. The variant is checked and proved (:func:`variant_task`) first.
    """
    _ensure(store)
    author = store.reviewer(author_id)
    if author is None:
        raise MirrorworldError(f"no reviewer {author_id}")
    if author.paused:
        raise MirrorworldError(f"reviewer {author.name} is paused")
    task, messages = _item_task(store, item_id)
    if not author.can("adjudicator"):
        flagged = store.reviews(None, "v.item_id=? AND v.reviewer_id=? AND v.flag_edge_case=1", (item_id, author_id))
        if not flagged:
            raise MirrorworldError(f"{author.name} has not flagged item {item_id} as an edge case")
    world = (registry or default).get(task.world)
    parsed = Variant.parse(variant, world)
    variant_task(world, task, parsed, item=item_id)
    if parsed.messages is None and not messages:
        raise _refuse("messages", "are needed: the item has no assistant messages to replay")
    stored = json.dumps(parsed.to_dict(), sort_keys=True, ensure_ascii=False)
    with store.write() as conn:
        cur = conn.execute(
            "INSERT INTO edge_cases (item_id, author_id, status, variant, created_at) VALUES (?, ?, 'proposed', ?, ?)",
            (item_id, author_id, stored, store.clock()),
        )
        case = int(cur.lastrowid or 0)
        store.log(conn, author_id, "edge_case_proposed", {"edge_case": case, "item": item_id})
    return case


def _admin(store: ReviewStore, admin_id: int) -> str:
    who = store.reviewer(admin_id)
    if who is None or who.role != "admin":
        raise MirrorworldError("only an admin may accept or reject an edge case")
    return who.name


_COLS = (
    "e.id, e.item_id, e.author_id, p.name, e.status, e.variant, e.created_at, e.decided_by, e.decided_at,"
    " e.reason, e.regression"
)


def _row(r: Sequence[Any]) -> EdgeCase:
    case = RegressionCase.from_dict(json.loads(r[10])) if r[10] else None
    return EdgeCase(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[6], r[7], r[8], r[9], case)


def _get(conn: sqlite3.Connection, case_id_: int) -> EdgeCase:
    row = conn.execute(
        f"SELECT {_COLS} FROM edge_cases e JOIN reviewers p ON p.id=e.author_id WHERE e.id=?", (case_id_,)
    ).fetchone()
    if row is None:
        raise MirrorworldError(f"no edge case {case_id_}")
    return _row(row)


def _next_seed(conn: sqlite3.Connection, world: str, family: str) -> int:
    taken = set()
    for (blob,) in conn.execute("SELECT regression FROM edge_cases WHERE status='accepted'"):
        d = json.loads(blob)
        if d.get("world") == world and d.get("task", {}).get("family") == family:
            taken.add(int(d["task"]["seed"]))
    for seed in EDGE_SEEDS:
        if seed not in taken:
            return seed
    raise MirrorworldError(f"family {family} has no edge-case seed left")


def accept(store: ReviewStore, case_id_: int, admin_id: int, *, registry: Registry | None = None) -> RegressionCase:
    """Accept a proposed edge case (admins only): give it its seed and make it a regression case; return the case.

    The variant is checked and proved again (the database is input too), and
    its messages are replayed with the current verifier: the case is
    ``fixed`` when the verifier already grades them as expected, ``open``
    otherwise.
    """
    _ensure(store)
    admin = _admin(store, admin_id)
    with store.read() as conn:
        edge = _get(conn, case_id_)
    if edge.status != "proposed":
        raise MirrorworldError(f"edge case {case_id_} is {edge.status}, not proposed")
    task, messages = _item_task(store, edge.item_id)
    with store.read() as conn:
        seed = _next_seed(conn, task.world, task.family)
    world = (registry or default).get(task.world)
    parsed = Variant.parse(edge.variant, world)
    built = variant_task(world, task, parsed, seed=seed, item=edge.item_id)
    built = replace(built, hidden={**built.hidden, "edge_case": {**built.hidden["edge_case"], "case": case_id_}})
    replay = list(parsed.messages) if parsed.messages is not None else messages
    case = RegressionCase(
        id=case_id(built.id, replay),
        world=world.name,
        task=json.loads(json.dumps(built.to_dict(), default=str)),
        messages=replay,
        human_passed=parsed.expected_passed,
        verifier_passed=not parsed.expected_passed,
        verifier_version=world.content_hash,
        reason=parsed.reason,
        flags=["edge case"],
        source={
            "kind": "edge_case",
            "edge_case": case_id_,
            "item": edge.item_id,
            "base_task": task.id,
            "author": edge.author,
            "accepted_by": admin,
        },
    )
    result = run_case(case, registry)
    case = replace(case, verifier_passed=result.verifier_passed, status="fixed" if result.agrees else "open")
    with store.write() as conn:
        if _get(conn, case_id_).status != "proposed" or _next_seed(conn, task.world, task.family) != seed:
            raise MirrorworldError(f"edge case {case_id_} was decided meanwhile")
        conn.execute(
            "UPDATE edge_cases SET status='accepted', decided_by=?, decided_at=?, regression=? WHERE id=?",
            (admin_id, store.clock(), json.dumps(case.to_dict(), sort_keys=True, default=str), case_id_),
        )
        store.log(conn, admin_id, "edge_case_accepted", {"edge_case": case_id_, "case": case.id, "seed": seed})
    return case


def reject(store: ReviewStore, case_id_: int, admin_id: int, reason: str) -> None:
    """Reject a proposed edge case (admins only), saying why."""
    _ensure(store)
    _admin(store, admin_id)
    why = _text(reason, "the reason for rejecting", limit=2000)
    with store.write() as conn:
        edge = _get(conn, case_id_)
        if edge.status != "proposed":
            raise MirrorworldError(f"edge case {case_id_} is {edge.status}, not proposed")
        conn.execute(
            "UPDATE edge_cases SET status='rejected', decided_by=?, decided_at=?, reason=? WHERE id=?",
            (admin_id, store.clock(), why, case_id_),
        )
        store.log(conn, admin_id, "edge_case_rejected", {"edge_case": case_id_})


def list_cases(store: ReviewStore, status: str | None = None) -> list[EdgeCase]:
    """The edge cases, oldest first (only those with ``status``, when given)."""
    if status is not None and status not in STATUSES:
        raise MirrorworldError(f"an edge case's status is one of {', '.join(STATUSES)}")
    _ensure(store)
    where, params = ("e.status=?", (status,)) if status is not None else ("1", ())
    with store.read() as conn:
        rows = conn.execute(
            f"SELECT {_COLS} FROM edge_cases e JOIN reviewers p ON p.id=e.author_id WHERE {where} ORDER BY e.id", params
        ).fetchall()
    return [_row(r) for r in rows]


def export_cases(store: ReviewStore, path: str | Path) -> tuple[list[RegressionCase], int]:
    """Add every accepted edge case to the case file ``path``; return (all cases in it, how many are new).

    A case already in the file keeps the status it has there (someone may have
    marked it ``fixed``).
    """
    from mirrorworld.outputs import check_output_path

    out = check_output_path(path, new_folders=True)
    existing = {c.id: c for c in load_cases(out)} if out.exists() else {}
    new = 0
    for edge in list_cases(store, "accepted"):
        assert edge.case is not None
        old = existing.get(edge.case.id)
        existing[edge.case.id] = edge.case if old is None else replace(edge.case, status=old.status)
        new += old is None
    write_cases(out, existing.values())
    return sorted(existing.values(), key=lambda c: c.id), new


# -- the seed space ---------------------------------------------------------------------------------------


class EdgeCaseFamily(TaskFamily):
    """A family with accepted variants at their seeds (:data:`EDGE_SEEDS`); every other seed as ``base`` makes it."""

    def __init__(self, base: TaskFamily, variants: Mapping[int, Task]) -> None:
        self.base = base
        self.variants = dict(variants)
        self.name = base.name
        self.description = base.description
        self.needs_reply = base.needs_reply
        self.parameters = base.parameters

    @property
    def variant_seeds(self) -> list[int]:
        return sorted(self.variants)

    def bind(self, parameters: Mapping[str, Any]) -> TaskFamily:
        base = self.base.bind(parameters)
        return self if base is self.base else EdgeCaseFamily(base, self.variants)

    def task(self, world: str, image: Image, seed: int) -> Task:
        hit = self.variants.get(seed)
        return hit if hit is not None else self.base.task(world, image, seed)

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        return self.base.generate(image, rng, seed)


class _EdgeMixin(World):
    edge_tasks: ClassVar[tuple[Task, ...]]
    edge_base: ClassVar[type[World]]

    def declare_families(self) -> Sequence[TaskFamily]:
        by_family: dict[str, dict[int, Task]] = {}
        for t in self.edge_tasks:
            by_family.setdefault(t.family, {})[t.seed] = t
        declared = super().declare_families()  # type: ignore[safe-super]
        return [EdgeCaseFamily(f, by_family[f.name]) if f.name in by_family else f for f in declared]

    def declared_parts(self) -> Mapping[str, bytes]:
        parts = dict(super().declared_parts())
        blob = json.dumps([t.to_dict() for t in self.edge_tasks], sort_keys=True, default=str).encode()
        parts["tasks"] = parts.get("tasks", b"") + b"|edge_cases|" + blob
        return parts

    def __reduce__(self) -> tuple[Any, ...]:
        tasks = [t.to_dict() for t in self.edge_tasks]
        return (_rebuild_edge, (self.edge_base, self.scale, self.data_seed, json.dumps(tasks, default=str)))


def edge_case_world(world: World, cases: Iterable[RegressionCase | str | Path]) -> World:
    """``world`` with the accepted variants among ``cases`` (cases, or case files and folders) in its seed space.

    Cases of other worlds and cases that are not edge cases are left out; a
    variant of an unknown family, at a seed outside :data:`EDGE_SEEDS`, or two
    different variants at one seed are refused. Without any variant the world
    itself is returned.
    """
    loaded: list[RegressionCase] = []
    for c in cases:
        loaded += [c] if isinstance(c, RegressionCase) else load_cases(c)
    tasks: dict[tuple[str, int], Task] = {}
    for c in loaded:
        if c.world != world.name or c.source.get("kind") != "edge_case":
            continue
        try:
            task = Task.from_dict(c.task)
        except (KeyError, TypeError, ValueError) as err:
            raise MirrorworldError(f"edge case {c.id}: its task is unreadable ({err})") from None
        if task.world != world.name or task.family not in world.families_by_name:
            raise MirrorworldError(f"edge case {c.id}: {task.family} is not a family of world {world.name}")
        if task.seed not in EDGE_SEEDS:
            raise MirrorworldError(f"edge case {c.id}: seed {task.seed} is not an edge-case seed")
        other = tasks.get((task.family, task.seed))
        if other is not None and other.digest() != task.digest():
            raise MirrorworldError(f"edge case {c.id}: another variant already has task {task.id}")
        tasks[(task.family, task.seed)] = task
    if not tasks:
        return world
    ordered = tuple(tasks[k] for k in sorted(tasks))
    base: type[World] = getattr(type(world), "edge_base", type(world))
    digest = _digest(ordered)
    attrs = {
        "edge_tasks": ordered,
        "edge_base": base,
        "__module__": base.__module__,
        "__qualname__": f"{base.__qualname__}EdgeCases{digest}",
        "__doc__": f"{base.title} with {len(ordered)} accepted edge cases in its seed space.",
    }
    meta: Any = type(base)
    cls: type[World] = meta(attrs["__qualname__"], (_EdgeMixin, base), attrs)
    built = cls(scale=world.scale, data_seed=world.data_seed)
    built.__dict__["image"] = world.image  # the same pristine data: only the seed space grows
    return built


def _digest(tasks: Sequence[Task]) -> str:
    import hashlib

    return hashlib.sha256("|".join(t.digest() for t in tasks).encode()).hexdigest()[:12]


def _rebuild_edge(base: type[World], scale: float, data_seed: int, tasks: str) -> World:
    from mirrorworld.core.world import _rebuild

    cases = [
        RegressionCase(
            id=f"rebuilt/{i}",
            world=base.name,
            task=t,
            messages=[],
            human_passed=False,
            verifier_passed=False,
            verifier_version="",
            reason="",
            source={"kind": "edge_case"},
        )
        for i, t in enumerate(json.loads(tasks))
    ]
    return edge_case_world(_rebuild(base, scale, data_seed), cases)
