"""The kinds of change a world version can declare against the one it derives from.

Each change is a small frozen declaration with a changelog line
(:meth:`Change.changelog`), the score part it touches (:attr:`Change.part`) and
a canonical form (:meth:`Change.to_dict`) that feeds the derived world's
content hash. :func:`mirrorworld.drift.derive` applies a list of them, in
order, to a base world:

=======================  ===============  ==================================================
change                   part             what an agent meets
=======================  ===============  ==================================================
``RenameTool``           tool_schemas     the old name is an ``unknown_tool``
``RemoveTool``           tool_schemas     the tool is gone (no gold may need it)
``AddArgument``          tool_schemas     a new argument; a required one must be sent
``RenameArgument``       tool_schemas     the old argument name is refused
``RetypeArgument``       tool_schemas     money as integer cents, an id as a string
``AddEnumValue``         tool_schemas     a new accepted value meaning an existing one
``RemoveEnumValue``      tool_schemas     the value is refused; the gold uses another
``ChangeErrorCode``      tools            a refusal reported under another code
``MoveParameter``        rules            a business-rule figure moved (threshold, floors)
``RevisePolicy``         policy           the written policy says something else
``ShiftCustomer``        simulator        simulated customers wait less, dodge, write otherwise
``AddDistractorTools``   tool_schemas     plausible read tools no task needs
``ParaphraseTools``      tool_schemas     every tool described in other words
=======================  ===============  ==================================================

What each one does to the tools, the gold solutions, the policy and the tasks
is in :mod:`mirrorworld.drift.derive`; the declarations here only check
their own fields.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Literal

from mirrorworld.errors import WorldError

__all__ = [
    "CHANGE_KINDS",
    "AddArgument",
    "AddDistractorTools",
    "AddEnumValue",
    "Change",
    "ChangeErrorCode",
    "MoveParameter",
    "ParaphraseTools",
    "RemoveEnumValue",
    "RemoveTool",
    "RenameArgument",
    "RenameTool",
    "RetypeArgument",
    "RevisePolicy",
    "ShiftCustomer",
    "change_from_dict",
]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}\Z")
_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}\Z")

ArgType = Literal["string", "integer", "number", "boolean"]
Retype = Literal["cents", "string"]
"""``cents``: a money argument (a number of dollars) becomes an integer number of cents;
``string``: an integer argument (an id) becomes a string of digits."""


def _name(value: object, what: str) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise WorldError(f"{what} {str(value)[:60]!r} is not a valid name (letters, digits, _)")
    return value


@dataclass(frozen=True)
class Change(ABC):
    """One declared change. See the module docstring."""

    kind: ClassVar[str]
    part: ClassVar[str]
    """The score part (``mirrorworld.core.world.SCORE_PARTS``) the change feeds."""

    @abstractmethod
    def changelog(self) -> str:
        """One line for the changelog."""

    def to_dict(self) -> dict[str, Any]:
        """The canonical form: the kind and every field (what the content hash reads)."""
        return {"kind": self.kind, **asdict(self)}

    def canonical(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class RenameTool(Change):
    """A tool renamed: the old name no longer exists. The policy and descriptions follow the new name."""

    kind: ClassVar[str] = "rename_tool"
    part: ClassVar[str] = "tool_schemas"
    tool: str
    to: str

    def __post_init__(self) -> None:
        _name(self.tool, "tool")
        _name(self.to, "new tool name")
        if self.tool == self.to:
            raise WorldError(f"renaming tool {self.tool} to itself")

    def changelog(self) -> str:
        return f"tool {self.tool} renamed to {self.to}"


@dataclass(frozen=True)
class RemoveTool(Change):
    """A tool removed from the API. No task's gold may need it (deriving says which one does)."""

    kind: ClassVar[str] = "remove_tool"
    part: ClassVar[str] = "tool_schemas"
    tool: str

    def __post_init__(self) -> None:
        _name(self.tool, "tool")

    def changelog(self) -> str:
        return f"tool {self.tool} removed"


