"""Shared fixtures: the reference helpdesk world and a tiny world of counters.

The tiny world (``TinyWorld``; import it with ``from conftest import TinyWorld``)
is small enough to break on purpose: the conformance-checker tests subclass it
with one defect each.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import mirrorworld as mw
from mirrorworld.core.session import ToolContext
from mirrorworld.core.task import Check, EntityRef, Fact, Task, TaskFamily, ToolCall
from mirrorworld.core.tools import ToolSpec, tool
from mirrorworld.core.world import Rule, World
from mirrorworld.errors import ToolError
from mirrorworld.worlds.helpdesk import HelpdeskWorld


@tool("read")
def get_counter(ctx: ToolContext, counter_id: int) -> dict[str, Any]:
    """Read one counter.

    Args:
        counter_id: The counter's id.
    """
    row = ctx.one("SELECT id, value FROM counters WHERE id=?", (counter_id,))
    if row is None:
        raise ToolError("not_found", f"no counter {counter_id}")
    return {"counter": row}


@tool("write")
def set_counter(ctx: ToolContext, counter_id: int, value: int) -> dict[str, Any]:
    """Set a counter to a value.

    Args:
        counter_id: The counter's id.
        value: The new value.
    """
    if ctx.one("SELECT id FROM counters WHERE id=?", (counter_id,)) is None:
        raise ToolError("not_found", f"no counter {counter_id}")
    ctx.execute("UPDATE counters SET value=? WHERE id=?", (value, counter_id))
    return {"counter_id": counter_id, "value": value}


@tool("write")
def add_note(ctx: ToolContext, counter_id: int, body: str) -> dict[str, Any]:
    """Attach a note to a counter.

    Args:
        counter_id: The counter's id.
        body: The note.
    """
    if ctx.one("SELECT id FROM counters WHERE id=?", (counter_id,)) is None:
        raise ToolError("not_found", f"no counter {counter_id}")
    cur = ctx.execute("INSERT INTO notes (counter_id, body) VALUES (?, ?)", (counter_id, body))
    return {"note_id": cur.lastrowid}


@tool("terminal")
def respond(ctx: ToolContext, message: str) -> dict[str, Any]:
    """Send the final message and end the episode.

    Args:
        message: The final message.
    """
    if not message.strip():
        raise ToolError("invalid_arguments", "message must not be empty")
    ctx.finish(message)
    return {"sent": True}


class BumpFamily(TaskFamily):
    """Set one counter to a value and say the new value."""

    name = "bump"
    description = "Set a counter to a value and tell the user the value."

    def generate(self, image: Any, rng: random.Random, seed: int) -> Task:
        counter, value = rng.randint(1, 5), rng.randint(100, 999)
        return Task(
            world="tiny",
            family=self.name,
            seed=seed,
            instruction=f"Set counter {counter} to {value}, then tell me its value.",
            setup=(),
            gold=(
                ToolCall("set_counter", {"counter_id": counter, "value": value}),
                ToolCall("respond", {"message": f"Counter {counter} is now {value}."}),
            ),
            scope=(("counter", counter),),
            targets=(("counter", counter),),
            checks=(
                Check("value set", "field", {"table": "counters", "id": counter, "field": "value", "equals": value}),
            ),
            facts=(Fact("new value", str(value), "number"),),
        )


class TinyWorld(World):
    """Five counters with notes; one task family."""

    name = "tiny"
    title = "Tiny"
    version = 0
    epoch = "2026-01-01T00:00:00Z"
    source_dir = Path(__file__).resolve().parent

    @property
    def policy(self) -> str:
        return "Only change the counter you are asked to change."

    def declare_tools(self) -> Sequence[ToolSpec]:
        return (get_counter, set_counter, add_note, respond)

    def declare_rules(self) -> Sequence[Rule]:
        return ()

    def declare_families(self) -> Sequence[TaskFamily]:
        return (BumpFamily(),)

    def generate(self, conn: sqlite3.Connection, rng: random.Random, scale: float) -> None:
        conn.execute("CREATE TABLE counters (id INTEGER PRIMARY KEY, value INTEGER NOT NULL)")
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, counter_id INTEGER NOT NULL, body TEXT NOT NULL)")
        conn.executemany("INSERT INTO counters VALUES (?, ?)", [(i, rng.randint(0, 50)) for i in range(1, 6)])

    def owner(self, table: str, row: dict[str, Any]) -> EntityRef | None:
        if table == "counters":
            return ("counter", int(row["id"]))
        if table == "notes":
            return ("counter", int(row["counter_id"]))
        return None

    def outcome_view(self, db: sqlite3.Connection, targets: Sequence[EntityRef]) -> dict[str, Any]:
        view: dict[str, Any] = {}
        for kind, ident in targets:
            row = db.execute("SELECT value FROM counters WHERE id=?", (ident,)).fetchone()
            view[f"{kind}:{ident}"] = row[0] if row else None
        return view


def _write_refund(ctx: ToolContext, order_id: int) -> None:
    """The first half of a refund: a refund row and the order's new status."""
    ctx.execute(
        "INSERT INTO refunds (order_id, order_line_id, amount_cents, reason, approval_id, override_reason, "
        "created_at) VALUES (?, NULL, 100, 'damaged', NULL, NULL, ?)",
        (order_id, ctx.now()),
    )
    ctx.execute("UPDATE orders SET status='refunded' WHERE id=?", (order_id,))
    ctx.show(f"order:{order_id}", f"order {order_id}: refunded")
    ctx.violation("refund_window", "refunded out of window")
    ctx.finish("Refunded.")


@tool("write")
def refund_then_refuse(ctx: ToolContext, order_id: int) -> dict[str, Any]:
    """Write half a refund, then refuse the call (a rule checked too late).

    Args:
        order_id: The order number.
    """
    _write_refund(ctx, order_id)
    raise ToolError("policy_refused", "the return window has ended", rule="refund_window")


@tool("write")
def refund_then_crash(ctx: ToolContext, order_id: int) -> dict[str, Any]:
    """Write half a refund, then crash (a bug in the world).

    Args:
        order_id: The order number.
    """
    _write_refund(ctx, order_id)
    raise KeyError("a bug in the world")


class FaultyHelpdesk(HelpdeskWorld):
    """The helpdesk with two write tools that fail after their first writes."""

    def declare_tools(self) -> Sequence[ToolSpec]:
        return (*super().declare_tools(), refund_then_refuse, refund_then_crash)


@pytest.fixture(scope="session")
def faulty_helpdesk() -> FaultyHelpdesk:
    """A helpdesk whose ``refund_then_refuse``/``refund_then_crash`` fail halfway."""
    return FaultyHelpdesk()


@pytest.fixture(scope="session")
def helpdesk() -> HelpdeskWorld:
    """The registered helpdesk world (shared; never mutate it)."""
    world = mw.make_world("helpdesk")
    assert isinstance(world, HelpdeskWorld)
    return world


@pytest.fixture(scope="session")
def tiny() -> TinyWorld:
    return TinyWorld()
