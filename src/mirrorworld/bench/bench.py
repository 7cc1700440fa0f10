"""``mirrorworld bench``: the performance figures, each as a ratio against a baseline.

Everything runs in one process, single-threaded (so rates are per core), on one
world built fresh for the run (its own image, task and gold caches). Each
figure is measured for mirrorworld and for :class:`~mirrorworld.bench.baseline.JsonBaseline`,
a tau-bench-style environment on the same data, and reported with
``ratio`` = how many times better mirrorworld is (baseline / mirrorworld for
times and memory, mirrorworld / baseline for rates):

* **reset** — ``MirrorEnv.reset(seed=i)`` (closes the previous episode, opens a
  session, applies the task's setup, builds the observation) over the run's
  prepared tasks, and onto tasks never generated before (the task is made in
  the reset, as when every training episode draws a fresh seed); also the raw
  session reset, ``world.session(task)`` + ``close()``. Baseline: reload the
  JSON data and apply the setup.
* **step** — ``MirrorEnv.step`` of a read tool (``get_customer`` with JSON
  arguments). Baseline: parse the arguments, look the row up, ``json.dumps``.
* **verify** — ``Verifier()(session)`` after the gold solution ran, with the
  world's gold outcome cached (warm) and not yet computed (cold). Baseline:
  tau-bench's grading (hash the state, rebuild the gold state, hash, compare).
* **episodes/s** — reset, 10 steps (reads, then the task's gold calls) and
  the verdict, through ``MirrorEnv``. Baseline: the same through the baseline.
* **memory per live session** — many sessions held open at once; SQLite's own
  heap (``sqlite3_memory_used``) plus Python allocations (``tracemalloc``) per
  session. Baseline: the same for loaded copies of the data. The RSS growth is
  reported alongside.

Wall-clock figures are never asserted on in tests; targets come from the design
document's performance section.
"""

from __future__ import annotations

import gc
import io
import json
import math
import os
import platform
import sqlite3
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from mirrorworld.bench.baseline import JsonBaseline, Tables, Write, dump_tables, writes_from_changes
from mirrorworld.bench.measure import measure_memory
from mirrorworld.bench.measure import timed as _timed
from mirrorworld.bench.scale import BUDGET_BYTES, SCALE_PLANS, ScalePlan, bench_scale, live_memory
from mirrorworld.core.registry import default
from mirrorworld.core.session import Session
from mirrorworld.core.task import Task
from mirrorworld.core.world import World
from mirrorworld.envs.gymnasium import MirrorEnv
from mirrorworld.verify.verifier import Verifier

__all__ = ["EPISODE_STEPS", "PLANS", "Plan", "format_report", "percentile", "run_bench"]

FRESH_SEEDS = 1 << 24
"""``MirrorEnv.reset(seed=...)`` indices from here on name tasks the run has not generated."""

EPISODE_STEPS = 10
"""Tool calls per episode in the episodes/s figure (reads fill up to this after the gold calls)."""

Better = Literal["lower", "higher"]


@dataclass(frozen=True)
class Plan:
    """How many iterations each measurement runs."""

    tasks: int
    """Distinct tasks cycled through (train split, all families)."""
    resets: int
    baseline_resets: int
    steps: int
    baseline_steps: int
    verifies: int
    baseline_verifies: int
    cold: int
    episodes: int
    baseline_episodes: int
    sessions: int
    """Sessions held open at once for the memory figure."""
    baseline_copies: int


PLANS: dict[str, Plan] = {
    "full": Plan(
        tasks=45,
        resets=3000,
        baseline_resets=300,
        steps=20_000,
        baseline_steps=20_000,
        verifies=900,
        baseline_verifies=100,
        cold=45,
        episodes=1500,
        baseline_episodes=100,
        sessions=200,
        baseline_copies=30,
    ),
    "quick": Plan(
        tasks=9,
        resets=90,
        baseline_resets=4,
        steps=500,
        baseline_steps=500,
        verifies=18,
        baseline_verifies=3,
        cold=3,
        episodes=18,
        baseline_episodes=3,
        sessions=8,
        baseline_copies=3,
    ),
}


# -- measuring ------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (``0 < q <= 100``) of ``values``."""
    if not values:
        raise ValueError("no samples")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def _us(ns: Sequence[int]) -> list[float]:
    return [v / 1000 for v in ns]


