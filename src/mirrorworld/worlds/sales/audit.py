"""What the sales world tells the verifier audit: other valid paths, policy
shortcuts and the claims a final message can make."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mirrorworld.core.task import Task, ToolCall
from mirrorworld.core.world import AuditHooks

if TYPE_CHECKING:
    from mirrorworld.core.session import Session
    from mirrorworld.core.world import World

__all__ = ["SalesAudit"]


class SalesAudit(AuditHooks):
    """Audit hooks of the sales world."""

    def __init__(self, world: World) -> None:
        self.world = world

    def undo(self, session: Session, call: ToolCall) -> list[ToolCall] | None:
        # Every write of this world moves a record forward along its state
        # machine or creates one; none has an undo the real system allows.
        return None

    def alternative_solutions(self, task: Task) -> list[tuple[str, list[ToolCall]]]:
        gold = list(task.gold)
        party = task.customer_id
        if party is None or not gold:
            return []
        return [
            (
                "look the customer up first",
                [ToolCall("get_party", {"party_id": party}), ToolCall("list_sales", {"party_id": party}), *gold],
            )
        ]
