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

The mirror/twin speed ratio is measured in the same run, per call, on the same
calls: the twin's time is the time of its calls during the comparison; the
mirror's is taken after the comparison, replaying every trace again (best of
three per trace) so that the twin's work in between (its garbage, the caches
it evicts) is not charged to a mirror call that takes a thousandth of its time.
"""

from __future__ import annotations

import gc
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
from mirrorworld.fidelity.traces import Trace, random_call
from mirrorworld.twin.backend import TwinBackend

__all__ = ["Divergence", "FidelityRun", "normalise", "run_fidelity"]

_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
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
    gold_final: list[int] = field(default_factory=lambda: [0, 0])
    divergences: list[Divergence] = field(default_factory=list)
    mirror_seconds: float = 0.0
    twin_seconds: float = 0.0
    seconds: float = 0.0

    @property
    def agreement(self) -> float:
        return self.agreed / self.calls if self.calls else 1.0

    @property
    def speed_ratio(self) -> float:
        """How many times faster the mirror answers a call than the twin (same calls, same run)."""
        return self.twin_seconds / self.mirror_seconds if self.mirror_seconds else 0.0


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
        mirror_r: list[dict[str, Any]] = []
        with world.session() as ms:
            if trace.seed is not None:
                rng = random.Random(f"fidelity/{trace.kind}/{trace.seed}")
                invalid = 0.35 if trace.kind == "invalid" else 0.0
                calls = []
                for _ in range(trace.length):
                    call = random_call(rng, ms, invalid)
                    calls.append(call)
                    mirror_r.append(response(ms.call(call.tool, call.args)))
                trace.calls = calls
            else:
                mirror_r = [response(ms.call(c.tool, c.args)) for c in calls]
            mstate = canonical_state(ms.db)
        with twin.session() as ts:
            twin_r = [_twin_call(run, ts, c) for c in calls]
            tstate = ts.canonical_state()
        replayed.append(calls)
        fam = run.by_family.setdefault(trace.family, [0, 0, 0, 0])
        kind = run.by_kind.setdefault(trace.kind, [0, 0, 0, 0])
        for step, (call, a, b) in enumerate(zip(calls, mirror_r, twin_r, strict=True)):
            tool = call.tool if call.tool in world.tools_by_name else "(unknown tool)"
            bucket = run.by_tool.setdefault(tool, [0, 0])
            run.calls += 1
            bucket[1] += 1
            fam[1] += 1
            kind[1] += 1
            found = compare(a, b)
            if found is None:
                run.agreed += 1
                bucket[0] += 1
                fam[0] += 1
                kind[0] += 1
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
    run.mirror_seconds = _mirror_timing(world, replayed)
    run.seconds = time.perf_counter() - started
    return run


def _twin_call(run: FidelityRun, session: Any, call: ToolCall) -> dict[str, Any]:
    """Run one call on the twin, adding its time to the run (the mirror's is taken by :func:`_mirror_timing`)."""
    t0 = time.perf_counter()
    result = session.call(call.tool, call.args)
    run.twin_seconds += time.perf_counter() - t0
    return response(result)


MIRROR_REPEATS = 3


def _mirror_timing(world: World, traces: list[list[ToolCall]]) -> float:
    """The mirror's time for every trace's calls: per trace, the best of a few replays on fresh sessions."""
    gc.collect()
    total = 0.0
    for calls in traces:
        best = float("inf")
        for _ in range(MIRROR_REPEATS):
            with world.session() as s:
                call = s.call
                t0 = time.perf_counter()
                for c in calls:
                    call(c.tool, c.args)
                spent = time.perf_counter() - t0
            best = min(best, spent)
        total += best
    return total
