"""Audit reports a person would rather look at than read: a terminal table and
a self-contained HTML page with the mutation matrix and every survivor."""

from __future__ import annotations

import html
import json
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from mirrorworld.inert import text

__all__ = ["audit_html", "print_audit"]


def _pct(x: float) -> str:
    return f"{x:.1%}"


def print_audit(report: dict[str, Any], console: Console | None = None) -> None:
    """Print an audit report (``AuditReport.to_dict()``) as tables.

    Survivors, failures and probe findings quote what the audit's adversarial
    agents wrote (injection strings, markup, control characters): every name
    and quotation is printed inert (:mod:`mirrorworld.inert`), only our own
    words carry styles.
    """
    con = console or Console(highlight=False)
    t = Table(title=text(f"verifier audit of {report['world']} ({report['seeds']} seeds per family)", 300))
    t.add_column("family", no_wrap=True)
    for col in ("tasks", "gold", "nulls", "mutation", "killed (eq.)", "invar.", "determ.", "lint"):
        t.add_column(col, justify="right")
    for name, f in report["families"].items():
        score_style = "green" if f["mutation_score"] >= report["quality_bars"]["mutation_score"] else "red"
        t.add_row(
            text(name, 200),
            Text(str(f["tasks"])),
            Text(_pct(f["solvability"])),
            Text(str(f["null_passes"])),
            Text(_pct(f["mutation_score"]), style=score_style),
            Text(f"{f['mutants_killed']}/{f['mutants_total'] - f['mutants_equivalent']} ({f['mutants_equivalent']})"),
            Text(_pct(f["invariance"])),
            Text(_pct(f["determinism"])),
            Text(str(f["lint_issues"])),
        )
    con.print(t)
    if report["probes"]:
        p = Table(title="red-team probes (target: 0 breaches)")
        p.add_column("probe")
        p.add_column("breaches", justify="right")
        p.add_column("episodes", justify="right")
        for name, v in report["probes"].items():
            style = "red" if v["successes"] else "green"
            p.add_row(text(name, 200), Text(str(v["successes"]), style=style), Text(str(v["episodes"])))
        con.print(p)
    cross = report["determinism"]["cross_process"]
    if cross is not None:
        verdicts = ("identical", "") if cross else ("DIFFER", "red")
        con.print(Text.assemble("verdicts in another process (other PYTHONHASHSEED): ", verdicts))
    for name, f in report["families"].items():
        for s in f["survivors"][:5]:
            shown = _inert_line(f"{name} {s['task']}: {s['operator']}: {s['mutant']}")
            con.print(Text.assemble(("survivor", "red"), " ", shown))
        for s in f["failures"][:5]:
            evidence = "; ".join(s.get("evidence", []))[:200]
            shown = _inert_line(f"{name} {s['task']}: {s['case']}: {evidence}")
            con.print(Text.assemble(("failure", "red"), " ", shown))
    adv = report.get("adversary")
    if adv:
        a = Table(title=f"generative adversary ({adv['per_family']} attacks per family; target: 0 pass)")
        a.add_column("family")
        for kind in ("write", "drop", "message"):
            a.add_column(f"{kind} passed", justify="right")
        a.add_column("variants failed", justify="right")
        for name, f in adv["families"].items():
            cells = [_passed_of(v) for v in (*f["attacks"].values(), f["variants"])]
            a.add_row(text(name, 200), *cells)
        con.print(a)
        for name, f in adv["families"].items():
            for s in f["survivors"][:3]:
                calls = "; ".join(f"{c['tool']}({_short(c['args'])})" for c in s["calls"])
                shown = _inert_line(f"{name} {s['task']} ({s['kind']}): {calls}", 300)
                con.print(Text.assemble(("adversary survivor", "red"), " ", shown))
    for finding in report["probe_findings"][:10]:
        shown = _inert_line(f"{finding['probe']} on {finding['task']}: {finding['evidence']}")
        con.print(Text.assemble(("probe breach", "red"), " ", shown))
    if report["meets_bars"]:
        con.print(
            Text.assemble(
                ("all quality bars met", "green"),
                f" (solvability 100%, null agents 0, mutation score >= {_pct(report['quality_bars']['mutation_score'])}"
                ", invariance 100%, probes 0, determinism 100%)",
            )
        )
    else:
        con.print(Text(f"{len(report['failed_bars'])} quality bars missed", style="red"))
        for line in report["failed_bars"][:20]:
            con.print(Text.assemble("  - ", _inert_line(line)))


def _inert_line(value: str, limit: int = 2000) -> Text:
    return text(value, limit, lines=False)


def _passed_of(pair: list[int]) -> Text:
    """``passed/total``, red when anything passed that should not have."""
    return Text.assemble((str(pair[0]), "red" if pair[0] else "green"), f"/{pair[1]}")


