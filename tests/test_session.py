"""Sessions: state hashing, diffs, events, the clock, forks and atomic calls."""

from __future__ import annotations

import json

import pytest

from conftest import FaultyHelpdesk
from mirrorworld.core.session import Session
from mirrorworld.core.task import Task
from mirrorworld.errors import SessionClosedError
from mirrorworld.worlds.helpdesk import HelpdeskWorld


@pytest.fixture
def cancel_task(helpdesk: HelpdeskWorld) -> Task:
    return helpdesk.task("cancel_order", 2)


def _order_id(task: Task) -> int:
    return next(i for kind, i in task.scope if kind == "order")


def _ticket_id(task: Task) -> int:
    return next(i for kind, i in task.scope if kind == "ticket")


def _status(s: Session, order_id: int) -> str:
    return str(s.db.execute("SELECT status FROM orders WHERE id=?", (order_id,)).fetchone()[0])


# -- state hash ----------------------------------------------------------------


def test_state_hash_changes_with_a_real_write(helpdesk: HelpdeskWorld, cancel_task: Task) -> None:
    with helpdesk.session(cancel_task) as s:
        before = s.state_hash()
        assert s.call("cancel_order", {"order_id": _order_id(cancel_task), "reason": "customer_request"}).ok
        assert s.state_hash() != before


def test_state_hash_ignores_reads_and_rejected_writes(helpdesk: HelpdeskWorld, cancel_task: Task) -> None:
    with helpdesk.session(cancel_task) as s:
        before, touched = s.state_hash(), s.touched()
        assert s.call("get_order", {"order_id": _order_id(cancel_task)}).ok
        refused = s.call(
            "issue_refund", {"order_id": _order_id(cancel_task), "line_id": 1, "amount": 5, "reason": "damaged"}
        )
        assert not refused.ok
        assert (s.state_hash(), s.touched()) == (before, touched)


def test_state_hash_of_equal_states_is_equal(helpdesk: HelpdeskWorld, cancel_task: Task) -> None:
    call = ("cancel_order", {"order_id": _order_id(cancel_task), "reason": "customer_request"})
    with helpdesk.session(cancel_task) as a, helpdesk.session(cancel_task) as b:
        assert a.state_hash() == b.state_hash()
        a.call(*call)
        b.call("get_order", {"order_id": _order_id(cancel_task)})  # a read on the way changes nothing
        b.call(*call)
        assert a.state_hash() == b.state_hash()


def test_task_setup_is_part_of_the_state(helpdesk: HelpdeskWorld, cancel_task: Task) -> None:
    with helpdesk.session() as bare, helpdesk.session(cancel_task) as s:
        assert bare.touched() == []
        assert s.touched()  # the setup's ticket and message
        assert s.state_hash() != bare.state_hash()
        assert s.changes() == []  # changes are counted from the task's initial state


def test_write_then_undo_restores_the_state_hash(helpdesk: HelpdeskWorld, cancel_task: Task) -> None:
    with helpdesk.session(cancel_task) as s:
        before = s.state_hash()
        tier = s.db.execute("SELECT tier FROM customers WHERE id=1").fetchone()[0]
        s.db.execute("UPDATE customers SET tier=? WHERE id=1", ("platinum" if tier != "platinum" else "gold",))
        assert s.state_hash() != before
        s.db.execute("UPDATE customers SET tier=? WHERE id=1", (tier,))
        assert s.state_hash() == before
        assert ("customers", 1) in s.touched()  # written, yet no difference
        assert s.changes() == []


def test_insert_then_delete_restores_the_state_hash(helpdesk: HelpdeskWorld, cancel_task: Task) -> None:
    with helpdesk.session(cancel_task) as s:
        before = s.state_hash()
        cur = s.db.execute("INSERT INTO teams (name, queue, tier) VALUES ('Night shift', 'night', 1)")
        assert s.state_hash() != before
        s.db.execute("DELETE FROM teams WHERE id=?", (cur.lastrowid,))
        assert s.state_hash() == before


