"""The agent-level sim-to-real gap: the same agents on the same tasks, on the mirror and on the real twin.

The call-level harness (:mod:`mirrorworld.fidelity.harness`) asks whether the
mirror answers each call as the real system does. This module asks the
question a trained agent's user asks: does an agent that passes a task in the
mirror pass it on the real system? :func:`measure_gap` plays every agent over
one plan of tasks twice, through :class:`~mirrorworld.envs.chat.ChatEnv` on
the mirror and through :class:`~mirrorworld.fidelity.episode.TwinChatEnv` on
the twin (each agent made afresh for each side, so a seeded agent plays the
same episodes on both), both graded by the same verifier contract
(:mod:`mirrorworld.fidelity.episode`: the twin's end state against the gold
replayed on the twin).

**The figures** (:func:`agent_gap`), per agent and per family, then over all
families: the pass rate on the mirror, on the twin, and the **gap**, twin
minus mirror, with two 95% intervals from :mod:`mirrorworld.ship.compare`:
Newcombe's hybrid Wilson interval (takes the episodes as independent) and the
cluster bootstrap over tasks, **paired** (both sides hold the same tasks, so
each resample takes the same tasks on both sides, which removes the tasks'
own difficulty from the difference). An episode errored on either side (a
twin that failed, say) is left out of both sides, so the pairing holds, and
is listed with its failure.

**Every remaining difference explained**: every paired episode whose verdict
differs (passed on one side only, or any gate passing on one side only) is
listed with each gate that differs and the evidence only one side gives.

**The bar** (:data:`GAP_BAR`): the gap over all families is at most 2
percentage points for every agent measured; :func:`failed_bars` names each
agent that misses it.
"""

from __future__ import annotations

import html
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mirrorworld.core.task import Split
from mirrorworld.core.world import World
from mirrorworld.run.runner import EpisodeRecord, plan_episodes, play_episodes
from mirrorworld.ship.compare import RESAMPLES, comparison

if TYPE_CHECKING:
    from mirrorworld.fidelity.episode import Twin

__all__ = ["GAP_BAR", "agent_gap", "agents_html", "failed_bars", "gap_lines", "measure_gap"]

GAP_BAR = 0.02
"""The largest gap (twin minus mirror pass rate, over all families) an agent may show."""

EVIDENCE_SHOWN = 6
"""Evidence lines kept per side and gate of a difference."""


