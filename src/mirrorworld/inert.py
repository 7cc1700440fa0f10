"""Untrusted text, made safe to print.

What an agent wrote, and whatever a run file, a trace or a JSONL file holds,
reaches the terminal through ``show``, run summaries, ``audit-run`` and
``fidelity``. Such text is hostile: an agent's message can carry escape
sequences that set the window title, clear the screen or write the clipboard
(OSC 52), bidi overrides that make a line read backwards, or rich markup
(``[bold red]PASSED[/]``, ``[/INST]``) that would restyle the tool's own
verdict or make rich raise. Everything printed from such a source goes
through :func:`inert` (plain text) or :func:`text` (a rich ``Text``):

* every character that is not printable is shown as its Python escape
  (``\\x1b``, ``\\x9b``, ``\\u202e``): C0 controls (ESC, BEL, CR, backspace),
  DEL, C1 controls (among them the one-byte CSI and OSC introducers), Unicode
  format characters (bidi overrides and isolates, zero-width characters),
  line and paragraph separators, surrogates, private-use and unassigned code
  points. A terminal never receives a control sequence from the data, and text
  never reorders itself. Newlines and tabs are kept, unless ``lines=False``
  (an error message is one line);
* the text is bounded: cut at ``limit`` characters, an ellipsis marking the cut;
* it is never markup: :func:`text` gives a ``Text``, which rich prints as it is
  (no ``[tags]``, no ``:emoji:`` codes). Compose a line from our own words and
  data with ``Text.assemble``, whose plain strings are not markup either; a
  table cell is a ``Text`` too, never a string (rich reads a string as markup).

A value that is not a string is rendered with ``str``; one that cannot be (an
integer of more digits than Python prints, a structure nested past the
recursion limit) is shown as its type.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

__all__ = ["inert", "text"]

_KEPT = frozenset("\n\t")


def _escape(c: str, keep: frozenset[str]) -> str:
    if c.isprintable() or c in keep:
        return c
    return ascii(c)[1:-1]


def inert(value: Any, limit: int = 2000, *, lines: bool = True) -> str:
    """``value`` as plain text with no control or format character in it, at most ``limit`` characters (see above)."""
    if isinstance(value, str):
        raw = value
    else:
        try:
            raw = str(value)
        except (ValueError, RecursionError, MemoryError):
            raw = f"<{type(value).__name__}>"
    cut = len(raw) > limit
    if cut:
        raw = raw[:limit]
    if not raw.isprintable():
        keep = _KEPT if lines else frozenset()
        raw = "".join([_escape(c, keep) for c in raw])
    return raw + "…" if cut else raw


def text(value: Any, limit: int = 2000, *, style: str = "", lines: bool = True) -> Text:
    """``value`` as :func:`inert` text in a rich ``Text`` (never read as markup), styled ``style``."""
    return Text(inert(value, limit, lines=lines), style=style)
