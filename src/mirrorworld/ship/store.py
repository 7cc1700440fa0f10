"""A version store of world artifacts that a team shares, and resolving ``world@ref`` names.

A store is a folder (put it on shared storage; ``MIRRORWORLD_STORE`` or
``--store`` names it)::

    STORE/catalogue.sqlite      what was published, what each name resolves to, the history
    STORE/blobs/<sha256>.whl    the artifacts, content-addressed (a :class:`Blobs`)

Blobs go through a small :class:`Blobs` protocol (``has``/``put``/``path``),
so an object store can take the folder's place without touching the
catalogue's semantics.

Names and references (:meth:`Store.resolve`):

* ``helpdesk`` — the artifact the name is pinned to now (publishing pins it,
  ``pin`` and ``rollback`` move it);
* ``helpdesk@3`` — the newest artifact published for world version 3;
* ``helpdesk@<hex>`` — the artifact whose digest or content hash starts with
  ``<hex>`` (at least 8 digits; an ambiguous prefix is refused).

Guards: publishing an artifact whose world version is already published with
another content hash is refused, naming the parts that differ: a
score-relevant change needs a version bump. Publishing the same bytes twice is
a no-op. Every publish, pin and rollback is one transaction and one line of
the history, so ``rollback`` restores the previous pin for everyone who
resolves the name.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mirrorworld.errors import MirrorworldError
from mirrorworld.ship.artifact import Artifact, write_shared
from mirrorworld.ship.manifest import Manifest, differing_parts

__all__ = ["Blobs", "FolderBlobs", "Published", "Store", "StoreError", "default_store_path", "split_ref"]

_REF = re.compile(r"([a-z][a-z0-9_]{0,63})(?:@([0-9]{1,6}|[0-9a-f]{8,64}))?\Z")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS artifacts (
    digest       TEXT PRIMARY KEY,
    world        TEXT NOT NULL,
    version      INTEGER NOT NULL,
    env_id       TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    manifest     TEXT NOT NULL,
    size         INTEGER NOT NULL,
    published_at REAL NOT NULL,
    seq          INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS artifacts_world ON artifacts(world, version, seq);
CREATE TABLE IF NOT EXISTS pins (
    world  TEXT PRIMARY KEY,
    digest TEXT NOT NULL REFERENCES artifacts(digest)
);
CREATE TABLE IF NOT EXISTS history (
    id       INTEGER PRIMARY KEY,
    world    TEXT NOT NULL,
    action   TEXT NOT NULL CHECK (action IN ('publish', 'pin', 'rollback')),
    digest   TEXT NOT NULL,
    previous TEXT,
    at       REAL NOT NULL,
    note     TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS history_world ON history(world, id);
"""


def _check_catalogue(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a catalogue that is not plain tables (a view or trigger could make every read hang or write)."""
    conn.execute("PRAGMA trusted_schema=OFF")
    rows = conn.execute("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_autoindex_%'").fetchall()
    expected = {("table", "artifacts"), ("table", "pins"), ("table", "history")}
    indexes = {("index", "artifacts_world"), ("index", "history_world")}
    extra = sorted(set(map(tuple, rows)) - expected - indexes)
    if extra:
        kind, name = extra[0]
        raise StoreError(f"{path} is not a version store catalogue (it holds the {kind} {ascii(name)[:60]})")


class StoreError(MirrorworldError):
    """A version-store operation that cannot be done (unknown name, guard refused, damaged store)."""


class Blobs(Protocol):
    """Where a store keeps artifact bytes, by digest."""

    def has(self, digest: str) -> bool: ...

    def put(self, digest: str, data: bytes) -> None: ...

    def path(self, digest: str) -> Path: ...


class FolderBlobs:
    """Blobs as files ``<root>/<digest>.whl``, written atomically."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, digest: str) -> Path:
        return self.root / f"{digest}.whl"

    def has(self, digest: str) -> bool:
        return self.path(digest).is_file()

    def put(self, digest: str, data: bytes) -> None:
        """Store ``data`` under ``digest`` (it must hash to it); a damaged copy already there is replaced."""
        if hashlib.sha256(data).hexdigest() != digest:
            raise StoreError("the bytes to store do not match their digest")
        path = self.path(digest)
        if path.is_file():
            try:
                if hashlib.sha256(path.read_bytes()).hexdigest() == digest:
                    return
            except OSError:
                pass
        self.root.mkdir(parents=True, exist_ok=True)
        write_shared(path, data)


@dataclass(frozen=True)
class Published:
    """One published artifact as the catalogue has it."""

    digest: str
    manifest: Manifest
    size: int
    published_at: float
    pinned: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "digest": self.digest,
            "env_id": self.manifest.env_id,
            "version": self.manifest.version,
            "content_hash": self.manifest.content_hash,
            "size": self.size,
            "published_at": self.published_at,
            "pinned": self.pinned,
        }


def default_store_path() -> Path:
    """``MIRRORWORLD_STORE``, else ``$MIRRORWORLD_CACHE/store`` (``~/.cache/mirrorworld/store``)."""
    explicit = os.environ.get("MIRRORWORLD_STORE")
    if explicit:
        return Path(explicit)
    from mirrorworld.cache import cache_root

    return cache_root("store")


