"""The wire format of the session server, as pydantic models.

Requests are validated strictly against the published OpenAPI schema
(``extra="forbid"``, no coercion; an integer may be written ``7.0``, as JSON
Schema allows). Responses are
documented here and built by hand in :mod:`mirrorworld.server.sessions` (the
tool result is spliced in as the JSON the agent sees, never re-encoded).

Field meanings:

* a session's task is chosen by ``task_id`` (``"refund_damaged/7"``), or by
  ``family`` + ``seed``, or by ``seed``/``index`` alone: the ``seed``-th task of
  ``split``, cycling through ``families`` — the same task that
  ``MirrorEnv.reset(seed=seed)`` would start;
* ``args`` of a step is a JSON object, or the JSON text of one (as an LLM emits
  it), or null; whatever it is, a malformed call is answered with
  ``ok: false`` and an error ``{code, message}``, never with an HTTP error;
* ``result`` of a step is the agent-visible JSON of the tool result
  (``{"error": {code, message}}`` when ``ok`` is false).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict, WithJsonSchema

from mirrorworld.core.task import MAX_SEED

__all__ = [
    "DEFAULT_MAX_STEPS",
    "MAX_SEED",
    "CreateRequest",
    "ErrorBody",
    "ErrorResponse",
    "ResetRequest",
    "SessionInfo",
    "StateResponse",
    "StepRequest",
    "StepResponse",
    "VerdictResponse",
    "request_schema",
]


DEFAULT_MAX_STEPS = 30
"""Episode length when a request names none (capped by the server's ``max_steps_limit``)."""


def _json_int(value: Any) -> Any:
    """JSON Schema's integers: ``7`` and ``7.0``, not ``true`` (bool is an int subclass in Python)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


Seed = Annotated[
    int,
    BeforeValidator(_json_int),
    Strict(),
    Field(ge=0, le=MAX_SEED),
    WithJsonSchema({"type": "integer", "minimum": 0, "maximum": MAX_SEED}),
]
Steps = Annotated[
    int,
    BeforeValidator(_json_int),
    Strict(),
    Field(ge=1, le=10_000_000),
    WithJsonSchema({"type": "integer", "minimum": 1, "maximum": 10_000_000}),
]


_FAMILY_NEEDS_SEED: dict[str, Any] = {
    "if": {"properties": {"family": {"type": "string"}}, "required": ["family"]},
    "then": {"properties": {"seed": {"type": "integer"}}, "required": ["seed"]},
}
"""A task ``family`` needs a ``seed`` (not null)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class FaultsModel(_Strict):
    """Injected faults (``mirrorworld.episodes.faults``): a seeded share of calls fails transiently."""

    rate: float = Field(default=0.0, ge=0.0, lt=1.0, description="The probability that a call faults.")
    kinds: list[Literal["timeout", "rate_limited", "unavailable", "lost_response"]] = Field(
        default=["timeout", "rate_limited", "unavailable"], min_length=1, max_length=4, description="Faults drawn from."
    )
    seed: int = Field(
        default=0,
        ge=0,
        le=2**53,
        strict=False,
        description="The fault seed (at most 2**53, the largest integer every JSON reader holds exactly).",
    )
    latency_s: float = Field(default=0.0, ge=0.0, le=3600.0, description="Simulated seconds every call takes.")
    writes_only: bool = Field(default=False, description="Fault only calls to write tools.")


class ResetRequest(_Strict):
    """Which task an episode plays and for how long."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_FAMILY_NEEDS_SEED)

    task_id: str | None = Field(
        default=None, max_length=200, pattern=r"^[A-Za-z0-9_.-]+/[0-9]{1,10}$", description="A task id, `family/seed`."
    )
    family: str | None = Field(default=None, max_length=100, description="A task family (with `seed`).")
    seed: Seed | None = Field(
        default=None,
        description="With `family`: the task seed. Alone: the index of the task in `split` (as MirrorEnv.reset).",
    )
    index: Seed | None = Field(default=None, description="The index of the task in `split`.")
    split: Literal["train", "test"] = Field(default="train", description="The split `index`/`seed` counts in.")
    families: list[str] | None = Field(
        default=None, max_length=50, description="Families cycled through by `index` (default: all)."
    )
    max_steps: Steps = Field(default=DEFAULT_MAX_STEPS, description="Calls after which the episode truncates.")
    reward: Literal["shaped", "sparse"] = Field(
        default="shaped",
        description="`shaped`: process reward on every call plus the score at the end; `sparse`: the score alone.",
    )
    faults: FaultsModel | None = Field(
        default=None,
        description="Seeded transient tool failures and latency injected into the episode (none by default).",
    )


class CreateRequest(ResetRequest):
    """A new session: a world and its first task."""

    world: str = Field(default="helpdesk", max_length=100, description="A registered world name.")


class StepRequest(_Strict):
    """One tool call."""

    tool: str = Field(max_length=200, description="The tool's name.")
    args: dict[str, Any] | str | None = Field(
        default=None, description="The arguments: an object, or the JSON text of one."
    )


class ErrorBody(BaseModel):
    code: str = Field(description="A stable identifier: unknown_session, invalid_request, rate_limited, ...")
    message: str


class ErrorResponse(BaseModel):
    """Every request error: a status code and this body."""

    error: ErrorBody


class SessionInfo(BaseModel):
    """A session and the episode it is playing."""

    session_id: str
    world: str = Field(description="The world's versioned id, e.g. mirrorworld/Helpdesk-v0.")
    world_hash: str
    task_id: str
    family: str
    split: Literal["train", "test"]
    instruction: str
    max_steps: int
    reward: Literal["shaped", "sparse"] = Field(default="shaped", description="The episode's reward mode.")
    tools: list[str]
    step: int
    done: bool
    view: str
    records: str


class StepResponse(BaseModel):
    """The result of one tool call and where the episode stands."""

    ok: bool = Field(description="Whether the tool call succeeded.")
    result: Any = Field(description="The agent-visible JSON result ({'error': {code, message}} when not ok).")
    reward: float = Field(
        description="What this call pays under the episode's reward mode (0 after the end): the shaping term "
        "(shaped), plus the verdict's score on the call that ends the episode."
    )
    terminated: bool
    truncated: bool
    done: bool
    step: int
    view: str
    records: str
    verdict: dict[str, Any] | None = Field(default=None, description="The verdict, on the call that ends the episode.")


class StateResponse(BaseModel):
    session_id: str
    state_hash: str
    task_id: str
    step: int
    max_steps: int
    terminated: bool
    truncated: bool
    done: bool
    total_reward: float


class VerdictResponse(BaseModel):
    session_id: str
    task_id: str
    passed: bool
    score: float
    breakdown: dict[str, Any]
    evidence: list[str]


def request_schema(model: type[BaseModel], max_steps_limit: int) -> dict[str, Any]:
    """The JSON schema of a request body as a server with this ``max_steps_limit`` accepts it."""
    schema = _inline(model.model_json_schema())
    steps = schema.get("properties", {}).get("max_steps")
    if steps is not None:
        steps["maximum"] = max_steps_limit
        steps["default"] = min(DEFAULT_MAX_STEPS, max_steps_limit)
    return schema


def _inline(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its ``$defs`` references replaced by the definitions (OpenAPI cannot resolve them)."""
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return walk(defs[ref[len("#/$defs/") :]])
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    out: dict[str, Any] = walk(schema)
    return out
