"""Whether the final message communicates the facts a task requires.

Matching is normalised so that harmless variation never changes the result:
``$25``, ``25.00`` and ``25 dollars`` are the same amount; ``2026-03-05``,
``March 5, 2026``, ``5 Mar 2026`` and ``03/05/2026`` the same date; case and
whitespace never matter.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from decimal import Decimal, InvalidOperation

from mirrorworld.core.task import Fact
from mirrorworld.errors import VerifierError

__all__ = ["dates_in", "mentions", "missing_facts", "numbers_in", "stated_distractors"]

_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
_MONTHS = {
    m: i
    for i, names in enumerate(
        (
            ("jan", "january"),
            ("feb", "february"),
            ("mar", "march"),
            ("apr", "april"),
            ("may",),
            ("jun", "june"),
            ("jul", "july"),
            ("aug", "august"),
            ("sep", "sept", "september"),
            ("oct", "october"),
            ("nov", "november"),
            ("dec", "december"),
        ),
        1,
    )
    for m in names
}
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_MONTH_RE = "|".join(sorted(_MONTHS, key=len, reverse=True))
_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_US = re.compile(r"(\d{1,2})/(\d{1,2})/(\d{4})")
_MDY = re.compile(rf"\b({_MONTH_RE})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})", re.I)
_DMY = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_RE})\.?,?\s+(\d{{4}})", re.I)


def numbers_in(text: str, *, ids: bool = True) -> set[Decimal]:
    """Every number written in ``text``, as exact decimals.

    Numbers inside dates are not counted. With ``ids=False``, numbers written
    as identifiers (``#428``) are not counted either.
    """
    for pattern in (_ISO, _US, _MDY, _DMY):
        text = pattern.sub(" ", text)
    out = set()
    for m in _NUMBER.finditer(text):
        if not ids and m.start() > 0 and text[m.start() - 1] == "#":
            continue
        try:
            out.add(Decimal(m.group(0).replace(",", "")).normalize())
        except InvalidOperation:
            continue
    return out


def _safe_date(y: int, m: int, d: int) -> date | None:
    try:
        return date(y, m, d)
    except ValueError:
        return None


def dates_in(text: str) -> set[date]:
    """Every date written in ``text`` in a common format."""
    found: list[date | None] = []
    found += [_safe_date(int(y), int(m), int(d)) for y, m, d in _ISO.findall(text)]
    found += [_safe_date(int(y), int(m), int(d)) for m, d, y in _US.findall(text)]
    found += [_safe_date(int(y), _MONTHS[mo.lower()], int(d)) for mo, d, y in _MDY.findall(text)]
    found += [_safe_date(int(y), _MONTHS[mo.lower()], int(d)) for d, mo, y in _DMY.findall(text)]
    return {d for d in found if d is not None}


def _squash(text: str) -> str:
    return " ".join(text.casefold().split())


def _states(text: str, kind: str, value: str) -> bool:
    if kind in ("money", "number", "id"):
        try:
            wanted = Decimal(value).normalize()
        except InvalidOperation:
            raise VerifierError(f"a {kind} fact has the non-numeric value {value!r}") from None
        return wanted in numbers_in(text, ids=kind == "id")
    if kind == "date":
        return datetime.strptime(value[:10], "%Y-%m-%d").date() in dates_in(text)
    if kind == "email":
        return value.casefold() in {e.casefold().rstrip(".") for e in _EMAIL.findall(text)}
    return re.search(r"(?<!\w)" + re.escape(_squash(value)) + r"(?!\w)", _squash(text)) is not None


def mentions(text: str, fact: Fact) -> bool:
    """Whether ``text`` states ``fact`` (see the module docstring)."""
    return _states(text, fact.kind, fact.value)


def stated_distractors(text: str | None, fact: Fact) -> list[str]:
    """The plausible wrong answers to ``fact`` that ``text`` states."""
    if text is None:
        return []
    return [d for d in fact.distractors if d != fact.value and _states(text, fact.kind, d)]


def missing_facts(text: str | None, facts: tuple[Fact, ...]) -> list[Fact]:
    """The facts ``text`` does not state (all of them when there is no text)."""
    if text is None:
        return list(facts)
    return [f for f in facts if not mentions(text, f)]
