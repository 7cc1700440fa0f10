"""Episodes on the real twin: any agent on the real system, graded by the mirror's verifier contract.

A twin episode is an ordinary :class:`~mirrorworld.episodes.Episode` whose
tool calls run on the real twin (:class:`~mirrorworld.twin.backend.TwinSession`,
the sales world's Tryton) instead of the mirror. The runner plays it through
:class:`TwinChatEnv` exactly as it plays a mirror episode through
:class:`~mirrorworld.envs.chat.ChatEnv`: the same system and task messages,
the same tools, every tool result the twin's, encoded the same way. The step
budget, the end, calls after the end, injected faults and failure attribution
are the episode layer's own code, unchanged.

**The record.** The episode's session is a :class:`TwinRecord`: a mirror
session of the task that is never written (its database stays the task's
initial state, which the twin also starts from), whose ``call`` runs the call
on the twin and records it as the mirror records a call: an
:class:`~mirrorworld.core.session.Event` with the tool, the arguments as the
tool's declaration validated them (the one argument interface both backends
share), and the twin's result or refusal. The record thus holds what the
agent did and what the real system showed it, and nothing else.

**Grading.** The verdict is the stock verifier's
(:meth:`~mirrorworld.verify.verifier.Verifier.grade`); each gate reads:

* **state** and **collateral** — the twin's end state against the gold's,
  both read from the twin. :func:`read_entity` reads each record through the
  twin's own read tools (``get_party``, ``get_opportunity``, ``get_sale``,
  ``get_invoice``, ``get_product``: the adapter's implementations of the tools
  the agent has), which return every column of the mirror's tables, into rows
  of those tables. The episode's diff is its end state against the twin's
  pristine state (read once per :class:`Twin`); the gold's is the task's gold
  solution **replayed on a fresh twin session** (:meth:`Twin.gold`) and read
  the same way. :func:`mirrorworld.verify.diff.compare` then compares the two
  under the world's tolerances, so the mirror's contract applies as it is:
  row ids and sequence-drawn ids are never compared and inserted rows are
  matched by content (the twin's own ids only have to agree between two twin
  sessions, which start from the same database); free text passes the text
  rule and, where the gold writes one, the echo rule, read from the texts the
  twin stored; extra rows of the optional tables (an approval asked for and
  not used) are harmless on an entity of the task's scope; a change outside
  the scope is collateral, naming its owner. The task's checks and the outcome
  view (evidence when the state gate fails) read the same end state, written
  into an in-memory database of the mirror's tables.
  *What is read*: every record the twin's canonical state
  (``TwinSession.canonical_state``, a scan of the whole business state) shows
  changed, added or removed, and every record a successful write call named
  by id (so that a change only to a text is read too). What no read tool
  shows is read from Tryton's records directly
  (:func:`mirrorworld.twin.sales.read_back`): a shipment's moves and a
  customer return shipment's with the sale lines they ship or take back,
  and what an invoice's payments received beyond what they applied; a
  cancelled sale's frozen amounts are the amounts it shows.
  The counters (the mirror's ``sequences`` of document numbers and
  ``counters`` of line ids) are not on the twin's surface; what they hand out
  is: a counter's end value is its start value (the mirror's data, which the
  twin was built from) plus the values of its kind the end state holds that
  the pristine state did not (:data:`SEQUENCES`; a number once drawn stays on
  its record), so an extra record numbered is graded as on the mirror (a line
  added and removed again draws no value here; line ids are never compared).
  *What is not read*: addresses and price lists (no tool writes one) and a party's role (not
  on the twin's surface and never changed by a tool: taken from the mirror's
  data).
* **policy** — the rules the record's calls broke plus the world's guards over
  the record (another customer's data in a customer text). The sales world's
  rules refuse a call rather than record a violation, on both backends, so
  what this gate finds is the guards', run by the same code on the same texts.
* **communication** — the claim checker over the record's customer texts (the
  final message): claims of actions are backed by the record's successful
  calls, amounts and record numbers are known from what the twin returned.
  Same code, reading what the agent was shown on the real system.
* **reply** — whether the record holds a final message.

**Process reward.** Its marks are the records the mirror's tools put on
screen and the rows they wrote; a twin call does neither, so the potential
stays 0 and a twin episode pays its score at the end, which is what a shaped
mirror episode's return equals with γ = 1.

**Failures.** Tryton missing, a twin database that cannot be built or
loaded, an exception out of Tryton during a call or while the end state is
read, and a gold solution the twin refuses raise
:class:`~mirrorworld.errors.TwinError` (the ``infrastructure`` boundary): the
runner records the episode as errored, never as a score of 0.

Tryton is process-wide: a :class:`Twin` plays one episode at a time, in one
thread, and replays a task's gold (once per task, cached) before the agent's
session opens. A world graded by a fitted verifier version
(``World.grader``) is refused: such a version grades mirror sessions only.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mirrorworld.core.codec import jsonable, parse_args
from mirrorworld.core.session import Event, RowChange, Session, ToolResult
from mirrorworld.core.task import Task
from mirrorworld.core.tools import show_input
from mirrorworld.core.world import GoldOutcome, World
from mirrorworld.envs.chat import ChatEnv
from mirrorworld.episodes import Episode, EpisodeOptions
from mirrorworld.errors import MirrorworldError, SessionClosedError, ToolError, TwinError
from mirrorworld.verify.verdict import Verdict
from mirrorworld.verify.verifier import EndState, Verifier

if TYPE_CHECKING:
    from mirrorworld.twin.backend import TwinBackend, TwinSession

__all__ = ["Twin", "TwinChatEnv", "TwinEpisode", "TwinRecord", "read_entity"]

Row = dict[str, Any]
Ref = tuple[str, int]
"""A record of the business state: ``("sale", 12)``."""
Rows = dict[str, dict[int, Row]]
"""Table -> primary key -> row, in the mirror's schema."""

