"""The real twin behind the same tool interface as the mirror.

A :class:`TwinBackend` loads a private copy of a cached Tryton database (see
:mod:`mirrorworld.twin.db`) into this process; :meth:`TwinBackend.session`
opens a :class:`TwinSession`, which is to the twin what
:class:`~mirrorworld.core.session.Session` is to the mirror:

* ``call(tool, args)`` takes the same tool names and the same argument JSON,
  validates them with the mirror's own tool declarations (one argument
  interface), runs the tool on Tryton and returns a
  :class:`~mirrorworld.core.session.ToolResult` — data on success,
  ``{code, message}`` on refusal, never an exception for agent input;
* every call runs inside a savepoint of one database transaction: a refused
  call (a ``ToolError`` or a Tryton ``UserError``) is rolled back whole, and
  closing the session rolls the whole episode back, so the twin's database is
  never changed by a session and every session starts from the same state;
* ``canonical_state()`` exports the business state in the same canonical form
  as the mirror's :func:`~mirrorworld.worlds.sales.world.canonical_state`;
* ``decided_by`` says who decided the last call's outcome (:data:`DECIDERS`):
  ``real`` — Tryton: its models answered, its workflow, validation or wizard
  accepted or refused; ``adapter`` — a rule of the desk's that the adapter
  applies to Tryton's state (discount approvals, which Tryton has no notion
  of, all-or-nothing shipping, the write-off limit, which invoices are
  credited and that credit notes are not paid); ``shared`` — mirror code
  both backends run: the argument interface (unknown tools, argument
  validation, the ``rules.py`` checks and text cleaning) and the calls the
  session answers itself (``get_policy``, ``respond``). A refusal is
  attributed to the code that raised it: the module of the innermost frame of
  the exception.

Tryton holds process-wide state, so a process runs one twin backend and one
session at a time (enforced).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Any

from mirrorworld.core.codec import parse_args  # one argument parser for both backends
from mirrorworld.core.session import ToolResult
from mirrorworld.core.world import World
from mirrorworld.errors import MirrorworldError, ToolError, WorldError
from mirrorworld.twin import tryton

__all__ = ["TwinBackend", "TwinSession"]

DB_NAME = "twin"
DECIDERS = ("real", "adapter", "shared")
"""Who decides a twin call's outcome, from the most to the least faithful (see the module docstring)."""
ADAPTER_TOOLS = frozenset({"request_discount_approval"})
"""Tools whose success the adapter makes (approvals are the desk's, kept as notes on the sale)."""
_ACTIVE: list[TwinBackend] = []


