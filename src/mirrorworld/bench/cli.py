"""``mirrorworld bench --server``: the server benchmark, printed.

The server's dependencies are checked before anything of the benchmark is
imported, so a core install gets a one-line error naming the extra to
install, not a traceback.
"""

from __future__ import annotations

import json
import sys

from mirrorworld.server.options import need_extra

__all__ = ["bench_server"]


def bench_server(
    *, json_output: bool = False, quick: bool = False, clients: int = 32, seconds: float = 3.0, sessions: int = 1000
) -> int:
    """``mirrorworld bench --server``: print the server benchmark (a table, or JSON); the exit code."""
    for module in ("fastapi", "uvicorn", "orjson", "websockets"):
        need_extra(module, "server")
    from mirrorworld.bench.server import bench_server as run_bench
    from mirrorworld.bench.server import format_server_report

    report = run_bench(clients=clients, seconds=seconds, sessions=sessions, quick=quick)
    if json_output:
        print(json.dumps(report, indent=2))
    else:
        print(format_server_report(report), file=sys.stdout)
    return 0
