"""The session manager: many isolated episodes behind opaque ids.

:class:`SessionManager` is the whole server minus the network. Each live
session owns one :class:`~mirrorworld.episodes.Episode` (its own SQLite
connection, its own process reward, its own verdict) and is named by an
unguessable id. Every operation is synchronous and quick (microseconds for a
step), so the server runs them on its event loop, one at a time: no two
operations ever touch the same session concurrently, and sessions share
nothing mutable, so interleaving clients cannot leak state into each other.

Every request-level mistake raises :class:`ApiError` (an HTTP status, a stable
``code`` and a message); the transports turn it into a response. A tool call
that fails is *not* a request error: it is a step result with ``ok: false``
and the error ``{code, message}`` the agent sees, exactly as in a local
session, and it leaves the state unchanged.

Lifecycle::

    create(spec) ──► live ──step/state/verdict/fork──► live ──close──► closed
                      │                                             ▲
                      └──── idle for idle_timeout_s ───► expired ───┘

A session that a transport holds (``LiveSession.attached``: a WebSocket
connection that created it or attached to it) is never idle: it stays live as
long as the connection, which closes it (or lets go of it) when it ends. A
closed or expired id is remembered (up to ``remember_closed`` of them) so that
later use answers ``410`` with the reason instead of ``404``.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from mirrorworld.core.registry import Registry, default
from mirrorworld.core.task import Task
from mirrorworld.core.world import World
from mirrorworld.episodes import Episode, EpisodeOptions, Faults, select_task
from mirrorworld.errors import MirrorworldError, RegistryError, TaskRefError
from mirrorworld.server.config import ServerConfig
from mirrorworld.server.models import CreateRequest, ResetRequest

__all__ = ["ApiError", "LiveSession", "RawJSON", "SessionManager", "validation_message"]

log = logging.getLogger("mirrorworld.server")


class RawJSON:
    """JSON text to splice into a response as it is (the agent-visible tool result)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"RawJSON({self.text!r})"


