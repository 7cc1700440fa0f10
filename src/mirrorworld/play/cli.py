"""The ``play``command (placeholder)."""

from __future__ import annotations

from typing import Any

from mirrorworld.core.registry import Registry


def register(sub: Any, registry: Registry) -> dict[str, Any]:
    return {}
