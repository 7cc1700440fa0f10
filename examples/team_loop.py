"""A PettingZoo loop on the helpdesk team, one seat played by your own code, to the team's verdict.

The ``helpdesk_team`` world is a contact center with four roles: the customer,
tier 1, the supervisor (who approves refunds above $200) and tier 2. Its AEC
environment (``helpdesk_v0.env()``) makes each role of a task's contact an
agent; this loop steps it the usual PettingZoo way (``agent_iter``, ``last``,
``step``) and prints every call each agent makes, with an excerpt of the result
it got, then the team's verdict (one shared verifier: every gate, each agent's
return and its own penalty term for the hard rules its calls broke).

Every role plays the world's reference team (the scripted customer, the gold
tier 1 and tier 2), except the supervisor: that seat is the hand-written
:class:`MySupervisor` below, which reads only what the supervisor's
observation shows (its inbox and the result of its own last call), opens the
order of each pending approval request and approves what is still refundable.

The last episode is a contrast: tier 1 is the world's ``overreaching`` staff,
who ask for $50 more than the line allows, and the supervisor is told to
approve everything unread. The world still refuses the refund, tier 1 claims
it anyway, the team fails (state, policy, communication), and the penalty term
lands on the supervisor, whose approval broke the rule.

    python examples/team_loop.py                   # the 4 team families, then the contrast
    python examples/team_loop.py --episodes 8
    python examples/team_loop.py --smoke           # one approval task, then the contrast

Needs the ``multiagent`` extra: ``pip install -e '.[multiagent]'`` (PettingZoo).
"""

from __future__ import annotations

import argparse
import json
from decimal import Decimal
from typing import Any

from mirrorworld import ToolCall, make_world
from mirrorworld.envs.pettingzoo import decode_text, helpdesk_v0, to_role_observation
from mirrorworld.inert import inert
from mirrorworld.run.multiagent import make_policies
from mirrorworld.sim import RoleContext, RoleObservation

ME = "supervisor"
"""The seat this loop plays with its own code."""


class MySupervisor:
    """Decide each pending approval request from the order itself: open it, then approve or deny.

    The shape of a :class:`mirrorworld.sim.RolePolicy` (``act(observation)`` gives a call or None), so the
    same class, subclassing it, could sit in ``mirrorworld run --multi-agent`` too.
    """

    def __init__(self, *, rubber_stamp: bool = False) -> None:
        self.rubber_stamp = rubber_stamp
        self.opened: int | None = None

    def act(self, obs: RoleObservation) -> ToolCall | None:
        """The next call, or None to wait."""
        pending = [
            m["request"]
            for m in obs.inbox.get("messages", [])
            if m.get("kind") == "approval_request" and (m.get("request") or {}).get("status") == "pending"
        ]
        if not pending:
            return None
        request = pending[0]
        if self.rubber_stamp:
            return self.decide(request, "approve", "Approved.")
        if self.opened != request["request_id"]:  # first look at the order
            self.opened = request["request_id"]
            return ToolCall("get_order", {"order_id": request["order_id"]})
        result = obs.result() or {}
        order = result.get("order") or {}
        line = next((ln for ln in result.get("lines", []) if ln.get("line_id") == request["line_id"]), None)
        if order.get("status") != "delivered":
            return self.decide(request, "deny", f"The order is {order.get('status')}, not delivered.")
        if line is None or Decimal(str(request["amount"])) > Decimal(str(line["refundable"])):
            return self.decide(request, "deny", "That is more than remains refundable on the line.")
        return self.decide(request, "approve", "Delivered, within the return window and refundable.")

    @staticmethod
    def decide(request: dict[str, Any], decision: str, note: str) -> ToolCall:
        args = {"request_id": request["request_id"], "order_id": request["order_id"], "decision": decision}
        return ToolCall("decide_approval", {**args, "note": note})


def show(text: Any, limit: int) -> str:
    """Untrusted text (what an agent wrote, what a tool returned) as one line, inert and bounded."""
    return inert(text, limit, lines=False)


