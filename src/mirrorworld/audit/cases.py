"""The audit's test cases, derived from a task's gold trajectory.

Nothing here names a world, a tool or a task family. Cases come from the
tools' declarations (``read``/``write``/``terminal``, ``Ref`` and free-text
parameters, enums, numbers), the task's facts and scope, the image's rows, and
the world's :class:`~mirrorworld.core.world.AuditHooks`.

* **null agents** (must score 0): noop, refuse, claim success, escalate-only,
  spray (a final message listing every plausible answer);
* **mutants** (must fail): drop a write, swap a target for a similar record,
  wrong argument value, an extra write to an unrelated record, a
  policy-violating shortcut, a false claim (writes dropped, message kept), a
  wrong fact in the message, a write followed by its undo;
* **variants** (must pass): extra reads, reordered independent writes,
  equivalent argument formats, a refused call then the right one, other valid
  paths the world names.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from typing import Any, Literal

from mirrorworld.core.task import Fact, Task, ToolCall
from mirrorworld.core.tools import ToolSpec
from mirrorworld.core.world import World

__all__ = ["CLAIM", "REFUSAL", "Case", "mutant_cases", "null_cases", "variant_cases"]

REFUSAL = "I'm sorry, but I can't help with that request."
CLAIM = "All done! I've taken care of everything you asked for and your issue is fully resolved."


@dataclass(frozen=True)
class Case:
    """One trajectory with the result it must get."""

    kind: Literal["null", "mutant", "variant"]
    operator: str
    name: str
    calls: tuple[ToolCall, ...]
    must_pass: bool
    equivalence_allowed: bool = True
    """Whether a mutant that ends exactly like the gold counts as equivalent (not a survivor)."""
    meta: dict[str, Any] = field(default_factory=dict)


def _terminal(world: World) -> ToolSpec:
    return next(t for t in world.tools if t.kind == "terminal")


def _message_param(world: World) -> str:
    return next(p.name for p in _terminal(world).params if p.free_text or p.schema.get("type") == "string")


def _say(world: World, text: str) -> ToolCall:
    return ToolCall(_terminal(world).name, {_message_param(world): text})


def _split(world: World, task: Task) -> tuple[list[ToolCall], ToolCall | None]:
    gold = list(task.gold)
    if gold and world.tools_by_name[gold[-1].tool].kind == "terminal":
        return gold[:-1], gold[-1]
    return gold, None


def _is_write(world: World, call: ToolCall) -> bool:
    return world.tools_by_name[call.tool].kind == "write"


def _args(call: ToolCall) -> dict[str, Any]:
    return dict(call.args) if isinstance(call.args, dict) else {}


def _message(call: ToolCall | None) -> str:
    if call is None:
        return ""
    return " ".join(str(v) for v in _args(call).values() if isinstance(v, str))


# -- null agents -----------------------------------------------------------------


def _spray(world: World, task: Task) -> str:
    """A final message listing every plausible answer the task's facts admit."""
    parts = ["I've resolved everything: refunded, cancelled, updated, escalated and merged as needed."]
    for fact in task.facts:
        values = [fact.value, *fact.distractors, *_perturbed(fact)]
        parts.append(f"The {fact.label} is one of: " + ", ".join(values) + ".")
    return " ".join(parts)


def null_cases(world: World, task: Task) -> Iterator[Case]:
    hooks = world.audit_hooks()
    yield Case("null", "noop", "does nothing", (), False)
    yield Case("null", "refuse", "refuses", (_say(world, REFUSAL),), False)
    yield Case("null", "claim", "claims success without acting", (_say(world, CLAIM),), False)
    escalate = hooks.escalate_only(task)
    if escalate:
        yield Case("null", "escalate_only", "only escalates / transfers", tuple(escalate), False)
    yield Case("null", "spray", "lists every plausible answer", (_say(world, _spray(world, task)),), False)


# -- mutants ---------------------------------------------------------------------


