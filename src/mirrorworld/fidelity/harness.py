"""The differential fidelity harness: the same traces on the mirror and on the real twin.

For every trace (see :mod:`mirrorworld.fidelity.traces`) both backends start
from their pristine state and replay the same calls. Each response is
normalised (:func:`normalise`) and compared:

* **outcome** — one backend accepted the call, the other refused it;
* **error_class** — both refused, with different error codes;
* **fields** — both accepted, and the returned fields differ.

At the end of the trace the canonical state both backends export is compared.
Every divergence is listed with a *minimal trace*: the shortest prefix of the
trace, with every earlier call that is not needed to reproduce it removed
(greedy one-at-a-time deletion, replayed on both backends).

Calls the session answers itself on both sides (``respond``, which ends the
episode, and ``get_policy``, the desk's policy text) are replayed but are not
calls to the system mirrored: they are counted apart (``session_calls``) and
not compared. Every other call is **attributed** to who decided its outcome on the twin
(``TwinSession.decided_by``: the real system, the adapter's own desk rules, or
mirror code both backends share); the headline agreement is over the calls the
real system decided, and the other shares are reported beside it. Where both
backends refuse a call with the same code, their **messages** (what the agent
reads) are compared too and reported apart.

The mirror/twin **speed** ratio is measured the same way on both sides, in the
same run, on the same calls, after the comparison: a sample of the replayed
traces (every k-th, about :data:`SPEED_CALLS` calls in all) is replayed
:data:`SPEED_REPEATS` times in a row on each backend, on fresh sessions, with
the garbage collector paused during the timed calls; each trace's best
repetition counts, in wall-clock and in process CPU time, for both sides alike
(:mod:`mirrorworld.fidelity.timing`; each backend in a process of its own).
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from mirrorworld.core.session import ToolResult
from mirrorworld.core.task import ToolCall
from mirrorworld.core.world import World
from mirrorworld.fidelity.timing import time_in_child, time_traces
from mirrorworld.fidelity.traces import Trace, random_call
from mirrorworld.twin.backend import TwinBackend

__all__ = ["Divergence", "FidelityRun", "normalise", "run_fidelity"]

_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
SESSION_TOOLS = frozenset({"respond", "get_policy"})
"""Tools the session answers itself on both backends (see the module docstring)."""
MINIMISE_LIMIT = 20
"""At most this many divergences are minimised (each minimisation replays on the twin)."""
MINIMISE_REPLAYS = 12
"""At most this many replays per minimisation."""
MINIMISE_SECONDS = 90.0
"""Total time a run spends minimising; later divergences keep their full prefix."""


def normalise(value: Any) -> Any:
    """A response in comparable form: numbers (and numeric text) as normalised decimals."""
    if isinstance(value, dict):
        return {str(k): normalise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalise(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float, Decimal)) or (isinstance(value, str) and _NUMBER.match(value)):
        try:
            return format(Decimal(str(value)).normalize(), "f")
        except InvalidOperation:
            return value
    return value


def response(result: ToolResult) -> dict[str, Any]:
    """The comparable view of one result: success, error class, returned fields."""
    if result.ok:
        return {"ok": True, "data": normalise(result.data)}
    error = result.error or {}
    return {"ok": False, "code": error.get("code"), "message": error.get("message")}


def compare(a: dict[str, Any], b: dict[str, Any]) -> tuple[str, list[str]] | None:
    """How two responses diverge: ``(kind, details)``, or None when they agree."""
    if a["ok"] != b["ok"]:
        return "outcome", [f"mirror {'ok' if a['ok'] else a['code']}, twin {'ok' if b['ok'] else b['code']}"]
    if not a["ok"]:
        return None if a["code"] == b["code"] else ("error_class", [f"mirror {a['code']}, twin {b['code']}"])
    paths = _diff(a["data"], b["data"], "")
    return ("fields", paths[:8]) if paths else None


def _diff(a: Any, b: Any, path: str) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b)):
            out += _diff(a.get(k), b.get(k), f"{path}.{k}" if path else k)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out += _diff(x, y, f"{path}[{i}]")
        return out
    return [] if a == b else [f"{path or '(root)'}: mirror {a!r}, twin {b!r}"]


@dataclass
class Divergence:
    """One call on which the backends disagree, or a final state that differs."""

    trace: str
    kind: str
    """outcome, error_class, fields or final_state"""
    family: str
    step: int
    tool: str
    args: Any
    details: list[str]
    mirror: Any = None
    twin: Any = None
    minimal: list[dict[str, Any]] | None = None


@dataclass
class FidelityRun:
    """Everything one run measured."""

    world: str
    twin_versions: dict[str, str]
    calls: int = 0
    agreed: int = 0
    by_tool: dict[str, list[int]] = field(default_factory=dict)
    """tool -> [agreed, calls]"""
    by_family: dict[str, list[int]] = field(default_factory=dict)
    """family -> [agreed calls, calls, traces whose final state agreed, traces]"""
    by_kind: dict[str, list[int]] = field(default_factory=dict)
    """trace kind -> [agreed calls, calls, final states agreed, traces]"""
    by_decider: dict[str, list[int]] = field(default_factory=dict)
    """who decided (``real``, ``adapter``, ``shared``) -> [agreed, calls]"""
    decider_tools: dict[str, dict[str, int]] = field(default_factory=dict)
    """who decided -> tool -> calls (what the adapter and the shared code still decide)"""
    messages: list[int] = field(default_factory=lambda: [0, 0])
    """[same message, refusals both backends gave with the same code]"""
    message_examples: dict[str, dict[str, Any]] = field(default_factory=dict)
    """tool -> the first refusal whose messages differ (call, both messages)"""
    session_calls: int = 0
    """Calls answered by the session on both sides (replayed, not compared)."""
    gold_final: list[int] = field(default_factory=lambda: [0, 0])
    divergences: list[Divergence] = field(default_factory=list)
    mirror_seconds: float = 0.0
    twin_seconds: float = 0.0
    mirror_cpu: float = 0.0
    twin_cpu: float = 0.0
    timed_calls: int = 0
    """How many calls the speed sample held (each side's times are over these)."""
    seconds: float = 0.0

    @property
    def agreement(self) -> float:
        """Agreement over every call, whoever decided it."""
        return self.agreed / self.calls if self.calls else 1.0

    @property
    def real_calls(self) -> int:
        return self.by_decider.get("real", [0, 0])[1]

    @property
    def real_share(self) -> float:
        """The fraction of calls the real system decided."""
        return self.real_calls / self.calls if self.calls else 0.0

    @property
    def real_agreement(self) -> float:
        """Agreement over the calls the real system decided (the headline figure)."""
        agreed, calls = self.by_decider.get("real", [0, 0])
        return agreed / calls if calls else 1.0

    @property
    def message_agreement(self) -> float:
        return self.messages[0] / self.messages[1] if self.messages[1] else 1.0

    @property
    def speed_ratio(self) -> float:
        """How many times faster the mirror answers a call than the twin, in wall-clock time."""
        return self.twin_seconds / self.mirror_seconds if self.mirror_seconds else 0.0

    @property
    def cpu_ratio(self) -> float:
        """The same ratio in process CPU time."""
        return self.twin_cpu / self.mirror_cpu if self.mirror_cpu else 0.0


def _replay(
    world: World, twin: TwinBackend, calls: list[ToolCall]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Replay calls on fresh sessions of both backends; return their responses and final states."""
    from mirrorworld.worlds.sales.world import canonical_state

    with world.session() as ms:
        mirror = [response(ms.call(c.tool, c.args)) for c in calls]
        mstate = canonical_state(ms.db)
    with twin.session() as ts:
        other = [response(ts.call(c.tool, c.args)) for c in calls]
        tstate = ts.canonical_state()
    return mirror, other, mstate, tstate


def minimise(world: World, twin: TwinBackend, calls: list[ToolCall], kind: str) -> list[ToolCall]:
    """A short sub-sequence whose last call still diverges the same way.

    Tries the diverging call alone first (most divergences need no history),
    then drops earlier calls one at a time from the latest back, keeping each
    drop that preserves the divergence, within :data:`MINIMISE_REPLAYS` replays.
    """

    def diverges(candidate: list[ToolCall]) -> bool:
        mirror, other, _ms, _ts = _replay(world, twin, candidate)
        found = compare(mirror[-1], other[-1])
        return found is not None and found[0] == kind

    if len(calls) > 1 and diverges(calls[-1:]):
        return calls[-1:]
    current = list(calls)
    replays = 1
    i = len(current) - 2
    while i >= 0 and replays < MINIMISE_REPLAYS:
        candidate = current[:i] + current[i + 1 :]
        replays += 1
        if diverges(candidate):
            current = candidate
        i -= 1
    return current


def _state_diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return _diff(a, b, "")


def run_fidelity(
    world: World,
    twin: TwinBackend,
    traces: Iterable[Trace],
    *,
    progress: Callable[[int], None] | None = None,
) -> FidelityRun:
    """Replay every trace on both backends and compare them call by call. See the module docstring."""
    from mirrorworld.twin.tryton import versions
    from mirrorworld.worlds.sales.world import canonical_state

    started = time.perf_counter()
    run = FidelityRun(world.id, versions())
    minimised: set[tuple[str, str]] = set()
    minimise_spent = 0.0
    replayed: list[list[ToolCall]] = []
    for trace in traces:
        calls = trace.calls
        with world.session() as ms:
            if trace.seed is not None:
                rng = random.Random(f"fidelity/{trace.kind}/{trace.seed}")
                invalid = 0.35 if trace.kind == "invalid" else 0.0
                calls = []
                mirror_r = []
                for _ in range(trace.length):
                    call = random_call(rng, ms, invalid)
                    calls.append(call)
                    mirror_r.append(response(ms.call(call.tool, call.args)))
                trace.calls = calls
            else:
                mirror_r = [response(ms.call(c.tool, c.args)) for c in calls]
            mstate = canonical_state(ms.db)
        with twin.session() as ts:
            twin_r = []
            deciders = []
            for c in calls:
                twin_r.append(response(ts.call(c.tool, c.args)))
                deciders.append(ts.decided_by)
            tstate = ts.canonical_state()
        replayed.append(calls)
        fam = run.by_family.setdefault(trace.family, [0, 0, 0, 0])
        kind = run.by_kind.setdefault(trace.kind, [0, 0, 0, 0])
        for step, (call, a, b, decider) in enumerate(zip(calls, mirror_r, twin_r, deciders, strict=True)):
            if call.tool in SESSION_TOOLS and a["ok"] and b["ok"]:
                run.session_calls += 1
                continue
            tool = call.tool if call.tool in world.tools_by_name else "(unknown tool)"
            bucket = run.by_tool.setdefault(tool, [0, 0])
            who = run.by_decider.setdefault(decider, [0, 0])
            per_tool = run.decider_tools.setdefault(decider, {})
            per_tool[tool] = per_tool.get(tool, 0) + 1
            run.calls += 1
            bucket[1] += 1
            fam[1] += 1
            kind[1] += 1
            who[1] += 1
            found = compare(a, b)
            if found is None:
                run.agreed += 1
                bucket[0] += 1
                fam[0] += 1
                kind[0] += 1
                who[0] += 1
                if not a["ok"]:
                    run.messages[1] += 1
                    same = a["message"] == b["message"]
                    run.messages[0] += int(same)
                    if not same and tool not in run.message_examples:
                        run.message_examples[tool] = {
                            "args": call.args,
                            "mirror": a["message"],
                            "twin": b["message"],
                            "decided_by": decider,
                        }
                continue
            div = Divergence(trace.name, found[0], trace.family, step, call.tool, call.args, found[1], a, b)
            signature = (found[0], call.tool)
            if signature not in minimised and len(minimised) < MINIMISE_LIMIT and minimise_spent < MINIMISE_SECONDS:
                # One minimal trace per kind of divergence and tool: the rest are the same finding.
                minimised.add(signature)
                t0 = time.perf_counter()
                small = minimise(world, twin, calls[: step + 1], found[0])
                minimise_spent += time.perf_counter() - t0
                div.minimal = [{"tool": c.tool, "args": c.args} for c in small]
            run.divergences.append(div)
        fam[3] += 1
        kind[3] += 1
        same = mstate == tstate
        if same:
            fam[2] += 1
            kind[2] += 1
        else:
            run.divergences.append(
                Divergence(
                    trace.name, "final_state", trace.family, len(calls), "", None, _state_diff(mstate, tstate)[:8]
                )
            )
        if trace.kind == "gold":
            run.gold_final[1] += 1
            run.gold_final[0] += int(same)
        if progress is not None:
            progress(len(calls))
    _time_both(run, world, twin, replayed)
    run.seconds = time.perf_counter() - started
    return run


SPEED_CALLS = 300
"""About how many calls the speed sample holds."""
SPEED_REPEATS = 3
"""How many times each sampled trace is replayed on each backend (the best counts)."""


def _time_both(run: FidelityRun, world: World, twin: TwinBackend, traces: list[list[ToolCall]]) -> None:
    """Time a sample of the traces the same way on both backends (see the module docstring)."""
    total = sum(len(t) for t in traces)
    step = max(1, -(-total // SPEED_CALLS))
    sample = [t for t in traces[::step] if t]
    run.mirror_seconds, run.mirror_cpu = time_in_child(world, sample, SPEED_REPEATS)
    run.twin_seconds, run.twin_cpu = time_traces(twin.session, sample, SPEED_REPEATS)
    run.timed_calls = sum(len(t) for t in sample)
