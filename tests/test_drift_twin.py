"""The real system drifts, the continuous fidelity check catches it, and the declared version agrees again.

The twin's setting ``tax_rounding=line`` is a change in the real ERP (taxes
rounded per line). Sales v0 measured against that twin, compared with its
baseline, reports regressions and exits 1; Sales v1, which declares the same
change (``MoveParameter("tax_rounding", "line")``), agrees with it. Each
fidelity run is its own process: Tryton holds one twin per process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mirrorworld.twin import tryton

needs_tryton = pytest.mark.skipif(not tryton.available(), reason="Tryton (trytond, proteus) is not installed")


def _fidelity(*args: str) -> tuple[int, dict[str, object]]:
    argv = [sys.executable, "-m", "mirrorworld", "fidelity", "--calls", "0", "--seeds", "1", "--no-audit", "--json"]
    done = subprocess.run([*argv, *args], capture_output=True, text=True, timeout=600)
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    return done.returncode, json.loads(done.stdout)


@needs_tryton
def test_a_drifted_real_system_is_caught_and_the_declared_version_agrees_with_it(tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    rc, data = _fidelity("--world", "sales", "--save-baseline", str(base))
    assert rc == 0 and data["call_agreement"] == 1.0

    rc, stale = _fidelity("--world", "sales", "--twin-option", "tax_rounding=line", "--against", str(base))
    assert rc == 1
    regressions = stale["drift"]["regressions"]  # type: ignore[index]
    assert any("gold final-state agreement dropped" in r for r in regressions)
    assert any("quote_sale" in r for r in regressions)

    rc, declared = _fidelity("--world", "sales_v1", "--twin-option", "tax_rounding=line", "--against", str(base))
    assert rc == 0
    assert declared["call_agreement"] == 1.0 and declared["gold_final_state"] == 1.0
    assert declared["drift"]["regressions"] == []  # type: ignore[index]