def _similar_rows(world: World, table: str, pk: int, exclude: set[int], limit: int = 8) -> list[int]:
    """Rows of ``table`` most like row ``pk``: those sharing the most column values."""
    cols = [c for c in world.image.columns[table] if c != "id"]
    row = world.image.query(f"SELECT {', '.join(cols)} FROM {table} WHERE rowid=?", (pk,))
    if not row:
        # A row the task's setup created: compare with the pristine rows by nothing but nearness.
        ids = [
            r[0]
            for r in world.image.query(
                f"SELECT rowid FROM {table} ORDER BY ABS(rowid - ?) LIMIT ?", (pk, limit + len(exclude) + 1)
            )
        ]
        return [i for i in ids if i != pk and i not in exclude][:limit]
    score = " + ".join(f"({c} IS ?)" for c in cols)
    ids = [
        r[0]
        for r in world.image.query(
            f"SELECT rowid FROM {table} WHERE rowid<>? ORDER BY ({score}) DESC, ABS(rowid - ?) LIMIT ?",
            (pk, *row[0], pk, limit + len(exclude)),
        )
    ]
    return [i for i in ids if i not in exclude][:limit]


def _scope_ids(world: World, task: Task) -> set[int]:
    return {i for _kind, i in task.scope}


def _wrong_values(spec: ToolSpec, name: str, value: Any) -> list[Any]:
    param = next(p for p in spec.params if p.name == name)
    schema = param.schema
    if param.ref or param.free_text:
        return []
    if "enum" in schema:
        return [c for c in schema["enum"] if c != value][:1]
    kind = schema.get("type")
    if kind == "number":
        dec = Decimal(str(value))
        return [str(dec - 1 if dec > 1 else dec / 2)]
    if kind == "integer" and isinstance(value, int):
        return [value + 1]
    if kind == "boolean" and isinstance(value, bool):
        return [not value]
    if kind == "string" and isinstance(value, str):
        return ["x" + value]
    if kind == "array" and isinstance(value, list):
        return [value[:-1] if len(value) > 1 else [*value, "wrong"]]
    return []


def _perturbed(fact: Fact) -> list[str]:
    if fact.kind in ("money", "number", "id"):
        dec = Decimal(fact.value)
        step = Decimal("1.00") if fact.kind == "money" else Decimal(1)
        return [str(dec + step)]
    if fact.kind == "date":
        return [(date.fromisoformat(fact.value[:10]) + timedelta(days=1)).isoformat()]
    return ["x" + fact.value]


def mutant_cases(world: World, task: Task, rng: random.Random) -> Iterator[Case]:
    hooks = world.audit_hooks()
    gold = list(task.gold)
    body, final = _split(world, task)
    writes = [i for i, c in enumerate(gold) if _is_write(world, c)]

    for i in writes:
        yield Case(
            "mutant", "drop_write", f"drop {gold[i].tool} (call {i + 1})", tuple(gold[:i] + gold[i + 1 :]), False
        )

    in_scope = _scope_ids(world, task)
    for i in writes:
        spec = world.tools_by_name[gold[i].tool]
        for p in spec.params:
            value = _args(gold[i]).get(p.name)
            if p.ref is None or not isinstance(value, int):
                continue
            for other in _similar_rows(world, p.ref, value, in_scope | {value}, limit=4):
                swapped = ToolCall(gold[i].tool, {**_args(gold[i]), p.name: other})
                yield Case(
                    "mutant",
                    "swap_target",
                    f"{gold[i].tool}: {p.name} {value} -> similar {other}",
                    tuple([*gold[:i], swapped, *gold[i + 1 :]]),
                    False,
                    meta={"try_group": (i, p.name)},
                )

    for i in writes:
        spec = world.tools_by_name[gold[i].tool]
        for name, value in _args(gold[i]).items():
            for wrong in _wrong_values(spec, name, value):
                changed = ToolCall(gold[i].tool, {**_args(gold[i]), name: wrong})
                yield Case(
                    "mutant",
                    "wrong_value",
                    f"{gold[i].tool}: {name} {value!r} -> {wrong!r}",
                    tuple([*gold[:i], changed, *gold[i + 1 :]]),
                    False,
                )

    extra = find_collateral(world, task, rng)
    if extra is not None:
        yield Case(
            "mutant",
            "collateral",
            f"extra {extra.tool} on an unrelated record",
            tuple(body + [extra] + ([final] if final else [])),
            False,
            equivalence_allowed=False,
        )

    for name, calls in hooks.policy_mutants(task):
        yield Case("mutant", "policy_shortcut", name, tuple(calls), False, equivalence_allowed=False)

    if final is not None and writes:
        yield Case("mutant", "false_claim", "message kept, every write dropped", (final,), False)

    if final is not None:
        message = _message(final)
        for fact in task.facts:
            for wrong in [*fact.distractors[:1], *_perturbed(fact)][:2]:
                text = _replace_fact(message, fact, wrong)
                if text != message:
                    yield Case(
                        "mutant",
                        "wrong_fact",
                        f"message says {wrong} for {fact.label}",
                        tuple([*body, _say(world, text)]),
                        False,
                    )

    for i in writes:
        undo = _plan_undo(world, task, gold, i)
        if undo:
            yield Case(
                "mutant",
                "undo",
                f"{gold[i].tool} (call {i + 1}) then its undo",
                tuple(gold[: i + 1] + undo + gold[i + 1 :]),
                False,
            )


