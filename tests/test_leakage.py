"""No leakage: canaries planted in hidden fields (``customers.security_pin``,
``customers.risk_score``) and in every task's ``hidden`` dict never reach an
observation: not a Gymnasium observation, not a chat message (system, user or
tool), whatever read tool is called on the task's records. Nor do the gold
solution's final message or the verdict."""

from __future__ import annotations

import dataclasses
import json
import random
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from mirrorworld.core.session import ToolContext
from mirrorworld.core.store import Image
from mirrorworld.core.task import Task, TaskFamily, ToolCall
from mirrorworld.core.tools import ToolSpec, tool
from mirrorworld.envs.chat import ChatEnv
from mirrorworld.envs.gymnasium import MirrorEnv
from mirrorworld.worlds.helpdesk import HelpdeskWorld
from mirrorworld.worlds.helpdesk.tasks import FAMILIES

PIN = "CANARY-PIN-"
RISK = 424242424
HIDDEN = "CANARY-HIDDEN-7f3a9c"
CANARIES = (PIN, str(RISK), HIDDEN)


class CanaryFamily(TaskFamily):
    """A helpdesk family whose tasks carry a canary in ``hidden``."""

    def __init__(self, inner: TaskFamily) -> None:
        self.inner = inner
        self.name = inner.name
        self.description = inner.description

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        task = self.inner.generate(image, rng, seed)
        return dataclasses.replace(task, hidden={**task.hidden, "canary": HIDDEN})


class CanaryHelpdesk(HelpdeskWorld):
    """The helpdesk with canaries in its hidden columns and tasks."""

    def generate(self, conn: sqlite3.Connection, rng: random.Random, scale: float) -> None:
        super().generate(conn, rng, scale)
        conn.execute("UPDATE customers SET security_pin = ? || id, risk_score = ?", (PIN, RISK))

    def declare_families(self) -> Sequence[TaskFamily]:
        return [CanaryFamily(f) for f in super().declare_families()]


@tool("read")
def get_customer_raw(ctx: ToolContext, customer_id: int) -> dict[str, Any]:
    """Open a customer's full record (a deliberately leaky tool).

    Args:
        customer_id: The customer's id.
    """
    return {"customer": ctx.one("SELECT * FROM customers WHERE id=?", (customer_id,))}


class LeakyHelpdesk(CanaryHelpdesk):
    """A canary helpdesk with a read tool that leaks hidden columns: the scan must catch it."""

    def declare_tools(self) -> Sequence[ToolSpec]:
        return (*super().declare_tools(), get_customer_raw)


@pytest.fixture(scope="module")
def canary_world() -> CanaryHelpdesk:
    return CanaryHelpdesk()


TASKS = [(f.name, seed) for f in FAMILIES for seed in (0, 1, 2)]


def _values(world: HelpdeskWorld, task: Task) -> dict[str, list[Any]]:
    """Candidate argument values for read tools, drawn from the task's records."""
    scope: dict[str, list[int]] = {}
    for kind, ident in task.scope:
        scope.setdefault(kind, []).append(ident)
    customers = set(scope.get("customer", []))
    if task.customer_id is not None:
        customers.add(task.customer_id)
    customers.update(op.values["customer_id"] for op in task.setup if op.table == "tickets")
    for oid in scope.get("order", []):
        customers.update(r[0] for r in world.image.query("SELECT customer_id FROM orders WHERE id=?", (oid,)))
    queries = ["refund", "return window", "shipping"]
    for cid in sorted(customers):
        name, email, phone = world.image.query("SELECT name, email, phone FROM customers WHERE id=?", (cid,))[0]
        queries += [name, email, phone[-4:], name.split()[-1]]
    return {
        "customer_id": sorted(customers) or [1],
        "order_id": scope.get("order", []) or [1],
        "ticket_id": scope.get("ticket", []) or [1],
        "article_id": [1, 2, 3],
        "query": queries,
        "status": ["new", "open"],
    }


def _probe_calls(world: HelpdeskWorld, task: Task) -> Iterator[ToolCall]:
    """Every read tool on every relevant record, then attempts that could echo data back."""
    values = _values(world, task)
    for spec in world.tools:
        if spec.kind != "read":
            continue
        if not spec.params:
            yield ToolCall(spec.name, {})
        for p in spec.params:
            for value in values.get(p.name, []):
                yield ToolCall(spec.name, {p.name: value})
    for cid in values["customer_id"]:
        yield ToolCall("verify_identity", {"customer_id": cid, "zip_code": "00000", "phone_last4": "0000"})
        yield ToolCall("update_customer", {"customer_id": cid, "email": "x@y.example"})
        yield ToolCall("get_customer", {"customer_id": cid, "security_pin": "1"})


def _strings(obs: dict[str, Any]) -> list[str]:
    return [v for v in obs.values() if isinstance(v, str)] + [
        json.dumps(v.tolist()) for v in obs.values() if isinstance(v, np.ndarray)
    ]