class ApiError(MirrorworldError):
    """A request the server refuses: an HTTP status, a stable code and a message."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra

    def body(self) -> dict[str, Any]:
        """The error as the wire format ``{"error": {code, message, ...}}``."""
        return {"error": {"code": self.code, "message": self.message, **self.extra}}


def validation_message(err: ValidationError) -> str:
    """A one-line summary of a pydantic validation error, naming the first bad field."""
    first = err.errors(include_url=False)[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "body"
    return f"{where}: {first.get('msg', 'invalid')}"


@dataclass(eq=False)
class LiveSession:
    """One live session: its episode and bookkeeping (treat as read-only outside the manager)."""

    id: str
    world: World
    episode: Episode
    client: str
    created: float
    last_used: float
    ops: int = 0
    attached: set[str] = field(default_factory=set)
    """Transports holding the session open (a WebSocket connection that owns it): while any does, it never expires."""

    def info(self) -> dict[str, Any]:
        ep = self.episode
        task = ep.task
        s = ep.session
        return {
            "session_id": self.id,
            "world": self.world.id,
            "world_hash": self.world.content_hash,
            "task_id": task.id,
            "family": task.family,
            "split": task.split,
            "instruction": task.instruction,
            "max_steps": ep.max_steps,
            "reward": ep.options.reward,
            "tools": list(self.world.tool_names),
            "step": s.steps,
            "done": ep.over,
            "view": s.view,
            "records": ",".join(s.viewed),
        }


class _Bucket:
    """A token bucket: ``rate`` tokens a second, holding at most one second's worth."""

    __slots__ = ("rate", "stamp", "tokens")

    def __init__(self, rate: float, now: float) -> None:
        self.rate = rate
        self.tokens = rate
        self.stamp = now

    def take(self, now: float) -> float:
        """0.0 if a token was taken, else the seconds until one is available."""
        tokens = min(self.rate, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if tokens >= 1.0:
            self.tokens = tokens - 1.0
            return 0.0
        self.tokens = tokens
        return (1.0 - tokens) / self.rate


class SessionManager:
    """Creates, steps, forks, grades and closes sessions. See the module docstring."""

    def __init__(
        self,
        config: ServerConfig | None = None,
        registry: Registry | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config or ServerConfig()
        self.registry = registry or default
        self.clock = clock
        self._live: dict[str, LiveSession] = {}
        self._gone: OrderedDict[str, str] = OrderedDict()
        self._per_client: Counter[str] = Counter()
        self._buckets: dict[str, _Bucket] = {}
        names = self.config.worlds if self.config.worlds is not None else tuple(self.registry.names())
        self.world_names: tuple[str, ...] = tuple(n.lower() for n in names)
        unknown = set(self.world_names) - set(self.registry.names())
        if unknown or not self.world_names:
            known = ", ".join(self.registry.names())
            raise MirrorworldError(f"cannot serve world {sorted(unknown)[0] if unknown else '(none)'} (known: {known})")
        self.started = clock()
        self.counters: Counter[str] = Counter()

    # -- worlds and tasks -------------------------------------------------------

    def world(self, name: str) -> World:
        """A world this server serves (``404 unknown_world`` otherwise)."""
        key = name.lower() if isinstance(name, str) else ""
        if key not in self.world_names:
            raise ApiError(404, "unknown_world", f"no world named {name!r} (served: {', '.join(self.world_names)})")
        return self.registry.get(key)

    def warm(self) -> None:
        """Build every served world's image now, so the first session is quick."""
        for name in self.world_names:
            _ = self.registry.get(name).image

    def resolve_task(self, world: World, spec: ResetRequest) -> Task:
        """The task ``spec`` names (see :mod:`mirrorworld.server.models`)."""
        try:
            return select_task(
                world,
                split=spec.split,
                families=tuple(spec.families) if spec.families else None,
                task_id=spec.task_id,
                family=spec.family,
                seed=spec.seed,
                index=spec.index if spec.index is not None else (spec.seed or 0),
            )
        except TaskRefError as err:
            raise ApiError(400, "invalid_request", str(err)) from None
        except RegistryError as err:
            raise ApiError(404, "unknown_task", str(err)) from None
        except MirrorworldError as err:
            raise ApiError(400, "invalid_request", str(err)) from None

    # -- lifecycle --------------------------------------------------------------

    def create(self, spec: CreateRequest | Mapping[str, Any], client: str = "local") -> LiveSession:
        """A new session playing the task ``spec`` names."""
        req = _parse(CreateRequest, spec)
        world = self.world(req.world)
        max_steps = self._max_steps(req)
        task = self.resolve_task(world, req)
        self._make_room(client)
        episode = Episode(world, task, EpisodeOptions(max_steps=max_steps, reward=req.reward, faults=_faults(req)))
        return self._register(world, episode, client)

    def _max_steps(self, req: ResetRequest) -> int:
        limit = self.config.max_steps_limit
        if "max_steps" not in req.model_fields_set:
            return min(req.max_steps, limit)
        if req.max_steps > limit:
            raise ApiError(400, "invalid_request", f"max_steps is at most {limit}")
        return req.max_steps

    def _make_room(self, client: str) -> None:
        cfg = self.config
        if len(self._live) >= cfg.max_sessions:
            self.evict_idle()
        if len(self._live) >= cfg.max_sessions:
            self.counters["refused_capacity"] += 1
            raise ApiError(503, "too_many_sessions", f"the server holds its limit of {cfg.max_sessions} sessions")
        per_client = cfg.sessions_per_client()
        if self._per_client[client] >= per_client:
            self.counters["refused_capacity"] += 1
            raise ApiError(429, "too_many_sessions", f"this client holds its limit of {per_client} sessions")

    def _register(self, world: World, episode: Episode, client: str) -> LiveSession:
        sid = secrets.token_urlsafe(12)
        now = self.clock()
        live = LiveSession(sid, world, episode, client, now, now)
        self._live[sid] = live
        self._per_client[client] += 1
        self.counters["created"] += 1
        return live

    def get(self, sid: str) -> LiveSession:
        """The live session ``sid`` (404 unknown, 410 closed or expired); marks it used."""
        live = self._live.get(sid) if isinstance(sid, str) else None
        if live is None:
            reason = self._gone.get(sid) if isinstance(sid, str) else None
            if reason == "expired":
                raise ApiError(
                    410,
                    "session_expired",
                    f"session {sid} was closed after {self.config.idle_timeout_s:g} s without use",
                )
            if reason is not None:
                raise ApiError(410, "session_closed", f"session {sid} is closed ({reason})")
            raise ApiError(404, "unknown_session", "no such session")
        live.last_used = self.clock()
        live.ops += 1
        return live

    def reset(self, sid: str, spec: ResetRequest | Mapping[str, Any]) -> LiveSession:
        """Start a new episode in session ``sid`` (the old one is discarded)."""
        req = _parse(ResetRequest, spec)
        live = self.get(sid)
        max_steps = self._max_steps(req)
        task = self.resolve_task(live.world, req)
        episode = Episode(live.world, task, EpisodeOptions(max_steps=max_steps, reward=req.reward, faults=_faults(req)))
        live.episode.close()
        live.episode = episode
        return live

    def close(self, sid: str, reason: str = "closed by the client") -> None:
        """Close session ``sid`` and remember why."""
        live = self._live.pop(sid, None)
        if live is None:
            self.get(sid)  # raises the right error
            return
        live.episode.close()
        self._per_client[live.client] -= 1
        if self._per_client[live.client] <= 0:
            del self._per_client[live.client]
        self._gone[sid] = reason
        while len(self._gone) > self.config.remember_closed:
            self._gone.popitem(last=False)
        self.counters["closed" if reason != "expired" else "expired"] += 1

    def evict_idle(self, now: float | None = None) -> int:
        """Close every session idle for longer than the timeout; return how many."""
        now = self.clock() if now is None else now
        limit = now - self.config.idle_timeout_s
        stale = [sid for sid, live in self._live.items() if live.last_used < limit and not live.attached]
        for sid in stale:
            self.close(sid, "expired")
        if stale:
            log.info("evicted %d idle sessions (%d live)", len(stale), len(self._live))
        return len(stale)

    def close_all(self, reason: str = "server shutdown") -> int:
        """Close every session (at shutdown)."""
        ids = list(self._live)
        for sid in ids:
            self.close(sid, reason)
        return len(ids)

    # -- stepping ---------------------------------------------------------------

    def throttle(self, client: str) -> None:
        """Take one step token for ``client`` (``429 rate_limited`` when none is left).

        Only :meth:`step` takes one, so the rate covers tool calls on every
        transport and nothing else (see :mod:`~mirrorworld.server.config`).
        """
        rate = self.config.step_rate
        if rate is None:
            return
        now = self.clock()
        bucket = self._buckets.get(client)
        if bucket is None:
            if len(self._buckets) > 100_000:
                self._buckets.clear()
            bucket = self._buckets[client] = _Bucket(rate, now)
        wait = bucket.take(now)
        if wait:
            self.counters["rate_limited"] += 1
            raise ApiError(
                429,
                "rate_limited",
                f"more than {rate:g} tool calls a second from this client",
                retry_after_s=round(wait, 3),
            )

    def step(self, sid: str, tool: Any, args: Any, client: str = "local") -> dict[str, Any]:
        """Run one tool call in session ``sid``; the step response (``result`` as :class:`RawJSON`)."""
        self.throttle(client)
        live = self.get(sid)
        self.counters["steps"] += 1
        outcome = live.episode.step(tool, args)
        out: dict[str, Any] = {
            "ok": outcome.ok,
            "result": RawJSON(outcome.content()),
            "reward": outcome.reward,
            "terminated": outcome.terminated,
            "truncated": outcome.truncated,
            "done": outcome.done,
            "step": outcome.step,
            "view": outcome.view,
            "records": ",".join(outcome.viewed),
        }
        if outcome.verdict is not None:
            out["verdict"] = outcome.verdict.to_dict()
        return out

    def state(self, sid: str) -> dict[str, Any]:
        live = self.get(sid)
        ep = live.episode
        return {
            "session_id": sid,
            "state_hash": ep.session.state_hash(),
            "task_id": ep.task.id,
            "step": ep.session.steps,
            "max_steps": ep.max_steps,
            "terminated": ep.terminated,
            "truncated": ep.truncated,
            "done": ep.over,
            "total_reward": ep.total_reward,
        }

    def verdict(self, sid: str) -> dict[str, Any]:
        """End the episode now (if it is still running) and grade it."""
        live = self.get(sid)
        verdict = live.episode.finish()
        return {"session_id": sid, "task_id": live.episode.task.id, **verdict.to_dict()}

    def fork(self, sid: str, client: str = "local") -> LiveSession:
        """A new session continuing from the state of ``sid``; the two then evolve apart."""
        live = self.get(sid)
        self._make_room(client)
        return self._register(live.world, live.episode.fork(), client)

    # -- inspection -------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, sid: object) -> bool:
        return sid in self._live

    def stats(self) -> dict[str, Any]:
        return {
            "sessions": len(self._live),
            "max_sessions": self.config.max_sessions,
            "clients": len(self._per_client),
            "uptime_s": round(self.clock() - self.started, 3),
            **{k: v for k, v in sorted(self.counters.items())},
        }


def _parse(model: type[ResetRequest], spec: ResetRequest | Mapping[str, Any]) -> Any:
    if isinstance(spec, model):
        return spec
    if not isinstance(spec, Mapping):
        raise ApiError(400, "invalid_request", "the body must be a JSON object")
    try:
        return model.model_validate(dict(spec))
    except ValidationError as err:
        raise ApiError(400, "invalid_request", validation_message(err)) from None


def _faults(req: Any) -> Faults | None:
    """The faults a reset or create request asks for (None: none)."""
    model = getattr(req, "faults", None)
    return None if model is None else Faults.parse(model.model_dump())