def split_ref(ref: str) -> tuple[str, str | None]:
    """``("helpdesk", "3")`` for ``helpdesk@3``; ``(name, None)`` for a bare name. Refuses anything else."""
    m = _REF.match(ref) if isinstance(ref, str) else None
    if m is None:
        raise StoreError(
            f"{ascii(ref)[:80]} is not a world reference (NAME, NAME@VERSION or NAME@HASH with 8+ hex digits)"
        )
    return m.group(1), m.group(2)


class Store:
    """A version store at ``root`` (created on first write)."""

    def __init__(self, root: str | Path | None = None, blobs: Blobs | None = None) -> None:
        self.root = Path(root) if root is not None else default_store_path()
        self.blobs: Blobs = blobs or FolderBlobs(self.root / "blobs")

    @contextmanager
    def _db(self, write: bool = False) -> Iterator[sqlite3.Connection]:
        path = self.root / "catalogue.sqlite"
        if not write and not path.exists():
            conn = sqlite3.connect(":memory:")
        else:
            self.root.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, timeout=30, isolation_level=None)
        try:
            try:
                _check_catalogue(conn, path)
                conn.executescript(_SCHEMA)
                if write:
                    conn.execute("BEGIN IMMEDIATE")
            except sqlite3.DatabaseError as err:
                raise StoreError(f"{path} is not a version store catalogue ({err})") from None
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            if conn.in_transaction:
                conn.execute("COMMIT")
        finally:
            conn.close()

    # -- writing -------------------------------------------------------------------

    def publish(
        self, artifact: Artifact | str | Path, *, note: str = "", pin: bool = True, verify: bool = True
    ) -> Published:
        """Add an artifact (checked) and, with ``pin``, point its world's name at it.

        With ``verify`` (the default) the artifact's own code is run once, in a
        child process, to check that it gives the manifest it declares
        (:func:`mirrorworld.ship.verify.verify_code`): a manifest cannot vouch
        for code it does not describe. Refused when the same world version is
        already published with another content hash (the message names the
        differing parts).
        """
        art = artifact if isinstance(artifact, Artifact) else Artifact.open(artifact)
        m = art.manifest
        if verify:
            from mirrorworld.ship.verify import verify_code

            verify_code(art)
        with self._db(write=True) as db:
            clash = db.execute(
                "SELECT manifest FROM artifacts WHERE world=? AND version=? AND content_hash<>? ORDER BY seq DESC",
                (m.world, m.version, m.content_hash),
            ).fetchone()
            if clash is not None:
                old = Manifest.from_json(clash[0].encode())
                parts = ", ".join(differing_parts(old.parts, m.parts)) or "its id"
                raise StoreError(
                    f"{m.env_id} is published with content hash {old.content_hash}; this artifact's"
                    f" {m.content_hash} differs in {parts}: bump the world's version to publish it"
                )
            self.blobs.put(art.digest, art.data)
            known = db.execute("SELECT 1 FROM artifacts WHERE digest=?", (art.digest,)).fetchone()
            if known is None:
                seq = int(db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM artifacts").fetchone()[0])
                db.execute(
                    "INSERT INTO artifacts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        art.digest,
                        m.world,
                        m.version,
                        m.env_id,
                        m.content_hash,
                        m.to_json().decode(),
                        art.size,
                        time.time(),
                        seq,
                    ),
                )
            if pin:
                self._move(db, m.world, art.digest, "publish", note)
        return self._published(art.digest)

    def pin(self, ref: str, *, note: str = "") -> Published:
        """Point the name of ``ref``'s world at the artifact ``ref`` names (``helpdesk@3``, ``helpdesk@<hash>``)."""
        world, _ = split_ref(ref)
        digest = self._find(ref).digest
        with self._db(write=True) as db:
            self._move(db, world, digest, "pin", note)
        return self._published(digest)

    def rollback(self, world: str, *, note: str = "") -> Published:
        """Point ``world`` back at the artifact it resolved to before its current pin.

        The name's pins form a stack: a publish or a pin pushes, a rollback
        pops. Publishing A, B, C and rolling back twice returns to A; a third
        rollback is refused (nothing is older).
        """
        world, ref = split_ref(world)
        if ref is not None:
            raise StoreError("rollback takes a world name, not a reference (pin moves a name to a reference)")
        with self._db(write=True) as db:
            stack = self._stack(db, world)
            if not stack:
                raise StoreError(f"nothing is published for {world} in {self.root}")
            if len(stack) < 2:
                raise StoreError(f"{world} has no earlier pin to roll back to")
            target = stack[-2]
            self._move(db, world, target, "rollback", note)
        return self._published(target)

    def previous(self, world: str) -> Artifact | None:
        """What ``world``'s name pointed at before its current pin (what ``rollback`` would restore), if anything."""
        with self._db() as db:
            stack = self._stack(db, world)
        return None if len(stack) < 2 else self.resolve(f"{world}@{stack[-2]}")

    @staticmethod
    def _stack(db: sqlite3.Connection, world: str) -> list[str]:
        """The name's pins as a stack, replayed from its history (publish and pin push, rollback pops)."""
        stack: list[str] = []
        for action, digest in db.execute("SELECT action, digest FROM history WHERE world=? ORDER BY id", (world,)):
            if action == "rollback":
                if stack:
                    stack.pop()
            elif not stack or stack[-1] != digest:
                stack.append(str(digest))
        return stack

    @staticmethod
    def _move(db: sqlite3.Connection, world: str, digest: str, action: str, note: str) -> None:
        old = db.execute("SELECT digest FROM pins WHERE world=?", (world,)).fetchone()
        previous = None if old is None else str(old[0])
        if previous == digest and action == "publish":
            return
        db.execute("INSERT OR REPLACE INTO pins VALUES (?, ?)", (world, digest))
        db.execute(
            "INSERT INTO history (world, action, digest, previous, at, note) VALUES (?, ?, ?, ?, ?, ?)",
            (world, action, digest, previous, time.time(), str(note)[:500]),
        )

    # -- reading -------------------------------------------------------------------

    def resolve(self, ref: str) -> Artifact:
        """The artifact ``ref`` names, read from the store and checked."""
        found = self._find(ref)
        path = self.blobs.path(found.digest)
        art = Artifact.open(path)
        if art.digest != found.digest:
            raise StoreError(f"the store's copy of {found.digest[:16]} does not match its digest (altered?)")
        return art

    def _find(self, ref: str) -> Published:
        world, which = split_ref(ref)
        with self._db() as db:
            if which is None:
                row = db.execute("SELECT digest FROM pins WHERE world=?", (world,)).fetchone()
                if row is None:
                    raise StoreError(f"nothing is published for {world} in {self.root}")
                digest = str(row[0])
            elif len(which) <= 6:
                row = db.execute(
                    "SELECT digest FROM artifacts WHERE world=? AND version=? ORDER BY seq DESC LIMIT 1",
                    (world, int(which)),
                ).fetchone()
                if row is None:
                    raise StoreError(f"{world} version {which} is not published in {self.root}")
                digest = str(row[0])
            else:
                rows = db.execute(
                    "SELECT digest, content_hash FROM artifacts WHERE world=?"
                    " AND (substr(digest, 1, ?)=? OR (? <= 16 AND substr(content_hash, 1, ?)=?)) ORDER BY seq DESC",
                    (world, len(which), which, len(which), len(which), which),
                ).fetchall()
                if not rows:
                    raise StoreError(f"no artifact of {world} has the digest or content hash {which}")
                if len({str(r[1]) for r in rows}) > 1:
                    raise StoreError(f"{world}@{which} is ambiguous: give more digits")
                digest = str(rows[0][0])  # the newest build of that content
        return self._published(digest)

    def _published(self, digest: str) -> Published:
        with self._db() as db:
            row = db.execute(
                "SELECT a.manifest, a.size, a.published_at, p.digest IS NOT NULL FROM artifacts a"
                " LEFT JOIN pins p ON p.world=a.world AND p.digest=a.digest WHERE a.digest=?",
                (digest,),
            ).fetchone()
        if row is None:
            raise StoreError(f"no artifact {digest[:16]} in {self.root}")
        try:
            manifest = Manifest.from_json(str(row[0]).encode())
            size, at = int(row[1]), float(row[2])
        except (TypeError, ValueError, OverflowError, MirrorworldError) as err:
            raise StoreError(f"{self.root}: the catalogue's entry for {digest[:16]} is damaged ({err})") from None
        if not (size >= 0 and math.isfinite(at)):
            raise StoreError(f"{self.root}: the catalogue's entry for {digest[:16]} is damaged")
        return Published(digest, manifest, size, at, bool(row[3]))

    def published(self, world: str | None = None) -> list[Published]:
        """Every published artifact (of ``world``), oldest first."""
        with self._db() as db:
            rows = db.execute(
                "SELECT digest FROM artifacts WHERE ? IS NULL OR world=? ORDER BY world, seq", (world, world)
            ).fetchall()
        return [self._published(str(r[0])) for r in rows]

    def history(self, world: str) -> list[dict[str, Any]]:
        """The moves of ``world``'s name, oldest first."""
        with self._db() as db:
            rows = db.execute(
                "SELECT action, digest, previous, at, note FROM history WHERE world=? ORDER BY id", (world,)
            ).fetchall()
        out = []
        for a, d, p, t, n in rows:
            try:
                at = float(t)
                if not math.isfinite(at) or abs(at) > 1e11:
                    raise ValueError
            except (TypeError, ValueError, OverflowError):
                raise StoreError(f"{self.root}: the catalogue's history of {world} is damaged") from None
            out.append({"action": str(a), "digest": str(d), "previous": p, "at": at, "note": str(n)})
        return out

    def manifest_json(self, ref: str) -> dict[str, Any]:
        found = self._find(ref)
        return {"digest": found.digest, "pinned": found.pinned, **json.loads(found.manifest.to_json())}
