"""The state comparison: an episode's whole diff against the gold's, under the world's tolerances.

:func:`compare` takes the rows an episode changed (against the task's initial
state) and the gold's (:attr:`~mirrorworld.core.world.GoldOutcome.changes`)
and sorts every difference into one of two lists:

* ``missing`` — a change the gold made that the episode did not make, or made
  otherwise (the state gate);
* ``unexpected`` — a change the episode made that the gold did not, and that
  no tolerance covers (the collateral gate).

The rules, in the order they are applied:

1. Untracked tables (the simulated clock) are never compared.
2. A row that existed before the episode is matched with the gold's change by
   its primary key. For each of its fields not tolerated as ``ignore``, ``id``
   or ``order``: a field the gold changed must end as the gold's (``text``
   fields: must pass the text rule); a field only the episode changed is
   unexpected, unless a ``choice`` tolerance lists its new value and the row
   belongs to an entity of the task's scope.
3. An inserted row is matched by *content*, never by rowid: its key is the
   tuple of its fields without the rowid, the ``ignore``/``id``/``order``
   fields and the wording of ``text`` fields (only whether each is empty
   counts). A foreign key that points at a row the same diff inserted is
   replaced by that row's key, recursively, so an insert that got another id
   (an extra harmless step ran first) and the rows that refer to it still
   match. Gold inserts and episode inserts are matched per table as
   multisets of keys, episode rows taken in rowid order. A gold insert left
   unmatched is missing; an episode insert left unmatched is unexpected
   unless its table is one of the world's ``optional_rows`` and it belongs to
   an entity of the task's scope. Every ``text`` field of every inserted row
   must pass the text rule, and of a row matched with a gold insert the echo
   rule too.
4. A deletion must match a deletion of the gold, by primary key.

**The text rule** (:func:`plausible_text`): a value the gold wrote in the same
column passes; otherwise the text must have at least as many different
words of two letters or more as the tolerance asks (:data:`MIN_WORDS` unless
it says more), letters must make up at least half of
its visible characters, and no letter may repeat four times in a row. It
refuses junk and one-character placeholders; what the text asserts is graded
by the claim checker (:mod:`mirrorworld.verify.communication`).

**The echo rule** (:func:`echoes`): where the gold writes a text of its own
(a reason, a description), the episode's must be the same or share a content
word (four letters or more, by its first five) with the gold's text or with
the task's instruction, the customer's own words.

**Cost.** The gold's side is compiled once per gold outcome (its keys, its
text values) and the world's schema once per world (tolerances, foreign keys,
rowid columns); grading then costs one pass over the episode's changes.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from mirrorworld.core.state import RowChange
from mirrorworld.core.tolerance import Tolerance
from mirrorworld.errors import WorldError

if TYPE_CHECKING:
    from mirrorworld.core.task import EntityRef
    from mirrorworld.core.world import GoldOutcome, World

__all__ = ["MIN_WORDS", "Comparison", "Footprint", "Schema", "compare", "footprint", "plausible_text", "schema_of"]

MIN_WORDS = 2
"""The fewest different words (two letters or more) a free-text field may hold, unless its tolerance asks more."""

_WORD = re.compile(r"[^\W\d_]{2,}")
_STUTTER = re.compile(r"([^\W\d_])\1{3,}")
_DEPTH = 8
"""How far foreign keys between inserted rows are followed (deeper chains compare as equal)."""

Column = Literal["eq", "text", "choice", "skip"]
RowKey = tuple[str, int]


def plausible_text(text: str, words: int = MIN_WORDS) -> bool:
    """Whether ``text`` is free text of at least ``words`` different words, not junk (see the module docstring)."""
    found = _WORD.findall(text)
    if len({w.casefold() for w in found}) < words or _STUTTER.search(text):
        return False
    visible = sum(1 for ch in text if not ch.isspace())
    return 2 * sum(1 for ch in text if ch.isalpha()) >= visible


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


@dataclass(frozen=True)
class Schema:
    """A world's comparison rules, compiled from its tolerances and its image's schema."""

    columns: dict[str, tuple[tuple[str, Column], ...]]
    """Table -> every column with how it is compared (the rowid column is ``skip``)."""
    choices: dict[tuple[str, str], frozenset[Any]]
    """(table, column) -> the values a ``choice`` tolerance admits."""
    words: dict[tuple[str, str], int]
    """(table, column) -> the fewest words a ``text`` tolerance asks for."""
    loose: frozenset[tuple[str, str]]
    """(table, column) of the ``text`` tolerances that ask no echo of the gold."""
    references: dict[str, dict[str, str]]
    """Table -> column -> the table whose rowid it references (declared foreign keys)."""
    optional: frozenset[str]
    skip: frozenset[str]
    """Untracked tables."""

    def kind(self, table: str, column: str) -> Column:
        for name, kind in self.columns.get(table, ()):
            if name == column:
                return kind
        return "eq"


_SCHEMAS: weakref.WeakKeyDictionary[World, Schema] = weakref.WeakKeyDictionary()
_SCHEMAS_LOCK = threading.Lock()


def schema_of(world: World) -> Schema:
    """The compiled comparison rules of ``world`` (built on first use; a bad declaration is a ``WorldError``)."""
    hit = _SCHEMAS.get(world)
    if hit is not None:
        return hit
    with _SCHEMAS_LOCK:
        hit = _SCHEMAS.get(world)
        if hit is None:
            hit = _SCHEMAS[world] = _compile(world)
    return hit


def _declared(world: World) -> dict[str, dict[str, Tolerance]]:
    out: dict[str, dict[str, Tolerance]] = {}
    for table, cols in world.volatile_columns.items():
        for col in cols:
            out.setdefault(table, {})[col] = Tolerance.ignore("a simulated timestamp: when, not what")
    for table, tolerances in world.tolerances.items():
        out.setdefault(table, {}).update(tolerances)
    return out


def _compile(world: World) -> Schema:
    image = world.image
    declared = _declared(world)
    for table, tolerances in declared.items():
        cols = image.columns.get(table)
        if cols is None:
            raise WorldError(f"{world.name}: a tolerance names unknown table {table!r}")
        for col, declaration in tolerances.items():
            if col not in cols:
                raise WorldError(f"{world.name}: a tolerance names unknown column {table}.{col}")
            if not isinstance(declaration, Tolerance):
                raise WorldError(f"{world.name}: the tolerance of {table}.{col} is not a Tolerance")
    for table in world.optional_rows:
        if table not in image.columns:
            raise WorldError(f"{world.name}: optional rows name unknown table {table!r}")
    columns: dict[str, tuple[tuple[str, Column], ...]] = {}
    choices: dict[tuple[str, str], frozenset[Any]] = {}
    words: dict[tuple[str, str], int] = {}
    loose: set[tuple[str, str]] = set()
    references: dict[str, dict[str, str]] = {}
    rowid_cols = {t: _rowid_column(image.query(f"PRAGMA table_info({t})")) for t in image.tables}
    for table in image.tables:
        kinds: list[tuple[str, Column]] = []
        for col in image.columns[table]:
            tol = declared.get(table, {}).get(col)
            kind: Column = "eq"
            if col == rowid_cols[table] or (tol is not None and not tol.compared):
                kind = "skip"
            elif tol is not None and tol.kind == "text":
                kind = "text"
                words[(table, col)] = tol.words
                if not tol.echo:
                    loose.add((table, col))
            elif tol is not None and tol.kind == "choice":
                kind = "choice"
                choices[(table, col)] = frozenset(tol.values)
            kinds.append((col, kind))
        columns[table] = tuple(kinds)
        refs = {}
        for fk in image.query(f"PRAGMA foreign_key_list({table})"):
            target, source, to = str(fk[2]), str(fk[3]), fk[4]
            if target in rowid_cols and (to is None or to == rowid_cols[target]):
                refs[source] = target
        references[table] = refs
    return Schema(
        columns,
        choices,
        words,
        frozenset(loose),
        references,
        frozenset(world.optional_rows),
        frozenset(image.untracked),
    )


def _rowid_column(info: Sequence[tuple[Any, ...]]) -> str | None:
    """The column that is the table's rowid (a lone ``INTEGER PRIMARY KEY``), if any."""
    pks = [r for r in info if r[5]]
    if len(pks) == 1 and str(pks[0][2]).upper() == "INTEGER":
        return str(pks[0][1])
    return None


