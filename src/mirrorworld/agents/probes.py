"""Red-team probes: scripted attackers, one per known attack on a verifier.

Each probe is an :class:`Agent` that knows the task (white-box attackers are
the strongest) and plays through the chat adapter like any agent. After the
episode, ``breach`` says whether the attack worked; the target is that none
ever does.

* ``undo_redo`` — farm process reward: do a write, undo it, redo it, again;
* ``fact_stuffer`` — do nothing, then list every candidate fact in the reply;
* ``out_of_scope`` — solve the task and also write to an unrelated record;
* ``hidden_prober`` — probe hidden fields and grader internals through tool
  arguments (injection strings, extra arguments, wildcard searches);
* ``malformed`` — malformed calls meant to crash or corrupt the session,
  interleaved with the gold solution;
* ``repeater`` — repeat every call of the gold solution to farm repeated-call
  reward.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

from mirrorworld.agents.base import EpisodeContext
from mirrorworld.agents.scripted import CallListAgent
from mirrorworld.core.task import ToolCall
from mirrorworld.core.world import World

__all__ = ["PROBES", "Probe", "run_probes"]

EPS = 1e-9


class Probe(CallListAgent):
    """A scripted attacker: plays ``plan(context)`` one call per turn."""

    name = "probe"
    applicable = True
    """False when the attack cannot be built for this task (it is then not counted)."""

    def reset(self, context: EpisodeContext) -> None:
        self.applicable = True
        super().reset(context)

    def breach(self, record: Any) -> str | None:
        """Evidence that the attack worked, or None."""
        if record.passed:
            return f"passed: {record.verdict['evidence'] or 'verdict passed'}"
        return None


def _farmed(record: Any) -> str | None:
    if record.reward > record.score + EPS:
        return f"return {record.reward:.3f} exceeds the outcome score {record.score:.1f}"
    return None


class UndoRedoFarmer(Probe):
    name = "undo_redo"

    def plan(self, context: EpisodeContext) -> list[ToolCall]:
        from mirrorworld.audit.cases import _plan_undo, _split

        world, task = context.world, context.task
        body, final = _split(world, task)
        calls: list[ToolCall] = []
        for i, call in enumerate(body):
            undo = (
                _plan_undo(world, task, list(task.gold), i) if world.tools_by_name[call.tool].kind == "write" else None
            )
            calls += [call, *(undo or []), call, *(undo or []), call] if undo else [call]
        return calls + ([final] if final else [])

    def breach(self, record: Any) -> str | None:
        return _farmed(record)


class FactStuffer(Probe):
    name = "fact_stuffer"

    def plan(self, context: EpisodeContext) -> list[ToolCall]:
        from mirrorworld.audit.cases import _say, _spray

        return [_say(context.world, _spray(context.world, context.task))]


class OutOfScope(Probe):
    name = "out_of_scope"

    def plan(self, context: EpisodeContext) -> list[ToolCall]:
        from mirrorworld.audit.cases import _split, find_collateral

        world, task = context.world, context.task
        body, final = _split(world, task)
        extra = find_collateral(world, task, random.Random(f"probe/{task.id}"))
        self.applicable = extra is not None
        return body + ([extra] if extra else []) + ([final] if final else [])


INJECTIONS = ("' OR 1=1 --", "%", "_", "security_pin", '" UNION SELECT * FROM customers --', "*", "1; DROP TABLE x")


class HiddenProber(Probe):
    name = "hidden_prober"

    def plan(self, context: EpisodeContext) -> list[ToolCall]:
        world, task = context.world, context.task
        calls: list[ToolCall] = []
        hidden = sorted({c for cols in world.hidden_columns.values() for c in cols})
        for spec in world.tools:
            if spec.kind != "read":
                continue
            for p in spec.params:
                if p.schema.get("type") == "string" and "enum" not in p.schema:
                    calls += [ToolCall(spec.name, {p.name: text}) for text in INJECTIONS]
            refs = [p for p in spec.params if p.ref]
            if refs:
                ident = next((i for _k, i in task.scope), 1)
                base = {refs[0].name: ident}
                calls.append(ToolCall(spec.name, {**base, "fields": hidden}))
                calls.append(ToolCall(spec.name, {**base, "include_hidden": True, "debug": True}))
                calls.append(ToolCall(spec.name, json.dumps({**base, refs[0].name: f"{ident} OR 1=1"})))
        return calls + list(task.gold)

    def breach(self, record: Any) -> str | None:
        world = self.context.world
        task = self.context.task
        markers = [f'"{c}":' for cols in world.hidden_columns.values() for c in cols]
        for table, cols in world.hidden_columns.items():
            for (value,) in (
                world.image.query(f"SELECT {cols[0]} FROM {table} WHERE rowid=?", (task.customer_id or 0,))
                if task.customer_id
                else []
            ):
                markers.append(json.dumps(value))
        final = task.gold[-1].args if task.gold else {}
        if isinstance(final, dict):
            markers += [v for v in final.values() if isinstance(v, str) and len(v) > 30]
        seen = [m for m in record.messages if m.get("role") in ("tool", "user", "system")]
        for msg in seen:
            text = str(msg.get("content"))
            for marker in markers:
                if marker in text:
                    return f"observation contains {marker[:60]!r}"
        return None


MALFORMED: tuple[tuple[str, str], ...] = (
    ("{tool}", "{not json"),
    ("{tool}", "[1, 2, 3]"),
    ("{tool}", json.dumps({"x": "A" * 100_000})),
    ("{tool}", '{"a": "\\u0000\\u0001"}'),
    ("{tool}", "[" * 5000 + "]" * 5000),
    ("{tool}", json.dumps({"ticket_id": 1e308, "order_id": -1, "customer_id": True})),
    ("no_such_tool", "{}"),
    ("'; DROP TABLE customers; --", "{}"),
    ("", ""),
)


class Malformed(Probe):
    name = "malformed"

    def plan(self, context: EpisodeContext) -> list[ToolCall]:
        calls: list[ToolCall] = []
        for call in context.task.gold:
            calls += [ToolCall(t.format(tool=call.tool), a) for t, a in MALFORMED]
            calls.append(call)
        return calls

    def breach(self, record: Any) -> str | None:
        if record.error:
            return f"the episode errored: {record.error}"
        if not record.passed:
            return f"malformed calls changed the outcome: {record.verdict['evidence']}"
        accepted_bad = [
            c for c in record.calls if c["ok"] and c["tool"] not in {g.tool for g in self.context.task.gold}
        ]
        if accepted_bad:
            return f"a malformed call was accepted: {accepted_bad[0]['tool']}"
        return None


class Repeater(Probe):
    name = "repeater"

    def plan(self, context: EpisodeContext) -> list[ToolCall]:
        from mirrorworld.audit.cases import _split

        body, final = _split(context.world, context.task)
        return [c for call in body for c in (call, call, call)] + ([final] if final else [])

    def breach(self, record: Any) -> str | None:
        return _farmed(record)


PROBES: tuple[type[Probe], ...] = (UndoRedoFarmer, FactStuffer, OutOfScope, HiddenProber, Malformed, Repeater)


def run_probes(world: World, families: Sequence[str], seeds: int) -> tuple[dict[str, list[int]], list[dict[str, Any]]]:
    """Run every probe on ``seeds`` tasks of each family: ({probe: [breaches, episodes]}, findings)."""
    from mirrorworld.envs.chat import ChatEnv
    from mirrorworld.run.runner import run_episode

    env = ChatEnv(world, max_steps=1000)
    counts: dict[str, list[int]] = {}
    findings: list[dict[str, Any]] = []
    for probe_cls in PROBES:
        probe = probe_cls()
        bucket = counts.setdefault(probe.name, [0, 0])
        for family in families:
            for seed in range(seeds):
                task = world.task(family, seed)
                record = run_episode(env, probe, task)
                if not probe.applicable:
                    continue
                bucket[1] += 1
                evidence = probe.breach(record)
                if evidence:
                    bucket[0] += 1
                    findings.append({"probe": probe.name, "task": task.id, "evidence": evidence})
    return counts, findings
