"""``mirrorworld bench --drift``: what a drifted API and fault injection cost, as ratios in one process.

* **presented read** — a read tool presented under another name with a renamed
  argument (``fetch_customer(customer=…)`` over ``get_customer(customer_id=…)``),
  called through ``Session.call``, against the base tool called as it is.
* **presented write** — a write tool whose money argument is retyped to cents
  (``request_approval``), against the base tool; each call names an order that
  does not exist, so it runs (in its savepoint) and is refused alike on both,
  and the state never grows.
* **episode step with faults** — ``Episode.step`` of a read with
  ``Faults(rate=0.1)`` (a seeded draw per call; a tenth of the calls fail before
  running), against the same episode without faults.
* **fresh drifted world** — building a derived world's tools and first task
  (what a user pays once per process per version), against the base world's.

Each ratio is the baseline's median time over the measured one (above 1: the
drifted path is faster; below 1: what drift costs).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from mirrorworld.bench.measure import timed
from mirrorworld.core.registry import Registry, default
from mirrorworld.core.world import World
from mirrorworld.drift import RenameArgument, RenameTool, RetypeArgument, derive
from mirrorworld.episodes import Episode, EpisodeOptions, Faults

__all__ = ["bench_drift", "format_drift"]

_CHANGES = (
    RenameTool("get_customer", "fetch_customer"),
    RenameArgument("fetch_customer", "customer_id", "customer"),
    RetypeArgument("request_approval", "amount", "cents"),
)


def _median_us(ns: list[int]) -> float:
    return statistics.median(ns) / 1000


def _figure(name: str, base_ns: list[int], ns: list[int]) -> dict[str, Any]:
    b, m = _median_us(base_ns), _median_us(ns)
    return {"name": name, "baseline_us": round(b, 2), "us": round(m, 2), "ratio": round(b / m, 3) if m else None}


def bench_drift(*, quick: bool = False, registry: Registry | None = None) -> dict[str, Any]:
    """Run the drift benchmark on the helpdesk of ``registry``; a report of figures (see the module docstring)."""
    n = 2_000 if quick else 20_000
    helpdesk = type((registry or default).get("helpdesk"))
    t0 = time.perf_counter()
    base: World = helpdesk()
    base.task("refund_with_approval", 0)
    first_base = time.perf_counter() - t0
    t1 = time.perf_counter()
    drifted_cls = derive(helpdesk, version=990, changes=_CHANGES, name="bench_drift", title="HelpdeskBenchDrift")
    drifted: World = drifted_cls()
    drifted.task("refund_with_approval", 0)
    first_drifted = time.perf_counter() - t1
    figures = []

    task = base.task("refund_with_approval", 0)
    customer = int(task.customer_id or 1)
    s0, s1 = base.session(task), drifted.session(drifted.task("refund_with_approval", 0))
    base_read = timed(lambda i: s0.call("get_customer", {"customer_id": customer}), n, warmup=200)
    read = timed(lambda i: s1.call("fetch_customer", {"customer": customer}), n, warmup=200)
    figures.append(_figure("presented read (renamed tool and argument)", base_read, read))

    order = 999_999  # no such order: refused after the arguments are mapped, so the state never grows
    assert not s0.call("request_approval", {"order_id": order, "amount": "1.00", "reason": "damaged"}).ok
    base_write = timed(
        lambda i: s0.call("request_approval", {"order_id": order, "amount": "99999.00", "reason": "damaged"}), n, 200
    )
    write = timed(
        lambda i: s1.call("request_approval", {"order_id": order, "amount": 9_999_900, "reason": "damaged"}), n, 200
    )
    figures.append(_figure("presented write (money in cents), refused", base_write, write))
    s0.close()
    s1.close()

    plain = Episode(base, task, EpisodeOptions(max_steps=None))
    faulty = Episode(base, task, EpisodeOptions(max_steps=None, faults=Faults(rate=0.1, seed=1)))
    args = {"customer_id": customer}
    base_step = timed(lambda i: plain.step("get_customer", args), n, warmup=200)
    fault_step = timed(lambda i: faulty.step("get_customer", args), n, warmup=200)
    figures.append(_figure("episode step with faults at 10%", base_step, fault_step))
    plain.close()
    faulty.close()
    figures.append(
        {
            "name": "fresh drifted world: tools and first task (once per process)",
            "baseline_us": round(first_base * 1e6, 1),
            "us": round(first_drifted * 1e6, 1),
            "ratio": round(first_base / first_drifted, 3) if first_drifted else None,
        }
    )
    return {"calls": n, "figures": figures}


def format_drift(report: dict[str, Any]) -> str:
    """The report as a table readable at 80 columns."""
    lines = [f"{'figure':50}{'base µs':>10}{'drift µs':>10}{'ratio':>8}"]
    for f in report["figures"]:
        lines.append(f"{f['name'][:50]:50}{f['baseline_us']:>10}{f['us']:>10}{f['ratio']:>8}")
    lines.append(f"({report['calls']} calls per figure; ratio = baseline / drifted, median times)")
    return "\n".join(lines)
