"""Declaring a tool once.

A tool is a typed Python function whose first parameter is the
:class:`~mirrorworld.core.session.ToolContext`. The ``@tool`` decorator reads its
signature and docstring once and derives everything else from them:

* argument validation and coercion (``ToolSpec.validate``),
* the JSON schema of its arguments (``ToolSpec.parameters_schema``) and, from
  it, every form a client reads (``ToolSpec.schema``: OpenAI, OpenAI strict
  mode, Anthropic, MCP; see :mod:`mirrorworld.core.schemas`),
* the tool's place in a world's Gymnasium action space (its index in
  ``World.tools``),
* the documentation shown by ``mirrorworld tools``.

Supported parameter annotations: ``int``, ``str``, ``bool``, ``Decimal`` (money
and other exact numbers), ``Literal[...]`` of strings, ``list[str]`` and any of
these ``| None``. ``Annotated`` adds what a parameter *means*, for audits and
documentation: ``Annotated[int, Ref("orders")]`` says the value is the id of a
row of ``orders``; ``Annotated[str, FREE_TEXT]`` marks prose (a reply body)
whose exact wording no grader compares. Coercion accepts the harmless variants an agent produces —
``25`` for ``25.0``, ``"25.00"`` or ``"$25"`` for a number, ``"42"`` for an
integer id, any case and surrounding whitespace for an enum value — and rejects
everything else with ``ToolError("invalid_arguments", …)``. An explicit
``null`` for an optional argument means the argument is absent (what a
strict-mode client sends for an argument it leaves out).

**Money is a JSON number.** A ``Decimal`` parameter's schema says
``"type": "number"``, and gold solutions send numbers (:func:`json_number`),
never strings: a schema-validating or strict-mode client cannot send
``"35.99"`` for a number, and a model fine-tuned on gold calls should learn
the form the schema states. Tool results already give money as numbers. The
value stays exact: a float is read through its shortest round-trip text
(``repr(35.99) == "35.99"``), so any amount of at most 15 significant digits
(every amount in range, :data:`MAX_NUMBER` with cents, has at most 14) arrives
as the ``Decimal`` the agent wrote; a world then rounds or refuses it by its
own rules (``to_cents`` refuses a third decimal). A number is also what a
drifted world's ``RetypeArgument(..., "cents")`` turns into an integer
number of cents, a type change a validating client sees. Strings stay
accepted as a harmless variant, for agents that quote numbers anyway.

A tool is ``read`` (never changes state), ``write`` (runs in its own savepoint,
committed whole or rolled back whole) or ``terminal`` (ends the episode).
"""

from __future__ import annotations

import inspect
import math
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from mirrorworld.core.schemas import SchemaForm, tool_schema
from mirrorworld.errors import ToolError, WorldError

__all__ = [
    "FREE_TEXT",
    "MAX_LIST",
    "MAX_NUMBER",
    "MAX_STRING",
    "Param",
    "Ref",
    "Surface",
    "ToolKind",
    "ToolSpec",
    "declare_param",
    "json_number",
    "show_input",
    "tool",
]

ToolKind = Literal["read", "write", "terminal"]

MAX_STRING = 4000
"""Longest string an agent may pass in one argument."""
MAX_LIST = 25
"""Longest list an agent may pass in one argument."""

_INT_RE = re.compile(r"^\s*#?\s*([+-]?\d{1,15})\s*$")
_NUM_RE = re.compile(
    r"^\s*(?:USD|\$)?\s*([+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[+-]?\.\d+)\s*(?:USD|dollars?)?\s*$", re.I
)


@dataclass(frozen=True)
class Ref:
    """Marks an integer parameter as the id of a row of ``table``."""

    table: str


@dataclass(frozen=True)
class _FreeText:
    """Marks a string parameter as free prose."""


FREE_TEXT = _FreeText()


@dataclass(frozen=True)
class Param:
    """One parameter of a tool: its JSON schema and how agent input is coerced."""

    name: str
    schema: dict[str, Any]
    required: bool
    default: Any
    coerce: Callable[[Any], Any]
    ref: str | None = None
    """The table whose row id this parameter holds, if any."""
    free_text: bool = False
    """Whether the value is prose rather than data."""


