"""Deriving a world version from another by declared changes (:mod:`mirrorworld.drift.changes`).

:func:`derive` returns a new :class:`~mirrorworld.core.world.World` subclass:
an ordinary world, registrable under its own versioned id with its own content
hash, on which every command works. The base world's code does the work; the
derived world changes what surrounds it:

* **the API an agent sees.** Each tool is presented through a
  :class:`~mirrorworld.core.tools.Surface` (renamed, with arguments added,
  renamed or retyped, enum values added or withdrawn, error codes renamed);
  the session runs the base tool and records the base call, so rules, guards,
  claims and the process reward read the names they were written for, while
  the run file records the call as the agent made and saw it. Removed tools
  are gone; distractor tools are added; descriptions may be paraphrased.
  Names an agent could read elsewhere follow a rename: the policy, every
  description and the messages of refusals.
* **the rules.** Parameters (``World.parameters``) move; the tools enforce the
  new figures and task families generate with them; ``policy`` edits state
  them in the policy's words (each edit's old text must occur, so the policy
  never contradicts what is enforced).
* **the tasks.** A derived family generates the base family's task for the
  same seed (the same ticket, the same customer), under the derived rules,
  with its gold solution presented through the new API and its simulated
  customer shifted. So a version's tasks pair one to one with its base's and
  a drift report compares like with like.
* **the audit.** The base world's audit hooks see the base world's calls:
  gold, undo plans and mutants are translated on the way in and out.

A world with seats (several parties with their own tools) accepts the changes
that leave tool names alone (rules, policy, customers); presenting its tools
otherwise is refused, since each seat names its tools.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, Literal

from mirrorworld.core.seats import Seated
from mirrorworld.core.session import Session, ToolContext
from mirrorworld.core.task import Task, TaskFamily, ToolCall
from mirrorworld.core.tools import Param, Surface, ToolSpec, declare_param
from mirrorworld.core.world import AuditHooks, Rule, World
from mirrorworld.drift.changes import (
    AddArgument,
    AddDistractorTools,
    AddEnumValue,
    Change,
    ChangeErrorCode,
    MoveParameter,
    ParaphraseTools,
    RemoveEnumValue,
    RemoveTool,
    RenameArgument,
    RenameTool,
    RetypeArgument,
    RevisePolicy,
    ShiftCustomer,
)
from mirrorworld.errors import TaskError, ToolError, WorldError

__all__ = ["DISTRACTOR_TOOLS", "DriftedWorld", "derive"]

_DRIFT_DIR = Path(__file__).resolve().parent

Inward = Callable[[dict[str, Any]], dict[str, Any]]
Outward = Callable[[dict[str, Any]], dict[str, Any]]


# -- the presented API ----------------------------------------------------------------


@dataclass
class _Tool:
    """One tool while the changes are applied: its presented form and how it maps onto the base tool."""

    inner: ToolSpec
    name: str
    description: str
    params: list[Param]
    stages: list[tuple[Inward, Outward]] = field(default_factory=list)
    """One (inward, outward) pair per change to the arguments, in declaration order."""
    errors: dict[str, str] = field(default_factory=dict)

    def param(self, name: str, change: Change) -> int:
        for i, p in enumerate(self.params):
            if p.name == name:
                return i
        raise WorldError(f"{change.changelog()}: tool {self.name} has no argument {name}")


def _annotation(schema: Mapping[str, Any]) -> Any:
    kind = schema.get("type")
    if "enum" in schema:
        return Literal.__getitem__(tuple(schema["enum"]))
    return {"string": str, "integer": int, "number": Decimal, "boolean": bool, "array": list[str]}[str(kind)]


def _redeclare(p: Param, *, name: str | None = None, annotation: Any = None, doc: str | None = None) -> Param:
    """``p`` declared again with another name, type or description (same coercion rules as ``@tool``)."""
    schema = p.schema
    text = doc if doc is not None else str(schema.get("description", ""))
    ann = annotation if annotation is not None else _annotation(schema)
    if not p.required:
        ann = ann | None
        return declare_param(name or p.name, ann, text, p.default)
    return declare_param(name or p.name, ann, text)


class _Words:
    """Renamed identifiers, rewritten wherever an agent reads them (policy, descriptions, refusals)."""

    def __init__(self) -> None:
        self.map: dict[str, str] = {}
        self._pattern: re.Pattern[str] | None = None

    def add(self, old: str, new: str) -> None:
        for k, v in list(self.map.items()):
            if v == old:
                self.map[k] = new
        self.map.setdefault(old, new)
        self._pattern = None

    def __call__(self, text: str) -> str:
        if not self.map or not text:
            return text
        if self._pattern is None:
            alternatives = "|".join(re.escape(k) for k in sorted(self.map, key=len, reverse=True))
            self._pattern = re.compile(rf"(?<![A-Za-z0-9_])({alternatives})(?![A-Za-z0-9_])")
        return self._pattern.sub(lambda m: self.map[m.group(1)], text)


# Distractor tools: plausible reads of a business system that no task needs. Each answers from its
# arguments alone (no state is read or written), deterministically.
DISTRACTOR_TOOLS: tuple[tuple[str, str, tuple[tuple[str, Any, str], ...]], ...] = (
    ("get_loyalty_balance", "Look up a customer's loyalty points balance.", (("customer_id", int, "The customer."),)),
    ("list_warehouses", "List the company's warehouses and their opening hours.", ()),
    ("get_exchange_rate", "Get today's exchange rate from USD to a currency.", (("currency", str, "ISO code."),)),
    ("check_system_status", "Report the status of the back-office systems.", ()),
    ("list_shipping_carriers", "List the shipping carriers the company uses.", ()),
    ("get_store_hours", "Get the opening hours of the store in a city.", (("city", str, "The city."),)),
    ("search_promotions", "Search current marketing promotions.", (("query", str, "Words to look for."),)),
    ("get_survey_results", "Get the satisfaction survey results of a period.", (("month", str, "YYYY-MM."),)),
    ("list_public_holidays", "List the public holidays of a year.", (("year", int, "The year."),)),
    ("get_tax_rate", "Look up the sales tax rate of a postal code.", (("zip_code", str, "The postal code."),)),
    ("list_payment_methods", "List the payment methods the shop accepts.", ()),
    ("get_product_reviews", "Get the average review score of a product.", (("product_id", int, "The product."),)),
    ("list_announcements", "List internal announcements to staff.", ()),
    ("get_agent_schedule", "Get a support agent's shift schedule.", (("agent_id", int, "The agent."),)),
    ("lookup_postal_code", "Look up the city of a postal code.", (("zip_code", str, "The postal code."),)),
    (
        "get_inventory_forecast",
        "Get next month's inventory forecast of a product.",
        (("product_id", int, "The product."),),
    ),
    ("list_training_modules", "List the training modules available to staff.", ()),
    ("get_weather_delay", "Report weather delays affecting deliveries in a city.", (("city", str, "The city."),)),
    ("list_office_locations", "List the company's office locations.", ()),
    (
        "get_marketing_consent",
        "Get whether a customer opted in to marketing e-mail.",
        (("customer_id", int, "The customer."),),
    ),
)
"""The distractor tools ``AddDistractorTools`` draws from: (name, description, (argument, type, doc) ...)."""


def _distractor(name: str, description: str, params: tuple[tuple[str, Any, str], ...]) -> ToolSpec:
    declared = tuple(declare_param(p, ann, doc) for p, ann, doc in params)

    def answer(ctx: ToolContext, **kwargs: Any) -> dict[str, Any]:
        digest = sum(ord(c) for c in json.dumps(kwargs, sort_keys=True, default=str)) + len(name)
        return {"tool": name, "result": "no records", "reference": f"{name[:3].upper()}-{digest % 9000 + 1000}"}

    return ToolSpec(name, description, "read", declared, answer)


_PARAPHRASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Look up", ("Retrieve", "Fetch", "Get")),
    ("Search", ("Find", "Query", "Look for")),
    ("List", ("Show", "Return", "Enumerate")),
    ("Set", ("Change", "Update", "Assign")),
    ("Send", ("Deliver", "Post", "Transmit")),
    ("Read", ("Fetch", "Retrieve", "Open")),
    ("Create", ("Open", "Add", "Make")),
    ("customer's", ("client's", "customer's")),
    ("ticket", ("case", "ticket")),
    ("number", ("id", "identifier")),
    ("never", ("not ever", "under no circumstances")),
)


def _paraphrase(text: str, rng: random.Random) -> str:
    for phrase, options in _PARAPHRASES:
        if phrase in text:
            text = re.sub(rf"\b{re.escape(phrase)}\b", rng.choice(options), text)
    return text


@dataclass
class Presented:
    """The API a derived world presents, and the translations between it and its base's."""

    tools: tuple[ToolSpec, ...]
    by_inner: dict[str, _Tool]
    removed: frozenset[str]
    words: _Words

    def publish(self, call: ToolCall, what: str) -> ToolCall:
        """A base world's call (a gold step) as the derived API takes it; a removed tool is a ``TaskError``."""
        if call.tool in self.removed:
            raise TaskError(f"{what}: it calls {call.tool}, which this version removes")
        t = self.by_inner.get(call.tool)
        if t is None:
            return call
        args = call.args
        if isinstance(args, dict):
            out = dict(args)
            for _inward, outward in t.stages:
                out = outward(out)
            args = out
        return ToolCall(t.name, args)

    def internalise(self, call: ToolCall) -> ToolCall | None:
        """A call to the derived API as the base world's call (None: no such tool, or arguments it refuses)."""
        spec = next((s for s in self.tools if s.name == call.tool), None)
        if spec is None or spec.surface is None:
            return call if spec is not None else None
        if not isinstance(call.args, dict):
            return None
        try:
            kwargs = spec.surface.inward(spec.validate(call.args))
        except ToolError:
            return None
        inner = spec.surface.inner
        names = {p.name for p in inner.params}
        return ToolCall(inner.name, {k: _plain(v) for k, v in kwargs.items() if k in names and v is not None})


