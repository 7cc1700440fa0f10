"""The review database: episodes under review, reviewers, their grades.

One SQLite file (``review.sqlite`` by default) holds everything a review
campaign produces, so it can be copied, archived and re-analysed:

* ``runs`` and ``items`` — the episodes imported from run files. An item keeps
  the whole episode record (messages, calls, verdict, task), so the database
  stands alone once imported; ``gold_answer`` marks honeypot items with a
  known answer; ``position``/``overlap`` place an item in the queue and say
  how many reviewers should grade it.
* ``reviewers`` (role ``reviewer``, ``adjudicator`` or ``admin``, scrypt
  password hash, paused flag) and ``sessions`` (server-side sign-in sessions
  with their CSRF token; a session is stored as the SHA-256 of its token, so
  a copy of the database signs nobody in).
* ``sign_ins`` — the sign-in attempts of the throttling window, and
  ``used_nonces`` — the sign-in forms already posted (see :meth:`ReviewStore.sign_in`).
* ``assignments`` — who took which item and when (the start of the review
  clock), ``reviews`` — one grade per reviewer and item, with its per-check
  ``rubric`` rows, and ``adjudications`` — the final human verdict on an item
  that humans or the verifier disagreed on.
* ``events`` — an append-only log of sign-ins, pauses and adjudications.
* ``api_tokens`` — bearer tokens of the review API (:mod:`mirrorworld.review.api`),
  each belonging to a reviewer and carrying a role no higher than the
  reviewer's; stored, like sessions, as the SHA-256 of the token. A revoked
  token keeps its row (``revoked_at``) for the record.
* ``webhooks`` and ``webhook_deliveries`` — where the API posts an item's human
  verdict once it has one, and each delivery's outcome (one row per webhook,
  item and verdict state, so a verdict is announced once).

Durability and consistency: the database runs in WAL mode with
``synchronous=FULL``; every change is one ``BEGIN IMMEDIATE`` transaction, so
a review and its rubric rows commit together or not at all, a process killed
mid-write leaves the last committed state, and concurrent reviewers serialise
on the write lock (``busy_timeout`` waits for it). ``reviews.n_rubric``
records how many rubric rows a review was written with, and
:meth:`ReviewStore.check_consistency` verifies that and the other invariants.
A review is unique per ``(item, reviewer)``: posting it twice stores it once.

**Item ids are opaque.** An item's id is drawn at random (ten digits) when it
is imported, never counted up, so the ids a reviewer sees say nothing about
import order — in particular not which items came from a gold run imported
together (a block of consecutive ids would let a reviewer grade only those
carefully). Import order lives in ``(run_id, episode)``, which is how
:meth:`ReviewStore.items` sorts. Items imported before ids were drawn keep
their counted ids.

**Opening a file.** A path that exists must be empty or already a review
database: anything else (another program's SQLite file, junk) is refused
before a byte is written to it, and the schema of a new database is created in
one transaction, so a half-created review database cannot exist.

Time here is wall-clock time (seconds since the epoch), injected as ``clock``
so tests can move it: review time has nothing to do with a world's simulated
clock.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import random
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mirrorworld.core.registry import Registry
from mirrorworld.errors import MirrorworldError
from mirrorworld.verify.verdict import Verdict

if TYPE_CHECKING:
    from mirrorworld.run.runner import EpisodeRecord

__all__ = [
    "FORMAT",
    "GATE_LABELS",
    "ROLES",
    "TOKEN_PREFIX",
    "Added",
    "ApiToken",
    "CheckRef",
    "Item",
    "ReviewInput",
    "ReviewRow",
    "ReviewStore",
    "Reviewer",
    "SignIn",
    "SignInLimits",
    "check_refs",
    "record_verdict",
]

FORMAT = "mirrorworld-review/1"

Role = Literal["reviewer", "adjudicator", "admin"]
ROLES: tuple[Role, ...] = ("reviewer", "adjudicator", "admin")
"""Roles in increasing order of what they may see and do."""

GATE_LABELS = {
    "state": "the end state is what the task asked for",
    "collateral": "nothing outside the task was changed",
    "policy": "no policy rule was broken",
    "communication": "the final message tells the customer what it must",
    "reply": "the customer got a final message where the policy requires one",
}
"""The verifier's gates, as a reviewer reads them in the rubric."""

SESSION_SECONDS = 12 * 3600
ASSIGNMENT_SECONDS = 30 * 60
"""An item taken but not graded within this time goes back to the queue."""

MAX_REASON = 5000

NONCE_SECONDS = 3600
"""How long a sign-in form stays valid; a used form's nonce is remembered this long."""

ITEM_IDS = range(1_000_000_000, 10_000_000_000)
"""Where item ids are drawn from: ten digits, uniformly, whatever the import order."""