@dataclass(frozen=True)
class Surface:
    """How a tool as an agent sees it maps onto the tool that runs (a drifted world's API).

    A world derived from another (:mod:`mirrorworld.drift`) may present a tool
    under another name, with other arguments or other error codes, while the
    base world's tool does the work. ``inner`` is that tool; ``inward`` turns
    the presented tool's validated arguments into ``inner``'s (raising
    ``ToolError`` for a value the presented surface accepts but cannot map);
    ``errors`` renames the error codes ``inner`` raises. The session records
    the inner call (so rules, guards and claims keep reading the base world's
    names) and what the agent called beside it (``Event.presented``).
    """

    inner: ToolSpec
    inward: Callable[[dict[str, Any]], dict[str, Any]] = field(repr=False)
    errors: Mapping[str, str] = field(default_factory=dict)
    rewrite: Callable[[str], str] | None = field(default=None, repr=False)
    """Rewrites a refusal's message in the presented names (a renamed tool or argument); None: as is."""

    def error(self, err: ToolError) -> ToolError:
        """``err`` as the presented surface reports it: its code renamed, its message in the presented names."""
        code = self.errors.get(err.code, err.code)
        message = self.rewrite(err.message) if self.rewrite is not None else err.message
        if code == err.code and message == err.message:
            return err
        return ToolError(code, message, rule=err.rule)


@dataclass(frozen=True)
class ToolSpec:
    """Everything known about one tool, derived from its declaration."""

    name: str
    description: str
    kind: ToolKind
    params: tuple[Param, ...]
    func: Callable[..., Any] = field(repr=False)
    names: frozenset[str] = field(init=False, repr=False, compare=False)
    """The parameter names (derived)."""
    surface: Surface | None = field(default=None, repr=False, compare=False)
    """Set on a tool presented over another one (see :class:`Surface`); None for a tool that runs itself."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", frozenset(p.name for p in self.params))

    @property
    def parameters_schema(self) -> dict[str, Any]:
        props = {p.name: p.schema for p in self.params}
        required = [p.name for p in self.params if p.required]
        return {
            "type": "object",
            "properties": props,
            "required": required,
            "additionalProperties": False,
        }

    def openai_schema(self) -> dict[str, Any]:
        """The tool in OpenAI function-calling format."""
        return tool_schema(self, "openai")

    def schema(self, form: SchemaForm) -> dict[str, Any]:
        """The tool in ``form``: openai, openai-strict, anthropic or mcp (:mod:`~mirrorworld.core.schemas`)."""
        return tool_schema(self, form)

    def validate(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Coerce agent arguments to the declared types.

        Every declared argument is in the result: an absent optional one, or
        one sent as ``null``, holds its default (the two are the same call,
        whichever client made it); a required one sent as ``null`` is missing.
        Raises ``ToolError("invalid_arguments")`` naming the first bad argument.
        """
        if not self.names.issuperset(args):
            key = next(k for k in args if k not in self.names)
            raise ToolError("invalid_arguments", f"{self.name} has no argument {_show(key)}")
        out: dict[str, Any] = {}
        for p in self.params:
            value = args.get(p.name)
            if value is None:
                if p.required:
                    raise ToolError("invalid_arguments", f"{self.name} needs argument '{p.name}'")
                out[p.name] = p.default
                continue
            try:
                out[p.name] = p.coerce(value)
            except _Bad as bad:
                raise ToolError("invalid_arguments", f"argument '{p.name}' of {self.name}: {bad}") from None
        return out


def show_input(value: Any) -> str:
    """Agent input rendered for an error message: short, safe, never raising (a huge integer, any object)."""
    return _show(value)


class _Bad(Exception):
    """Raised by a coercer; becomes an ``invalid_arguments`` error."""


_SHOWN_INT = 10**57
"""Integers at least this large are described, not printed (Python refuses to print one of more than 4,300 digits)."""


def _show(value: Any) -> str:
    """A short, safe rendering of agent input for an error message (never recursive, never raises).

    Containers are described by their size, an integer too long to print by its
    number of digits, anything not JSON-like by its type.
    """
    if isinstance(value, (dict, list, tuple, set)):
        return f"a {type(value).__name__} of {len(value)} items"
    if isinstance(value, int) and not isinstance(value, bool) and not -_SHOWN_INT < value < _SHOWN_INT:
        return f"an integer of about {int(abs(value).bit_length() * math.log10(2)) + 1} digits"
    if isinstance(value, str):
        value = value.encode("utf-8", "backslashreplace").decode("utf-8")
    text = repr(value) if isinstance(value, (str, int, float, bool, type(None), Decimal)) else type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def _coerce_int(value: Any) -> int:
    if type(value) is int and -(10**15) <= value <= 10**15:
        return value
    if isinstance(value, bool):
        raise _Bad("expected an integer, got a boolean")
    if isinstance(value, int):
        if abs(value) > 10**15:
            raise _Bad("integer out of range")
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return _coerce_int(int(value))
    if isinstance(value, str):
        m = _INT_RE.match(value)
        if m:
            return int(m.group(1))
    raise _Bad(f"expected an integer, got {_show(value)}")