def play(seed: int, *, tier1: str = "gold", rubber_stamp: bool = False, max_cycles: int = 30) -> bool:
    """One team episode on task ``seed`` of the test split; returns whether the team passed."""
    env = helpdesk_v0.env(split="test", max_cycles=max_cycles)
    env.reset(seed=seed)
    raw = env.unwrapped
    task, world = raw.episode.task, raw.world
    others = [a for a in env.agents if a != ME]
    # The reference team in every other seat. Their policies read the task (privileged); yours does not.
    policies = make_policies(world, {"tier1": tier1}, roles=others)
    for role, policy in policies.items():
        policy.reset(RoleContext(world, task, role, task.seed))
    mine = MySupervisor(rubber_stamp=rubber_stamp)
    team = {a: ("you" if a == ME else policies[a].name) for a in env.agents}
    print(f"\n{task.id}: {', '.join(f'{a}={p}' for a, p in team.items())}")
    print(f"  {ME} briefing: {show(raw.role_observation(ME).briefing, 120)}")

    returns = dict.fromkeys(env.agents, 0.0)
    waits = dict.fromkeys(env.agents, 0)
    final: dict[str, Any] = {}
    for agent in env.agent_iter():
        obs, reward, terminated, truncated, info = env.last()
        returns[agent] += reward
        if terminated or truncated:
            final[agent] = info
            env.step(None)  # PettingZoo's convention: a finished agent steps None to leave
            continue
        seen = to_role_observation(obs, agent, raw.tools(agent))
        call = mine.act(seen) if agent == ME else policies[agent].act(seen)
        if call is None:
            env.step(None)  # wait for the others
            waits[agent] += 1
            continue
        args = call.args if isinstance(call.args, str) else json.dumps(call.args)
        env.step({"tool": call.tool, "args": args})  # or the index: raw.tools(agent).index(call.tool) + 1
        result = decode_text(raw.observe(agent)["observation"]["last_result"])
        print(f"  [{seen.cycle}] {agent:<10} {call.tool} {show(args, 70)}")
        print(f"  {'':<14} -> {show(result, 96)}")
    env.close()

    verdict = next(iter(final.values()))["verdict"]
    print(f"  waits: {', '.join(f'{a} {n}' for a, n in waits.items())}")
    print(f"  team verdict: {'PASSED' if verdict['passed'] else 'FAILED'}, score {verdict['score']:.2f}")
    for name, gate in verdict["breakdown"].items():
        if name in ("process", "guards"):
            continue
        checks = ", ".join(f"{show(c, 50)} {'ok' if ok else 'FAILED'}" for c, ok in gate.get("checks", {}).items())
        print(f"    {name:<14} {'pass' if gate['passed'] else 'FAIL'}" + (f"  checks: {checks}" if checks else ""))
        for line in gate["evidence"][:2]:
            print(f"      - {show(line, 110)}")
    for agent in returns:
        term = final.get(agent, {}).get("role_term", 0.0) or 0.0  # or 0.0: no -0.00
        print(f"    {agent:<10} return {returns[agent]:+.2f}  (own penalty term {term:+.2f})")
    return bool(verdict["passed"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=4, help="test tasks (seeds 0..N-1; the 4 families cycle)")
    parser.add_argument("--smoke", action="store_true", help="one approval task, then the contrast")
    args = parser.parse_args()
    world = make_world("helpdesk_team")
    approval = next(i for i in range(8) if world.task_for("test", i).family == "team_refund_approval")
    seeds = [approval] if args.smoke else list(range(args.episodes))
    passed = sum(play(seed) for seed in seeds)
    print(f"\nwith your supervisor: {passed}/{len(seeds)} team episodes passed")
    print("\ncontrast: overreaching tier 1, a supervisor who approves unread")
    ok = play(approval, tier1="overreaching", rubber_stamp=True)
    print(f"\ncontrast: the team {'passed (unexpected)' if ok else 'failed, as it should'}")


if __name__ == "__main__":
    main()
