"""The core engine: worlds, sessions, tools, tasks and SQLite images."""

from mirrorworld.core.session import Event, RowChange, Session, ToolContext, ToolResult, Violation
from mirrorworld.core.task import Check, Fact, SetupOp, Task, TaskFamily, ToolCall
from mirrorworld.core.tools import ToolSpec, tool
from mirrorworld.core.world import GoldOutcome, Rule, World

__all__ = [
    "Check",
    "Event",
    "Fact",
    "GoldOutcome",
    "RowChange",
    "Rule",
    "Session",
    "SetupOp",
    "Task",
    "TaskFamily",
    "ToolCall",
    "ToolContext",
    "ToolResult",
    "ToolSpec",
    "Violation",
    "World",
    "tool",
]
