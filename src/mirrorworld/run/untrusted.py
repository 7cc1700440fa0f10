"""Reading untrusted JSON: run-file columns, JSON-lines files of episodes and traces.

Whatever a file holds, reading it ends in a value or in one
:class:`~mirrorworld.errors.RunFileError` line that names the file (and the
line) and what is wrong; nothing else escapes:

* text that is not JSON, or holds an integer of more digits than Python reads
  (4,300), is refused with the parser's own account of the first fault;
* nesting is bounded: a value deeper than :data:`MAX_DEPTH` levels is refused,
  whether the parser gives up on it (100,000 open brackets) or not (a few
  hundred, which would still crash whatever prints or walks it);
* a JSON-lines file is read as UTF-8 line by line, each line at most
  :data:`MAX_LINE` bytes, so neither invalid bytes nor a file with no newline
  in gigabytes gets further than the line that holds it. Only regular files
  are read: a FIFO or a device would block or never end.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mirrorworld.errors import RunFileError

__all__ = ["MAX_DEPTH", "MAX_LINE", "json_lines", "loads"]

MAX_DEPTH = 64
"""Deepest nesting of lists and objects read; what mirrorworld writes nests at most about ten deep."""

MAX_LINE = 64 << 20
"""Longest line of a JSON-lines file, in bytes."""


def _too_deep(value: Any) -> bool:
    """Whether ``value`` nests lists and objects more than :data:`MAX_DEPTH` deep (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > MAX_DEPTH:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def loads(text: str, what: str) -> Any:
    """The JSON value of ``text``; ``what`` names it in the error (``f"{path}: episode 3: messages"``)."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise RunFileError(f"{what} nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as err:
        raise RunFileError(f"{what} is not valid JSON ({str(err).split(';')[0][:120]})") from None
    if isinstance(value, (dict, list)) and _too_deep(value):
        raise RunFileError(f"{what} nests deeper than {MAX_DEPTH} levels")
    return value


def json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of each non-blank line of a JSON-lines file, numbered from 1."""
    if not path.is_file():
        raise RunFileError(f"no file at {path}")
    try:
        f = path.open("rb")
    except OSError as err:
        raise RunFileError(f"cannot read {path}: {err.strerror or err}") from None
    with f:
        number = 0
        while True:
            try:
                raw = f.readline(MAX_LINE + 1)
            except OSError as err:
                raise RunFileError(f"cannot read {path}: {err.strerror or err}") from None
            if not raw:
                return
            number += 1
            if len(raw) > MAX_LINE:
                raise RunFileError(f"{path}:{number}: line longer than {MAX_LINE} bytes")
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise RunFileError(f"{path}:{number}: not UTF-8 text (byte {err.start + 1} of the line)") from None
            if line.strip():
                yield number, loads(line, f"{path}:{number}")
