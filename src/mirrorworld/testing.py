"""Conformance checks for mirror worlds, for world authors and for our own tests.

:func:`check_world` is to a :class:`~mirrorworld.core.world.World` what
Gymnasium's ``check_env`` is to an environment: call it in your world's test
suite and it raises :class:`AssertionError`, naming the tool, task or call at
fault, when the world breaks a promise every world makes:

* **tools** — every tool has an OpenAI function schema derived from its
  docstring (an object with ``properties`` and a ``required`` subset of them,
  every parameter typed and described); tool names are unique and valid
  function names; exactly one tool is ``terminal`` and it takes the final
  message as its one required string parameter;
* **read tools are reads** — calling any read tool, with the arguments the gold
  solutions use and with bad ones (wrong types, unknown names, invalid JSON,
  hostile strings), leaves ``Session.state_hash()`` and ``Session.touched()``
  unchanged, and every rejected call carries an error ``{code, message}``;
* **tasks** — for every task family and seeds ``0 .. seeds-1`` the task is a
  pure function of its seed (generated twice, and by a second build of the
  world, it has the same digest) and survives a round trip through
  ``to_dict``/JSON/``from_dict``; its gold solution replays without an error and
  the verifier passes it with score 1.0; a session with no calls, one that only
  refuses and one that only claims success (``"Done, everything is
  resolved."``) through the terminal tool all score 0;
* **identity** — ``world.content_hash`` and the pristine image's digest are the
  same for a second instance of the world's class built with the same
  ``scale`` and ``data_seed``.

Usage::

    from mirrorworld.testing import check_world

    def test_my_world_conforms():
        check_world(MyWorld(), seeds=5)

A check that cannot even run (the world's class cannot be built again, the
verifier raises) is reported as an :class:`AssertionError` too, chained to the
original exception.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any, NoReturn

from mirrorworld.core.session import Session, ToolResult
from mirrorworld.core.task import Task, TaskFamily
from mirrorworld.core.tools import ToolSpec
from mirrorworld.core.world import World
from mirrorworld.verify.verifier import verify

__all__ = ["CLAIM_SUCCESS", "REFUSAL", "check_world"]

CLAIM_SUCCESS = "Done, everything is resolved."
"""The final message of the claim-success baseline: success claimed, nothing done."""

REFUSAL = "I'm sorry, I can't help with that."
"""The final message of the refusal baseline."""

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_JSON_TYPES = frozenset({"string", "integer", "number", "boolean", "array", "object", "null"})
_KINDS = frozenset({"read", "write", "terminal"})
_MAX_GOLD_CALLS_PER_TOOL = 6

# Type-valid values that no world should choke on (nonexistent ids, hostile text).
_HOSTILE: dict[str, tuple[Any, ...]] = {
    "integer": (0, -1, 10**12),
    "number": ("0", "-5", "999999999.99"),
    "string": ("", "1; DROP TABLE customers; --", "' OR '1'='1", "\x00\x01\x1b[2J", "ünïcødé ✓ 漢字", "%_\\"),
    "boolean": (True, False),
    "array": ([], ["1; DROP TABLE tickets; --"]),
}
# Values of the wrong type, which must be refused with an error result.
_WRONG_TYPE: dict[str, Any] = {
    "integer": "not a number",
    "number": "lots",
    "string": {"nested": ["object"]},
    "boolean": "perhaps",
    "array": 7,
    "object": "not an object",
}


def check_world(world: World, *, seeds: int = 3) -> None:
    """Check that ``world`` keeps the promises every mirror world makes.

    See the module docstring for the list. ``seeds`` is how many task seeds
    (``0 .. seeds-1``) of every family are generated, solved and graded.
    Raises :class:`AssertionError` describing the first problem found.
    """
    if seeds < 1:
        raise ValueError("seeds must be at least 1")
    terminal = _check_tools(world)
    message_param = _message_param(terminal)
    twin = _second_build(world)
    _check_identity(world, twin)
    if not world.families:
        _fail(f"{world.id}: declares no task families")
    names = [f.name for f in world.families]
    if len(set(names)) != len(names):
        _fail(f"{world.id}: duplicate task family names {sorted(n for n in set(names) if names.count(n) > 1)}")
    for family in world.families:
        for seed in range(seeds):
            task = _check_task(world, twin, family, seed)
            _check_gold(world, task)
            _check_baselines(world, task, terminal.name, message_param)
            _check_read_tools(world, task)


def _fail(message: str) -> NoReturn:
    raise AssertionError(message)


# -- tools ---------------------------------------------------------------------


def _check_tools(world: World) -> ToolSpec:
    """Check every tool's declaration and schema; return the terminal tool."""
    if not world.tools:
        _fail(f"{world.id}: declares no tools")
    names = [t.name for t in world.tools]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        _fail(f"{world.id}: duplicate tool names {dupes}")
    if world.tool_names != tuple(names) or set(world.tools_by_name) != set(names):
        _fail(f"{world.id}: tool_names/tools_by_name do not match tools")
    for spec in world.tools:
        _check_schema(world, spec)
    terminals = [t for t in world.tools if t.kind == "terminal"]
    if len(terminals) != 1:
        _fail(f"{world.id}: needs exactly one terminal tool, has {len(terminals)}: {[t.name for t in terminals]}")
    return terminals[0]


