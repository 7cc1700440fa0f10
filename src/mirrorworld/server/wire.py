"""What every protocol of the server speaks alike: JSON bodies, error responses, client keys.

The session routes (:mod:`~mirrorworld.server.app`), the OpenEnv routes
(:mod:`~mirrorworld.server.openenv`) and the MCP endpoint
(:mod:`~mirrorworld.server.mcp`) read and write bodies through these helpers,
so a body means the same on every route and a refusal looks the same
everywhere: ``{"error": {code, message}}`` with its HTTP status, and a
``Retry-After`` header when the error says when to retry.

* :func:`dumps` / :func:`json_response` — orjson, with the standard library
  for the strings orjson refuses (lone surrogates an agent wrote into a
  record); a :class:`~mirrorworld.server.sessions.RawJSON` value is spliced in
  as the text it already is.
* :func:`parse_json` — the same two parsers the other way round; ``NaN`` and
  ``Infinity`` are refused (they are not JSON).
* :func:`step_args` — ``(tool, args)`` of a step body, with the checks that
  :class:`~mirrorworld.server.models.StepRequest` documents.
* :func:`guarded` — a route that answers every failure with a JSON error: an
  ``ApiError`` as itself, anything else as a logged ``500`` that names the
  boundary that failed and never the exception's text. A client that hangs
  up before its body has arrived is neither: it gets no answer and logs
  nothing beyond its access line (a ``499``, see
  :class:`~mirrorworld.server.app.Gate`).
* :func:`inert` — an untrusted value (a path, a header, a client's id) as text
  that is safe to log: one line, no terminal escapes, bounded length.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson
from fastapi import Request
from fastapi.responses import Response
from starlette.requests import ClientDisconnect

from mirrorworld.errors import MirrorworldError
from mirrorworld.inert import inert as _inert
from mirrorworld.server.config import ServerConfig
from mirrorworld.server.models import request_schema
from mirrorworld.server.sessions import ApiError, RawJSON

__all__ = [
    "API_VERSION",
    "JSON_TYPE",
    "ASGIApp",
    "Message",
    "Receive",
    "Scope",
    "Send",
    "access",
    "body_schema",
    "client_of",
    "dumps",
    "error_response",
    "guarded",
    "inert",
    "internal_error",
    "json_response",
    "log",
    "parse_json",
    "step_args",
]

API_VERSION = "1.0.0"
"""Version of the wire protocol (the OpenAPI ``info.version``)."""

JSON_TYPE = "application/json"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger("mirrorworld.server")
access = logging.getLogger("mirrorworld.server.access")


def _orjson_default(value: Any) -> Any:
    if isinstance(value, RawJSON):
        return orjson.Fragment(value.text)
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def _stdlib_default(value: Any) -> Any:
    if isinstance(value, RawJSON):
        return json.loads(value.text)
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def dumps(obj: Any) -> bytes:
    """JSON bytes of ``obj`` (:class:`RawJSON` values spliced in as they are).

    orjson first; the standard library for what orjson refuses (strings that
    hold lone surrogates, which an agent can write into a record).
    """
    try:
        return orjson.dumps(obj, default=_orjson_default)
    except TypeError:
        return json.dumps(obj, ensure_ascii=True, separators=(",", ":"), default=_stdlib_default).encode()


def json_response(body: Any, status: int = 200) -> Response:
    """A JSON response (see :func:`dumps`)."""
    return Response(dumps(body), status_code=status, media_type=JSON_TYPE)


def error_response(err: ApiError) -> Response:
    """The response of a refused request: its status, its ``{"error": ...}`` body, ``Retry-After`` if it has one."""
    headers = {"Retry-After": str(max(1, round(err.extra["retry_after_s"])))} if "retry_after_s" in err.extra else None
    return Response(dumps(err.body()), status_code=err.status, media_type=JSON_TYPE, headers=headers)


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


def parse_json(body: bytes | str, *, empty_ok: bool = True) -> Any:
    """The JSON value of a body (``{}`` for an empty one), or ``400 invalid_json``.

    orjson first; what it refuses is tried with the standard library, which
    accepts the escaped lone surrogates that ``Session.call`` accepts too (but
    not ``NaN`` or ``Infinity``, which are not JSON).
    """
    if empty_ok and (not body or not body.strip()):
        return {}
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(body, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        raise ApiError(400, "invalid_json", "the body is not valid JSON") from None


def step_args(obj: Any) -> tuple[str, Any]:
    """``(tool, args)`` from a step body, checked against :class:`StepRequest`."""
    if not isinstance(obj, dict):
        raise ApiError(400, "invalid_request", "the body must be a JSON object")
    tool = obj.get("tool")
    if not isinstance(tool, str):
        raise ApiError(400, "invalid_request", "tool: a string is required")
    if len(tool) > 200:
        raise ApiError(400, "invalid_request", "tool: at most 200 characters")
    args = obj.get("args")
    if args is not None and not isinstance(args, (dict, str)):
        raise ApiError(400, "invalid_request", "args: an object, a JSON string or null is required")
    if len(obj) > 2 or (len(obj) == 2 and "args" not in obj):
        extra = sorted(set(obj) - {"tool", "args"})
        raise ApiError(400, "invalid_request", f"{extra[0]}: unknown field")
    return tool, args


def inert(value: object, limit: int = 200) -> str:
    """``value`` as one line safe to put in a log: :func:`mirrorworld.inert.inert` with ``lines=False``.

    Every character that is not printable (line breaks, ``ESC`` and the other
    controls, Unicode separators and format characters, lone surrogates) is
    written as its Python escape, so a value can neither start a forged line
    nor drive a terminal; past ``limit`` characters the text is cut.
    """
    return _inert(value, limit, lines=False)


def client_of(scope: Scope) -> str:
    """The client key of a connection: the peer's address."""
    peer = scope.get("client")
    return str(peer[0]) if peer else "unknown"


