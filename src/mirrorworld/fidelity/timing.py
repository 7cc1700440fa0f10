"""Timing a sample of call traces the same way on either backend.

:func:`time_traces` replays every trace ``repeats`` times in a row on fresh
sessions, with the garbage collector paused during the timed calls, and adds
each trace's best repetition in wall-clock and in process CPU time. Each
backend is timed in a process that holds only itself, as it runs when
deployed: the twin in the process that loaded it, the mirror in a child
process (:func:`time_in_child`) that rebuilds the world from its spec, so
neither pays for the other's heap or the caches the other evicts.

Usage (internal): ``python -m mirrorworld.fidelity.timing`` reads a pickled
``(world, traces, repeats)`` on standard input and writes ``[wall, cpu]`` as JSON.
"""

from __future__ import annotations

import gc
import json
import pickle
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from mirrorworld.core.task import ToolCall
from mirrorworld.core.world import World
from mirrorworld.errors import MirrorworldError

__all__ = ["time_in_child", "time_traces"]


def time_traces(
    open_session: Callable[[], AbstractContextManager[Any]], traces: Sequence[Sequence[ToolCall]], repeats: int
) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of the traces: each trace's best of ``repeats`` replays, summed."""
    wall_total = cpu_total = 0.0
    for calls in traces:
        best_wall = best_cpu = float("inf")
        for _ in range(repeats):
            with open_session() as session:
                call = session.call
                gc.collect()
                gc.disable()
                try:
                    w0, c0 = time.perf_counter(), time.process_time()
                    for c in calls:
                        call(c.tool, c.args)
                    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
                finally:
                    gc.enable()
            best_wall, best_cpu = min(best_wall, wall), min(best_cpu, cpu)
        wall_total += best_wall
        cpu_total += best_cpu
    return wall_total, cpu_total


def time_in_child(world: World, traces: Sequence[Sequence[ToolCall]], repeats: int) -> tuple[float, float]:
    """:func:`time_traces` on ``world``'s mirror, in a fresh Python process."""
    payload = pickle.dumps((world, [list(t) for t in traces], repeats))
    done = subprocess.run(
        [sys.executable, "-m", "mirrorworld.fidelity.timing"], input=payload, capture_output=True, check=False
    )
    if done.returncode != 0:
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        raise MirrorworldError(f"timing the mirror in a child process failed: {tail[0][:200]}")
    wall, cpu = json.loads(done.stdout)
    return float(wall), float(cpu)


def _main() -> None:
    world, traces, repeats = pickle.loads(sys.stdin.buffer.read())  # our own parent's payload
    world.session().close()  # build the image before timing anything
    json.dump(list(time_traces(world.session, traces, repeats)), sys.stdout)


if __name__ == "__main__":
    _main()