def _check_schema(world: World, spec: ToolSpec) -> None:
    where = f"{world.id}: tool {spec.name!r}"
    if not _TOOL_NAME.match(spec.name):
        _fail(f"{where}: name must match {_TOOL_NAME.pattern}")
    if spec.kind not in _KINDS:
        _fail(f"{where}: kind {spec.kind!r} is not one of {sorted(_KINDS)}")
    schema = spec.openai_schema()
    try:
        json.dumps(schema)
    except (TypeError, ValueError) as exc:
        raise AssertionError(f"{where}: schema is not JSON-serialisable: {exc}") from exc
    if not isinstance(schema, dict) or schema.get("type") != "function" or not isinstance(schema.get("function"), dict):
        _fail(f"{where}: schema must be {{'type': 'function', 'function': {{...}}}}")
    fn = schema["function"]
    if fn.get("name") != spec.name:
        _fail(f"{where}: schema names the function {fn.get('name')!r}")
    if not isinstance(fn.get("description"), str) or not fn["description"].strip():
        _fail(f"{where}: needs a description (the docstring's summary)")
    params = fn.get("parameters")
    if not isinstance(params, dict) or params.get("type") != "object":
        _fail(f"{where}: parameters must be a JSON schema of type 'object'")
    props = params.get("properties")
    required = params.get("required", [])
    if not isinstance(props, dict):
        _fail(f"{where}: parameters need a 'properties' object")
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        _fail(f"{where}: 'required' must be a list of parameter names")
    if len(set(required)) != len(required) or not set(required) <= set(props):
        _fail(f"{where}: 'required' {required} must name distinct declared properties {sorted(props)}")
    if [p.name for p in spec.params] != list(props):
        _fail(f"{where}: schema properties {list(props)} differ from the declared parameters")
    for name, prop in props.items():
        _check_property(f"{where} parameter {name!r}", prop)


def _check_property(where: str, prop: Any) -> None:
    if not isinstance(prop, dict):
        _fail(f"{where}: schema must be an object")
    kind = prop.get("type")
    if kind not in _JSON_TYPES:
        _fail(f"{where}: type {kind!r} is not a JSON schema type")
    if not isinstance(prop.get("description"), str) or not prop["description"].strip():
        _fail(f"{where}: needs a description (document it under Args: in the docstring)")
    if "enum" in prop:
        enum = prop["enum"]
        if not isinstance(enum, list) or not enum or len(set(map(str, enum))) != len(enum):
            _fail(f"{where}: enum must be a non-empty list of distinct values")
        if kind == "string" and not all(isinstance(v, str) for v in enum):
            _fail(f"{where}: enum values must be strings")
    if kind == "array" and not (isinstance(prop.get("items"), dict) and prop["items"].get("type") in _JSON_TYPES):
        _fail(f"{where}: an array needs a typed 'items' schema")