TOKEN_PREFIX = "mwr_"
"""How an API token starts (so a leaked one is recognisable to secret scanners and to people)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, world TEXT NOT NULL, agent TEXT NOT NULL,
    meta TEXT NOT NULL, gold INTEGER NOT NULL DEFAULT 0, added_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id), episode INTEGER NOT NULL,
    task_id TEXT NOT NULL, family TEXT NOT NULL, agent TEXT NOT NULL, verifier_version TEXT NOT NULL,
    verifier_passed INTEGER NOT NULL, score REAL NOT NULL, reward REAL NOT NULL, error TEXT,
    checks TEXT NOT NULL, audit_flags TEXT NOT NULL, record TEXT NOT NULL,
    gold_answer INTEGER CHECK (gold_answer IN (0, 1)),
    stratum TEXT, position INTEGER UNIQUE, overlap INTEGER NOT NULL DEFAULT 0,
    UNIQUE (run_id, episode)
);
CREATE TABLE IF NOT EXISTS reviewers (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,
    role TEXT NOT NULL CHECK (role IN ('reviewer', 'adjudicator', 'admin')),
    pw TEXT NOT NULL, paused INTEGER NOT NULL DEFAULT 0, paused_reason TEXT,
    cleared_at REAL NOT NULL DEFAULT 0, created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    token TEXT PRIMARY KEY, reviewer_id INTEGER NOT NULL REFERENCES reviewers(id),
    csrf TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS assignments (
    item_id INTEGER NOT NULL REFERENCES items(id), reviewer_id INTEGER NOT NULL REFERENCES reviewers(id),
    started_at REAL NOT NULL, PRIMARY KEY (item_id, reviewer_id)
);
CREATE TABLE IF NOT EXISTS reviews (
    id INTEGER PRIMARY KEY, item_id INTEGER NOT NULL REFERENCES items(id),
    reviewer_id INTEGER NOT NULL REFERENCES reviewers(id), passed INTEGER NOT NULL CHECK (passed IN (0, 1)),
    reason TEXT NOT NULL, flag_hacking INTEGER NOT NULL, flag_task_wrong INTEGER NOT NULL,
    flag_edge_case INTEGER NOT NULL, started_at REAL NOT NULL, submitted_at REAL NOT NULL,
    seconds REAL NOT NULL, reason_keys INTEGER NOT NULL, reason_pasted INTEGER NOT NULL,
    n_rubric INTEGER NOT NULL, UNIQUE (item_id, reviewer_id)
);
CREATE TABLE IF NOT EXISTS rubric (
    review_id INTEGER NOT NULL REFERENCES reviews(id), key TEXT NOT NULL,
    passed INTEGER NOT NULL CHECK (passed IN (0, 1)), PRIMARY KEY (review_id, key)
);
CREATE TABLE IF NOT EXISTS adjudications (
    item_id INTEGER PRIMARY KEY REFERENCES items(id), adjudicator_id INTEGER NOT NULL REFERENCES reviewers(id),
    passed INTEGER NOT NULL CHECK (passed IN (0, 1)), reason TEXT NOT NULL, created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY, at REAL NOT NULL, reviewer_id INTEGER, kind TEXT NOT NULL, detail TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sign_ins (
    id INTEGER PRIMARY KEY, at REAL NOT NULL, name TEXT NOT NULL, client TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS used_nonces (nonce TEXT PRIMARY KEY, expires_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS api_tokens (
    id INTEGER PRIMARY KEY, token TEXT NOT NULL UNIQUE, reviewer_id INTEGER NOT NULL REFERENCES reviewers(id),
    role TEXT NOT NULL CHECK (role IN ('reviewer', 'adjudicator', 'admin')), label TEXT NOT NULL,
    created_at REAL NOT NULL, expires_at REAL, revoked_at REAL
);
CREATE TABLE IF NOT EXISTS webhooks (
    id INTEGER PRIMARY KEY, url TEXT NOT NULL, events TEXT NOT NULL, secret TEXT NOT NULL,
    created_by INTEGER REFERENCES reviewers(id), created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS webhook_deliveries (
    id INTEGER PRIMARY KEY, webhook_id INTEGER NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
    event TEXT NOT NULL, item_id INTEGER NOT NULL REFERENCES items(id), state TEXT NOT NULL,
    payload TEXT NOT NULL, status TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0, http_status INTEGER, error TEXT, created_at REAL NOT NULL,
    finished_at REAL, UNIQUE (webhook_id, event, item_id, state)
);
CREATE INDEX IF NOT EXISTS sign_ins_by_name ON sign_ins (name, client, at);
CREATE INDEX IF NOT EXISTS sign_ins_by_client ON sign_ins (client, at);
CREATE INDEX IF NOT EXISTS reviews_by_reviewer ON reviews (reviewer_id, submitted_at);
CREATE INDEX IF NOT EXISTS items_by_position ON items (position);
CREATE INDEX IF NOT EXISTS events_by_kind ON events (kind, at);
CREATE INDEX IF NOT EXISTS deliveries_by_webhook ON webhook_deliveries (webhook_id, id);
"""


@dataclass(frozen=True)
class CheckRef:
    """One rubric row of an item: a verifier check or gate a reviewer may grade.

    ``key`` is unique within the item (``check:<name>`` or ``gate:<gate>``);
    ``group`` pools the same check across tasks for per-check statistics
    (``refund_damaged: order_lines.refunded_cents``, ``gate: policy``);
    ``verifier`` is what the verifier decided for it.
    """

    key: str
    label: str
    group: str
    verifier: bool

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "group": self.group, "verifier": self.verifier}


@dataclass(frozen=True)
class Item:
    """An episode under review (its full record is loaded with :meth:`ReviewStore.record`)."""

    id: int
    run_id: int
    episode: int
    task_id: str
    family: str
    agent: str
    verifier_version: str
    verifier_passed: bool
    score: float
    reward: float
    error: str | None
    checks: tuple[CheckRef, ...]
    audit_flags: tuple[str, ...]
    gold_answer: bool | None
    stratum: str | None
    position: int | None
    overlap: int
    run_gold: bool = False


@dataclass(frozen=True)
class Reviewer:
    id: int
    name: str
    role: Role
    paused: bool
    paused_reason: str | None
    cleared_at: float

    def can(self, role: Role) -> bool:
        """Whether this reviewer's role is ``role`` or above."""
        return ROLES.index(self.role) >= ROLES.index(role)


@dataclass(frozen=True)
class ApiToken:
    """An API token as listed (never its secret, which only its creator saw)."""

    id: int
    reviewer_id: int
    reviewer: str
    role: Role
    label: str
    created_at: float
    expires_at: float | None
    revoked_at: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "reviewer_id": self.reviewer_id,
            "reviewer": self.reviewer,
            "role": self.role,
            "label": self.label,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "revoked_at": self.revoked_at,
        }


@dataclass(frozen=True)
class Added:
    """What :meth:`ReviewStore.add_records` did: the run, and for each record its item and whether it is new."""

    run_id: int
    items: tuple[int, ...]
    created: tuple[bool, ...]

    @property
    def new(self) -> int:
        """How many items were imported now."""
        return sum(self.created)


@dataclass(frozen=True)
class ReviewInput:
    """A grade as submitted. ``rubric`` maps rubric keys to pass (True) / fail (False)."""

    item_id: int
    reviewer_id: int
    passed: bool
    reason: str = ""
    rubric: dict[str, bool] = field(default_factory=dict)
    flag_hacking: bool = False
    flag_task_wrong: bool = False
    flag_edge_case: bool = False
    reason_keys: int = 0
    reason_pasted: bool = False


@dataclass(frozen=True)
class ReviewRow:
    """A stored review."""

    id: int
    item_id: int
    reviewer_id: int
    reviewer: str
    passed: bool
    reason: str
    rubric: dict[str, bool]
    flag_hacking: bool
    flag_task_wrong: bool
    flag_edge_case: bool
    started_at: float
    submitted_at: float
    seconds: float
    reason_keys: int
    reason_pasted: bool

    @property
    def flags(self) -> list[str]:
        names = [("reward hacking", self.flag_hacking), ("task is wrong", self.flag_task_wrong)]
        names.append(("edge case", self.flag_edge_case))
        return [n for n, on in names if on]