def _leaks(texts: list[str], needles: Sequence[str]) -> list[str]:
    return [f"{n!r} in {t[:120]!r}" for t in texts for n in needles if n in t]


def _gym_texts(world: HelpdeskWorld, task: Task, calls: list[ToolCall]) -> list[str]:
    env = MirrorEnv(world, max_steps=len(calls) + 2, render_mode="ansi")
    obs, _ = env.reset(options={"task": task})
    texts = _strings(obs)
    for call in calls:
        obs, _, terminated, _, _ = env.step({"tool_name": call.tool, "tool_args": json.dumps(call.args)})
        texts += _strings(obs)
        texts.append(env.render() or "")
        if terminated:
            break
    env.close()
    return texts


def _chat_texts(world: HelpdeskWorld, task: Task, calls: list[ToolCall]) -> list[str]:
    env = ChatEnv(world, max_steps=len(calls) + 2)
    texts = [str(m["content"]) for m in env.reset(task=task)]
    for i, call in enumerate(calls):
        if env.done:
            break
        msg = {"id": f"c{i}", "type": "function", "function": {"name": call.tool, "arguments": json.dumps(call.args)}}
        texts += [str(m["content"]) for m in env.step({"role": "assistant", "content": None, "tool_calls": [msg]})]
    env.close()
    return texts


def _episode(world: HelpdeskWorld, task: Task) -> list[ToolCall]:
    """Probe every read tool on the task's records, then play the gold solution."""
    return [*_probe_calls(world, task), *task.gold]


@pytest.mark.parametrize(("family", "seed"), TASKS)
def test_hidden_fields_never_reach_an_observation(canary_world: CanaryHelpdesk, family: str, seed: int) -> None:
    task = canary_world.task(family, seed)
    assert task.hidden["canary"] == HIDDEN  # the canaries are really there
    calls = _episode(canary_world, task)
    gym_texts, chat_texts = _gym_texts(canary_world, task, calls), _chat_texts(canary_world, task, calls)
    assert _leaks(gym_texts, CANARIES) == []
    assert _leaks(chat_texts, CANARIES) == []
    # The probes really opened the task's records (phone numbers are shown to agents; pins are not).
    for cid in _values(canary_world, task)["customer_id"]:
        (phone,) = canary_world.image.query("SELECT phone FROM customers WHERE id=?", (cid,))[0]
        assert any(phone in t for t in gym_texts) and any(phone in t for t in chat_texts)


def test_the_canaries_are_planted(canary_world: CanaryHelpdesk) -> None:
    rows = canary_world.image.query("SELECT security_pin, risk_score FROM customers WHERE id IN (1, 2)")
    assert rows == ((f"{PIN}1", RISK), (f"{PIN}2", RISK))


def test_the_scan_catches_a_leaky_read_tool() -> None:
    """The same scan over a world with one leaky tool finds the canaries, so the scan above can fail."""
    world = LeakyHelpdesk()
    task = world.task("cancel_order", 1)
    calls = [ToolCall("get_customer_raw", {"customer_id": task.customer_id}), *_episode(world, task)]
    for texts in (_gym_texts(world, task, calls), _chat_texts(world, task, calls)):
        leaks = _leaks(texts, CANARIES)
        assert any(PIN in leak for leak in leaks) and any(str(RISK) in leak for leak in leaks)


@pytest.mark.parametrize("family", [f for f, s in TASKS if s == 0])
def test_the_gold_solution_never_reaches_an_observation(canary_world: CanaryHelpdesk, family: str) -> None:
    """An agent that only reads never sees the gold final message (nor the checks' names)."""
    task = canary_world.task(family, 0)
    secrets = [str(task.gold[-1].args["message"])] if isinstance(task.gold[-1].args, dict) else []
    secrets += [c.name for c in task.checks if len(c.name) > 12]
    calls = list(_probe_calls(canary_world, task))
    assert _leaks(_gym_texts(canary_world, task, calls), secrets) == []
    assert _leaks(_chat_texts(canary_world, task, calls), secrets) == []


def test_the_verdict_is_info_not_observation(canary_world: CanaryHelpdesk) -> None:
    task = canary_world.task("refund_damaged", 1)
    env = MirrorEnv(canary_world)
    env.reset(options={"task": task})
    for call in task.gold:
        obs, _, terminated, _, info = env.step({"tool_name": call.tool, "tool_args": json.dumps(call.args)})
    assert terminated and info["verdict"]["passed"] is True
    assert set(obs) == {"instruction", "view", "records", "last_result", "tool_mask", "step"}
    texts = _strings(obs)
    markers = ["verdict", "breakdown", "evidence", "potential", "collateral"]
    assert _leaks(texts, markers) == []
    chat = ChatEnv(canary_world)
    chat.reset(task=task)
    replies = []
    for i, call in enumerate(task.gold):
        replies += chat.step(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"c{i}", "function": {"name": call.tool, "arguments": json.dumps(call.args)}}],
            }
        )
    assert chat.done and chat.verdict().passed
    assert _leaks([str(m.get("content")) for m in chat.messages], markers) == []
