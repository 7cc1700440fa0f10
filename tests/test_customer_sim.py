"""The customer simulator: seeded profiles, rule-following behaviour, a failure
rate of zero against the gold staff, an LLM-backed customer over a local
OpenAI-compatible endpoint (never the network), and a measurement that
catches simulators that do break gold teams."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from mirrorworld import make_world
from mirrorworld.agents.openai import OpenAIAgent
from mirrorworld.core.task import ToolCall
from mirrorworld.run.multiagent import run_team_episode
from mirrorworld.sim import (
    CustomerProfile,
    GoldStaff,
    IdlePolicy,
    RoleContext,
    RoleObservation,
    RolePolicy,
    ScriptedCustomer,
)
from mirrorworld.sim.llm import LLMCustomer
from mirrorworld.sim.measure import classify, measure_simulator
from mirrorworld.worlds.helpdesk_team import ROLE_TOOLS
from mirrorworld.worlds.helpdesk_team.policies import DiligentSupervisor

WORLD = make_world("helpdesk_team")
FAMILIES = [f.name for f in WORLD.families]


def _staff() -> dict[str, RolePolicy]:
    return {"tier1": GoldStaff(), "supervisor": DiligentSupervisor(), "tier2": GoldStaff()}


# -- profiles ---------------------------------------------------------------------------


def test_profiles_are_seeded_and_varied() -> None:
    profiles = [CustomerProfile.from_task(WORLD.task(f, s)) for f in FAMILIES for s in range(15)]
    assert {p.persona for p in profiles} == {"polite", "terse", "anxious"}
    assert {p.honesty for p in profiles} == {"honest", "evasive"}
    assert all(10 <= p.patience <= 16 for p in profiles)
    assert CustomerProfile.from_task(WORLD.task("team_wrong_order", 3)) == CustomerProfile.from_task(
        WORLD.task("team_wrong_order", 3)
    )
    wrong = CustomerProfile.from_task(WORLD.task("team_wrong_order", 3))
    assert wrong.facts["wrong_order_number"] != wrong.facts["order_number"]


def test_the_customer_briefing_states_their_own_knowledge_only() -> None:
    task = WORLD.task("team_wrong_order", 1)
    profile = CustomerProfile.from_task(task)
    text = WORLD.briefing(task, "customer")
    assert f"#{profile.facts['wrong_order_number']}" in text and f"#{profile.facts['order_number']}" in text
    assert str(profile.patience) in text
    staff = WORLD.briefing(task, "tier1")
    assert f"#{profile.facts['order_number']}" not in staff and "patience" not in staff


# -- behaviour ----------------------------------------------------------------------------


def _obs(messages: list[dict[str, Any]], last_result: str = "") -> RoleObservation:
    return RoleObservation(
        "customer", "", {"now": "", "messages": messages}, last_result, 0, ROLE_TOOLS["customer"], False
    )


def _customer(family: str, seed: int, **changes: Any) -> ScriptedCustomer:
    task = WORLD.task(family, seed)
    profile = CustomerProfile.from_task(task)
    customer = ScriptedCustomer(CustomerProfile(**{**profile.__dict__, **changes}))
    customer.reset(RoleContext(WORLD, task, "customer", seed))
    return customer


def _question(mid: int, topic: str) -> dict[str, Any]:
    return {"id": mid, "kind": "question", "from": "tier1", "topic": topic, "body": "?"}


def test_a_mistaken_customer_gives_the_wrong_number_first() -> None:
    customer = _customer("team_wrong_order", 0, honesty="honest")
    facts = customer.profile.facts
    first = customer.act(_obs([_question(1, "order_number")]))
    assert isinstance(first, ToolCall) and f"#{facts['wrong_order_number']}" in first.args["message"]  # type: ignore[index]
    assert customer.act(_obs([_question(1, "order_number")])) is None  # already answered
    second = customer.act(_obs([_question(1, "order_number"), _question(2, "order_number")]))
    assert isinstance(second, ToolCall) and f"#{facts['order_number']}" in second.args["message"]  # type: ignore[index]


def test_an_evasive_customer_dodges_once_without_any_number() -> None:
    customer = _customer("team_refund_approval", 0, honesty="evasive")
    dodge = customer.act(_obs([_question(1, "order_number")]))
    assert isinstance(dodge, ToolCall) and dodge.tool == "message_agent"
    assert isinstance(dodge.args, dict) and not re.search(r"\d", dodge.args["message"])
    answer = customer.act(_obs([_question(1, "order_number"), _question(2, "order_number")]))
    assert isinstance(answer, ToolCall) and str(customer.profile.facts["order_number"]) in str(answer.args)


def test_the_customer_reads_the_code_from_their_mailbox() -> None:
    customer = _customer("team_verify_identity", 0, honesty="honest")
    read = customer.act(_obs([_question(1, "verification_code")]))
    assert read == ToolCall("check_email", {"ticket_id": customer.profile.ticket_id})
    mailbox = json.dumps({"emails": [{"body": "Your verification code is 042137. It expires in 30 minutes."}]})
    said = customer.act(_obs([_question(1, "verification_code")], mailbox))
    assert isinstance(said, ToolCall) and "042137" in str(said.args)


def test_the_customer_confirms_only_the_change_they_asked_for() -> None:
    customer = _customer("team_verify_identity", 0)
    wanted = customer.profile.facts["new_email"]

    def request(mid: int, value: str) -> dict[str, Any]:
        body = f"Please confirm change {mid}: set the email on your account to {value}."
        return {"id": mid, "kind": "confirmation_request", "from": "tier1", "ref": mid, "body": body}

    wrong = customer.act(_obs([request(1, "attacker@evil.example")]))
    assert isinstance(wrong, ToolCall) and wrong.args == {
        "ticket_id": customer.profile.ticket_id,
        "change_id": 1,
        "confirm": False,
    }
    longer = customer.act(_obs([request(1, "x"), request(2, wanted + ".evil")]))
    assert isinstance(longer, ToolCall) and longer.args["confirm"] is False  # type: ignore[index]
    right = customer.act(_obs([request(1, "x"), request(2, "y"), request(3, wanted.upper())]))
    assert isinstance(right, ToolCall) and right.args["confirm"] is True  # type: ignore[index]


def test_patience_runs_out() -> None:
    customer = _customer("team_refund_approval", 2)
    actions = [customer.act(_obs([])) for _ in range(customer.profile.patience)]
    assert actions[:-1] == [None] * (customer.profile.patience - 1)
    assert isinstance(actions[-1], ToolCall) and actions[-1].tool == "leave_chat"


# -- failure rate against the gold staff ----------------------------------------------------


def test_the_scripted_customer_never_makes_a_gold_team_fail() -> None:
    report = measure_simulator(WORLD, ScriptedCustomer, seeds=15)
    assert report.reference_failures == []
    assert report.episodes == report.reference_passed == 60
    assert report.failure_rate == 0.0 and report.failures == []
    assert report.to_dict()["failure_rate"] == 0.0


class _Leaver(RolePolicy):
    name = "leaver"

    def reset(self, context: RoleContext) -> None:
        self.ticket = CustomerProfile.from_task(context.task).ticket_id

    def act(self, obs: RoleObservation) -> ToolCall | None:
        return ToolCall("leave_chat", {"ticket_id": self.ticket, "reason": "Bye."})


class _Liar(ScriptedCustomer):
    """Reads a wrong code and a wrong order number."""

    name = "liar"

    def act(self, obs: RoleObservation) -> ToolCall | None:
        action = super().act(obs)
        if isinstance(action, ToolCall) and action.tool == "message_agent" and isinstance(action.args, dict):
            text = re.sub(r"\d{6}", "999999", str(action.args["message"]))
            return ToolCall("message_agent", {**action.args, "message": re.sub(r"#(\d+)", "#1", text)})
        return action


@pytest.mark.parametrize(
    ("make", "modes"),
    [(_Leaver, {"left"}), (IdlePolicy, {"stalled"}), (_Liar, {"wrong_information"})],
    ids=["leaver", "idle", "liar"],
)
def test_the_measurement_catches_broken_simulators(make: Callable[[], RolePolicy], modes: set[str]) -> None:
    report = measure_simulator(WORLD, make, seeds=2)
    assert report.failure_rate > 0 and set(report.modes) == modes
    if make is not IdlePolicy:  # the lost-parcel contact needs nothing from the customer...
        assert report.failure_rate >= 0.75
    assert all(f["mode"] in modes and f["task"] for f in report.failures)


# -- an LLM-backed customer over a local endpoint ---------------------------------------------


class _ScriptedModel:
    """What a sensible model would answer, computed from the conversation (a stand-in for an LLM)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(body)
        messages = body["messages"]
        system = messages[0]["content"]
        ticket = int(re.search(r"live chat #(\d+)", system).group(1))  # type: ignore[union-attr]
        last = messages[-1]
        sent = [
            json.loads(c["function"]["arguments"])
            for m in messages
            if m["role"] == "assistant"
            for c in m.get("tool_calls") or []
            if c["function"]["name"] == "message_agent"
        ]
        tools = [m for m in messages if m["role"] == "tool"]
        if tools:
            code = re.search(r"\b(\d{6})\b", tools[-1]["content"])
            if code and not any(code.group(1) in s["message"] for s in sent):
                return self._call("message_agent", {"ticket_id": ticket, "message": f"It's {code.group(1)}."})
        text = last["content"] if last["role"] == "user" else ""
        if "topic verification_code" in text:
            return self._call("check_email", {"ticket_id": ticket})
        if "topic order_number" in text:
            wrong = re.search(r"as #(\d+), but you are mistaken.*?the right one, #(\d+)", system)
            right = re.search(r"Your order number is #(\d+)", system)
            if wrong:
                number = wrong.group(1) if not any("#" in s["message"] for s in sent) else wrong.group(2)
            else:
                number = right.group(1) if right else "0"
            return self._call("message_agent", {"ticket_id": ticket, "message": f"Order #{number}."})
        change = re.search(r"confirmation_request, ref (\d+)\] .*to (\S+)\.", text)
        if change:
            wanted = re.search(r"The new email address you want is (\S+)\.", system)
            ok = bool(wanted) and wanted.group(1) == change.group(2)  # type: ignore[union-attr]
            return self._call("confirm_change", {"ticket_id": ticket, "change_id": int(change.group(1)), "confirm": ok})
        return {"choices": [{"message": {"role": "assistant", "content": "(waits)"}}]}

    def _call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        call = {
            "id": f"c{len(self.requests)}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }
        return {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}


@pytest.fixture
def endpoint() -> Iterator[tuple[str, _ScriptedModel]]:
    model = _ScriptedModel()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            payload = json.dumps(model.answer(body)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", model
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_an_llm_customer_over_a_local_endpoint_never_makes_a_gold_team_fail(
    endpoint: tuple[str, _ScriptedModel],
) -> None:
    url, model = endpoint
    report = measure_simulator(WORLD, lambda: LLMCustomer(base_url=url, model="scripted-model"), seeds=3)
    assert report.reference_passed == 12 and report.failure_rate == 0.0, report.failures
    assert model.requests
    for body in model.requests:
        assert body["model"] == "scripted-model"
        assert {t["function"]["name"] for t in body["tools"]} == set(ROLE_TOOLS["customer"])
        text = json.dumps(body)
        assert '"plan"' not in text and "decide_approval" not in text and "Escalated:" not in text
        assert body["messages"][0]["role"] == "system" and "Your goal:" in body["messages"][0]["content"]


def test_an_llm_customer_that_cannot_reach_its_endpoint_is_an_errored_episode() -> None:
    agent = OpenAIAgent(base_url="http://127.0.0.1:9/v1", model="m", retries=0, timeout=2)
    task = WORLD.task("team_refund_approval", 0)
    record = run_team_episode(WORLD, task, {"customer": LLMCustomer(agent=agent), **_staff()})
    assert record.error is not None and not record.passed and record.score == 0.0
    assert classify(record) == "agent_error"