@dataclass(frozen=True)
class SignInLimits:
    """How many sign-in attempts are evaluated within ``window`` seconds, and for whom.

    An attempt is counted from the moment it is let through to the password
    check until it succeeds (a success removes it), so the counts are of
    failed and in-flight attempts. Three limits apply, chosen so that
    throttling guessing does not hand anyone a way to lock a reviewer out:

    * ``per_name_client`` attempts for one name from one client (address).
      This is the lockout a reviewer who mistypes meets; an attacker guessing
      the admin's password locks only their own address out of that name.
    * ``per_client`` attempts from one client across all names, against one
      password sprayed over many names.
    * ``per_name`` attempts for one name from all clients together, against
      guessing from many addresses at once.

    A client with a device cookie for the name — signed by the app when that
    browser last signed in as that name — is counted apart, under its device,
    by ``per_name_client`` only. So however many guesses arrive for the admin
    from elsewhere, the admin's own browser still signs in; and a stolen
    device cookie buys no more than ``per_name_client`` guesses a window.
    Limits are fixed windows, not growing back-off: the device exemption is
    what keeps the owner of a name in.
    """

    window: float = 15 * 60
    per_name_client: int = 5
    per_client: int = 20
    per_name: int = 50

    def exceeded(self, conn: sqlite3.Connection, name: str, key: str, *, trusted: bool, since: float) -> str | None:
        """The first limit a new attempt would pass (None when it is within all of them)."""

        def count(where: str, params: tuple[Any, ...]) -> int:
            return int(
                conn.execute(f"SELECT COUNT(*) FROM sign_ins WHERE at >= ? AND {where}", (since, *params)).fetchone()[0]
            )

        if count("name=? AND client=?", (name, key)) >= self.per_name_client:
            return "per_name_client"
        if trusted:
            return None
        if count("client=?", (key,)) >= self.per_client:
            return "per_client"
        if count("name=? AND client NOT LIKE 'device:%'", (name,)) >= self.per_name:
            return "per_name"
        return None


@dataclass(frozen=True)
class SignIn:
    """What :meth:`ReviewStore.sign_in` decided.

    ``outcome`` is ``ok`` (``reviewer``, the session ``token`` and its
    ``csrf`` are set), ``wrong`` (name or password), ``locked`` (over a
    :class:`SignInLimits` limit: the password was not checked) or ``replayed``
    (the form's nonce was used before: nothing was checked).
    """

    outcome: Literal["ok", "wrong", "locked", "replayed"]
    reviewer: Reviewer | None = None
    token: str = ""
    csrf: str = ""


def _digest(secret: str) -> str:
    """The SHA-256 of a bearer secret (session token, form nonce), as stored instead of the secret."""
    return hashlib.sha256(secret.encode()).hexdigest()


def _check_group(family: str, kind: str, params: dict[str, Any]) -> str:
    table = params.get("table", "?")
    if kind == "field":
        what = f"{table}.{params.get('field', '?')}"
    elif kind == "count":
        what = f"count({table})"
    elif kind == "sum":
        what = f"sum({table}.{params.get('column', '?')})"
    else:
        what = f"{kind}({table})"
    return f"{family}: {what}"


def record_verdict(record: dict[str, Any]) -> Verdict | None:
    """The verifier's verdict in an episode record; None when the episode was not graded (it errored).

    Raises :class:`~mirrorworld.errors.RunFileError` when the stored verdict is malformed.
    """
    stored = record.get("verdict")
    return Verdict.from_dict(stored) if stored else None


def check_refs(record: dict[str, Any]) -> tuple[CheckRef, ...]:
    """The rubric rows of an episode record: its task's checks, then the verifier's gates."""
    verdict = record_verdict(record)
    gates = verdict.gates if verdict is not None else {}
    state = gates.get("state")
    checks = state.details.get("checks") if state is not None else None
    results: dict[str, Any] = checks if isinstance(checks, dict) else {}
    family = str(record.get("family", "?"))
    refs: list[CheckRef] = []
    for c in record.get("task", {}).get("checks", []):
        name = str(c["name"])
        refs.append(
            CheckRef(
                f"check:{name}",
                name,
                _check_group(family, str(c["kind"]), c.get("params", {})),
                bool(results.get(name)),
            )
        )
    for gate, label in GATE_LABELS.items():
        if gate in gates:
            refs.append(CheckRef(f"gate:{gate}", label, f"gate: {gate}", gates[gate].passed))
    return tuple(refs)