def body_schema(model: type[Any], config: ServerConfig) -> dict[str, Any]:
    """``openapi_extra`` declaring ``model`` as the JSON request body (the route parses it itself)."""
    return {
        "requestBody": {
            "required": True,
            "content": {JSON_TYPE: {"schema": request_schema(model, config.max_steps_limit)}},
        }
    }


def internal_error(err: BaseException) -> ApiError:
    """The ``500`` that reports an exception no request error covers, naming the boundary that failed.

    A mirrorworld error names its own (``the world failed: WorldError``, with
    ``boundary: world`` in the body); anything else is a server bug
    (``infrastructure``). The exception's text stays in the log: it may hold
    world internals no client should see.
    """
    if isinstance(err, MirrorworldError):
        return ApiError(
            500, "internal_error", f"the {err.boundary} failed: {type(err).__name__}", boundary=err.boundary
        )
    return ApiError(500, "internal_error", f"a server bug: {type(err).__name__}", boundary="infrastructure")


class _NoAnswer(Response):
    """The response to a client that went away: sends nothing."""

    def __init__(self) -> None:
        super().__init__()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:  # type: ignore[override]
        return None


_NO_ANSWER = _NoAnswer()


def guarded(
    handler: Callable[[Request], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    """Turn ``ApiError`` into its response and any other exception into a logged ``500``.

    A ``ClientDisconnect`` (the client hung up while its body was being read)
    is the client's doing, not a failure: nothing is logged and nothing is
    sent, since no one is left to read it.
    """

    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except ApiError as err:
            return error_response(err)
        except ClientDisconnect:
            return _NO_ANSWER
        except Exception as err:
            log.exception("internal error on %s %s", request.method, inert(request.url.path))
            return error_response(internal_error(err))

    endpoint.__name__ = handler.__name__
    endpoint.__doc__ = handler.__doc__
    return endpoint
