"""Fidelity reports: the JSON form of a run, a text summary and a self-contained HTML page."""

from __future__ import annotations

import html
import json
from dataclasses import asdict
from typing import Any

from mirrorworld.fidelity.harness import FidelityRun

__all__ = ["QUALITY_BARS", "failed_bars", "fidelity_html", "summary_lines", "to_dict"]

QUALITY_BARS = {"gold_final_state": 1.0, "call_agreement": 0.99, "min_calls": 1000, "speed_ratio": 1000.0}
"""What a full run must reach (a small CI run checks agreement, not size or speed)."""


def _rate(pair: list[int]) -> float:
    return pair[0] / pair[1] if pair[1] else 1.0


def to_dict(run: FidelityRun) -> dict[str, Any]:
    """The run as JSON-serialisable data (also the format of a saved baseline)."""
    return {
        "world": run.world,
        "twin_versions": run.twin_versions,
        "calls": run.calls,
        "agreed": run.agreed,
        "call_agreement": round(run.agreement, 6),
        "gold_final_state": round(_rate(run.gold_final), 6),
        "gold_traces": run.gold_final[1],
        "speed": {
            "mirror_seconds": round(run.mirror_seconds, 6),
            "twin_seconds": round(run.twin_seconds, 6),
            "mirror_us_per_call": round(run.mirror_seconds / run.calls * 1e6, 2) if run.calls else 0.0,
            "twin_ms_per_call": round(run.twin_seconds / run.calls * 1e3, 3) if run.calls else 0.0,
            "ratio": round(run.speed_ratio, 1),
        },
        "by_tool": {
            k: {"agreed": v[0], "calls": v[1], "agreement": round(_rate(v), 6)} for k, v in sorted(run.by_tool.items())
        },
        "by_family": {
            k: {
                "agreed": v[0],
                "calls": v[1],
                "agreement": round(_rate(v), 6),
                "final_state_agreed": v[2],
                "traces": v[3],
            }
            for k, v in sorted(run.by_family.items())
        },
        "by_trace_kind": {
            k: {"agreed": v[0], "calls": v[1], "final_state_agreed": v[2], "traces": v[3]}
            for k, v in sorted(run.by_kind.items())
        },
        "divergences": [asdict(d) for d in run.divergences],
        "seconds": round(run.seconds, 2),
    }


def failed_bars(data: dict[str, Any], *, full: bool) -> list[str]:
    """The quality bars a run misses (size and speed only for a ``full`` run)."""
    out = []
    if data["gold_final_state"] < QUALITY_BARS["gold_final_state"]:
        out.append(f"gold final state agreement {data['gold_final_state']:.1%} < 100%")
    if data["call_agreement"] < QUALITY_BARS["call_agreement"]:
        out.append(f"call agreement {data['call_agreement']:.2%} < 99%")
    if full and data["calls"] < QUALITY_BARS["min_calls"]:
        out.append(f"only {data['calls']} calls replayed (< {QUALITY_BARS['min_calls']})")
    if full and data["speed"]["ratio"] < QUALITY_BARS["speed_ratio"]:
        out.append(f"mirror only {data['speed']['ratio']:.0f}x faster than the twin (< 1000x)")
    return out


def summary_lines(data: dict[str, Any]) -> list[str]:
    sp = data["speed"]
    lines = [
        f"fidelity of {data['world']} against Tryton {data['twin_versions'].get('trytond', '?')}",
        f"  calls replayed: {data['calls']}, agreeing: {data['agreed']} ({data['call_agreement']:.2%})",
        f"  gold solutions with the same final state: {data['gold_final_state']:.1%} of {data['gold_traces']}",
        f"  speed: mirror {sp['mirror_us_per_call']} us/call, twin {sp['twin_ms_per_call']} ms/call, "
        f"mirror {sp['ratio']:.0f}x faster",
        "  per tool:",
    ]
    for tool, v in data["by_tool"].items():
        lines.append(f"    {tool:28s} {v['agreed']:5d}/{v['calls']:<5d} {v['agreement']:.2%}")
    for title, key in (("per family", "by_family"), ("per kind of trace", "by_trace_kind")):
        lines.append(f"  {title}:")
        for name, v in data[key].items():
            lines.append(
                f"    {name:28s} calls {v['agreed']}/{v['calls']} ({v['agreed'] / max(v['calls'], 1):.2%}), "
                f"final state {v['final_state_agreed']}/{v['traces']}"
            )
    divs = data["divergences"]
    lines.append(f"  divergences: {len(divs)}")
    for d in divs[:50]:
        lines.append(
            f"    [{d['kind']}] {d['trace']} step {d['step']} {d['tool']} {json.dumps(d['args'], default=str)}"
        )
        for detail in d["details"][:4]:
            lines.append(f"        {detail}")
        if d.get("minimal"):
            lines.append(f"        minimal trace: {json.dumps(d['minimal'], default=str)}")
    return lines


def fidelity_html(data: dict[str, Any]) -> str:
    """A self-contained HTML report."""
    e = html.escape
    rows = "".join(
        f"<tr><td>{e(k)}</td><td>{v['agreed']}/{v['calls']}</td><td>{v['agreement']:.2%}</td></tr>"
        for k, v in data["by_tool"].items()
    )
    fams, kinds = (
        "".join(
            f"<tr><td>{e(k)}</td><td>{v['agreed']}/{v['calls']}</td><td>{v['agreed'] / max(v['calls'], 1):.2%}</td>"
            f"<td>{v['final_state_agreed']}/{v['traces']}</td></tr>"
            for k, v in data[key].items()
        )
        for key in ("by_family", "by_trace_kind")
    )
    divs = "".join(
        f"<tr><td>{e(d['kind'])}</td><td>{e(d['trace'])}</td><td>{d['step']}</td><td>{e(d['tool'])}</td>"
        f"<td><code>{e(json.dumps(d['args'], default=str))}</code></td><td>{e('; '.join(d['details']))}</td>"
        f"<td><code>{e(json.dumps(d.get('minimal'), default=str))}</code></td></tr>"
        for d in data["divergences"]
    )
    sp = data["speed"]
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>mirrorworld fidelity</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse;margin-bottom:1.5em}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left}}</style></head><body>
<h1>Fidelity of {e(data["world"])}</h1>
<p>Twin: Tryton {e(data["twin_versions"].get("trytond", "?"))}. Calls replayed: {data["calls"]};
agreeing: {data["agreed"]} ({data["call_agreement"]:.2%}). Gold solutions with the same final state:
{data["gold_final_state"]:.1%} of {data["gold_traces"]}.</p>
<p>Speed: mirror {sp["mirror_us_per_call"]} &micro;s/call, twin {sp["twin_ms_per_call"]} ms/call:
the mirror is {sp["ratio"]:.0f}&times; faster.</p>
<h2>Per tool</h2><table><tr><th>tool</th><th>agreed</th><th>rate</th></tr>{rows}</table>
<h2>Per family</h2><table><tr><th>family</th><th>calls agreed</th><th>rate</th><th>final state</th></tr>{fams}</table>
<h2>Per kind of trace</h2><table><tr><th>kind</th><th>calls agreed</th><th>rate</th><th>final state</th></tr>
{kinds}</table>
<h2>Divergences ({len(data["divergences"])})</h2><table><tr><th>kind</th><th>trace</th><th>step</th><th>tool</th>
<th>args</th><th>details</th><th>minimal trace</th></tr>{divs}</table></body></html>
"""