MAX_NUMBER = 10**12
"""A ``Decimal`` argument's magnitude is below this."""
_DECIMAL_LIMIT = Decimal(MAX_NUMBER)


def json_number(value: Decimal | str | int) -> int | float:
    """An exact decimal as the JSON number a gold call sends for a ``Decimal`` parameter.

    ``"35.99"`` is ``35.99``, ``"1250.00"`` is ``1250.0``, ``"12"`` is ``12``:
    an integral value written without decimals stays an integer, any other a
    float whose shortest text (``repr``) is the same number, which is what
    coercion reads back (see the module docstring). A value no float carries
    exactly (more than 15 significant digits) or out of range is a world's bug,
    raised as :class:`~mirrorworld.errors.WorldError`.
    """
    try:
        dec = value if isinstance(value, Decimal) else Decimal(str(value).strip())
    except InvalidOperation:
        raise WorldError(f"{str(value)[:40]!r} is not a number") from None
    if not dec.is_finite() or abs(dec) >= _DECIMAL_LIMIT:
        raise WorldError(f"{str(value)[:40]!r} is not a finite number in range")
    exponent = dec.as_tuple().exponent
    if isinstance(exponent, int) and exponent >= 0:
        return int(dec)
    number = float(dec)
    if Decimal(repr(number)) != dec:
        raise WorldError(f"{dec} has no exact JSON number form (more than 15 significant digits)")
    return number


def _coerce_decimal(value: Any) -> Decimal:
    if type(value) is int and -(10**12) < value < 10**12:
        return Decimal(value)
    if isinstance(value, bool):
        raise _Bad("expected a number, got a boolean")
    if isinstance(value, Decimal):
        if not value.is_finite() or abs(value) >= _DECIMAL_LIMIT:
            raise _Bad("expected a finite number in range")
        return value
    if isinstance(value, int):  # never through ``str``: an integer may be too long for Python to print
        if -(10**12) < value < 10**12:
            return Decimal(int(value))
        raise _Bad("number out of range")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Bad("expected a finite number")
        dec = Decimal(repr(value))  # the shortest text that reads back as this float: 35.99, 1e-05
        if abs(dec) < _DECIMAL_LIMIT:
            return dec
        raise _Bad("number out of range")
    if isinstance(value, str):
        m = _NUM_RE.match(value) if len(value) <= 40 else None
        if m:
            try:
                dec = Decimal(m.group(1).replace(",", ""))
            except InvalidOperation:
                raise _Bad(f"expected a number, got {_show(value)}") from None
            if abs(dec) < _DECIMAL_LIMIT:
                return dec
            raise _Bad("number out of range")
    raise _Bad(f"expected a number, got {_show(value)}")


