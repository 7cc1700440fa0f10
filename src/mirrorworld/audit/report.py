"""Audit reports a person would rather look at than read: terminal tables and
a self-contained HTML page with the mutation matrix and every survivor.

The terminal reports fit 80 columns whatever the terminal's width: their
tables are laid out to fit (abbreviated heads explained in a legend below,
names longer than their column cut with an ellipsis and written out whole
after the table), and anything of unbounded length (a survivor's mutant, a
flag's evidence) goes on its own indented line, which wraps at the console's
width.
"""

from __future__ import annotations

import html
import json
import math
from typing import Any

from rich import box
from rich.cells import cell_len, set_cell_size
from rich.console import Console
from rich.table import Table
from rich.text import Text

from mirrorworld.inert import inert, text

__all__ = ["audit_html", "print_audit", "print_run_audit"]

NAME_WIDTH = 20
"""Cells of a family or probe name in the tables (the longest built-in family name fits)."""

_INDENT = 4
"""The indent of a line of detail under its heading line."""


def _pct(x: float) -> str:
    """A share as a percentage, never rounded up: 0.9996 is 99.9%, so a bar missed never looks met."""
    if x >= 1:
        return "100%"
    if x <= 0:
        return "0%"
    return f"{math.floor(x * 1000 + 1e-9) / 10:.1f}%"


def _fit(value: Any, width: int, cut: dict[str, str] | None = None) -> Text:
    """``value`` inert in at most ``width`` cells; a longer one ends in an ellipsis and is noted in ``cut``."""
    shown = inert(value, 400, lines=False)
    if cell_len(shown) <= width:
        return Text(shown)
    short = set_cell_size(shown, width - 1).rstrip() + "…"
    if cut is not None:
        cut[short] = shown
    return Text(short)


def _table(*heads: str) -> Table:
    """A borderless table: a rule under the heads, two spaces between columns, no padding at the edges."""
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1), collapse_padding=True)
    for i, head in enumerate(heads):
        t.add_column(head, justify="left" if i == 0 else "right", no_wrap=True)
    return t


def _detail(con: Console, line: Text, indent: int = _INDENT) -> None:
    """``line`` indented by ``indent`` spaces, wrapped at the console's width (no trailing spaces)."""
    for piece in line.wrap(con, max(20, con.width - indent)):
        piece.rstrip()
        con.print(Text.assemble(" " * indent, piece), soft_wrap=True)