def hash_password(password: str, *, salt: bytes | None = None, n: int = 2**14) -> str:
    """An scrypt hash of ``password`` as ``scrypt$n$r$p$salt$hash`` (hex)."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=n, r=8, p=1, dklen=32)
    return f"scrypt${n}$8$1${salt.hex()}${digest.hex()}"


def verify_password(password: str, stored: str) -> bool:
    try:
        _, n, r, p, salt, digest = stored.split("$")
        got = hashlib.scrypt(password.encode(), salt=bytes.fromhex(salt), n=int(n), r=int(r), p=int(p), dklen=32)
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(got.hex(), digest)


_DUMMY_HASH = hash_password("not a password", salt=b"\0" * 16)


_SQLITE_HEADER = b"SQLite format 3\x00"


def _check_existing(path: Path) -> None:
    """Refuse an existing ``path`` that is neither empty nor a review database, writing nothing to it.

    The file is looked at read-only — its first bytes, then, for an SQLite
    file, its table list and ``meta.format`` through a read-only connection —
    because a normal connection would already change it (the WAL pragma
    rewrites the header). Without a ``-wal`` file beside it the connection is
    ``immutable`` as well, so not even the ``-shm``/``-wal`` files a read-only
    connection to a WAL database makes appear; with one (a program has the
    file open) it reads through it. An SQLite file without tables counts as
    empty.
    """
    try:
        with path.open("rb") as f:
            header = f.read(len(_SQLITE_HEADER))
    except OSError as err:
        raise MirrorworldError(f"{path} cannot be read as a review database ({err.strerror or err})") from None
    if not header:
        return
    if header != _SQLITE_HEADER:
        raise MirrorworldError(f"{path} is not a review database (not an SQLite file)")
    try:
        wal = path.with_name(path.name + "-wal")
        mode = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?{mode}", uri=True, timeout=30)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if not tables:
                return
            if "meta" not in tables:
                raise MirrorworldError(f"{path} is not a review database (an SQLite file of another program)")
            row = conn.execute("SELECT value FROM meta WHERE key='format'").fetchone()
        finally:
            conn.close()
        found = None if row is None else json.loads(row[0])
    except (sqlite3.DatabaseError, ValueError, TypeError) as err:
        raise MirrorworldError(f"{path} is not a review database ({err})") from None
    if found is None:
        raise MirrorworldError(f"{path} is not a review database (it has no format mark)")
    if found != FORMAT:
        raise MirrorworldError(f"{path} is not a {FORMAT} database (it says {ascii(found)[:80]})")


def connect_durable(path: str | Path) -> sqlite3.Connection:
    """A connection to a database file as the review layer keeps them (see the module docstring): autocommit
    (transactions explicit), WAL, ``synchronous=FULL``, foreign keys on, waiting for the write lock."""
    conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout=30000")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


@contextlib.contextmanager
def transaction(connect: Callable[[], sqlite3.Connection], *, write: bool) -> Iterator[sqlite3.Connection]:
    """A fresh connection in one transaction: a consistent read, or a write (``BEGIN IMMEDIATE``) that
    commits on exit and rolls back whole on any exception; the connection is closed either way."""
    conn = connect()
    try:
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    finally:
        conn.close()


class ReviewStore:
    """The review database at ``path`` (created when missing). See the module docstring.

    The store holds no open connection: each operation opens its own, so one
    store may be shared by the threads of a web server. ``rng`` draws item ids
    (by default the operating system's random source; tests pass a seeded one).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], float] = time.time,
        create: bool = True,
        rng: random.Random | None = None,
    ) -> None:
        self.path = Path(path)
        self.clock = clock
        self.rng = rng if rng is not None else random.SystemRandom()
        if self.path.exists() or self.path.is_symlink():
            _check_existing(self.path)
        elif not create:
            raise MirrorworldError(f"no review database at {self.path}")
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        init = (
            f"BEGIN IMMEDIATE;\n{_SCHEMA}"
            f"INSERT OR IGNORE INTO meta VALUES ('format', '{json.dumps(FORMAT)}');\n"
            f"INSERT OR IGNORE INTO meta VALUES ('secret', '{json.dumps(secrets.token_hex(32))}');\nCOMMIT;"
        )
        try:
            conn = self.connect()
            try:
                conn.executescript(init)
                row = conn.execute("SELECT value FROM meta WHERE key='format'").fetchone()
            finally:
                conn.close()
            if row is None or json.loads(row[0]) != FORMAT:
                raise MirrorworldError(f"{self.path} is not a {FORMAT} database")
        except (sqlite3.DatabaseError, ValueError) as err:
            raise MirrorworldError(f"{self.path} is not a review database ({err})") from None
        self._secret: str = self.get_meta("secret")
        self._listeners: list[Callable[[int], None]] = []
        self.changes = 0
        """Counts the grades and adjudications this store object committed (a cheap "anything new?" for pollers)."""

    # -- connections -------------------------------------------------------------

    def connect(self) -> sqlite3.Connection:
        """A new connection in autocommit mode (transactions are explicit)."""
        return connect_durable(self.path)

    def read(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """A connection reading one consistent snapshot."""
        return transaction(self.connect, write=False)

    def write(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """One write transaction: commits on exit, rolls back whole on any exception."""
        return transaction(self.connect, write=True)

    @property
    def secret(self) -> str:
        """The key that signs session cookies (created with the database)."""
        return self._secret

    def get_meta(self, key: str, default: Any = None) -> Any:
        with self.read() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def set_meta(self, key: str, value: Any) -> None:
        with self.write() as conn:
            conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def log(self, conn: sqlite3.Connection, reviewer_id: int | None, kind: str, detail: dict[str, Any]) -> None:
        conn.execute(
            "INSERT INTO events (at, reviewer_id, kind, detail) VALUES (?, ?, ?, ?)",
            (self.clock(), reviewer_id, kind, json.dumps(detail, sort_keys=True)),
        )

    # -- runs and items ----------------------------------------------------------

    def add_run(
        self, path: str | Path, *, gold: bool = False, audit: bool = True, registry: Registry | None = None
    ) -> tuple[int, int]:
        """Import a run file's episodes (again: only the new ones); return (run id, new items).

        ``gold`` marks every episode of the run as a honeypot whose known answer
        is its verdict: use it for runs whose outcome is known by construction
        (the oracle agent's, or a null agent's, on a world whose verifier audit
        passes). ``audit`` runs ``audit-run``'s reward-hacking detectors over the
        episodes; flagged episodes are over-sampled into the queue, the run's
        world looked up in ``registry`` (by default the installed worlds).
        The episodes go in through :meth:`add_records`, the run named by its
        resolved path.
        """
        from mirrorworld.run.trajectories import RunFile

        p = Path(path).resolve()
        with RunFile.open(p) as run:
            meta = run.meta
            records = list(run.episodes())
        flags: dict[int, list[str]] = {}
        if audit and records:
            flags = _audit_flags(p, records[0].task.get("world", ""), registry)
        added = self.add_records(str(p), meta, records, gold=gold, flags=flags)
        return added.run_id, added.new

    def add_records(
        self,
        name: str,
        meta: dict[str, Any],
        records: Sequence[EpisodeRecord],
        *,
        gold: bool = False,
        flags: Mapping[int, Sequence[str]] | None = None,
    ) -> Added:
        """Import episode records as the run ``name`` (again: only the episodes it lacks), in one transaction.

        The one way episodes enter the database: :meth:`add_run` reads them
        from a run file, the review API (:mod:`mirrorworld.review.api`) from a
        training loop's request, after checking them as a run file's episodes
        are checked. ``name`` identifies the run (a run file's path; ``api:…``
        for submitted runs): a record whose ``index`` the run holds already is
        not imported again, and its item is the one it got the first time.
        ``meta`` is the run's metadata (``world``, ``agent``, ``world_hash`` …);
        ``gold`` as in :meth:`add_run`; ``flags`` maps an episode index to the
        audit rules that flagged it (over-sampled into the queue).
        """
        flags = flags or {}
        with self.write() as conn:
            row = conn.execute("SELECT id FROM runs WHERE path=?", (name,)).fetchone()
            if row is None:
                cur = conn.execute(
                    "INSERT INTO runs (path, world, agent, meta, gold, added_at) VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        name,
                        str(meta.get("world", "")),
                        str(meta.get("agent", "")),
                        json.dumps(meta, default=str),
                        int(gold),
                        self.clock(),
                    ),
                )
                run_id = int(cur.lastrowid or 0)
            else:
                run_id = int(row[0])
                if gold:
                    conn.execute("UPDATE runs SET gold=1 WHERE id=?", (run_id,))
            known = {
                int(r[0]): int(r[1]) for r in conn.execute("SELECT episode, id FROM items WHERE run_id=?", (run_id,))
            }
            ids: list[int] = []
            created: list[bool] = []
            for rec in records:
                if rec.index in known:
                    ids.append(known[rec.index])
                    created.append(False)
                    continue
                data = _record_dict(rec)
                refs = check_refs(data)
                item_id = self._new_item_id(conn)
                conn.execute(
                    "INSERT INTO items (id, run_id, episode, task_id, family, agent, verifier_version,"
                    " verifier_passed, score, reward, error, checks, audit_flags, record, gold_answer)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        item_id,
                        run_id,
                        rec.index,
                        rec.task_id,
                        rec.family,
                        rec.agent,
                        rec.world_hash,
                        int(rec.passed),
                        rec.score,
                        rec.reward,
                        rec.error,
                        json.dumps([r.to_dict() for r in refs]),
                        json.dumps(list(flags.get(rec.index, []))),
                        json.dumps(data, default=str),
                        int(rec.passed) if gold else None,
                    ),
                )
                known[rec.index] = item_id
                ids.append(item_id)
                created.append(True)
            if gold:
                conn.execute(
                    "UPDATE items SET gold_answer=verifier_passed WHERE run_id=? AND gold_answer IS NULL", (run_id,)
                )
        return Added(run_id, tuple(ids), tuple(created))

    def _new_item_id(self, conn: sqlite3.Connection, table: Literal["items", "api_tokens"] = "items") -> int:
        """An unused id of ``table`` drawn uniformly from :data:`ITEM_IDS` (see the module docstring)."""
        while True:
            candidate = self.rng.randrange(ITEM_IDS.start, ITEM_IDS.stop)
            if conn.execute(f"SELECT 1 FROM {table} WHERE id=?", (candidate,)).fetchone() is None:
                return candidate

    _ITEM_COLS = (
        "i.id, i.run_id, i.episode, i.task_id, i.family, i.agent, i.verifier_version, i.verifier_passed, i.score,"
        " i.reward, i.error, i.checks, i.audit_flags, i.gold_answer, i.stratum, i.position, i.overlap, r.gold"
    )

    @staticmethod
    def _item(row: Sequence[Any]) -> Item:
        return Item(
            id=row[0],
            run_id=row[1],
            episode=row[2],
            task_id=row[3],
            family=row[4],
            agent=row[5],
            verifier_version=row[6],
            verifier_passed=bool(row[7]),
            score=row[8],
            reward=row[9],
            error=row[10],
            checks=tuple(CheckRef(**c) for c in json.loads(row[11])),
            audit_flags=tuple(json.loads(row[12])),
            gold_answer=None if row[13] is None else bool(row[13]),
            stratum=row[14],
            position=row[15],
            overlap=row[16],
            run_gold=bool(row[17]),
        )

    def items(
        self, conn: sqlite3.Connection | None = None, where: str = "1", params: tuple[Any, ...] = ()
    ) -> list[Item]:
        """Items matching an SQL condition on ``i`` (items) and ``r`` (runs); the condition is ours, never input.

        They come in import order (run, then episode): ids are random and order nothing.
        """
        sql = (
            f"SELECT {self._ITEM_COLS} FROM items i JOIN runs r ON r.id=i.run_id WHERE {where}"
            " ORDER BY i.run_id, i.episode, i.id"
        )
        if conn is not None:
            return [self._item(r) for r in conn.execute(sql, params)]
        with self.read() as c:
            return [self._item(r) for r in c.execute(sql, params)]

    def item(self, item_id: int, conn: sqlite3.Connection | None = None) -> Item | None:
        found = self.items(conn, "i.id=?", (item_id,))
        return found[0] if found else None

    def record(self, item_id: int) -> dict[str, Any]:
        """The full episode record of an item (messages, calls, verdict, task)."""
        with self.read() as conn:
            row = conn.execute("SELECT record FROM items WHERE id=?", (item_id,)).fetchone()
        if row is None:
            raise MirrorworldError(f"no item {item_id}")
        data: dict[str, Any] = json.loads(row[0])
        return data

    def runs(self) -> list[dict[str, Any]]:
        with self.read() as conn:
            rows = conn.execute("SELECT id, path, world, agent, meta, gold, added_at FROM runs ORDER BY id").fetchall()
        return [
            {
                "id": r[0],
                "path": r[1],
                "world": r[2],
                "agent": r[3],
                "meta": json.loads(r[4]),
                "gold": bool(r[5]),
                "added_at": r[6],
            }
            for r in rows
        ]

    def make_gold(self, item_id: int, answer: bool, by: int) -> None:
        """Use an item as a honeypot with a known ``answer`` (normally its adjudicated verdict)."""
        with self.write() as conn:
            if conn.execute("UPDATE items SET gold_answer=? WHERE id=?", (int(answer), item_id)).rowcount != 1:
                raise MirrorworldError(f"no item {item_id}")
            self.log(conn, by, "gold", {"item": item_id, "answer": answer})

    # -- reviewers and sessions --------------------------------------------------

    def add_reviewer(self, name: str, password: str, role: Role = "reviewer") -> int:
        name = name.strip()
        if not name or len(name) > 64 or any(ch.isspace() or not ch.isprintable() for ch in name):
            raise MirrorworldError("a reviewer name is 1–64 printable characters without spaces")
        if role not in ROLES:
            raise MirrorworldError(f"role must be one of {', '.join(ROLES)}")
        if len(password) < 8:
            raise MirrorworldError("a password has at least 8 characters")
        pw = hash_password(password)
        with self.write() as conn:
            if conn.execute("SELECT 1 FROM reviewers WHERE name=?", (name,)).fetchone():
                raise MirrorworldError(f"there is already a reviewer named {name!r}")
            cur = conn.execute(
                "INSERT INTO reviewers (name, role, pw, created_at) VALUES (?, ?, ?, ?)", (name, role, pw, self.clock())
            )
            rid = int(cur.lastrowid or 0)
            self.log(conn, rid, "reviewer_added", {"name": name, "role": role})
        return rid

    @staticmethod
    def _reviewer(row: Sequence[Any]) -> Reviewer:
        return Reviewer(row[0], row[1], row[2], bool(row[3]), row[4], row[5])

    _REVIEWER_COLS = "id, name, role, paused, paused_reason, cleared_at"

    def reviewer(self, reviewer_id: int, conn: sqlite3.Connection | None = None) -> Reviewer | None:
        sql = f"SELECT {self._REVIEWER_COLS} FROM reviewers WHERE id=?"
        if conn is not None:
            row = conn.execute(sql, (reviewer_id,)).fetchone()
        else:
            with self.read() as c:
                row = c.execute(sql, (reviewer_id,)).fetchone()
        return None if row is None else self._reviewer(row)

    def reviewers(self) -> list[Reviewer]:
        with self.read() as conn:
            rows = conn.execute(f"SELECT {self._REVIEWER_COLS} FROM reviewers ORDER BY id").fetchall()
        return [self._reviewer(r) for r in rows]

    def has_admin(self) -> bool:
        with self.read() as conn:
            return conn.execute("SELECT 1 FROM reviewers WHERE role='admin'").fetchone() is not None

    def authenticate(self, name: str, password: str) -> Reviewer | None:
        """The reviewer with this name and password, or None (in the same time either way).

        Unthrottled: the app signs people in through :meth:`sign_in`.
        """
        with self.read() as conn:
            row = conn.execute(f"SELECT {self._REVIEWER_COLS}, pw FROM reviewers WHERE name=?", (name,)).fetchone()
        if row is None:
            verify_password(password, _DUMMY_HASH)
            return None
        return self._reviewer(row) if verify_password(password, row[6]) else None

    def sign_in(
        self,
        name: str,
        password: str,
        *,
        client: str,
        nonce: str,
        device: str | None = None,
        limits: SignInLimits | None = None,
    ) -> SignIn:
        """Check a sign-in form and, when it is right, open a session.

        In one write transaction, before the password is looked at: the form's
        ``nonce`` is spent (a nonce seen before gives ``replayed``), the
        attempt is counted against ``limits`` (over any limit gives ``locked``)
        and, if it is within them, written down as a reservation. Only then is
        the password hash checked, outside the transaction (scrypt takes tens
        of milliseconds; holding the write lock for it would stall every
        reviewer). A right password deletes its reservation and creates the
        session in one transaction; a wrong one leaves the reservation as the
        failure. Because the count and the reservation commit together,
        concurrent attempts serialise on the write lock and no more than the
        limit are ever evaluated, however many arrive at once.

        ``client`` is who is asking (the app passes the remote address);
        ``device`` is set when the client proved, with a cookie signed at an
        earlier successful sign-in of ``name``, that it is a browser this
        reviewer used: see :class:`SignInLimits` for what that changes.
        """
        limits = limits or SignInLimits()
        now = self.clock()
        key = f"device:{device}" if device is not None else f"client:{client}"
        counted = name[:64]
        with self.write() as conn:
            conn.execute("DELETE FROM used_nonces WHERE expires_at < ?", (now,))
            conn.execute("DELETE FROM sign_ins WHERE at < ?", (now - limits.window,))
            spent = conn.execute(
                "INSERT OR IGNORE INTO used_nonces VALUES (?, ?)", (_digest(nonce), now + NONCE_SECONDS)
            )
            if spent.rowcount != 1:
                return SignIn("replayed")
            over = limits.exceeded(conn, counted, key, trusted=device is not None, since=now - limits.window)
            if over is not None:  # not logged: a refusal must not grow the database
                return SignIn("locked")
            cur = conn.execute("INSERT INTO sign_ins (at, name, client) VALUES (?, ?, ?)", (now, counted, key))
            attempt = int(cur.lastrowid or 0)
        reviewer = self.authenticate(name, password)
        if reviewer is None:
            with self.write() as conn:
                self.log(conn, None, "sign_in_failed", {"name": counted, "client": client})
            return SignIn("wrong")
        with self.write() as conn:
            conn.execute("DELETE FROM sign_ins WHERE id=?", (attempt,))
            token, csrf = self._create_session(conn, reviewer.id)
        return SignIn("ok", reviewer, token, csrf)

    def set_paused(self, reviewer_id: int, paused: bool, reason: str, *, by: int | None) -> None:
        """Pause a reviewer (no more queue items) or resume one; resuming restarts the quality window."""
        with self.write() as conn:
            self._set_paused(conn, reviewer_id, paused, reason, by=by)

    def _set_paused(
        self, conn: sqlite3.Connection, reviewer_id: int, paused: bool, reason: str, *, by: int | None
    ) -> None:
        if paused:
            n = conn.execute(
                "UPDATE reviewers SET paused=1, paused_reason=? WHERE id=?", (reason, reviewer_id)
            ).rowcount
        else:
            n = conn.execute(
                "UPDATE reviewers SET paused=0, paused_reason=NULL, cleared_at=? WHERE id=?",
                (self.clock(), reviewer_id),
            ).rowcount
        if n != 1:
            raise MirrorworldError(f"no reviewer {reviewer_id}")
        self.log(conn, by, "paused" if paused else "resumed", {"reviewer": reviewer_id, "reason": reason})

    def create_session(self, reviewer_id: int) -> tuple[str, str]:
        """A new sign-in session: (session token, CSRF token). Only the token's SHA-256 is stored."""
        with self.write() as conn:
            return self._create_session(conn, reviewer_id)

    def _create_session(self, conn: sqlite3.Connection, reviewer_id: int) -> tuple[str, str]:
        token, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        now = self.clock()
        conn.execute("DELETE FROM sessions WHERE expires_at < ?", (now,))
        conn.execute(
            "INSERT INTO sessions VALUES (?, ?, ?, ?, ?)",
            (_digest(token), reviewer_id, csrf, now, now + SESSION_SECONDS),
        )
        self.log(conn, reviewer_id, "signed_in", {})
        return token, csrf

    def session(self, token: str) -> tuple[Reviewer, str] | None:
        """The reviewer and CSRF token of a live session, found by the SHA-256 of its token."""
        with self.read() as conn:
            row = conn.execute(
                "SELECT reviewer_id, csrf FROM sessions WHERE token=? AND expires_at >= ?",
                (_digest(token), self.clock()),
            ).fetchone()
            if row is None:
                return None
            reviewer = self.reviewer(row[0], conn)
        return None if reviewer is None else (reviewer, row[1])

    def end_session(self, token: str) -> None:
        with self.write() as conn:
            conn.execute("DELETE FROM sessions WHERE token=?", (_digest(token),))

    # -- API tokens --------------------------------------------------------------

    def create_token(
        self,
        reviewer: str,
        *,
        role: Role | None = None,
        label: str = "",
        expires_in: float | None = None,
        create: bool = False,
        by: int | None = None,
    ) -> tuple[ApiToken, str]:
        """A new API token for the reviewer named ``reviewer``: (its listing, the secret, shown only now).

        The token acts as that reviewer with ``role``, which may be lower than
        the reviewer's own (a read-only token of an admin, say) but never
        higher; by default the reviewer's role. With ``create`` a reviewer of
        that name is made first when there is none, with ``role`` (default
        ``reviewer``) and a random password nobody is told (an account for a
        pipeline or a simulated reviewer that only ever signs in by token).
        ``expires_in`` seconds bounds its life (default: until revoked). Only
        the secret's SHA-256 is stored.
        """
        if role is not None and role not in ROLES:
            raise MirrorworldError(f"role must be one of {', '.join(ROLES)}")
        if len(label) > 200 or not label.isprintable():
            raise MirrorworldError("a token label is at most 200 printable characters")
        if expires_in is not None and not 0 < expires_in <= 10 * 365 * 86400:
            raise MirrorworldError("a token expires between 0 and ten years from now")
        with self.read() as conn:
            found = conn.execute("SELECT id FROM reviewers WHERE name=?", (reviewer,)).fetchone()
        if found is None:
            if not create:
                raise MirrorworldError(f"there is no reviewer named {ascii(reviewer)[1:-1][:64]!r}")
            self.add_reviewer(reviewer, secrets.token_urlsafe(24), role or "reviewer")
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        now = self.clock()
        with self.write() as conn:
            owner = conn.execute(f"SELECT {self._REVIEWER_COLS} FROM reviewers WHERE name=?", (reviewer,)).fetchone()
            if owner is None:
                raise MirrorworldError(f"there is no reviewer named {ascii(reviewer)[1:-1][:64]!r}")
            account = self._reviewer(owner)
            granted: Role = role or account.role
            if not account.can(granted):
                raise MirrorworldError(f"{account.name} is a {account.role}: a token of theirs cannot be {granted}")
            token_id = self._new_item_id(conn, "api_tokens")
            expires = None if expires_in is None else now + expires_in
            conn.execute(
                "INSERT INTO api_tokens (id, token, reviewer_id, role, label, created_at, expires_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (token_id, _digest(secret), account.id, granted, label, now, expires),
            )
            self.log(conn, by, "token_created", {"token": token_id, "reviewer": account.id, "role": granted})
        return ApiToken(token_id, account.id, account.name, granted, label, now, expires, None), secret

    def token_reviewer(self, secret: str) -> tuple[Reviewer, int] | None:
        """The reviewer a live API token acts as (its role lowered to the token's) and the token's id; else None.

        The role is the lower of the token's and the reviewer's current one, so
        a reviewer demoted after the token was made is demoted through it too.
        """
        if not secret.startswith(TOKEN_PREFIX) or len(secret) > 200:
            return None
        with self.read() as conn:
            row = conn.execute(
                "SELECT id, reviewer_id, role FROM api_tokens WHERE token=? AND revoked_at IS NULL"
                " AND (expires_at IS NULL OR expires_at > ?)",
                (_digest(secret), self.clock()),
            ).fetchone()
            if row is None:
                return None
            reviewer = self.reviewer(row[1], conn)
        if reviewer is None:
            return None
        role: Role = min(reviewer.role, row[2], key=ROLES.index)
        return replace(reviewer, role=role), int(row[0])

    def revoke_token(self, token_id: int, *, by: int | None = None) -> bool:
        """Revoke a token for good; False when there is no live token with that id."""
        with self.write() as conn:
            n = conn.execute(
                "UPDATE api_tokens SET revoked_at=? WHERE id=? AND revoked_at IS NULL", (self.clock(), token_id)
            ).rowcount
            if n:
                self.log(conn, by, "token_revoked", {"token": token_id})
        return bool(n)

    def tokens(self, *, revoked: bool = False) -> list[ApiToken]:
        """The API tokens (live ones; with ``revoked`` the revoked and expired ones too), oldest first."""
        live = "" if revoked else " WHERE t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > ?)"
        with self.read() as conn:
            rows = conn.execute(
                "SELECT t.id, t.reviewer_id, p.name, t.role, t.label, t.created_at, t.expires_at, t.revoked_at"
                f" FROM api_tokens t JOIN reviewers p ON p.id=t.reviewer_id{live} ORDER BY t.created_at, t.id",
                () if revoked else (self.clock(),),
            ).fetchall()
        return [ApiToken(*r) for r in rows]

    # -- change notification -----------------------------------------------------

    def subscribe(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(item_id)`` after each grade or adjudication this store object commits.

        It runs in the committing thread, after the commit, so it must be quick
        and must not raise (the review API's webhook dispatcher only enqueues
        the id). Grades committed by another process are not announced:
        pollers read the database (:meth:`version`) for those.
        """
        self._listeners.append(listener)

    def unsubscribe(self, listener: Callable[[int], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _changed(self, item_id: int) -> None:
        self.changes += 1
        for listener in list(self._listeners):
            listener(item_id)

    # -- reviews -----------------------------------------------------------------

    def assignment(self, item_id: int, reviewer_id: int, conn: sqlite3.Connection | None = None) -> float | None:
        """When ``reviewer_id`` took ``item_id`` (None if they never did)."""
        sql = "SELECT started_at FROM assignments WHERE item_id=? AND reviewer_id=?"
        if conn is not None:
            row = conn.execute(sql, (item_id, reviewer_id)).fetchone()
        else:
            with self.read() as c:
                row = c.execute(sql, (item_id, reviewer_id)).fetchone()
        return None if row is None else float(row[0])

    def submit_review(
        self, review: ReviewInput, *, after: Callable[[sqlite3.Connection, ReviewInput], None] | None = None
    ) -> tuple[int, bool]:
        """Store a grade; return (review id, created).

        The reviewer must have taken the item. A second submission of the same
        (item, reviewer) stores nothing and returns the first review's id with
        ``created`` False. ``after`` runs inside the same transaction once the
        review is written (the quality check that may pause the reviewer), so
        the review and its consequences commit together.
        """
        if len(review.reason) > MAX_REASON:
            raise MirrorworldError(f"a reason has at most {MAX_REASON} characters")
        now = self.clock()
        with self.write() as conn:
            item = self.item(review.item_id, conn)
            if item is None:
                raise MirrorworldError(f"no item {review.item_id}")
            keys = {c.key for c in item.checks}
            unknown = set(review.rubric) - keys
            if unknown:
                raise MirrorworldError(f"item {item.id} has no rubric row {sorted(unknown)[0]!r}")
            existing = conn.execute(
                "SELECT id FROM reviews WHERE item_id=? AND reviewer_id=?", (review.item_id, review.reviewer_id)
            ).fetchone()
            if existing is not None:
                return int(existing[0]), False
            started = self.assignment(review.item_id, review.reviewer_id, conn)
            if started is None:
                raise MirrorworldError(f"item {review.item_id} was not assigned to this reviewer")
            cur = conn.execute(
                "INSERT INTO reviews (item_id, reviewer_id, passed, reason, flag_hacking, flag_task_wrong,"
                " flag_edge_case, started_at, submitted_at, seconds, reason_keys, reason_pasted, n_rubric)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    review.item_id,
                    review.reviewer_id,
                    int(review.passed),
                    review.reason,
                    int(review.flag_hacking),
                    int(review.flag_task_wrong),
                    int(review.flag_edge_case),
                    started,
                    now,
                    max(0.0, now - started),
                    max(0, int(review.reason_keys)),
                    int(review.reason_pasted),
                    len(review.rubric),
                ),
            )
            review_id = int(cur.lastrowid or 0)
            conn.executemany(
                "INSERT INTO rubric (review_id, key, passed) VALUES (?, ?, ?)",
                [(review_id, k, int(v)) for k, v in sorted(review.rubric.items())],
            )
            if after is not None:
                after(conn, review)
        self._changed(review.item_id)
        return review_id, True

    _REVIEW_COLS = (
        "v.id, v.item_id, v.reviewer_id, p.name, v.passed, v.reason, v.flag_hacking, v.flag_task_wrong,"
        " v.flag_edge_case, v.started_at, v.submitted_at, v.seconds, v.reason_keys, v.reason_pasted"
    )

    def reviews(
        self, conn: sqlite3.Connection | None = None, where: str = "1", params: tuple[Any, ...] = ()
    ) -> list[ReviewRow]:
        """Reviews matching an SQL condition on ``v`` (reviews) and ``p`` (reviewers), oldest first."""
        sql = (
            f"SELECT {self._REVIEW_COLS} FROM reviews v JOIN reviewers p ON p.id=v.reviewer_id"
            f" WHERE {where} ORDER BY v.submitted_at, v.id"
        )

        def load(c: sqlite3.Connection) -> list[ReviewRow]:
            rows = c.execute(sql, params).fetchall()
            rubric: dict[int, dict[str, bool]] = {}
            if rows:
                ids = [r[0] for r in rows]
                for start in range(0, len(ids), 500):
                    chunk = ids[start : start + 500]
                    for rid, key, passed in c.execute(
                        f"SELECT review_id, key, passed FROM rubric WHERE review_id IN ({','.join('?' * len(chunk))})",
                        chunk,
                    ):
                        rubric.setdefault(rid, {})[key] = bool(passed)
            return [
                ReviewRow(
                    id=r[0],
                    item_id=r[1],
                    reviewer_id=r[2],
                    reviewer=r[3],
                    passed=bool(r[4]),
                    reason=r[5],
                    rubric=rubric.get(r[0], {}),
                    flag_hacking=bool(r[6]),
                    flag_task_wrong=bool(r[7]),
                    flag_edge_case=bool(r[8]),
                    started_at=r[9],
                    submitted_at=r[10],
                    seconds=r[11],
                    reason_keys=r[12],
                    reason_pasted=bool(r[13]),
                )
                for r in rows
            ]

        if conn is not None:
            return load(conn)
        with self.read() as c:
            return load(c)

    def adjudicate(self, item_id: int, adjudicator_id: int, passed: bool, reason: str) -> None:
        """Record (or replace) the final human verdict on an item."""
        if len(reason) > MAX_REASON:
            raise MirrorworldError(f"a reason has at most {MAX_REASON} characters")
        with self.write() as conn:
            if self.item(item_id, conn) is None:
                raise MirrorworldError(f"no item {item_id}")
            conn.execute(
                "INSERT OR REPLACE INTO adjudications VALUES (?, ?, ?, ?, ?)",
                (item_id, adjudicator_id, int(passed), reason, self.clock()),
            )
            self.log(conn, adjudicator_id, "adjudicated", {"item": item_id, "passed": passed})
        self._changed(item_id)

    def adjudications(self, conn: sqlite3.Connection | None = None) -> dict[int, dict[str, Any]]:
        sql = (
            "SELECT a.item_id, a.passed, a.reason, a.created_at, p.name FROM adjudications a"
            " JOIN reviewers p ON p.id=a.adjudicator_id"
        )

        def load(c: sqlite3.Connection) -> dict[int, dict[str, Any]]:
            return {
                r[0]: {"passed": bool(r[1]), "reason": r[2], "at": r[3], "by": r[4]} for r in c.execute(sql).fetchall()
            }

        if conn is not None:
            return load(conn)
        with self.read() as c:
            return load(c)

    def version(self) -> tuple[int, ...]:
        """A value that changes whenever reviews, adjudications or items change (a cache key)."""
        with self.read() as conn:
            return tuple(
                int(conn.execute(sql).fetchone()[0])
                for sql in (
                    "SELECT COALESCE(MAX(id), 0) FROM reviews",
                    "SELECT COUNT(*) FROM reviews",
                    "SELECT COALESCE(SUM(created_at * 1000), 0) FROM adjudications",
                    "SELECT COUNT(*) FROM items",
                    "SELECT COUNT(*) FROM items WHERE gold_answer IS NOT NULL",
                )
            )

    def check_consistency(self) -> list[str]:
        """Problems with the database's invariants (an empty list when it is sound)."""
        problems: list[str] = []
        with self.read() as conn:
            status = conn.execute("PRAGMA integrity_check").fetchone()[0]
            if status != "ok":
                problems.append(f"integrity_check: {status}")
            for row in conn.execute("PRAGMA foreign_key_check"):
                problems.append(f"foreign key: {row}")
            for rid, want, got in conn.execute(
                "SELECT v.id, v.n_rubric, COUNT(b.key) FROM reviews v LEFT JOIN rubric b ON b.review_id=v.id"
                " GROUP BY v.id HAVING v.n_rubric != COUNT(b.key)"
            ):
                problems.append(f"review {rid} has {got} rubric rows, written with {want}")
            for (rid,) in conn.execute(
                "SELECT v.id FROM reviews v LEFT JOIN assignments a ON a.item_id=v.item_id AND"
                " a.reviewer_id=v.reviewer_id WHERE a.item_id IS NULL"
            ):
                problems.append(f"review {rid} has no assignment")
            for (rid,) in conn.execute("SELECT id FROM reviews WHERE submitted_at < started_at OR seconds < 0"):
                problems.append(f"review {rid} ends before it starts")
        return problems


def _record_dict(rec: Any) -> dict[str, Any]:
    from dataclasses import asdict

    data: dict[str, Any] = asdict(rec)
    return data


def _audit_flags(path: Path, world_name: str, registry: Registry | None = None) -> dict[int, list[str]]:
    """Episode index → the ``audit-run`` rules that flag it."""
    from mirrorworld.audit.runlog import audit_run
    from mirrorworld.core.registry import default

    result = audit_run(path, (registry or default).get(world_name))
    return {int(e["index"]): sorted({f["rule"] for f in e["flags"]}) for e in result["episodes_flagged"]}