def _message_param(terminal: ToolSpec) -> str:
    required = [p for p in terminal.params if p.required]
    if len(required) != 1 or required[0].schema.get("type") != "string":
        _fail(
            f"terminal tool {terminal.name!r} must take the final message as its one required string parameter, "
            f"has required {[p.name for p in required]}"
        )
    return required[0].name


# -- identity ------------------------------------------------------------------


def _second_build(world: World) -> World:
    cls = type(world)
    try:
        return cls(scale=world.scale, data_seed=world.data_seed)
    except Exception as exc:
        raise AssertionError(
            f"{world.id}: cannot build a second {cls.__name__}(scale={world.scale}, data_seed={world.data_seed}) "
            f"to check determinism: {exc!r}"
        ) from exc


def _check_identity(world: World, twin: World) -> None:
    h = world.content_hash
    if not isinstance(h, str) or not h:
        _fail(f"{world.id}: content_hash must be a non-empty string")
    if world.content_hash != h or twin.content_hash != h:
        _fail(f"{world.id}: content_hash is not stable ({h} vs {twin.content_hash} for a second instance)")
    if not world.id.endswith(f"-v{world.version}"):
        _fail(f"{world.id}: the id must carry the version (-v{world.version})")
    if world.image.digest != twin.image.digest:
        _fail(
            f"{world.id}: two builds of the image differ ({world.image.digest[:12]} vs {twin.image.digest[:12]}): "
            "the data generator is not a pure function of (data_seed, scale)"
        )


# -- tasks ---------------------------------------------------------------------


def _check_task(world: World, twin: World, family: TaskFamily, seed: int) -> Task:
    where = f"{world.id}: family {family.name!r} seed {seed}"
    try:
        first = family.task(world.name, world.image, seed)
        second = family.task(world.name, world.image, seed)
        other = twin.family(family.name).task(twin.name, twin.image, seed)
        cached = world.task(family.name, seed)
    except Exception as exc:
        raise AssertionError(f"{where}: task generation raised {exc!r}") from exc
    if (first.world, first.family, first.seed) != (world.name, family.name, seed):
        _fail(f"{where}: task says world={first.world!r} family={first.family!r} seed={first.seed}")
    digests = {first.digest(), second.digest(), other.digest(), cached.digest()}
    if len(digests) != 1:
        _fail(f"{where}: task generation is not deterministic (digests {sorted(digests)})")
    try:
        again = Task.from_dict(json.loads(json.dumps(first.to_dict())))
    except Exception as exc:
        raise AssertionError(f"{where}: task does not survive to_dict/JSON/from_dict: {exc!r}") from exc
    if again.digest() != first.digest():
        _fail(f"{where}: task changes in a to_dict/JSON/from_dict round trip")
    if not first.gold:
        _fail(f"{where}: task {first.id} has no gold solution")
    return cached


def _grade(session: Session, what: str) -> float:
    task = session.task
    if task is None:
        raise ValueError("only a session with a task can be graded")
    try:
        verdict = verify(session)
    except Exception as exc:
        raise AssertionError(f"{task.id}: the verifier raised grading {what}: {exc!r}") from exc
    if verdict.passed != (verdict.score == 1.0) or verdict.score not in (0.0, 1.0):
        _fail(f"{task.id}: verdict of {what} is inconsistent (passed={verdict.passed}, score={verdict.score})")
    if what == "the gold solution" and not verdict.passed:
        _fail(f"{task.id}: the gold solution does not pass: {'; '.join(verdict.evidence) or 'no evidence'}")
    return verdict.score


def _check_gold(world: World, task: Task) -> None:
    with world.session(task) as s:
        for i, call in enumerate(task.gold):
            result = _call(s, call.tool, call.args, f"gold call {i} ({call.tool})")
            if not result.ok:
                _fail(f"{task.id}: gold call {i} {call.tool}({call.args}) fails: {result.error}")
        _grade(s, "the gold solution")


