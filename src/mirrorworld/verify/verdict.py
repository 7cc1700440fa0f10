"""The verdict on one episode.

``passed`` is true only when every gate passes; ``score`` is 1.0 when passed and
0.0 otherwise, so no partial credit can be farmed from the parts of a task that
are easy. ``breakdown`` keeps each gate's result with its evidence, and the
fraction of the task's checks that held at the start and at the end (``process``).

A verdict is stored as :meth:`Verdict.to_dict` (in run files, review databases,
server replies) and rebuilt with :meth:`Verdict.from_dict`, exactly:
``Verdict.from_dict(v.to_dict()) == v``. Stored verdicts are untrusted input, so
``from_dict`` checks every type and bound and refuses anything else with a
one-line :class:`~mirrorworld.errors.RunFileError` naming the offending field.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, NoReturn

from mirrorworld.errors import RunFileError

__all__ = ["GATES", "MAX_DEPTH", "MAX_ITEMS", "MAX_TEXT", "Gate", "Verdict"]

GATES = ("state", "collateral", "policy", "communication", "reply")
"""The gates an episode must all pass, in report order."""

MAX_TEXT = 100_000
"""The longest string a stored verdict may hold (characters)."""
MAX_ITEMS = 100_000
"""The most entries one list or mapping of a stored verdict may hold."""
MAX_DEPTH = 32
"""The deepest nesting of lists and mappings a stored verdict may hold."""

_SECTIONS = ("process", "guards")
"""The breakdown's entries that are not gates."""
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")


def _refuse(where: str, what: str) -> NoReturn:
    raise RunFileError(f"malformed verdict: {where} {what}")


def _type(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _at(where: str, key: Any) -> str:
    """``where.key`` for a plain key, else the key's ``ascii()`` (so a hostile key stays on one line)."""
    if isinstance(key, str) and _NAME.fullmatch(key):
        return f"{where}.{key}"
    text = ascii(key[:40]) if isinstance(key, str) else f"<{_type(key)}>"
    return f"{where}[{text}]"


def _sized(value: list[Any] | tuple[Any, ...] | dict[Any, Any], where: str) -> None:
    if len(value) > MAX_ITEMS:
        _refuse(where, f"has {len(value)} entries (at most {MAX_ITEMS})")


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        _refuse(where, f"is {_type(value)}, not an object")
    _sized(value, where)
    for key in value:
        if not isinstance(key, str):
            _refuse(_at(where, key), "is not a string key")
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        _refuse(where, f"is {_type(value)}, not a string")
    if len(value) > MAX_TEXT:
        _refuse(where, f"is {len(value)} characters long (at most {MAX_TEXT})")
    return value


def _data(value: Any, where: str, depth: int = 0) -> Any:
    """A checked copy of JSON data (lists and tuples keep their type, so in-memory verdicts round-trip)."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            _refuse(where, f"is {value}, not a finite number")
        return value
    if isinstance(value, str):
        return _text(value, where)
    if depth >= MAX_DEPTH:
        _refuse(where, f"nests deeper than {MAX_DEPTH} levels")
    if isinstance(value, (list, tuple)):
        _sized(value, where)
        items = [_data(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
        return tuple(items) if isinstance(value, tuple) else items
    if isinstance(value, dict):
        return {k: _data(v, _at(where, k), depth + 1) for k, v in _mapping(value, where).items()}
    _refuse(where, f"is {_type(value)}, not JSON data")


def _flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        _refuse(where, f"is {_type(value)}, not a boolean")
    return value


def _field(d: dict[str, Any], key: str, where: str) -> Any:
    if key not in d:
        _refuse(where, f"has no {key!r}")
    return d[key]


def _texts(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)):
        _refuse(where, f"is {_type(value)}, not a list of strings")
    _sized(value, where)
    return tuple(_text(v, f"{where}[{i}]") for i, v in enumerate(value))


@dataclass(frozen=True)
class Gate:
    """One gate's result: whether it passed and the evidence for it."""

    passed: bool
    evidence: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    """Gate-specific figures, stored beside ``passed`` and ``evidence`` (so neither may be a key here)."""

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "evidence": list(self.evidence), **self.details}

    @classmethod
    def from_dict(cls, d: Any, *, where: str = "gate") -> Gate:
        """The gate stored as ``d`` (its :meth:`to_dict`); raises ``RunFileError`` on anything malformed."""
        d = _mapping(d, where)
        passed = _flag(_field(d, "passed", where), f"{where}.passed")
        evidence = _texts(_field(d, "evidence", where), f"{where}.evidence")
        details = {k: _data(v, _at(where, k), 1) for k, v in d.items() if k not in ("passed", "evidence")}
        return cls(passed, evidence, details)


@dataclass(frozen=True)
class Verdict:
    """The grade of one episode. See the module docstring."""

    passed: bool
    score: float
    gates: dict[str, Gate]
    process: dict[str, Any]
    guards: dict[str, Any]

    @property
    def breakdown(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: g.to_dict() for name, g in self.gates.items()}
        out["process"] = self.process
        out["guards"] = self.guards
        return out

    @property
    def evidence(self) -> list[str]:
        return [f"{name}: {e}" for name, g in self.gates.items() for e in g.evidence]

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "score": self.score,
            "breakdown": self.breakdown,
            "evidence": self.evidence,
        }

    @classmethod
    def from_dict(cls, d: Any) -> Verdict:
        """The verdict stored as ``d`` (its :meth:`to_dict`), checked field by field.

        ``evidence`` is derived from the gates, so a stored copy is checked for
        its type only; keys a reader adds beside the four (a team run's
        ``team``) are left to that reader. Raises
        :class:`~mirrorworld.errors.RunFileError`, with a one-line message
        naming the field, for anything that is not a stored verdict: a missing
        field, a wrong type, a non-finite or out-of-range score, a string, list
        or nesting beyond :data:`MAX_TEXT`, :data:`MAX_ITEMS`, :data:`MAX_DEPTH`.
        """
        d = _mapping(d, "verdict")
        passed = _flag(_field(d, "passed", "verdict"), "verdict.passed")
        score = _field(d, "score", "verdict")
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            _refuse("verdict.score", f"is {_type(score)}, not a number")
        if not (math.isfinite(score) and 0.0 <= score <= 1.0):
            _refuse("verdict.score", f"is {score}, not a number from 0 to 1")
        if "evidence" in d:
            _texts(d["evidence"], "verdict.evidence")
        breakdown = _mapping(_field(d, "breakdown", "verdict"), "verdict.breakdown")
        sections = {}
        for name in _SECTIONS:
            where = f"verdict.breakdown.{name}"
            sections[name] = _data(_mapping(_field(breakdown, name, "verdict.breakdown"), where), where, 1)
        gates = {
            name: Gate.from_dict(g, where=_at("verdict.breakdown", name))
            for name, g in breakdown.items()
            if name not in _SECTIONS
        }
        return cls(passed, float(score), gates, sections["process"], sections["guards"])
