"""The real twin: a Tryton database behind the sales world's tool interface.

Needs Tryton (``pip install 'mirrorworld[twin]'``); skipped when it is not
importable. The twin database is built once (about a minute) and cached under
``$MIRRORWORLD_CACHE`` (default ``~/.cache/mirrorworld``); every test shares
one loaded twin.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import pytest

from mirrorworld.twin import tryton
from mirrorworld.worlds.sales import SalesWorld
from mirrorworld.worlds.sales.world import canonical_state

pytestmark = pytest.mark.skipif(not tryton.available(), reason="Tryton (trytond, proteus) is not installed")

WORLD = SalesWorld()


@pytest.fixture(scope="session")
def twin() -> Iterator[Any]:
    from mirrorworld.twin.testing import shared_twin

    yield shared_twin()


def _file_hash(twin: Any) -> str:
    path = twin._dir / "twin.sqlite"
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_pristine_twin_equals_pristine_mirror(twin: Any) -> None:
    with WORLD.session() as m, twin.session() as t:
        assert t.canonical_state() == canonical_state(m.db)


def test_gold_solutions_reach_the_same_state(twin: Any) -> None:
    for family in WORLD.families:
        task = WORLD.task(family.name, 0)
        with WORLD.session(task) as m, twin.session() as t:
            for call in task.gold:
                a, b = m.call(call.tool, call.args), t.call(call.tool, call.args)
                assert a.ok and b.ok, (task.id, call, a.error, b.error)
            assert t.canonical_state() == canonical_state(m.db), task.id


BAD_CALLS: list[tuple[str, Any]] = [
    ("no_such_tool", {}),
    ("get_sale", "{not json"),
    ("get_sale", {"sale_id": "abc"}),
    ("get_sale", {"sale_id": 99999}),
    ("add_line", {"sale_id": 1, "product_id": 1}),
    ("add_line", {"sale_id": 1, "product_id": 1, "quantity": 1, "bogus": 2}),
    ("add_line", {"sale_id": 1, "product_id": 1, "quantity": 0}),
    ("add_line", {"sale_id": 1, "product_id": 1, "quantity": 1, "discount": "45"}),
    ("add_contact", {"party_id": 3, "kind": "email", "value": "not-an-email"}),
    ("add_contact", {"party_id": 3, "kind": "fax", "value": "1"}),
    ("create_lead", {"party_id": 3, "description": "x", "amount": "-5"}),
    ("confirm_sale", {"sale_id": 1}),
    ("cancel_sale", {"sale_id": 30}),
    ("request_discount_approval", {"sale_id": 1, "discount": "35", "reason": "x"}),
    ("qualify_lead", {"opportunity_id": 5}),
    ("search_parties", {"query": "'; DROP TABLE party_party; --"}),
    ("pay_invoice", {"invoice_id": 11, "amount": "99999.00"}),
    ("ship_shipment", {"shipment_id": 999}),
]


@pytest.mark.parametrize(("tool", "args"), BAD_CALLS)
def test_bad_input_gets_the_mirrors_error_and_changes_nothing(twin: Any, tool: str, args: Any) -> None:
    before_file = _file_hash(twin)
    with WORLD.session() as m, twin.session() as t:
        before = t.canonical_state()
        a, b = m.call(tool, args), t.call(tool, args)
        assert (a.ok, (a.error or {}).get("code")) == (b.ok, (b.error or {}).get("code")), (a.error, b.error)
        if not b.ok:
            assert isinstance(b.error, dict) and set(b.error) >= {"code", "message"}
            assert t.canonical_state() == before
    assert _file_hash(twin) == before_file


def test_a_session_never_changes_the_twin_database(twin: Any) -> None:
    before_file = _file_hash(twin)
    with twin.session() as t:
        sale = t.call("create_quotation", {"party_id": 3}).data["sale_id"]
        assert t.call("add_line", {"sale_id": sale, "product_id": 2, "quantity": 1}).ok
        assert t.call("quote_sale", {"sale_id": sale}).ok
    with twin.session() as t, WORLD.session() as m:
        assert t.canonical_state() == canonical_state(m.db)
    assert _file_hash(twin) == before_file


def test_refused_call_inside_a_session_is_rolled_back(twin: Any) -> None:
    with twin.session() as t:
        before = t.canonical_state()
        # Shipping needs more stock than exists: Tryton reserves part, the savepoint undoes it.
        sale = t.call("create_quotation", {"party_id": 3}).data["sale_id"]
        t.call("add_line", {"sale_id": sale, "product_id": 1, "quantity": 5000})
        t.call("quote_sale", {"sale_id": sale})
        confirmed = t.call("confirm_sale", {"sale_id": sale}).data
        assert confirmed["state"] == "processing"
        shipment = t.call("get_sale", {"sale_id": sale}).data["shipments"][0]["id"]
        mid = t.canonical_state()
        result = t.call("ship_shipment", {"shipment_id": shipment})
        assert not result.ok and result.error["code"] == "validation_error"
        assert t.canonical_state() == mid
        assert mid != before


def test_twin_cache_key_tracks_versions_and_world() -> None:
    from mirrorworld.twin.db import twin_key

    assert twin_key(WORLD) == twin_key(SalesWorld())
    assert twin_key(WORLD) != twin_key(SalesWorld(data_seed=1))
