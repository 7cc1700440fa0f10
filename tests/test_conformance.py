"""``mirrorworld.testing.check_world``: every registered world passes it, and it
catches each kind of broken world (one defect per tiny-world subclass)."""

from __future__ import annotations

import dataclasses
import itertools
import random
import sqlite3
from collections.abc import Sequence
from typing import Any

import pytest

import mirrorworld as mw
from conftest import BumpFamily, TinyWorld, get_counter, respond, set_counter
from mirrorworld.core.registry import default
from mirrorworld.core.session import ToolContext
from mirrorworld.core.task import Fact, Task, TaskFamily, ToolCall
from mirrorworld.core.tools import Param, ToolSpec, tool
from mirrorworld.errors import ToolError
from mirrorworld.testing import CLAIM_SUCCESS, check_world

# -- the checker accepts good worlds ------------------------------------------------


@pytest.mark.parametrize("name", default.names())
def test_every_registered_world_conforms(name: str) -> None:
    check_world(default.get(name))


def test_tiny_world_conforms(tiny: TinyWorld) -> None:
    check_world(tiny, seeds=5)


@pytest.mark.slow
@pytest.mark.parametrize("name", default.names())
def test_every_registered_world_conforms_over_many_seeds(name: str) -> None:
    check_world(default.get(name), seeds=10)


def test_seeds_must_be_positive(tiny: TinyWorld) -> None:
    with pytest.raises(ValueError, match="seeds"):
        check_world(tiny, seeds=0)


def test_check_world_is_public() -> None:
    import mirrorworld.testing as testing

    assert testing.__all__ == ["CLAIM_SUCCESS", "REFUSAL", "check_world"]
    assert "check_world" in (testing.__doc__ or "")


# -- the checker rejects broken worlds ----------------------------------------------


@tool("read")
def peek_and_touch(ctx: ToolContext, counter_id: int) -> dict[str, Any]:
    """Read a counter, but write the same value back (a write a hash cannot see).

    Args:
        counter_id: The counter's id.
    """
    ctx.execute("UPDATE counters SET value=value WHERE id=?", (counter_id,))
    return {"ok": True}


@tool("read")
def peek_and_bump(ctx: ToolContext, counter_id: int) -> dict[str, Any]:
    """Read a counter, but increment it.

    Args:
        counter_id: The counter's id.
    """
    ctx.execute("UPDATE counters SET value=value+1 WHERE id=?", (counter_id,))
    return {"ok": True}


@tool("read")
def fragile_read(ctx: ToolContext, counter_id: int) -> dict[str, Any]:
    """Read a counter, crashing on ids that do not exist (a world bug).

    Args:
        counter_id: The counter's id.
    """
    row = ctx.one("SELECT value FROM counters WHERE id=?", (counter_id,))
    return {"value": row["value"]}  # type: ignore[index]


@tool("terminal")
def second_terminal(ctx: ToolContext, message: str) -> dict[str, Any]:
    """Another way to end the episode.

    Args:
        message: The final message.
    """
    ctx.finish(message)
    return {}


@tool("terminal")
def picky_respond(ctx: ToolContext, message: str) -> dict[str, Any]:
    """End the episode, but only with a message that names a counter.

    Args:
        message: The final message.
    """
    if "counter" not in message.lower():
        raise ToolError("invalid_arguments", "say which counter")
    ctx.finish(message)
    return {}


@tool("terminal")
def respond_with_code(ctx: ToolContext, message: str, code: int) -> dict[str, Any]:
    """End the episode with a message and a resolution code.

    Args:
        message: The final message.
        code: The resolution code.
    """
    ctx.finish(message)
    return {}


@tool("read")
def undocumented(ctx: ToolContext, counter_id: int) -> dict[str, Any]:
    """Read a counter.

    Args:
        counter_id:
    """
    return {}


def _world(tools: Sequence[ToolSpec] | None = None, families: Sequence[TaskFamily] | None = None) -> TinyWorld:
    """A tiny world with other tools and/or families."""

    class Broken(TinyWorld):
        def declare_tools(self) -> Sequence[ToolSpec]:
            return tools if tools is not None else super().declare_tools()

        def declare_families(self) -> Sequence[TaskFamily]:
            return families if families is not None else super().declare_families()

    return Broken()


def _family(edit: Any) -> TaskFamily:
    """A bump family whose tasks are changed by ``edit(task) -> task``."""

    class Edited(BumpFamily):
        def generate(self, image: Any, rng: random.Random, seed: int) -> Task:
            return edit(super().generate(image, rng, seed))  # type: ignore[no-any-return]

    return Edited()