def _reworded(p: Param, words: Callable[[str], str]) -> Param:
    doc = str(p.schema.get("description", ""))
    new = words(doc)
    return p if new == doc else _redeclare(p, doc=new)


def _plain(value: Any) -> Any:
    return str(value) if isinstance(value, Decimal) else value


def _cents(value: Any) -> int:
    """A gold money value (``"35.99"``, ``35.99``) as integer cents."""
    try:
        cents = Decimal(str(value)) * 100
    except InvalidOperation:
        raise WorldError(f"cannot present {str(value)[:40]!r} in cents") from None
    if cents != cents.to_integral_value():
        raise WorldError(f"{value} is not a whole number of cents")
    return int(cents)


def _figure_edits(changes: Sequence[Change]) -> list[tuple[str, str]]:
    """The text edits of the moved parameters: the figure as the policy words it, wherever else it is written."""
    return [(a, b) for c in changes if isinstance(c, MoveParameter) for a, b in c.policy if a]


def present(base_tools: Sequence[ToolSpec], changes: Sequence[Change], *, seated: bool = False) -> Presented:
    """Apply the tool changes of ``changes`` to ``base_tools`` (in declaration order)."""
    tools: dict[str, _Tool] = {
        s.name: _Tool(s, s.name, s.description, list(s.params)) for s in base_tools
    }  # by presented name, in order
    removed: set[str] = set()
    extra: list[ToolSpec] = []
    words = _Words()
    base_names = {s.name for s in base_tools}

    def find(name: str, change: Change) -> _Tool:
        t = tools.get(name)
        if t is None:
            raise WorldError(f"{change.changelog()}: no tool named {name} at this point of the changes")
        return t

    for change in changes:
        if seated and change.part in ("tool_schemas", "tools"):
            raise WorldError(f"{change.changelog()}: a world with seats names its tools per seat; it cannot drift them")
        if isinstance(change, RenameTool):
            t = find(change.tool, change)
            if change.to in tools or change.to in base_names - {change.tool}:
                raise WorldError(f"{change.changelog()}: a tool named {change.to} already exists")
            tools = {(change.to if k == change.tool else k): v for k, v in tools.items()}
            t.name = change.to
            words.add(change.tool, change.to)
        elif isinstance(change, RemoveTool):
            t = find(change.tool, change)
            if t.inner.kind == "terminal":
                raise WorldError(f"{change.changelog()}: the terminal tool cannot be removed")
            del tools[change.tool]
            removed.add(t.inner.name)
        elif isinstance(change, AddArgument):
            t = find(change.tool, change)
            if any(p.name == change.argument for p in t.params):
                raise WorldError(f"{change.changelog()}: {change.tool} already has an argument {change.argument}")
            ann: Any = (
                Literal.__getitem__(change.enum)
                if change.enum
                else {"string": str, "integer": int, "number": Decimal, "boolean": bool}[change.type]
            )
            if change.required:
                t.params.append(declare_param(change.argument, ann, change.description))
            else:
                t.params.append(declare_param(change.argument, ann | None, change.description, None))
            gold_value = change.gold
            if change.enum and gold_value is not None and gold_value not in change.enum:
                raise WorldError(f"{change.changelog()}: the gold's value {gold_value!r} is not one of its enum")
            arg = change.argument

            def inward_1(d: dict[str, Any], arg: str = arg) -> dict[str, Any]:
                return {k: v for k, v in d.items() if k != arg}

            def outward_1(d: dict[str, Any], arg: str = arg, value: Any = gold_value) -> dict[str, Any]:
                return {**d, arg: value} if value is not None else d

            t.stages.append((inward_1, outward_1))
        elif isinstance(change, RenameArgument):
            t = find(change.tool, change)
            i = t.param(change.argument, change)
            if any(p.name == change.to for p in t.params):
                raise WorldError(f"{change.changelog()}: {change.tool} already has an argument {change.to}")
            t.params[i] = _redeclare(t.params[i], name=change.to)
            old, new = change.argument, change.to

            def inward_2(d: dict[str, Any], old: str = old, new: str = new) -> dict[str, Any]:
                out = {k: v for k, v in d.items() if k != new}
                out[old] = d.get(new)
                return out

            def outward_2(d: dict[str, Any], old: str = old, new: str = new) -> dict[str, Any]:
                return {(new if k == old else k): v for k, v in d.items()}

            t.stages.append((inward_2, outward_2))
            if "_" in old:  # a compound identifier is safe to rewrite in prose; a plain word ("amount") is not
                words.add(old, new)
        elif isinstance(change, RetypeArgument):
            t = find(change.tool, change)
            i = t.param(change.argument, change)
            p = t.params[i]
            arg = change.argument
            if change.to == "cents":
                if p.schema.get("type") != "number":
                    raise WorldError(f"{change.changelog()}: only a number (money) argument can become cents")
                doc = f"{p.schema.get('description', '')} In cents (an integer: 1999 is 19.99).".strip()
                t.params[i] = _redeclare(p, annotation=int, doc=doc)

                def inward_3(d: dict[str, Any], arg: str = arg) -> dict[str, Any]:
                    v = d.get(arg)
                    return d if v is None else {**d, arg: Decimal(int(v)) / 100}

                def outward_3(d: dict[str, Any], arg: str = arg) -> dict[str, Any]:
                    return d if d.get(arg) is None else {**d, arg: _cents(d[arg])}

                stage: tuple[Inward, Outward] = (inward_3, outward_3)

            else:
                if p.schema.get("type") != "integer":
                    raise WorldError(f"{change.changelog()}: only an integer argument can become a string")
                t.params[i] = _redeclare(p, annotation=str)

                def inward_4(d: dict[str, Any], arg: str = arg, tool: str = t.name) -> dict[str, Any]:
                    v = d.get(arg)
                    if v is None:
                        return d
                    text = str(v).strip()
                    if not re.fullmatch(r"\d{1,15}", text):
                        raise ToolError("invalid_arguments", f"argument '{arg}' of {tool}: expected a string of digits")
                    return {**d, arg: int(text)}

                def outward_4(d: dict[str, Any], arg: str = arg) -> dict[str, Any]:
                    return d if d.get(arg) is None else {**d, arg: str(d[arg])}

                stage = (inward_4, outward_4)

            t.stages.append(stage)
        elif isinstance(change, (AddEnumValue, RemoveEnumValue)):
            t = find(change.tool, change)
            i = t.param(change.argument, change)
            p = t.params[i]
            choices = list(p.schema.get("enum", ()))
            if not choices:
                raise WorldError(f"{change.changelog()}: argument {change.argument} of {change.tool} is not an enum")
            arg = change.argument
            if isinstance(change, AddEnumValue):
                if change.value in choices:
                    raise WorldError(f"{change.changelog()}: {change.value} is already accepted")
                if change.means not in choices:
                    raise WorldError(f"{change.changelog()}: {change.means} is not an accepted value")
                choices.append(change.value)
                value, means = change.value, change.means

                def inward_5(
                    d: dict[str, Any], arg: str = arg, value: str = value, means: str = means
                ) -> dict[str, Any]:
                    return {**d, arg: means} if d.get(arg) == value else d

                def outward_5(d: dict[str, Any]) -> dict[str, Any]:
                    return d

                stage = (inward_5, outward_5)

            else:
                if change.value not in choices:
                    raise WorldError(f"{change.changelog()}: {change.value} is not an accepted value")
                choices.remove(change.value)
                if change.use_instead not in choices:
                    raise WorldError(f"{change.changelog()}: {change.use_instead} is not an accepted value")
                value, instead = change.value, change.use_instead

                def inward_6(d: dict[str, Any]) -> dict[str, Any]:
                    return d

                def outward_6(
                    d: dict[str, Any], arg: str = arg, value: str = value, instead: str = instead
                ) -> dict[str, Any]:
                    v = d.get(arg)
                    return {**d, arg: instead} if isinstance(v, str) and v.strip().lower() == value.lower() else d

                stage = (inward_6, outward_6)

            t.params[i] = _redeclare(p, annotation=Literal.__getitem__(tuple(choices)))
            t.stages.append(stage)
        elif isinstance(change, ChangeErrorCode):
            for name in change.tools:
                find(name, change)
            for name, t in tools.items():
                if not change.tools or name in change.tools:
                    for k, v in list(t.errors.items()):
                        if v == change.code:
                            t.errors[k] = change.to
                    t.errors.setdefault(change.code, change.to)
        elif isinstance(change, AddDistractorTools):
            rng = random.Random(f"mirrorworld/distractors/{change.seed}")
            taken = set(tools) | {s.name for s in extra} | base_names
            pool = [d for d in DISTRACTOR_TOOLS if d[0] not in taken]
            if change.count > len(pool):
                raise WorldError(f"{change.changelog()}: only {len(pool)} distractor tools are left to add")
            extra += [_distractor(*d) for d in rng.sample(pool, change.count)]
        elif isinstance(change, ParaphraseTools):
            rng = random.Random(f"mirrorworld/paraphrase/{change.seed}")
            for name in change.tools:
                find(name, change)
            for name, t in tools.items():
                if change.tools and name not in change.tools:
                    continue
                t.description = _paraphrase(t.description, rng)
                t.params = [_redeclare(p, doc=_paraphrase(str(p.schema.get("description", "")), rng)) for p in t.params]

    edits = _figure_edits(changes)

    def reword(text: str) -> str:
        text = words(text)
        for old, new in edits:
            text = text.replace(old, new)
        return text

    specs: list[ToolSpec] = []
    for name, t in tools.items():
        changed = t.name != t.inner.name or t.stages or t.errors or t.params != list(t.inner.params)
        description = reword(t.description)
        params = tuple(_reworded(p, reword) for p in t.params)
        if not changed and description == t.inner.description and params == t.inner.params:
            specs.append(t.inner)
            continue
        stages = tuple(t.stages)

        def run_inward(
            d: dict[str, Any],
            stages: tuple[tuple[Inward, Outward], ...] = stages,
            inner: ToolSpec = t.inner,
        ) -> dict[str, Any]:
            for stage_in, _out in reversed(stages):
                d = stage_in(d)
            # The base tool's own checks again: a presented value may map outside what it accepts (a huge
            # number of cents); its refusal is reported in the presented names (Surface.error).
            return inner.validate({k: v for k, v in d.items() if k in inner.names and v is not None})

        surface = Surface(t.inner, run_inward, dict(t.errors), words if words.map else None)
        specs.append(ToolSpec(name, description, t.inner.kind, params, t.inner.func, surface=surface))
    # Added tools go just before the first terminal tool (the base order, and so the action indices, kept).
    at = next((i for i, s in enumerate(specs) if s.kind == "terminal"), len(specs))
    specs[at:at] = extra
    by_inner = {t.inner.name: t for t in tools.values()}
    return Presented(tuple(specs), by_inner, frozenset(removed), words)


