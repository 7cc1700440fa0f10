"""What an artifact says about the world it holds: the manifest.

A :class:`Manifest` is JSON (``mirrorworld-manifest.json`` in the artifact's
``.dist-info`` folder), written canonically (sorted keys, no whitespace
variation) so that the same world gives the same bytes::

    {
      "format": "mirrorworld-artifact/1",
      "env_id": "mirrorworld/Helpdesk-v0", "world": "helpdesk", "version": 0,
      "content_hash": "90a2ec42dcb98832",
      "parts": {"schema": "505b…", "rules": "4a89…", "tool_schemas": "9fe5…", …},
      "data_seed": 0, "scale": 1.0,
      "mirrorworld_version": "0.1.0", "python": ">=3.11",
      "dependencies": ["gymnasium<2,>=1.0", "numpy>=1.26", "rich>=13"],
      "extras": {"server": ["fastapi<0.170,>=0.160", …]},
      "determinism": {"seeded": true, "statement": "…"},
      "reward_range": [0.0, 1.0],
      "licence": "Apache-2.0",
      "families": ["refund_damaged", …], "tools": ["get_customer", …]
    }

``content_hash`` is the world's :attr:`~mirrorworld.core.world.World.content_hash`
(what every run file records as ``world_hash``); ``parts`` are its
:meth:`~mirrorworld.core.world.World.score_parts`, one hash per
score-relevant part, so two artifacts (or two runs) can say *which* part
differs. :func:`differing_parts` does that comparison everywhere.

Manifests read from disk are untrusted: :meth:`Manifest.from_dict` checks
every field's type and bounds and refuses anything else with one line.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from mirrorworld.core.world import SCORE_PARTS, content_hash_of
from mirrorworld.errors import MirrorworldError

if TYPE_CHECKING:
    from mirrorworld.core.world import World

__all__ = ["FORMAT", "Manifest", "differing_parts", "manifest_for"]

FORMAT = "mirrorworld-artifact/1"
"""The manifest format this mirrorworld writes and reads."""

DETERMINISM = (
    "reset(seed=s) gives byte-identical state and observation in any process, hash seed and time zone; "
    "no wall clock, no unseeded randomness: time comes from the simulated clock, ids from seeded sequences"
)

SCORE_RANGE = (0.0, 1.0)
"""``reward_range``: the range of a verdict's score, the outcome reward of an episode (shaping settles to 0)."""

_SPECIFIER = re.compile(r"(?:[<>=!~]{0,3}\s*[0-9][0-9a-z.*+!-]*\s*,?\s*)*\Z")
_HEX16 = re.compile(r"[0-9a-f]{16}\Z")
_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}\Z")
_ENV_ID = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}-v\d{1,6}\Z")
_SHORT = 200


class ManifestError(MirrorworldError):
    """A manifest that is not one this mirrorworld can read."""


@dataclass(frozen=True)
class Manifest:
    """The identity and promises of one world artifact (see the module docstring)."""

    env_id: str
    world: str
    version: int
    content_hash: str
    parts: Mapping[str, str]
    data_seed: int
    scale: float
    mirrorworld_version: str
    python: str
    dependencies: tuple[str, ...]
    extras: Mapping[str, tuple[str, ...]]
    reward_range: tuple[float, float]
    licence: str
    families: tuple[str, ...]
    tools: tuple[str, ...]
    determinism: Mapping[str, Any] = field(default_factory=lambda: {"seeded": True, "statement": DETERMINISM})
    format: str = FORMAT

    @property
    def name(self) -> str:
        """``world@hash``: how a version store and a run file name this artifact's world build."""
        return f"{self.world}@{self.content_hash}"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["parts"] = dict(sorted(self.parts.items()))
        out["extras"] = {k: list(v) for k, v in sorted(self.extras.items())}
        for key in ("dependencies", "families", "tools", "reward_range"):
            out[key] = list(out[key])
        return out

    def to_json(self) -> bytes:
        """Canonical bytes: the same manifest always serialises the same."""
        return json.dumps(self.to_dict(), sort_keys=True, indent=1, ensure_ascii=True).encode() + b"\n"

    @classmethod
    def from_json(cls, data: bytes) -> Manifest:
        from mirrorworld.run.untrusted import loads

        try:
            raw = loads(data.decode("utf-8"), "the manifest")
        except UnicodeDecodeError:
            raise ManifestError("the manifest is not UTF-8 text") from None
        except MirrorworldError as err:
            raise ManifestError(str(err)) from None
        return cls.from_dict(raw)

    @classmethod
    def from_dict(cls, raw: Any) -> Manifest:
        """A manifest from untrusted JSON; every field checked."""
        if not isinstance(raw, dict):
            raise ManifestError("the manifest is not a JSON object")
        fmt = raw.get("format")
        if fmt != FORMAT:
            raise ManifestError(f"unknown manifest format {_inert(fmt)} (this mirrorworld reads {FORMAT})")
        known = {f for f in cls.__dataclass_fields__}
        extra = sorted(set(raw) - known)
        if extra:
            raise ManifestError(f"the manifest has an unknown field {_inert(extra[0])}")
        missing = sorted(known - set(raw) - {"determinism"})
        if missing:
            raise ManifestError(f"the manifest lacks {missing[0]}")
        env_id, world = _text(raw, "env_id", _ENV_ID), _text(raw, "world", _NAME)
        version = raw["version"]
        if type(version) is not int or not 0 <= version < 10**6:
            raise ManifestError("the manifest's version is not an integer in [0, 10^6)")
        parts = raw["parts"]
        if not isinstance(parts, dict) or not parts or len(parts) > 64:
            raise ManifestError("the manifest's parts are not a map of part names to hashes")
        for k, v in parts.items():
            if not (isinstance(k, str) and _NAME.match(k) and isinstance(v, str) and _HEX16.match(v)):
                raise ManifestError(f"the manifest's part {_inert(k)} is not a name and a 16-hex hash")
        scale = raw["scale"]
        if type(scale) not in (int, float) or not 0 < scale <= 10_000:
            raise ManifestError("the manifest's scale is not a positive number")
        seed = raw["data_seed"]
        if type(seed) is not int or not 0 <= seed < 2**63:
            raise ManifestError("the manifest's data_seed is not a non-negative integer")
        lo_hi = raw["reward_range"]
        if (
            not isinstance(lo_hi, list)
            or len(lo_hi) != 2
            or not all(type(x) in (int, float) and math.isfinite(x) and abs(x) <= 1e6 for x in lo_hi)
            or not lo_hi[0] <= lo_hi[1]
        ):
            raise ManifestError("the manifest's reward_range is not [low, high] (finite numbers)")
        if set(parts) != set(SCORE_PARTS):
            raise ManifestError(f"the manifest's parts are not this format's: {', '.join(SCORE_PARTS)}")
        extras = raw["extras"]
        if not isinstance(extras, dict) or len(extras) > 64:
            raise ManifestError("the manifest's extras are not a map of extra names to requirements")
        determinism = raw.get("determinism", {"seeded": True, "statement": DETERMINISM})
        if not isinstance(determinism, dict) or not isinstance(determinism.get("seeded"), bool):
            raise ManifestError("the manifest's determinism is not {seeded, statement}")
        content_hash = _text(raw, "content_hash", _HEX16)
        if content_hash_of(env_id, parts) != content_hash:
            raise ManifestError("the manifest's content_hash is not the hash of its env_id and parts")
        world_of_id = env_id.rpartition("/")[2].rpartition("-v")
        if world_of_id[2] != str(version):
            raise ManifestError(f"the manifest's env_id {env_id} does not carry its version {version}")
        return cls(
            env_id=env_id,
            world=world,
            version=version,
            content_hash=content_hash,
            parts=dict(parts),
            data_seed=seed,
            scale=float(scale),
            mirrorworld_version=_text(raw, "mirrorworld_version"),
            python=_text(raw, "python", _SPECIFIER),
            dependencies=_texts(raw, "dependencies"),
            extras={_checked_name(k): _texts(extras, k) for k in extras},
            reward_range=(float(lo_hi[0]), float(lo_hi[1])),
            licence=_text(raw, "licence"),
            families=_texts(raw, "families", _NAME),
            tools=_texts(raw, "tools", _NAME),
            determinism={"seeded": determinism["seeded"], "statement": str(determinism.get("statement", ""))[:2000]},
        )


