"""What the run viewer reads from a run file: one row per episode, the run's figures and the filters.

A run file is untrusted input (:mod:`mirrorworld.run.trajectories`). :func:`load_run`
opens it with :meth:`RunFile.open <mirrorworld.run.trajectories.RunFile.open>` and
reads every episode once, so whatever :class:`~mirrorworld.run.trajectories.RunFile`
checks is checked before the viewer serves anything, and it also checks that
each episode's task is one :meth:`Task.from_dict <mirrorworld.core.task.Task.from_dict>`
can read (the episode page replays it). Any fault is one
:class:`~mirrorworld.errors.RunFileError` line. What is kept is small: one
:class:`EpisodeRow` per episode; an episode page reads its episode from the
file again.

The figures follow :mod:`mirrorworld.run.metrics`: an *errored* episode (a
failure at the world, verifier or infrastructure boundary) is not graded, so
it counts in no pass rate; it is shown beside the rates, never as a failure.

**Flagged.** An episode is flagged when it carries a flag of either kind:

* what its stored verdict notes beyond pass or fail (:func:`flags_of`):
  ``policy:<rule>``, a rule was broken (a hard rule fails the episode, a soft
  one is only reported), from the policy gate's ``violations``; ``judge``, the
  model judge objected to a customer-visible text (evidence lines ``judge: …``
  in the communication gate); ``repeated_calls``, the same successful call
  (tool and arguments) made more than once, and ``rows_restored``, rows
  written and then set back, from the verdict's guards. An errored episode
  has no verdict, so none of these;
* ``audit:<rule>``: a reward-hacking detector of ``mirrorworld audit-run``
  (:func:`mirrorworld.audit.runlog.audit_run`: ``claim_without_state``,
  ``undo_redo``, ``out_of_scope``, ``hidden_probe``, ``repeated_calls``,
  ``abnormal_calls``) flagged it, as the review app samples flagged episodes.
  The audit replays every episode on its world (milliseconds each);
  ``audit=False`` skips it, and a run whose world is not installed, or that
  the audit refuses, is shown without these flags and says why
  (:attr:`ViewedRun.audit_error`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from mirrorworld.core.registry import Registry, default
from mirrorworld.core.task import Task
from mirrorworld.errors import MirrorworldError, RunFileError
from mirrorworld.inert import inert
from mirrorworld.run.runner import EpisodeRecord
from mirrorworld.run.trajectories import RunFile

__all__ = [
    "STATUSES",
    "EpisodeRow",
    "FamilyFigures",
    "FilterError",
    "Filters",
    "ViewedRun",
    "flags_of",
    "load_run",
    "load_runs",
    "status_of",
]

Status = Literal["passed", "failed", "errored"]
STATUSES: tuple[Status, ...] = ("passed", "failed", "errored")

NAME_LIMIT = 200
"""Characters of a task id, family or flag name kept for display."""
MAX_FAMILY_QUERY = 1000
"""The longest ``?family=`` value taken (longer is no family of any run)."""


class FilterError(MirrorworldError):
    """A filter in a URL's query that means nothing (``?status=maybe``): a 400 page, never a 500."""


@dataclass(frozen=True)
class EpisodeRow:
    """One episode as the lists show it (every text bounded and inert, :func:`mirrorworld.inert.inert`)."""

    index: int
    task_id: str
    family: str
    trial: int
    status: Status
    reward: float
    steps: int
    flags: tuple[str, ...] = ()
    failure: str | None = None
    """``boundary: kind: message`` of an errored episode."""


@dataclass(frozen=True)
class FamilyFigures:
    """A family's episodes, graded ones, passes and errored ones."""

    key: str
    """The family as stored (what ``?family=`` takes)."""
    name: str
    """The family as shown (bounded, inert)."""
    episodes: int
    graded: int
    passed: int
    errored: int

    @property
    def pass_rate(self) -> float | None:
        """Passes over graded episodes; None when none was graded."""
        return self.passed / self.graded if self.graded else None