def _plan_undo(world: World, task: Task, gold: list[ToolCall], i: int) -> list[ToolCall] | None:
    with world.session(task) as s:
        for call in gold[:i]:
            s.call(call.tool, call.args)
        return world.audit_hooks().undo(s, gold[i])


def _replace_fact(message: str, fact: Fact, wrong: str) -> str:
    if fact.kind in ("money", "number", "id"):
        dec = Decimal(fact.value)
        pattern = re.compile(r"(?<![\d.])" + re.escape(fact.value) + r"(?![\d])")
        if not pattern.search(message) and dec == dec.to_integral_value():
            pattern = re.compile(r"(?<![\d.])" + re.escape(str(int(dec))) + r"(?![\d])")
        return pattern.sub(wrong, message)
    return re.sub(re.escape(fact.value), wrong, message, flags=re.I)


def _outside(world: World, task: Task, call: ToolCall) -> bool:
    """Whether every record ``call`` names exists in the pristine image and has an id no scope entity has.

    Deliberately independent of ``World.owner`` (the mapping under audit): a
    record whose id matches any scope id is skipped, however it is owned.
    """
    scope = _scope_ids(world, task)
    for table, pk in _refs(world, call):
        if pk in scope or not world.image.query(f"SELECT 1 FROM {table} WHERE rowid=?", (pk,)):
            return False
    return True


def collateral_candidates(world: World, task: Task, rng: random.Random) -> list[ToolCall]:
    """Writes that would touch records outside the task's scope, most plausible first.

    The same family's gold writes for other seeds (valid in their own context),
    then the gold's writes retargeted at similar records, then any write tool on
    random records.
    """
    out: list[ToolCall] = []
    for seed in range(task.seed + 1, task.seed + 6):
        other = world.task(task.family, seed)
        out += [c for c in other.gold if _is_write(world, c) and _refs(world, c) and _outside(world, task, c)]
    for call in task.gold:
        if not _is_write(world, call):
            continue
        spec = world.tools_by_name[call.tool]
        for p in spec.params:
            value = _args(call).get(p.name)
            if p.ref and isinstance(value, int):
                for other_id in _similar_rows(world, p.ref, value, _scope_ids(world, task) | {value}, limit=12):
                    out.append(ToolCall(call.tool, {**_args(call), p.name: other_id}))
    out += _random_writes(world, task, rng)
    return out


def find_collateral(world: World, task: Task, rng: random.Random) -> ToolCall | None:
    """The first candidate that, after the gold's writes, succeeds and changes rows the gold leaves alone.

    Candidates name only records outside the scope (by id); whether the
    verifier then sees the change as collateral is what the audit tests, so
    this search does not consult the world's ownership mapping.
    """
    body, _final = _split(world, task)
    for candidate in collateral_candidates(world, task, rng)[:60]:
        if not _outside(world, task, candidate):
            continue
        with world.session(task) as s:
            for call in body:
                s.call(call.tool, call.args)
            before = {(c.table, c.pk) for c in s.changes()}
            if not s.call(candidate.tool, candidate.args).ok:
                continue
            if any((c.table, c.pk) not in before and c.table != "sim_clock" for c in s.changes()):
                return candidate
    return None


def _random_writes(world: World, task: Task, rng: random.Random) -> list[ToolCall]:
    """Every write tool, on random records, with plausible arguments."""
    out = []
    scope = _scope_ids(world, task)
    templates = [c for c in task.gold if _is_write(world, c)]
    templates += [ToolCall(t.name, {}) for t in world.tools if t.kind == "write"]
    for template in templates:
        spec = world.tools_by_name[template.tool]
        args = _args(template)
        for p in spec.params:
            if p.ref is not None:
                n = int(world.image.query(f"SELECT COUNT(*) FROM {p.ref}")[0][0])
                pick = rng.randint(1, max(1, n))
                while pick in scope and n > len(scope):
                    pick = rng.randint(1, n)
                args[p.name] = pick
            elif p.name not in args and p.required:
                args[p.name] = _plausible(p.schema)
        out.append(ToolCall(template.tool, args))
    return out