@dataclass(frozen=True)
class AddArgument(Change):
    """A new argument. A required one must be sent (the gold sends ``gold``); the world ignores its value
    beyond its type (and its ``enum``), as a production API ignores a field its workflow does not read."""

    kind: ClassVar[str] = "add_argument"
    part: ClassVar[str] = "tool_schemas"
    tool: str
    argument: str
    type: ArgType = "string"
    required: bool = False
    description: str = ""
    enum: tuple[str, ...] = ()
    gold: Any = None
    """What the gold solution sends (required arguments need one)."""

    def __post_init__(self) -> None:
        _name(self.tool, "tool")
        _name(self.argument, "argument")
        if self.type not in ("string", "integer", "number", "boolean"):
            raise WorldError(f"argument type {str(self.type)[:40]!r} is not string, integer, number or boolean")
        if self.enum and self.type != "string":
            raise WorldError("only a string argument can have enum values")
        if self.required and self.gold is None:
            raise WorldError(f"required argument {self.argument} of {self.tool} needs the value the gold sends")
        if not self.description:
            raise WorldError(f"argument {self.argument} of {self.tool} needs a description")
        object.__setattr__(self, "enum", tuple(self.enum))

    def changelog(self) -> str:
        how = "required" if self.required else "optional"
        return f"{self.tool} takes a new {how} argument {self.argument} ({self.type})"


@dataclass(frozen=True)
class RenameArgument(Change):
    """An argument renamed: the old name is refused as unknown."""

    kind: ClassVar[str] = "rename_argument"
    part: ClassVar[str] = "tool_schemas"
    tool: str
    argument: str
    to: str

    def __post_init__(self) -> None:
        _name(self.tool, "tool")
        _name(self.argument, "argument")
        _name(self.to, "new argument name")

    def changelog(self) -> str:
        return f"argument {self.argument} of {self.tool} renamed to {self.to}"


@dataclass(frozen=True)
class RetypeArgument(Change):
    """An argument's type changed (see :data:`Retype`); a value of the old type is refused."""

    kind: ClassVar[str] = "retype_argument"
    part: ClassVar[str] = "tool_schemas"
    tool: str
    argument: str
    to: Retype

    def __post_init__(self) -> None:
        _name(self.tool, "tool")
        _name(self.argument, "argument")
        if self.to not in ("cents", "string"):
            raise WorldError(f"retype {str(self.to)[:40]!r}: known retypes are cents and string")

    def changelog(self) -> str:
        what = "an integer number of cents" if self.to == "cents" else "a string"
        return f"argument {self.argument} of {self.tool} is now {what}"


@dataclass(frozen=True)
class AddEnumValue(Change):
    """A new value of an enum argument, meaning ``means`` (an existing value) to the world."""

    kind: ClassVar[str] = "add_enum_value"
    part: ClassVar[str] = "tool_schemas"
    tool: str
    argument: str
    value: str
    means: str

    def __post_init__(self) -> None:
        _name(self.tool, "tool")
        _name(self.argument, "argument")
        _name(self.value, "enum value")

    def changelog(self) -> str:
        return f"{self.tool}.{self.argument} accepts {self.value} (handled as {self.means})"


@dataclass(frozen=True)
class RemoveEnumValue(Change):
    """An enum value withdrawn: it is refused, and the gold sends ``use_instead`` (a value still accepted)."""

    kind: ClassVar[str] = "remove_enum_value"
    part: ClassVar[str] = "tool_schemas"
    tool: str
    argument: str
    value: str
    use_instead: str

    def __post_init__(self) -> None:
        _name(self.tool, "tool")
        _name(self.argument, "argument")
        if self.value == self.use_instead:
            raise WorldError(f"removing enum value {self.value} in favour of itself")

    def changelog(self) -> str:
        return f"{self.tool}.{self.argument} no longer accepts {self.value} (use {self.use_instead})"


@dataclass(frozen=True)
class ChangeErrorCode(Change):
    """Refusals reported under another error code (by every tool, or the ones named)."""

    kind: ClassVar[str] = "change_error_code"
    part: ClassVar[str] = "tools"
    code: str
    to: str
    tools: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for code in (self.code, self.to):
            if not isinstance(code, str) or not _CODE.match(code):
                raise WorldError(f"error code {str(code)[:60]!r} must be lowercase letters, digits and _")
        object.__setattr__(self, "tools", tuple(_name(t, "tool") for t in self.tools))

    def changelog(self) -> str:
        where = f" by {', '.join(self.tools)}" if self.tools else ""
        return f"error code {self.code} reported as {self.to}{where}"


@dataclass(frozen=True)
class MoveParameter(Change):
    """A business-rule figure moved (``World.parameters``); ``policy`` edits say it in the policy's words.

    ``value`` replaces the parameter whole; for a mapping (priority floors by
    tier) only the keys given change. Each ``(old, new)`` of ``policy``
    replaces text that must occur in the policy and the rule descriptions, so
    the written policy never contradicts the figure the tools enforce.
    """

    kind: ClassVar[str] = "move_parameter"
    part: ClassVar[str] = "rules"
    parameter: str
    value: Any
    policy: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        _name(self.parameter, "parameter")
        object.__setattr__(self, "policy", tuple((str(a), str(b)) for a, b in self.policy))
        if isinstance(self.value, Mapping):
            object.__setattr__(self, "value", dict(self.value))

    def changelog(self) -> str:
        return f"rule parameter {self.parameter} moved to {json.dumps(self.value, sort_keys=True, default=str)}"


