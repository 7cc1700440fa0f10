"""``mirrorworld bench``: performance figures as ratios against a tau-bench-style baseline.

``run_bench(world)`` measures reset, gym steps, verification, whole episodes and
memory per live session for mirrorworld and for the baseline in one process and
returns a JSON-serialisable report; ``format_report`` renders it as a table.
"""

from mirrorworld.bench.bench import format_report, run_bench

__all__ = ["format_report", "run_bench"]