@dataclass(frozen=True)
class Filters:
    """The episode list's filters, from a URL's query: ``status``, ``flagged``, ``family``; they combine (and)."""

    status: Status | None = None
    flagged: bool = False
    family: str | None = None

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> Filters:
        """The filters in ``query`` (an absent or empty parameter does not filter); :class:`FilterError` else."""
        status = query.get("status") or None
        if status is not None and status not in STATUSES:
            raise FilterError(f"status is one of {', '.join(STATUSES)}, not {inert(status, 40, lines=False)!r}")
        flagged = query.get("flagged") or "0"
        if flagged not in ("0", "1"):
            raise FilterError("flagged is 1 (flagged episodes only) or 0")
        family = query.get("family") or None
        if family is not None and len(family) > MAX_FAMILY_QUERY:
            raise FilterError(f"a family name has at most {MAX_FAMILY_QUERY} characters")
        return cls(status, flagged == "1", family)  # type: ignore[arg-type]

    def matches(self, row: EpisodeRow, family: str) -> bool:
        """Whether ``row`` (whose family, as stored, is ``family``) passes every filter."""
        return (
            (self.status is None or row.status == self.status)
            and (not self.flagged or bool(row.flags))
            and (self.family is None or family == self.family)
        )

    def params(self) -> dict[str, str]:
        """The query parameters that give these filters (none for no filter)."""
        out: dict[str, str] = {}
        if self.status is not None:
            out["status"] = self.status
        if self.flagged:
            out["flagged"] = "1"
        if self.family is not None:
            out["family"] = self.family
        return out

    @property
    def active(self) -> bool:
        return bool(self.params())


@dataclass
class ViewedRun:
    """A run file as the viewer shows it: its metadata, one row per episode (in index order)."""

    path: Path
    name: str
    meta: dict[str, Any]
    rows: list[EpisodeRow] = field(default_factory=list)
    families_stored: list[str] = field(default_factory=list)
    """Each row's family as stored (not bounded), for exact ``?family=`` matches."""
    audit_error: str | None = None
    """Why the run has no ``audit:`` flags (its world is not installed, the audit refused it, it was
    skipped), or None."""

    def __post_init__(self) -> None:
        self._by_index = {r.index: i for i, r in enumerate(self.rows)}

    @property
    def graded(self) -> int:
        return sum(r.status != "errored" for r in self.rows)

    @property
    def passed(self) -> int:
        return sum(r.status == "passed" for r in self.rows)

    @property
    def errored(self) -> int:
        return sum(r.status == "errored" for r in self.rows)

    @property
    def flagged(self) -> int:
        return sum(bool(r.flags) for r in self.rows)

    @property
    def pass_rate(self) -> float | None:
        """Passes over graded episodes (errored ones left out); None when none was graded."""
        graded = self.graded
        return self.passed / graded if graded else None

    @property
    def planned(self) -> int | None:
        """Episodes the run set out to play (``episodes`` × ``trials`` of its metadata), when it says."""
        episodes, trials = self.meta.get("episodes"), self.meta.get("trials", 1)
        if isinstance(episodes, int) and isinstance(trials, int) and _count(episodes) and _count(trials):
            return episodes * trials
        return None

    def families(self) -> list[FamilyFigures]:
        """Figures per family, in name order."""
        acc: dict[str, list[int]] = {}
        names: dict[str, str] = {}
        for row, stored in zip(self.rows, self.families_stored, strict=True):
            n = acc.setdefault(stored, [0, 0, 0, 0])
            names[stored] = row.family
            n[0] += 1
            n[1] += row.status != "errored"
            n[2] += row.status == "passed"
            n[3] += row.status == "errored"
        return [FamilyFigures(k, names[k], *acc[k]) for k in sorted(acc)]

    def select(self, filters: Filters) -> list[EpisodeRow]:
        """The rows that pass ``filters``, in index order."""
        return [r for r, f in zip(self.rows, self.families_stored, strict=True) if filters.matches(r, f)]

    def row(self, index: int) -> EpisodeRow | None:
        """The row of the episode numbered ``index`` (as ``mirrorworld show RUN INDEX`` numbers it)."""
        i = self._by_index.get(index)
        return None if i is None else self.rows[i]

    def about(self) -> list[tuple[str, str]]:
        """What the metadata says of the run (world, agent, model, …) as (label, text) pairs, text inert."""
        out = []
        for key, label in (
            ("world", "world"),
            ("agent", "agent"),
            ("model", "model"),
            ("agent_config", "agent config"),
            ("split", "split"),
            ("judge", "judge"),
            ("faults", "faults"),
            ("started", "started"),
            ("versions", "versions"),
        ):
            value = self.meta.get(key)
            if value is None or value == {} or value == "":
                continue
            out.append((label, _shown(value)))
        return out


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 10**9


