"""Worlds: versioned mirrors of one enterprise system.

A :class:`World` bundles what a mirror is made of — a SQL schema, a seeded
data generator, tools, business rules, a written policy and task families —
and builds from them an :class:`~mirrorworld.core.store.Image` per
``(data_seed, scale)``. Nothing in a world may read the wall clock, draw a
uuid4 or use unseeded randomness: the generator gets a seeded
``random.Random``, time comes from the simulated clock (``sim_clock``), ids
from SQLite's rowid sequences, which are deterministic given the state.

A subclass provides the parts; the base class provides the machinery that
every world shares (images, sessions, task lookup, gold replay, hashing).
"""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

from mirrorworld.core.claims import ClaimRule, CustomerText, ForbiddenPromise, PersonalData, final_text
from mirrorworld.core.session import Session
from mirrorworld.core.state import RowChange
from mirrorworld.core.store import PAGE_SIZE, SMALL_PAGE_SIZE, Image
from mirrorworld.core.task import (
    MAX_SEED,
    EntityRef,
    Split,
    Task,
    TaskFamily,
    TaskRef,
    ToolCall,
    check_seed,
    split_seed,
)
from mirrorworld.core.tolerance import Tolerance
from mirrorworld.core.tools import ToolSpec
from mirrorworld.errors import RegistryError, TaskError, WorldError

__all__ = ["SCORE_PARTS", "AuditHooks", "GoldOutcome", "Rule", "World", "content_hash_of"]

_PACKAGE_DIR = Path(__file__).resolve().parent.parent
_GRADING_DIRS = tuple(_PACKAGE_DIR / name for name in ("core", "verify", "episodes", "sim", "agents/judge.py"))
"""The package's folders (and the model judge's prompt) that decide how every world is stepped, simulated and
graded: all feed every content hash."""
_HASHED_SUFFIXES = (".py", ".sql", ".md", ".json")

SCORE_PARTS = (
    "schema",
    "data",
    "tools",
    "tool_schemas",
    "rules",
    "policy",
    "tasks",
    "verifier",
    "simulator",
    "world",
    "core",
    "episodes",
    "build",
)
"""The score-relevant parts of a world, each hashed on its own (:meth:`World.score_parts`).

``schema`` (``*.sql``), ``data`` (the generator, ``data.py``), ``tools``
(``tools.py``), ``tool_schemas`` (the JSON schemas the agent is shown),
``rules`` (``rules.py``: thresholds, windows, floors), ``policy``
(``policy.md``), ``tasks`` (the task families, ``tasks.py``), ``verifier``
(mirrorworld's ``verify`` package, the model judge's prompt and a world's
``claims.py`` and ``guards.py``: tolerances, text claims, guards), ``simulator`` (``sim`` and a
world's simulated parties and policies), ``world`` (the rest of a world's
folder: its declaration, audit hooks, macros), ``core`` and ``episodes``
(how every world is stepped) and ``build`` (the data seed and scale).
"""


def content_hash_of(env_id: str, parts: Mapping[str, str]) -> str:
    """The content hash of a world with versioned id ``env_id`` and these score parts (in :data:`SCORE_PARTS` order)."""
    h = hashlib.sha256(env_id.encode())
    for part in SCORE_PARTS:
        h.update(f"|{part}={parts.get(part, '')}".encode())
    return h.hexdigest()[:16]


_PART_OF_FILE = {
    "data.py": "data",
    "tools.py": "tools",
    "rules.py": "rules",
    "policy.md": "policy",
    "tasks.py": "tasks",
    "claims.py": "verifier",
    "guards.py": "verifier",
    "simulated.py": "simulator",
    "policies.py": "simulator",
}
_PART_OF_DIR = {
    "core": "core",
    "verify": "verifier",
    "episodes": "episodes",
    "sim": "simulator",
    "judge.py": "verifier",
}


@dataclass(frozen=True)
class Rule:
    """A business rule. A broken ``hard`` rule fails the episode."""

    id: str
    description: str
    hard: bool = True