# -- the report -------------------------------------------------------------------


def _figure(
    label: str,
    mirror: float,
    baseline: float,
    unit: str,
    better: Better,
    target: float | None = None,
    note: str = "",
) -> dict[str, Any]:
    if not (mirror > 0 and baseline > 0 and math.isfinite(mirror) and math.isfinite(baseline)):
        raise RuntimeError(f"benchmark figure {label!r} is not a positive number: {mirror!r} / {baseline!r}")
    ratio = baseline / mirror if better == "lower" else mirror / baseline
    meets = None if target is None else (mirror <= target if better == "lower" else mirror >= target)
    return {
        "label": label,
        "mirrorworld": mirror,
        "baseline": baseline,
        "ratio": ratio,
        "unit": unit,
        "better": better,
        "target": target,
        "meets_target": meets,
        "note": note,
    }


def _machine() -> dict[str, Any]:
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 1
    return {
        "cpu_count": os.cpu_count() or 1,
        "cpus_usable": usable,
        "cpu_model": model or platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
    }


class _Progress:
    """A rich progress bar on stderr, or nothing."""

    def __init__(self, enabled: bool, total: int) -> None:
        self._bar: Any = None
        self._task: Any = None
        if enabled:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                TextColumn("[bold]bench[/] {task.description}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total}"),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._task = self._bar.add_task("starting", total=total)

    @contextmanager
    def running(self) -> Iterator[_Progress]:
        if self._bar is None:
            yield self
            return
        with self._bar:
            yield self

    @contextmanager
    def phase(self, description: str) -> Iterator[None]:
        if self._bar is not None:
            self._bar.update(self._task, description=description)
        yield
        if self._bar is not None:
            self._bar.advance(self._task)


# -- the benchmark ------------------------------------------------------------------


@dataclass
class _Case:
    """One task with everything both sides need to run it, prepared untimed."""

    index: int
    task: Task
    gold_actions: list[dict[str, Any]]
    read_actions: list[dict[str, Any]]
    gold_args: list[tuple[str, str]]
    read_args: list[str]
    writes: list[Write]


def _read_args(task: Task, n: int, customers: int) -> list[str]:
    """Arguments of ``n`` ``get_customer`` calls: the task's customer, then others in turn."""
    cid = task.customer_id or 1
    return [json.dumps({"customer_id": (cid + k - 1) % customers + 1}) for k in range(n)]


def _customers(world: World) -> int:
    return int(world.image.query("SELECT COUNT(*) FROM customers")[0][0])


def _prepare(world: World, index: int) -> _Case:
    task = world.task_for("train", index, None)
    with world.session(task) as s:
        for call in task.gold:
            result = s.call(call.tool, call.args)
            if not result.ok:
                raise RuntimeError(f"{task.id}: gold call {call.tool} failed: {result.error}")
        writes = writes_from_changes(s.changes())
    read_tool = world.tool_index("get_customer")
    gold_args = [(c.tool, json.dumps(c.args)) for c in task.gold]
    reads = _read_args(task, max(0, EPISODE_STEPS - len(task.gold)), _customers(world))
    return _Case(
        index=index,
        task=task,
        gold_actions=[{"tool_name": world.tool_index(t), "tool_args": a} for t, a in gold_args],
        read_actions=[{"tool_name": read_tool, "tool_args": a} for a in reads],
        gold_args=gold_args,
        read_args=reads,
        writes=writes,
    )


def _play_baseline(base: JsonBaseline, case: _Case) -> Tables:
    """A baseline episode of ``case`` up to its verdict: reset, reads, gold calls."""
    data = base.reset(case.task)
    for a in case.read_args:
        base.step(data, "get_customer", a)
    for j, (tool, args) in enumerate(case.gold_args):
        base.step(data, tool, args, case.writes if j == 0 else ())
    return data


def _check_baseline(world: World, base: JsonBaseline, case: _Case) -> None:
    """Fail unless the baseline's initial and final states equal the mirror's, row for row."""
    image = world.image
    with world.session(case.task) as s:
        if base.reset(case.task) != dump_tables(s.db, image.tables, image.columns):
            raise RuntimeError(f"the baseline's initial state of {case.task.id} differs from the mirror's")
        _run_gold(s)
        final = _play_baseline(base, case)
        if final != dump_tables(s.db, image.tables, image.columns):
            raise RuntimeError(f"the baseline's gold state of {case.task.id} differs from the mirror's")
    if not base.grade(final, case.task, case.writes):
        raise RuntimeError(f"the baseline fails the gold solution of {case.task.id}")