READERS: dict[str, tuple[str, str]] = {
    "party": ("get_party", "party_id"),
    "opportunity": ("get_opportunity", "opportunity_id"),
    "sale": ("get_sale", "sale_id"),
    "product": ("get_product", "product_id"),
}
"""Record kind -> the twin's read tool that shows it, and the tool's id argument."""

_NAMED: dict[str, str] = {"party_id": "party", "opportunity_id": "opportunity", "sale_id": "sale"}
"""Id arguments of write calls that name the record they change."""
_CHILD_OF_SALE = {"invoice_id": "invoices", "shipment_id": "shipments"}
"""Id arguments that name a sale's child record (the sale is read)."""

SEQUENCES: dict[tuple[str, str], tuple[str, str]] = {
    ("sequences", "sale"): ("sales", "number"),
    ("sequences", "opportunity"): ("opportunities", "number"),
    ("sequences", "invoice"): ("invoices", "number"),
    ("counters", "sale_line"): ("sale_lines", "id"),
}
"""The mirror's counters (``sequences`` of document numbers, ``counters`` of record ids never reused) -> the
table and column holding the values each hands out."""

GOLD_CACHE = 4096


def _twin_failed(what: str, err: BaseException) -> TwinError:
    return TwinError(f"{what}: {type(err).__name__}: {err}"[:2000])


def _reader(session: TwinSession) -> Callable[..., Any]:
    """A read of the twin through its own read tools, inside ``session``'s transaction."""
    from mirrorworld.twin import tryton
    from mirrorworld.twin.sales import TOOLS, read_back

    reads = {**TOOLS, "read_back": read_back}

    def read(tool: str, **kwargs: Any) -> Any:
        with tryton.quiet():
            try:
                return reads[tool](session.pool, **kwargs)
            except Exception as err:
                raise _twin_failed(f"reading the twin's state ({tool} {kwargs})", err) from err

    return read


def _pick(table: str, src: Mapping[str, Any], columns: Iterable[str], **given: Any) -> Row:
    """The row of ``table`` a read tool's record shows (``given``: columns the record does not carry)."""
    row: Row = {}
    for col in columns:
        if col in given:
            row[col] = given[col]
        elif col in src:
            row[col] = src[col]
        else:
            raise TwinError(f"the twin's read tools no longer show {table}.{col}")
    return row


