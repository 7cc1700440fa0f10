"""Action-space parity: a world's tool surface against the real twin's, another version's, a declared file.

The checker (:mod:`mirrorworld.drift.parity`) and the real surface
(:mod:`mirrorworld.twin.surface`) come with the cases that prove they catch
what they are for: a sales world derived with a drift fails against the
twin, helpdesk v1 differs from v0 by exactly its declared changes, and a
surface file broken one way per case is refused with one readable line.
The twin tests need Tryton and are skipped without it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mirrorworld.core.registry import Registry, WorldSpec, default
from mirrorworld.core.session import ToolContext
from mirrorworld.core.tools import tool
from mirrorworld.drift import AddEnumValue, RenameArgument, RetypeArgument, derive
from mirrorworld.drift.parity import (
    MAX_SURFACE_BYTES,
    Known,
    Mismatch,
    SurfaceError,
    compare,
    declared_changes,
    error_codes,
    load_surface,
    register,
    render,
    surface_of,
)
from mirrorworld.errors import MirrorworldError, ToolError, WorldError
from mirrorworld.twin import tryton
from mirrorworld.worlds.sales import SalesWorld

needs_tryton = pytest.mark.skipif(not tryton.available(), reason="Tryton (trytond, proteus) is not installed")

DRIFT = (
    RetypeArgument("pay_invoice", "amount", "cents"),
    AddEnumValue("add_contact", "kind", "mail", means="email"),
    RenameArgument("get_sale", "sale_id", "order_id"),
)
SalesTest9 = derive(SalesWorld, version=9, changes=DRIFT, name="sales_test9", module=__name__, qualname="SalesTest9")
"""The sales world drifted from Tryton three ways: money in cents, an enum value Tryton lacks, an id renamed."""

DRIFTED = {
    ("type", "pay_invoice", "amount"),
    ("enum", "add_contact", "kind"),
    ("argument_renamed", "get_sale", "order_id"),
}
"""The mismatches the drift makes, named as the drifted mirror names them."""


def _keys(mismatches: list[Mismatch], *, known: bool | None = None) -> set[tuple[str, str, str | None]]:
    return {(m.kind, m.tool, m.argument) for m in mismatches if known is None or m.known is known}


def _known() -> list[Known]:
    from mirrorworld.twin.surface import known_differences

    return [Known.from_dict(d) for d in known_differences()]


def _parity(argv: list[str], registry: Registry | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mirrorworld")
    handlers = register(parser.add_subparsers(dest="command"), registry)
    args = parser.parse_args(["parity", *argv])
    args.registry = registry
    return int(handlers["parity"](args))


# -- error codes, statically ------------------------------------------------------------------


def _refuse(value: int) -> None:
    if value < 0:
        raise ToolError("helper_refused", "negative")


@tool("write")
def _helped(ctx: ToolContext, value: int) -> dict[str, Any]:
    """A tool whose refusal is raised by a helper.

    Args:
        value: A number.
    """
    _refuse(value)
    if value > 9:
        raise ToolError("too_big" if value > 99 else "big", "big")
    return {}


def _computed(code: str) -> None:
    raise ToolError(code, "a code parity cannot read")


def test_error_codes_follow_helpers_and_conditional_literals() -> None:
    assert error_codes(_helped.func) == {"helper_refused", "too_big", "big"}


def test_a_computed_error_code_is_a_world_error() -> None:
    with pytest.raises(WorldError, match="not a string literal"):
        error_codes(_computed)


def test_sales_surface_reads_rules_helpers_and_is_canonical() -> None:
    surface = surface_of(SalesWorld())
    tools = surface["tools"]
    assert surface["world"] == "mirrorworld/Sales-v0" and len(tools) == len(SalesWorld().tools)
    assert tools["add_line"]["errors"] == ["invalid_arguments", "invalid_state", "not_found", "policy_refused"]
    assert tools["add_contact"]["args"]["kind"] == {"type": "string", "enum": ["email", "phone"], "required": True}
    assert tools["get_policy"] == {"kind": "read", "args": {}, "errors": []}
    assert json.dumps(surface, sort_keys=True) == json.dumps(surface_of(SalesWorld()), sort_keys=True)
    assert compare(surface, surface) == []


# -- a drifted mirror is caught ------------------------------------------------------------


def test_a_drifted_sales_world_differs_from_sales_in_exactly_the_drift() -> None:
    mismatches = compare(surface_of(SalesTest9()), surface_of(SalesWorld()))
    assert _keys(mismatches) == DRIFTED
    assert not any(m.known for m in mismatches)


def test_known_differences_explain_only_what_they_declare() -> None:
    narrowing = Known("enum", "add_contact", "kind", "the desk takes fewer", narrows=True)
    narrower = Mismatch("enum", "add_contact", "kind", ["email"], ["email", "fax"])
    wider = Mismatch("enum", "add_contact", "kind", ["email", "mail"], ["email", "fax"])
    assert narrowing.explains(narrower) and not narrowing.explains(wider)
    pinned = Known("type", "add_line", "quantity", "whole units", mirror=("integer",))
    assert pinned.explains(Mismatch("type", "add_line", "quantity", "integer", "number"))
    assert not pinned.explains(Mismatch("type", "add_line", "quantity", "string", "number"))
    with pytest.raises(WorldError, match="needs a reason"):
        Known("type", "add_line", "quantity", " ")


# -- the real twin ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def real() -> dict[str, Any]:
    """The real surface, read off the shared twin (built on first use, then cached)."""
    from mirrorworld.twin.surface import SALES, twin_surface
    from mirrorworld.twin.testing import shared_twin

    twin = shared_twin()
    with twin.session():
        return twin_surface(twin.pool, SALES, codes=error_codes)


@needs_tryton
def test_sales_mirror_matches_the_real_twin_up_to_declared_differences(real: dict[str, Any]) -> None:
    known = _known()
    mismatches = compare(surface_of(SalesWorld()), real, known)
    assert real["unresolved"] == []
    unexplained = [m for m in mismatches if not m.known]
    assert unexplained == [], unexplained
    assert all(m.reason for m in mismatches)
    stale = [k for k in known if not any(k.explains(m) for m in mismatches)]
    assert stale == [], f"declared differences that no longer differ: {stale}"


@needs_tryton
def test_a_drifted_sales_world_fails_against_the_real_twin(real: dict[str, Any]) -> None:
    mismatches = compare(surface_of(SalesTest9()), real, _known())
    assert _keys(mismatches, known=False) == DRIFTED


@needs_tryton
def test_a_declaration_the_pool_lacks_is_unresolved_never_explained() -> None:
    from mirrorworld.twin.surface import SALES, Key, ToolDecl, Value, twin_surface
    from mirrorworld.twin.testing import shared_twin

    broken = dict(SALES)
    broken["get_sale"] = ToolDecl("sale.sale", {"sale_id": Key("sale.order")}, buttons=("approve",))
    broken["pay_invoice"] = ToolDecl(
        "account.invoice",
        {"invoice_id": Key("account.invoice"), "amount": Value("account.invoice", "amount_paid")},
        wizard="account.invoice.settle",
        errors={"trytond.modules.account_invoice.exceptions.NoSuchError": "policy_refused"},
    )
    del broken["post_invoice"]
    twin = shared_twin()
    with twin.session():
        real = twin_surface(twin.pool, broken, codes=error_codes)
    whats = {(u["tool"], u["what"]) for u in real["unresolved"]}
    assert {
        ("get_sale", "no model sale.order"),
        ("get_sale", "no button approve on sale.sale"),
        ("pay_invoice", "no field account.invoice.amount_paid"),
        ("pay_invoice", "no wizard account.invoice.settle"),
        ("pay_invoice", "no Tryton error class trytond.modules.account_invoice.exceptions.NoSuchError"),
        ("post_invoice", "the twin implements it, and the declaration does not describe it"),
    } <= whats
    mismatches = compare(surface_of(SalesWorld()), real, _known())
    assert all(not m.known for m in mismatches if m.kind == "unresolved")


@needs_tryton
def test_the_parity_command_against_the_twin_passes(real: dict[str, Any]) -> None:
    # A process of its own: Tryton allows one twin per process, and this one holds the shared twin.
    script = (
        "import argparse, sys\n"
        "from mirrorworld.drift.parity import register\n"
        "p = argparse.ArgumentParser(); h = register(p.add_subparsers(dest='command'))\n"
        "sys.exit(h['parity'](p.parse_args(['parity', '--world', 'sales'])))\n"
    )
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("parity: mirrorworld/Sales-v0 against the Tryton twin")
    assert lines[-1].endswith("0 unexplained") and "NEW" not in done.stdout
    assert max(len(line) for line in lines) <= 80


# -- two versions -----------------------------------------------------------------------


def test_helpdesk_v1_differs_from_v0_by_exactly_its_declared_changes() -> None:
    v0, v1 = default.get("helpdesk"), default.get("helpdesk_v1")
    left = surface_of(v0)
    mismatches = compare(left, surface_of(v1), declared_changes(v0, v1))
    others = _keys([m for m in mismatches if m.kind != "error"])
    assert others == {
        ("tool_renamed", "issue_refund", None),
        ("enum", "issue_refund", "reason"),
        ("type", "request_approval", "amount"),
        ("enum", "request_approval", "reason"),
        ("argument", "escalate_ticket", "severity"),
        ("argument_renamed", "update_customer", "email"),
    }
    errors = [m for m in mismatches if m.kind == "error"]
    assert {(m.mirror, m.real) for m in errors} == {("policy_refused", "forbidden")}
    assert {m.tool for m in errors} == {t for t, s in left["tools"].items() if "policy_refused" in s["errors"]}
    assert all(m.known and m.reason for m in mismatches)
    renamed = next(m for m in mismatches if m.kind == "tool_renamed")
    assert (renamed.mirror, renamed.real) == ("issue_refund", "create_refund")
    amount = next(m for m in mismatches if m.kind == "type")
    assert (amount.mirror, amount.real) == ("number", "integer")
    # Without the changelog, every one of them is unexplained.
    assert _keys(compare(left, surface_of(v1))) == _keys(mismatches)
    assert not any(m.known for m in compare(left, surface_of(v1)))


def test_the_parity_command_between_versions(capsys: pytest.CaptureFixture[str]) -> None:
    assert _parity(["--world", "helpdesk", "--against-world", "helpdesk_v1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "parity: mirrorworld/Helpdesk-v0 against mirrorworld/Helpdesk-v1"
    row = next(i for i, line in enumerate(out) if "tool_renamed" in line)
    assert out[row].split()[:3] == ["known", "tool_renamed", "issue_refund"]
    assert out[row + 1].split() == ["v0:", "issue_refund;", "v1:", "create_refund"]
    assert out[-1].endswith(" 0 unexplained") and max(len(line) for line in out) <= 80
    # The other way round, v0 is not derived from v1: nothing explains the differences.
    assert _parity(["--world", "helpdesk_v1", "--against-world", "helpdesk", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["unexplained"] == len(data["mismatches"]) > 0


def test_a_derived_world_against_its_base_through_a_registry(capsys: pytest.CaptureFixture[str]) -> None:
    registry = Registry([default.spec("sales"), WorldSpec.of(SalesTest9)])
    assert _parity(["--world", "sales", "--against-world", "sales_test9", "--json"], registry) == 0
    data = json.loads(capsys.readouterr().out)
    named = {(m["kind"], m["tool"], m["argument"]) for m in data["mismatches"]}
    assert named == {
        *(DRIFTED - {("argument_renamed", "get_sale", "order_id")}),
        ("argument_renamed", "get_sale", "sale_id"),
    }
    assert data["unexplained"] == 0


# -- declared surface files -------------------------------------------------------------


def test_a_written_surface_file_round_trips(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "surface.json"
    assert _parity(["--world", "helpdesk_v1", "--write-surface", str(path)]) == 0
    assert load_surface(path) == surface_of(default.get("helpdesk_v1"))
    capsys.readouterr()
    assert _parity(["--world", "helpdesk_v1", "--surface", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "24 tools compared: 0 differences, 0 declared, 0 unexplained"
    data = json.loads(path.read_text())
    data["tools"]["create_refund"]["args"]["amount"]["type"] = "integer"
    path.write_text(json.dumps(data))
    assert _parity(["--world", "helpdesk_v1", "--surface", str(path)]) == 1
    out = capsys.readouterr().out
    assert "create_refund.amount" in out and out.splitlines()[-1].endswith(" 1 unexplained")


def _valid() -> dict[str, Any]:
    return {
        "world": "prod",
        "tools": {"t": {"kind": "read", "args": {"a": {"type": "integer", "required": True}}, "errors": []}},
    }


def _with(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    data = _valid()
    here: Any = data
    for key in path[:-1]:
        here = here[key]
    here[path[-1]] = value
    return data


HOSTILE: dict[str, bytes] = {
    "not JSON": b"{not json",
    "not UTF-8": b'{"world": "\xff"}',
    "huge": b'{"world": "' + b"x" * MAX_SURFACE_BYTES + b'"}',
    "deep": b"[" * 100_000 + b"]" * 100_000,
    "a list": b"[]",
    "NaN": b'{"world": NaN, "tools": {}}',
    "duplicate keys": b'{"world": "a", "world": "b", "tools": {}}',
    "tools a list": json.dumps(_with(("tools",), [])).encode(),
    "unknown key": json.dumps({**_valid(), "extra": 1}).encode(),
    "bad kind": json.dumps(_with(("tools", "t", "kind"), "delete")).encode(),
    "bad type": json.dumps(_with(("tools", "t", "args", "a", "type"), "date")).encode(),
    "required not bool": json.dumps(_with(("tools", "t", "args", "a", "required"), "yes")).encode(),
    "enum not a list": json.dumps(_with(("tools", "t", "args", "a", "enum"), "abc")).encode(),
    "enum of numbers": json.dumps(_with(("tools", "t", "args", "a", "enum"), [1, 2])).encode(),
    "errors not codes": json.dumps(_with(("tools", "t", "errors"), ["\x1b]52;c;evil\x07"])).encode(),
    "hostile tool name": json.dumps({"world": "w", "tools": {"\x1b[2J\u202eevil": {}}}).encode(),
    "missing tools": b'{"world": "w"}',
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_surface_file_is_one_clean_error(case: str, tmp_path: Path) -> None:
    path = tmp_path / "surface.json"
    path.write_bytes(HOSTILE[case])
    with pytest.raises(SurfaceError) as caught:
        load_surface(path)
    message = str(caught.value)
    assert "\n" not in message and len(message) < 400 and message.isprintable(), message
    with pytest.raises(SurfaceError):  # the command refuses it before building anything
        _parity(["--world", "helpdesk", "--surface", str(path)])


def test_a_missing_or_folder_surface_file_is_a_clean_error(tmp_path: Path) -> None:
    with pytest.raises(SurfaceError, match="no surface file"):
        load_surface(tmp_path / "absent.json")
    with pytest.raises(SurfaceError, match="is a folder"):
        load_surface(tmp_path)
    with pytest.raises(MirrorworldError, match="not both"):
        _parity(["--world", "helpdesk", "--surface", "x", "--against-world", "helpdesk_v1"])
    with pytest.raises(MirrorworldError, match="has no real twin"):
        _parity(["--world", "helpdesk"])


def test_the_report_prints_names_inert_within_80_columns() -> None:
    evil = Mismatch(
        "argument", "\x1b]0;owned\x07tool_" + "x" * 90, "\u202eevil\x9b", "\x1b[2J", None, True, "[bold]r\x1b"
    )
    lines = render([evil], title="parity: \x1b[31mred", tools=1)
    assert all(line.isprintable() for line in lines)
    assert max(len(line) for line in lines) <= 80
    assert "\\x1b" in lines[0] and lines[-1] == "1 tools compared: 1 differences, 1 declared, 0 unexplained"


def test_through_mirrorworld_main_when_wired(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from mirrorworld import cli

    _parser, handlers = cli._parser()
    if "parity" not in handlers:
        pytest.skip("the parity command is not wired into mirrorworld.cli yet")
    path = tmp_path / "surface.json"
    path.write_bytes(b"[" * 10)
    assert cli.main(["parity", "--world", "helpdesk", "--surface", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("mirrorworld: error: surface file") and err.count("\n") == 1
