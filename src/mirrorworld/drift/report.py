"""A drift report: one agent on two versions of a world, per family, and which change caused what.

:func:`drift_report` plays the same task references (family and seed) on the
``old`` and the ``new`` version (a derived version's tasks pair one to one
with its base's), and compares pass rates per family with 95% Newcombe
intervals (errored episodes are an endpoint, world or infrastructure failure
and count in no rate). The **ablation** derives, for each change of the new
version, a world with that change alone on the old one and plays the same
tasks there: the changes are ranked by the drop each causes alone, so the
report names the change behind a regression. A change that names a tool or
argument as an earlier change renamed it is applied under the old name; one
that needs an earlier change to make sense (withdrawing an enum value in
favour of one added before) is applied with it.

The ``stale`` agent (:class:`StaleOracle`) is the agent that learnt the old
version perfectly: it plays the old version's gold solution of each task. It
scores 100% on the old version by construction, so its drop on the new one is
what the changes alone do to a policy fitted to the past.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mirrorworld.agents.base import Agent, EpisodeContext
from mirrorworld.agents.scripted import CallListAgent
from mirrorworld.core.task import TaskRef, ToolCall, split_seed
from mirrorworld.core.world import World
from mirrorworld.drift.changes import (
    AddEnumValue,
    Change,
    RemoveEnumValue,
    RenameArgument,
    RenameTool,
)
from mirrorworld.drift.derive import DriftedWorld, derive
from mirrorworld.envs.chat import ChatEnv
from mirrorworld.errors import WorldError
from mirrorworld.run.runner import EpisodeRecord, run_episode
from mirrorworld.ship.compare import Delta, deltas

__all__ = ["AblationRow", "DriftReport", "StaleOracle", "ablation_worlds", "changes_between", "drift_report"]


class StaleOracle(CallListAgent):
    """Plays the gold solution the ``learnt`` version has for each task: a policy fitted to an older version."""

    name = "stale"

    def __init__(self, learnt: World, *, retries: int = 0) -> None:
        self.learnt = learnt
        self.retries = retries

    def plan(self, context: EpisodeContext) -> list[ToolCall]:
        return list(self.learnt.task(context.task.family, context.task.seed).gold)


def changes_between(old: type[World], new: type[World]) -> tuple[Change, ...]:
    """The changes that lead from ``old`` to ``new`` (``new`` derived from ``old``, directly or by a chain)."""
    if not issubclass(new, DriftedWorld):
        raise WorldError(f"{new.__qualname__} is not derived from another version")
    root = new.drift_root
    if old is root:
        return new.changes
    if issubclass(old, DriftedWorld) and old.drift_root is root and new.changes[: len(old.changes)] == old.changes:
        return new.changes[len(old.changes) :]
    raise WorldError(f"{new.__qualname__} is not derived from {old.__qualname__}")


def _in_old_names(changes: Sequence[Change], index: int) -> Change:
    """Change ``index`` with the tool and argument names it uses mapped back to the names before any change."""
    tools: dict[str, str] = {}  # current name -> old name
    args: dict[tuple[str, str], str] = {}  # (old tool, current arg) -> old arg
    for c in changes[:index]:
        if isinstance(c, RenameTool):
            tools[c.to] = tools.get(c.tool, c.tool)
        elif isinstance(c, RenameArgument):
            tool = tools.get(c.tool, c.tool)
            args[(tool, c.to)] = args.get((tool, c.argument), c.argument)
    change = changes[index]
    fields = {f.name for f in dataclasses.fields(change)}
    updates: dict[str, Any] = {}
    named: Any = change
    if "tool" in fields:
        old_tool: str = tools.get(named.tool, named.tool)
        updates["tool"] = old_tool
        if "argument" in fields:
            updates["argument"] = args.get((old_tool, named.argument), named.argument)
    if "tools" in fields:
        updates["tools"] = tuple(tools.get(t, t) for t in named.tools)
    return dataclasses.replace(change, **updates) if updates else change


def _needs(changes: Sequence[Change], index: int) -> list[int]:
    """The earlier changes change ``index`` cannot be applied without (an enum value added before it is withdrawn)."""
    c = changes[index]
    if isinstance(c, RemoveEnumValue):
        return [
            i
            for i in range(index)
            if isinstance(changes[i], AddEnumValue)
            and changes[i].value == c.use_instead  # type: ignore[attr-defined]
            and _in_old_names(changes, i).tool == _in_old_names(changes, index).tool  # type: ignore[attr-defined]
        ]
    return []


def ablation_worlds(old: type[World], changes: Sequence[Change]) -> list[tuple[list[int], type[World]]]:
    """One world per change of ``changes`` (indexes into it): ``old`` with that change alone (and what it needs).

    A change another one needs is reported with it, not alone.
    """
    groups = [sorted({*_needs(changes, i), i}) for i in range(len(changes))]
    pulled = {j for g in groups if len(g) > 1 for j in g}
    out = []
    for i, group in enumerate(groups):
        if len(group) == 1 and i in pulled:
            continue
        applied = [_in_old_names(changes, j) for j in group]
        world = derive(old, version=900 + i, changes=applied, name=f"ablation_{i}", title=f"{old.title}Ablation{i}")
        out.append((group, world))
    return out


@dataclass(frozen=True)
class AblationRow:
    """The effect of some changes alone: the pass rate on the old version with them, against without."""

    changes: tuple[str, ...]
    overall: Delta
    families: tuple[Delta, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "changes": list(self.changes),
            "overall": self.overall.to_dict(),
            "families": [d.to_dict() for d in self.families if d.n_a and d.n_b and d.delta != 0],
        }


@dataclass(frozen=True)
class DriftReport:
    """An agent on two versions: per-family deltas, and the ablation ranked by drop (largest first)."""

    agent: str
    old: str
    new: str
    old_hash: str
    new_hash: str
    changelog: tuple[str, ...]
    families: tuple[Delta, ...]
    ablation: tuple[AblationRow, ...]
    errored: tuple[int, int]

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "old": {"world": self.old, "world_hash": self.old_hash},
            "new": {"world": self.new, "world_hash": self.new_hash},
            "changelog": list(self.changelog),
            "families": [d.to_dict() for d in self.families],
            "ablation": [r.to_dict() for r in self.ablation],
            "errored": {"old": self.errored[0], "new": self.errored[1]},
        }


def _refs(world: World, per_family: int, families: Sequence[str] | None) -> list[TaskRef]:
    names = list(families) if families else [f.name for f in world.families]
    return [TaskRef(name, split_seed("test", k)) for name in names for k in range(per_family)]


def _play(
    world: World, agent: Agent, refs: Sequence[TaskRef], tick: Callable[[], None], max_steps: int
) -> list[EpisodeRecord]:
    env = ChatEnv(world, max_steps=max_steps)
    out = []
    for i, ref in enumerate(refs):
        task = world.task(ref.family, ref.seed)
        out.append(run_episode(env, agent, task, index=i))
        tick()
    return out


def drift_report(
    old: World,
    new: World,
    agent_for: Callable[[World], Agent],
    *,
    per_family: int = 5,
    families: Sequence[str] | None = None,
    ablation: bool = True,
    max_steps: int = 30,
    progress: Callable[[int], Callable[[], None]] | None = None,
) -> DriftReport:
    """``agent_for(world)`` (a fresh agent per version) on ``per_family`` test tasks of every family of both.

    ``progress(total)`` returns the function called after every episode (a bar).
    """
    changes = changes_between(type(old), type(new))
    refs = _refs(old, per_family, families)
    worlds: list[tuple[list[int], World]] = []
    if ablation:
        worlds = [(g, cls(scale=old.scale, data_seed=old.data_seed)) for g, cls in ablation_worlds(type(old), changes)]
    tick = progress(len(refs) * (2 + len(worlds))) if progress else (lambda: None)
    agent = agent_for(old)
    before = _play(old, agent, refs, tick, max_steps)
    after = _play(new, agent_for(new), refs, tick, max_steps)
    rows = []
    for group, world in worlds:
        alone = _play(world, agent_for(world), refs, tick, max_steps)
        ds = deltas(before, alone)
        overall = next(d for d in ds if d.family == "all")
        rows.append(
            AblationRow(
                tuple(changes[i].changelog() for i in group), overall, tuple(d for d in ds if d.family != "all")
            )
        )
    rows.sort(key=lambda r: (r.overall.delta if r.overall.n_a and r.overall.n_b else 0.0, r.changes))
    return DriftReport(
        agent=agent.name,
        old=old.id,
        new=new.id,
        old_hash=old.content_hash,
        new_hash=new.content_hash,
        changelog=tuple(c.changelog() for c in changes),
        families=tuple(deltas(before, after)),
        ablation=tuple(rows),
        errored=(sum(r.errored for r in before), sum(r.errored for r in after)),
    )


def plot_svg(report: DriftReport) -> str:
    """The report as an SVG: per-family pass rates on both versions, then the ablation's drops."""
    from xml.sax.saxutils import escape

    fams = [d for d in report.families if d.family != "all"]
    width, bar_h, gap, label_w, plot_w = 760, 14, 8, 230, 480
    rows_h = (2 * bar_h + gap) * len(fams)
    ab_h = (bar_h + gap) * len(report.ablation)
    height = 90 + rows_h + 60 + ab_h + 20
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        f'<text x="10" y="20" font-size="15" font-weight="bold">{escape(report.agent)}: '
        f"{escape(report.old)} → {escape(report.new)}</text>",
        '<rect x="10" y="32" width="12" height="10" fill="#4c78a8"/><text x="26" y="41">old version</text>',
        '<rect x="120" y="32" width="12" height="10" fill="#e45756"/><text x="136" y="41">new version</text>',
        '<text x="10" y="66" font-weight="bold">pass rate per family</text>',
    ]
    y = 76
    for d in fams:
        out.append(f'<text x="10" y="{y + bar_h + 4}">{escape(d.family[:32])}</text>')
        for rate, n, colour in ((d.rate_a, d.n_a, "#4c78a8"), (d.rate_b, d.n_b, "#e45756")):
            w = 0 if not n else rate * plot_w
            out.append(f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{colour}"/>')
            out.append(f'<text x="{label_w + w + 4:.1f}" y="{y + bar_h - 3}">{"-" if not n else f"{rate:.0%}"}</text>')
            y += bar_h
        y += gap
    y += 30
    out.append(f'<text x="10" y="{y}" font-weight="bold">ablation: drop in pass rate with each change alone</text>')
    y += 10
    for row in report.ablation:
        d = row.overall
        drop = max(0.0, -d.delta) if d.n_a and d.n_b else 0.0
        label = "; ".join(row.changes)
        out.append(f'<text x="10" y="{y + bar_h - 3}">{escape(label[:38])}</text>')
        out.append(f'<rect x="{label_w}" y="{y}" width="{drop * plot_w:.1f}" height="{bar_h}" fill="#f58518"/>')
        out.append(f'<text x="{label_w + drop * plot_w + 4:.1f}" y="{y + bar_h - 3}">{-drop:+.0%}</text>')
        y += bar_h + gap
    out.append("</svg>")
    return "\n".join(out) + "\n"