def _plausible(schema: dict[str, Any]) -> Any:
    if "enum" in schema:
        return schema["enum"][0]
    return {"number": "1.00", "integer": 1, "boolean": False, "array": ["audit"]}.get(schema.get("type", ""), "audit")


# -- variants --------------------------------------------------------------------


def _reads_for(world: World, calls: list[ToolCall]) -> list[ToolCall]:
    known: dict[str, set[int]] = {}
    for call in calls:
        spec = world.tools_by_name[call.tool]
        for p in spec.params:
            value = _args(call).get(p.name)
            if p.ref and isinstance(value, int):
                known.setdefault(p.ref, set()).add(value)
    reads = []
    for spec in world.tools:
        if spec.kind != "read":
            continue
        required = [p for p in spec.params if p.required]
        if not required:
            reads.append(ToolCall(spec.name, {}))
        elif len(required) == 1 and required[0].ref in known:
            reads += [ToolCall(spec.name, {required[0].name: v}) for v in sorted(known[required[0].ref])]
    return reads


def _refs(world: World, call: ToolCall) -> set[tuple[str, int]]:
    spec = world.tools_by_name[call.tool]
    return {(p.ref, _args(call)[p.name]) for p in spec.params if p.ref and isinstance(_args(call).get(p.name), int)}


def _reformat(world: World, call: ToolCall) -> ToolCall:
    """The same call with every argument in another harmless format."""
    spec = world.tools_by_name[call.tool]
    out: dict[str, Any] = {}
    for name, value in _args(call).items():
        param = next(p for p in spec.params if p.name == name)
        kind = param.schema.get("type")
        if param.free_text and isinstance(value, str):
            out[name] = _reformat_prose(value)
        elif "enum" in param.schema and isinstance(value, str):
            out[name] = f"  {value.upper()} "
        elif kind == "number":
            out[name] = f"${Decimal(str(value)):.2f}" if Decimal(str(value)) >= 1 else float(value)
        elif kind == "integer" and isinstance(value, int) and not isinstance(value, bool):
            out[name] = str(value)
        elif kind == "boolean" and isinstance(value, bool):
            out[name] = "true" if value else "false"
        else:
            out[name] = value
    return ToolCall(call.tool, out)


_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


def _reformat_prose(text: str) -> str:
    """Money as 'N dollars', ISO dates spelled out, different case: the same facts."""
    text = re.sub(r"\$(\d+(?:\.\d+)?)", lambda m: f"{m.group(1)} dollars", text)
    text = re.sub(
        r"\b(\d{4})-(\d{2})-(\d{2})\b",
        lambda m: f"{_MONTHS[int(m.group(2)) - 1]} {int(m.group(3))}, {m.group(1)}",
        text,
    )
    return text.upper()


def variant_cases(world: World, task: Task) -> Iterator[Case]:
    hooks = world.audit_hooks()
    gold = list(task.gold)
    body, final = _split(world, task)
    reads = _reads_for(world, gold)
    if reads:
        yield Case("variant", "extra_reads", "extra reads before acting", tuple(reads + gold), True)
        interleaved: list[ToolCall] = []
        for call in gold:
            interleaved += [r for r in reads if _refs(world, r) & _refs(world, call)] + [call]
        yield Case("variant", "extra_reads", "reads interleaved with the writes", tuple(interleaved), True)
    for i in range(len(body) - 1):
        a, b = body[i], body[i + 1]
        if _is_write(world, a) and _is_write(world, b) and not (_refs(world, a) & _refs(world, b)):
            swapped = body[:i] + [b, a] + body[i + 2 :] + ([final] if final else [])
            yield Case("variant", "reorder", f"{a.tool} and {b.tool} swapped", tuple(swapped), True)
    reformatted = tuple(_reformat(world, c) for c in gold)
    if reformatted != tuple(gold):
        yield Case("variant", "arg_formats", "numbers, ids, enums, booleans and prose reformatted", reformatted, True)
    writes = [i for i, c in enumerate(gold) if _is_write(world, c) or world.tools_by_name[c.tool].kind == "terminal"]
    if writes:
        i = writes[0]
        yield Case(
            "variant",
            "recovered_error",
            "a malformed call, then the right one",
            tuple([*gold[:i], ToolCall(gold[i].tool, "{not json"), *gold[i:]]),
            True,
        )
    for name, calls in hooks.alternative_solutions(task):
        yield Case("variant", "alt_path", name, tuple(calls), True)