# -- the derived world ------------------------------------------------------------------


class _DriftedFamily(TaskFamily):
    """A base family's tasks, generated for the same seed under the derived rules and presented through the new API."""

    def __init__(self, inner: TaskFamily, world: DriftedWorld) -> None:
        self.inner = inner
        self.name = inner.name
        self.description = inner.description
        for old, new in _figure_edits(world.changes):
            self.description = self.description.replace(old, new)
        self.needs_reply = inner.needs_reply
        self.parameters = inner.parameters
        self._world = world

    def __getattr__(self, name: str) -> Any:  # what else a world reads off its families (roles, hints)
        if name in ("inner", "_world"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def bind(self, parameters: Mapping[str, Any]) -> TaskFamily:
        if parameters == self.parameters:
            return self
        return _DriftedFamily(self.inner.bind(parameters), self._world)

    def base_task(self, image: Any, seed: int) -> Task:
        return self.inner.task(self._world.drift_root.name, image, seed)

    def task(self, world: str, image: Any, seed: int) -> Task:
        base = self.base_task(image, seed)
        return self._world._present_task(base)

    def generate(self, image: Any, rng: random.Random, seed: int) -> Task:  # pragma: no cover - task() is used
        return self.task(self._world.name, image, seed)


class _DriftedAudit(AuditHooks):
    """The base world's audit hooks, speaking the base world's API through the derived one's."""

    def __init__(self, inner: AuditHooks, world: DriftedWorld) -> None:
        self.inner = inner
        self.world = world

    def _out(self, calls: Sequence[ToolCall] | None, what: str) -> list[ToolCall] | None:
        if calls is None:
            return None
        presented = self.world._presented
        try:
            return [presented.publish(c, what) for c in calls]
        except TaskError:
            return None

    def undo(self, session: Session, call: ToolCall) -> list[ToolCall] | None:
        inner = self.world._presented.internalise(call)
        return None if inner is None else self._out(self.inner.undo(session, inner), "an undo")

    def _named(self, task: Task, found: list[tuple[str, list[ToolCall]]]) -> list[tuple[str, list[ToolCall]]]:
        out = []
        for name, calls in found:
            published = self._out(calls, name)
            if published is not None:
                out.append((name, published))
        return out

    def alternative_solutions(self, task: Task) -> list[tuple[str, list[ToolCall]]]:
        return self._named(task, self.inner.alternative_solutions(self.world.base_task(task)))

    def policy_mutants(self, task: Task) -> list[tuple[str, list[ToolCall]]]:
        return self._named(task, self.inner.policy_mutants(self.world.base_task(task)))

    def escalate_only(self, task: Task) -> list[ToolCall]:
        return self._out(self.inner.escalate_only(self.world.base_task(task)), "escalate-only") or []


def _merged(base: Any, value: Any) -> Any:
    if isinstance(base, Mapping) and isinstance(value, Mapping):
        unknown = set(value) - set(base)
        if unknown:
            raise WorldError(f"parameter keys {sorted(unknown)} are not the base world's")
        return {**base, **value}
    if type(base) is not type(value) and not (isinstance(base, (int, float)) and isinstance(value, (int, float))):
        raise WorldError(f"a parameter of type {type(base).__name__} cannot move to a {type(value).__name__}")
    return value


class DriftedWorld(World):
    """A world derived from another by declared changes (see the module docstring). Built by :func:`derive`."""

    drift_root: ClassVar[type[World]]
    """The world the changes apply to (the first version of a chain of derivations)."""
    drift_from: ClassVar[str]
    """The env id of the version this one is derived from."""
    changes: ClassVar[tuple[Change, ...]] = ()
    """Every change from :attr:`drift_root`, in order (a chain's changes concatenated)."""
    own_changes: ClassVar[tuple[Change, ...]] = ()
    """The changes against :attr:`drift_from` (the changelog of this version)."""

    @property
    def data_name(self) -> str:
        return self.drift_root.name

    @cached_property
    def _presented(self) -> Presented:
        base = super().declare_tools()  # type: ignore[safe-super]
        return present(base, self.changes, seated=isinstance(self, Seated))

    def declare_tools(self) -> Sequence[ToolSpec]:
        return self._presented.tools

    def declare_parameters(self) -> Mapping[str, Any]:
        params = dict(super().declare_parameters())
        for change in self.changes:
            if isinstance(change, MoveParameter):
                if change.parameter not in params:
                    known = ", ".join(sorted(params)) or "none"
                    raise WorldError(f"{change.changelog()}: the world has no parameter {change.parameter} ({known})")
                params[change.parameter] = _merged(params[change.parameter], change.value)
        return params

    def _edits(self) -> list[tuple[str, str, Change]]:
        out: list[tuple[str, str, Change]] = []
        for change in self.changes:
            if isinstance(change, MoveParameter):
                out += [(a, b, change) for a, b in change.policy]
            elif isinstance(change, RevisePolicy):
                out.append((change.old, change.new, change))
        return out

    @cached_property
    def policy(self) -> str:  # type: ignore[override]
        text = self._presented.words(self._root_policy())
        for old, new, change in self._edits():
            if not old:
                text = text.rstrip("\n") + "\n\n" + new.strip("\n") + "\n"
            elif old not in text:
                raise WorldError(f"{change.changelog()}: the policy has no text {old[:60]!r} to revise")
            else:
                text = text.replace(old, new)
        return text

    def _root_policy(self) -> str:
        """The policy of :attr:`drift_root` (read from its folder unless it computes its own)."""
        root = self.drift_root
        declared = next(vars(k)["policy"] for k in root.__mro__ if "policy" in vars(k))
        if declared is World.__dict__["policy"]:
            return (root.source_dir / "policy.md").read_text(encoding="utf-8")
        return str(declared.func(self))

    def declare_rules(self) -> Sequence[Rule]:
        rules = list(super().declare_rules())  # type: ignore[safe-super]
        for old, new, _change in self._edits():
            if old:
                rules = [replace(r, description=r.description.replace(old, new)) for r in rules]
        words = self._presented.words
        return [replace(r, description=words(r.description)) for r in rules]

    def declare_families(self) -> Sequence[TaskFamily]:
        return [_DriftedFamily(f, self) for f in super().declare_families()]  # type: ignore[safe-super]

    def base_task(self, task: Task) -> Task:
        """The base world's task that ``task`` presents (same family and seed, the base world's API)."""
        family = self.family(task.family)
        assert isinstance(family, _DriftedFamily)
        return family.base_task(self.image, task.seed)

    def _present_task(self, base: Task) -> Task:
        presented = self._presented
        what = f"{self.id} task {base.id}"
        gold = tuple(presented.publish(c, what) for c in base.gold)
        hidden = base.hidden
        shifts = [c for c in self.changes if isinstance(c, ShiftCustomer)]
        if shifts and isinstance(hidden.get("customer"), dict):
            customer = dict(hidden["customer"])
            for shift in shifts:
                customer["patience"] = max(1, round(int(customer.get("patience", 12)) * shift.patience_factor))
                if shift.honesty:
                    customer["honesty"] = shift.honesty
                if shift.persona:
                    customer["persona"] = shift.persona
            hidden = {**hidden, "customer": customer}
        return replace(base, world=self.name, gold=gold, hidden=hidden)

    def audit_hooks(self) -> AuditHooks:
        return _DriftedAudit(super().audit_hooks(), self)

    def declared_parts(self) -> Mapping[str, bytes]:
        parts: dict[str, list[Any]] = {}
        for change in self.changes:
            parts.setdefault(change.part, []).append(change.to_dict())
        out = {p: json.dumps(v, sort_keys=True, default=str).encode() for p, v in parts.items()}
        lineage = {"root": self.drift_root.__qualname__, "from": self.drift_from}
        out["world"] = out.get("world", b"") + json.dumps(lineage, sort_keys=True).encode()
        return out

    @classmethod
    def changelog(cls) -> list[str]:
        """This version's changes against :attr:`drift_from`, one line each."""
        return [c.changelog() for c in cls.own_changes]


def derive(
    base: type[World],
    *,
    version: int,
    changes: Sequence[Change],
    name: str | None = None,
    title: str | None = None,
    module: str | None = None,
    qualname: str | None = None,
    source_dir: Path | None = None,
) -> type[World]:
    """A world class: ``base`` with ``changes`` applied (see the module docstring).

    ``version`` is the new env id's version; ``name`` the registry name
    (default ``<base name>_v<version>``). ``module`` and ``qualname`` are where
    the class can be imported from (so it pickles and travels to workers);
    ``source_dir`` is the folder declaring it (its files feed the content
    hash). Deriving from a derived world continues its chain: the changes
    apply after the base's own. The declaration is checked now, by building
    nothing but the tool surface; the tasks are checked as they are generated.
    """
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise WorldError("a version must be a non-negative integer")
    if version == base.version and (title or base.title) == base.title:
        raise WorldError(f"{base.title}-v{version} is the base world's own id: a derived version needs another")
    changes = tuple(changes)
    if not changes:
        raise WorldError("a derived version declares at least one change")
    for c in changes:
        if not isinstance(c, Change):
            raise WorldError(f"{c!r} is not a declared change")
    if issubclass(base, DriftedWorld):
        root, chain = base.drift_root, (*base.changes, *changes)
    else:
        root, chain = base, changes
    name = name or f"{root.name}_v{version}"
    attrs: dict[str, Any] = {
        "name": name,
        "title": title or base.title,
        "version": version,
        "drift_root": root,
        "drift_from": f"mirrorworld/{base.title}-v{base.version}",
        "changes": chain,
        "own_changes": changes,
        "extra_sources": (_DRIFT_DIR,),
        "__module__": module or base.__module__,
        "__qualname__": qualname or f"{base.__qualname__}V{version}",
        "__doc__": f"{base.title} v{version}: {base.__qualname__} with {len(changes)} declared changes.",
    }
    if source_dir is not None:
        attrs["source_dir"] = Path(source_dir)
    bases = (base,) if issubclass(base, DriftedWorld) else (DriftedWorld, base)
    meta: Any = type(base)
    cls: type[World] = meta(attrs["__qualname__"].rsplit(".", 1)[-1], bases, attrs)
    return cls