# -- canonical forms ------------------------------------------------------------------


def _value(
    schema: Schema, table: str, col: str, value: Any, inserted: Mapping[RowKey, dict[str, Any]], depth: int
) -> Any:
    """A field's value as compared: a reference to an inserted row becomes that row's key."""
    target = schema.references[table].get(col)
    if target is not None and isinstance(value, int):
        row = inserted.get((target, value))
        if row is not None:
            return ("inserted", target, _content(schema, target, row, inserted, depth + 1))
    return value


def _content(
    schema: Schema, table: str, row: dict[str, Any], inserted: Mapping[RowKey, dict[str, Any]], depth: int = 0
) -> tuple[Any, ...]:
    """The key an inserted row is matched by (see rule 3 of the module docstring)."""
    if depth > _DEPTH:
        return ("...",)
    out: list[Any] = []
    for col, kind in schema.columns[table]:
        if kind == "skip":
            continue
        value = row[col]
        if kind == "text":
            out.append(bool(value.strip()) if isinstance(value, str) else value is not None)
        else:
            out.append(_value(schema, table, col, value, inserted, depth))
    return tuple(out)


def _inserted(schema: Schema, changes: Iterable[RowChange]) -> dict[RowKey, dict[str, Any]]:
    return {(c.table, c.pk): c.after for c in changes if c.before is None and c.after is not None}


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _row_text(schema: Schema, table: str, row: Mapping[str, Any]) -> str:
    parts = [f"{col}={_shown(row[col])}" for col, kind in schema.columns[table] if kind != "skip"]
    text = ", ".join(parts)
    return text if len(text) <= 300 else text[:297] + "..."


