"""Residency: more live sessions than resident clones, each parked and brought back
with exactly its state, in any interleaving, across threads, forks and raw access."""

from __future__ import annotations

import gc
import random
import threading
from collections.abc import Callable
from typing import Any

import pytest

from mirrorworld.core.session import Session
from mirrorworld.core.store import Clone
from mirrorworld.core.task import Task
from mirrorworld.worlds.helpdesk import HelpdeskWorld

FAMILIES = ("refund_damaged", "cancel_order", "update_email", "merge_duplicates", "sla_escalation")


def _world(limit: int) -> HelpdeskWorld:
    world = HelpdeskWorld()
    world.image.resident_limit = limit
    return world


def _tasks(world: HelpdeskWorld, n: int) -> list[Task]:
    return [world.task(FAMILIES[i % len(FAMILIES)], 100 + i) for i in range(n)]


def _trace(world: HelpdeskWorld, task: Task) -> list[tuple[str, str, list[str]]]:
    """What one session alone shows after each gold call: result, state hash, changes."""
    out = []
    with world.session(task) as s:
        for call in task.gold:
            r = s.call(call.tool, call.args)
            out.append((r.content(), s.state_hash(), [repr(c) for c in s.changes()]))
    return out


def test_more_sessions_than_clones_each_keep_their_state() -> None:
    alone = HelpdeskWorld()
    world = _world(2)
    tasks = _tasks(world, 9)
    expected = [_trace(alone, t) for t in tasks]
    sessions = [world.session(t) for t in tasks]
    got: list[list[tuple[str, str, list[str]]]] = [[] for _ in tasks]
    order = [(i, k) for i, t in enumerate(tasks) for k in range(len(t.gold))]
    random.Random(7).shuffle(order)
    order.sort(key=lambda ik: ik[1])  # each session's calls stay in order; sessions interleave
    for i, k in order:
        s, call = sessions[i], tasks[i].gold[k]
        r = s.call(call.tool, call.args)
        got[i].append((r.content(), s.state_hash(), [repr(c) for c in s.changes()]))
        assert world.image.resident <= 2
    assert got == expected
    assert sum(s.resident for s in sessions) <= 2
    for s in sessions:
        s.close()
    assert world.image.resident == 0


def test_a_parked_session_is_the_same_session_when_it_comes_back() -> None:
    world = _world(2)
    task = world.task("cancel_order", 3)
    s = world.session(task)
    call = task.gold[0]
    assert s.call(call.tool, call.args).ok
    before = (s.state_hash(), s.changes(), s.touched(), s.clock, s.view, list(s.events))
    others = [world.session(t) for t in _tasks(world, 3)]
    assert not s.resident  # the others took its clone
    assert (s.state_hash(), s.changes(), s.touched(), s.clock, s.view, list(s.events)) == before
    twin = s.fork()
    assert twin.state_hash() == s.state_hash() and twin.changes() == s.changes()
    for call in task.gold[1:]:
        assert s.call(call.tool, call.args).ok
        assert twin.call(call.tool, call.args).ok
    assert twin.state_hash() == s.state_hash()
    for x in (s, twin, *others):
        x.close()


def test_a_session_fresh_from_its_setup_parks_to_nothing() -> None:
    world = _world(2)
    tasks = _tasks(world, 4)
    sessions = [world.session(t) for t in tasks]
    parked = [s for s in sessions if not s.resident]
    assert len(parked) == 2 and all(s._overlay is None for s in parked)
    fresh = {t.id: HelpdeskWorld().session(t).state_hash() for t in tasks}
    assert {s.task.id: s.state_hash() for s in sessions if s.task} == fresh
    for s in sessions:
        s.close()


def test_a_session_in_use_is_never_parked() -> None:
    world = _world(2)
    a, b = (world.session(t) for t in _tasks(world, 2))
    with a.borrow() as db_a, b.borrow():
        c = world.session(world.task("cancel_order", 9))  # both pinned: one clone beyond the limit
        assert a.resident and b.resident and world.image.resident == 3
        db_a.execute("SELECT 1 FROM customers LIMIT 1").fetchone()
    raw = a.db  # held until a's next call
    d = world.session(world.task("cancel_order", 10))
    assert a.resident and raw is a._conn
    b_hash = b.state_hash()
    for s in (b, c, d):
        s.close()
    assert b_hash  # b's hash was read while it was resident or brought back
    a.close()


def test_raw_writes_survive_parking() -> None:
    world = _world(2)
    task = world.task("update_email", 4)
    s = world.session(task)
    s.db.execute("UPDATE customers SET email='moved@example.com' WHERE id=(SELECT MIN(id) FROM customers)")
    changed = s.changes()
    s.call("get_customer", {"customer_id": 1})  # releases the raw connection
    others = [world.session(t) for t in _tasks(world, 3)]
    assert not s.resident
    assert s.changes() == changed and changed
    for x in (s, *others):
        x.close()


def _statements_bringing_back(s: Session, world: HelpdeskWorld) -> list[str]:
    """Park ``s`` (three other sessions take the clones), then record what bringing it back runs on its clone."""
    others = [world.session(t) for t in _tasks(world, 3)]
    assert not s.resident
    seen: list[str] = []
    world.image.lend = _tracing(world.image.lend, seen)  # type: ignore[method-assign]
    s.state_hash()
    del world.image.lend
    for x in others:
        x.close()
    return seen