def _run_gold(session: Session) -> None:
    task = session.task
    assert task is not None
    for call in task.gold:
        session.call(call.tool, call.args)


@dataclass
class _Run:
    """One benchmark run: its plan, its private world, the baseline, the prepared cases, what was measured."""

    plan: Plan
    world: World
    base: JsonBaseline
    cases: list[_Case]
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def k(self) -> int:
        """How many cases are cycled through."""
        return len(self.cases)


def run_bench(
    world: str = "helpdesk", *, quick: bool = False, progress: bool = True, scale: bool = True
) -> dict[str, Any]:
    """Measure mirrorworld against the tau-bench-style baseline; see the module docstring.

    ``quick`` runs a few iterations of everything (seconds; for tests and
    smoke checks); the full run takes a few minutes on a 2-core machine, most
    of it the scale section (:mod:`mirrorworld.bench.scale`; ``scale=False``
    leaves it out).
    """
    plan = PLANS["quick" if quick else "full"]
    splan = SCALE_PLANS["quick" if quick else "full"]
    started = time.perf_counter()
    shared = default.get(world)
    # A private instance: its own image, task cache and gold cache, so "cold" is cold.
    w: World = type(shared)(scale=shared.scale, data_seed=shared.data_seed)
    bar = _Progress(progress, total=8 + (len(splan.scales) + 1 if scale else 0))

    with bar.running(), tempfile.TemporaryDirectory(prefix="mirrorworld-bench-") as tmp:
        with bar.phase("building the world and the baseline's JSON"):
            run = _build(w, plan, Path(tmp))
        with bar.phase("reset"):
            _bench_reset(run)
        with bar.phase("read steps"):
            _bench_steps(run)
        verifier = Verifier()
        with bar.phase("verify (warm gold)"):
            warm_ns, b_verify_ns = _bench_verify_warm(run, verifier)
        with bar.phase("verify (cold gold)"):
            _bench_verify_cold(run, verifier, warm_ns, b_verify_ns)
        with bar.phase("whole episodes"):
            _bench_episodes(run)
        with bar.phase("memory per live session"):
            _bench_memory(run)
        if scale:
            _bench_scale(run, type(shared), shared, splan, bar)
        with bar.phase("done"):
            pass

    return {
        "world": w.id,
        "world_hash": w.content_hash,
        "quick": quick,
        "machine": _machine(),
        "plan": asdict(plan),
        "elapsed_s": time.perf_counter() - started,
        "figures": run.figures,
        "detail": run.detail,
    }


def _build(w: World, plan: Plan, tmp: Path) -> _Run:
    """Build the image and the baseline's JSON, prepare the cases, check the baseline's states are the mirror's."""
    image = w.image
    base = JsonBaseline.export(image, tmp / f"{w.name}.json")
    cases = [_prepare(w, i) for i in range(plan.tasks)]
    for c in cases[: len(w.families)]:  # the baseline must reach the very state the mirror reaches
        _check_baseline(w, base, c)
    run = _Run(plan, w, base, cases)
    run.detail["image_bytes"] = image.nbytes
    run.detail["json_bytes"] = base.path.stat().st_size
    run.detail["rows"] = sum(len(v) for v in base.load().values())
    return run


