"""The wire format of the session server, as pydantic models.

Requests are validated strictly (``extra="forbid"``, no type coercion), so the
OpenAPI schema the server publishes is exactly what it accepts. Responses are
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

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
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
]

MAX_SEED = 2**31 - 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ResetRequest(_Strict):
    """Which task an episode plays and for how long."""

    task_id: str | None = Field(default=None, max_length=200, description="A task id, `family/seed`.")
    family: str | None = Field(default=None, max_length=100, description="A task family (with `seed`).")
    seed: int | None = Field(
        default=None,
        ge=0,
        le=MAX_SEED,
        description="With `family`: the task seed. Alone: the index of the task in `split` (as MirrorEnv.reset).",
    )
    index: int | None = Field(default=None, ge=0, le=MAX_SEED, description="The index of the task in `split`.")
    split: Literal["train", "test"] = Field(default="train", description="The split `index`/`seed` counts in.")
    families: list[str] | None = Field(
        default=None, max_length=50, description="Families cycled through by `index` (default: all)."
    )
    max_steps: int = Field(default=30, ge=1, le=10_000_000, description="Calls after which the episode truncates.")


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
    tools: list[str]
    step: int
    done: bool
    view: str
    records: str


class StepResponse(BaseModel):
    """The result of one tool call and where the episode stands."""

    ok: bool = Field(description="Whether the tool call succeeded.")
    result: Any = Field(description="The agent-visible JSON result ({'error': {code, message}} when not ok).")
    reward: float = Field(description="Shaping reward of this call, plus the verdict's score when it ends the episode.")
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
