"""Declaring tools: schemas derived from signatures and docstrings, and the
coercion of agent arguments (harmless variants accepted, everything else refused)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Literal

import pytest

from mirrorworld.core.session import ToolContext
from mirrorworld.core.tools import MAX_LIST, MAX_STRING, ToolSpec, tool
from mirrorworld.errors import ToolError, WorldError
from mirrorworld.worlds.helpdesk import HelpdeskWorld


@tool("write")
def sample(
    ctx: ToolContext,
    ticket_id: int,
    amount: Decimal,
    note: str,
    urgent: bool,
    priority: Literal["low", "high"],
    tags: list[str],
    agent_id: int | None = None,
    channel: Literal["email", "chat"] | None = "email",
) -> dict[str, Any]:
    """Do several things to a ticket at once.

    A second paragraph of the description,
    on two lines.

    Args:
        ticket_id: The ticket number.
        amount (Decimal): An amount in dollars.
        note: A note that goes on
            for two lines.
        urgent: Whether it is urgent.
        priority: low or high.
        tags: Tags to add.
        agent_id: An agent to assign.
        channel: How the customer reached us.
    """
    return {}


def test_schema_types_required_and_descriptions() -> None:
    schema = sample.openai_schema()
    assert schema["type"] == "function"
    fn = schema["function"]
    assert fn["name"] == "sample"
    assert (
        fn["description"]
        == "Do several things to a ticket at once. A second paragraph of the description, on two lines."
    )
    params = fn["parameters"]
    assert params["type"] == "object" and params["additionalProperties"] is False
    assert params["required"] == ["ticket_id", "amount", "note", "urgent", "priority", "tags"]
    props = params["properties"]
    assert list(props) == ["ticket_id", "amount", "note", "urgent", "priority", "tags", "agent_id", "channel"]
    assert props["ticket_id"] == {"type": "integer", "description": "The ticket number."}
    assert props["amount"] == {"type": "number", "description": "An amount in dollars."}
    assert props["note"] == {
        "type": "string",
        "maxLength": MAX_STRING,
        "description": "A note that goes on for two lines.",
    }
    assert props["urgent"] == {"type": "boolean", "description": "Whether it is urgent."}
    assert props["priority"] == {"type": "string", "enum": ["low", "high"], "description": "low or high."}
    assert props["tags"] == {
        "type": "array",
        "items": {"type": "string"},
        "maxItems": MAX_LIST,
        "description": "Tags to add.",
    }
    assert props["agent_id"] == {"type": "integer", "description": "An agent to assign."}
    assert props["channel"]["enum"] == ["email", "chat"]


def test_sections_after_args_stay_out_of_the_description() -> None:
    @tool("read")
    def documented(ctx: ToolContext, a: int) -> dict[str, Any]:
        """Look something up.

        Args:
            a: A number.

        Returns:
            The thing looked up.

        Raises:
            ToolError: When there is no such thing.
        """
        return {}

    assert documented.description == "Look something up."
    assert documented.openai_schema()["function"]["parameters"]["properties"]["a"]["description"] == "A number."


def test_every_helpdesk_tool_has_a_described_schema(helpdesk: HelpdeskWorld) -> None:
    assert len(helpdesk.tools) == len({t.name for t in helpdesk.tools})
    assert [t.name for t in helpdesk.tools if t.kind == "terminal"] == ["respond"]
    for spec in helpdesk.tools:
        fn = spec.openai_schema()["function"]
        assert fn["description"], spec.name
        props = fn["parameters"]["properties"]
        assert set(fn["parameters"]["required"]) <= set(props)
        for name, prop in props.items():
            assert prop.get("description"), f"{spec.name}.{name}"


def _ok(spec: ToolSpec, **args: Any) -> dict[str, Any]:
    return spec.validate(args)


BASE: dict[str, Any] = {"ticket_id": 1, "amount": "1", "note": "n", "urgent": False, "priority": "low", "tags": []}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("25.00", Decimal("25.00")),
        (25, Decimal("25")),
        (25.0, Decimal("25.0")),
        ("$25", Decimal("25")),
        (" $ 25.5 ", Decimal("25.5")),
        ("25 dollars", Decimal("25")),
        ("25 USD", Decimal("25")),
        ("USD 1,234.50", Decimal("1234.50")),
        (".5", Decimal(".5")),
        (0.1, Decimal("0.1")),  # the float's shortest repr, not its binary expansion
    ],
)
def test_decimal_accepts_harmless_variants(raw: Any, expected: Decimal) -> None:
    got = sample.validate({**BASE, "amount": raw})["amount"]
    assert isinstance(got, Decimal) and got == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("42", 42), (42, 42), (42.0, 42), (" 42 ", 42), ("#42", 42), ("# 42", 42), ("-3", -3), ("+7", 7)],
)
def test_int_accepts_harmless_variants(raw: Any, expected: int) -> None:
    got = sample.validate({**BASE, "ticket_id": raw})["ticket_id"]
    assert type(got) is int and got == expected


@pytest.mark.parametrize("raw", ["HIGH", " high ", "High\n", "\thigh"])
def test_enum_ignores_case_and_whitespace(raw: str) -> None:
    assert sample.validate({**BASE, "priority": raw})["priority"] == "high"


@pytest.mark.parametrize(("raw", "expected"), [(True, True), ("true", True), (" FALSE ", False)])
def test_bool_accepts_true_false_text(raw: Any, expected: bool) -> None:
    assert sample.validate({**BASE, "urgent": raw})["urgent"] is expected


def test_optional_arguments_take_their_defaults() -> None:
    out = sample.validate(BASE)
    assert out["agent_id"] is None and out["channel"] == "email"
    assert sample.validate({**BASE, "agent_id": None, "channel": None})["channel"] == "email"


@pytest.mark.parametrize(
    ("name", "raw", "why"),
    [
        ("ticket_id", True, "boolean"),
        ("ticket_id", False, "boolean"),
        ("ticket_id", 4.5, "expected an integer"),
        ("ticket_id", "4.5", "expected an integer"),
        ("ticket_id", "forty-two", "expected an integer"),
        ("ticket_id", 10**16, "out of range"),
        ("ticket_id", "9" * 16, "expected an integer"),
        ("ticket_id", [1], "expected an integer"),
        ("ticket_id", float("nan"), "expected an integer"),
        ("amount", True, "boolean"),
        ("amount", float("inf"), "finite"),
        ("amount", float("nan"), "finite"),
        ("amount", "1e5", "expected a number"),
        ("amount", "25 euros", "expected a number"),
        ("amount", "1" * 13, "out of range"),
        ("amount", "1" * 41, "expected a number"),
        ("amount", {"value": 25}, "expected a number"),
        ("note", 5, "expected a string"),
        ("note", ["a"], "expected a string"),
        ("note", "x" * (MAX_STRING + 1), f"longer than {MAX_STRING}"),
        ("urgent", 1, "true or false"),
        ("urgent", "yes", "true or false"),
        ("priority", "medium", "expected one of low, high"),
        ("priority", 1, "expected one of"),
        ("priority", "low" + " " * 300, "expected one of"),
        ("tags", "vip", "expected a list"),
        ("tags", [1], "list of strings"),
        ("tags", ["x" * 201], "at most 200"),
        ("tags", ["t"] * (MAX_LIST + 1), f"longer than {MAX_LIST}"),
    ],
)
def test_bad_values_are_refused(name: str, raw: Any, why: str) -> None:
    with pytest.raises(ToolError, match=why) as info:
        sample.validate({**BASE, name: raw})
    assert info.value.code == "invalid_arguments"
    assert f"'{name}'" in info.value.message


def test_unknown_and_missing_arguments_are_refused() -> None:
    with pytest.raises(ToolError, match="has no argument 'ticket'"):
        sample.validate({**BASE, "ticket": 1})
    with pytest.raises(ToolError, match="needs argument 'note'"):
        sample.validate({k: v for k, v in BASE.items() if k != "note"})
    with pytest.raises(ToolError, match="needs argument 'note'"):
        sample.validate({**BASE, "note": None})
    with pytest.raises(ToolError, match="has no argument '" + "k" * 20):
        sample.validate({**BASE, "k" * 10_000: 1})  # the name is cut in the message


def test_error_messages_stay_short_for_huge_values() -> None:
    with pytest.raises(ToolError) as info:
        sample.validate({**BASE, "ticket_id": "x" * 100_000})
    assert len(info.value.message) < 200


def test_decimal_accepts_a_decimal() -> None:
    assert sample.validate({**BASE, "amount": Decimal("25.00")})["amount"] == Decimal("25.00")


def test_harmless_variants_reach_the_tool_identically(helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("refund_damaged", 1)
    oid = task.gold[0].args["order_id"]
    with helpdesk.session(task) as s:
        results = [s.call("get_order", {"order_id": v}).content() for v in (oid, str(oid), f"#{oid}", float(oid))]
        assert len(set(results)) == 1 and '"error"' not in results[0]


# -- declaring tools wrongly is a WorldError ---------------------------------------


def test_a_tool_needs_a_docstring() -> None:
    def nodoc(ctx: ToolContext) -> None:
        pass

    with pytest.raises(WorldError, match="needs a docstring"):
        tool("read")(nodoc)


def test_every_parameter_must_be_documented() -> None:
    def half(ctx: ToolContext, a: int, b: int) -> None:
        """Half documented.

        Args:
            a: The first.
        """

    with pytest.raises(WorldError, match="parameter b is not documented"):
        tool("read")(half)


def test_first_parameter_must_be_ctx() -> None:
    def noctx(a: int) -> None:
        """No context.

        Args:
            a: A number.
        """

    with pytest.raises(WorldError, match="first parameter must be ctx"):
        tool("read")(noctx)


@pytest.mark.parametrize("annotation", [float, dict, "list[int]", "int | str", "Literal[1, 2]"])
def test_unsupported_annotations_are_refused(annotation: Any) -> None:
    def odd(ctx: ToolContext, a: Any) -> None:
        """Odd.

        Args:
            a: Something.
        """

    odd.__annotations__["a"] = eval(annotation) if isinstance(annotation, str) else annotation
    with pytest.raises(WorldError, match="parameter a"):
        tool("read")(odd)


def test_optional_parameters_need_a_default() -> None:
    def nodefault(ctx: ToolContext, a: int | None) -> None:
        """No default.

        Args:
            a: A number.
        """

    with pytest.raises(WorldError, match="needs a default"):
        tool("read")(nodefault)


def test_variadic_parameters_are_refused() -> None:
    def variadic(ctx: ToolContext, *a: int) -> None:
        """Variadic.

        Args:
            a: Numbers.
        """

    with pytest.raises(WorldError, match="must be plain"):
        tool("read")(variadic)
