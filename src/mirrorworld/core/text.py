"""Text arguments as tools check them: search queries, text fields, LIKE patterns.

Every world's tools use these, so that the same mistake (an empty reason, a
one-letter search) gets the same ``invalid_arguments`` error in every world
and on every backend.
"""

from __future__ import annotations

from mirrorworld.core.tools import MAX_STRING
from mirrorworld.errors import ToolError

__all__ = ["clean_text", "like_pattern", "search_query"]


def search_query(text: str) -> str:
    """A search query with its whitespace collapsed: 2 to 200 characters."""
    q = " ".join(text.split())
    if len(q) < 2:
        raise ToolError("invalid_arguments", "query must have at least 2 characters")
    if len(q) > 200:
        raise ToolError("invalid_arguments", "query must have at most 200 characters")
    return q


def clean_text(value: str, name: str, limit: int = MAX_STRING) -> str:
    """A text field with its whitespace collapsed: not empty, at most ``limit`` characters."""
    text = " ".join(value.split())
    if not text:
        raise ToolError("invalid_arguments", f"{name} must not be empty")
    if len(text) > limit:
        raise ToolError("invalid_arguments", f"{name} must have at most {limit} characters")
    return text


def like_pattern(text: str) -> str:
    """A ``LIKE ... ESCAPE '\\'`` pattern matching ``text`` literally anywhere."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"
