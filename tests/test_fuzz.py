"""Atomicity under bad input: whatever an agent sends (random JSON, wrong types,
SQL fragments, control characters, NUL bytes, unicode, 100 KB payloads, deep
nesting) is an error result or a valid call, never an exception out of
``Session.call`` or ``MirrorEnv.step``; a rejected call never changes the state
and always carries ``{code, message}``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mirrorworld.core.session import Session, ToolResult
from mirrorworld.envs.gymnasium import MirrorEnv
from mirrorworld.worlds.helpdesk import HelpdeskWorld
from mirrorworld.worlds.helpdesk.tools import TOOLS

TOOL_NAMES = [t.name for t in TOOLS]
PARAM_NAMES = sorted({p.name for t in TOOLS for p in t.params})
TASK_IDS = [("refund_damaged", 1), ("cancel_order", 2), ("triage", 3), ("update_email", 4), ("merge_duplicates", 5)]

HOSTILE = [
    "1; DROP TABLE customers; --",
    "' OR '1'='1",
    "Robert'); DROP TABLE tickets;--",
    "801 UNION SELECT security_pin FROM customers",
    "%",
    "_",
    "\\",
    "\x00",
    "a\x00b",
    "\x01\x02\x1b[31m\x7f",
    "\r\n\t\x0b\x0c",
    "ünïcødé ✓ 漢字 🙂",
    "\u202eevil\u200b",
    "\ufeff",
    "NaN",
    "-0",
    "1e309",
    "9" * 400,
    "#801",
    "$-25",
    "",
    " ",
]
HUGE = [
    "x" * 100_000,
    json.dumps({"query": "A" * 100_000}),
    json.dumps({"message": "B" * 19_000}),
    json.dumps({"ticket_id": 801, "body": "C" * 5_000}),
    "[" * 50_000 + "]" * 50_000,
    '{"a":' * 20_000 + "1" + "}" * 20_000,
    json.dumps({"tags": ["t"] * 5_000}),
    json.dumps({k: "D" * 3_000 for k in PARAM_NAMES[:6]}),
]

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
    | st.sampled_from(HOSTILE)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
arg_dicts = st.dictionaries(st.sampled_from(PARAM_NAMES) | st.text(max_size=12), json_values, max_size=5)
tool_names = st.sampled_from(TOOL_NAMES) | st.text(max_size=80) | st.sampled_from(HOSTILE)
arguments = (
    st.none()
    | arg_dicts
    | arg_dicts.map(json.dumps)
    | arg_dicts.map(lambda d: json.dumps(d, ensure_ascii=False))
    | st.text(max_size=200)
    | st.sampled_from(HOSTILE)
    | st.sampled_from(HUGE)
    | json_values.map(json.dumps)
)


def _encodable(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, dict):
        return all(_encodable(k) and _encodable(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_encodable(v) for v in value)
    return True


def _no_lone_surrogates(args: Any) -> bool:
    """Known core bug, tested on its own below: lone surrogates (from JSON escapes) reach SQLite and raise."""
    if isinstance(args, str) and "\\u" in args:
        try:
            return _encodable(json.loads(args))
        except (ValueError, RecursionError):
            return True
    return _encodable(args)


def _check_result(result: ToolResult) -> None:
    assert isinstance(result, ToolResult)
    text = result.content()
    assert text.isascii()
    if not result.ok:
        assert result.data is None
        assert isinstance(result.error, dict)
        assert isinstance(result.error["code"], str) and result.error["code"]
        assert isinstance(result.error["message"], str) and result.error["message"]
        assert json.loads(text) == {"error": result.error}


def _call_and_check(s: Session, tool: Any, args: Any) -> ToolResult:
    before_hash, before_touched, before_clock = s.state_hash(), s.touched(), s.clock
    was_done = s.done
    result = s.call(tool, args)
    _check_result(result)
    if not result.ok:
        assert s.state_hash() == before_hash, f"rejected {tool!r} changed the state"
        assert s.touched() == before_touched and s.clock == before_clock
        assert s.done == was_done
    elif s.world.tools_by_name[tool].kind == "read":
        assert s.state_hash() == before_hash and s.touched() == before_touched
    return result


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    task_index=st.integers(0, len(TASK_IDS) - 1),
    calls=st.lists(st.tuples(tool_names, arguments), min_size=1, max_size=6),
)
def test_session_call_never_raises_and_rejections_change_nothing(
    helpdesk: HelpdeskWorld, task_index: int, calls: list[tuple[str, Any]]
) -> None:
    assume(all(_no_lone_surrogates(a) for _, a in calls))
    task = helpdesk.task(*TASK_IDS[task_index])
    with helpdesk.session(task) as s:
        for tool, args in calls:
            _call_and_check(s, tool, args)
        assert len(s.events) == len(calls)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    tool=st.sampled_from([t.name for t in TOOLS if t.kind != "terminal"]),
    args=st.fixed_dictionaries({}, optional={p: json_values for p in PARAM_NAMES}),
)
def test_schema_shaped_garbage_for_real_tools(helpdesk: HelpdeskWorld, tool: str, args: dict[str, Any]) -> None:
    """Real tool names with argument names they know and values of any type."""
    with helpdesk.session(helpdesk.task("cancel_order", 2)) as s:
        _call_and_check(s, tool, args)
        _call_and_check(s, tool, json.dumps(args))


@pytest.fixture(scope="module")
def env(helpdesk: HelpdeskWorld) -> MirrorEnv:
    return MirrorEnv(helpdesk, max_steps=8)


tool_args = (
    st.text(max_size=300)
    | arg_dicts.map(json.dumps)
    | arg_dicts
    | st.sampled_from(HUGE)
    | st.sampled_from(HOSTILE)
    | st.none()
    | st.integers()
    | st.lists(st.integers(), max_size=3)
)
actions = (
    st.fixed_dictionaries(
        {
            "tool_name": st.integers(-3, len(TOOL_NAMES) + 3)
            | st.sampled_from(TOOL_NAMES)
            | st.text(max_size=40)
            | st.none()
            | st.floats(allow_nan=True),
            "tool_args": tool_args,
        }
    )
    | st.fixed_dictionaries({"tool_name": st.sampled_from(TOOL_NAMES)})
    | st.dictionaries(st.text(max_size=10), json_values, max_size=3)
    | st.none()
    | st.text(max_size=20)
    | st.integers()
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(seed=st.integers(0, 50), steps=st.lists(actions, min_size=1, max_size=10))
def test_env_step_never_raises_and_rejections_change_nothing(env: MirrorEnv, seed: int, steps: list[Any]) -> None:
    assume(all(_no_lone_surrogates(a.get("tool_args")) for a in steps if isinstance(a, dict)))
    env.reset(seed=seed)
    for action in steps:
        before = env.state_hash()
        obs, reward, terminated, truncated, info = env.step(action)
        assert env.observation_space.contains(obs), obs
        assert isinstance(reward, float)
        result = json.loads(obs["last_result"]) if not obs["last_result"].endswith("[truncated]") else None
        if not info["ok"]:
            assert env.state_hash() == before
            assert set(info["error"]) >= {"code", "message"}
            assert result == {"error": info["error"]}
        if terminated or truncated:
            assert "verdict" in info
            env.reset(seed=seed + 1)


# -- hostile inputs, one by one ------------------------------------------------------

EXAMPLES: list[tuple[Any, Any]] = [
    *[("search_customers", {"query": h}) for h in HOSTILE],
    *[("search_tickets", {"query": h, "status": h}) for h in HOSTILE],
    *[("reply_ticket", {"ticket_id": h, "body": h}) for h in HOSTILE],
    *[("get_order", h) for h in HOSTILE + HUGE],
    *[(h, {}) for h in HOSTILE + HUGE[:1]],
    ("update_customer", {"customer_id": 1, "email": "x@y.z'; DROP TABLE customers; --"}),
    ("update_customer", {"customer_id": "1 OR 1=1", "email": "a@b.example"}),
    ("issue_refund", {"order_id": 1, "line_id": 1, "amount": "1e3", "reason": "damaged"}),
    ("issue_refund", {"order_id": 1, "line_id": 1, "amount": "0.001", "reason": "damaged"}),
    ("issue_refund", {"order_id": 1, "line_id": 1, "amount": -5, "reason": "damaged"}),
    ("issue_refund", {"order_id": 1, "line_id": 1, "amount": 10**11, "reason": "damaged"}),
    ("add_tags", {"ticket_id": 801, "tags": ["ok", "bad tag!", "x" * 41]}),
    ("add_tags", {"ticket_id": 801, "tags": [[]]}),
    ("merge_tickets", {"source_ticket_id": 801, "target_ticket_id": 801}),
    ("respond", {"message": " \n\t"}),
    ("respond", {"message": "\x00"}),
    ("get_customer", {"customer_id": [[[[[[[[[[1]]]]]]]]]]}),
    ("get_customer", '{"customer_id": ' + "[" * 500 + "]" * 500 + "}"),
    ("get_customer", '{"customer_id": 1, "customer_id": "2"}'),
    ("get_customer", '{"customer_id": NaN}'),
    ("get_customer", '{"customer_id": Infinity}'),
    ("get_customer", '{"customer_id": 1e400}'),
    ("get_customer", '"just a string"'),
    ("get_customer", "null"),
    ("get_customer", "\x00"),
    ("get_customer", {1: 2}),
    ("get_customer", ["customer_id", 1]),
    ("get_customer", 42),
    (None, None),
    (42, {}),
    (b"get_customer", {"customer_id": 1}),
    ("get_customer\x00", {"customer_id": 1}),
    ("GET_CUSTOMER", {"customer_id": 1}),
    (" get_customer", {"customer_id": 1}),
]


def _example_id(i: int, tool: Any) -> str:
    name = tool if isinstance(tool, str) and tool.isidentifier() and len(tool) < 30 else "junk_tool"
    return f"{i}-{name}"


@pytest.mark.parametrize(("tool", "args"), EXAMPLES, ids=[_example_id(i, t) for i, (t, _) in enumerate(EXAMPLES)])
def test_hostile_calls(helpdesk: HelpdeskWorld, tool: Any, args: Any) -> None:
    with helpdesk.session(helpdesk.task("refund_damaged", 1)) as s:
        _call_and_check(s, tool, args)
        # The database is intact and still answers.
        assert s.db.execute("SELECT COUNT(*) FROM customers").fetchone()[0] > 0
        if not s.done:
            assert s.call("get_ticket", {"ticket_id": 801}).ok


def test_sql_in_arguments_is_data(helpdesk: HelpdeskWorld) -> None:
    with helpdesk.session(helpdesk.task("refund_damaged", 1)) as s:
        body = "'); DELETE FROM customers; --"
        assert s.call("reply_ticket", {"ticket_id": 801, "body": body}).ok
        thread = s.call("get_ticket", {"ticket_id": 801}).data["messages"]
        assert thread[-1]["body"] == body
        wildcards = s.call("search_customers", {"query": "%_"})
        assert wildcards.ok and wildcards.data["customers"] == []  # LIKE wildcards are literal
        assert s.db.execute("SELECT COUNT(*) FROM customers").fetchone()[0] > 0


SURROGATES = [
    ("search_customers", '{"query": "ab\\ud800"}'),
    ("reply_ticket", '{"ticket_id": 801, "body": "hello \\udfff"}'),
    ("update_customer", '{"customer_id": 1, "email": "a\\ud800@b.example"}'),
]


@pytest.mark.parametrize(("tool", "args"), SURROGATES, ids=[t for t, _ in SURROGATES])
def test_lone_surrogates_are_an_error_not_an_exception(helpdesk: HelpdeskWorld, tool: str, args: str) -> None:
    with helpdesk.session(helpdesk.task("refund_damaged", 1)) as s:
        _call_and_check(s, tool, args)


def test_lone_surrogates_through_env_step(env: MirrorEnv) -> None:
    env.reset(seed=0)
    obs, *_ = env.step({"tool_name": "search_customers", "tool_args": '{"query": "ab\\ud800"}'})
    assert "invalid_arguments" in obs["last_result"]


def _deep(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def test_deeply_nested_dict_arguments(helpdesk: HelpdeskWorld) -> None:
    with helpdesk.session(helpdesk.task("refund_damaged", 1)) as s:
        _call_and_check(s, "get_customer", {"customer_id": _deep(5_000)})


def test_deeply_nested_tool_name_through_env_step(env: MirrorEnv) -> None:
    env.reset(seed=0)
    obs, *_ = env.step({"tool_name": _deep(5_000), "tool_args": "{}"})
    assert "unknown_tool" in obs["last_result"]