def _bench_reset(run: _Run) -> None:
    """``MirrorEnv.reset`` and the raw session reset, against reloading the baseline's JSON."""
    w, base, cases, plan, k = run.world, run.base, run.cases, run.plan, run.k
    env = MirrorEnv(w)
    gym_reset = _timed(lambda i: env.reset(seed=i % k), plan.resets, warmup=2 * k)
    # What training pays: every episode a task never generated before (its family's scans included).
    fresh_reset = _timed(lambda i: env.reset(seed=FRESH_SEEDS + i), plan.resets)
    env.close()

    def session_reset(i: int) -> None:
        w.session(cases[i % k].task).close()

    sess_reset = _timed(session_reset, plan.resets, warmup=k)
    state: dict[str, Tables] = {}

    def base_reset(i: int) -> None:
        state["data"] = base.reset(cases[i % k].task)  # drops the previous copy, like tau-bench

    b_reset = _timed(base_reset, plan.baseline_resets, warmup=2)
    state.clear()
    g, s, b, f = _us(gym_reset), _us(sess_reset), _us(b_reset), _us(fresh_reset)
    figures = run.figures
    figures["reset_p50_us"] = _figure(
        "reset p50 (MirrorEnv.reset)",
        percentile(g, 50),
        percentile(b, 50),
        "µs",
        "lower",
        100,
        "baseline: read + json.loads the data file, apply the task's setup",
    )
    figures["reset_p99_us"] = _figure(
        "reset p99 (MirrorEnv.reset)", percentile(g, 99), percentile(b, 99), "µs", "lower"
    )
    figures["fresh_reset_p50_us"] = _figure(
        "reset onto a never-seen task p50 (MirrorEnv.reset)",
        percentile(f, 50),
        percentile(b, 50),
        "µs",
        "lower",
        150,
        "the task generated in the reset; baseline: its reset of a task made beforehand",
    )
    figures["session_reset_p50_us"] = _figure(
        "session reset p50 (world.session + close)",
        percentile(s, 50),
        percentile(b, 50),
        "µs",
        "lower",
        100,
        "pooled connection rollback + task setup",
    )
    figures["session_reset_p99_us"] = _figure(
        "session reset p99 (world.session + close)", percentile(s, 99), percentile(b, 99), "µs", "lower"
    )