def _tracing(lend: Callable[[Any], Clone], seen: list[str]) -> Callable[[Any], Clone]:
    def traced(tenant: Any) -> Clone:
        conn = lend(tenant)
        conn.set_trace_callback(seen.append)
        return conn

    return traced


def test_a_parked_session_comes_back_in_foreign_key_order_without_deferring() -> None:
    # Deferring the checks expires every compiled statement of the clone: the usual path never does.
    world = _world(2)
    task = world.task("refund_damaged", 3)
    s = world.session(task)
    for call in task.gold:
        s.call(call.tool, call.args)
    before = (s.state_hash(), s.changes())
    seen = _statements_bringing_back(s, world)
    writes = [q for q in seen if q.split()[0] in ("INSERT", "UPDATE", "DELETE")]
    assert writes and not [q for q in seen if "PRAGMA" in q]
    tickets = [i for i, q in enumerate(writes) if q.startswith("INSERT INTO tickets ")]
    messages = [i for i, q in enumerate(writes) if q.startswith("INSERT INTO ticket_messages ")]
    assert tickets and messages and max(tickets) < min(messages)  # a message's ticket goes in first
    assert (s.state_hash(), s.changes()) == before
    s.close()


def test_new_rows_referring_to_newer_rows_of_their_table_come_back() -> None:
    world = _world(2)
    s = world.session(world.task("update_email", 5))
    db = s.db
    top = db.execute("SELECT MAX(id) FROM tickets").fetchone()[0]
    row = db.execute("SELECT customer_id, subject, created_at FROM tickets WHERE id=?", (top,)).fetchone()
    cols = "id, customer_id, channel, subject, status, priority, tags, sla_due_at, created_at, updated_at"
    vals = "?, ?, 'email', ?, 'new', 'low', '', ?, ?, ?"
    db.execute(f"INSERT INTO tickets ({cols}) VALUES ({vals})", (top + 2, row[0], row[1], *[row[2]] * 3))
    db.execute(f"INSERT INTO tickets ({cols}) VALUES ({vals})", (top + 1, row[0], row[1], *[row[2]] * 3))
    db.execute("UPDATE tickets SET merged_into=? WHERE id=?", (top + 2, top + 1))
    s.call("get_customer", {"customer_id": 1})  # releases the raw connection
    # Replayed in rowid order, top+1 refers to top+2 before it exists: the checks are deferred from there.
    before = (s.state_hash(), s.changes())
    seen = _statements_bringing_back(s, world)
    assert any("defer_foreign_keys=ON" in q for q in seen)
    assert (s.state_hash(), s.changes()) == before
    merged = s.db.execute("SELECT merged_into FROM tickets WHERE id=?", (top + 1,)).fetchone()[0]
    assert merged == top + 2
    with pytest.raises(Exception, match="FOREIGN KEY"):  # the checks are back on for what follows
        s.db.execute("UPDATE tickets SET merged_into=? WHERE id=?", (top + 99, top + 1))
    s.close()


def test_dropped_sessions_give_their_clones_back() -> None:
    world = _world(2)
    for t in _tasks(world, 2):
        world.session(t)  # never closed
    gc.collect()
    s = world.session(world.task("cancel_order", 5))
    assert world.image.resident <= 2 and s.resident
    s.close()


def test_threads_with_more_sessions_than_clones() -> None:
    alone = HelpdeskWorld()
    world = _world(2)
    tasks = _tasks(world, 8)
    expected = {t.id: _trace(alone, t) for t in tasks}
    got: dict[str, list[tuple[str, str, list[str]]]] = {}
    errors: list[BaseException] = []

    def play(chunk: list[Task]) -> None:
        try:
            sessions = [(t, world.session(t)) for t in chunk]
            for k in range(max(len(t.gold) for t in chunk)):
                for t, s in sessions:
                    if k < len(t.gold):
                        r = s.call(t.gold[k].tool, t.gold[k].args)
                        got.setdefault(t.id, []).append((r.content(), s.state_hash(), [repr(c) for c in s.changes()]))
            for _, s in sessions:
                s.close()
        except BaseException as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=play, args=(tasks[i::4],)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not errors
    assert got == expected
    assert world.image.resident == 0


@pytest.mark.parametrize("limit", [1, 2])
def test_resident_limit_has_a_floor(limit: int) -> None:
    world = HelpdeskWorld()
    assert world.image.resident_limit >= 4
    world.image.resident_limit = limit
    sessions: list[Session] = [world.session(t) for t in _tasks(world, 3)]
    assert world.image.resident == limit
    for s in sessions:
        s.close()


def test_a_graded_session_can_park() -> None:
    from mirrorworld.verify import verify

    world = _world(4)
    tasks = _tasks(world, 6)
    graded = []
    for t in tasks:
        s = world.session(t)
        for call in t.gold:
            s.call(call.tool, call.args)
        graded.append((s, verify(s).passed))
    assert all(ok for _, ok in graded)
    assert world.image.resident <= 4  # grading left no session holding its clone
    assert [verify(s).passed for s, _ in graded] == [True] * 6  # parked ones graded again, the same
    for s, _ in graded:
        s.close()