class AuditHooks:
    """What a world tells the verifier audit beyond its tool declarations.

    Every method has a safe default; a world overrides what it can. The audit
    itself never names a world, a tool or a family: it asks these hooks.
    """

    def undo(self, session: Session, call: ToolCall) -> list[ToolCall] | None:
        """Calls that undo ``call``, planned on the state *before* it runs (None: no undo)."""
        return None

    def alternative_solutions(self, task: Task) -> list[tuple[str, list[ToolCall]]]:
        """Other valid paths to the gold end state, by name; each must pass."""
        return []

    def policy_mutants(self, task: Task) -> list[tuple[str, list[ToolCall]]]:
        """Policy-violating variants of the gold that reach the same end state; each must fail."""
        return []

    def escalate_only(self, task: Task) -> list[ToolCall]:
        """What a transfer/escalate-only agent does on this task (it must score 0)."""
        return []


@dataclass
class Prepared:
    """What a world computes once per task and reuses for every episode of it."""

    task: Task
    setup: list[tuple[str, tuple[Any, ...]]]
    initial_rows: dict[tuple[str, int], tuple[Any, ...] | None] | None = None
    initial_potential: float | None = None
    initial_marks: tuple[bool, ...] | None = None
    """``World.progress_marks`` in the initial state, for the process reward."""
    clock: str | None = None


def _setup_sql(insert: bool, table: str, names: tuple[str, ...], nulls: tuple[str, ...]) -> str:
    """The statement of a setup write; the columns in ``nulls`` are written as ``NULL`` literals.

    Python's ``sqlite3`` binds a ``None`` parameter through its adaptation
    protocol, which fails and formats an error for it before binding NULL:
    that costs as much as binding the rest of a row, so a setup row's many
    empty columns are spelled in the statement instead (and a task writes a
    few such shapes, each compiled once).
    """
    marks = ["NULL" if n in nulls else "?" for n in names]
    if insert:
        return f"INSERT INTO {table} ({','.join(names)}) VALUES ({','.join(marks)})"
    return f"UPDATE {table} SET {','.join(f'{n}={m}' for n, m in zip(names, marks, strict=True))} WHERE rowid=?"


SETUP_SHAPES = 1024
"""Most distinct setup-write shapes (operation, table, columns) a world keeps compiled."""

SMALL_PAGES_UP_TO = 10.0
"""Worlds up to this scale build their image with small pages (see :mod:`mirrorworld.core.store`)."""


@dataclass(frozen=True)
class GoldOutcome:
    """The reference end state of a task: its gold solution replayed.

    ``changes`` is the gold's whole diff against the task's initial state
    (every row it inserted, updated or deleted, before and after): what the
    verifier's state gate compares an episode's diff with.
    """

    view: dict[str, Any]
    state_hash: str
    changed: tuple[tuple[str, int], ...]
    changes: tuple[RowChange, ...] = ()