def test_a_tool_level_undo_is_not_a_change(helpdesk: HelpdeskWorld) -> None:
    """Changing an email and changing it back leaves no change on the customer row."""
    task = helpdesk.task("update_email", 3)
    verify, _update, _respond = task.gold
    cid = verify.args["customer_id"]
    with helpdesk.session(task) as s:
        original = s.call("get_customer", {"customer_id": cid}).data["customer"]["email"]
        assert s.call(verify.tool, verify.args).ok
        assert s.call("update_customer", {"customer_id": cid, "email": "someone.else@newmail.example"}).ok
        assert ("customers", cid) in [(c.table, c.pk) for c in s.changes()]
        assert s.call("update_customer", {"customer_id": cid, "email": original}).ok
        changed = {c.table for c in s.changes()}
        assert "customers" not in changed
        assert changed == {"identity_checks", "sim_clock"}


# -- diff and changes ------------------------------------------------------------


def test_diff_lists_changed_rows_and_fields(helpdesk: HelpdeskWorld, cancel_task: Task) -> None:
    oid = _order_id(cancel_task)
    with helpdesk.session(cancel_task) as before, helpdesk.session(cancel_task) as after:
        assert before.diff(after) == []
        assert after.call("cancel_order", {"order_id": oid, "reason": "customer_request"}).ok
        diff = {(c.table, c.pk): c for c in before.diff(after)}
        order = diff[("orders", oid)]
        assert order.kind == "update"
        assert order.fields == {"status": ("placed", "cancelled")}
        lines = [c for c in diff.values() if c.table == "order_lines"]
        assert lines and all(set(c.fields) == {"refunded_cents"} for c in lines)
        (refund,) = [c for c in diff.values() if c.table == "refunds"]
        assert refund.kind == "insert" and refund.before is None and refund.after is not None
        assert refund.after["order_id"] == oid and refund.after["reason"] == "cancellation"
        assert diff[("sim_clock", 1)].fields == {"now": ("2026-03-16T09:00:00Z", "2026-03-16T09:01:00Z")}
        assert set(diff) == {(c.table, c.pk) for c in after.changes()}
        # The other way round an insert is a delete.
        back = {(c.table, c.pk): c for c in after.diff(before)}
        assert back[("refunds", refund.pk)].kind == "delete"
        assert back[("orders", oid)].fields == {"status": ("cancelled", "placed")}


def test_diff_needs_sessions_of_one_image(helpdesk: HelpdeskWorld) -> None:
    from mirrorworld.errors import WorldError

    other = type(helpdesk)(data_seed=1)
    with helpdesk.session() as a, other.session() as b, pytest.raises(WorldError):
        a.diff(b)


# -- events ------------------------------------------------------------------------


def test_events_record_calls_and_the_rows_they_changed(helpdesk: HelpdeskWorld, cancel_task: Task) -> None:
    oid = _order_id(cancel_task)
    with helpdesk.session(cancel_task) as s:
        s.call("get_order", {"order_id": f"#{oid}"})
        s.call("cancel_order", {"order_id": oid, "reason": "Customer_Request "})
        s.call("no_such_tool", {})
        read, write, unknown = s.events
        assert [e.step for e in s.events] == [1, 2, 3]
        assert (read.tool, read.kind, read.ok, read.rows, read.args) == (
            "get_order",
            "read",
            True,
            (),
            {"order_id": oid},
        )
        assert write.kind == "write" and write.ok
        assert write.args == {"order_id": oid, "reason": "customer_request"}  # coerced, canonical
        assert {t for t, _ in write.rows} == {"orders", "order_lines", "refunds"}
        assert ("orders", oid) in write.rows
        # Every row the call wrote, and the clock it moved, are the episode's changes.
        assert {*write.rows, ("sim_clock", 1)} == {(c.table, c.pk) for c in s.changes()}
        assert (unknown.ok, unknown.kind, unknown.error["code"]) == (False, None, "unknown_tool")  # type: ignore[index]