@dataclass
class Footprint:
    """The gold's diff, compiled for comparison (cached per gold outcome)."""

    updates: dict[RowKey, dict[str, Any]]
    """Row -> field -> the value the gold left (compared fields only)."""
    deletes: frozenset[RowKey]
    inserts: dict[str, Counter[tuple[Any, ...]]]
    shown: dict[tuple[str, tuple[Any, ...]], str]
    """A readable form of each gold insert key, for evidence."""
    texts: dict[tuple[str, str], frozenset[str]]
    """(table, column) -> the normalised texts the gold wrote there."""


def _footprint(schema: Schema, changes: tuple[RowChange, ...]) -> Footprint:
    inserted = _inserted(schema, changes)
    updates: dict[RowKey, dict[str, Any]] = {}
    deletes = set()
    inserts: dict[str, Counter[tuple[Any, ...]]] = {}
    shown: dict[tuple[str, tuple[Any, ...]], str] = {}
    texts: dict[tuple[str, str], set[str]] = {}
    for c in changes:
        if c.table in schema.skip:
            continue
        row = c.after if c.after is not None else c.before or {}
        for col, kind in schema.columns[c.table]:
            if kind == "text" and isinstance(row.get(col), str):
                texts.setdefault((c.table, col), set()).add(_norm(row[col]))
        if c.before is None and c.after is not None:
            key = _content(schema, c.table, c.after, inserted)
            inserts.setdefault(c.table, Counter())[key] += 1
            shown[(c.table, key)] = _row_text(schema, c.table, c.after)
        elif c.after is None:
            deletes.add((c.table, c.pk))
        else:
            fields = {}
            for col, (_before, after) in c.fields.items():
                if schema.kind(c.table, col) != "skip":
                    fields[col] = _value(schema, c.table, col, after, inserted, 0)
            if fields:
                updates[(c.table, c.pk)] = fields
    return Footprint(updates, frozenset(deletes), inserts, shown, {k: frozenset(v) for k, v in texts.items()})


_FOOTPRINTS: OrderedDict[int, tuple[GoldOutcome, Footprint]] = OrderedDict()
_FOOTPRINTS_LOCK = threading.Lock()


def footprint(world: World, gold: GoldOutcome) -> Footprint:
    """The compiled diff of ``gold`` (computed once per gold outcome and kept)."""
    key = id(gold)
    hit = _FOOTPRINTS.get(key)
    if hit is not None and hit[0] is gold:
        return hit[1]
    fp = _footprint(schema_of(world), gold.changes)
    with _FOOTPRINTS_LOCK:
        _FOOTPRINTS[key] = (gold, fp)
        if len(_FOOTPRINTS) > 4096:
            _FOOTPRINTS.popitem(last=False)
    return fp


# -- the comparison ---------------------------------------------------------------------


@dataclass
class Comparison:
    """The differences between an episode's diff and the gold's (see the module docstring)."""

    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)