def _check_baselines(world: World, task: Task, terminal: str, param: str) -> None:
    with world.session(task) as s:
        if _grade(s, "a session with no calls") != 0.0:
            _fail(f"{task.id}: a session that does nothing scores above 0")
    for label, text in (("refusal", REFUSAL), ("claim of success", CLAIM_SUCCESS)):
        with world.session(task) as s:
            result = _call(s, terminal, {param: text}, f"the terminal tool with a {label}")
            if not result.ok:
                _fail(f"{task.id}: the terminal tool {terminal!r} refuses a plain {label}: {result.error}")
            if _grade(s, f"a {label} ({text!r})") != 0.0:
                _fail(f"{task.id}: a {label} alone ({text!r}) scores above 0")


def _call(session: Session, tool: str, args: Mapping[str, Any] | str | None, what: str) -> ToolResult:
    task_id = session.task.id if session.task is not None else "no task"
    try:
        result = session.call(tool, args)
    except Exception as exc:
        raise AssertionError(f"{task_id}: {what} raised {exc!r} out of Session.call (a bug in the world)") from exc
    if not result.ok:
        error = result.error
        if not (
            isinstance(error, dict) and isinstance(error.get("code"), str) and isinstance(error.get("message"), str)
        ):
            _fail(f"{task_id}: {what} was refused without an error {{code, message}}: {error!r}")
    return result


# -- read tools ----------------------------------------------------------------


def _check_read_tools(world: World, task: Task) -> None:
    reads = [t for t in world.tools if t.kind == "read"]
    if not reads:
        return
    pool: dict[str, list[Any]] = {}
    for call in task.gold:
        if not isinstance(call.args, dict):
            continue
        for name, value in call.args.items():
            if value not in pool.setdefault(name, []):
                pool[name].append(value)
    with world.session(task) as s:
        _probe_reads(s, reads, task, pool, "in the initial state")
        for call in task.gold:
            if world.tools_by_name.get(call.tool) is None or world.tools_by_name[call.tool].kind == "terminal":
                break
            s.call(call.tool, call.args)
        _probe_reads(s, reads, task, pool, "after the gold solution's writes")


def _probe_reads(s: Session, reads: list[ToolSpec], task: Task, pool: dict[str, list[Any]], state: str) -> None:
    before_hash, before_touched = s.state_hash(), s.touched()
    for spec in reads:
        for args, must_fail in _read_args(spec, task, pool):
            shown = args if isinstance(args, str) else json.dumps(args, default=repr)[:200]
            what = f"read tool {spec.name}({shown}) {state}"
            result = _call(s, spec.name, args, what)
            if must_fail and result.ok:
                _fail(f"{task.id}: {what} accepted arguments it must refuse")
            if s.state_hash() != before_hash or s.touched() != before_touched:
                _fail(f"{task.id}: {what} changed the state (a read tool must never write)")
            if s.done:
                _fail(f"{task.id}: {what} ended the episode")


def _read_args(spec: ToolSpec, task: Task, pool: dict[str, list[Any]]) -> Iterator[tuple[Any, bool]]:
    """(arguments, whether the call must be refused) to try on a read tool."""
    yield None, any(p.required for p in spec.params)
    names = {p.name for p in spec.params}
    for call in task.gold:  # the gold calls' own arguments, as they are
        if isinstance(call.args, dict):
            yield dict(call.args), any(k not in names for k in call.args)
    matched = {p.name: pool[p.name] for p in spec.params if p.name in pool}
    if matched:
        for i in range(min(_MAX_GOLD_CALLS_PER_TOOL, max(len(v) for v in matched.values()))):
            yield {k: v[i % len(v)] for k, v in matched.items()}, False
    yield "{not json", True
    yield "[1, 2, 3]", True
    yield {"__mw_no_such_argument__": 1}, True
    for p in spec.params:
        kind = p.schema.get("type", "")
        if "enum" in p.schema:
            yield {p.name: "__mw_no_such_choice__"}, True
        elif kind in _WRONG_TYPE:
            yield {p.name: _WRONG_TYPE[kind]}, True
        for value in _HOSTILE.get(kind, ()):
            if "enum" not in p.schema:
                yield {p.name: value}, False
    yield {p.name: "x" * 100_000 for p in spec.params} or "x" * 100_000, True
