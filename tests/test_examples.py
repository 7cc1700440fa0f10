"""Every example in ``examples/`` runs offline on a CPU at smoke size, as a user would run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {
    "cleanrl_ppo.py": ("torch",),
    "sb3_maskable_ppo.py": ("sb3_contrib",),
    "torchrl_rollout.py": ("torchrl",),
    "trl_grpo.py": ("trl", "transformers", "datasets"),
}


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


ELSEWHERE = {
    "rllib_team_ppo.py": "tests/test_rllib_smoke.py, in the RLlib environment",
    "rllib_ppo.py": "tests/test_rllib_smoke.py, in the RLlib environment",
    "llm_eval.py": "tests/test_llm_eval.py, with and without its failing endpoint",
}


def test_every_example_is_tested() -> None:
    assert {p.name for p in (ROOT / "examples").glob("*.py")} == set(EXAMPLES) | set(ELSEWHERE)
