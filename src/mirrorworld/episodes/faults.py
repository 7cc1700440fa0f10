"""Fault and latency injection: an episode option (``EpisodeOptions(faults=Faults(...))``).

Production APIs fail transiently. :class:`Faults` makes a seeded fraction of
an episode's tool calls fail the way a real system's do, before the call
runs:

* ``timeout``: the request timed out (``retryable``);
* ``rate_limited``: too many requests, with ``retry_after_s`` (a 429);
* ``unavailable``: the service is briefly down (a 503).

A faulted call changes nothing, counts as a step (it is a call the agent
made) and is recorded as a refused call with its error, so an agent that
retries a faulted call gets the same end state as one that met no fault,
and the verifier treats the retry as harmless. An agent that does not retry
leaves the work undone and fails on the state, as it would in production.

``lost_response`` (off unless named in ``kinds``) is the ambiguous fault: a
write that committed, whose answer was lost (the agent sees a ``timeout``).
Retrying it blindly writes twice; the contract holds the agent responsible for
that duplicate (checking the state before retrying a write is the agent's
job), so the verifier grades it like any other extra write.

``latency_s`` moves the simulated clock forward by that many seconds on every
call, so time-bound rules (an identity check valid for an hour, response-time
targets) feel a slow system.

Whether step ``n`` of an episode faults is a pure function of ``seed``, the
task's id and ``n`` (never of the wall clock or the process), so a run with
faults is as reproducible as one without.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mirrorworld.errors import MirrorworldError

__all__ = ["FAULT_KINDS", "Faults"]

FAULT_KINDS = ("timeout", "rate_limited", "unavailable", "lost_response")
_TRANSIENT = ("timeout", "rate_limited", "unavailable")

_MESSAGES = {
    "timeout": "the request timed out before the system answered; it was not processed",
    "rate_limited": "too many requests: retry after the given number of seconds",
    "unavailable": "the service is temporarily unavailable; try again",
    "lost_response": "the request timed out before the system answered",
}


@dataclass(frozen=True, slots=True)
class Faults:
    """Seeded transient failures and latency for an episode's tool calls. See the module docstring."""

    rate: float = 0.0
    """The probability that a call faults, in [0, 1)."""
    kinds: tuple[str, ...] = _TRANSIENT
    """The faults drawn from, uniformly (see :data:`FAULT_KINDS`)."""
    seed: int = 0
    latency_s: float = 0.0
    """Simulated seconds every call takes (0: none)."""
    writes_only: bool = False
    """Fault only calls to write tools (reads never fail)."""

    def __post_init__(self) -> None:
        rate = self.rate
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not (0.0 <= rate < 1.0):
            raise MirrorworldError(f"a fault rate must be a number in [0, 1), not {str(rate)[:40]}")
        kinds = tuple(self.kinds)
        if not kinds or any(k not in FAULT_KINDS for k in kinds):
            raise MirrorworldError(f"fault kinds must be some of {', '.join(FAULT_KINDS)}")
        object.__setattr__(self, "kinds", kinds)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**63:
            raise MirrorworldError("a fault seed must be a non-negative integer")
        lat = self.latency_s
        if isinstance(lat, bool) or not isinstance(lat, (int, float)) or not math.isfinite(lat) or not 0 <= lat <= 3600:
            raise MirrorworldError("latency_s must be a number of seconds in [0, 3600]")

    @classmethod
    def parse(cls, value: Faults | str | Mapping[str, Any] | None) -> Faults | None:
        """Faults from ``rate=0.1,seed=3,kinds=timeout+unavailable,latency_s=2`` or a mapping (None: none)."""
        if value is None or value == "":
            return None
        if isinstance(value, Faults):
            return value
        if isinstance(value, str):
            fields: dict[str, Any] = {}
            for item in value.split(","):
                key, sep, text = item.partition("=")
                if not sep:
                    raise MirrorworldError(f"fault option {item[:40]!r} is not KEY=VALUE")
                fields[key.strip()] = text.strip()
            value = fields
        if not isinstance(value, Mapping):
            raise MirrorworldError("faults must be an object or KEY=VALUE pairs")
        unknown = set(value) - {"rate", "kinds", "seed", "latency_s", "writes_only"}
        if unknown:
            raise MirrorworldError(f"unknown fault option {sorted(unknown)[0][:40]!r}")
        try:
            rate = float(value.get("rate", 0.0))
            seed = int(value.get("seed", 0))
            latency = float(value.get("latency_s", 0.0))
        except (TypeError, ValueError):
            raise MirrorworldError("fault rate, seed and latency_s must be numbers") from None
        kinds = value.get("kinds", _TRANSIENT)
        if isinstance(kinds, str):
            kinds = tuple(k for k in kinds.replace("+", " ").split() if k)
        if not isinstance(kinds, (list, tuple)) or not all(isinstance(k, str) for k in kinds):
            raise MirrorworldError("fault kinds must be a list of names")
        writes = value.get("writes_only", False)
        if isinstance(writes, str):
            writes = writes.strip().lower() in ("1", "true", "yes")
        return cls(rate=rate, kinds=tuple(kinds), seed=seed, latency_s=latency, writes_only=bool(writes))

    def to_dict(self) -> dict[str, Any]:
        return {
            "rate": self.rate,
            "kinds": list(self.kinds),
            "seed": self.seed,
            "latency_s": self.latency_s,
            "writes_only": self.writes_only,
        }

    def draw(self, task_id: str, step: int, kind: str | None) -> str | None:
        """The fault of call ``step`` of an episode of ``task_id`` to a tool of ``kind`` (None: it runs)."""
        if self.rate <= 0.0 or kind is None or kind == "terminal" or (self.writes_only and kind != "write"):
            return None
        digest = hashlib.sha256(f"mirrorworld/faults/{self.seed}/{task_id}/{step}".encode()).digest()
        u = int.from_bytes(digest[:8], "big") / 2**64
        if u >= self.rate:
            return None
        fault = self.kinds[int.from_bytes(digest[8:12], "big") % len(self.kinds)]
        if fault == "lost_response" and kind != "write":
            fault = "timeout"  # a read that never answered did nothing either way
        return fault

    @staticmethod
    def error(fault: str, task_id: str, step: int) -> dict[str, Any]:
        """The error observation of ``fault``."""
        code = "timeout" if fault == "lost_response" else fault
        out: dict[str, Any] = {"code": code, "message": _MESSAGES[fault], "retryable": True}
        if fault == "rate_limited":
            out["retry_after_s"] = 1 + int(hashlib.sha256(f"{task_id}/{step}".encode()).digest()[0]) % 5
        return out