def _shown(value: Any, limit: int = 300) -> str:
    """A metadata value as one bounded, inert line (a structure as compact JSON)."""
    if not isinstance(value, str):
        try:
            value = json.dumps(value, sort_keys=True, separators=(", ", ": "), ensure_ascii=False)
        except (TypeError, ValueError, RecursionError):
            value = type(value).__name__
    return inert(value, limit, lines=False)


def status_of(record: EpisodeRecord) -> Status:
    """``errored`` (not graded), else ``passed`` or ``failed``."""
    if record.errored:
        return "errored"
    return "passed" if record.passed else "failed"


def flags_of(record: EpisodeRecord) -> tuple[str, ...]:
    """The flags of an episode's verdict, sorted (see the module docstring); none for an errored episode."""
    verdict = None if record.errored else record.graded
    if verdict is None:
        return ()
    found: set[str] = set()
    policy = verdict.gates.get("policy")
    violations = policy.details.get("violations") if policy is not None else None
    if isinstance(violations, list):
        for v in violations:
            rule = v.get("rule") if isinstance(v, dict) else None
            found.add(f"policy:{inert(rule, 60, lines=False)}" if isinstance(rule, str) and rule else "policy")
    communication = verdict.gates.get("communication")
    if communication is not None and any(e.startswith("judge:") for e in communication.evidence):
        found.add("judge")
    for counter in ("repeated_calls", "rows_restored"):
        n = verdict.guards.get(counter)
        if isinstance(n, (int, float)) and not isinstance(n, bool) and n > 0:
            found.add(counter)
    return tuple(sorted(found))


def _failure(record: EpisodeRecord) -> str | None:
    f = record.failure
    if f is None:
        return None
    return inert(f"{f.boundary}: {f.kind}: {f.message}", 500, lines=False)


def _audit(path: Path, world_name: Any, registry: Registry | None) -> tuple[dict[int, list[str]], str | None]:
    """Episode index → its ``audit:`` flags; or no flags and why (see the module docstring)."""
    from mirrorworld.audit.runlog import audit_run

    if not isinstance(world_name, str):
        return {}, "the run names no world"
    try:
        result = audit_run(path, (registry or default).get(world_name))
    except MirrorworldError as err:
        return {}, inert(str(err), 300, lines=False)
    flags: dict[int, list[str]] = {}
    for e in result["episodes_flagged"]:
        flags[int(e["index"])] = sorted({f"audit:{inert(f['rule'], 60, lines=False)}" for f in e["flags"]})
    return flags, None


def load_run(path: str | Path, *, registry: Registry | None = None, audit: bool = True) -> ViewedRun:
    """Open and check the run file at ``path`` whole; its rows. Raises :class:`RunFileError` (one line).

    ``audit`` runs ``audit-run``'s detectors over it, its world looked up in
    ``registry`` (by default the installed worlds).
    """
    p = Path(path)
    rows: list[EpisodeRow] = []
    families: list[str] = []
    where = inert(p, 300, lines=False)
    world: Any = None
    with RunFile.open(p) as run:
        meta = run.meta
        for record in run.episodes():
            try:
                Task.from_dict(record.task)
            except (KeyError, TypeError, ValueError, IndexError, AttributeError):
                raise RunFileError(f"{where}: episode {record.index}: its task is malformed") from None
            except MirrorworldError as err:
                raise RunFileError(f"{where}: episode {record.index}: {err}") from None
            rows.append(
                EpisodeRow(
                    index=record.index,
                    task_id=inert(record.task_id, NAME_LIMIT, lines=False),
                    family=inert(record.family, NAME_LIMIT, lines=False),
                    trial=record.trial,
                    status=status_of(record),
                    reward=record.reward,
                    steps=record.steps,
                    flags=flags_of(record),
                    failure=_failure(record),
                )
            )
            families.append(record.family)
            if world is None:
                world = record.task.get("world")
    audit_error: str | None = "skipped (--no-audit)"
    if audit:
        found, audit_error = _audit(p, world if world is not None else meta.get("world"), registry)
        rows = [replace(r, flags=tuple(sorted({*r.flags, *found.get(r.index, ())}))) for r in rows]
    return ViewedRun(p, inert(str(path), 300, lines=False), meta, rows, families, audit_error)


def load_runs(
    paths: Sequence[str] | Sequence[Path], *, registry: Registry | None = None, audit: bool = True
) -> list[ViewedRun]:
    """:func:`load_run` of each path, in order; the first fault raises."""
    return [load_run(p, registry=registry, audit=audit) for p in paths]
