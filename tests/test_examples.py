"""Every example in ``examples/`` runs offline on a CPU at smoke size, as a user would run it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {
    "cleanrl_ppo.py": ("torch",),
    "gym_loop.py": (),
    "review_loop.py": ("starlette", "httpx", "pydantic"),
    "sb3_maskable_ppo.py": ("sb3_contrib",),
    "torchrl_rollout.py": ("torchrl",),
    "team_loop.py": ("pettingzoo",),
    "trl_grpo.py": ("trl", "transformers", "datasets"),
}
PRINTS = {
    "gym_loop.py": ("gold: 1/1 passed", "random: 0/1 passed", "-- env.render() --"),
    "team_loop.py": ("with your supervisor: 1/1 team episodes passed", "contrast: the team failed, as it should"),
}
"""Lines an example's smoke run must print: the results it exists to show. These examples print agent text,
which must reach the terminal inert: no control character but newlines."""
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_runs_at_smoke_size(name: str) -> None:
    for module in EXAMPLES[name]:
        pytest.importorskip(module)
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), "--smoke"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip(), "the example printed nothing"
    for line in PRINTS.get(name, ()):
        assert line in done.stdout, (line, done.stdout[-3000:])
    if name in PRINTS:
        assert not _CONTROL.search(done.stdout), "raw control characters in the output"


ELSEWHERE = {
    "rllib_team_ppo.py": "tests/test_rllib_smoke.py, in the RLlib environment",
    "rllib_ppo.py": "tests/test_rllib_smoke.py, in the RLlib environment",
    "llm_eval.py": "tests/test_llm_eval.py, with and without its failing endpoint",
}


def test_every_example_is_tested() -> None:
    assert {p.name for p in (ROOT / "examples").glob("*.py")} == set(EXAMPLES) | set(ELSEWHERE)


def test_every_example_is_in_the_readme() -> None:
    readme = (ROOT / "examples" / "README.md").read_text(encoding="utf-8")
    missing = sorted(p.name for p in (ROOT / "examples").glob("*.py") if f"`{p.name}`" not in readme)
    assert not missing, f"examples/README.md does not name {missing}"