def print_audit(report: dict[str, Any], console: Console | None = None) -> None:
    """Print an audit report (``AuditReport.to_dict()``) as tables that fit 80 columns.

    Survivors, failures and probe findings quote what the audit's adversarial
    agents wrote (injection strings, markup, control characters): every name
    and quotation is printed inert (:mod:`mirrorworld.inert`), only our own
    words carry styles.
    """
    con = console or Console(highlight=False)
    cut: dict[str, str] = {}
    con.print(text(f"verifier audit of {report['world']} ({report['seeds']} seeds per family)", 300, lines=False))
    bar = report["quality_bars"]["mutation_score"]
    t = _table("family", "gold", "nulls", "mut.", "killed", "eq.", "inv.", "det.", "lint")
    for name, f in report["families"].items():
        solved = f.get("solved", round(f["solvability"] * f["tasks"]))
        t.add_row(
            _fit(name, NAME_WIDTH, cut),
            Text(f"{solved}/{f['tasks']}", style="" if f["solvability"] >= 1 else "red"),
            Text(str(f["null_passes"]), style="red" if f["null_passes"] else ""),
            Text(_pct(f["mutation_score"]), style="green" if f["mutation_score"] >= bar else "red"),
            Text(f"{f['mutants_killed']}/{f['mutants_total'] - f['mutants_equivalent']}"),
            Text(str(f["mutants_equivalent"])),
            Text(_pct(f["invariance"]), style="" if f["invariance"] >= 1 else "red"),
            Text(_pct(f["determinism"]), style="" if f["determinism"] >= 1 else "red"),
            Text(str(f["lint_issues"]), style="red" if f["lint_issues"] else ""),
        )
    con.print(t)
    for line in (
        "gold: tasks whose gold solution passes   nulls: null-agent passes (target 0)",
        f"mut.: mutation score (bar {_pct(bar)})   killed: mutants killed / non-equivalent ones",
        "eq.: equivalent mutants   inv.: harmless variants that pass",
        "det.: tasks graded the same when replayed   lint: reward-basis lint issues",
    ):
        con.print(Text(line, style="dim"))
    if report["probes"]:
        con.print(Text("red-team probes (target: 0 breaches)"))
        p = _table("probe", "breaches", "episodes")
        for name, v in report["probes"].items():
            style = "red" if v["successes"] else "green"
            p.add_row(_fit(name, NAME_WIDTH, cut), Text(str(v["successes"]), style=style), Text(str(v["episodes"])))
        con.print(p)
    cross = report["determinism"]["cross_process"]
    if cross is not None:
        verdicts = ("identical", "") if cross else ("DIFFER", "red")
        con.print(Text.assemble("verdicts in another process (other PYTHONHASHSEED): ", verdicts))
    for name, f in report["families"].items():
        for s in f["survivors"][:5]:
            con.print(Text.assemble(("survivor", "red"), " ", _inert_line(f"{name} {s['task']}: {s['operator']}")))
            _detail(con, _inert_line(s["mutant"]))
        for s in f["failures"][:5]:
            con.print(Text.assemble(("failure", "red"), " ", _inert_line(f"{name} {s['task']}: {s['case']}")))
            evidence = "; ".join(s.get("evidence", []))[:200]
            if evidence:
                _detail(con, _inert_line(evidence))
    adv = report.get("adversary")
    if adv:
        con.print(Text(f"generative adversary: {adv['per_family']} attacks per family; attacks that passed"))
        con.print(Text("(target: 0) and harmless variants that failed, of those tried"))
        a = _table("family", "write", "drop", "message", "variants")
        for name, f in adv["families"].items():
            cells = [_passed_of(v) for v in (*f["attacks"].values(), f["variants"])]
            a.add_row(_fit(name, NAME_WIDTH, cut), *cells)
        con.print(a)
        for name, f in adv["families"].items():
            for s in f["survivors"][:3]:
                con.print(
                    Text.assemble(("adversary survivor", "red"), " ", _inert_line(f"{name} {s['task']} ({s['kind']})"))
                )
                calls = "; ".join(f"{c['tool']}({_short(c['args'])})" for c in s["calls"])
                if calls:
                    _detail(con, _inert_line(calls, 300))
    for finding in report["probe_findings"][:10]:
        con.print(Text.assemble(("probe breach", "red"), " ", _inert_line(f"{finding['probe']} on {finding['task']}")))
        _detail(con, _inert_line(finding["evidence"]))
    if cut:
        con.print(Text("names cut short above:"))
        for short, full in cut.items():
            _detail(con, Text(f"{short} = {full}"))
    regressions = report.get("regressions")
    if regressions:
        con.print(
            Text(
                f"review regression cases: {regressions['cases']} replayed, {regressions['agree']} agree, "
                f"{len(regressions['regressed'])} regressed"
            )
        )
    if report["meets_bars"]:
        con.print(
            Text.assemble(
                ("all quality bars met", "green"),
                f": solvability 100%, null agents 0, mutation score >= {_pct(bar)},",
            )
        )
        con.print(Text("invariance 100%, probes 0, determinism 100%"))
    else:
        con.print(Text(f"{len(report['failed_bars'])} quality bars missed", style="red"))
        for line in report["failed_bars"][:20]:
            _detail(con, Text.assemble("- ", _inert_line(line)), indent=2)


def print_run_audit(result: dict[str, Any], path: str, console: Console | None = None) -> None:
    """Print ``audit-run``'s flags (:func:`mirrorworld.audit.runlog.audit_run`) in 80 columns.

    One line per flag (episode, task, the verifier's verdict, rule), its
    evidence and steps on an indented line below; a task or rule too long for
    its column is cut there and written out whole below it. Everything the run
    file holds is printed inert.
    """
    con = console or Console(highlight=False)
    con.print(text(f"reward-hacking flags in {path} ({result['episodes']} episodes)", 400, lines=False))
    flagged = result["episodes_flagged"]
    widths = (max([1, *(len(str(ep["index"])) for ep in flagged)]), 32, 8, 22)
    if flagged:
        head = ("#".rjust(widths[0]), "task".ljust(widths[1]), "verifier".ljust(widths[2]), "rule")
        con.print(Text("  ".join(head), style="bold"))
    for ep in flagged:
        for flag in ep["flags"]:
            cut: dict[str, str] = {}
            task, rule = _fit(ep["task"], widths[1], cut), _fit(flag["rule"], widths[3], cut)
            verdict = Text("passed", style="red") if ep["passed"] else Text("failed")
            cells = (Text(str(ep["index"]).rjust(widths[0])), _pad(task, widths[1]), _pad(verdict, widths[2]), rule)
            con.print(Text("  ").join(cells))
            for full in cut.values():
                _detail(con, Text(full))
            steps = ", ".join(map(str, flag["steps"]))
            _detail(con, Text.assemble(_inert_line(flag["evidence"], 400), f" (steps {steps})" if steps else ""))
    con.print(
        Text(
            f"{result['flagged']} of {result['episodes']} episodes flagged, "
            f"{result['flagged_but_passed']} of them passed by the verifier"
        )
    )
    by_rule = ", ".join(f"{inert(rule, 100, lines=False)} {n}" for rule, n in result["by_rule"].items()) or "none"
    con.print(Text(f"by rule: {by_rule}"))


def _pad(value: Text, width: int) -> Text:
    """``value`` padded with spaces to ``width`` cells."""
    return Text.assemble(value, " " * max(0, width - value.cell_len))


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