def read_entity(
    read: Callable[..., Any], columns: Mapping[str, tuple[str, ...]], ref: Ref, roles: Mapping[int, Any]
) -> Rows:
    """Every row of one record (its own and its children's) as the twin's read tools show it.

    ``columns`` are the mirror's tables' columns; ``roles`` the parties' roles
    (not on the twin's surface: see the module docstring).
    """
    kind, ident = ref
    tool, arg = READERS[kind]
    data = read(tool, **{arg: ident})
    out: Rows = {}

    def put(table: str, src: Mapping[str, Any], **given: Any) -> None:
        row = _pick(table, src, columns[table], **given)
        out.setdefault(table, {})[int(row["id"])] = row

    if kind == "party":
        put("parties", data["party"], role=roles.get(ident))
        out.setdefault("contacts", {})
        for c in data["contacts"]:
            put("contacts", c, party_id=ident)
    elif kind == "opportunity":
        put("opportunities", data["opportunity"])
    elif kind == "sale":
        sale = data["sale"]
        frozen = None
        if sale["state"] == "cancelled":  # a cancelled sale keeps the amounts it had
            frozen = " ".join(str(sale[k]) for k in ("untaxed_amount", "tax_amount", "total_amount"))
        put("sales", sale, amounts_cache=frozen)
        for table in (
            "sale_lines",
            "approvals",
            "shipments",
            "shipment_moves",
            "return_shipments",
            "return_moves",
            "invoices",
        ):
            out.setdefault(table, {})
        extra = read("read_back", sale_id=ident)
        for line in data["lines"]:
            put("sale_lines", line, sale_id=ident)
        for approval in data["approvals"]:
            put("approvals", approval, sale_id=ident)
        for shipment in data["shipments"]:
            put("shipments", shipment, sale_id=ident)
        for move in extra["moves"]:
            put("shipment_moves", move)
        for shipment in data["returns"]:
            put("return_shipments", shipment, sale_id=ident)
        for move in extra["return_moves"]:
            put("return_moves", move)
        for invoice in [*data["invoices"], *data["credit_notes"]]:
            iid = int(invoice["id"])
            overpaid = extra["overpaid"].get(iid, "0.00")
            put("invoices", read("get_invoice", invoice_id=iid)["invoice"], sale_id=ident, overpaid=overpaid)
    else:
        put("products", data["product"])
    return out


def _ref(key: str) -> Ref | None:
    kind, _, ident = key.partition(":")
    return (kind, int(ident)) if kind in READERS and ident.isdigit() else None


@dataclass
class _Pristine:
    """The twin's state before any episode: its canonical form and every record's rows."""

    canonical: dict[str, Any]
    records: dict[Ref, Rows]
    sale_of: dict[tuple[str, int], int]
    """(``invoices``/``shipments``, id) -> the sale it belongs to."""


