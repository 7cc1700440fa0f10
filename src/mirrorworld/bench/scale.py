"""What a world's size and the number of live sessions cost: the scale section of ``mirrorworld bench``.

Training pays for fresh tasks on large worlds with many sessions alive at
once, so each figure here is measured on a world built fresh at each scale
(1, 10 and 100 times the default data in a full run), in this process, one
core:

* **reset onto a never-seen task** — ``MirrorEnv.reset(seed=...)`` on seeds
  no task was generated for (the task is made in the reset);
* **fresh session** — ``world.session(task)`` on a task of its own while the
  image's resident clones are all lent out and every session is kept alive,
  so each new one takes a clone from the least recently used (which parks),
  once every clone has compiled its statements, as in a long run (a clone
  compiles each statement the first time it runs it: 20-90 µs, once).
  Baseline: a private copy of the image (``deserialize``), what a session
  cost before sessions shared the image;
* **read step** — ``get_customer``, and the searches that scan the most
  (``search_customers`` matching nothing, ``search_tickets`` by status);
* **verify** — the verdict of an ``update_email`` episode after its gold
  solution (the disclosure lookups of the communication check);
* **memory per live session** — RSS growth per session with ``1k``, ``10k``
  and ``100k`` sessions alive at once on the default world (each on a task
  of its own, each after one committed write), and at each scale with the
  largest count a run affords. Baseline: a private copy of the image.

Each timed figure's ratio is against the same figure at scale 1 in the same
run (1.0 means flat in world size); memory's is against the private copy.
:func:`plot_scale` draws cost against world size.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mirrorworld.bench.measure import Memory, measure_memory
from mirrorworld.bench.measure import timed as _timed
from mirrorworld.core.session import Session
from mirrorworld.core.store import connect_image
from mirrorworld.core.task import Task
from mirrorworld.core.world import World
from mirrorworld.envs.gymnasium import MirrorEnv
from mirrorworld.verify.verifier import Verifier

__all__ = ["SCALE_PLANS", "ScalePlan", "bench_scale", "plot_scale"]

FRESH_SEEDS = 1 << 25
"""Seeds from here on name tasks no earlier part of the run generated."""

BUDGET_BYTES = 8 << 30
"""The memory the "sessions that fit" figure divides (8 GiB)."""


@dataclass(frozen=True)
class ScalePlan:
    """How much each scale measurement runs."""

    scales: tuple[float, ...]
    live: tuple[int, ...]
    """Session counts held at once on the default world for the memory figure."""
    live_per_scale: int
    """Sessions held at once at each scale."""
    resets: int
    sessions: int
    steps: int
    verifies: int


SCALE_PLANS: dict[str, ScalePlan] = {
    "full": ScalePlan((1, 10, 100), (1_000, 10_000, 100_000), 2_000, 300, 300, 2_000, 60),
    "quick": ScalePlan((1, 2), (200, 1_000), 200, 20, 20, 100, 3),
}


def _p50(ns: Sequence[int]) -> float:
    ordered = sorted(ns)
    return ordered[(len(ordered) - 1) // 2] / 1000


def _one_write(world: World, task: Task) -> Session:
    """A live session on ``task`` after its first gold write (a committed call)."""
    s = world.session(task)
    call = next((c for c in task.gold if world.tools_by_name[c.tool].kind == "write"), None)
    if call is not None:
        s.call(call.tool, call.args)
    return s


def live_memory(world: World, tasks: Sequence[Task], n: int) -> Memory:
    """Memory per live session with ``n`` alive at once, each after one write, the resident clones made first.

    The clones are a fixed cost of the image (its :attr:`~mirrorworld.core.store.Image.resident_limit`
    copies), so they are made before measuring: what is measured is what one
    more live session costs.
    """
    warm = [_one_write(world, tasks[i % len(tasks)]) for i in range(world.image.resident_limit)]
    for s in warm:
        s.close()
    warm.clear()
    mem, held = measure_memory(lambda i: _one_write(world, tasks[i % len(tasks)]), n)
    for obj in held:
        assert isinstance(obj, Session)
        obj.close()
    held.clear()
    gc.collect()
    return mem


def _warm_clones(world: World) -> None:
    """Have every resident clone compile what a session of each family runs on it, as a long run has.

    Each clone keeps its own compiled statements: a clone meeting a family's
    setup, writes or parking for the first time compiles them (20-90 µs a
    statement), once in a run. So many sessions of each family are made in
    turn, each after one write, that every clone is lent to one of each, and
    parks one; then all are closed, their clones back in the pool.
    """
    limit = world.image.resident_limit
    warm = [
        _one_write(world, world.task(f.name, FRESH_SEEDS // 32 + i)) for f in world.families for i in range(limit + 1)
    ]
    for s in warm:
        s.close()


def _tasks(world: World, n: int, offset: int) -> list[Task]:
    families = [f.name for f in world.families]
    return [world.task(families[i % len(families)], offset + i) for i in range(n)]


def _one_scale(world: World, plan: ScalePlan) -> dict[str, float]:
    t0 = time.perf_counter()
    image = world.image
    out: dict[str, float] = {"build_s": time.perf_counter() - t0, "image_mb": image.nbytes / 1e6}
    env = MirrorEnv(world)
    env.reset(seed=0)
    out["fresh_reset_us"] = _p50(_timed(lambda i: env.reset(seed=FRESH_SEEDS + i), plan.resets))
    env.close()
    # Fresh sessions with every resident clone lent out and every session kept alive.
    tasks = _tasks(world, plan.sessions, FRESH_SEEDS // 2)
    for t in tasks:
        world.prepared(t)
        world.session(t).close()  # the task's clock and setup compiled: what is timed is the session
    _warm_clones(world)
    held = [_one_write(world, tasks[i % len(tasks)]) for i in range(image.resident_limit)]
    made: list[Session] = []
    out["fresh_session_us"] = _p50(_timed(lambda i: made.append(world.session(tasks[i])), plan.sessions))
    out["private_copy_us"] = _p50(_timed(lambda i: connect_image(image.data).close(), min(plan.sessions, 30)))
    for s in held + made:
        s.close()
    held.clear()
    made.clear()
    with world.session(tasks[0]) as s:
        s.call("get_customer", {"customer_id": 1})
        out["read_step_us"] = _p50(_timed(lambda i: s.call("get_customer", {"customer_id": 1 + i % 50}), plan.steps))
        if "search_customers" in world.tools_by_name:
            args = {"query": "Zzyzx Nomatch"}
            out["search_nomatch_us"] = _p50(_timed(lambda i: s.call("search_customers", args), plan.steps // 4))
        if "search_tickets" in world.tools_by_name:
            args2 = {"status": "open"}
            out["search_status_us"] = _p50(_timed(lambda i: s.call("search_tickets", args2), plan.steps // 4))
    family = "update_email" if "update_email" in world.families_by_name else world.families[0].name
    verifier = Verifier()
    vtasks = [world.task(family, FRESH_SEEDS // 4 + i) for i in range(plan.verifies)]
    verify_ns = []
    for t in vtasks:  # graded at the end of its episode, as training does
        world.gold(t)
        with world.session(t) as s:
            for call in t.gold:
                s.call(call.tool, call.args)
            t0 = time.perf_counter_ns()
            verifier(s)
            verify_ns.append(time.perf_counter_ns() - t0)
    out["verify_us"] = _p50(verify_ns)
    mem_tasks = _tasks(world, 200, FRESH_SEEDS // 8)
    out["memory_per_session_kb"] = live_memory(world, mem_tasks, plan.live_per_scale).per_item_bytes / 1024
    out["resident_limit"] = image.resident_limit
    return out


def bench_scale(
    make: Callable[[float], World],
    plan: ScalePlan,
    *,
    phase: Callable[[str], AbstractContextManager[Any]] = lambda name: contextlib.nullcontext(),
) -> dict[str, Any]:
    """Every scale's figures and the live-session memory of the default world (``make(1)``).

    ``make(scale)`` builds a fresh world at ``scale``; ``phase(name)`` wraps
    each part (a progress bar's step).
    """
    rows: dict[str, dict[str, float]] = {}
    for scale in plan.scales:
        with phase(f"scale {scale:g}"):
            rows[f"{scale:g}"] = _one_scale(make(scale), plan)
    with phase("live sessions"):
        world = make(plan.scales[0])
        tasks = _tasks(world, 1000, FRESH_SEEDS // 16)
        live = {str(n): live_memory(world, tasks, n).per_item_bytes for n in plan.live}
    return {"scales": rows, "live_bytes_per_session": live, "image_bytes": world.image.nbytes}


def plot_scale(scale: dict[str, Any], path: str | Path) -> Path:
    """Cost against world size (log-log), one line per figure, written to ``path`` (needs matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = scale["scales"]
    xs = [float(k) for k in rows]
    fig, (ax, mx) = plt.subplots(1, 2, figsize=(11, 4.2))
    labels = {
        "fresh_reset_us": "reset onto a never-seen task",
        "fresh_session_us": "fresh session (clones all lent)",
        "private_copy_us": "private copy of the image (before)",
        "read_step_us": "read step (get_customer)",
        "search_nomatch_us": "search_customers, no match",
        "search_status_us": "search_tickets(status)",
        "verify_us": "verify update_email",
    }
    for key, label in labels.items():
        ys = [rows[k].get(key) for k in rows]
        if all(y is not None for y in ys):
            ax.plot(xs, ys, marker="o", label=label, linestyle="--" if key == "private_copy_us" else "-")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("world scale (× default data)")
    ax.set_ylabel("p50 µs (one core)")
    ax.set_title("cost against world size")
    ax.legend(fontsize=7)
    mem = [rows[k]["memory_per_session_kb"] / 1024 for k in rows]
    copy = [rows[k]["image_mb"] / 1.048576 for k in rows]
    mx.plot(xs, mem, marker="o", label="live session (shared image, one write)")
    mx.plot(xs, copy, marker="o", linestyle="--", label="private copy of the image (before)")
    mx.set_xscale("log")
    mx.set_yscale("log")
    mx.set_xlabel("world scale (× default data)")
    mx.set_ylabel("MiB per live session")
    mx.set_title("memory per live session")
    mx.legend(fontsize=7)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