TOOLS = (get_counter, set_counter, respond)


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        pytest.param((*TOOLS, peek_and_touch), "peek_and_touch.*changed the state", id="read-tool-touches-rows"),
        pytest.param((*TOOLS, peek_and_bump), "peek_and_bump.*changed the state", id="read-tool-writes"),
        pytest.param((*TOOLS, fragile_read), "fragile_read.*raised TypeError", id="read-tool-crashes"),
        pytest.param((get_counter, set_counter), "exactly one terminal tool, has 0", id="no-terminal"),
        pytest.param((*TOOLS, second_terminal), "exactly one terminal tool, has 2", id="two-terminals"),
        pytest.param((get_counter, set_counter, respond_with_code), "one required string", id="terminal-two-args"),
        pytest.param(
            (get_counter, set_counter, dataclasses.replace(picky_respond, name="respond")),
            "refuses a plain refusal",
            id="terminal-refuses",
        ),
        pytest.param((*TOOLS, undocumented), "undocumented.*needs a description", id="param-undocumented"),
    ],
)
def test_checker_rejects_broken_tools(tools: tuple[ToolSpec, ...], message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        check_world(_world(tools=tools))


def _respec(spec: ToolSpec, **changes: Any) -> ToolSpec:
    return dataclasses.replace(spec, **changes)


@pytest.mark.parametrize(
    ("tool_", "message"),
    [
        pytest.param(_respec(get_counter, name="get counter"), "must match", id="bad-name"),
        pytest.param(_respec(get_counter, description=" "), "needs a description", id="no-description"),
        pytest.param(_respec(get_counter, kind="peek"), "kind 'peek'", id="bad-kind"),
        pytest.param(
            _respec(
                get_counter, params=(Param("counter_id", {"type": "widget", "description": "x"}, True, None, int),)
            ),
            "not a JSON schema type",
            id="bad-type",
        ),
        pytest.param(
            _respec(
                get_counter,
                params=(Param("counter_id", {"type": "string", "enum": [], "description": "x"}, True, None, str),),
            ),
            "enum must be",
            id="empty-enum",
        ),
        pytest.param(
            _respec(get_counter, params=(Param("ids", {"type": "array", "description": "x"}, True, None, list),)),
            "typed 'items'",
            id="untyped-array",
        ),
    ],
)
def test_checker_rejects_bad_schemas(tool_: ToolSpec, message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        check_world(_world(tools=(tool_, set_counter, respond)))


def test_checker_rejects_duplicate_tool_names() -> None:
    world = _world()
    world.tools = (*world.tools, get_counter)  # bypass World.__init__'s own check
    with pytest.raises(AssertionError, match="duplicate tool names \\['get_counter'\\]"):
        check_world(world)


_draws = itertools.count()


def _wrong_gold(task: Task) -> Task:
    return dataclasses.replace(task, gold=(ToolCall("set_counter", {"counter_id": 99, "value": 1}), *task.gold[1:]))


def _mute_gold(task: Task) -> Task:
    return dataclasses.replace(task, gold=(*task.gold[:-1], ToolCall("respond", {"message": "Done."})))


def _trivial(task: Task) -> Task:
    return dataclasses.replace(task, gold=(ToolCall("respond", {"message": "ok"}),), checks=(), targets=(), facts=())


def _claimable(task: Task) -> Task:
    return dataclasses.replace(
        task,
        gold=(ToolCall("respond", {"message": "It is resolved."}),),
        checks=(),
        targets=(),
        facts=(Fact("status", "resolved", "text"),),
    )


def _restless(task: Task) -> Task:
    return dataclasses.replace(task, instruction=f"{task.instruction} (draw {next(_draws)})")


def _malformed_fact(task: Task) -> Task:
    return dataclasses.replace(task, facts=(Fact("amount", "35.00.", "money"),))


def _unserialisable(task: Task) -> Task:
    return dataclasses.replace(task, hidden={"ids": {1, 2}})


def _no_gold(task: Task) -> Task:
    return dataclasses.replace(task, gold=())


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        pytest.param(_wrong_gold, "gold call 0 set_counter.*not_found", id="gold-fails"),
        pytest.param(_mute_gold, "gold solution does not pass.*new value", id="gold-does-not-pass"),
        pytest.param(_trivial, "a refusal alone .* scores above 0", id="noop-passes"),
        pytest.param(_claimable, "claim of success alone .* scores above 0", id="claim-passes"),
        pytest.param(_restless, "not deterministic", id="nondeterministic-task"),
        pytest.param(_malformed_fact, "verifier raised .*non-numeric value", id="verifier-crashes"),
        pytest.param(_unserialisable, "to_dict/JSON/from_dict", id="task-not-serialisable"),
        pytest.param(_no_gold, "no gold solution", id="no-gold"),
    ],
)
def test_checker_rejects_broken_tasks(edit: Any, message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        check_world(_world(families=(_family(edit),)))


def test_claim_baseline_uses_the_generic_success_message() -> None:
    """The claim baseline must say something a lazy fact check would accept."""
    assert "resolved" in CLAIM_SUCCESS.lower()


class _Unstable(TinyWorld):
    builds = itertools.count()

    def generate(self, conn: sqlite3.Connection, rng: random.Random, scale: float) -> None:
        super().generate(conn, rng, scale)
        conn.execute("UPDATE counters SET value=? WHERE id=1", (1000 + next(self.builds),))


class _Rehashing(TinyWorld):
    hashes = itertools.count()

    @property
    def content_hash(self) -> str:  # type: ignore[override]
        return f"h{next(self.hashes)}"


class _NeedsArgs(TinyWorld):
    def __init__(self, flavour: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.flavour = flavour


class _Unversioned(TinyWorld):
    @property
    def id(self) -> str:
        return "mirrorworld/Tiny"


@pytest.mark.parametrize(
    ("world", "message"),
    [
        pytest.param(_Unstable(), "two builds of the image differ", id="data-not-deterministic"),
        pytest.param(_Rehashing(), "content_hash is not stable", id="content-hash-unstable"),
        pytest.param(_NeedsArgs("x"), "cannot build a second _NeedsArgs", id="cannot-rebuild"),
        pytest.param(_Unversioned(), "must carry the version", id="unversioned-id"),
    ],
)
def test_checker_rejects_unstable_identity(world: TinyWorld, message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        check_world(world)


def test_checker_messages_name_the_world() -> None:
    """The checker's messages name the world, so a failure in CI is actionable."""
    with pytest.raises(AssertionError, match="mirrorworld/Tiny-v0"):
        check_world(_world(tools=(get_counter, set_counter)))


def test_helpdesk_is_the_registered_reference_world() -> None:
    assert "helpdesk" in default.names()
    assert mw.make_world("helpdesk").id == "mirrorworld/Helpdesk-v0"
