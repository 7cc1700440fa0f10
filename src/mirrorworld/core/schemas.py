"""A tool's schema in every form a client reads, all from its one ``@tool`` declaration.

:class:`~mirrorworld.core.tools.ToolSpec` holds one JSON schema of a tool's
arguments (``parameters_schema``); every form below is a function of it and of
the tool's name and description, so no form can drift from another:

===================  ==========================================================================
form                 shape
===================  ==========================================================================
``openai``           ``{"type": "function", "function": {name, description, parameters}}``
``openai-strict``    the same with ``"strict": true`` and the parameters made strict (below)
``anthropic``        ``{name, description, input_schema}``
``mcp``              ``{name, description, inputSchema}`` (an MCP ``Tool``)
===================  ==========================================================================

**Strict mode** (OpenAI structured outputs) constrains decoding to the schema,
and accepts only a subset of JSON Schema. :func:`strict_parameters` rewrites
the plain schema into that subset, at every object level:

* every property is listed in ``required``; an optional argument becomes
  nullable instead (``"type": ["integer", "null"]``, and ``null`` joins an
  ``enum``), so a strict client sends ``null`` where a plain one leaves the
  argument out. :meth:`ToolSpec.validate <mirrorworld.core.tools.ToolSpec.validate>`
  treats an explicit ``null`` for an optional argument exactly as an absent
  one, for every client, so both calls have the same result and effect;
* ``additionalProperties`` is ``false``;
* keywords strict mode does not support are dropped (``maxLength``: the world
  still refuses a string longer than :data:`~mirrorworld.core.tools.MAX_STRING`,
  as an ``invalid_arguments`` result). What is kept is :data:`STRICT_KEYWORDS`.

A strict schema is stricter than the world: the world also accepts harmless
variants (``"25.00"`` for a number, any case of an enum value) that a strict
client can never produce, so every call a strict client makes is one the
world accepts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, get_args

if TYPE_CHECKING:
    from mirrorworld.core.tools import ToolSpec

__all__ = [
    "FORMS",
    "STRICT_KEYWORDS",
    "SchemaForm",
    "anthropic_tool",
    "mcp_tool",
    "openai_strict_tool",
    "openai_tool",
    "strict_arguments",
    "strict_parameters",
    "tool_schema",
    "tool_schemas",
]

SchemaForm = Literal["openai", "openai-strict", "anthropic", "mcp"]
FORMS: tuple[SchemaForm, ...] = get_args(SchemaForm)
"""Every form, in the order ``mirrorworld tools --format`` lists them."""

STRICT_KEYWORDS = frozenset(
    {
        "type",
        "description",
        "enum",
        "const",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    }
)
"""The JSON Schema keywords a strict-mode schema keeps (the ones OpenAI's strict mode supports)."""


def openai_tool(spec: ToolSpec) -> dict[str, Any]:
    """The tool as an OpenAI function tool (chat completions ``tools`` entry)."""
    return {
        "type": "function",
        "function": {"name": spec.name, "description": spec.description, "parameters": spec.parameters_schema},
    }


def openai_strict_tool(spec: ToolSpec) -> dict[str, Any]:
    """The tool as an OpenAI strict-mode function tool (see the module docstring)."""
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": strict_parameters(spec.parameters_schema),
            "strict": True,
        },
    }


def anthropic_tool(spec: ToolSpec) -> dict[str, Any]:
    """The tool as an Anthropic Messages API tool."""
    return {"name": spec.name, "description": spec.description, "input_schema": spec.parameters_schema}


def mcp_tool(spec: ToolSpec) -> dict[str, Any]:
    """The tool as an MCP ``Tool`` (``tools/list``)."""
    return {"name": spec.name, "description": spec.description, "inputSchema": spec.parameters_schema}


_BUILDERS = {"openai": openai_tool, "openai-strict": openai_strict_tool, "anthropic": anthropic_tool, "mcp": mcp_tool}


def tool_schema(spec: ToolSpec, form: SchemaForm) -> dict[str, Any]:
    """The tool in ``form`` (one of :data:`FORMS`)."""
    try:
        build = _BUILDERS[form]
    except KeyError:
        raise ValueError(f"unknown schema form {form!r} (known: {', '.join(FORMS)})") from None
    return build(spec)


def tool_schemas(tools: Iterable[ToolSpec], form: SchemaForm) -> list[dict[str, Any]]:
    """Every tool of ``tools`` in ``form``, in order (a world's ``tools``: its action order)."""
    return [tool_schema(t, form) for t in tools]


def strict_parameters(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` (an object schema) in the subset strict mode accepts (see the module docstring)."""
    return _strict(schema, nullable=False)


def _strict(schema: Mapping[str, Any], *, nullable: bool) -> dict[str, Any]:
    out = {k: v for k, v in schema.items() if k in STRICT_KEYWORDS}
    if "properties" in schema or schema.get("type") == "object":
        props: Mapping[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", ()))
        out["properties"] = {name: _strict(sub, nullable=name not in required) for name, sub in props.items()}
        out["required"] = list(props)
        out["additionalProperties"] = False
    if "items" in schema and isinstance(schema["items"], Mapping):
        out["items"] = _strict(schema["items"], nullable=False)
    if nullable:
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        elif isinstance(kind, list) and "null" not in kind:
            out["type"] = [*kind, "null"]
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
    return out


def strict_arguments(spec: ToolSpec, args: Mapping[str, Any]) -> dict[str, Any]:
    """``args`` as a strict-mode client sends them: every argument present, an absent optional one as ``null``."""
    return {p.name: args.get(p.name) for p in spec.params} | {k: v for k, v in args.items() if k not in spec.names}
