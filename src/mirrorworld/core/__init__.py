"""The core engine: worlds, sessions, tools, tasks and SQLite images."""

from mirrorworld.core.session import Event, RowChange, Session, ToolContext, ToolResult, Violation
from mirrorworld.core.task import Check, Fact, SetupOp, Task, TaskFamily, ToolCall
from mirrorworld.core.tools import ToolSpec, tool
from mirrorworld.core.world import GoldOutcome, Rule, World

__all__ = [
    "World", "Rule", "GoldOutcome", "Session", "ToolContext", "ToolResult", "Event", "Violation", "RowChange",
    "Task", "TaskFamily", "ToolCall", "SetupOp", "Check", "Fact", "ToolSpec", "tool",
]
