"""Saved fidelity baselines and drift detection.

A baseline is the JSON of a run (:func:`mirrorworld.fidelity.report.to_dict`).
:func:`drift` compares a new run with it: which tools and families changed
agreement, which divergences are new or gone, and whether the twin's versions
changed. A drop in overall agreement, or in any tool's or family's, beyond
``tolerance`` is a regression: ``mirrorworld fidelity --against BASELINE`` then
fails, which is how a user learns that the system they mirror moved.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mirrorworld.errors import RunFileError

__all__ = ["drift", "load_baseline", "save_baseline"]

TOLERANCE = 0.001


def save_baseline(data: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")


def load_baseline(path: Path) -> dict[str, Any]:
    """A saved baseline, checked for what :func:`drift` reads (a file is untrusted: anything else is one error line)."""
    from mirrorworld.run.untrusted import loads

    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise RunFileError(f"cannot read baseline {path}: {exc.strerror}") from None
    try:
        data = loads(raw.decode("utf-8"), f"baseline {path}")
    except UnicodeDecodeError:
        raise RunFileError(f"{path} is not a fidelity baseline (not UTF-8 text)") from None
    fault = _fault(data)
    if fault:
        raise RunFileError(f"{path} is not a fidelity baseline ({fault})")
    baseline: dict[str, Any] = data
    return baseline


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _fault(data: Any) -> str | None:
    if not isinstance(data, dict):
        return "not a JSON object"
    for key in ("call_agreement", "gold_final_state"):
        if not _number(data.get(key)):
            return f"{key} is not a number"
    for section in ("by_tool", "by_family"):
        block = data.get(section)
        if not isinstance(block, dict) or not all(
            isinstance(v, dict) and _number(v.get("agreement")) for v in block.values()
        ):
            return f"{section} is not a table of agreements"
    divs = data.get("divergences", [])
    if not isinstance(divs, list) or not all(
        isinstance(d, dict) and all(isinstance(d.get(k), str) for k in ("kind", "tool", "trace")) for d in divs
    ):
        return "divergences is not a list of divergences"
    return None


def _signature(d: dict[str, Any]) -> str:
    return f"{d['kind']}|{d['tool']}|{json.dumps(d.get('args'), sort_keys=True, default=str)}|{d['trace']}"


def drift(current: dict[str, Any], baseline: dict[str, Any], tolerance: float = TOLERANCE) -> dict[str, Any]:
    """What changed since the baseline; ``regressions`` lists the drops that fail the run."""
    regressions: list[str] = []
    changes: list[str] = []
    if current.get("twin_versions") != baseline.get("twin_versions"):
        changes.append(f"twin versions changed: {baseline.get('twin_versions')} -> {current.get('twin_versions')}")
    if (current.get("twin_options") or {}) != (baseline.get("twin_options") or {}):
        changes.append(f"twin options changed: {baseline.get('twin_options')} -> {current.get('twin_options')}")
    a, b = baseline["call_agreement"], current["call_agreement"]
    if b < a - tolerance:
        regressions.append(f"call agreement dropped from {a:.2%} to {b:.2%}")
    if current["gold_final_state"] < baseline["gold_final_state"] - tolerance:
        regressions.append(
            f"gold final-state agreement dropped from {baseline['gold_final_state']:.1%} "
            f"to {current['gold_final_state']:.1%}"
        )
    for section in ("by_tool", "by_family"):
        for name, old in baseline[section].items():
            new = current[section].get(name)
            if new is None:
                continue
            if new["agreement"] < old["agreement"] - tolerance:
                regressions.append(f"{section[3:]} {name}: agreement {old['agreement']:.2%} -> {new['agreement']:.2%}")
            elif new["agreement"] != old["agreement"]:
                changes.append(f"{section[3:]} {name}: agreement {old['agreement']:.2%} -> {new['agreement']:.2%}")
    old_divs = {_signature(d) for d in baseline.get("divergences", [])}
    new_divs = {_signature(d) for d in current.get("divergences", [])}
    return {
        "regressions": regressions,
        "changes": changes,
        "new_divergences": sorted(new_divs - old_divs),
        "gone_divergences": sorted(old_divs - new_divs),
    }
