"""Verifier regression cases: adjudicated disagreements, kept as tests.

When humans and the verifier disagree on an episode and an adjudicator settles
the human verdict, the episode becomes a **regression case**: the task (whole,
as recorded), the assistant's messages (replayed exactly, so the case needs no
run file) and the human verdict the verifier should reach. Cases are stored
as JSON Lines (``tests/regressions/*.jsonl`` in this repository), one object a
line, sorted by id, so they diff and merge well.

A case's ``status`` is ``open`` while the verifier still disagrees with the
human verdict — the test suite marks it as an expected failure, strictly, so
the day the verifier is fixed the test reports an unexpected pass and the case
must be marked ``fixed`` — and ``fixed`` once the verifier agrees, from which
point a disagreement is a regression that fails the suite.

:func:`export_disagreements` writes or updates a case file from a review
database (existing cases keep their status); :func:`run_case` replays a case
with the current verifier; :func:`check_cases` summarises a set of case files
for ``audit-verifiers`` and the ``review check-regressions`` command.

Both take an optional ``verifier`` (any callable from a session to a
:class:`~mirrorworld.verify.Verdict`, such as a fitted verifier version from
:mod:`mirrorworld.review.fitting`): the case's messages are replayed exactly
as without one (:func:`replayed`), and the finished episode is graded by it
instead of the episode's own verifier, so a candidate verifier is checked
against every case before it is accepted. Cases written by reviewers as task
variants (:mod:`mirrorworld.review.edge_cases`, ``source.kind ==
"edge_case"``) are ordinary cases: their ``task`` is the variant, whole.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mirrorworld.core.registry import Registry, default
from mirrorworld.errors import Failure, MirrorworldError
from mirrorworld.review.store import ReviewStore

if TYPE_CHECKING:
    from mirrorworld.core.session import Session
    from mirrorworld.core.task import Task
    from mirrorworld.core.world import World
    from mirrorworld.episodes import Episode
    from mirrorworld.verify.verdict import Verdict

Grader = Callable[["Session"], "Verdict"]
"""A verifier: grades a finished session (``mirrorworld.verify.Verifier`` and its subclasses are ones)."""

__all__ = [
    "CASE_FORMAT",
    "CaseResult",
    "RegressionCase",
    "check_cases",
    "export_disagreements",
    "load_cases",
    "replayed",
    "run_case",
    "write_cases",
]

CASE_FORMAT = "mirrorworld-verifier-case/1"

Status = Literal["open", "fixed"]


@dataclass(frozen=True)
class RegressionCase:
    """One adjudicated episode the verifier must grade as the humans did."""

    id: str
    world: str
    task: dict[str, Any]
    messages: list[dict[str, Any]]
    """The assistant's messages (with their tool calls), in order."""
    human_passed: bool
    verifier_passed: bool
    """The verifier's verdict when the case was exported."""
    verifier_version: str
    reason: str
    flags: list[str] = field(default_factory=list)
    source: dict[str, Any] = field(default_factory=dict)
    status: Status = "open"

    def to_dict(self) -> dict[str, Any]:
        return {"format": CASE_FORMAT, **asdict(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RegressionCase:
        if d.get("format") != CASE_FORMAT:
            raise MirrorworldError(f"not a {CASE_FORMAT} case: {str(d)[:80]}")
        if d.get("status") not in ("open", "fixed"):
            raise MirrorworldError(f"case {d.get('id')}: status must be 'open' or 'fixed'")
        fields = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        return cls(**fields)


@dataclass(frozen=True)
class CaseResult:
    id: str
    status: Status
    human_passed: bool
    verifier_passed: bool
    evidence: list[str]

    @property
    def agrees(self) -> bool:
        return self.human_passed == self.verifier_passed

    @property
    def regressed(self) -> bool:
        """A fixed case the verifier gets wrong again."""
        return self.status == "fixed" and not self.agrees


def case_id(task_id: str, messages: Sequence[dict[str, Any]]) -> str:
    blob = json.dumps(list(messages), sort_keys=True, separators=(",", ":"), default=str)
    return f"{task_id}@{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


def load_cases(*paths: str | Path) -> list[RegressionCase]:
    """Cases from JSON Lines files, or from every ``*.jsonl`` in a directory (a missing path has none)."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(p.glob("*.jsonl"))
        elif p.is_file():
            files.append(p)
    cases: list[RegressionCase] = []
    for f in files:
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                cases.append(RegressionCase.from_dict(json.loads(line)))
            except (ValueError, TypeError, MirrorworldError) as err:
                raise MirrorworldError(f"{f}:{n}: not a regression case ({err})") from None
    return cases


def write_cases(path: str | Path, cases: Iterable[RegressionCase]) -> None:
    """Write cases to a JSON Lines file, sorted by id (atomically: a temporary file renamed over it)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(
        json.dumps(c.to_dict(), sort_keys=True, ensure_ascii=False, default=str) + "\n"
        for c in sorted(cases, key=lambda c: c.id)
    )
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(p)


def export_disagreements(store: ReviewStore, out: str | Path) -> tuple[list[RegressionCase], int]:
    """Add every adjudicated verifier-vs-human disagreement to the case file ``out``.

    Returns (all cases now in the file, how many are new). A case already in
    the file keeps its status; its human verdict and reason follow the latest
    adjudication. Gold-run episodes are skipped.
    """
    existing = {c.id: c for c in load_cases(out)} if Path(out).exists() else {}
    adjudications = store.adjudications()
    new = 0
    with store.read() as conn:
        items = store.items(conn, "r.gold = 0")
        reviews = store.reviews(conn)
    by_item: dict[int, list[Any]] = {}
    for r in reviews:
        by_item.setdefault(r.item_id, []).append(r)
    for item in items:
        adj = adjudications.get(item.id)
        if adj is None or adj["passed"] == item.verifier_passed:
            continue
        record = store.record(item.id)
        messages = [
            {k: m[k] for k in ("role", "content", "tool_calls") if k in m}
            for m in record["messages"]
            if m.get("role") == "assistant"
        ]
        cid = case_id(item.task_id, messages)
        flags = sorted({f for r in by_item.get(item.id, []) for f in r.flags})
        old = existing.get(cid)
        run_path = next((r["path"] for r in store.runs() if r["id"] == item.run_id), None)
        existing[cid] = RegressionCase(
            id=cid,
            world=str(record["task"]["world"]),
            task=record["task"],
            messages=messages,
            human_passed=bool(adj["passed"]),
            verifier_passed=item.verifier_passed if old is None else old.verifier_passed,
            verifier_version=item.verifier_version if old is None else old.verifier_version,
            reason=str(adj["reason"]),
            flags=flags,
            source={"run": run_path, "episode": item.episode, "task": item.task_id, "adjudicated_by": adj["by"]},
            status="open" if old is None else old.status,
        )
        new += old is None
    write_cases(out, existing.values())
    return sorted(existing.values(), key=lambda c: c.id), new


@contextlib.contextmanager
def replayed(world: World, task: Task, messages: Sequence[dict[str, Any]]) -> Iterator[Episode]:
    """The episode of ``task`` in which the assistant ``messages`` are replayed, ended and graded as recorded.

    The messages are stepped through a chat environment one by one, as a
    :class:`~mirrorworld.agents.replay.ReplayAgent` plays them; an episode the
    messages leave running ends without a final message (truncated). The
    episode is open inside the block (its session can be graded again) and
    closed after it; a world or verifier failure raises at its boundary.
    """
    from mirrorworld.agents.base import assistant
    from mirrorworld.envs.chat import ChatEnv

    env = ChatEnv(world, max_steps=10_000)
    try:
        env.reset(task=task)
        for m in messages:
            if env.done:
                break
            out: dict[str, Any] = {"role": "assistant", "content": m.get("content")}
            if m.get("tool_calls"):
                out["tool_calls"] = m["tool_calls"]
            env.step(out)
        if not env.done:
            env.step(assistant(""))
        assert env.episode is not None
        yield env.episode
    finally:
        env.close()


def run_case(case: RegressionCase, registry: Registry | None = None, *, verifier: Grader | None = None) -> CaseResult:
    """Replay a case on a fresh session and grade it with the current verifier (or ``verifier``)."""
    from mirrorworld.agents.replay import ReplayAgent
    from mirrorworld.core.task import Task
    from mirrorworld.envs.chat import ChatEnv
    from mirrorworld.run.runner import run_episode

    task = Task.from_dict(case.task)
    world = (registry or default).get(case.world)
    if verifier is not None:
        try:
            with replayed(world, task, case.messages) as episode:
                failure = episode.failure
                graded = verifier(episode.session) if failure is None else None
        except MirrorworldError as err:
            failure = Failure.of(err)
            graded = None
        if graded is None:
            assert failure is not None
            evidence = [f"errored at the {failure.boundary} boundary: {failure.message}"]
            return CaseResult(case.id, case.status, case.human_passed, False, evidence)
        return CaseResult(case.id, case.status, case.human_passed, graded.passed, graded.evidence)
    env = ChatEnv(world, max_steps=10_000)
    record = run_episode(env, ReplayAgent({task.id: list(case.messages)}), task)
    verdict = record.graded
    if verdict is not None:
        evidence = verdict.evidence
    elif record.failure is not None:
        evidence = [f"errored at the {record.failure.boundary} boundary: {record.failure.message}"]
    else:
        evidence = []
    return CaseResult(case.id, case.status, case.human_passed, record.passed, evidence)


def check_cases(
    paths: Sequence[str | Path],
    registry: Registry | None = None,
    *,
    world: str | None = None,
    verifier: Grader | None = None,
) -> dict[str, Any]:
    """Replay every case (only those of world ``world``, when given); the summary ``audit-verifiers`` reports.

    ``regressed`` must be empty. Each case's world is looked up in ``registry``
    (by default the installed worlds); ``verifier`` grades the replays instead
    of the current verifier (see the module docstring).
    """
    cases = [c for c in load_cases(*paths) if world is None or c.world == world]
    results = [run_case(c, registry, verifier=verifier) for c in cases]
    return {
        "cases": len(results),
        "agree": sum(r.agrees for r in results),
        "open": [r.id for r in results if r.status == "open" and not r.agrees],
        "now_agree": [r.id for r in results if r.status == "open" and r.agrees],
        "regressed": [r.id for r in results if r.regressed],
        "results": [
            {
                "id": r.id,
                "status": r.status,
                "human": r.human_passed,
                "verifier": r.verifier_passed,
                "agrees": r.agrees,
                "evidence": r.evidence,
            }
            for r in results
        ],
    }
