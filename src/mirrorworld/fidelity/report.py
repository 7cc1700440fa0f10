"""Fidelity reports: the JSON form of a run, a text summary and a self-contained HTML page.

Both the summary and the page say what the mirror was measured against (the
twin's packages and versions, its modules, the options it was built with and
the run's own options) and, for a run compared with a baseline (``--against``),
which baseline that was and what regressed or improved against it.
"""

from __future__ import annotations

import html
import json
from dataclasses import asdict
from typing import Any

from mirrorworld.fidelity.harness import FidelityRun

__all__ = ["QUALITY_BARS", "agents_page", "drift_lines", "failed_bars", "fidelity_html", "summary_lines", "to_dict"]

QUALITY_BARS = {
    "gold_final_state": 1.0,
    "real_agreement": 0.995,
    "real_share": 0.9,
    "min_calls": 3000,
    "speed_ratio": 250.0,
}
"""What a full run must reach (a small CI run checks agreement, not size, share or speed).

Agreement is judged over the calls the real system decided, and over every
compared call (the adapter's and the shared code's too); ``real_share`` is
the least fraction of a full run's calls it must decide. ``speed_ratio`` is
over both backends timed the same way (:mod:`mirrorworld.fidelity.timing`):
the mirror answers in tens of microseconds, Tryton in tens of milliseconds."""


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
        "real_agreement": round(run.real_agreement, 6),
        "session_calls": run.session_calls,
        "real_share": round(run.real_share, 6),
        "by_decider": {
            k: {"agreed": v[0], "calls": v[1], "share": round(v[1] / run.calls, 6) if run.calls else 0.0}
            for k, v in sorted(run.by_decider.items())
        },
        "messages": {
            "same": run.messages[0],
            "compared": run.messages[1],
            "agreement": round(run.message_agreement, 6),
            "examples": run.message_examples,
        },
        "gold_final_state": round(_rate(run.gold_final), 6),
        "gold_traces": run.gold_final[1],
        "speed": {
            "mirror_seconds": round(run.mirror_seconds, 6),
            "twin_seconds": round(run.twin_seconds, 6),
            "timed_calls": run.timed_calls,
            "mirror_us_per_call": round(run.mirror_seconds / run.timed_calls * 1e6, 2) if run.timed_calls else 0.0,
            "twin_ms_per_call": round(run.twin_seconds / run.timed_calls * 1e3, 3) if run.timed_calls else 0.0,
            "ratio": round(run.speed_ratio, 1),
            "mirror_cpu_seconds": round(run.mirror_cpu, 6),
            "twin_cpu_seconds": round(run.twin_cpu, 6),
            "cpu_ratio": round(run.cpu_ratio, 1),
            "timed": "a sample of the traces, each replayed 3 times on each backend, best of 3 for both; "
            "wall-clock and process CPU time",
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
    real = data.get("real_agreement", data["call_agreement"])
    if real < QUALITY_BARS["real_agreement"]:
        out.append(f"agreement on the calls the real system decided {real:.2%} < 99.5%")
    if data["call_agreement"] < QUALITY_BARS["real_agreement"]:  # the adapter's and the shared code's calls too
        out.append(f"agreement over every compared call {data['call_agreement']:.2%} < 99.5%")
    if full and data.get("real_share", 1.0) < QUALITY_BARS["real_share"]:
        out.append(f"the real system decided only {data['real_share']:.1%} of the calls (< 90%)")
    if full and data["calls"] < QUALITY_BARS["min_calls"]:
        out.append(f"only {data['calls']} calls replayed (< {QUALITY_BARS['min_calls']})")
    if full and data["speed"]["ratio"] < QUALITY_BARS["speed_ratio"]:
        out.append(f"mirror only {data['speed']['ratio']:.0f}x faster than the twin (< 250x)")
    return out


def summary_lines(data: dict[str, Any]) -> list[str]:
    sp = data["speed"]
    lines = [
        f"fidelity of {data['world']} against Tryton {data['twin_versions'].get('trytond', '?')}",
        f"  twin options: {_options(data.get('twin_options'))}",
        f"  calls compared: {data['calls']}, agreeing: {data['agreed']} ({data['call_agreement']:.2%}); "
        f"{data.get('session_calls', 0)} more answered by the session (respond, get_policy), not compared",
        f"  decided by the real system: {data['real_share']:.1%} of the calls, "
        f"agreeing on {data['real_agreement']:.2%} of them",
        *(
            f"    {who:8s} {v['agreed']:5d}/{v['calls']:<5d} agreed, {v['share']:.1%} of the calls"
            for who, v in data["by_decider"].items()
        ),
        f"  refusal messages the same: {data['messages']['same']}/{data['messages']['compared']}",
        *(
            f"    {tool}: mirror {str(x['mirror'])[:60]!r} / twin {str(x['twin'])[:60]!r}"
            for tool, x in data["messages"].get("examples", {}).items()
        ),
        f"  gold solutions with the same final state: {data['gold_final_state']:.1%} of {data['gold_traces']}",
        f"  speed: mirror {sp['mirror_us_per_call']} us/call, twin {sp['twin_ms_per_call']} ms/call, "
        f"mirror {sp['ratio']:.0f}x faster (CPU time {sp['cpu_ratio']:.0f}x)",
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


def _options(options: Any) -> str:
    """``--twin-option`` values as ``key=value`` text; none given means the defaults the mirror assumes."""
    if not options:
        return "none (the defaults the mirror assumes)"
    return ", ".join(f"{k}={v}" for k, v in sorted(dict(options).items()))


def _share(value: Any) -> str:
    return "-" if value is None else f"{value:.2%}"


def _baseline_name(b: dict[str, Any]) -> str:
    digest = f"sha256 {b['sha256'][:12]}, " if b.get("sha256") else ""
    return (
        f"{b.get('path', 'baseline')} ({digest}{b.get('world')}, {b.get('calls')} calls, "
        f"Tryton {dict(b.get('twin_versions') or {}).get('trytond', '?')}, options {_options(b.get('twin_options'))})"
    )


def drift_lines(data: dict[str, Any]) -> list[str]:
    """The comparison with the baseline as the terminal shows it (empty without one)."""
    d = data.get("drift")
    if not d:
        return []
    lines = [f"against baseline {_baseline_name(d['baseline'])}"] if d.get("baseline") else []
    lines += [f"changed: {line}" for line in d["changes"]]
    lines += [f"REGRESSION: {line}" for line in d["regressions"]]
    lines.append(f"divergences new since baseline: {len(d['new_divergences'])}, gone: {len(d['gone_divergences'])}")
    return lines


_ORDER = {"regressed": 0, "lower": 1, "improved": 2, "new": 3, "gone": 4}


def _drift_html(data: dict[str, Any]) -> str:
    """The baseline comparison: which baseline, what regressed or improved, divergences new and gone."""
    e = html.escape
    d = data.get("drift")
    if not d:
        return ""
    b = d.get("baseline") or {}
    out = ["<h2>Against the baseline</h2>"]
    if b:
        digest = f" (SHA-256 <code>{e(str(b['sha256']))}</code>)" if b.get("sha256") else ""
        out.append(
            f"<p>Baseline <code>{e(str(b.get('path', '')))}</code>{digest}: {e(str(b.get('world')))}, "
            f"{e(str(b.get('calls')))} calls, call agreement {e(_share(b.get('call_agreement')))}, "
            f"gold final state {e(_share(b.get('gold_final_state')))}; twin Tryton "
            f"{e(str(dict(b.get('twin_versions') or {}).get('trytond', '?')))}, options "
            f"{e(_options(b.get('twin_options')))}.</p>"
        )
    n = len(d["regressions"])
    verdict = f"{n} regression{'s' if n != 1 else ''}" if n else "no regressions"
    out.append(f'<p class="{"bad" if n else "ok"}"><strong>{verdict}</strong> against the baseline.</p>')
    if d["regressions"]:
        out.append("<ul>" + "".join(f"<li>{e(line)}</li>" for line in d["regressions"]) + "</ul>")
    twin_changes = [line for line in d["changes"] if line.startswith("twin ")]
    if twin_changes:
        out.append("<ul>" + "".join(f"<li>{e(line)}</li>" for line in twin_changes) + "</ul>")
    rows = sorted((r for r in d.get("rows", []) if r["status"] != "same"), key=lambda r: _ORDER.get(r["status"], 9))
    same = sum(r["status"] == "same" for r in d.get("rows", []))
    out.append(
        "<table><tr><th>status</th><th>figure</th><th>name</th><th>baseline</th><th>now</th><th>change</th></tr>"
    )
    for r in rows:
        change = "-" if r["baseline"] is None or r["current"] is None else f"{r['current'] - r['baseline']:+.2%}"
        out.append(
            f'<tr class="{e(r["status"])}"><td>{e(r["status"])}</td><td>{e(r["section"])}</td><td>{e(r["name"])}</td>'
            f"<td>{e(_share(r['baseline']))}</td><td>{e(_share(r['current']))}</td><td>{e(change)}</td></tr>"
        )
    out.append(f"</table><p>{same} figures the same as in the baseline.</p>")
    for title, key in (("new since the baseline", "new_divergences"), ("gone since the baseline", "gone_divergences")):
        sigs = d[key]
        out.append(f"<h3>Divergences {title} ({len(sigs)})</h3>")
        if sigs:
            out.append("<ul>" + "".join(f"<li><code>{e(sig)}</code></li>" for sig in sigs) + "</ul>")
    return "\n".join(out)


def _twin_html(data: dict[str, Any]) -> str:
    """What the mirror was measured against: the twin's packages, modules and options, and the run's options."""
    e = html.escape
    versions = "".join(
        f"<tr><td>{e(str(k))}</td><td>{e(str(v))}</td></tr>" for k, v in sorted(data["twin_versions"].items())
    )
    out = [
        "<h2>Twin</h2>",
        f"<p>Options (<code>--twin-option</code>): {e(_options(data.get('twin_options')))}.</p>",
    ]
    modules = data.get("twin_modules")
    if modules:
        out.append(f"<p>Tryton modules activated: {e(', '.join(map(str, modules)))}.</p>")
    out.append(f"<table><tr><th>package</th><th>version</th></tr>{versions}</table>")
    run = data.get("run_options")
    if run:
        shown = ", ".join(f"{k} {v}" for k, v in run.items())
        out.append(f"<p>Run options: {e(shown)}.</p>")
    return "\n".join(out)


_STYLE = """body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:1.5em}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}.bad,.regressed{background:#ffebe9}
.ok,.improved{background:#dafbe1}"""
"""The style of both fidelity pages."""


def agents_page(data: dict[str, Any]) -> str:
    """The self-contained page of an agent-level run (``mirrorworld fidelity --agents ... --html FILE``):
    :func:`mirrorworld.fidelity.agents.agents_html` in the call-level page's style."""
    from mirrorworld.fidelity.agents import agents_html

    return f"""<!doctype html><html><head><meta charset="utf-8"><title>mirrorworld fidelity: agents</title>
<style>{_STYLE}</style></head><body>
<h1>Fidelity of {html.escape(str(data["world"]))}: agents on the mirror and on the real twin</h1>
{agents_html(data)}
</body></html>
"""


def fidelity_html(data: dict[str, Any]) -> str:
    """A self-contained HTML report (with the twin's options and, given a baseline, the comparison with it)."""
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
    deciders = "".join(
        f"<tr><td>{e(k)}</td><td>{v['agreed']}</td><td>{v['calls']}</td><td>{v['share']:.1%}</td></tr>"
        for k, v in data["by_decider"].items()
    )
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>mirrorworld fidelity</title>
<style>{_STYLE}</style></head><body>
<h1>Fidelity of {e(data["world"])}</h1>
<p>Twin: Tryton {e(data["twin_versions"].get("trytond", "?"))}. Calls replayed: {data["calls"]};
agreeing: {data["agreed"]} ({data["call_agreement"]:.2%}). Gold solutions with the same final state:
{data["gold_final_state"]:.1%} of {data["gold_traces"]}.</p>
<p>Decided by the real system: {data["real_share"]:.1%} of the calls, agreeing on {data["real_agreement"]:.2%}
of them. Refusal messages the same: {data["messages"]["same"]}/{data["messages"]["compared"]}.</p>
<h2>Who decided</h2><table><tr><th>decided by</th><th>agreed</th><th>calls</th><th>share</th></tr>{deciders}</table>
<p>Speed: mirror {sp["mirror_us_per_call"]} &micro;s/call, twin {sp["twin_ms_per_call"]} ms/call:
the mirror is {sp["ratio"]:.0f}&times; faster in wall-clock time, {sp["cpu_ratio"]:.0f}&times; in CPU time
(a sample of {sp["timed_calls"]} calls, each trace's best of three replays on each backend).</p>
{_drift_html(data)}
{_twin_html(data)}
<h2>Per tool</h2><table><tr><th>tool</th><th>agreed</th><th>rate</th></tr>{rows}</table>
<h2>Per family</h2><table><tr><th>family</th><th>calls agreed</th><th>rate</th><th>final state</th></tr>{fams}</table>
<h2>Per kind of trace</h2><table><tr><th>kind</th><th>calls agreed</th><th>rate</th><th>final state</th></tr>
{kinds}</table>
<h2>Divergences ({len(data["divergences"])})</h2><table><tr><th>kind</th><th>trace</th><th>step</th><th>tool</th>
<th>args</th><th>details</th><th>minimal trace</th></tr>{divs}</table></body></html>
"""