class Twin:
    """The real twin prepared for episodes (see the module docstring).

    Give it an open ``backend`` (a process holds one; tests share theirs), or
    let it open one on first use from ``database`` (default: the cached twin
    database of ``world``, built first if needed, with ``log`` told about the
    build). A backend it opened is closed by :meth:`close`. If opening fails,
    every later use raises the same :class:`~mirrorworld.errors.TwinError`.
    """

    def __init__(
        self,
        world: World,
        backend: TwinBackend | None = None,
        *,
        database: Path | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.world = world
        self._backend = backend
        self._owned = backend is None
        self._database_path = database
        self._log = log or (lambda _m: None)
        self._failure: str | None = None
        self._pristine: _Pristine | None = None
        self._gold: OrderedDict[str, GoldOutcome] = OrderedDict()
        image = world.image
        self._columns: dict[str, tuple[str, ...]] = {t: tuple(image.columns[t]) for t in image.tables}
        self._keys: dict[str, str | None] = {t: _rowid(image.query(f"PRAGMA table_info({t})")) for t in image.tables}
        self._roles: dict[int, Any] = {int(i): r for i, r in image.query("SELECT id, role FROM parties")}
        self._counters: dict[tuple[str, int], Row] = {
            (table, int(rowid)): {"name": name, "next": nxt}
            for table in ("sequences", "counters")
            if table in image.tables
            for rowid, name, nxt in image.query(f"SELECT rowid, name, next FROM {table}")
        }
        unknown = sorted(
            {f"{t}.{r['name']}" for (t, _), r in self._counters.items()} - {f"{t}.{n}" for t, n in SEQUENCES}
        )
        if unknown:
            raise TwinError(f"twin episodes do not know which values the counters {', '.join(unknown)} hand out")

    # -- the backend --------------------------------------------------------

    @property
    def backend(self) -> TwinBackend:
        """The twin backend (opened now if it was not given)."""
        if self._failure is not None:
            raise TwinError(self._failure)
        if self._backend is None:
            try:
                from mirrorworld.twin import tryton
                from mirrorworld.twin.backend import TwinBackend

                if not tryton.available():
                    raise TwinError("Tryton is not installed: pip install 'mirrorworld[twin]'")
                database = self._database_path
                if database is None:
                    from mirrorworld.twin.db import ensure

                    database = ensure(self.world, log=self._log)
                self._backend = TwinBackend(self.world, database)
            except Exception as err:
                self._failure = f"the twin of {self.world.name} could not be opened: {err}"[:2000]
                raise TwinError(self._failure) from err
        return self._backend

    def _session(self) -> TwinSession:
        backend = self.backend
        try:
            return backend.session()
        except Exception as err:
            raise _twin_failed("opening a twin session", err) from err

    def versions(self) -> dict[str, str]:
        """The versions of the twin's packages (Tryton's)."""
        from mirrorworld.twin import tryton

        return tryton.versions()

    def close(self) -> None:
        """Close the backend this twin opened (one that was given stays open)."""
        if self._owned and self._backend is not None:
            self._backend.close()
            self._backend = None

    def __enter__(self) -> Twin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def broken(self, why: str) -> None:
        """Mark the twin unusable (its transaction could not be rolled back): later episodes are errored."""
        self._failure = why[:2000]

    # -- episodes -----------------------------------------------------------

    def env(self, world: World | None = None, **options: Any) -> TwinChatEnv:
        """The chat encoding of twin episodes (what ``play_episodes(make_env=twin.env)`` calls)."""
        if world is not None and world is not self.world and world.content_hash != self.world.content_hash:
            raise MirrorworldError(f"this twin grades {self.world.id}, not {world.id}")
        return TwinChatEnv(self, **options)

    def open(self) -> TwinSession:
        """A twin session in the pristine state, for an agent's episode."""
        self.pristine()
        return self._session()

    # -- state --------------------------------------------------------------

    def pristine(self) -> _Pristine:
        """The twin's pristine state (read once, in a fresh session)."""
        if self._pristine is None:
            with self._session() as ts:
                canonical = _canonical(ts)
                read = _reader(ts)
                records = {}
                for key in canonical:
                    ref = _ref(key)
                    if ref is not None:
                        records[ref] = read_entity(read, self._columns, ref, self._roles)
            sale_of = {
                (table, pk): ref[1]
                for ref, rows in records.items()
                if ref[0] == "sale"
                for table in _CHILD_OF_SALE.values()
                for pk in rows.get(table, {})
            }
            self._pristine = _Pristine(canonical, records, sale_of)
        return self._pristine

    def _read_end(self, ts: TwinSession, calls: Iterable[tuple[str, Any]]) -> dict[Ref, Rows]:
        """The rows of every record that may differ from the pristine state (see the module docstring)."""
        pristine = self.pristine()
        canonical = _canonical(ts)
        refs: set[Ref] = set()
        for key in set(canonical) | set(pristine.canonical):
            if canonical.get(key) != pristine.canonical.get(key):
                ref = _ref(key)
                if ref is not None:
                    refs.add(ref)
        for tool, args in calls:
            spec = self.world.tools_by_name.get(tool)
            if spec is None or spec.kind != "write" or not isinstance(args, Mapping):
                continue
            for name, value in args.items():
                if not isinstance(value, int) or isinstance(value, bool):
                    continue
                if name in _NAMED:
                    refs.add((_NAMED[name], value))
                elif name in _CHILD_OF_SALE and (_CHILD_OF_SALE[name], value) in pristine.sale_of:
                    refs.add(("sale", pristine.sale_of[(_CHILD_OF_SALE[name], value)]))
        read = _reader(ts)
        out: dict[Ref, Rows] = {}
        for ref in sorted(refs):
            exists = f"{ref[0]}:{ref[1]}" in canonical
            out[ref] = read_entity(read, self._columns, ref, self._roles) if exists else {}
        return out

    def _sequences(self, end: Mapping[Ref, Rows]) -> dict[tuple[str, int], Row]:
        """The counters at ``end`` (see the module docstring): start value plus the values drawn."""
        pristine = self.pristine().records
        records = {**pristine, **end}
        out = {}
        for key, counter in self._counters.items():
            table, column = SEQUENCES[(key[0], str(counter["name"]))]

            def numbers(where: Mapping[Ref, Rows], table: str = table, column: str = column) -> set[Any]:
                return {r[column] for rows in where.values() for r in rows.get(table, {}).values() if r[column]}

            drawn = len(numbers(records) - numbers(pristine))
            out[key] = {**counter, "next": int(counter["next"]) + drawn}
        return out

    def _changes(self, end: Mapping[Ref, Rows]) -> list[RowChange]:
        """The rows that differ between the pristine state and ``end`` (the records read at the end)."""
        pristine = self.pristine().records
        out: list[RowChange] = []
        for key, counter in self._sequences(end).items():
            if counter != self._counters[key]:
                out.append(RowChange(key[0], key[1], self._counters[key], counter))
        for ref, after in end.items():
            before = pristine.get(ref, {})
            for table in set(before) | set(after):
                rows_before, rows_after = before.get(table, {}), after.get(table, {})
                for pk in set(rows_before) | set(rows_after):
                    b, a = rows_before.get(pk), rows_after.get(pk)
                    if b != a:
                        out.append(RowChange(table, pk, b, a))
        return sorted(out, key=lambda c: (c.table, c.pk))

    def _database(self, end: Mapping[Ref, Rows]) -> sqlite3.Connection:
        """The state (pristine, with ``end``'s records) as an in-memory database of the mirror's tables.

        Columns carry no declared type or constraint: the twin's values are
        stored as the twin gave them, whatever they are.
        """
        db = sqlite3.connect(":memory:")
        for table, cols in self._columns.items():
            key = self._keys[table]
            decl = ", ".join(f'"{c}" INTEGER PRIMARY KEY' if c == key else f'"{c}"' for c in cols)
            db.execute(f'CREATE TABLE "{table}" ({decl})')
        records: dict[Any, Rows] = {
            **self.pristine().records,
            **end,
        }
        counters: Rows = {}
        for (table, rowid), counter in self._sequences(end).items():
            counters.setdefault(table, {})[rowid] = counter
        records[("counters", 0)] = counters
        for rows in records.values():
            for table, by_pk in rows.items():
                cols = self._columns[table]
                marks = ", ".join("?" for _ in cols)
                db.executemany(
                    f'INSERT INTO "{table}" VALUES ({marks})', [tuple(r[c] for c in cols) for r in by_pk.values()]
                )
        return db

    def gold(self, task: Task) -> GoldOutcome:
        """The task's gold solution replayed on a fresh twin session: its diff and outcome view (cached)."""
        key = task.digest()
        hit = self._gold.get(key)
        if hit is not None:
            return hit
        self.pristine()  # read first: one twin session at a time
        with self._session() as ts:
            for call in task.gold:
                try:
                    result = ts.call(call.tool, call.args)
                except Exception as err:
                    raise _twin_failed(f"{task.id}: the twin crashed on the gold solution's {call.tool}", err) from err
                if not result.ok:
                    raise TwinError(f"{task.id}: the twin refuses the gold solution's {call.tool}: {result.error}")
            end = self._read_end(ts, [(c.tool, c.args) for c in task.gold])
            digest = hashlib.sha256(json.dumps(_canonical(ts), sort_keys=True, default=str).encode()).hexdigest()
        changes = tuple(self._changes(end))
        db = self._database(end)
        try:
            view = self.world.outcome_view(db, task.targets)
        finally:
            db.close()
        outcome = GoldOutcome(view, digest, tuple((c.table, c.pk) for c in changes), changes)
        self._gold[key] = outcome
        if len(self._gold) > GOLD_CACHE:
            self._gold.popitem(last=False)
        return outcome

    def end_state(self, record: TwinRecord, gold: GoldOutcome) -> EndState:
        """What the state gates of ``record``'s episode read: the twin's end state against ``gold``."""
        calls = [(e.tool, e.args) for e in record.events if e.ok and e.kind == "write"]
        end = self._read_end(record.twin, calls)
        return EndState(self._changes(end), gold, self._database(end))


def _canonical(ts: TwinSession) -> dict[str, Any]:
    try:
        return ts.canonical_state()
    except Exception as err:
        raise _twin_failed("reading the twin's canonical state", err) from err


def _rowid(info: Iterable[tuple[Any, ...]]) -> str | None:
    """The column that is a table's rowid (a lone ``INTEGER PRIMARY KEY``), if any."""
    pks = [r for r in info if r[5]]
    return str(pks[0][1]) if len(pks) == 1 and str(pks[0][2]).upper() == "INTEGER" else None


class TwinRecord(Session):
    """A twin episode's session: calls run on the twin, recorded as the mirror records them.

    Its own database is the task's initial state and is never written: the
    twin holds the episode's state (:meth:`Twin.end_state` reads it). So do not
    grade it with ``Verifier()(record)``, which would read the untouched mirror
    state; :class:`TwinEpisode` grades it.
    """

    def __init__(self, twin: Twin, task: Task, session: TwinSession) -> None:
        super().__init__(twin.world, twin.world.image, task)
        self.owner = twin
        self.twin = session

    def call(self, tool: str, args: Mapping[str, Any] | str | None = None, *, role: str | None = None) -> ToolResult:
        """Run one call on the twin and record it (see the module docstring). Never raises for agent input;
        raises :class:`~mirrorworld.errors.TwinError` when the twin itself fails."""
        if self.closed:
            raise SessionClosedError("session is closed")
        self.role = role
        self.steps += 1
        name = tool if isinstance(tool, str) else show_input(tool)
        over = self.done
        spec = self.world.tools_by_name.get(name) if isinstance(tool, str) and not over else None
        kwargs: dict[str, Any] | None = None
        if spec is not None:
            try:
                kwargs = spec.validate(parse_args(args))
            except ToolError:
                kwargs = None
        try:
            result = self.twin.call(tool, args)
        except Exception as err:
            raise _twin_failed(f"the twin failed on {name[:60]!r}", err) from err
        self.done, self.final_message = self.twin.done, self.twin.final_message
        self.events.append(
            Event(
                self.steps,
                spec.name if spec is not None else (name if over else name[:200]),
                spec.kind if spec is not None else None,
                jsonable(kwargs) if kwargs is not None else None,
                result.ok,
                None if result.ok else result.error,
                role=role,
                data=result.data if result.ok else None,
            )
        )
        return result

    def fork(self) -> Session:
        raise MirrorworldError("a twin episode cannot be forked (the twin holds one session at a time)")

    def close(self) -> None:
        """Close the record and roll the twin's session back (a twin that cannot roll back is marked broken)."""
        if self.closed:
            return
        super().close()
        try:
            self.twin.close()
        except Exception as err:
            self.owner.broken(f"the twin's session could not be rolled back: {type(err).__name__}: {err}")


class TwinEpisode(Episode):
    """An episode on the twin (see the module docstring): the gold is replayed first, then the agent's session opens."""

    def __init__(self, twin: Twin, task: Task, options: EpisodeOptions | None = None) -> None:
        world = twin.world
        options = options or EpisodeOptions()
        if world.grader(options.judge) is not None:
            raise MirrorworldError(
                f"{world.id} is graded by a fitted verifier version, which grades mirror sessions only"
            )
        self.twin = twin
        self.gold = twin.gold(task)
        session = twin.open()
        try:
            record = TwinRecord(twin, task, session)
        except BaseException:
            session.close()
            raise
        try:
            super().__init__(world, task, options, _session=record)
        except BaseException:
            record.close()
            raise

    def _grade(self) -> Verdict:
        self._ended = True
        record = self.session
        assert isinstance(record, TwinRecord)
        try:
            end = self.twin.end_state(record, self.gold)
            try:
                verdict = Verifier(self.options.judge).grade(record, end)
            finally:
                end.db.close()
        except Exception as err:
            raise self._failed(err, "verifier", f"grading {self.task.id} on the twin failed") from err
        self.verdict = verdict
        return verdict

    def fork(self) -> Episode:
        raise MirrorworldError("a twin episode cannot be forked (the twin holds one session at a time)")


class TwinChatEnv(ChatEnv):
    """:class:`~mirrorworld.envs.chat.ChatEnv` over the twin: the same messages and tools, twin episodes."""

    def __init__(self, twin: Twin, **options: Any) -> None:
        super().__init__(twin.world, **options)
        self.twin = twin

    def _new_episode(self, task: Task) -> Episode:
        return TwinEpisode(self.twin, task, self.options)