def manifest_for(world: World) -> Manifest:
    """The manifest of ``world`` as this installation builds it."""
    from importlib import metadata

    try:
        dist = metadata.distribution("mirrorworld")
        version = dist.version
        meta = dist.metadata
        python = meta["Requires-Python"] or ""
        licence = meta["License"] or meta["License-Expression"] or ""
        base: list[str] = []
        extras: dict[str, list[str]] = {}
        for req in dist.requires or ():
            spec, _, marker = req.partition(";")
            m = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
            if m is None:
                base.append(spec.strip())
            else:
                extras.setdefault(m.group(1), []).append(spec.strip())
    except metadata.PackageNotFoundError:  # running from a source tree that is not installed
        version, python, licence, base, extras = "0+unknown", "", "", [], {}
    low, high = SCORE_RANGE
    return Manifest(
        env_id=world.id,
        world=world.name,
        version=int(world.version),
        content_hash=world.content_hash,
        parts=world.score_parts(),
        data_seed=int(world.data_seed),
        scale=float(world.scale),
        mirrorworld_version=version,
        python=python,
        dependencies=tuple(sorted(base)),
        extras={k: tuple(sorted(v)) for k, v in sorted(extras.items())},
        reward_range=(float(low), float(high)),
        licence=licence,
        families=tuple(f.name for f in world.families),
        tools=tuple(t.name for t in world.tools),
    )


def differing_parts(a: Mapping[str, str], b: Mapping[str, str]) -> list[str]:
    """The score parts whose hashes differ between two part maps (a part only one side has differs too)."""
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def _inert(value: Any) -> str:
    """A short, printable rendering of an untrusted value."""
    return ascii(value)[:60]


def _checked_name(value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[a-z0-9][a-z0-9_.-]{0,63}", value):
        raise ManifestError(f"the manifest names an extra {_inert(value)}")
    return value


def _text(raw: Mapping[str, Any], key: str, pattern: re.Pattern[str] | None = None) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or len(value) > _SHORT or not value.isprintable():
        raise ManifestError(f"the manifest's {key} is not a short printable string")
    if pattern is not None and not pattern.match(value):
        raise ManifestError(f"the manifest's {key} {_inert(value)} is not well formed")
    return value


def _texts(raw: Mapping[str, Any], key: str, pattern: re.Pattern[str] | None = None) -> tuple[str, ...]:
    values = raw.get(key)
    if not isinstance(values, list) or len(values) > 1000:
        raise ManifestError(f"the manifest's {key} is not a list")
    out = []
    for v in values:
        if not isinstance(v, str) or len(v) > _SHORT or not v.isprintable():
            raise ManifestError(f"the manifest's {key} holds something that is not a short printable string")
        if pattern is not None and not pattern.match(v):
            raise ManifestError(f"the manifest's {key} holds {_inert(v)}")
        out.append(v)
    return tuple(out)