def _valid_text(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _Bad("string is not valid Unicode text (lone surrogate)") from None
    return value


def _coerce_str(value: Any) -> str:
    if type(value) is str and value.isascii() and len(value) <= MAX_STRING:
        return value  # ASCII holds no surrogate
    if not isinstance(value, str):
        raise _Bad(f"expected a string, got {type(value).__name__}")
    if len(value) > MAX_STRING:
        raise _Bad(f"string longer than {MAX_STRING} characters")
    return _valid_text(value)


def _coerce_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise _Bad(f"expected true or false, got {_show(value)}")


def _enum_coercer(choices: tuple[str, ...]) -> Callable[[Any], str]:
    lookup = {c.lower(): c for c in choices}

    def coerce(value: Any) -> str:
        if isinstance(value, str) and len(value) <= 200:
            hit = lookup.get(value.strip().lower())
            if hit is not None:
                return hit
        raise _Bad(f"expected one of {', '.join(choices)}, got {_show(value)}")

    return coerce


def _coerce_str_list(value: Any) -> list[str]:
    if not isinstance(value, list):
        raise _Bad(f"expected a list of strings, got {type(value).__name__}")
    if len(value) > MAX_LIST:
        raise _Bad(f"list longer than {MAX_LIST} items")
    out = []
    for item in value:
        if not isinstance(item, str) or len(item) > 200:
            raise _Bad("expected a list of strings of at most 200 characters")
        out.append(_valid_text(item))
    return out


def _unwrap_annotated(annotation: Any) -> tuple[Any, tuple[Any, ...]]:
    if get_origin(annotation) is Annotated:
        base, *extras = get_args(annotation)
        return base, tuple(extras)
    return annotation, ()


def _param_for(name: str, annotation: Any, default: Any, doc: str) -> Param:
    required = default is inspect.Parameter.empty
    annotation, extras = _unwrap_annotated(annotation)
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        if len(members) != 1:
            raise WorldError(f"parameter {name}: only X | None unions are supported")
        annotation, more = _unwrap_annotated(members[0])
        extras += more
        origin = get_origin(annotation)
        if required:
            raise WorldError(f"parameter {name}: an optional parameter needs a default")
    schema: dict[str, Any]
    coerce: Callable[[Any], Any]
    if annotation is int:
        schema, coerce = {"type": "integer"}, _coerce_int
    elif annotation is Decimal:
        schema, coerce = {"type": "number"}, _coerce_decimal
    elif annotation is str:
        schema, coerce = {"type": "string", "maxLength": MAX_STRING}, _coerce_str
    elif annotation is bool:
        schema, coerce = {"type": "boolean"}, _coerce_bool
    elif origin is Literal:
        choices = tuple(get_args(annotation))
        if not all(isinstance(c, str) for c in choices):
            raise WorldError(f"parameter {name}: Literal choices must be strings")
        schema, coerce = {"type": "string", "enum": list(choices)}, _enum_coercer(choices)
    elif origin is list and get_args(annotation) == (str,):
        schema = {"type": "array", "items": {"type": "string"}, "maxItems": MAX_LIST}
        coerce = _coerce_str_list
    else:
        raise WorldError(f"parameter {name}: unsupported annotation {annotation!r}")
    if doc:
        schema = {**schema, "description": doc}
    refs = [e.table for e in extras if isinstance(e, Ref)]
    if refs and annotation is not int:
        raise WorldError(f"parameter {name}: Ref applies to integer ids only")
    free = any(isinstance(e, _FreeText) for e in extras)
    return Param(name, schema, required, None if required else default, coerce, refs[0] if refs else None, free)


def declare_param(name: str, annotation: Any, doc: str, default: Any = inspect.Parameter.empty) -> Param:
    """A :class:`Param` as ``@tool`` derives it from a parameter ``name: annotation = default`` documented ``doc``.

    For tools built from other tools (a drifted surface, :mod:`mirrorworld.drift`):
    the same annotations, schemas and coercion as a declared tool's.
    """
    return _param_for(name, annotation, default, doc)


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (description, {param: text})."""
    lines = inspect.cleandoc(doc).splitlines()
    desc: list[str] = []
    params: dict[str, str] = {}
    current: str | None = None
    section = ""  # "" is the description; sections are "Args:", "Returns:", "Raises:" ...
    for line in lines:
        stripped = line.strip()
        if re.fullmatch(r"[A-Z][A-Za-z ]*:", stripped) and not line.startswith(" "):
            section = stripped
            continue
        if section in ("Args:", "Arguments:"):
            m = re.match(r"^\s+(\w+)\s*(?:\([^)]*\))?:\s*(.*)$", line)
            if m:
                current = m.group(1)
                params[current] = m.group(2).strip()
            elif current and stripped:
                params[current] += " " + stripped
            continue
        if not section:
            desc.append(line)
    return " ".join(" ".join(desc).split()), params


def tool(kind: ToolKind) -> Callable[[Callable[..., Any]], ToolSpec]:
    """Declare a tool of the given kind from a typed, documented function.

    Usage::

        @tool("read")
        def get_order(ctx: ToolContext, order_id: int) -> dict[str, Any]:
            \"\"\"Look up one order with its lines.

            Args:
                order_id: The order number.
            \"\"\"
    """

    def decorate(func: Callable[..., Any]) -> ToolSpec:
        if not func.__doc__:
            raise WorldError(f"tool {func.__name__} needs a docstring")
        description, docs = _parse_docstring(func.__doc__)
        hints = typing.get_type_hints(func, include_extras=True)
        sig = inspect.signature(func)
        names = list(sig.parameters)
        if not names or names[0] != "ctx":
            raise WorldError(f"tool {func.__name__}: first parameter must be ctx")
        params = []
        for pname in names[1:]:
            p = sig.parameters[pname]
            if p.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
                raise WorldError(f"tool {func.__name__}: parameter {pname} must be plain")
            if pname not in docs:
                raise WorldError(f"tool {func.__name__}: parameter {pname} is not documented")
            params.append(_param_for(pname, hints[pname], p.default, docs[pname]))
        return ToolSpec(func.__name__, description, kind, tuple(params), func)

    return decorate