_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#1d232a;max-width:1200px}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:right}
th:first-child,td:first-child{text-align:left}th{background:#f6f8fa}
.ok{background:#dafbe1}.bad{background:#ffebe9}.na{color:#8c959f}
.badge{display:inline-block;padding:2px 8px;border-radius:10px;color:#fff}
.pass{background:#1a7f37}.fail{background:#cf222e}
pre{background:#f6f8fa;padding:8px;overflow:auto;font-size:12px}
details{margin:.3em 0}
"""


def _short(args: Any) -> str:
    text = args if isinstance(args, str) else ", ".join(f"{k}={v!r}" for k, v in dict(args).items())
    return text if len(text) <= 120 else text[:117] + "..."


def _cell(num: int, den: int, good: bool, extra: str = "") -> str:
    if den == 0:
        return '<td class="na">-</td>'
    return f'<td class="{"ok" if good else "bad"}">{num}/{den}{html.escape(extra)}</td>'


def audit_html(report: dict[str, Any]) -> str:
    """A self-contained HTML page of an audit report."""
    e = html.escape
    fams = report["families"]
    ops = sorted({op for f in fams.values() for op in f["mutants"]})
    vops = sorted({op for f in fams.values() for op in f["variants"]})
    nops = sorted({op for f in fams.values() for op in f["nulls"]})
    out = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>Verifier audit: {e(report['world'])}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>Verifier audit: {e(report['world'])}</h1>",
        f"<p>world hash <code>{e(report['world_hash'])}</code> · {report['seeds']} seeds per family · "
        f"{report['seconds']} s · "
        + (
            '<span class="badge pass">all quality bars met</span>'
            if report["meets_bars"]
            else f'<span class="badge fail">{len(report["failed_bars"])} bars missed</span>'
        )
        + "</p>",
    ]
    if report["failed_bars"]:
        out.append("<ul>" + "".join(f"<li>{e(x)}</li>" for x in report["failed_bars"]) + "</ul>")

    out.append(
        "<h2>Summary per family</h2><table><tr><th>family</th><th>tasks</th><th>solvable</th>"
        "<th>null passes</th><th>mutation score</th><th>invariance</th><th>deterministic</th><th>lint</th></tr>"
    )
    bar = report["quality_bars"]["mutation_score"]
    for name, f in fams.items():
        out.append(
            f"<tr><td>{e(name)}</td><td>{f['tasks']}</td>"
            f"<td class='{'ok' if f['solvability'] == 1 else 'bad'}'>{_pct(f['solvability'])}</td>"
            f"<td class='{'ok' if f['null_passes'] == 0 else 'bad'}'>{f['null_passes']}</td>"
            f"<td class='{'ok' if f['mutation_score'] >= bar else 'bad'}'>{_pct(f['mutation_score'])}</td>"
            f"<td class='{'ok' if f['invariance'] == 1 else 'bad'}'>{_pct(f['invariance'])}</td>"
            f"<td class='{'ok' if f['determinism'] == 1 else 'bad'}'>{_pct(f['determinism'])}</td>"
            f"<td class='{'ok' if not f['lint_issues'] else 'bad'}'>{f['lint_issues']}</td></tr>"
        )
    out.append("</table>")

    out.append(
        "<h2>Mutation matrix</h2><p>Cells: mutants killed / non-equivalent mutants "
        "(equivalent or stillborn mutants in parentheses). Every mutant must fail.</p>"
    )
    out.append("<table><tr><th>family</th>" + "".join(f"<th>{e(op)}</th>" for op in ops) + "</tr>")
    for name, f in fams.items():
        row = [f"<td>{e(name)}</td>"]
        for op in ops:
            killed, total, equiv = f["mutants"].get(op, [0, 0, 0])
            row.append(_cell(killed, total - equiv, killed == total - equiv, f" ({equiv})" if equiv else ""))
        out.append("<tr>" + "".join(row) + "</tr>")
    out.append("</table>")

    for title, keys, field, note, good_if_zero in (
        ("Null agents", nops, "nulls", "Cells: passes / episodes. Every null agent must score 0.", True),
        ("Invariance", vops, "variants", "Cells: passes / variants. Every harmless variant must pass.", False),
    ):
        out.append(
            f"<h2>{title}</h2><p>{note}</p><table><tr><th>family</th>"
            + "".join(f"<th>{e(k)}</th>" for k in keys)
            + "</tr>"
        )
        for name, f in fams.items():
            row = [f"<td>{e(name)}</td>"]
            for k in keys:
                num, den = f[field].get(k, [0, 0])
                row.append(_cell(num, den, num == 0 if good_if_zero else num == den))
            out.append("<tr>" + "".join(row) + "</tr>")
        out.append("</table>")

    if report["probes"]:
        out.append("<h2>Red-team probes</h2><table><tr><th>probe</th><th>breaches</th><th>episodes</th></tr>")
        for name, v in report["probes"].items():
            out.append(
                f"<tr><td>{e(name)}</td><td class='{'bad' if v['successes'] else 'ok'}'>{v['successes']}"
                f"</td><td>{v['episodes']}</td></tr>"
            )
        out.append("</table>")
        for finding in report["probe_findings"]:
            out.append(f"<p class='bad'>{e(finding['probe'])} on {e(finding['task'])}: {e(finding['evidence'])}</p>")

    out.append("<h2>Surviving mutants</h2>")
    survivors = [(n, s) for n, f in fams.items() for s in f["survivors"]]
    if not survivors:
        out.append("<p>None.</p>")
    for name, s in survivors:
        out.append(
            f"<details><summary>{e(name)} · {e(s['task'])} · {e(s['operator'])}: {e(s['mutant'])}</summary>"
            f"<pre>{e(json.dumps(s['calls'], indent=2, default=str))}</pre></details>"
        )
    failures = [(n, s) for n, f in fams.items() for s in f["failures"]]
    out.append("<h2>Failed expectations (gold, null agents, variants)</h2>")
    if not failures:
        out.append("<p>None.</p>")
    for name, s in failures:
        out.append(
            f"<details><summary>{e(name)} · {e(s['task'])} · {e(s['case'])}</summary>"
            f"<pre>{e(json.dumps(s, indent=2, default=str))}</pre></details>"
        )
    lint = [(n, x) for n, f in fams.items() for x in f["lint"]]
    out.append(
        "<h2>Reward-basis lint</h2>"
        + ("<p>No issues.</p>" if not lint else "<ul>" + "".join(f"<li>{e(n)}: {e(x)}</li>" for n, x in lint) + "</ul>")
    )
    out.append("</body></html>")
    return "\n".join(out)
