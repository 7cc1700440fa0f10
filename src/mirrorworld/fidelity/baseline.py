"""Saved fidelity baselines and drift detection.

A baseline is the JSON of a run (:func:`mirrorworld.fidelity.report.to_dict`).
:func:`drift` compares a new run with it: which tools and families changed
agreement, which divergences are new or gone, and whether the twin's versions
changed. A drop in overall agreement, or in any tool's or family's, beyond
``tolerance`` is a regression: ``mirrorworld fidelity --against BASELINE`` then
fails, which is how a user learns that the system they mirror moved.

Beside those lines of text, :func:`drift` returns the comparison as ``rows``
(one per figure, with both values and whether it regressed, improved or held)
and the baseline's identity (its world, size, twin versions and options; the
command adds its path and digest), which the terminal summary and the HTML
report both show.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from mirrorworld.errors import RunFileError
from mirrorworld.outputs import write_atomic

__all__ = ["baseline_identity", "drift", "load_baseline", "save_baseline"]

TOLERANCE = 0.001


def save_baseline(data: dict[str, Any], path: Path) -> None:
    """Write ``data`` as a baseline at ``path``, whole or not at all (:func:`mirrorworld.outputs.write_atomic`)."""
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def baseline_identity(path: Path, baseline: dict[str, Any]) -> dict[str, Any]:
    """What names a baseline in a report: its path and SHA-256, and the run it saved (world, calls, twin)."""
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        digest = None
    return {"path": str(path), "sha256": digest, **_identity(baseline)}


def _identity(baseline: dict[str, Any]) -> dict[str, Any]:
    return {
        "world": baseline.get("world"),
        "calls": baseline.get("calls"),
        "call_agreement": baseline.get("call_agreement"),
        "gold_final_state": baseline.get("gold_final_state"),
        "twin_versions": baseline.get("twin_versions") or {},
        "twin_options": baseline.get("twin_options") or {},
    }


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
    """What changed since the baseline; ``regressions`` lists the drops that fail the run.

    ``rows`` holds every figure compared, ``{"section", "name", "baseline",
    "current", "status"}`` with status ``regressed`` (dropped by more than
    ``tolerance``), ``improved``, ``lower`` (dropped within the tolerance),
    ``same``, or ``new`` / ``gone`` for a tool or family only one run has.
    """
    regressions: list[str] = []
    changes: list[str] = []
    rows: list[dict[str, Any]] = []
    if current.get("twin_versions") != baseline.get("twin_versions"):
        changes.append(f"twin versions changed: {baseline.get('twin_versions')} -> {current.get('twin_versions')}")
    if (current.get("twin_options") or {}) != (baseline.get("twin_options") or {}):
        changes.append(f"twin options changed: {baseline.get('twin_options')} -> {current.get('twin_options')}")
    for key, name in (("call_agreement", "call agreement"), ("gold_final_state", "gold final-state agreement")):
        a, b = baseline[key], current[key]
        rows.append(_row("overall", name, a, b, tolerance))
        if b < a - tolerance:
            shown = (f"{a:.2%}", f"{b:.2%}") if key == "call_agreement" else (f"{a:.1%}", f"{b:.1%}")
            regressions.append(f"{name} dropped from {shown[0]} to {shown[1]}")
    for section in ("by_tool", "by_family"):
        kind = section[3:]
        for name, old in baseline[section].items():
            new = current[section].get(name)
            if new is None:
                rows.append(
                    {"section": kind, "name": name, "baseline": old["agreement"], "current": None, "status": "gone"}
                )
                continue
            rows.append(_row(kind, name, old["agreement"], new["agreement"], tolerance))
            if new["agreement"] < old["agreement"] - tolerance:
                regressions.append(f"{kind} {name}: agreement {old['agreement']:.2%} -> {new['agreement']:.2%}")
            elif new["agreement"] != old["agreement"]:
                changes.append(f"{kind} {name}: agreement {old['agreement']:.2%} -> {new['agreement']:.2%}")
        for name, new in current[section].items():
            if name not in baseline[section]:
                rows.append(
                    {"section": kind, "name": name, "baseline": None, "current": new["agreement"], "status": "new"}
                )
    old_divs = {_signature(d) for d in baseline.get("divergences", [])}
    new_divs = {_signature(d) for d in current.get("divergences", [])}
    return {
        "regressions": regressions,
        "changes": changes,
        "rows": rows,
        "baseline": _identity(baseline),
        "new_divergences": sorted(new_divs - old_divs),
        "gone_divergences": sorted(old_divs - new_divs),
    }


def _row(section: str, name: str, old: float, new: float, tolerance: float) -> dict[str, Any]:
    if new < old - tolerance:
        status = "regressed"
    elif new > old:
        status = "improved"
    elif new < old:
        status = "lower"
    else:
        status = "same"
    return {"section": section, "name": name, "baseline": old, "current": new, "status": status}
