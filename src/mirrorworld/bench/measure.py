"""Measuring: the duration of each call, and memory per object held (RSS, SQLite heap, Python allocations)."""

from __future__ import annotations

import ctypes
import gc
import os
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Memory", "measure_memory", "rss_bytes", "sqlite_memory_used", "timed"]


def rss_bytes() -> int:
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):  # not Linux: peak RSS is the best available
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def sqlite_memory_used() -> Callable[[], int] | None:
    """``sqlite3_memory_used`` of the SQLite library Python's ``sqlite3`` module uses, if reachable."""
    try:
        import _sqlite3

        lib = ctypes.CDLL(_sqlite3.__file__)
        fn = lib.sqlite3_memory_used
    except (ImportError, OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int64
    fn.argtypes = []

    def used() -> int:
        return int(fn())

    return used


@dataclass
class Memory:
    """Memory per object of a batch held at once, in bytes (``per_item_bytes`` is the figure)."""

    per_item_bytes: float
    sqlite_bytes: float
    python_bytes: float
    rss_bytes: float
    method: str


def measure_memory(make: Callable[[int], object], n: int) -> tuple[Memory, list[object]]:
    """Hold ``n`` objects from ``make`` at once; their memory per object (returned with them)."""
    sq = sqlite_memory_used()
    gc.collect()
    rss0 = rss_bytes()
    sq0 = sq() if sq else 0
    tracemalloc.start()
    try:
        held = [make(i) for i in range(n)]
        py = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    sq1 = sq() if sq else 0
    rss1 = rss_bytes()
    sqlite_b, rss_b = (sq1 - sq0) / n, (rss1 - rss0) / n
    if sq is None:  # SQLite's heap is invisible to tracemalloc: fall back on RSS growth
        return Memory(max(rss_b, py / n), 0.0, py / n, rss_b, "rss"), held
    return Memory(sqlite_b + py / n, sqlite_b, py / n, rss_b, "sqlite3_memory_used+tracemalloc"), held


def timed(fn: Callable[[int], object], n: int, warmup: int = 0, *, collect: bool = True) -> list[int]:
    """Call ``fn(i)`` ``n`` times after ``warmup`` untimed calls; the duration of each, in ns.

    The garbage collector stays on (its pauses are part of the cost); ``collect``
    runs a full collection before the timed calls.
    """
    for i in range(warmup):
        fn(i)
    if collect:
        gc.collect()
    clock = time.perf_counter_ns
    out = []
    for i in range(n):
        t0 = clock()
        fn(i)
        out.append(clock() - t0)
    return out
