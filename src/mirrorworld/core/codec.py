"""The JSON of a tool call: the arguments an agent sends, the result it reads.

Arguments (:func:`parse_args`) arrive as whatever an adapter received and
leave as a mapping of argument names, or as a :class:`ToolError` the agent
sees; nothing an agent sends raises anything else:

* a ``dict`` whose keys are all strings is used as it is (the common case,
  checked first and answered without copying);
* ``None``, an empty string or one of only whitespace means no arguments;
* a string is the JSON text of one object, at most :data:`MAX_ARGS_CHARS`
  characters, with nothing but whitespace after it: too long is
  ``invalid_arguments``, text that is not JSON (or nests too deep to parse)
  is ``invalid_json``, JSON that is not an object is ``invalid_arguments``.
  The standard library's scanner reads it, as ``json.loads`` would: escaped
  lone surrogates, ``NaN`` and ``Infinity`` are accepted (the tool's
  declaration then decides whether such a value is valid);
* any other mapping whose keys are all strings is used as it is;
* anything else is ``invalid_arguments``.

Results (:func:`encode`) are compact ASCII-only JSON (``,`` and ``:`` without
spaces), keys in the order the tool built them, a ``Decimal`` as a float.
Event records (:func:`jsonable`) keep a ``Decimal`` argument as its exact
string, so a trajectory says what was sent, not a rounding of it.

Both directions run on every step, so both are built once here:
``JSONEncoder.encode`` and ``json.loads`` make or wrap the C encoder and
scanner on each use, which costs about as much as encoding a small result.
Tool results are trees of rows, never cyclic, so the encoder skips the
circular-reference check.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from mirrorworld.errors import ToolError

__all__ = ["MAX_ARGS_CHARS", "encode", "jsonable", "parse_args"]

MAX_ARGS_CHARS = 20_000
"""Longest JSON argument text a call may carry."""


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def _json_codec() -> tuple[Callable[[Any], str], Callable[[str, int], tuple[Any, int]]]:
    """The compact ASCII encoder and the scanner, the C versions when present."""
    encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, default=_json_default)
    encode: Callable[[Any], str] = encoder.encode
    c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
    if c_make_encoder is not None:
        try:
            chunks = c_make_encoder(
                None, _json_default, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True
            )
        except TypeError:  # another interpreter's signature: keep the plain encoder
            pass
        else:

            def encode(value: Any) -> str:
                return "".join(chunks(value, 0))

    scan = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # set by JSONDecoder.__init__
    return encode, scan


encode, _scan = _json_codec()
"""``encode(value)``: the JSON text of a tool result (see the module docstring)."""


def parse_args(args: Mapping[str, Any] | str | None) -> Mapping[str, Any]:
    """The arguments of a call as a mapping of names (see the module docstring for the rules)."""
    if type(args) is dict and all(type(k) is str for k in args):
        return args
    if args is None:
        return {}
    if isinstance(args, str):
        if len(args) > MAX_ARGS_CHARS:
            raise ToolError("invalid_arguments", f"arguments longer than {MAX_ARGS_CHARS} characters")
        text = args.strip()
        if not text:
            return {}
        try:
            parsed, end = _scan(text, 0)
        except (ValueError, StopIteration, RecursionError):
            raise ToolError("invalid_json", "arguments are not valid JSON") from None
        if end != len(text):
            raise ToolError("invalid_json", "arguments are not valid JSON")
        if not isinstance(parsed, dict):
            raise ToolError("invalid_arguments", "arguments must be a JSON object")
        return parsed
    if isinstance(args, Mapping):
        if not all(isinstance(k, str) for k in args):
            raise ToolError("invalid_arguments", "argument names must be strings")
        return args
    raise ToolError("invalid_arguments", "arguments must be a JSON object")


def jsonable(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Validated arguments as an event records them: ``kwargs`` itself, or a copy with each ``Decimal`` a string."""
    for v in kwargs.values():
        if isinstance(v, Decimal):
            return {k: (str(v) if isinstance(v, Decimal) else v) for k, v in kwargs.items()}
    return kwargs