def _bench_steps(run: _Run) -> None:
    """Gym steps of a read tool, timed one by one between untimed resets, against the baseline's lookup."""
    w, base, cases, plan, k = run.world, run.base, run.cases, run.plan, run.k
    chunk = 25  # steps per episode; the resets in between are not timed
    env = MirrorEnv(w, max_steps=chunk + 5)
    texts = _read_args(cases[0].task, 500, _customers(w))
    actions: list[dict[str, Any]] = [{"tool_name": w.tool_index("get_customer"), "tool_args": a} for a in texts]
    clock = time.perf_counter_ns
    step_ns: list[int] = []
    gc.collect()
    for lo in range(-chunk, plan.steps, chunk):  # the first chunk warms up
        env.reset(seed=(lo // chunk) % k)
        for i in range(lo, min(lo + chunk, plan.steps)):
            action = actions[i % len(actions)]
            t0 = clock()
            env.step(action)
            dt = clock() - t0
            if i >= 0:
                step_ns.append(dt)
    env.close()
    data = base.reset(cases[0].task)
    b_step_ns: list[int] = []
    gc.collect()
    for i in range(-chunk, plan.baseline_steps):
        text = texts[i % len(texts)]
        t0 = clock()
        base.step(data, "get_customer", text)
        dt = clock() - t0
        if i >= 0:
            b_step_ns.append(dt)
    # A heavier read, reported for reference: an order with its lines and refunds.
    env = MirrorEnv(w)
    env.reset(seed=0)
    order_action = {"tool_name": w.tool_index("get_order"), "tool_args": '{"order_id": 17}'}
    order_ns = _timed(lambda i: env.step(order_action), min(chunk, plan.steps), warmup=2)
    env.close()
    run.figures["step_rate"] = _figure(
        "gym steps/s (read tool)",
        1e9 * len(step_ns) / sum(step_ns),
        1e9 * len(b_step_ns) / sum(b_step_ns),
        "steps/s",
        "higher",
        50_000,
        "get_customer with JSON arguments, one core",
    )
    run.figures["step_p50_us"] = _figure(
        "gym step p50 (read tool)", percentile(_us(step_ns), 50), percentile(_us(b_step_ns), 50), "µs", "lower", 20
    )
    run.detail["get_order_step_p50_us"] = percentile(_us(order_ns), 50)


def _bench_verify_warm(run: _Run, verifier: Verifier) -> tuple[list[int], list[int]]:
    """Verifications with every gold outcome cached, and the baseline's grading: their times in ns."""
    w, base, cases, plan, k = run.world, run.base, run.cases, run.plan, run.k
    for c in cases:
        w.gold(c.task)

    def verify_once(i: int, times: list[int]) -> None:
        with w.session(cases[i % k].task) as sess:
            _run_gold(sess)
            t0 = time.perf_counter_ns()
            verdict = verifier(sess)
            times.append(time.perf_counter_ns() - t0)
        if not verdict.passed:
            raise RuntimeError(f"gold solution of {sess.task.id if sess.task else '?'} fails verification")

    warm_ns: list[int] = []
    for i in range(k):
        verify_once(i, [])
    for i in range(plan.verifies):
        verify_once(i, warm_ns)

    def base_grade_once(i: int, times: list[int]) -> None:
        c = cases[i % k]
        agent = _play_baseline(base, c)
        t0 = time.perf_counter_ns()
        ok = base.grade(agent, c.task, c.writes)
        times.append(time.perf_counter_ns() - t0)
        if not ok:
            raise RuntimeError(f"baseline grading failed {c.task.id}")

    b_verify_ns: list[int] = []
    base_grade_once(0, [])
    for i in range(plan.baseline_verifies):
        base_grade_once(i, b_verify_ns)
    return warm_ns, b_verify_ns


def _bench_verify_cold(run: _Run, verifier: Verifier, warm_ns: list[int], b_verify_ns: list[int]) -> None:
    """Verifications of never-seen tasks (the gold outcome computed on the way), and the verify figures."""
    w, plan, k = run.world, run.plan, run.k
    cold_tasks = [w.task_for("train", k + j, None) for j in range(plan.cold)]
    cold_ns: list[int] = []
    gold_ns: list[int] = []
    for t in cold_tasks:
        with w.session(t) as sess:
            _run_gold(sess)
            t0 = time.perf_counter_ns()
            verdict = verifier(sess)
            cold_ns.append(time.perf_counter_ns() - t0)
        if not verdict.passed:
            raise RuntimeError(f"gold solution of {t.id} fails verification")
    for j in range(plan.cold):  # the gold outcome alone, on another set of fresh tasks
        t = w.task_for("train", k + plan.cold + j, None)
        t0 = time.perf_counter_ns()
        w.gold(t)
        gold_ns.append(time.perf_counter_ns() - t0)
    v, bv = _us(warm_ns), _us(b_verify_ns)
    figures = run.figures
    figures["verify_p50_us"] = _figure(
        "verify p50 (gold cached)",
        percentile(v, 50),
        percentile(bv, 50),
        "µs",
        "lower",
        1000,
        "baseline: hash state, reload + replay gold writes, hash, compare",
    )
    figures["verify_p99_us"] = _figure("verify p99 (gold cached)", percentile(v, 99), percentile(bv, 99), "µs", "lower")
    figures["verify_cold_p50_us"] = _figure(
        "verify p50 (gold computed)",
        percentile(_us(cold_ns), 50),
        percentile(bv, 50),
        "µs",
        "lower",
        None,
        "first verification of a task: replays its gold solution once",
    )
    run.detail["gold_outcome_p50_us"] = percentile(_us(gold_ns), 50)


def _bench_episodes(run: _Run) -> None:
    """Whole episodes through ``MirrorEnv`` (reset, reads, gold calls, verdict), against the baseline's."""
    w, base, cases, plan, k = run.world, run.base, run.cases, run.plan, run.k
    env = MirrorEnv(w)

    def mirror_episode(i: int) -> None:
        c = cases[i % k]
        env.reset(seed=c.index)
        info: dict[str, Any] = {}
        for a in c.read_actions:
            env.step(a)
        for a in c.gold_actions:
            info = env.step(a)[4]
        if not info.get("verdict", {}).get("passed"):
            raise RuntimeError(f"episode of {c.task.id} did not end with a passing verdict")

    ep_ns = _timed(mirror_episode, plan.episodes, warmup=k)
    env.close()

    def base_episode(i: int) -> None:
        c = cases[i % k]
        if not base.grade(_play_baseline(base, c), c.task, c.writes):
            raise RuntimeError(f"baseline episode of {c.task.id} failed")

    b_ep_ns = _timed(base_episode, plan.baseline_episodes, warmup=1)
    run.figures["episode_rate"] = _figure(
        "whole episodes/s",
        1e9 * len(ep_ns) / sum(ep_ns),
        1e9 * len(b_ep_ns) / sum(b_ep_ns),
        "episodes/s",
        "higher",
        500,
        f"reset, {EPISODE_STEPS} steps (reads + gold calls), verdict",
    )
    run.detail["episode_p50_us"] = percentile(_us(ep_ns), 50)


def _bench_memory(run: _Run) -> None:
    """Memory per live session, many held at once, against loaded copies of the baseline's data."""
    w, base, cases, plan, k = run.world, run.base, run.cases, run.plan, run.k
    mem = live_memory(w, [c.task for c in cases], plan.sessions)
    b_mem, b_held = measure_memory(lambda i: base.reset(cases[i % k].task), plan.baseline_copies)
    del b_held
    gc.collect()
    mb = 1e6
    run.figures["memory_per_session_mb"] = _figure(
        "memory per live session",
        mem.per_item_bytes / mb,
        b_mem.per_item_bytes / mb,
        "MB",
        "lower",
        5,
        f"{plan.sessions} sessions alive, one write each ({mem.method}); baseline: loaded copies of the data",
    )
    run.detail["memory"] = {
        "mirrorworld": {k2: v2 / mb if isinstance(v2, float) else v2 for k2, v2 in asdict(mem).items()},
        "baseline": {k2: v2 / mb if isinstance(v2, float) else v2 for k2, v2 in asdict(b_mem).items()},
        "unit": "MB per session",
    }


def _bench_scale(run: _Run, cls: type[World], base: World, plan: ScalePlan, bar: _Progress) -> None:
    """The scale section (see :mod:`mirrorworld.bench.scale`): its table in ``detail``, its key figures."""
    result = bench_scale(lambda sc: cls(scale=base.scale * sc, data_seed=base.data_seed), plan, phase=bar.phase)
    run.detail["scale"] = result
    rows = result["scales"]
    low, high = rows[next(iter(rows))], rows[next(reversed(rows))]
    top = next(reversed(rows))
    f = run.figures
    for name, row in (("", low), (f"_x{top}", high)):
        f[f"fresh_session_p50_us{name}"] = _figure(
            f"fresh session p50 (scale {'1' if not name else top})",
            row["fresh_session_us"],
            row["private_copy_us"],
            "µs",
            "lower",
            100,
            "all clones lent, every session kept alive; baseline: a private copy of the image",
        )
    f[f"fresh_reset_p50_us_x{top}"] = _figure(
        f"fresh-task reset p50 (scale {top})",
        high["fresh_reset_us"],
        low["fresh_reset_us"],
        "µs",
        "lower",
        150,
        "baseline: the same at scale 1 (1.0× = flat in world size)",
    )
    for key, label in (
        ("read_step_us", "read step p50"),
        ("search_nomatch_us", "search, no match p50"),
        ("search_status_us", "search by status p50"),
        ("verify_us", "verify update_email p50"),
    ):
        if key in high:
            f[f"{key[:-3]}_p50_us_x{top}"] = _figure(
                f"{label} (scale {top})", high[key], low[key], "µs", "lower", None, "baseline: the same at scale 1"
            )
    mb = 1 << 20
    f[f"memory_per_session_mb_x{top}"] = _figure(
        f"memory per live session (scale {top})",
        high["memory_per_session_kb"] / 1024,
        high["image_mb"] * 1e6 / mb,
        "MB",
        "lower",
        0.5,
        f"{plan.live_per_scale:,} sessions alive, one write each; baseline: a private copy of the image",
    )
    live = result["live_bytes_per_session"]
    most = max(live, key=int)
    f["live_sessions_8gb"] = _figure(
        "live sessions in 8 GiB",
        BUDGET_BYTES / live[most],
        BUDGET_BYTES / result["image_bytes"],
        "sessions",
        "higher",
        100_000,
        f"from {int(most):,} sessions alive at once; baseline: a private copy each",
    )


# -- formatting ---------------------------------------------------------------------


def _num(value: float, unit: str) -> str:
    if unit in ("steps/s", "episodes/s"):
        return f"{value:,.0f}"
    if unit == "MB":
        return f"{value:,.2f}" if value >= 0.1 else f"{value:.4f}"
    return f"{value:,.1f}" if value < 10_000 else f"{value:,.0f}"


def _target(value: float, unit: str) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else _num(value, unit)


def format_report(report: dict[str, Any]) -> str:
    """The report as a table for the terminal (plain text)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    m = report.get("machine", {})
    title = (
        f"{report['world']} ({report['world_hash']})  "
        f"{m.get('cpu_model', '?')}, {m.get('cpu_count', '?')} CPUs, Python {m.get('python', '?')}, "
        f"SQLite {m.get('sqlite', '?')}"
    )
    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("figure")
    table.add_column("mirrorworld", justify="right")
    table.add_column("baseline", justify="right")
    table.add_column("ratio", justify="right")
    table.add_column("target", justify="right")
    table.add_column("meets", justify="center")
    for fig in report["figures"].values():
        unit = fig["unit"]
        target = fig["target"]
        if target is None:
            target_text, meets = "", ""
        else:
            target_text = ("≤ " if fig["better"] == "lower" else "≥ ") + _target(float(target), unit) + f" {unit}"
            meets = "yes" if fig["meets_target"] else "NO"
        table.add_row(
            fig["label"],
            f"{_num(fig['mirrorworld'], unit)} {unit}",
            f"{_num(fig['baseline'], unit)} {unit}",
            f"{fig['ratio']:,.2f}×" if fig["ratio"] < 10 else f"{fig['ratio']:,.1f}×",
            target_text,
            meets,
        )
    console = Console(file=io.StringIO(), width=130, record=True, force_terminal=False, color_system=None)
    console.print(table)
    lines = [line.rstrip() for line in console.export_text().rstrip().splitlines()]
    detail = report.get("detail", {})
    extra = []
    if "get_order_step_p50_us" in detail:
        extra.append(f"get_order step p50 {detail['get_order_step_p50_us']:,.1f} µs")
    if "gold_outcome_p50_us" in detail:
        extra.append(f"cold gold outcome p50 {detail['gold_outcome_p50_us']:,.0f} µs")
    if "episode_p50_us" in detail:
        extra.append(f"episode p50 {detail['episode_p50_us']:,.0f} µs")
    mem = detail.get("memory", {})
    if mem:
        mw, bl = mem["mirrorworld"], mem["baseline"]
        extra.append(
            f"memory: sqlite {mw['sqlite_bytes']:.2f} + python {mw['python_bytes']:.2f} MB/session "
            f"(RSS growth {mw['rss_bytes']:.2f}); baseline RSS growth {bl['rss_bytes']:.2f} MB/copy"
        )
    if "image_bytes" in detail:
        extra.append(
            f"data: {detail.get('rows', 0):,} rows, SQLite image {detail['image_bytes'] / 1e6:.2f} MB, "
            f"JSON {detail.get('json_bytes', 0) / 1e6:.2f} MB"
        )
    extra.append(
        "ratio = how many times better mirrorworld is than the tau-bench-style baseline, same data, same process"
        + ("; QUICK run: too few iterations to quote" if report.get("quick") else "")
        + f"; took {report.get('elapsed_s', 0):.1f} s"
    )
    lines += ["  " + e for e in extra]
    if "scale" in detail:
        lines += ["", *format_scale(detail["scale"])]
    return "\n".join(lines) + "\n"


def format_scale(scale: dict[str, Any]) -> list[str]:
    """The scale section as text lines: one row per world scale, then the live-session memory."""
    cols = (
        ("image_mb", "image MB", "{:,.1f}"),
        ("fresh_reset_us", "fresh reset", "{:,.0f}"),
        ("fresh_session_us", "fresh session", "{:,.0f}"),
        ("private_copy_us", "private copy", "{:,.0f}"),
        ("read_step_us", "read step", "{:,.1f}"),
        ("search_nomatch_us", "search none", "{:,.1f}"),
        ("search_status_us", "search status", "{:,.1f}"),
        ("verify_us", "verify", "{:,.0f}"),
        ("memory_per_session_kb", "KB/session", "{:,.1f}"),
        ("resident_limit", "clones", "{:,.0f}"),
    )
    head = "  scale " + "".join(f"{name:>15}" for _, name, _ in cols)
    out = ["  cost against world size (p50 µs, one core)", head]
    for key, row in scale["scales"].items():
        cells = "".join(f"{fmt.format(row[c]) if c in row else '-':>15}" for c, _, fmt in cols)
        out.append(f"  {key:>5} {cells}")
    live = ", ".join(f"{int(n):,} alive: {b / 1024:,.1f} KB" for n, b in scale["live_bytes_per_session"].items())
    out.append(f"  memory per live session of the default world: {live}")
    return out