_STOP = frozenset(
    [
        "this",
        "that",
        "with",
        "from",
        "have",
        "been",
        "were",
        "will",
        "would",
        "your",
        "their",
        "there",
        "about",
        "into",
        "them",
        "they",
        "what",
        "when",
        "which",
        "also",
        "only",
        "just",
        "very",
        "more",
        "most",
        "some",
        "such",
        "than",
        "then",
        "these",
        "those",
        "over",
        "under",
        "after",
        "before",
        "because",
        "please",
        "thanks",
        "thank",
        "hello",
        "dear",
        "regards",
        "could",
        "should",
    ]
)


def _stems(text: str) -> set[str]:
    return {w.casefold()[:5] for w in _WORD.findall(text) if len(w) >= 4 and w.casefold() not in _STOP}


def echoes(value: str, gold: str, context: str = "") -> bool:
    """Whether ``value`` records what ``gold`` records: equal, or sharing a content word (by stem) with
    the gold's text or with ``context`` (the task's own words: what the customer wrote).

    Where the gold writes a particular text (the reason the customer gave), the
    episode may use its own words, but must say something about the case: junk,
    filler or an unrelated sentence shares no content word with either. Words
    both texts open with (a tool's own prefix: ``Escalated:``) are not counted
    as shared; a text that is the other's opening words echoes it. A gold text
    with no content word asks for nothing more than the text rule.
    """
    if _norm(value) == _norm(gold):
        return True
    if not _stems(gold):
        return True
    said_words = [w.casefold() for w in _WORD.findall(value)]
    gold_words = [w.casefold() for w in _WORD.findall(gold)]
    shared = 0
    while shared < min(len(said_words), len(gold_words)) and said_words[shared] == gold_words[shared]:
        shared += 1
    said = _stems(" ".join(said_words[shared:]))
    wanted = _stems(" ".join(gold_words[shared:]))
    if shared and (not said or not wanted):
        return True  # one is the other's opening words
    return bool(wanted & said) or bool(said & _context_stems(context))


@lru_cache(maxsize=512)
def _context_stems(context: str) -> frozenset[str]:
    return frozenset(_stems(context))


def _text_ok(schema: Schema, fp: Footprint, table: str, col: str, value: Any) -> bool:
    if not isinstance(value, str) or not value.strip():
        return True
    if _norm(value) in fp.texts.get((table, col), frozenset()):
        return True
    return plausible_text(value, schema.words.get((table, col), MIN_WORDS))


def _bad_texts(
    schema: Schema, fp: Footprint, table: str, row: Mapping[str, Any], context: str | None = None
) -> list[str]:
    """The text columns of an inserted ``row`` that fail the text rule (and, with ``context``: a row
    matched with a gold insert, the echo rule against the gold's texts of the column)."""
    bad = []
    for col, kind in schema.columns[table]:
        if kind != "text":
            continue
        value = row[col]
        if not _text_ok(schema, fp, table, col, value):
            bad.append(col)
        elif context is not None and isinstance(value, str) and value.strip() and (table, col) not in schema.loose:
            golds = fp.texts.get((table, col), frozenset())
            if golds and not any(echoes(value, g, context) for g in golds):
                bad.append(col)
    return bad