def test_events_record_rule_violations_of_committed_calls(helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("deny_refund", 2)
    oid, line = _order_id(task), task.hidden["line_id"]
    with helpdesk.session(task) as s:
        result = s.call(
            "issue_refund",
            {"order_id": oid, "line_id": line, "amount": "1.00", "reason": "changed_mind", "policy_override": "VIP"},
        )
        assert result.ok
        (event,) = s.events
        assert [(v.rule, v.hard, v.step) for v in event.violations] == [("refund_override", True, 1)]


def test_event_args_are_json_and_signatures_identify_repeated_calls(helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("refund_damaged", 1)
    refund = task.gold[0]
    with helpdesk.session(task) as s:
        s.call("get_order", {"order_id": refund.args["order_id"]})
        s.call("get_order", {"order_id": str(refund.args["order_id"])})
        s.call("get_order", {"order_id": refund.args["order_id"] + 1})
        s.call(refund.tool, {**refund.args, "amount": float(refund.args["amount"])})
        a, b, c, d = s.events
        assert a.signature() == b.signature() != c.signature()
        # Event args are JSON: a coerced amount is kept as its exact decimal text.
        assert d.args is not None and d.args["amount"] == str(refund.args["amount"])
        json.dumps([e.args for e in s.events])


# -- the simulated clock -----------------------------------------------------------


def test_clock_advances_only_with_committed_writes(helpdesk: HelpdeskWorld, cancel_task: Task) -> None:
    oid = _order_id(cancel_task)
    with helpdesk.session(cancel_task) as s:
        assert s.clock == "2026-03-16T09:00:00Z"
        s.call("get_order", {"order_id": oid})
        s.call("cancel_order", {"order_id": oid + 10**6, "reason": "customer_request"})  # not found
        assert s.clock == "2026-03-16T09:00:00Z"
        s.call("cancel_order", {"order_id": oid, "reason": "customer_request"})
        assert s.clock == "2026-03-16T09:01:00Z"
        created = s.db.execute("SELECT created_at FROM refunds WHERE order_id=? AND reason='cancellation'", (oid,))
        assert created.fetchone()[0] == "2026-03-16T09:00:00Z"  # the write happened at the call's time
        assert s.db.execute("SELECT now FROM sim_clock").fetchone()[0] == s.clock


# -- atomic calls ------------------------------------------------------------------


def test_a_refused_write_leaves_no_partial_write(faulty_helpdesk: FaultyHelpdesk) -> None:
    task = faulty_helpdesk.task("refund_damaged", 1)
    oid = _order_id(task)
    with faulty_helpdesk.session(task) as s:
        s.call("get_ticket", {"ticket_id": _ticket_id(task)})
        before = (s.state_hash(), s.touched(), s.clock, s.view, list(s.viewed), _status(s, oid))
        result = s.call("refund_then_refuse", {"order_id": oid})
        assert not result.ok and result.error == {
            "code": "policy_refused",
            "message": "the return window has ended",
            "rule": "refund_window",
        }
        assert (s.state_hash(), s.touched(), s.clock, s.view, list(s.viewed), _status(s, oid)) == before
        assert not s.done and s.final_message is None
        (event,) = s.events[1:]
        assert (event.ok, event.rows, event.violations) == (False, (), ())
        assert s.changes() == []


def test_a_crashing_write_propagates_and_is_rolled_back(faulty_helpdesk: FaultyHelpdesk) -> None:
    task = faulty_helpdesk.task("refund_damaged", 1)
    oid = _order_id(task)
    with faulty_helpdesk.session(task) as s:
        before = (s.state_hash(), s.touched(), s.clock, _status(s, oid))
        with pytest.raises(KeyError, match="a bug in the world"):
            s.call("refund_then_crash", {"order_id": oid})
        assert (s.state_hash(), s.touched(), s.clock, _status(s, oid)) == before
        assert not s.done and s.final_message is None
        assert s.events == [] and s.steps == 1  # the crash is not recorded as an agent's call
        # The session is still usable, and the gold solution still solves the task.
        for call in task.gold:
            assert s.call(call.tool, call.args).ok
        from mirrorworld.verify import verify

        assert verify(s).passed


def test_writes_through_db_are_touched_but_belong_to_no_call(helpdesk: HelpdeskWorld, cancel_task: Task) -> None:
    oid = _order_id(cancel_task)
    with helpdesk.session(cancel_task) as s:
        team = s.db.execute("INSERT INTO teams (name, queue, tier) VALUES ('Night shift', 'night', 1)").lastrowid
        assert ("teams", team) in s.touched()
        assert s.call("cancel_order", {"order_id": oid, "reason": "customer_request"}).ok
        rows = s.events[-1].rows
        assert ("orders", oid) in rows and ("teams", team) not in rows
        assert ("teams", team) in {(c.table, c.pk) for c in s.changes()}


def test_a_fork_mid_episode_records_only_its_own_calls(helpdesk: HelpdeskWorld, cancel_task: Task) -> None:
    oid = _order_id(cancel_task)
    with helpdesk.session(cancel_task) as s:
        s.db.execute("UPDATE orders SET status=status WHERE id=?", (oid + 1,))
        with s.fork() as child:
            assert child.touched() == s.touched()
            assert child.call("cancel_order", {"order_id": oid, "reason": "customer_request"}).ok
            assert ("orders", oid + 1) not in child.events[-1].rows
            assert ("orders", oid) in child.touched() and ("orders", oid) not in s.touched()


# -- forks -------------------------------------------------------------------------


def test_fork_carries_the_parents_state(helpdesk: HelpdeskWorld, cancel_task: Task) -> None:
    oid = _order_id(cancel_task)
    with helpdesk.session(cancel_task) as s:
        s.call("cancel_order", {"order_id": oid, "reason": "customer_request"})
        with s.fork() as f:
            assert f.state_hash() == s.state_hash()
            assert _status(f, oid) == "cancelled"
            assert f.changes() == s.changes()


def test_fork_copies_the_episode_bookkeeping(helpdesk: HelpdeskWorld, cancel_task: Task) -> None:
    with helpdesk.session(cancel_task) as s:
        s.call("get_order", {"order_id": _order_id(cancel_task)})
        with s.fork() as f:
            assert f.events == s.events and f.events is not s.events
            assert (f.steps, f.done, f.view, f.viewed, f.clock) == (s.steps, s.done, s.view, s.viewed, s.clock)


def test_fork_and_parent_evolve_independently(helpdesk: HelpdeskWorld, cancel_task: Task) -> None:
    oid = _order_id(cancel_task)
    with helpdesk.session(cancel_task) as s:
        with s.fork() as f:
            parent_hash = s.state_hash()
            f.db.execute("UPDATE orders SET status='shipped' WHERE id=?", (oid,))
            assert s.state_hash() == parent_hash and _status(s, oid) == "placed"
            fork_hash = f.state_hash()
            assert s.call("cancel_order", {"order_id": oid, "reason": "customer_request"}).ok
            assert f.state_hash() == fork_hash and _status(f, oid) == "shipped"
            f.call("get_order", {"order_id": oid})
            assert len(f.events) == len(s.events)  # each appended its own call
            assert f.events[-1].tool == "get_order" and s.events[-1].tool == "cancel_order"
        assert _status(s, oid) == "cancelled"  # closing the fork leaves the parent alone


# -- lifecycle -----------------------------------------------------------------------


def test_closed_sessions_refuse_use(helpdesk: HelpdeskWorld, cancel_task: Task) -> None:
    s = helpdesk.session(cancel_task)
    s.close()
    s.close()  # idempotent
    assert s.closed
    with pytest.raises(SessionClosedError):
        s.call("get_policy")
    with pytest.raises(SessionClosedError):
        s.state_hash()
    with pytest.raises(SessionClosedError):
        _ = s.db


def test_calls_after_the_episode_ended_are_errors(helpdesk: HelpdeskWorld, cancel_task: Task) -> None:
    with helpdesk.session(cancel_task) as s:
        assert s.call("respond", {"message": "Bye."}).done
        before = s.state_hash()
        late = s.call("cancel_order", {"order_id": _order_id(cancel_task), "reason": "customer_request"})
        assert not late.ok and late.error is not None and late.error["code"] == "episode_over"
        assert s.state_hash() == before and s.done and s.final_message == "Bye."


def test_tool_results_are_canonical_ascii_json(helpdesk: HelpdeskWorld, cancel_task: Task) -> None:
    with helpdesk.session(cancel_task) as s:
        ok = s.call("get_ticket", {"ticket_id": _ticket_id(cancel_task)})
        bad = s.call("get_ticket", {"ticket_id": "x"})
        for result in (ok, bad):
            text = result.content()
            assert text.isascii()
            assert text == json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=True)
            assert json.loads(text) == (result.data if result.ok else {"error": result.error})
        assert json.loads(bad.content())["error"]["code"] == "invalid_arguments"


def test_pristine_queries_are_kept_immutable_and_lookups_never_push_out_candidates() -> None:
    import sqlite3

    from mirrorworld.core import store

    def build(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
        conn.executemany("INSERT INTO t (v) VALUES (?)", [("a",), ("b",)])

    image = store.Image(build)
    first = image.query("SELECT id, v FROM t ORDER BY id")
    assert first == ((1, "a"), (2, "b"))
    assert image.query("SELECT id, v FROM t ORDER BY id") is first  # kept, and immutable: nobody can change it
    assert image.query("SELECT v FROM t WHERE id=?", (2,)) == (("b",),)
    # a session's writes never reach the pristine image, so a kept answer stays true
    conn = image.acquire()
    conn.execute("INSERT INTO t (v) VALUES ('c')")
    assert image.query("SELECT COUNT(*) FROM t") == ((2,),)
    image.release(conn)
    lookup = image.query("SELECT v FROM t WHERE id=?", (1,))
    for i in range(store.QUERY_MEMO + 10):  # the memo of lookups is bounded, and the most recently used stay
        image.query("SELECT ? AS x", (i,))
        assert image.query("SELECT v FROM t WHERE id=?", (1,)) is lookup
    assert len(image._memo) <= store.QUERY_MEMO
    assert ("SELECT ? AS x", (0,)) not in image._memo
    # however many lookups ran, the candidate list was scanned once
    assert image.query("SELECT id, v FROM t ORDER BY id") is first


def test_the_page_size_of_an_image_changes_no_state_and_no_verdict() -> None:
    """A small world's image has small pages, a world may choose SQLite's default; sessions cannot tell them apart."""
    from mirrorworld.core import store
    from mirrorworld.verify.verifier import Verifier

    class LargePages(HelpdeskWorld):
        def page_size(self) -> int:
            return store.PAGE_SIZE

    small, large = HelpdeskWorld(), LargePages()
    pages = {}
    for w in (small, large):
        conn = w.image.acquire()
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the header is read on first use
        pages[w] = conn.execute("PRAGMA page_size").fetchone()[0]
        w.image.release(conn)
    assert (pages[small], pages[large]) == (store.SMALL_PAGE_SIZE, store.PAGE_SIZE)
    assert small.image.digest == large.image.digest
    for family in small.families_by_name:
        seen = []
        for w in (small, large):
            task = w.task(family, 3)
            with w.session(task) as s:
                results = [s.call(c.tool, c.args).content() for c in task.gold]
                seen.append((results, s.state_hash(), [repr(c) for c in s.changes()], Verifier()(s).passed))
        assert seen[0] == seen[1], family
        assert seen[0][3] is True, family


@pytest.mark.parametrize("size", [0, 256, 1000, 3000, 131072, 1024.0, True])
def test_an_image_refuses_a_page_size_sqlite_has_not(size: object) -> None:
    from mirrorworld.core import store
    from mirrorworld.errors import WorldError

    with pytest.raises(WorldError, match="page size"):
        store.Image(lambda conn: None, page_size=size)  # type: ignore[arg-type]
