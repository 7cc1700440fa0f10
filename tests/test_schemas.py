"""Tool schemas in every client's form, and the worlds' own gold calls validated against them.

A gold call is what the oracle sends and what a fine-tuning set built from
oracle runs teaches; if it disagreed with the schema (money as ``"35.99"``
where the schema says ``number``), a validating or strict-mode client could
not make it and a model would learn the wrong form. Every gold call of every
registered world, over several seeds of every family, must validate against
the plain schema and, in the form a strict-mode client sends it, against the
strict one, and the world must accept the strict form with the same effect.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import jsonschema
import pytest

from mirrorworld.core.registry import default
from mirrorworld.core.schemas import FORMS, strict_arguments, strict_parameters, tool_schema, tool_schemas
from mirrorworld.core.tools import json_number
from mirrorworld.errors import ToolError, WorldError

SEEDS = range(4)


def _gold_calls(name: str) -> list[tuple[str, int, Any]]:
    world = default.get(name)
    out = []
    for family in world.families:
        for seed in SEEDS:
            task = world.task(family.name, seed)
            out += [(family.name, seed, call) for call in task.gold]
    return out


@pytest.mark.parametrize("name", default.names())
def test_every_gold_call_validates_against_its_schema(name: str) -> None:
    world = default.get(name)
    calls = _gold_calls(name)
    assert calls, f"{name} has no gold calls"
    checked = 0
    for family, seed, call in calls:
        spec = world.tools_by_name[call.tool]
        where = f"{name}/{family}#{seed} {call.tool}({json.dumps(call.args)[:200]})"
        # A gold call's arguments are plain JSON: what a client sends and a trajectory stores.
        assert json.loads(json.dumps(call.args)) == call.args, where
        plain = spec.schema("openai")["function"]["parameters"]
        strict = spec.schema("openai-strict")["function"]["parameters"]
        try:
            jsonschema.validate(call.args, plain, cls=jsonschema.Draft202012Validator)
            jsonschema.validate(strict_arguments(spec, call.args), strict, cls=jsonschema.Draft202012Validator)
        except jsonschema.ValidationError as err:
            pytest.fail(f"{where}: {err.message}")
        # The strict form (every optional argument present, as null) is the same call to the world.
        assert spec.validate(strict_arguments(spec, call.args)) == spec.validate(call.args), where
        checked += 1
    assert checked == len(calls)


@pytest.mark.parametrize("name", default.names())
def test_money_is_a_number_in_schema_and_gold(name: str) -> None:
    world = default.get(name)
    money = {
        (t.name, p.name)
        for t in world.tools
        for p in t.params
        if t.parameters_schema["properties"][p.name].get("type") == "number"
    }
    for _, _, call in _gold_calls(name):
        for arg, value in call.args.items():
            if (call.tool, arg) in money:
                assert isinstance(value, (int, float)) and not isinstance(value, bool), (call.tool, arg, value)


@pytest.mark.parametrize("name", default.names())
def test_every_form_holds_the_same_tools(name: str) -> None:
    world = default.get(name)
    names = [t.name for t in world.tools]
    assert [t["function"]["name"] for t in tool_schemas(world.tools, "openai")] == names
    assert [t["function"]["name"] for t in tool_schemas(world.tools, "openai-strict")] == names
    assert [t["name"] for t in tool_schemas(world.tools, "anthropic")] == names
    assert [t["name"] for t in tool_schemas(world.tools, "mcp")] == names
    for spec in world.tools:
        params = spec.parameters_schema
        assert tool_schema(spec, "anthropic")["input_schema"] == params
        assert tool_schema(spec, "mcp")["inputSchema"] == params
        assert tool_schema(spec, "anthropic")["description"] == spec.description
        jsonschema.Draft202012Validator.check_schema(params)
        jsonschema.Draft202012Validator.check_schema(tool_schema(spec, "openai-strict")["function"]["parameters"])


def _walk(schema: dict[str, Any]) -> list[dict[str, Any]]:
    out = [schema]
    for sub in schema.get("properties", {}).values():
        out += _walk(sub)
    if isinstance(schema.get("items"), dict):
        out += _walk(schema["items"])
    return out


@pytest.mark.parametrize("name", default.names())
def test_strict_schemas_follow_strict_mode_rules(name: str) -> None:
    for spec in default.get(name).tools:
        tool = tool_schema(spec, "openai-strict")["function"]
        assert tool["strict"] is True
        for node in _walk(tool["parameters"]):
            if node.get("type") == "object" or "properties" in node:
                assert node["additionalProperties"] is False
                assert sorted(node["required"]) == sorted(node["properties"])
            assert "maxLength" not in node and "default" not in node


def test_strict_makes_optional_arguments_nullable() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "integer"},
            "b": {"type": "string", "enum": ["x", "y"], "maxLength": 5},
            "c": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "number"}}}},
        },
        "required": ["a"],
    }
    strict = strict_parameters(schema)
    assert strict["required"] == ["a", "b", "c"]
    assert strict["properties"]["a"] == {"type": "integer"}
    assert strict["properties"]["b"] == {"type": ["string", "null"], "enum": ["x", "y", None]}
    assert strict["properties"]["c"]["type"] == ["array", "null"]
    assert strict["properties"]["c"]["items"]["additionalProperties"] is False
    assert strict["properties"]["c"]["items"]["properties"]["k"] == {"type": ["number", "null"]}
    jsonschema.validate({"a": 1, "b": None, "c": None}, strict)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"a": 1}, strict)  # strict mode sends every argument


def test_null_for_an_optional_argument_is_the_absent_argument() -> None:
    spec = default.get("helpdesk").tools_by_name["issue_refund"]
    args = {"order_id": 1, "line_id": 2, "amount": 10.5, "reason": "damaged"}
    assert not next(p for p in spec.params if p.name == "approval_id").required
    assert spec.validate({**args, "approval_id": None}) == spec.validate(args)
    with pytest.raises(ToolError, match="needs argument 'amount'"):
        spec.validate({**args, "amount": None})


def test_unknown_form_is_refused() -> None:
    spec = default.get("helpdesk").tools[0]
    with pytest.raises(ValueError, match="unknown schema form"):
        tool_schema(spec, "yaml")  # type: ignore[arg-type]
    assert FORMS == ("openai", "openai-strict", "anthropic", "mcp")


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("35.99", 35.99),
        ("1250.00", 1250.0),
        ("12", 12),
        ("0.01", 0.01),
        ("-7.5", -7.5),
        ("999999999999.99", 999999999999.99),
    ],
)
def test_json_number_is_exact(text: str, number: float) -> None:
    value = json_number(text)
    assert value == number and type(value) is type(number)
    assert Decimal(repr(value)) == Decimal(text)


@pytest.mark.parametrize("bad", ["abc", "1e400", "NaN", "1000000000000", "0.1234567890123456789"])
def test_json_number_refuses_what_no_float_carries(bad: str) -> None:
    with pytest.raises(WorldError):
        json_number(bad)


def test_a_float_amount_arrives_as_the_decimal_written() -> None:
    world = default.get("helpdesk")
    spec = world.tools_by_name["issue_refund"]
    args = {"order_id": 1, "line_id": 1, "amount": 35.99, "reason": "damaged"}
    assert spec.validate(args)["amount"] == Decimal("35.99")
    assert spec.validate({**args, "amount": "35.99"})["amount"] == Decimal("35.99")
    assert spec.validate({**args, "amount": 0.1 + 0.2})["amount"] == Decimal(repr(0.1 + 0.2))