def copy_database(src: Path, dst: Path) -> None:
    """Copy a SQLite database consistently (write-ahead log included)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    target = sqlite3.connect(dst)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


class TwinBackend:
    """A twin database loaded in this process. Use as a context manager or call ``close``."""

    def __init__(self, world: World, database: Path) -> None:
        if _ACTIVE:
            raise MirrorworldError("a twin backend is already open in this process (Tryton is process-wide)")
        if not tryton.available():
            raise MirrorworldError("Tryton is not installed: pip install 'mirrorworld[twin]'")
        if world.data_name != "sales":  # the sales world, or a version derived from it
            raise WorldError(f"world {world.name} has no real twin")
        self.world = world
        self._dir = Path(tempfile.mkdtemp(prefix="mw-twin-"))
        copy_database(database, self._dir / f"{DB_NAME}.sqlite")
        tryton.configure(str(self._dir))
        from mirrorworld.worlds.sales.rules import SIM_DATE

        started = time.perf_counter()
        self.pool = tryton.load_pool(DB_NAME, date.fromisoformat(SIM_DATE))
        tryton.relax_email_check()
        self.load_seconds = time.perf_counter() - started
        self._session: TwinSession | None = None
        _ACTIVE.append(self)

    def session(self) -> TwinSession:
        """A new session in the pristine state (one at a time)."""
        if self._session is not None and not self._session.closed:
            raise MirrorworldError("a twin session is already open; close it first")
        self._session = TwinSession(self)
        return self._session

    def close(self) -> None:
        if self._session is not None and not self._session.closed:
            self._session.close()
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> TwinBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TwinSession:
    """One episode on the twin: a Tryton transaction that is always rolled back at the end."""

    def __init__(self, backend: TwinBackend, *, commit_on_close: bool = False) -> None:
        from mirrorworld.twin.sales import context

        self.backend = backend
        self.world = backend.world
        self.pool = backend.pool
        self.closed = False
        self.done = False
        self.final_message: str | None = None
        self.commit_on_close = commit_on_close
        self.decided_by = "shared"
        with tryton.quiet():
            from trytond.transaction import Transaction  # type: ignore[import-untyped,import-not-found]

            self._tx = Transaction().start(DB_NAME, 0)
            # A twin session is the database's only user: it holds every table lock
            # Tryton asks for (Tryton would otherwise restart the transaction to take it).
            self._tx._locked_tables = _Everything()
            self._ctx = self._tx.set_context(context(self.pool))
            self._ctx.__enter__()

    # -- stepping -----------------------------------------------------------

    def call(self, tool: str, args: Mapping[str, Any] | str | None = None) -> ToolResult:
        """Run one tool call atomically. Never raises for agent input."""
        from mirrorworld.twin.sales import TOOLS

        if self.closed:
            raise MirrorworldError("twin session is closed")
        self.decided_by = "shared"
        if self.done:
            return _error(ToolError("episode_over", "the episode has ended"))
        spec = self.world.tools_by_name.get(tool) if isinstance(tool, str) else None
        if spec is None:
            name = tool if isinstance(tool, str) else repr(tool)
            shown = name if len(name) <= 60 else name[:57] + "..."
            return _error(ToolError("unknown_tool", f"no tool named {json.dumps(shown)}"))
        try:
            kwargs = spec.validate(parse_args(args))
        except ToolError as err:
            return _error(err)
        if spec.kind == "terminal":
            message = str(kwargs.get("message", ""))
            if not message.strip():
                return _error(ToolError("invalid_arguments", "message must not be empty"))
            self.final_message, self.done = message, True
            return ToolResult(True, {"sent": True}, done=True)
        if spec.name == "get_policy":
            return ToolResult(True, {"policy": self.world.policy})
        return self._run(TOOLS[spec.name], kwargs, spec.name)

    def _run(self, func: Any, kwargs: dict[str, Any], name: str) -> ToolResult:
        from mirrorworld.twin.sales import ERROR_CODES

        with tryton.quiet():
            from trytond.cache import Cache  # type: ignore[import-untyped,import-not-found]
            from trytond.exceptions import UserError, UserWarning  # type: ignore[import-untyped,import-not-found]

            connection = self._tx.connection
            cursor = connection.cursor()
            if not connection.in_transaction:
                # An outermost savepoint would commit on RELEASE: open the episode's transaction first.
                cursor.execute("BEGIN IMMEDIATE")
            cursor.execute("SAVEPOINT mw_call")
            try:
                data = func(self.pool, **kwargs)
            except (ToolError, UserError, UserWarning) as exc:
                cursor.execute("ROLLBACK TO mw_call")
                cursor.execute("RELEASE mw_call")
                for cache in self._tx.cache.values():
                    cache.clear()
                Cache.rollback(self._tx)
                self.decided_by = _decider(exc)
                if isinstance(exc, ToolError):
                    return _error(exc)
                code = ERROR_CODES.get(type(exc).__name__, "validation_error")
                return _error(ToolError(code, str(exc.message)))
            except BaseException:
                cursor.execute("ROLLBACK TO mw_call")
                cursor.execute("RELEASE mw_call")
                raise
            cursor.execute("RELEASE mw_call")
        self.decided_by = "adapter" if name in ADAPTER_TOOLS else "real"
        return ToolResult(True, data)

    # -- state --------------------------------------------------------------

    def canonical_state(self) -> dict[str, Any]:
        from mirrorworld.twin.sales import canonical_state

        with tryton.quiet():
            return canonical_state(self.pool)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        with tryton.quiet():
            self._ctx.__exit__(None, None, None)
            self._tx.stop(self.commit_on_close)

    def __enter__(self) -> TwinSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Everything(set[str]):
    """A set that contains every table name."""

    def __contains__(self, item: object) -> bool:
        return True


def _decider(exc: BaseException) -> str:
    """Who refused: an explicit mark, else the module that raised the exception (see the module docstring)."""
    marked = getattr(exc, "decided_by", None)
    if marked in DECIDERS:
        return str(marked)
    if not isinstance(exc, ToolError):
        return "real"  # Tryton's UserError or UserWarning
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    module = tb.tb_frame.f_globals.get("__name__", "") if tb is not None else ""
    return "real" if module == "mirrorworld.twin.sales" else "shared"


def _error(err: ToolError) -> ToolResult:
    return ToolResult(False, error=err.as_dict())