class World(ABC):
    """Base class of every mirror world. See the module docstring."""

    name: ClassVar[str]
    """Short lowercase name (``helpdesk``)."""
    title: ClassVar[str]
    """Display name used in the environment id (``Helpdesk``)."""
    version: ClassVar[int]
    epoch: ClassVar[str]
    """The simulated time at which the world's data is generated."""
    source_dir: ClassVar[Path]
    """The folder holding the world's files; all of them feed the content hash.

    A world that extends another (``class TeamWorld(HelpdeskWorld)``) declares its
    own folder; the folders of every world class it inherits from feed its hash
    too, so nothing is copied between worlds to keep hashes honest.
    """
    extra_sources: ClassVar[tuple[Path, ...]] = ()
    """Other folders or files a world's behaviour depends on (shared modules outside its folder)."""

    def grader(self, judge: Any = None) -> Any:
        """The verifier that grades this world's episodes (``judge``: the optional model judge), or None.

        None (the default) means the stock :class:`~mirrorworld.verify.verifier.Verifier`,
        which the episode layer builds. A world graded by another version of it
        (``mirrorworld.review.fitting.override_world``) returns that verifier, a
        callable from a session to a verdict; the parameters it applies are part
        of the world's score parts, so its content hash is its own.
        """
        return None

    def __init__(self, *, scale: float = 1.0, data_seed: int = 0) -> None:
        if not (0 < scale <= 100):
            raise WorldError("scale must be in (0, 100]")
        self.scale = scale
        self.data_seed = data_seed
        self._tasks: OrderedDict[tuple[str, int], Task] = OrderedDict()
        self._gold: OrderedDict[str, GoldOutcome] = OrderedDict()
        self._prepared: OrderedDict[int, Prepared] = OrderedDict()
        self._setup_shapes: dict[tuple[str, str, tuple[str, ...], tuple[str, ...]], tuple[str, bool]] = {}
        self.tools: tuple[ToolSpec, ...] = tuple(self.declare_tools())
        self.tools_by_name: dict[str, ToolSpec] = {t.name: t for t in self.tools}
        if len(self.tools_by_name) != len(self.tools):
            raise WorldError(f"{self.name}: duplicate tool names")
        self.tool_names: tuple[str, ...] = tuple(t.name for t in self.tools)
        self.rules: dict[str, Rule] = {r.id: r for r in self.declare_rules()}
        self.parameters: Mapping[str, Any] = MappingProxyType(dict(self.declare_parameters()))
        self.families: tuple[TaskFamily, ...] = tuple(f.bind(self.parameters) for f in self.declare_families())
        self.families_by_name = {f.name: f for f in self.families}

    # -- what a world provides ----------------------------------------------

    @abstractmethod
    def declare_tools(self) -> Sequence[ToolSpec]:
        """The world's tools, in action-index order."""

    @abstractmethod
    def declare_rules(self) -> Sequence[Rule]:
        """The business rules tools and guards may report as violated."""

    @abstractmethod
    def declare_families(self) -> Sequence[TaskFamily]:
        """The task families of this world."""

    def declare_parameters(self) -> Mapping[str, Any]:
        """The figures of the world's business rules, by name (an approval threshold, priority floors).

        Tools read them as ``ctx.param(name)`` and task families as
        ``self.param(name)``, so a world derived with other figures
        (:mod:`mirrorworld.drift`) is enforced, generated and graded with them.
        Values are JSON data; they feed the ``rules`` score part. None by default.
        """
        return {}

    def declared_parts(self) -> Mapping[str, bytes]:
        """Declarations that feed score parts beyond the world's files, by part (a derived world's changes).

        Each value is hashed into the part it names (one of :data:`SCORE_PARTS`);
        a world built from files alone declares none.
        """
        return {}

    @abstractmethod
    def generate(self, conn: sqlite3.Connection, rng: random.Random, scale: float) -> None:
        """Create the schema and fill it with seeded data."""

    def page_size(self) -> int:
        """The page size of this world's image: small pages up to :data:`SMALL_PAGES_UP_TO`, SQLite's beyond.

        Small pages make a fresh session cheaper where an image has many
        resident clones; large ones make a large image build faster (see
        :mod:`mirrorworld.core.store`). A world whose data is large at scale 1
        can return :data:`~mirrorworld.core.store.PAGE_SIZE`.
        """
        return SMALL_PAGE_SIZE if self.scale <= SMALL_PAGES_UP_TO else PAGE_SIZE

    owners: ClassVar[dict[str, tuple[str, str]]] = {}
    """Table -> (entity kind, column holding the entity's id), for :meth:`owner`."""

    def owner(self, table: str, row: dict[str, Any]) -> EntityRef | None:
        """The entity a row belongs to, for collateral checks (None: bookkeeping).

        By default read from :attr:`owners`; override for anything subtler.
        """
        spec = self.owners.get(table)
        if spec is None:
            return None
        return (spec[0], int(row[spec[1]]))

    @abstractmethod
    def outcome_view(self, db: sqlite3.Connection, targets: Sequence[EntityRef]) -> dict[str, Any]:
        """The outcome-relevant state of ``targets``, canonical and comparable."""

    def guards(self, session: Session) -> list[Any]:
        """Post-hoc policy checks over a finished episode (``Violation`` list)."""
        return []

    hidden_columns: ClassVar[dict[str, tuple[str, ...]]] = {}
    """Columns no observation may ever show, by table (audited by probes)."""

    volatile_columns: ClassVar[dict[str, tuple[str, ...]]] = {}
    """Bookkeeping columns (timestamps) that say when, not what: audits and the verifier ignore them."""

    tolerances: ClassVar[Mapping[str, Mapping[str, Tolerance]]] = {}
    """Table -> column -> how the verifier compares that field (:mod:`mirrorworld.core.tolerance`).

    Every field not named here (nor in :attr:`volatile_columns`) must end as
    the gold's: changed as the gold changed it, or unchanged.
    """

    optional_rows: ClassVar[Mapping[str, str]] = {}
    """Table -> why an extra row of it, on an entity of the task's scope, is harmless."""

    def progress_marks(self, session: Session) -> tuple[bool, ...]:
        """Milestones of the session's task an agent could see in production (identity verified, approval obtained).

        They feed the process reward's potential with the task's opened target
        records (see :mod:`mirrorworld.verify.process`); each must say whether a
        step happened, never whether a graded value is right. The tuple's length
        must not change within an episode. By default there are none.
        """
        return ()

    def audit_hooks(self) -> AuditHooks:
        """World knowledge the verifier audit uses (undo, alternative paths...)."""
        return AuditHooks()

    # -- what customers read (see mirrorworld.core.claims) --------------------

    def customer_texts(self, session: Session) -> list[CustomerText]:
        """Every text a customer read in the episode, in step order (by default the final message)."""
        final = final_text(session)
        return [final] if final is not None else []

    def claim_rules(self) -> Sequence[ClaimRule]:
        """The actions a customer text can claim, with what backs each (none by default)."""
        return ()

    def forbidden_promises(self) -> Sequence[ForbiddenPromise]:
        """What the policy forbids promising a customer (nothing by default)."""
        return ()

    def menu_macros(self) -> Mapping[str, Sequence[str]]:
        """Canned texts an operator can send or file, by the free-text parameter they fill (none by default).

        Each text has ``{field}`` slots. The action menu
        (:mod:`mirrorworld.envs.menu`) offers a macro for a parameter of that
        name wherever a record the agent was shown fills its slots, as a
        helpdesk's macros are filled from the ticket on screen. A macro is an
        interface, not an answer: it names fields, never values.
        """
        return {}

    def customer_data(self, task: Task | None = None) -> Sequence[PersonalData]:
        """Customers' personal data that no text to another customer may name.

        With ``task=None``: the data in the world's pristine image (the verifier
        indexes it once per world). With a task: only what the task's setup
        adds (its new tickets, say). None by default.
        """
        return ()

    @cached_property
    def policy(self) -> str:
        """The written policy the agent reads (``policy.md`` in the world's folder)."""
        return (self.source_dir / "policy.md").read_text(encoding="utf-8")

    # -- identity -----------------------------------------------------------

    @property
    def id(self) -> str:
        return f"mirrorworld/{self.title}-v{self.version}"

    @property
    def data_name(self) -> str:
        """The name the data generator's seed is drawn under: the world's own (a derived version keeps its base's,
        so both versions hold the same records)."""
        return self.name

    @classmethod
    def sources(cls) -> tuple[Path, ...]:
        """Every folder or file that feeds the content hash, in a fixed order.

        The ``source_dir`` of this class and of every world class it extends, its
        ``extra_sources``, and the core, verifier and episode code.
        """
        out: list[Path] = []
        for klass in cls.__mro__:
            own = vars(klass)
            if "source_dir" in own:
                out.append(Path(own["source_dir"]))
            out.extend(Path(p) for p in own.get("extra_sources", ()))
        out.extend(_GRADING_DIRS)
        return tuple(dict.fromkeys(q.resolve() for q in out))

    def score_parts(self) -> dict[str, str]:
        """One hash per score-relevant part (:data:`SCORE_PARTS`), so two builds can say which part differs.

        Files are named relative to their folder, so the hashes do not depend
        on where the package is installed.
        """
        return dict(self._score_parts)

    @cached_property
    def _score_parts(self) -> dict[str, str]:
        hashes = {part: hashlib.sha256(part.encode()) for part in SCORE_PARTS}
        grading = {d.resolve() for d in _GRADING_DIRS}
        for source in self.sources():
            files = [source] if source.is_file() else sorted(source.rglob("*"))
            for path in files:
                if not path.is_file() or path.suffix not in _HASHED_SUFFIXES or "__pycache__" in path.parts:
                    continue
                rel = path.name if path == source else path.relative_to(source).as_posix()
                if source in grading:
                    part = _PART_OF_DIR[source.name]
                elif path.suffix == ".sql":
                    part = "schema"
                else:
                    part = _PART_OF_FILE.get(path.name, "world")
                h = hashes[part]
                h.update(f"{source.name}/{rel}\n".encode())
                h.update(path.read_bytes())
        schemas = [t.openai_schema() for t in self.tools]
        hashes["tool_schemas"].update(json.dumps(schemas, sort_keys=True, separators=(",", ":")).encode())
        if self.parameters:
            hashes["rules"].update(json.dumps(dict(self.parameters), sort_keys=True, default=str).encode())
        for part, blob in sorted(self.declared_parts().items()):
            if part not in hashes:
                raise WorldError(f"{self.name}: declared part {part!r} is not a score part")
            hashes[part].update(b"|declared|" + blob)
        hashes["build"].update(f"{self.data_seed}|{self.scale}".encode())
        return {part: h.hexdigest()[:16] for part, h in hashes.items()}

    @cached_property
    def content_hash(self) -> str:
        """Hash of everything that defines the world and its grading: the id and every score part.

        Covers :meth:`sources` (the world's folders: schema, generator, tools,
        rules, policy, task families; and the core, verifier, simulator and
        episode code), the tools' schemas, plus the data seed and scale, one
        part at a time (:meth:`score_parts`). Every trajectory records it.
        """
        return content_hash_of(self.id, self._score_parts)

    # -- pickling: a world travels as its class and parameters, never its database --

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.scale, self.data_seed))

    # -- images and sessions ------------------------------------------------

    @cached_property
    def image(self) -> Image:
        """The pristine database, built on first use and kept."""

        def build(conn: sqlite3.Connection) -> None:
            rng = random.Random(f"{self.data_name}/data/{self.data_seed}")
            self.generate(conn, rng, self.scale)
            conn.execute("CREATE TABLE sim_clock (id INTEGER PRIMARY KEY, now TEXT NOT NULL)")
            conn.execute("INSERT INTO sim_clock VALUES (1, ?)", (self.epoch,))

        return Image(build, untracked=("sim_clock",), page_size=self.page_size())

    def session(self, task: Task | None = None) -> Session:
        """A new isolated session, in the task's initial state."""
        if task is not None and task.world != self.name:
            raise WorldError(f"task {task.id} belongs to world {task.world}, not {self.name}")
        return Session(self, self.image, task)

    def prepared(self, task: Task) -> Prepared:
        """The per-task cache: compiled setup statements, initial rows, initial potential."""
        key = id(task)
        hit = self._prepared.get(key)
        if hit is not None and hit.task is task:
            return hit
        statements = []
        shapes = self._setup_shapes
        moves_clock = False
        for op in task.setup:
            # The tasks of a family write a few shapes of row: each is checked and compiled once.
            values = tuple(op.values.values())
            nulls: tuple[str, ...] = ()
            if None in values:
                nulls = tuple([n for n, v in op.values.items() if v is None])
                values = tuple([v for v in values if v is not None])
            form = (op.op, op.table, tuple(op.values), nulls)
            shape = shapes.get(form)
            if shape is None:
                shape = self._setup_shape(task, *form)
                if len(shapes) < SETUP_SHAPES:
                    shapes[form] = shape
            sql, untracked = shape
            moves_clock = moves_clock or untracked
            statements.append((sql, values) if op.op == "insert" else (sql, (*values, op.pk)))
        prep = Prepared(task, statements)
        if not moves_clock:
            prep.clock = self._epoch_clock  # the setup leaves the clock as the image has it
        self._prepared[key] = prep
        if len(self._prepared) > 4096:
            self._prepared.popitem(last=False)
        return prep

    def _setup_shape(
        self, task: Task, op: str, table: str, names: tuple[str, ...], nulls: tuple[str, ...]
    ) -> tuple[str, bool]:
        """The statement of one shape of setup write, and whether its table is untracked (checked against the image)."""
        image = self.image
        cols = image.columns.get(table)
        if cols is None or not set(names) <= set(cols):
            raise TaskError(f"{task.id}: setup writes unknown table or columns in {table}")
        return _setup_sql(op == "insert", table, names, nulls), table in image.untracked

    @cached_property
    def _epoch_clock(self) -> str | None:
        """The simulated time in the pristine image (None without a clock row: sessions then say so)."""
        rows = self.image.query("SELECT now FROM sim_clock WHERE id=1")
        return str(rows[0][0]) if rows else None

    def apply_setup(self, conn: sqlite3.Connection, task: Task) -> None:
        """Apply a task's setup writes (parameterised; tables and columns checked)."""
        for sql, params in self.prepared(task).setup:
            conn.execute(sql, params)

    def initial_rows(self, task: Task) -> dict[tuple[str, int], tuple[Any, ...] | None]:
        """The rows a task's setup wrote, as they are in its initial state (cached)."""
        prep = self.prepared(task)
        if prep.initial_rows is None:
            with self.session(task) as s:
                prep.initial_rows = s._snapshot_touched()
        return prep.initial_rows

    # -- tasks --------------------------------------------------------------

    def family(self, name: str) -> TaskFamily:
        try:
            return self.families_by_name[name]
        except KeyError:
            known = ", ".join(self.families_by_name)
            raise RegistryError(f"world {self.name} has no task family {name!r} (known: {known})") from None

    def task(self, family: str, seed: int) -> Task:
        """The task a family generates for ``seed`` (cached); seeds are integers in ``[0, MAX_SEED]``."""
        if type(seed) is not int or not 0 <= seed <= MAX_SEED:
            seed = check_seed(seed)
        key = (family, seed)
        hit = self._tasks.get(key)
        if hit is not None:
            self._tasks.move_to_end(key)
            return hit
        task = self.family(family).task(self.name, self.image, seed)
        self._tasks[key] = task
        if len(self._tasks) > 4096:
            self._tasks.popitem(last=False)
        return task

    def task_at(self, ref: TaskRef | str) -> Task:
        """The task a :class:`~mirrorworld.core.task.TaskRef` (or its ``family/seed`` text) names."""
        ref = TaskRef.parse(ref)
        return self.task(ref.family, ref.seed)

    def task_for(self, split: Split, index: int, families: Sequence[str] | None = None) -> Task:
        """The ``index``-th task of a split, cycling through the families."""
        names = list(families) if families else [f.name for f in self.families]
        family = names[index % len(names)]
        return self.task(family, split_seed(split, index // len(names)))

    def gold(self, task: Task) -> GoldOutcome:
        """Replay the gold solution on a fresh copy of the initial state (cached)."""
        key = task.digest()
        hit = self._gold.get(key)
        if hit is not None:
            return hit
        with self.session(task) as s:
            for call in task.gold:
                result = s.call(call.tool, call.args)
                if not result.ok:
                    raise TaskError(f"{task.id}: gold call {call.tool} failed: {result.error}")
            hard = [v for e in s.events for v in e.violations if v.hard] + [v for v in self.guards(s) if v.hard]
            if hard:
                raise TaskError(f"{task.id}: gold solution breaks rule {hard[0].rule}")
            changes = tuple(s.changes())
            outcome = GoldOutcome(
                view=self.outcome_view(s.db, task.targets),
                state_hash=s.state_hash(),
                changed=tuple((c.table, c.pk) for c in changes),
                changes=changes,
            )
        self._gold[key] = outcome
        if len(self._gold) > 4096:
            self._gold.popitem(last=False)
        return outcome

    def outcome_view_for(self, task: Task) -> dict[str, Any]:
        """The outcome view of a task's targets in its initial state."""
        with self.session(task) as s:
            return self.outcome_view(s.db, task.targets)

    def tool_index(self, name: str) -> int:
        try:
            return self.tool_names.index(name)
        except ValueError:
            raise RegistryError(f"world {self.name} has no tool {name!r}") from None


_REBUILT: dict[tuple[type[World], float, int], World] = {}
_REBUILT_LOCK = threading.Lock()


def _rebuild(cls: type[World], scale: float, data_seed: int) -> World:
    """The world a pickle names, built once per process (its image is generated once)."""
    key = (cls, float(scale), int(data_seed))
    with _REBUILT_LOCK:
        world = _REBUILT.get(key)
        if world is None:
            world = _REBUILT[key] = cls(scale=scale, data_seed=data_seed)
    return world
