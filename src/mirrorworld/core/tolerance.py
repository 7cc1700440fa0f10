"""Tolerances: the fields of a world's state that are not compared by equality, and why.

The verifier grades an episode's end state as a whole diff against the gold's
(see :mod:`mirrorworld.verify.verifier`): every field the episode changed must
be changed as the gold changed it, and every field the gold changed must be
changed the same way. A world declares, as data a reviewer can read, the few
columns where equality is the wrong test
(``World.tolerances``: table → column → :class:`Tolerance`):

* ``ignore`` — a column that says *when*, not *what* (a simulated
  timestamp); never compared. A world's ``volatile_columns`` are ``ignore``
  tolerances.
* ``id`` — a value drawn from a sequence or derived from a row id (a one-time
  code, a reference to a row of a table that depends on the row's kind):
  never compared; the rows it sits in are identified by their other columns.
* ``order`` — a position among sibling rows: never compared, so two valid
  orders of independent writes grade alike.
* ``text`` — free text an agent writes (a reason, a note, a reply): the
  episode's value is accepted when it is free text rather than junk (the
  verifier's text rule, with at least ``words`` different words), or is a
  value the gold wrote there; whether it is empty must match the gold. With
  ``echo`` (the default), where the gold writes a text of its own the
  episode's must say something about the case too: share a content word with
  the gold's text or the customer's words (a reason, a description). A field
  in the writer's own words with nothing to echo (a supervisor's "Approved.",
  a chat line) declares ``echo=False``. What it says is graded by the claim
  checker.
* ``choice`` — a workflow field an episode may move, where the gold leaves it
  as it was, to one of ``values``, on an entity of the task's scope (replying
  to a new ticket opens it; a solved contact is a valid end). A field the
  gold changes must still end as the gold's.

Rows: a world also names the tables whose *extra* rows are harmless
(``World.optional_rows``: table → why), such as a supervisor approval asked
for and not needed or an internal note. An extra row of such a table passes
when it belongs to an entity of the task's scope and its ``text`` columns pass
the text rule; an extra row of any other table, or outside the scope, fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Tolerance", "ToleranceKind"]

ToleranceKind = Literal["ignore", "id", "order", "text", "choice"]


@dataclass(frozen=True)
class Tolerance:
    """How one column is compared with the gold; ``why`` is the reason, for the reviewer."""

    kind: ToleranceKind
    why: str
    values: tuple[str, ...] = ()
    """For ``choice``: the values an episode may move the field to where the gold leaves it alone."""
    words: int = 2
    """For ``text``: the fewest different words (two letters or more) the text rule asks for."""
    echo: bool = True
    """For ``text``: whether the episode's text must echo the gold's (or the customer's) where the gold writes one."""

    def __post_init__(self) -> None:
        if self.kind not in ("ignore", "id", "order", "text", "choice"):
            raise ValueError(f"unknown tolerance kind {self.kind!r}")
        if (self.kind == "choice") != bool(self.values):
            raise ValueError("a choice tolerance, and only a choice tolerance, lists values")
        if self.words < 1:
            raise ValueError("a text tolerance asks for at least one word")
        if not self.why.strip():
            raise ValueError("a tolerance says why")

    @classmethod
    def ignore(cls, why: str) -> Tolerance:
        return cls("ignore", why)

    @classmethod
    def id(cls, why: str) -> Tolerance:
        return cls("id", why)

    @classmethod
    def order(cls, why: str) -> Tolerance:
        return cls("order", why)

    @classmethod
    def text(cls, why: str, *, words: int = 2, echo: bool = True) -> Tolerance:
        return cls("text", why, words=words, echo=echo)

    @classmethod
    def choice(cls, values: tuple[str, ...], why: str) -> Tolerance:
        return cls("choice", why, tuple(values))

    @property
    def compared(self) -> bool:
        """Whether the field's value takes part in the comparison at all (``ignore``, ``id``, ``order`` do not)."""
        return self.kind in ("text", "choice")
