"""The review API: JSON over HTTP for training pipelines and simulated reviewers, served by the review app.

Every route is in :data:`ROUTES` (method, path, the least role that may call
it, the pydantic models of its query, body and answer); the dispatcher, the
role check and the OpenAPI 3.1 schema at ``GET /api/v1/openapi.json`` are all
read from that one table, so a route cannot be served undocumented or
documented unserved.

==========================================  ============  ==================================================
route                                       role          what it does
==========================================  ============  ==================================================
``GET /api/v1/openapi.json``                none          this API's OpenAPI 3.1 schema
``GET /api/v1/me``                          reviewer      who the token acts as, with which role
``POST /api/v1/episodes``                   admin         import a training loop's episodes as a run; the
                                                          queue's sampling rules queue some of them
``GET /api/v1/items/{id}``                  adjudicator   an item's status, verifier and human verdicts
``GET /api/v1/items?ids=…&wait=S``          adjudicator   the same for many; ``wait`` long-polls (≤ 60 s)
``POST /api/v1/queue/take``                 reviewer      take the next item, shown blind (no verdict)
``POST /api/v1/items/{id}/review``          reviewer      grade an item taken by the token's reviewer
``GET /api/v1/agreement``                   adjudicator   :func:`~mirrorworld.review.stats.compute_stats`
``GET /api/v1/drift``                       adjudicator   :func:`~mirrorworld.review.drift.compute_drift`
``GET /api/v1/labels?after=ID&limit=N``     adjudicator   every human label, item by item, paginated
``POST/GET /api/v1/webhooks``,              admin         announce resolved items to a URL; list, remove
``DELETE /api/v1/webhooks/{id}``
``POST/GET /api/v1/tokens``,                admin         create, list and revoke API tokens
``DELETE /api/v1/tokens/{id}``
==========================================  ============  ==================================================

**Tokens.** ``Authorization: Bearer <token>``. A token belongs to a reviewer
and acts as them with its own role, never above theirs
(:meth:`~mirrorworld.review.store.ReviewStore.create_token`; also
``mirrorworld review token create``). The database keeps only its SHA-256.
No token, or one unknown, expired or revoked: ``401``; a role below the
route's: ``403``. The API reads no cookie, so a page of another site cannot
make a signed-in browser call it and there is no CSRF token to send. The item
status routes are for adjudicators and above because they show the verifier's
verdict, which a reviewer must not see before grading.

**Input.** A body is JSON (``Content-Type: application/json``), at most
:attr:`ApiConfig.max_body` bytes (a submission of episodes
:attr:`ApiConfig.max_submit_body`): more is ``413`` before it is parsed.
It is parsed like a run file's JSON (:func:`mirrorworld.run.untrusted.loads`:
depth and integer size bounded), refused whole when it holds ``NaN``,
``Infinity`` or a lone surrogate (text SQLite cannot store), then validated by
the route's pydantic model: unknown fields, wrong types and out-of-range
values are ``400`` naming the field (``episodes.3.score``). Submitted episodes
go through the checks of a run file's episodes
(:class:`~mirrorworld.run.trajectories.RunFile`), then their task is read as a
task and their rubric rows drawn as the store will draw them, so an episode
that would break a page later is refused now. Errors are
``{"error": {"code", "message"}}``; nothing a client sends is a ``5xx``.

**Sampling.** Submitted episodes become the items of the run ``api:<name>``
(:meth:`~mirrorworld.review.store.ReviewStore.add_records`; sent again, an
episode keeps its item). Then :func:`~mirrorworld.review.queue.build_queue`
queues ``sample.size`` more items (all, without a size) by the queue's
stratified rules, over every item not queued yet, these and any earlier ones;
the answer says which of these were queued. Fields of ``sample`` left out keep
the campaign's plan. API runs are not audited (``audit-run`` replays every
episode; import a run file with ``review serve`` for that): their errored
episodes are still over-sampled.

**Status.** ``queued`` (waiting for a reviewer), ``in_review`` (taken, or
graded by fewer reviewers than its overlap), ``reviewed`` (graded by all),
``adjudicated``, ``not_queued`` (not sampled). An item is *resolved* when it is
reviewed or adjudicated and has a human verdict
(:func:`~mirrorworld.review.stats.human_verdict`: the adjudication, else the
strict majority; a tie waits for an adjudicator). ``wait`` long-polls: the
answer comes as soon as a listed item is *settled* anew — reviewed or
adjudicated, so resolved or a tie left to an adjudicator — or its verdict
changes (at once when every listed item is settled already), else at the
timeout; ``changed`` lists those items. The waiting request
holds no thread: it sleeps on the event loop and looks at the database when
this process committed a grade (the store's change counter, free to read) or
every :attr:`ApiConfig.db_poll` seconds (grades committed elsewhere).

**Webhooks.** ``POST /api/v1/webhooks {"url", "events": ["item.resolved"]}``:
when a grade or an adjudication commits (the store announces it,
:meth:`~mirrorworld.review.store.ReviewStore.subscribe`) and leaves the item
resolved in a state not announced before (``reviewed/pass``,
``adjudicated/fail`` …), a background thread POSTs ``{"event", "item"}`` to
the URL, signed with the webhook's secret (``X-Mirrorworld-Signature:
sha256=<HMAC-SHA256 of the body>``), with a timeout, and retries a failure
with exponential back-off a bounded number of times; each delivery's outcome
is recorded and listed. *Server-side request forgery*: a webhook makes the
server send requests where an admin says, so only admins register them, only
``http``/``https`` URLs without credentials are taken, redirects are not
followed, no proxy from the environment is used, and the answer's body is
never read back to anyone (only its status code is recorded), so a webhook
cannot read an internal service. Deployments where admins are not trusted with
the server's network set :attr:`ApiConfig.webhook_hosts` to the hosts
webhooks may name.

**Grading.** ``take`` and ``review`` are the page's take and grade: the same
queue (:func:`~mirrorworld.review.queue.take_next`), the same blind view
(:func:`~mirrorworld.review.episode.episode_view`) and the same commit
(:func:`submit_grade`: the grade with the quality check that may pause its
reviewer, one transaction), so simulated reviewers can drive the whole loop
over HTTP.
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
import hmac
import inspect
import json
import queue as queues
import re
import secrets
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError, WithJsonSchema
from pydantic.json_schema import models_json_schema
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Match, NoMatchFound

from mirrorworld.core.registry import Registry
from mirrorworld.core.task import Task
from mirrorworld.errors import MirrorworldError, RunFileError
from mirrorworld.review.drift import DriftPolicy, compute_drift
from mirrorworld.review.episode import episode_view
from mirrorworld.review.quality import auto_pause, load_policy
from mirrorworld.review.queue import SamplingPlan, build_queue, take_next
from mirrorworld.review.stats import StatsOptions, compute_stats, human_verdict
from mirrorworld.review.store import (
    ASSIGNMENT_SECONDS,
    MAX_REASON,
    Item,
    Reviewer,
    ReviewInput,
    ReviewRow,
    ReviewStore,
    Role,
    check_refs,
)
from mirrorworld.run.runner import EpisodeRecord
from mirrorworld.run.trajectories import RunFile
from mirrorworld.run.untrusted import loads

__all__ = ["API", "ROUTES", "ApiConfig", "ApiError", "Op", "api_routes", "item_states", "openapi", "submit_grade"]

API = "/api/v1"
MAX_ID = 10**18 - 1
"""The largest id a path or a query may name (18 digits, as the pages' ``rowid`` paths)."""
MAX_IDS = 500
"""Items one status request may list."""


@dataclass(frozen=True)
class ApiConfig:
    """Bounds and switches of the API (see the module docstring)."""

    max_body: int = 64 * 1024
    max_submit_body: int = 32 << 20
    """A submission of episodes carries whole trajectories: this much JSON at most."""
    max_episodes: int = 10_000
    max_wait: float = 60.0
    """The longest a status request waits, whatever it asks for."""
    poll_interval: float = 0.05
    """How often a waiting request looks at the store's change counter (no database read)."""
    db_poll: float = 1.0
    """How often a waiting request reads the database even when this process committed nothing."""
    webhook_hosts: tuple[str, ...] | None = None
    """Host names webhooks may post to (None: any)."""
    webhook_timeout: float = 5.0
    webhook_attempts: int = 4
    webhook_backoff: float = 1.0
    """Seconds before the first retry of a failed delivery; each next one waits twice as long."""


class ApiError(Exception):
    """A request the API refuses: ``{"error": {"code", "message"}}`` with ``status``."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


def submit_grade(store: ReviewStore, review: ReviewInput) -> tuple[int, bool]:
    """Store a grade together with the quality check that may pause its reviewer: (review id, created).

    The one way a grade is committed, by the review page's form and by the API alike.
    """
    return store.submit_review(review, after=auto_pause(store, load_policy(store)))


# -- the models ------------------------------------------------------------------------------


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class _Query(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


Text200 = Annotated[str, StringConstraints(max_length=200)]
Finite = Annotated[float, Field(allow_inf_nan=False)]
EpisodeJSON = Annotated[dict[str, Any], WithJsonSchema({"$ref": "#/components/schemas/EpisodeRecord"})]


class RunIn(_In):
    name: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]*$")
    """The run's name; its items belong to the run ``api:<name>`` (sent again: the same run)."""
    world: str = Field(min_length=1, max_length=200)
    agent: Text200 = ""
    meta: dict[str, Any] = {}
    """More of the run's metadata (``world_hash`` and ``world_parts`` keep agreement comparable across runs)."""


class SampleIn(_In):
    size: int | None = Field(None, ge=0, le=1_000_000)
    """Queue this many more items (all when left out)."""
    seed: int | None = Field(None, ge=0, le=2**63 - 1)
    overlap: int | None = Field(None, ge=1, le=20)
    overlap_share: Finite | None = Field(None, ge=0, le=1)
    boost_flagged: Finite | None = Field(None, ge=0, le=1000)
    boost_disagreement: Finite | None = Field(None, ge=0, le=1000)


class SubmitIn(_In):
    run: RunIn
    episodes: list[EpisodeJSON] = Field(min_length=1, max_length=10_000)
    sample: SampleIn = Field(default_factory=lambda: SampleIn.model_validate({}))


class ItemsQuery(_Query):
    ids: str = Field(pattern=rf"^[0-9]{{1,18}}(,[0-9]{{1,18}}){{0,{MAX_IDS - 1}}}$")
    wait: Finite = Field(0.0, ge=0, le=60)


class LabelsQuery(_Query):
    after: int = Field(0, ge=0, le=MAX_ID)
    limit: int = Field(100, ge=1, le=500)


Flag = Literal["hacking", "task_wrong", "edge_case"]


class ReviewIn(_In):
    passed: bool
    rubric: dict[Annotated[str, StringConstraints(max_length=300)], bool] = Field({}, max_length=200)
    """Rubric key (from ``take``) → pass (true) or fail (false); leave out the rows not graded."""
    reason: str = Field("", max_length=MAX_REASON)
    flags: list[Flag] = Field([], max_length=3)
    reason_keys: int = Field(0, ge=0, le=10**7)
    """Keystrokes that typed the reason, where a client counts them (see the quality report)."""
    reason_pasted: bool = False


class EdgeCaseIn(_In):
    variant: dict[str, Any]
    """The task variant (:func:`mirrorworld.review.edge_cases.propose` checks it whole)."""


class DecisionIn(_In):
    reason: str = Field("", max_length=2000)
    """Why (required to reject)."""


class WebhookIn(_In):
    url: str = Field(min_length=1, max_length=2000)
    events: list[Literal["item.resolved"]] = Field(["item.resolved"], min_length=1, max_length=1)


class TokenIn(_In):
    reviewer: str = Field(min_length=1, max_length=64)
    role: Literal["reviewer", "adjudicator", "admin"] | None = None
    label: Text200 = ""
    expires_in: Finite | None = Field(None, gt=0, le=10 * 365 * 86400)
    create_reviewer: bool = False


class ErrorBody(_Out):
    code: str
    message: str


class ErrorOut(_Out):
    error: ErrorBody


class MeOut(_Out):
    reviewer_id: int
    reviewer: str
    role: Literal["reviewer", "adjudicator", "admin"]
    paused: bool
    token: int


class VerifierOut(_Out):
    passed: bool
    score: float
    reward: float
    error: str | None


class HumanOut(_Out):
    passed: bool
    adjudicated: bool


Status = Literal["queued", "in_review", "reviewed", "adjudicated", "not_queued"]


class ItemOut(_Out):
    id: int
    run: str
    episode: int
    task_id: str
    family: str
    agent: str
    status: Status
    resolved: bool
    verifier: VerifierOut
    human: HumanOut | None
    """The human verdict once the item is resolved."""
    reviews: int
    required_reviews: int


class ItemsOut(_Out):
    items: list[ItemOut]
    missing: list[int]
    changed: list[int]
    """The listed items settled anew (reviewed or adjudicated, or their verdict changed) while the request waited."""
    waited: float


class RunOut(_Out):
    id: int
    name: str


class SubmittedOut(_Out):
    index: int
    item: int
    new: bool
    queued: bool


class SubmitOut(_Out):
    run: RunOut
    items: list[SubmittedOut]
    added: int
    queued: list[int]
    """The items of this submission in the queue (queued now or before)."""
    newly_queued: int
    """How many items this submission put in the queue: its own, and earlier ones not sampled until now."""


class ToolStepOut(_Out):
    name: str
    arguments: str
    result: str
    ok: bool


class StepOut(_Out):
    role: str
    text: str | None
    calls: list[ToolStepOut]


class ChangeOut(_Out):
    table: str
    pk: int
    kind: str
    fields: list[tuple[str, str, str]]


class RubricRowOut(_Out):
    key: str
    label: str


class TakenOut(_Out):
    id: int
    instruction: str
    steps: list[StepOut]
    changes: list[ChangeOut]
    replay_error: str | None
    rubric: list[RubricRowOut]


class TakeOut(_Out):
    item: TakenOut | None
    reason: Literal["empty", "paused"] | None


class ReviewOut(_Out):
    review: int
    created: bool
    paused: bool


class DeliveryOut(_Out):
    id: int
    item: int
    state: str
    status: Literal["pending", "delivered", "failed"]
    attempts: int
    http_status: int | None
    error: str | None
    created_at: float
    finished_at: float | None


class WebhookOut(_Out):
    id: int
    url: str
    events: list[str]
    created_at: float
    secret: str | None = None
    """The key that signs deliveries: shown when the webhook is made, never again."""
    deliveries: dict[str, int]
    recent: list[DeliveryOut]


class WebhooksOut(_Out):
    webhooks: list[WebhookOut]


class TokenOut(_Out):
    id: int
    reviewer_id: int
    reviewer: str
    role: Literal["reviewer", "adjudicator", "admin"]
    label: str
    created_at: float
    expires_at: float | None
    revoked_at: float | None
    token: str | None = None
    """The secret: shown when the token is made, never again."""


class TokensOut(_Out):
    tokens: list[TokenOut]


class DeletedOut(_Out):
    deleted: bool


class CheckOut(_Out):
    key: str
    label: str
    group: str
    verifier: bool


class LabelReviewOut(_Out):
    reviewer_id: int
    reviewer: str
    passed: bool
    rubric: dict[str, bool]
    flags: list[str]
    reason: str
    seconds: float
    submitted_at: float


class AdjudicationOut(_Out):
    passed: bool
    reason: str
    by: str
    at: float


class LabelOut(_Out):
    item: int
    run: str
    episode: int
    task_id: str
    family: str
    agent: str
    gold: bool
    verifier: VerifierOut
    checks: list[CheckOut]
    reviews: list[LabelReviewOut]
    adjudication: AdjudicationOut | None
    human: bool | None
    """The resolved human verdict (None: a tie nobody adjudicated)."""


class LabelsOut(_Out):
    items: list[LabelOut]
    next: int | None
    """Pass as ``after`` for the next page (None: this was the last)."""


# -- the route table -------------------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    """One operation of the API: what the dispatcher serves and the schema documents."""

    method: Literal["GET", "POST", "DELETE"]
    path: str
    """Under :data:`API`; ``{name}`` segments are ids."""
    role: Role | None
    """The least role that may call it (None: anyone, without a token)."""
    handler: str
    """The name of the ``_Api`` method that answers it."""
    summary: str
    query: type[BaseModel] | None = None
    body: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    """None: a JSON object the route's function documents (agreement, drift)."""
    status: int = 200
    large: bool = False
    """Its body may be :attr:`ApiConfig.max_submit_body` bytes."""

    @property
    def params(self) -> list[str]:
        return re.findall(r"\{(\w+)\}", self.path)


ROUTES: tuple[Op, ...] = (
    Op("GET", "/openapi.json", None, "schema", "This API's OpenAPI 3.1 schema"),
    Op("GET", "/me", "reviewer", "me", "Who the token acts as", response=MeOut),
    Op(
        "POST",
        "/episodes",
        "admin",
        "submit",
        "Submit episodes for review; the queue's sampling rules queue some",
        body=SubmitIn,
        response=SubmitOut,
        large=True,
    ),
    Op("GET", "/items", "adjudicator", "items", "Items' status; wait long-polls", query=ItemsQuery, response=ItemsOut),
    Op("GET", "/items/{item_id}", "adjudicator", "item", "An item's status and verdicts", response=ItemOut),
    Op("POST", "/queue/take", "reviewer", "take", "Take the next item to grade, shown blind", response=TakeOut),
    Op(
        "POST",
        "/items/{item_id}/review",
        "reviewer",
        "review",
        "Grade an item this token's reviewer took",
        body=ReviewIn,
        response=ReviewOut,
    ),
    Op(
        "POST",
        "/items/{item_id}/edge-cases",
        "reviewer",
        "propose_edge_case",
        "Turn an item flagged as an edge case into a task variant, for an admin to accept",
        body=EdgeCaseIn,
        status=201,
    ),
    Op("GET", "/edge-cases", "adjudicator", "edge_cases", "The edge cases proposed, accepted and rejected"),
    Op(
        "POST",
        "/edge-cases/{case_id}/accept",
        "admin",
        "accept_edge_case",
        "Accept an edge case: it becomes a regression case with a seed of its own",
        body=DecisionIn,
    ),
    Op(
        "POST",
        "/edge-cases/{case_id}/reject",
        "admin",
        "reject_edge_case",
        "Reject an edge case, saying why",
        body=DecisionIn,
    ),
    Op("GET", "/agreement", "adjudicator", "agreement", "The agreement report (review.stats.compute_stats)"),
    Op("GET", "/drift", "adjudicator", "drift", "The drift report (review.drift.compute_drift)"),
    Op("GET", "/labels", "adjudicator", "labels", "Every human label, by item", query=LabelsQuery, response=LabelsOut),
    Op(
        "POST",
        "/webhooks",
        "admin",
        "add_webhook",
        "Announce resolved items to a URL",
        body=WebhookIn,
        response=WebhookOut,
        status=201,
    ),
    Op("GET", "/webhooks", "admin", "list_webhooks", "Webhooks and their deliveries", response=WebhooksOut),
    Op("DELETE", "/webhooks/{webhook_id}", "admin", "delete_webhook", "Remove a webhook", response=DeletedOut),
    Op("POST", "/tokens", "admin", "add_token", "Create an API token", body=TokenIn, response=TokenOut, status=201),
    Op("GET", "/tokens", "admin", "list_tokens", "The live API tokens", response=TokensOut),
    Op("DELETE", "/tokens/{token_id}", "admin", "revoke_token", "Revoke an API token", response=DeletedOut),
)
"""Every operation of the API (the dispatcher, the role check and the schema read this table)."""

_ERRORS = {
    400: "the request is malformed: a field is missing, unknown, of the wrong type or out of range",
    401: "no API token, or an unknown, expired or revoked one",
    403: "the token's role is below the route's",
    404: "no such item, webhook, token or route",
    409: "the review database's runs come from world builds whose scores are not comparable",
    413: "the body is larger than the route takes",
    415: "the body is not application/json",
}


def _episode_schema() -> dict[str, Any]:
    schema = TypeAdapter(EpisodeRecord).json_schema(ref_template="#/components/schemas/{model}")
    defs = schema.pop("$defs", {})
    schema["description"] = "An episode record as a run file stores it (mirrorworld.run.EpisodeRecord)."
    schema["additionalProperties"] = False
    return {"EpisodeRecord": schema, **defs}


def openapi() -> dict[str, Any]:
    """The API's OpenAPI 3.1 document, from :data:`ROUTES` and their pydantic models."""
    models = {m for op in ROUTES for m in (op.body, op.response) if m is not None} | {ErrorOut}
    refs, top = models_json_schema(
        [(m, "validation") for m in sorted(models, key=lambda m: m.__name__)],
        ref_template="#/components/schemas/{model}",
    )
    error = {"application/json": {"schema": refs[(ErrorOut, "validation")]}}
    paths: dict[str, dict[str, Any]] = {}
    for op in ROUTES:
        params: list[dict[str, Any]] = [
            {"name": p, "in": "path", "required": True, "schema": {"type": "integer", "minimum": 0, "maximum": MAX_ID}}
            for p in op.params
        ]
        if op.query is not None:
            q = op.query.model_json_schema()
            params += [
                {"name": k, "in": "query", "required": k in q.get("required", []), "schema": v}
                for k, v in q["properties"].items()
            ]
        answer = refs[(op.response, "validation")] if op.response is not None else {"type": "object"}
        statuses = [400, 404] + ([401, 403] if op.role else []) + ([413, 415] if op.body else [])
        statuses += [409] if op.handler in ("agreement",) else []
        doc: dict[str, Any] = {
            "operationId": op.handler,
            "summary": op.summary,
            "description": f"Role: {op.role} and above." if op.role else "No token needed.",
            "parameters": params,
            "responses": {
                str(op.status): {"description": "OK", "content": {"application/json": {"schema": answer}}},
                **{str(s): {"description": _ERRORS[s], "content": error} for s in sorted(statuses)},
            },
        }
        if op.role:
            doc["security"] = [{"bearer": []}]
        if op.body is not None:
            doc["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": refs[(op.body, "validation")]}},
            }
        paths.setdefault(API + op.path, {})[op.method.lower()] = doc
    return {
        "openapi": "3.1.0",
        "info": {"title": "mirrorworld review API", "version": "1"},
        "paths": paths,
        "components": {
            "schemas": {**top.get("$defs", {}), **_episode_schema()},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


# -- checks of untrusted input ----------------------------------------------------------------

_COLUMNS = [f.name for f in fields(EpisodeRecord)]
_DEFAULTS = {f.name: f.default for f in fields(EpisodeRecord) if f.default is not MISSING}
_REQUIRED = [f.name for f in fields(EpisodeRecord) if f.name not in _DEFAULTS]
_AS_JSON = ("messages", "calls", "verdict", "task", "failure", "usage")
_INT64 = range(-(2**63), 2**63)


@dataclass(frozen=True)
class _Named:
    """What :meth:`RunFile._record` names in its messages (a run file's path; here, the episode's place)."""

    path: str


def validate_episode(data: Any, where: str) -> EpisodeRecord:
    """An episode record from its dict form (``dataclasses.asdict``), checked as a run file's episode is.

    The fields are laid out as a run file's row and read by the run file's own
    reader (:class:`~mirrorworld.run.trajectories.RunFile`), so the types, JSON
    shapes, finite numbers, calls and verdict are checked by the same code;
    then the task is read as a task and the rubric rows drawn, as the store
    will. Raises :class:`ApiError` (400) naming ``where`` and the field.
    """
    if not isinstance(data, dict):
        raise ApiError(400, "invalid", f"{where}: an episode is an object")
    unknown = sorted(set(data) - set(_COLUMNS))
    if unknown:
        raise ApiError(400, "invalid", f"{where}.{unknown[0][:60]}: unknown field")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise ApiError(400, "invalid", f"{where}.{missing[0]}: missing")
    row: list[Any] = []
    for name in _COLUMNS:
        value = data.get(name, _DEFAULTS.get(name))
        if isinstance(value, int) and not isinstance(value, bool) and value not in _INT64:
            raise ApiError(400, "invalid", f"{where}.{name}: out of range")
        if name in _AS_JSON and not (value is None and name in _DEFAULTS):
            value = json.dumps(value)
        elif name == "passed" and isinstance(value, bool):
            value = int(value)
        row.append(value)
    try:
        record = RunFile._record(_Named(where), tuple(row))  # type: ignore[arg-type]
        Task.from_dict(record.task)
        check_refs(asdict(record))
    except RunFileError as err:
        raise ApiError(400, "invalid", str(err)) from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
        raise ApiError(400, "invalid", f"{where}.task: not a task record ({type(err).__name__}: {err})"[:300]) from None
    return record


def _parse(body: bytes) -> Any:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, "invalid_json", "the body is not UTF-8") from None
    try:
        value = loads(text, "the body")
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except RunFileError as err:
        raise ApiError(400, "invalid_json", str(err)) from None
    except UnicodeEncodeError:  # before ValueError, which it is
        raise ApiError(400, "invalid_json", "the body holds a lone surrogate (\\ud800…), which is no text") from None
    except ValueError:
        raise ApiError(400, "invalid_json", "the body holds NaN or Infinity (JSON numbers are finite)") from None
    return value


def _body(model: type[BaseModel], raw: bytes) -> BaseModel:
    try:
        return model.model_validate(_parse(raw))
    except ValidationError as err:
        raise _invalid(err) from None


def _invalid(err: ValidationError) -> ApiError:
    first = err.errors(include_url=False)[0]
    where = ".".join(str(p) for p in first["loc"]) or "the body"
    message = "unknown field" if first["type"] == "extra_forbidden" else first["msg"]
    return ApiError(400, "invalid", f"{where[:200]}: {message}")


def check_webhook_url(url: str, hosts: tuple[str, ...] | None) -> str:
    """``url`` when a webhook may post to it (http or https, a host, no credentials, an allowed host)."""
    if any(not ch.isprintable() or ch.isspace() for ch in url):
        raise ApiError(400, "invalid", "url: holds spaces or control characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port out of range
    except ValueError:
        raise ApiError(400, "invalid", "url: not a URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ApiError(400, "invalid", "url: a webhook posts to an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise ApiError(400, "invalid", "url: credentials in a webhook URL are refused (they would be stored)")
    if hosts is not None and parts.hostname.lower() not in {h.lower() for h in hosts}:
        raise ApiError(400, "invalid", "url: this server posts webhooks only to its configured hosts")
    return url


# -- item states ----------------------------------------------------------------------------


def _marks(n: int) -> str:
    return ",".join("?" * n)


def item_states(store: ReviewStore, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """Each existing item of ``ids`` as :class:`ItemOut` describes it (see the module docstring for the statuses)."""
    ids = list(dict.fromkeys(ids))
    out: dict[int, dict[str, Any]] = {}
    now = store.clock()
    with store.read() as conn:
        runs = {int(r[0]): str(r[1]) for r in conn.execute("SELECT id, path FROM runs")}
        for start in range(0, len(ids), MAX_IDS):
            chunk = tuple(ids[start : start + MAX_IDS])
            marks = _marks(len(chunk))
            items = store.items(conn, f"i.id IN ({marks})", chunk)
            reviews: dict[int, list[ReviewRow]] = {}
            for r in store.reviews(conn, f"v.item_id IN ({marks})", chunk):
                reviews.setdefault(r.item_id, []).append(r)
            adjudications = {
                int(r[0]): {"passed": bool(r[1])}
                for r in conn.execute(f"SELECT item_id, passed FROM adjudications WHERE item_id IN ({marks})", chunk)
            }
            taken = {
                int(r[0])
                for r in conn.execute(
                    "SELECT a.item_id FROM assignments a LEFT JOIN reviews v ON v.item_id=a.item_id AND"
                    f" v.reviewer_id=a.reviewer_id WHERE a.item_id IN ({marks}) AND v.id IS NULL AND a.started_at > ?",
                    (*chunk, now - ASSIGNMENT_SECONDS),
                )
            }
            for item in items:
                out[item.id] = _state(
                    item, runs, reviews.get(item.id, []), adjudications.get(item.id), item.id in taken
                )
    return out


def _verifier(item: Item) -> dict[str, Any]:
    return {"passed": item.verifier_passed, "score": item.score, "reward": item.reward, "error": item.error}


def _state(
    item: Item, runs: dict[int, str], reviews: list[ReviewRow], adjudication: dict[str, Any] | None, taken: bool
) -> dict[str, Any]:
    required = max(1, item.overlap)
    status: Status
    if adjudication is not None:
        status = "adjudicated"
    elif len(reviews) >= required:
        status = "reviewed"
    elif reviews or taken:
        status = "in_review"
    elif item.position is not None or item.gold_answer is not None:
        status = "queued"
    else:
        status = "not_queued"
    human = human_verdict(reviews, adjudication)
    resolved = status in ("reviewed", "adjudicated") and human is not None
    return {
        "id": item.id,
        "run": runs.get(item.run_id, ""),
        "episode": item.episode,
        "task_id": item.task_id,
        "family": item.family,
        "agent": item.agent,
        "status": status,
        "resolved": resolved,
        "verifier": _verifier(item),
        "human": {"passed": human, "adjudicated": adjudication is not None} if resolved else None,
        "reviews": len(reviews),
        "required_reviews": required,
    }


def _settled(state: dict[str, Any]) -> str | None:
    """What a settled item's state is (``reviewed/tie``, ``adjudicated/pass`` …); None while it is not settled."""
    if state["status"] not in ("reviewed", "adjudicated"):
        return None
    human = state["human"]
    return f"{state['status']}/{'tie' if human is None else ('pass' if human['passed'] else 'fail')}"


def _announced(state: dict[str, Any]) -> str | None:
    """What a resolved item's verdict is, as webhooks announce it once (None: not resolved)."""
    if not state["resolved"]:
        return None
    return f"{state['status']}/{'pass' if state['human']['passed'] else 'fail'}"


# -- webhooks -------------------------------------------------------------------------------


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a redirect is the answer (a 3xx: a failed delivery), never followed


class Webhooks:
    """Registered webhooks and the thread that delivers to them (see the module docstring)."""

    def __init__(self, store: ReviewStore, config: ApiConfig) -> None:
        self.store = store
        self.config = config
        self._inbox: queues.Queue[int | None] = queues.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())
        with store.read() as conn:
            self._active = conn.execute("SELECT 1 FROM webhooks LIMIT 1").fetchone() is not None
        store.subscribe(self.notify)
        if self._active:
            self._start()

    def notify(self, item_id: int) -> None:
        """The store's listener: a grade or an adjudication of ``item_id`` committed (only enqueues it)."""
        if self._active:
            self._inbox.put(item_id)

    def close(self) -> None:
        """Stop delivering (what is pending stays pending in the database) and stop listening to the store."""
        self.store.unsubscribe(self.notify)
        thread = self._thread
        if thread is not None:
            self._inbox.put(None)
            thread.join(10)

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="review-webhooks", daemon=True)
                self._thread.start()

    def add(self, url: str, events: list[str], by: int) -> dict[str, Any]:
        check_webhook_url(url, self.config.webhook_hosts)
        secret = secrets.token_urlsafe(32)
        with self.store.write() as conn:
            if int(conn.execute("SELECT COUNT(*) FROM webhooks").fetchone()[0]) >= 100:
                raise ApiError(400, "invalid", "a review database holds at most 100 webhooks")
            cur = conn.execute(
                "INSERT INTO webhooks (url, events, secret, created_by, created_at) VALUES (?, ?, ?, ?, ?)",
                (url, json.dumps(events), secret, by, self.store.clock()),
            )
            hook_id = int(cur.lastrowid or 0)
            self.store.log(conn, by, "webhook_added", {"webhook": hook_id, "url": url[:200]})
        self._active = True
        self._start()
        return {**self.listing(hook_id)[0], "secret": secret}

    def listing(self, only: int | None = None) -> list[dict[str, Any]]:
        with self.store.read() as conn:
            hooks = conn.execute(
                "SELECT id, url, events, created_at FROM webhooks" + (" WHERE id=?" if only else "") + " ORDER BY id",
                (only,) if only else (),
            ).fetchall()
            out = []
            for hid, url, events, created in hooks:
                counts = dict.fromkeys(("pending", "delivered", "failed"), 0)
                for status, n in conn.execute(
                    "SELECT status, COUNT(*) FROM webhook_deliveries WHERE webhook_id=? GROUP BY status", (hid,)
                ):
                    counts[status] = int(n)
                recent = conn.execute(
                    "SELECT id, item_id, state, status, attempts, http_status, error, created_at, finished_at"
                    " FROM webhook_deliveries WHERE webhook_id=? ORDER BY id DESC LIMIT 20",
                    (hid,),
                ).fetchall()
                keys = ("id", "item", "state", "status", "attempts", "http_status", "error", "created_at")
                out.append(
                    {
                        "id": hid,
                        "url": url,
                        "events": json.loads(events),
                        "created_at": created,
                        "deliveries": counts,
                        "recent": [dict(zip((*keys, "finished_at"), r, strict=True)) for r in recent],
                    }
                )
        return out

    def delete(self, hook_id: int, by: int) -> bool:
        with self.store.write() as conn:
            gone = conn.execute("DELETE FROM webhooks WHERE id=?", (hook_id,)).rowcount == 1
            if gone:
                self.store.log(conn, by, "webhook_removed", {"webhook": hook_id})
            self._active = conn.execute("SELECT 1 FROM webhooks LIMIT 1").fetchone() is not None
        return gone

    # the delivering thread

    def _run(self) -> None:
        due: list[tuple[float, int]] = []
        with self.store.read() as conn:
            for (did,) in conn.execute("SELECT id FROM webhook_deliveries WHERE status='pending' ORDER BY id"):
                due.append((time.monotonic(), int(did)))
        while True:
            wait = max(0.0, due[0][0] - time.monotonic()) if due else None
            try:
                got = self._inbox.get(timeout=wait)
            except queues.Empty:
                got = -1
            if got is None:
                return
            if got != -1:
                for did in self._announce(got):
                    heapq.heappush(due, (time.monotonic(), did))
            while due and due[0][0] <= time.monotonic():
                _, did = heapq.heappop(due)
                retry = self._attempt(did)
                if retry is not None:
                    heapq.heappush(due, (time.monotonic() + retry, did))

    def _announce(self, item_id: int) -> list[int]:
        """The deliveries a change of ``item_id`` calls for (created pending), one per webhook and verdict state."""
        state = item_states(self.store, [item_id]).get(item_id)
        key = None if state is None else _announced(state)
        if state is None or key is None:
            return []
        payload = json.dumps({"event": "item.resolved", "item": state}, sort_keys=True)
        made = []
        with self.store.write() as conn:
            for (hid,) in conn.execute("SELECT id FROM webhooks ORDER BY id").fetchall():
                cur = conn.execute(
                    "INSERT OR IGNORE INTO webhook_deliveries (webhook_id, event, item_id, state, payload, status,"
                    " created_at) VALUES (?, 'item.resolved', ?, ?, ?, 'pending', ?)",
                    (hid, item_id, key, payload, self.store.clock()),
                )
                if cur.rowcount == 1:
                    made.append(int(cur.lastrowid or 0))
        return made

    def _attempt(self, delivery_id: int) -> float | None:
        """Try one delivery; the seconds until its retry, or None when it is settled (or gone)."""
        with self.store.read() as conn:
            row = conn.execute(
                "SELECT d.payload, d.attempts, w.url, w.secret FROM webhook_deliveries d"
                " JOIN webhooks w ON w.id=d.webhook_id WHERE d.id=? AND d.status='pending'",
                (delivery_id,),
            ).fetchone()
        if row is None:
            return None
        payload, attempts, url, secret = str(row[0]).encode(), int(row[1]) + 1, str(row[2]), str(row[3])
        signature = hmac.new(secret.encode(), payload, hashlib.sha256).hexdigest()
        request = urllib.request.Request(
            url,
            data=payload,
            method="POST",
            headers={
                "Content-Type": "application/json",
                "User-Agent": "mirrorworld-review",
                "X-Mirrorworld-Event": "item.resolved",
                "X-Mirrorworld-Delivery": str(delivery_id),
                "X-Mirrorworld-Signature": f"sha256={signature}",
            },
        )
        code: int | None = None
        error: str | None = None
        try:
            with self._opener.open(request, timeout=self.config.webhook_timeout) as answer:
                code = int(answer.status)
        except urllib.error.HTTPError as err:
            code, error = int(err.code), f"HTTP {err.code}"
            err.close()
        except (urllib.error.URLError, OSError, ValueError) as err:
            error = f"{type(err).__name__}: {getattr(err, 'reason', err)}"
        ok = code is not None and 200 <= code < 300
        settled = ok or attempts >= self.config.webhook_attempts
        status = "delivered" if ok else ("failed" if settled else "pending")
        with self.store.write() as conn:
            conn.execute(
                "UPDATE webhook_deliveries SET status=?, attempts=?, http_status=?, error=?, finished_at=? WHERE id=?",
                (
                    status,
                    attempts,
                    code,
                    None if ok else (error or "")[:300],
                    self.store.clock() if settled else None,
                    delivery_id,
                ),
            )
        return None if settled else self.config.webhook_backoff * 2 ** (attempts - 1)


# -- the handlers -----------------------------------------------------------------------------


@dataclass
class _Call:
    """One request, checked: who calls, the path's ids, the validated query and body."""

    request: Request
    reviewer: Reviewer | None
    token: int | None
    ids: dict[str, int]
    query: Any
    body: Any

    @property
    def who(self) -> Reviewer:
        assert self.reviewer is not None
        return self.reviewer


def _edge_case(store: ReviewStore, case_id: int) -> dict[str, Any]:
    from mirrorworld.review import edge_cases

    found = next((c for c in edge_cases.list_cases(store) if c.id == case_id), None)
    if found is None:
        raise ApiError(404, "not_found", "no such edge case")
    return found.to_dict()


class _Api:
    def __init__(
        self,
        store: ReviewStore,
        registry: Registry | None,
        stats_options: StatsOptions,
        drift_policy: DriftPolicy,
        config: ApiConfig,
    ) -> None:
        self.store = store
        self.registry = registry
        self.stats_options = stats_options
        self.drift_policy = drift_policy
        self.config = config
        self.webhooks = Webhooks(store, config)
        self._queue_lock = threading.Lock()
        self._stats: tuple[tuple[int, ...], dict[str, Any]] | None = None
        self._schema: dict[str, Any] | None = None
        self._routes = [(op, re.compile(re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]*)", API + op.path))) for op in ROUTES]

    # plumbing

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        request = Request(scope, receive)
        try:
            op, ids = self._match(request.method, scope["path"])
            response = await self._handle(op, ids, request)
        except ApiError as err:
            response = JSONResponse(
                {"error": {"code": err.code, "message": err.message}}, status_code=err.status, headers=err.headers
            )
        except MirrorworldError as err:  # a request the store refuses (a grade of a rubric row the item lacks …)
            response = JSONResponse({"error": {"code": "invalid", "message": str(err)[:500]}}, status_code=400)
        response.headers["Cache-Control"] = "no-store"
        response.headers["X-Content-Type-Options"] = "nosniff"
        await response(scope, receive, send)

    def _match(self, method: str, path: str) -> tuple[Op, dict[str, int]]:
        allowed = []
        for op, pattern in self._routes:
            m = pattern.fullmatch(path)
            if m is None:
                continue
            if op.method != method:
                allowed.append(op.method)
                continue
            ids = {}
            for name, raw in m.groupdict().items():
                if not (raw.isascii() and raw.isdigit() and len(raw) <= 18):
                    raise ApiError(404, "not_found", f"no such {name.removesuffix('_id')}")
                ids[name] = int(raw)
            return op, ids
        if allowed:
            raise ApiError(
                405, "method_not_allowed", f"{method[:10]} is not allowed here", {"Allow": ", ".join(allowed)}
            )
        raise ApiError(404, "not_found", "no such API route (see /api/v1/openapi.json)")

    def _authenticate(self, request: Request) -> tuple[Reviewer, int]:
        challenge = {"WWW-Authenticate": 'Bearer realm="mirrorworld-review"'}
        header = request.headers.get("authorization", "")
        scheme, _, secret = header.partition(" ")
        if scheme.lower() != "bearer" or not secret.strip():
            raise ApiError(401, "unauthorized", "an API token is needed: Authorization: Bearer <token>", challenge)
        found = self.store.token_reviewer(secret.strip())
        if found is None:
            raise ApiError(401, "unauthorized", "the API token is unknown, expired or revoked", challenge)
        return found

    async def _read(self, request: Request, limit: int) -> bytes:
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise ApiError(413, "too_large", f"the body is larger than {limit} bytes")
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise ApiError(413, "too_large", f"the body is larger than {limit} bytes")
        return bytes(body)

    async def _handle(self, op: Op, ids: dict[str, int], request: Request) -> JSONResponse:
        reviewer, token = None, None
        if op.role is not None:
            reviewer, token = await run_in_threadpool(self._authenticate, request)
            if not reviewer.can(op.role):
                raise ApiError(403, "forbidden", f"this route is for the {op.role} role and above")
        query = None
        params = request.query_params
        repeated = [k for k in params if len(params.getlist(k)) > 1]
        if repeated:
            raise ApiError(400, "invalid", f"{repeated[0][:60]}: given more than once")
        if op.query is not None:
            try:
                query = op.query.model_validate(dict(params))
            except ValidationError as err:
                raise _invalid(err) from None
        elif params:
            raise ApiError(400, "invalid", f"{next(iter(params))[:60]}: unknown query parameter")
        raw = await self._read(request, self.config.max_submit_body if op.large else self.config.max_body)
        body = None
        if op.body is not None:
            ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if ctype != "application/json":
                raise ApiError(415, "unsupported_media_type", "the body is sent as application/json")
            # a big body is parsed and validated off the event loop, which the long-polls share
            body = await run_in_threadpool(_body, op.body, raw) if len(raw) > 65536 else _body(op.body, raw)
        elif raw.strip() not in (b"", b"{}"):
            raise ApiError(400, "invalid", "this route takes no body")
        call = _Call(request, reviewer, token, ids, query, body)
        handler: Callable[[_Call], Any] = getattr(self, op.handler)
        if inspect.iscoroutinefunction(handler):
            result = await handler(call)
        else:
            result = await run_in_threadpool(handler, call)
        return JSONResponse(result, status_code=op.status)

    # the routes

    def schema(self, call: _Call) -> dict[str, Any]:
        if self._schema is None:
            self._schema = openapi()
        return self._schema

    def me(self, call: _Call) -> dict[str, Any]:
        r = call.who
        return {"reviewer_id": r.id, "reviewer": r.name, "role": r.role, "paused": r.paused, "token": call.token}

    def submit(self, call: _Call) -> dict[str, Any]:
        body: SubmitIn = call.body
        if len(body.episodes) > self.config.max_episodes:
            raise ApiError(400, "invalid", f"episodes: at most {self.config.max_episodes} episodes a submission")
        records = [validate_episode(e, f"episodes.{i}") for i, e in enumerate(body.episodes)]
        seen: set[int] = set()
        for i, rec in enumerate(records):
            if rec.index in seen:
                raise ApiError(400, "invalid", f"episodes.{i}.index: {rec.index} is given twice")
            seen.add(rec.index)
        agents = {r.agent for r in records}
        hashes = {r.world_hash for r in records}
        meta = {**body.run.meta, "world": body.run.world, "agent": body.run.agent or "/".join(sorted(agents))[:200]}
        if "world_hash" not in meta and len(hashes) == 1:
            meta["world_hash"] = next(iter(hashes))
        name = f"api:{body.run.name}"
        with self._queue_lock:  # the count and the queue's growth together, against another submission
            added = self.store.add_records(name, meta, records)
            raw = self.store.get_meta("sampling")
            plan = SamplingPlan.from_dict(raw) if isinstance(raw, dict) else SamplingPlan()
            chosen = {k: v for k, v in body.sample.model_dump().items() if v is not None and k != "size"}
            with self.store.read() as conn:
                queued_now = int(conn.execute("SELECT COUNT(*) FROM items WHERE position IS NOT NULL").fetchone()[0])
            size = None if body.sample.size is None else queued_now + body.sample.size
            plan = SamplingPlan(**{**plan.to_dict(), **chosen, "size": size})
            try:
                newly = build_queue(self.store, plan)
            except MirrorworldError as err:
                raise ApiError(400, "invalid", f"sample: {err}") from None
            with self.store.read() as conn:
                unique = tuple(dict.fromkeys(added.items))
                queued = {
                    int(r[0])
                    for r in conn.execute(
                        f"SELECT id FROM items WHERE position IS NOT NULL AND id IN ({_marks(len(unique))})", unique
                    )
                }
        return {
            "run": {"id": added.run_id, "name": name},
            "items": [
                {"index": rec.index, "item": item, "new": new, "queued": item in queued}
                for rec, item, new in zip(records, added.items, added.created, strict=True)
            ],
            "added": added.new,
            "queued": [i for i in dict.fromkeys(added.items) if i in queued],
            "newly_queued": newly,
        }

    def item(self, call: _Call) -> dict[str, Any]:
        found = item_states(self.store, [call.ids["item_id"]])
        if not found:
            raise ApiError(404, "not_found", "no such item")
        return next(iter(found.values()))

    def _fingerprint(self, ids: tuple[int, ...]) -> tuple[Any, ...]:
        marks = _marks(len(ids))
        with self.store.read() as conn:
            a = conn.execute(f"SELECT COUNT(*), COALESCE(MAX(id), 0) FROM reviews WHERE item_id IN ({marks})", ids)
            b = conn.execute(
                f"SELECT COUNT(*), COALESCE(SUM(created_at), 0) FROM adjudications WHERE item_id IN ({marks})", ids
            )
            return (*a.fetchone(), *b.fetchone())

    async def items(self, call: _Call) -> dict[str, Any]:
        q: ItemsQuery = call.query
        ids = tuple(dict.fromkeys(int(x) for x in q.ids.split(",")))
        wait = min(q.wait, self.config.max_wait)
        began = time.monotonic()
        states = await run_in_threadpool(item_states, self.store, ids)
        start = {i: _settled(s) for i, s in states.items()}
        changed: list[int] = []
        if wait > 0 and states and not all(start.values()):
            deadline = began + wait
            seen, looked = self.store.changes, time.monotonic()
            mark = await run_in_threadpool(self._fingerprint, ids)
            while (left := deadline - time.monotonic()) > 0:
                await asyncio.sleep(min(self.config.poll_interval, left))
                if self.store.changes == seen and time.monotonic() - looked < self.config.db_poll:
                    continue
                seen, looked = self.store.changes, time.monotonic()
                now = await run_in_threadpool(self._fingerprint, ids)
                if now == mark:
                    continue
                mark = now
                states = await run_in_threadpool(item_states, self.store, ids)
                changed = [i for i, s in states.items() if _settled(s) not in (None, start[i])]
                if changed:
                    break
        return {
            "items": [states[i] for i in ids if i in states],
            "missing": [i for i in ids if i not in states],
            "changed": changed,
            "waited": round(time.monotonic() - began, 3),
        }

    def take(self, call: _Call) -> dict[str, Any]:
        reviewer = call.who
        current = self.store.reviewer(reviewer.id)
        if current is None or current.paused:
            return {"item": None, "reason": "paused"}
        item_id = take_next(self.store, reviewer)
        if item_id is None:
            return {"item": None, "reason": "empty"}
        item = self.store.item(item_id)
        assert item is not None
        view = episode_view(self.store.record(item_id), self.registry)
        return {
            "item": {
                "id": item_id,
                "instruction": view.instruction,
                "steps": [{"role": s.role, "text": s.text, "calls": [asdict(c) for c in s.calls]} for s in view.steps],
                "changes": [
                    {"table": c.table, "pk": c.pk, "kind": c.kind, "fields": [list(f) for f in c.fields]}
                    for c in view.changes
                ],
                "replay_error": view.replay_error,
                "rubric": [{"key": c.key, "label": c.label} for c in item.checks],
            },
            "reason": None,
        }

    def review(self, call: _Call) -> dict[str, Any]:
        body: ReviewIn = call.body
        item_id, reviewer = call.ids["item_id"], call.who
        if self.store.item(item_id) is None or self.store.assignment(item_id, reviewer.id) is None:
            raise ApiError(404, "not_found", "no such item")
        review = ReviewInput(
            item_id=item_id,
            reviewer_id=reviewer.id,
            passed=body.passed,
            reason=body.reason,
            rubric=dict(body.rubric),
            flag_hacking="hacking" in body.flags,
            flag_task_wrong="task_wrong" in body.flags,
            flag_edge_case="edge_case" in body.flags,
            reason_keys=body.reason_keys,
            reason_pasted=body.reason_pasted,
        )
        review_id, created = submit_grade(self.store, review)
        after = self.store.reviewer(reviewer.id)
        return {"review": review_id, "created": created, "paused": bool(after is not None and after.paused)}

    def propose_edge_case(self, call: _Call) -> dict[str, Any]:
        from mirrorworld.review import edge_cases

        body: EdgeCaseIn = call.body
        item_id = call.ids["item_id"]
        reviewer = call.who
        visible = self.store.item(item_id) is not None and (
            reviewer.can("adjudicator") or self.store.assignment(item_id, reviewer.id) is not None
        )
        if not visible:  # as on the pages: an item a reviewer never took does not exist for them
            raise ApiError(404, "not_found", "no such item")
        case = edge_cases.propose(self.store, item_id, reviewer.id, body.variant, registry=self.registry)
        return _edge_case(self.store, case)

    def edge_cases(self, call: _Call) -> dict[str, Any]:
        from mirrorworld.review import edge_cases

        return {"edge_cases": [c.to_dict() for c in edge_cases.list_cases(self.store)]}

    def accept_edge_case(self, call: _Call) -> dict[str, Any]:
        from mirrorworld.review import edge_cases

        case_id = call.ids["case_id"]
        _edge_case(self.store, case_id)  # a 404 for an unknown id
        regression = edge_cases.accept(self.store, case_id, call.who.id, registry=self.registry)
        return {**_edge_case(self.store, case_id), "regression": regression.to_dict()}

    def reject_edge_case(self, call: _Call) -> dict[str, Any]:
        from mirrorworld.review import edge_cases

        body: DecisionIn = call.body
        case_id = call.ids["case_id"]
        _edge_case(self.store, case_id)
        edge_cases.reject(self.store, case_id, call.who.id, body.reason)
        return _edge_case(self.store, case_id)

    def agreement(self, call: _Call) -> dict[str, Any]:
        from mirrorworld.ship.compare import IncomparableError

        key = self.store.version()
        if self._stats is None or self._stats[0] != key:
            try:
                self._stats = (key, compute_stats(self.store, self.stats_options))
            except IncomparableError as err:
                raise ApiError(409, "incomparable", str(err)) from None
        return self._stats[1]

    def drift(self, call: _Call) -> dict[str, Any]:
        return compute_drift(self.store, self.drift_policy)

    def labels(self, call: _Call) -> dict[str, Any]:
        q: LabelsQuery = call.query
        with self.store.read() as conn:
            page = [
                int(r[0])
                for r in conn.execute(
                    "SELECT i.id FROM items i WHERE i.id > ? AND (EXISTS (SELECT 1 FROM reviews v WHERE"
                    " v.item_id=i.id) OR EXISTS (SELECT 1 FROM adjudications a WHERE a.item_id=i.id))"
                    " ORDER BY i.id LIMIT ?",
                    (q.after, q.limit + 1),
                )
            ]
            more = len(page) > q.limit
            ids = tuple(page[: q.limit])
            marks = _marks(len(ids))
            runs = {int(r[0]): str(r[1]) for r in conn.execute("SELECT id, path FROM runs")}
            items = {i.id: i for i in self.store.items(conn, f"i.id IN ({marks})", ids)} if ids else {}
            reviews: dict[int, list[ReviewRow]] = {}
            if ids:
                for r in self.store.reviews(conn, f"v.item_id IN ({marks})", ids):
                    reviews.setdefault(r.item_id, []).append(r)
            adjudications = {k: v for k, v in self.store.adjudications(conn).items() if k in items}
        out = []
        for item_id in ids:
            item, rs, adj = items[item_id], reviews.get(item_id, []), adjudications.get(item_id)
            out.append(
                {
                    "item": item.id,
                    "run": runs.get(item.run_id, ""),
                    "episode": item.episode,
                    "task_id": item.task_id,
                    "family": item.family,
                    "agent": item.agent,
                    "gold": item.gold_answer is not None,
                    "verifier": _verifier(item),
                    "checks": [c.to_dict() for c in item.checks],
                    "reviews": [
                        {
                            "reviewer_id": r.reviewer_id,
                            "reviewer": r.reviewer,
                            "passed": r.passed,
                            "rubric": r.rubric,
                            "flags": _flag_names(r),
                            "reason": r.reason,
                            "seconds": r.seconds,
                            "submitted_at": r.submitted_at,
                        }
                        for r in rs
                    ],
                    "adjudication": None
                    if adj is None
                    else {"passed": adj["passed"], "reason": adj["reason"], "by": adj["by"], "at": adj["at"]},
                    "human": human_verdict(rs, adj),
                }
            )
        return {"items": out, "next": ids[-1] if more and ids else None}

    def add_webhook(self, call: _Call) -> dict[str, Any]:
        body: WebhookIn = call.body
        return self.webhooks.add(body.url, list(body.events), call.who.id)

    def list_webhooks(self, call: _Call) -> dict[str, Any]:
        return {"webhooks": self.webhooks.listing()}

    def delete_webhook(self, call: _Call) -> dict[str, Any]:
        if not self.webhooks.delete(call.ids["webhook_id"], call.who.id):
            raise ApiError(404, "not_found", "no such webhook")
        return {"deleted": True}

    def add_token(self, call: _Call) -> dict[str, Any]:
        body: TokenIn = call.body
        if not body.create_reviewer and all(r.name != body.reviewer for r in self.store.reviewers()):
            raise ApiError(404, "not_found", "no such reviewer (create_reviewer makes one)")
        token, secret = self.store.create_token(
            body.reviewer,
            role=body.role,
            label=body.label,
            expires_in=body.expires_in,
            create=body.create_reviewer,
            by=call.who.id,
        )
        return {**token.to_dict(), "token": secret}

    def list_tokens(self, call: _Call) -> dict[str, Any]:
        return {"tokens": [t.to_dict() for t in self.store.tokens()]}

    def revoke_token(self, call: _Call) -> dict[str, Any]:
        if not self.store.revoke_token(call.ids["token_id"], by=call.who.id):
            raise ApiError(404, "not_found", "no such token")
        return {"deleted": True}


def _flag_names(r: ReviewRow) -> list[str]:
    """A review's flags in the API's words (the names ``review`` takes)."""
    named = (("hacking", r.flag_hacking), ("task_wrong", r.flag_task_wrong), ("edge_case", r.flag_edge_case))
    return [name for name, on in named if on]


class _Prefix(BaseRoute):
    """Every HTTP request whose path is under :data:`API`, whatever its characters (the API answers unknown paths
    itself, in JSON; Starlette's path patterns stop at a newline and would leave those to a plain-text 404)."""

    def __init__(self, app: _Api) -> None:
        self.app = app

    def matches(self, scope: Any) -> tuple[Match, dict[str, Any]]:
        path = scope.get("path", "")
        if scope["type"] == "http" and (path == API or path.startswith(API + "/")):
            return Match.FULL, {}
        return Match.NONE, {}

    def url_path_for(self, name: str, /, **params: Any) -> Any:
        raise NoMatchFound(name, params)

    async def handle(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


def api_routes(
    store: ReviewStore,
    *,
    registry: Registry | None = None,
    stats_options: StatsOptions | None = None,
    drift_policy: DriftPolicy | None = None,
    config: ApiConfig | None = None,
) -> list[BaseRoute]:
    """The route that serves the API under :data:`API` (the review app adds it to its pages)."""
    api = _Api(store, registry, stats_options or StatsOptions(), drift_policy or DriftPolicy(), config or ApiConfig())
    return [_Prefix(api)]
