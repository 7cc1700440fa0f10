"""The chat adapter (OpenAI tool calls): opening messages, tool messages,
malformed calls as error tool messages, and how an episode ends."""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Sequence
from typing import Any

import pytest

from conftest import BumpFamily, TinyWorld, get_counter, set_counter
from mirrorworld.core.session import ToolContext
from mirrorworld.core.task import Task, TaskFamily, ToolCall
from mirrorworld.core.tools import ToolSpec, tool
from mirrorworld.envs.chat import ChatEnv
from mirrorworld.errors import MirrorworldError
from mirrorworld.testing import check_world
from mirrorworld.worlds.helpdesk import HelpdeskWorld


def _call(i: int, name: str, args: Any) -> dict[str, Any]:
    return {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}}


def _assistant(*calls: dict[str, Any], content: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return message


@pytest.fixture
def chat(helpdesk: HelpdeskWorld) -> Any:
    env = ChatEnv(helpdesk)
    yield env
    env.close()


def _state(env: ChatEnv) -> str:
    assert env.episode is not None
    return env.episode.session.state_hash()


def test_tools_are_the_worlds_openai_schemas(chat: ChatEnv, helpdesk: HelpdeskWorld) -> None:
    assert chat.tools == [t.openai_schema() for t in helpdesk.tools]
    assert chat.terminal == "respond"
    json.dumps(chat.tools)


def test_reset_opens_with_the_policy_and_the_task(chat: ChatEnv, helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("cancel_order", 3)
    system, user = chat.reset(task=task)
    assert system["role"] == "system" and helpdesk.policy in system["content"] and "`respond`" in system["content"]
    assert user == {"role": "user", "content": task.instruction}
    assert chat.messages == [system, user] and not chat.done
    seeded = chat.reset(seed=0)[1]["content"]
    assert seeded == helpdesk.task_for("train", 0).instruction


def test_gold_solution_through_chat_passes(chat: ChatEnv, helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("refund_with_approval", 3)
    chat.reset(task=task)
    for i, call in enumerate(task.gold):
        (reply,) = chat.step(_assistant(_call(i, call.tool, json.dumps(call.args))))
        assert reply["role"] == "tool" and reply["tool_call_id"] == f"call_{i}"
        assert "error" not in json.loads(reply["content"])
    assert chat.done and chat.verdict().passed


def test_arguments_as_an_object_are_accepted(chat: ChatEnv, helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("cancel_order", 3)
    chat.reset(task=task)
    oid = task.targets[0][1]
    as_text, as_object = chat.step(
        _assistant(_call(0, "get_order", json.dumps({"order_id": oid})), _call(1, "get_order", {"order_id": oid}))
    )
    assert as_text["content"] == as_object["content"] and '"error"' not in as_text["content"]


MALFORMED: list[Any] = [
    42,
    "get_order",
    None,
    {},
    {"id": "x"},
    {"id": "x", "function": None},
    {"id": 7, "function": {"name": 5, "arguments": "{}"}},
    {"function": {"arguments": "{}"}},
    _call(0, "get_order", "{oops"),
    _call(0, "get_order", "[1, 2]"),
    _call(0, "get_order", [1, 2]),
    _call(0, "get_order", 17),
    _call(0, "get_order", {"order_id": "abc"}),
    _call(0, "get_order", {"order_id": 1, "extra": True}),
    _call(0, "get_order", "x" * 100_000),
    _call(0, "no_such_tool", "{}"),
    _call(0, "", "{}"),
    _call(0, "get_order\x00", "{}"),
    _call(0, "get_order", "1; DROP TABLE orders; --"),
]


@pytest.mark.parametrize("bad", MALFORMED, ids=[str(i) for i in range(len(MALFORMED))])
def test_malformed_tool_calls_get_error_tool_messages(chat: ChatEnv, bad: Any) -> None:
    chat.reset(seed=2)
    before = _state(chat)
    (reply,) = chat.step(_assistant(bad))
    assert reply["role"] == "tool" and isinstance(reply["tool_call_id"], str) and reply["tool_call_id"]
    error = json.loads(reply["content"])["error"]
    assert isinstance(error["code"], str) and isinstance(error["message"], str)
    assert _state(chat) == before and not chat.done


def test_a_batch_of_good_and_bad_calls_is_answered_in_order(chat: ChatEnv, helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("cancel_order", 3)
    chat.reset(task=task)
    oid = task.targets[0][1]
    calls = [_call(0, "get_order", {"order_id": oid}), 13, _call(2, "nope", "{}"), _call(3, "list_teams", "")]
    replies = chat.step(_assistant(*calls))
    assert [r["tool_call_id"] for r in replies] == ["call_0", "call_1", "call_2", "call_3"]
    assert ["error" in json.loads(r["content"]) for r in replies] == [False, True, True, False]
    assert chat.messages[-4:] == replies and chat.messages[-5]["tool_calls"] == calls


def test_a_message_without_tool_calls_is_the_final_message(chat: ChatEnv, helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("cancel_order", 3)
    chat.reset(task=task)
    *work, respond = task.gold
    for i, call in enumerate(work):
        chat.step(_assistant(_call(i, call.tool, call.args)))
    assert chat.step(_assistant(content=respond.args["message"])) == []
    assert chat.done and chat.verdict().passed
    assert chat.episode is not None and chat.episode.session.final_message == respond.args["message"]
    # After the end, as in every adapter: nothing changes, tool calls get episode_over.
    steps = chat.episode.session.steps
    assert chat.step(_assistant(content="one more thing")) == []
    assert chat.episode.session.final_message == respond.args["message"]
    (late,) = chat.step(_assistant(_call(9, "get_order", {"order_id": 1})))
    assert json.loads(late["content"])["error"]["code"] == "episode_over"
    assert chat.episode.session.steps == steps


@pytest.mark.parametrize("message", [_assistant(content=None), _assistant(content="   "), "plain text"])
def test_an_empty_or_odd_reply_ends_the_episode(chat: ChatEnv, message: Any) -> None:
    chat.reset(seed=1)
    assert chat.step(message) == []
    assert chat.done
    verdict = chat.verdict()
    assert verdict.score == 0.0
    final = chat.episode.session.final_message if chat.episode else None
    assert final == ("plain text" if message == "plain text" else None)


def test_calls_after_the_terminal_call_are_not_run(chat: ChatEnv, helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("cancel_order", 3)
    chat.reset(task=task)
    oid = task.targets[0][1]
    replies = chat.step(
        _assistant(
            _call(0, "respond", {"message": "Bye."}),
            _call(1, "cancel_order", {"order_id": oid, "reason": "fraud_suspected"}),
        )
    )
    # Every tool call gets its tool message (the chat stays valid for the API); the one after the end is refused.
    assert len(replies) == 2 and chat.done
    assert json.loads(replies[1]["content"])["error"]["code"] == "episode_over"
    assert chat.episode is not None and chat.episode.session.changes() == []


def test_max_steps_ends_the_episode(helpdesk: HelpdeskWorld) -> None:
    chat = ChatEnv(helpdesk, max_steps=2)
    chat.reset(seed=3)
    replies = chat.step(_assistant(*[_call(i, "get_policy", "{}") for i in range(4)]))
    assert len(replies) == 4 and chat.done and chat.verdict().score == 0.0
    assert [json.loads(r["content"]).get("error", {}).get("code") for r in replies[2:]] == ["episode_over"] * 2
    (late,) = chat.step(_assistant(_call(9, "get_policy", "{}")))
    assert json.loads(late["content"])["error"]["code"] == "episode_over"
    assert chat.episode is not None and chat.episode.session.steps == 2
    chat.close()


def test_step_before_reset_is_a_usage_error(helpdesk: HelpdeskWorld) -> None:
    with pytest.raises(MirrorworldError):
        ChatEnv(helpdesk).step(_assistant(content="hi"))


def test_content_as_text_parts_is_the_final_message(chat: ChatEnv, helpdesk: HelpdeskWorld) -> None:
    task = helpdesk.task("kb_answer", 2)
    chat.reset(task=task)
    message = task.gold[-1].args["message"]
    chat.step(_assistant(content=[{"type": "text", "text": message}]))
    assert chat.episode is not None and chat.episode.session.final_message == message


@tool("terminal")
def respond_text(ctx: ToolContext, text: str) -> dict[str, Any]:
    """Send the final message and end the episode.

    Args:
        text: The final message.
    """
    ctx.finish(text)
    return {"sent": True}


class TextBump(BumpFamily):
    def generate(self, image: Any, rng: random.Random, seed: int) -> Task:
        task = super().generate(image, rng, seed)
        *work, final = task.gold
        assert isinstance(final.args, dict)
        return dataclasses.replace(task, gold=(*work, ToolCall(final.tool, {"text": final.args["message"]})))


class TextTerminalWorld(TinyWorld):
    """A conforming world whose terminal tool names its parameter ``text``."""

    def declare_tools(self) -> Sequence[ToolSpec]:
        return (get_counter, set_counter, dataclasses.replace(respond_text, name="respond"))

    def declare_families(self) -> Sequence[TaskFamily]:
        return (TextBump(),)


def test_the_text_terminal_world_conforms() -> None:
    check_world(TextTerminalWorld())


def test_final_reply_reaches_a_terminal_tool_with_another_parameter_name() -> None:
    world = TextTerminalWorld()
    task: Task = world.task("bump", 0)
    chat = ChatEnv(world)
    chat.reset(task=task)
    set_call = task.gold[0]
    chat.step(_assistant(_call(0, set_call.tool, set_call.args)))
    chat.step(_assistant(content=task.gold[-1].args["text"]))
    assert chat.verdict().passed