class _Episode:
    """One comparison's context: the world, the task's scope, the gold's footprint."""

    def __init__(
        self, world: World, schema: Schema, fp: Footprint, scope: Iterable[EntityRef], context: str = ""
    ) -> None:
        self.world = world
        self.schema = schema
        self.fp = fp
        self.scope = set(scope)
        self.context = context
        self.out = Comparison()

    def owner(self, change: RowChange) -> EntityRef | None:
        return self.world.owner(change.table, change.after or change.before or {})

    def in_scope(self, change: RowChange) -> bool:
        return self.owner(change) in self.scope

    def unexpected(self, change: RowChange, detail: str) -> None:
        owner = self.owner(change)
        where = f"{change.kind} {change.table} {change.pk}"
        if owner is not None and owner not in self.scope:
            self.out.unexpected.append(f"{where} (belongs to {owner[0]} {owner[1]})")
        else:
            self.out.unexpected.append(f"unexpected change: {where}{': ' + detail if detail else ''}")

    def row(self, change: RowChange, inserted: Mapping[RowKey, dict[str, Any]]) -> None:
        """Rule 2: a row that existed before the episode."""
        key = (change.table, change.pk)
        gold = self.fp.updates.get(key, {})
        if change.after is None:
            if key not in self.fp.deletes:
                self.unexpected(change, "")
            return
        if key in self.fp.deletes:
            self.out.missing.append(f"{change.table} {change.pk}: expected deleted, left in place")
            return
        extra = []
        ep_fields = change.fields
        for col, (before, after) in ep_fields.items():
            kind = self.schema.kind(change.table, col)
            if kind == "skip":
                continue
            if col in gold:
                if kind == "text":
                    ok = (not isinstance(after, str) or bool(after.strip())) == self._present(gold[col])
                    echo = (change.table, col) not in self.schema.loose
                    if ok and echo and isinstance(after, str) and isinstance(gold[col], str):
                        ok = echoes(after, gold[col], self.context)
                    if not ok or not _text_ok(self.schema, self.fp, change.table, col, after):
                        self.out.missing.append(f"{change.table} {change.pk} {col}: {_shown(after)} is not free text")
                elif _value(self.schema, change.table, col, after, inserted, 0) != gold[col]:
                    self.out.missing.append(
                        f"{change.table} {change.pk} {col}: expected {_shown(gold[col])}, found {_shown(after)}"
                    )
            elif not (kind == "choice" and after in self.schema.choices[(change.table, col)] and self.in_scope(change)):
                extra.append(f"{col} {_shown(before)} -> {_shown(after)}")
        for col, value in gold.items():
            if col not in ep_fields:
                self.out.missing.append(f"{change.table} {change.pk} {col}: expected {_shown(value)}, left unchanged")
        if not extra and not gold and ep_fields and self.owner(change) is not None and not self.in_scope(change):
            extra.append("touched")  # a write on another entity's record, even one that changed only its timestamps
        if extra:
            self.unexpected(change, "; ".join(extra))

    @staticmethod
    def _present(value: Any) -> bool:
        return bool(value.strip()) if isinstance(value, str) else value is not None


def compare(
    world: World,
    gold: GoldOutcome,
    changes: Iterable[RowChange],
    scope: Iterable[EntityRef],
    exempt: frozenset[RowKey] = frozenset(),
    context: str = "",
) -> Comparison:
    """Compare an episode's ``changes`` with ``gold``'s under ``world``'s tolerances (see the module docstring).

    Rows in ``exempt`` (written by the calls of a world's simulated party, the
    customer) are matched like any other, but their free text is the party's
    own: the text rule does not judge it. ``context`` is the task's own text
    (its instruction), which a free-text field may echo instead of the gold.
    """
    schema = schema_of(world)
    fp = footprint(world, gold)
    ep = _Episode(world, schema, fp, scope, context)
    rows = [c for c in changes if c.table not in schema.skip]
    inserted = _inserted(schema, rows)
    left = {table: Counter(keys) for table, keys in fp.inserts.items()}
    seen: set[RowKey] = set()
    for change in rows:
        key = (change.table, change.pk)
        if change.before is not None:
            seen.add(key)
            ep.row(change, inserted)
            continue
        if change.after is None:
            continue
        content = _content(schema, change.table, change.after, inserted)
        pool = left.get(change.table)
        if pool is not None and pool[content] > 0:
            pool[content] -= 1
            bad = [] if key in exempt else _bad_texts(schema, fp, change.table, change.after, context)
            ep.out.missing += [f"insert {change.table} {change.pk} {col}: not free text" for col in bad]
            continue
        if change.table in schema.optional and ep.in_scope(change):
            bad = [] if key in exempt else _bad_texts(schema, fp, change.table, change.after)
            if bad:
                ep.unexpected(change, f"{', '.join(bad)} not free text")
        else:
            ep.unexpected(change, _row_text(schema, change.table, change.after))
    for key, fields in fp.updates.items():
        if key not in seen:
            for col, value in fields.items():
                ep.out.missing.append(f"{key[0]} {key[1]} {col}: expected {_shown(value)}, left unchanged")
    for key in sorted(fp.deletes):
        if key not in seen:
            ep.out.missing.append(f"{key[0]} {key[1]}: expected deleted, left in place")
    for table, pool in left.items():
        for content, n in pool.items():
            for _ in range(n):
                ep.out.missing.append(f"missing insert into {table} ({fp.shown[(table, content)]})")
    return ep.out