@dataclass(frozen=True)
class RevisePolicy(Change):
    """The written policy revised: ``old`` (which must occur) replaced by ``new``, or ``new`` appended."""

    kind: ClassVar[str] = "revise_policy"
    part: ClassVar[str] = "policy"
    new: str
    old: str = ""
    note: str = ""
    """The changelog line (default: a summary of the edit)."""

    def __post_init__(self) -> None:
        if not isinstance(self.new, str) or not isinstance(self.old, str):
            raise WorldError("a policy revision's old and new texts must be strings")

    def changelog(self) -> str:
        if self.note:
            return f"policy: {self.note}"
        return "policy: section added" if not self.old else f"policy: {self.old[:40]!r} revised"


@dataclass(frozen=True)
class ShiftCustomer(Change):
    """Simulated customers behave otherwise: ``patience`` (turns of silence before leaving) is multiplied
    by ``patience_factor``, ``honesty`` and ``persona`` (when set) replace every profile's."""

    kind: ClassVar[str] = "shift_customer"
    part: ClassVar[str] = "simulator"
    patience_factor: float = 1.0
    honesty: str | None = None
    persona: str | None = None

    def __post_init__(self) -> None:
        f = self.patience_factor
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0.0 < f <= 10.0:
            raise WorldError("patience_factor must be a number in (0, 10]")
        if self.honesty not in (None, "honest", "evasive"):
            raise WorldError("honesty must be honest or evasive")

    def changelog(self) -> str:
        parts = []
        if self.patience_factor != 1.0:
            parts.append(f"patience x{self.patience_factor:g}")
        if self.honesty:
            parts.append(f"honesty {self.honesty}")
        if self.persona:
            parts.append(f"persona {self.persona}")
        return "customers: " + (", ".join(parts) or "unchanged")


@dataclass(frozen=True)
class AddDistractorTools(Change):
    """``count`` plausible read tools no task needs, drawn with ``seed`` (they change no state)."""

    kind: ClassVar[str] = "add_distractor_tools"
    part: ClassVar[str] = "tool_schemas"
    count: int
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.count, bool) or not isinstance(self.count, int) or not 1 <= self.count <= 30:
            raise WorldError("a distractor count must be an integer in 1..30")

    def changelog(self) -> str:
        return f"{self.count} distractor tools added"


@dataclass(frozen=True)
class ParaphraseTools(Change):
    """Every tool's description (and each argument's) reworded, drawn with ``seed``; the meaning is kept."""

    kind: ClassVar[str] = "paraphrase_tools"
    part: ClassVar[str] = "tool_schemas"
    seed: int = 0
    tools: tuple[str, ...] = field(default=())
    """Only these tools (default: all)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "tools", tuple(_name(t, "tool") for t in self.tools))

    def changelog(self) -> str:
        return "tool descriptions paraphrased"


CHANGE_KINDS: dict[str, type[Change]] = {
    c.kind: c
    for c in (
        RenameTool,
        RemoveTool,
        AddArgument,
        RenameArgument,
        RetypeArgument,
        AddEnumValue,
        RemoveEnumValue,
        ChangeErrorCode,
        MoveParameter,
        RevisePolicy,
        ShiftCustomer,
        AddDistractorTools,
        ParaphraseTools,
    )
}
"""Every change kind by its ``kind`` name."""


def change_from_dict(data: Mapping[str, Any]) -> Change:
    """The change a canonical dict (:meth:`Change.to_dict`, a drift file's entry) declares; checked."""
    if not isinstance(data, Mapping):
        raise WorldError("a change must be an object with a kind")
    kind = data.get("kind")
    cls = CHANGE_KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise WorldError(f"unknown change kind {str(kind)[:40]!r} (known: {', '.join(CHANGE_KINDS)})")
    fields = {k: v for k, v in data.items() if k != "kind"}
    for key in ("policy",):
        if key in fields and isinstance(fields[key], list):
            fields[key] = tuple(tuple(p) if isinstance(p, list) else p for p in fields[key])
    try:
        return cls(**fields)
    except TypeError as err:
        raise WorldError(f"change {kind}: {err}") from None
