"""Verdicts round-trip exactly through their stored form, and a malformed stored verdict is a
one-line ``RunFileError`` (never a ``KeyError`` or ``TypeError``), whatever it holds."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorworld.errors import RunFileError
from mirrorworld.verify import Verdict, verify
from mirrorworld.verify.verdict import MAX_DEPTH, MAX_ITEMS, MAX_TEXT, Gate
from mirrorworld.worlds.helpdesk import HelpdeskWorld

# -- round trips -------------------------------------------------------------------------------------

_scalars = st.none() | st.booleans() | st.integers(-(2**62), 2**62) | st.floats(allow_nan=False, allow_infinity=False)
_json = st.recursive(
    _scalars | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
_details = st.dictionaries(st.text(max_size=10).filter(lambda k: k not in ("passed", "evidence")), _json, max_size=4)
_gates = st.builds(Gate, st.booleans(), st.lists(st.text(max_size=30), max_size=4).map(tuple), _details)
_verdicts = st.builds(
    Verdict,
    st.booleans(),
    st.sampled_from([0.0, 1.0]) | st.floats(0.0, 1.0),
    st.dictionaries(st.text(min_size=1, max_size=12).filter(lambda k: k not in ("process", "guards")), _gates),
    st.dictionaries(st.text(max_size=10), _json, max_size=3),
    st.dictionaries(st.text(max_size=10), _json, max_size=3),
)


@settings(max_examples=300, deadline=None)
@given(_verdicts)
def test_a_verdict_round_trips_exactly(verdict: Verdict) -> None:
    again = Verdict.from_dict(verdict.to_dict())
    assert again == verdict and again.to_dict() == verdict.to_dict()
    stored = json.loads(json.dumps(verdict.to_dict()))  # what a run file holds
    assert Verdict.from_dict(stored).to_dict() == stored


@settings(max_examples=200, deadline=None)
@given(_gates)
def test_a_gate_round_trips_exactly(gate: Gate) -> None:
    assert Gate.from_dict(gate.to_dict()) == gate


def test_the_verifiers_own_verdicts_round_trip(helpdesk: HelpdeskWorld) -> None:
    for family in helpdesk.families:
        task = helpdesk.task(family.name, 0)
        for calls in (task.gold, task.gold[:-1], ()):
            with helpdesk.session(task) as s:
                for call in calls:
                    s.call(call.tool, call.args)
                verdict = verify(s)
            assert Verdict.from_dict(verdict.to_dict()) == verdict
            assert Verdict.from_dict(json.loads(json.dumps(verdict.to_dict()))).to_dict() == json.loads(
                json.dumps(verdict.to_dict())
            )


def test_keys_beside_the_verdict_are_left_to_their_reader() -> None:
    verdict = Verdict(True, 1.0, {"state": Gate(True)}, {}, {})
    assert Verdict.from_dict({**verdict.to_dict(), "team": {"returns": {"tier1": 1.0}}}) == verdict


# -- malformed input ---------------------------------------------------------------------------------


def _good() -> dict[str, Any]:
    gates = {
        "state": Gate(True, (), {"checks": {"refunded": True}}),
        "collateral": Gate(False, ("update orders 7 (belongs to customer 3)",)),
        "policy": Gate(True, (), {"violations": []}),
        "communication": Gate(True, (), {"responded": True}),
    }
    return Verdict(False, 0.0, gates, {"potential_initial": 0.0}, {"calls": 3}).to_dict()


def _with(path: str, value: Any) -> Callable[[dict[str, Any]], Any]:
    def change(d: dict[str, Any]) -> Any:
        *parents, last = path.split(".")
        target = d
        for key in parents:
            target = target[key]
        target[last] = value
        return d

    return change


def _without(path: str) -> Callable[[dict[str, Any]], Any]:
    def change(d: dict[str, Any]) -> Any:
        *parents, last = path.split(".")
        target = d
        for key in parents:
            target = target[key]
        del target[last]
        return d

    return change


def _nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


MALFORMED: list[tuple[str, Callable[[dict[str, Any]], Any], str]] = [
    ("not an object", lambda d: [d], "verdict is list, not an object"),
    ("null", lambda d: None, "verdict is null"),
    ("no passed", _without("passed"), "verdict has no 'passed'"),
    ("passed as text", _with("passed", "yes"), "verdict.passed is str, not a boolean"),
    ("passed as 1", _with("passed", 1), "verdict.passed is int"),
    ("no score", _without("score"), "verdict has no 'score'"),
    ("score as text", _with("score", "1.0"), "verdict.score is str, not a number"),
    ("score as a boolean", _with("score", True), "verdict.score is bool"),
    ("score NaN", _with("score", float("nan")), "verdict.score is nan"),
    ("score out of range", _with("score", 2.5), "not a number from 0 to 1"),
    ("no breakdown", _without("breakdown"), "verdict has no 'breakdown'"),
    ("breakdown a list", _with("breakdown", []), "verdict.breakdown is list"),
    ("no process", _without("breakdown.process"), "verdict.breakdown has no 'process'"),
    ("guards a string", _with("breakdown.guards", "many"), "verdict.breakdown.guards is str"),
    ("gate not an object", _with("breakdown.state", True), "verdict.breakdown.state is bool, not an object"),
    ("gate without passed", _without("breakdown.state.passed"), "verdict.breakdown.state has no 'passed'"),
    ("gate passed as text", _with("breakdown.policy.passed", "no"), "verdict.breakdown.policy.passed is str"),
    ("gate without evidence", _without("breakdown.policy.evidence"), "has no 'evidence'"),
    ("evidence a string", _with("breakdown.collateral.evidence", "x"), "evidence is str, not a list of strings"),
    ("evidence item a number", _with("breakdown.collateral.evidence", ["ok", 3]), "evidence[1] is int"),
    ("top evidence not a list", _with("evidence", {"a": 1}), "verdict.evidence is dict"),
    ("a set in the details", _with("breakdown.state.checks", {1, 2}), "checks is set, not JSON data"),
    ("a non-string key", _with("breakdown.state.checks", {1: True}), "is not a string key"),
    ("infinite detail", _with("breakdown.process.potential_final", float("inf")), "not a finite number"),
    ("deep nesting", _with("breakdown.guards.deep", _nested(MAX_DEPTH + 5)), "nests deeper than"),
    ("huge text", _with("breakdown.collateral.evidence", ["x" * (MAX_TEXT + 1)]), "characters long"),
    ("too many items", _with("breakdown.guards.rows", [0] * (MAX_ITEMS + 1)), "entries (at most"),
    ("hostile gate name", _with("breakdown.\n[red]x", 5), "verdict.breakdown['\\n[red]x'] is int"),
]


@pytest.mark.parametrize(("change", "needle"), [(c, n) for _, c, n in MALFORMED], ids=[i for i, _, _ in MALFORMED])
def test_a_malformed_verdict_is_a_one_line_run_file_error(change: Callable[[dict[str, Any]], Any], needle: str) -> None:
    with pytest.raises(RunFileError) as info:
        Verdict.from_dict(change(_good()))
    message = str(info.value)
    assert message.startswith("malformed verdict: ") and needle in message
    assert "\n" not in message and len(message) < 300


def test_the_good_verdict_of_the_table_is_good() -> None:
    assert Verdict.from_dict(_good()).gates["collateral"].evidence == ("update orders 7 (belongs to customer 3)",)


_garbage = st.recursive(
    _scalars | st.text(max_size=10) | st.just(float("nan")),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["passed", "score", "breakdown", "evidence", "process", "guards", "x"]), inner
        )
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(_garbage)
def test_anything_is_a_verdict_or_a_run_file_error(data: Any) -> None:
    try:
        Verdict.from_dict(data)
    except RunFileError as err:
        assert "\n" not in str(err)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_a_verdict_with_one_field_replaced_by_garbage_is_refused_or_kept(data: st.DataObject) -> None:
    stored = _good()
    gate = data.draw(st.sampled_from(["state", "collateral", "policy", "communication"]))
    field = data.draw(st.sampled_from(["passed", "evidence"]))
    stored["breakdown"][gate][field] = data.draw(_garbage)
    try:
        verdict = Verdict.from_dict(stored)
    except RunFileError as err:
        assert "\n" not in str(err) and f"verdict.breakdown.{gate}" in str(err)
    else:
        assert isinstance(verdict.gates[gate].passed, bool)
        assert all(isinstance(e, str) for e in verdict.gates[gate].evidence)