def measure_gap(
    world: World,
    twin: Twin,
    agents: Sequence[str],
    *,
    episodes: int,
    split: Split = "test",
    families: Sequence[str] | None = None,
    max_steps: int = 30,
    seed: int = 0,
    agent_options: Mapping[str, Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Play each agent (by name, ``seed`` for the seeded ones) over ``episodes`` tasks on both backends.

    ``agent_options`` go to :func:`~mirrorworld.agents.make_agent` for every
    agent (``policy`` for ``trained``, ``model`` and the rest for ``openai``).

    Returns the report as JSON-serialisable data: the run's identity, one
    :func:`agent_gap` per agent and the bars missed (:func:`failed_bars`).
    """
    from mirrorworld.agents import make_agent

    extra = {k: v for k, v in (agent_options or {}).items() if k != "seed"}
    made = {name: make_agent(name, seed=seed, **extra) for name in agents}  # unknown names refused before anything runs
    planned = plan_episodes(world, episodes=episodes, split=split, families=families)
    total, done = 2 * len(planned) * len(agents), 0

    def tick(_n: int, _of: int) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    options: dict[str, Any] = {"split": split, "families": families, "max_steps": max_steps, "progress": tick}
    results = []
    for name, agent in made.items():
        mirror = play_episodes(world, agent, planned, **options)
        real = play_episodes(world, make_agent(name, seed=seed, **extra), planned, make_env=twin.env, **options)
        results.append(agent_gap(agent.name, mirror, real, described=agent.describe()))
    data: dict[str, Any] = {
        "world": world.id,
        "world_hash": world.content_hash,
        "twin_versions": twin.versions(),
        "split": split,
        "episodes": len(planned),
        "max_steps": max_steps,
        "agent_seed": seed,
        "bar": GAP_BAR,
        "resamples": RESAMPLES,
        "agents": results,
    }
    data["failed_bars"] = failed_bars(data)
    return data


def agent_gap(
    agent: str,
    mirror: Sequence[EpisodeRecord],
    twin: Sequence[EpisodeRecord],
    *,
    described: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One agent's figures from its episodes on both backends (paired by their place in the plan).

    ``described``: the agent as a run file records it (a trained policy's file and digest, a model).
    """
    by_index = {r.index: r for r in twin}
    pairs: list[tuple[EpisodeRecord, EpisodeRecord]] = []
    errored: list[dict[str, Any]] = []
    for m in sorted(mirror, key=lambda r: r.index):
        t = by_index.get(m.index)
        if t is None:
            errored.append(_errored(m, None))
        elif m.errored or t.errored:
            errored.append(_errored(m, t))
        else:
            pairs.append((m, t))
    report = comparison([m for m, _ in pairs], [t for _, t in pairs])
    families = []
    for row in report["families"]:
        n_m, n_t = row["a"]["graded"], row["b"]["graded"]
        families.append(
            {
                "family": row["family"],
                "episodes": n_m,
                "mirror": {"passed": row["a"]["passed"], "rate": round(row["a"]["passed"] / n_m, 4) if n_m else None},
                "twin": {"passed": row["b"]["passed"], "rate": round(row["b"]["passed"] / n_t, 4) if n_t else None},
                "gap": row["delta"],
                "newcombe95": row["ci95"],
                "bootstrap95": row["bootstrap95"],
                "paired": row["paired"],
            }
        )
    overall = next((f for f in families if f["family"] == "all"), None)
    return {
        "agent": agent,
        "described": dict(described) if described is not None else {"name": agent},
        "episodes": len(mirror),
        "paired": len(pairs),
        "gap": overall["gap"] if overall is not None else None,
        "families": families,
        "differences": [d for m, t in pairs if (d := _difference(m, t)) is not None],
        "errored": errored,
    }


def _errored(m: EpisodeRecord, t: EpisodeRecord | None) -> dict[str, Any]:
    def side(r: EpisodeRecord | None) -> str | None:
        if r is None:
            return "not played"
        if r.failure is None:
            return None
        return f"{r.failure.boundary} {r.failure.kind}: {r.failure.message}"

    return {"index": m.index, "task": m.task_id, "family": m.family, "mirror": side(m), "twin": side(t)}


def _difference(m: EpisodeRecord, t: EpisodeRecord) -> dict[str, Any] | None:
    """The gates on which two graded episodes of the same task differ, with the evidence only one side gives."""
    vm, vt = m.graded, t.graded
    if vm is None or vt is None:
        return None
    gates = []
    for name in sorted(set(vm.gates) | set(vt.gates)):
        gm, gt = vm.gates.get(name), vt.gates.get(name)
        pm = gm.passed if gm is not None else None
        pt = gt.passed if gt is not None else None
        if pm == pt:
            continue
        em, et = (list(g.evidence) if g is not None else [] for g in (gm, gt))
        gates.append(
            {
                "gate": name,
                "mirror": pm,
                "twin": pt,
                "mirror_only": [e for e in em if e not in et][:EVIDENCE_SHOWN],
                "twin_only": [e for e in et if e not in em][:EVIDENCE_SHOWN],
            }
        )
    if not gates and vm.passed == vt.passed:
        return None
    return {
        "index": m.index,
        "task": m.task_id,
        "family": m.family,
        "mirror": vm.passed,
        "twin": vt.passed,
        "gates": gates,
        "calls_differ": [c.get("tool") for c in m.calls] != [c.get("tool") for c in t.calls],
    }


def failed_bars(data: dict[str, Any]) -> list[str]:
    """The agents whose gap over all families exceeds :data:`GAP_BAR` (or that no episode pairs)."""
    out = []
    for a in data["agents"]:
        gap = a["gap"]
        if gap is None:
            out.append(f"{a['agent']}: no episode graded on both backends")
        elif abs(gap) > data["bar"] + 1e-12:
            out.append(f"{a['agent']}: gap {gap * 100:+.1f} pp exceeds {data['bar'] * 100:.0f} pp")
    return out


def _pp(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:+.1f}pp"


def _rate(side: dict[str, Any]) -> str:
    return "-" if side["rate"] is None else f"{side['rate']:.1%}"


def _interval(pair: Sequence[float] | None) -> str:
    if pair is None:
        return "-"
    return "[" + ",".join(f"{v:+.2f}".replace("0.", ".") for v in pair) + "]"


def _verdict(passed: bool | None) -> str:
    return "-" if passed is None else "pass" if passed else "fail"


def gap_lines(data: dict[str, Any]) -> list[str]:
    """The report as the terminal shows it: a table per agent (80 columns), then every difference."""
    lines = [
        f"agent-level gap of {data['world']} against Tryton {data['twin_versions'].get('trytond', '?')}",
        f"{data['episodes']} {data['split']} tasks per agent on both backends; gap = twin - mirror pass rate",
    ]
    head = f"  {'family':18}{'n':>5}{'mirror':>8}{'twin':>8}{'gap':>9}{'Newcombe 95%':>14}{'paired 95%':>14}"
    for a in data["agents"]:
        excluded = len(a["errored"])
        lines.append("")
        lines.append(
            f"{a['agent']}: {a['paired']} of {a['episodes']} episodes graded on both backends"
            + (f" ({excluded} errored, left out)" if excluded else "")
        )
        policy = a.get("described", {}).get("policy")
        if policy is not None:
            lines.append(f"  policy {policy} (sha256 {str(a['described'].get('sha256', ''))[:12]})")
        lines.append(head)
        for f in a["families"]:
            boot = _interval(f["bootstrap95"]) + ("" if f["paired"] in (None, True) else "u")
            lines.append(
                f"  {f['family'][:18]:18}{f['episodes']:>5}{_rate(f['mirror']):>8}{_rate(f['twin']):>8}"
                f"{_pp(f['gap']):>9}{_interval(f['newcombe95']):>14}{boot:>14}"
            )
    lines.append("")
    lines.append(f"bar: |gap| <= {data['bar'] * 100:.0f} pp for every agent (over all families)")
    differences = [(a["agent"], d) for a in data["agents"] for d in a["differences"]]
    lines.append(f"verdicts that differ between mirror and twin: {len(differences)}")
    for agent, d in differences:
        lines.append(
            f"  {agent} {d['task']} #{d['index']}: mirror {_verdict(d['mirror'])}, twin {_verdict(d['twin'])}"
            + (", calls differ" if d["calls_differ"] else "")
        )
        for g in d["gates"]:
            lines.append(f"    {g['gate']}: mirror {_verdict(g['mirror'])}, twin {_verdict(g['twin'])}")
            for side in ("mirror", "twin"):
                for evidence in g[f"{side}_only"]:
                    lines += _wrapped(f"{side} only: {evidence}", "      ")
    errored = [(a["agent"], e) for a in data["agents"] for e in a["errored"]]
    if errored:
        lines.append(f"episodes errored on a backend (left out of both): {len(errored)}")
        for agent, e in errored:
            for side in ("mirror", "twin"):
                if e[side]:
                    lines += _wrapped(f"{agent} {e['task']} #{e['index']} on the {side}: {e[side]}", "  ")
    return lines


def _wrapped(text: str, indent: str) -> list[str]:
    """``text`` in lines of at most 80 columns, every word kept (evidence quotes records whole)."""
    return textwrap.wrap(
        text, 80, initial_indent=indent, subsequent_indent=indent + "  ", break_long_words=True, break_on_hyphens=False
    ) or [indent]


def agents_html(data: dict[str, Any]) -> str:
    """The report as a section of the fidelity page: a table per agent, the differences, the errored."""
    e = html.escape
    out = [
        "<h2>Agent-level sim-to-real gap</h2>",
        f"<p>{data['episodes']} {e(str(data['split']))} tasks per agent, played on the mirror and on the twin "
        f"(Tryton {e(str(data['twin_versions'].get('trytond', '?')))}) and graded by the same verifier contract. "
        "Gap: twin minus mirror pass rate, with Newcombe's 95% interval and the 95% cluster bootstrap over "
        f"tasks, paired. Bar: |gap| &le; {data['bar'] * 100:.0f} percentage points for every agent.</p>",
    ]
    failed = data.get("failed_bars") or []
    out.append(
        f'<p class="{"bad" if failed else "ok"}"><strong>'
        + (e("; ".join(failed)) if failed else "every agent within the bar")
        + "</strong></p>"
    )
    for a in data["agents"]:
        out.append(f"<h3>{e(str(a['agent']))}: {a['paired']} of {a['episodes']} episodes graded on both</h3>")
        out.append(
            "<table><tr><th>family</th><th>n</th><th>mirror</th><th>twin</th><th>gap</th>"
            "<th>Newcombe 95%</th><th>paired bootstrap 95%</th></tr>"
        )
        for f in a["families"]:
            cls = ' class="bad"' if f["gap"] and f["family"] == "all" and abs(f["gap"]) > data["bar"] else ""
            out.append(
                f"<tr{cls}><td>{e(str(f['family']))}</td><td>{f['episodes']}</td><td>{e(_rate(f['mirror']))}</td>"
                f"<td>{e(_rate(f['twin']))}</td><td>{e(_pp(f['gap']))}</td>"
                f"<td>{e(_interval(f['newcombe95']))}</td><td>{e(_interval(f['bootstrap95']))}</td></tr>"
            )
        out.append("</table>")
    rows = []
    for a in data["agents"]:
        for d in a["differences"]:
            gates = "; ".join(
                f"{g['gate']}: mirror {_verdict(g['mirror'])}, twin {_verdict(g['twin'])}"
                + "".join(f" | mirror only: {x}" for x in g["mirror_only"])
                + "".join(f" | twin only: {x}" for x in g["twin_only"])
                for g in d["gates"]
            )
            rows.append(
                f"<tr><td>{e(str(a['agent']))}</td><td>{e(str(d['task']))}</td><td>{_verdict(d['mirror'])}</td>"
                f"<td>{_verdict(d['twin'])}</td><td>{e(gates)}</td></tr>"
            )
    out.append(f"<h3>Verdicts that differ ({len(rows)})</h3>")
    if rows:
        out.append(
            "<table><tr><th>agent</th><th>task</th><th>mirror</th><th>twin</th><th>gates and evidence</th></tr>"
            + "".join(rows)
            + "</table>"
        )
    errored = [
        f"<li>{e(str(a['agent']))} {e(str(x['task']))}: "
        + e("; ".join(f"{side}: {x[side]}" for side in ("mirror", "twin") if x[side]))
        + "</li>"
        for a in data["agents"]
        for x in a["errored"]
    ]
    if errored:
        out.append(f"<h3>Errored episodes ({len(errored)}), left out of both sides</h3><ul>{''.join(errored)}</ul>")
    return "\n".join(out)
