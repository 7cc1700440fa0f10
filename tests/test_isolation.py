"""Isolation: episodes share nothing mutable, in any interleaving, across pooled
connections, after crashes and across threads."""

from __future__ import annotations

import gc
import random
import threading

import pytest

from conftest import FaultyHelpdesk
from mirrorworld.core.session import Session
from mirrorworld.core.task import Task
from mirrorworld.verify import verify
from mirrorworld.worlds.helpdesk import HelpdeskWorld


def _order_id(task: Task) -> int:
    return next(i for kind, i in task.scope if kind == "order")


def _ticket_id(task: Task) -> int:
    return next(i for kind, i in task.scope if kind == "ticket")


def _order_status(s: Session, order_id: int) -> str:
    result = s.call("get_order", {"order_id": order_id})
    assert result.ok
    return str(result.data["order"]["status"])


def _tags(s: Session, ticket_id: int) -> set[str]:
    result = s.call("get_ticket", {"ticket_id": ticket_id})
    assert result.ok
    return set(result.data["ticket"]["tags"])


def _pristine(world: HelpdeskWorld, task: Task) -> tuple[str, list[tuple[str, int]]]:
    with world.session(task) as s:
        return s.state_hash(), s.touched()


def test_interleaved_sessions_never_see_each_others_writes(helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("cancel_order", 2)
    oid, tid = _order_id(task), _ticket_id(task)
    fresh, _ = _pristine(helpdesk, task)
    with helpdesk.session(task) as a, helpdesk.session(task) as b:
        assert a.call("cancel_order", {"order_id": oid, "reason": "customer_request"}).ok
        assert _order_status(b, oid) == "placed"
        assert b.state_hash() == fresh
        assert b.call("set_priority", {"ticket_id": tid, "priority": "urgent"}).ok
        assert _order_status(a, oid) == "cancelled"
        assert a.call("get_ticket", {"ticket_id": tid}).data["ticket"]["priority"] != "urgent"
        # b can still cancel: a's cancellation is not in its world.
        assert b.call("cancel_order", {"order_id": oid, "reason": "duplicate_order"}).ok
        reasons = {
            s.db.execute("SELECT group_concat(reason) FROM refunds WHERE order_id=?", (oid,)).fetchone()[0]
            for s in (a, b)
        }
        assert reasons == {"cancellation"}
        rows_a, rows_b = ({(c.table, c.pk) for c in s.changes()} for s in (a, b))
        assert rows_b - rows_a == {("tickets", tid)} and rows_a <= rows_b


def test_many_sessions_in_a_random_interleaving(helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("triage", 4)
    tid = _ticket_id(task)
    rng = random.Random(7)
    sessions = [helpdesk.session(task) for _ in range(5)]
    written: list[set[str]] = [set() for _ in sessions]
    try:
        for step in range(60):
            k = rng.randrange(len(sessions))
            if rng.random() < 0.6:
                tag = f"s{k}_{step}"
                assert sessions[k].call("add_tags", {"ticket_id": tid, "tags": [tag]}).ok
                written[k].add(tag)
            else:
                assert _tags(sessions[k], tid) == written[k]
        for s, mine in zip(sessions, written, strict=True):
            assert _tags(s, tid) == mine
    finally:
        for s in sessions:
            s.close()


def test_sessions_of_different_tasks_see_only_their_own_setup(helpdesk: HelpdeskWorld) -> None:
    one, two = helpdesk.task("cancel_order", 2), helpdesk.task("refund_damaged", 1)
    assert _ticket_id(one) == _ticket_id(two)  # both tasks open their contact as the next ticket id
    with helpdesk.session(one) as a, helpdesk.session(two) as b:
        subject_a = a.call("get_ticket", {"ticket_id": _ticket_id(one)}).data["ticket"]["subject"]
        subject_b = b.call("get_ticket", {"ticket_id": _ticket_id(two)}).data["ticket"]["subject"]
        assert str(_order_id(one)) in subject_a and str(_order_id(two)) in subject_b
        assert subject_a != subject_b


def test_a_reused_connection_starts_pristine(helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("cancel_order", 2)
    oid = _order_id(task)
    fresh = _pristine(helpdesk, task)
    s = helpdesk.session(task)
    conn = s.db
    for call in task.gold:
        assert s.call(call.tool, call.args).ok
    s.db.execute("INSERT INTO teams (name, queue, tier) VALUES ('Ghosts', 'ghosts', 9)")  # not even tracked by a call
    s.close()
    with helpdesk.session(task) as again:
        assert again.db is conn, "the image no longer pools connections: this test no longer tests reuse"
        assert (again.state_hash(), again.touched()) == fresh
        assert again.changes() == [] and again.events == [] and again.steps == 0 and not again.done
        assert again.clock == "2026-03-16T09:00:00Z"
        assert _order_status(again, oid) == "placed"
        assert again.db.execute("SELECT COUNT(*) FROM teams WHERE queue='ghosts'").fetchone()[0] == 0


def test_a_reused_connection_is_pristine_after_a_world_bug(faulty_helpdesk: FaultyHelpdesk) -> None:
    task = faulty_helpdesk.task("refund_damaged", 1)
    fresh = _pristine(faulty_helpdesk, task)  # type: ignore[arg-type]
    s = faulty_helpdesk.session(task)
    conn = s.db
    assert s.call("set_priority", {"ticket_id": _ticket_id(task), "priority": "urgent"}).ok
    with pytest.raises(KeyError):
        s.call("refund_then_crash", {"order_id": _order_id(task)})
    s.close()
    with faulty_helpdesk.session(task) as again:
        assert again.db is conn
        assert (again.state_hash(), again.touched()) == fresh


def test_a_session_dropped_without_close_leaks_nothing(helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("cancel_order", 2)
    fresh = _pristine(helpdesk, task)
    s = helpdesk.session(task)
    s.call("cancel_order", {"order_id": _order_id(task), "reason": "customer_request"})
    del s
    gc.collect()
    with helpdesk.session(task) as again:
        assert (again.state_hash(), again.touched()) == fresh


def test_a_task_setup_never_reaches_a_later_bare_session(helpdesk: HelpdeskWorld) -> None:
    with helpdesk.session() as bare:
        baseline = bare.state_hash()
    with helpdesk.session(helpdesk.task("merge_duplicates", 3)) as s:
        assert s.touched()
    with helpdesk.session() as bare:
        assert bare.touched() == [] and bare.state_hash() == baseline


def test_sessions_in_threads_are_isolated(helpdesk: HelpdeskWorld) -> None:
    tasks = [helpdesk.task(f, s) for f in ("cancel_order", "refund_damaged", "triage", "update_email") for s in (1, 2)]
    failures: list[str] = []

    def work(task: Task) -> None:
        for _ in range(8):
            with helpdesk.session(task) as s:
                for call in task.gold:
                    if not s.call(call.tool, call.args).ok:
                        failures.append(f"{task.id}: {call.tool} failed")
                if not verify(s).passed:
                    failures.append(f"{task.id}: gold did not pass")

    threads = [threading.Thread(target=work, args=(t,)) for t in tasks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
