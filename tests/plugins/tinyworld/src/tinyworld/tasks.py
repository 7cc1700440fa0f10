"""The library's task families.

Each family draws a loan from the pristine image with the task's seeded
``random.Random``, writes the member's opening request as setup, and states
the gold solution, scope, targets, checks and facts. ``hidden["plan"]`` says
which seat makes each gold call (the librarian makes them all);
``hidden["request"]`` is what the member came to say.
"""

from __future__ import annotations

import random
from typing import Any

from mirrorworld.core.store import Image
from mirrorworld.core.task import Check, Fact, SetupOp, Task, TaskFamily, ToolCall
from mirrorworld.errors import TaskError
from tinyworld.rules import EPOCH, LIBRARIAN, MEMBER, RENEWAL_LIMIT, TODAY, later

WORLD = "tiny"


def _loans(image: Image, where: str, params: tuple[Any, ...], family: str, rng: random.Random) -> tuple[Any, ...]:
    rows = image.query(
        "SELECT l.id, l.member_id, b.title, l.due_on, l.renewals, m.name, m.email FROM loans l "
        "JOIN books b ON b.id = l.book_id JOIN members m ON m.id = l.member_id WHERE " + where + " ORDER BY l.id",
        params,
    )
    if not rows:
        raise TaskError(f"{family}: the library has no candidate loans (scale too small?)")
    return rng.choice(rows)


def _task(
    family: str,
    seed: int,
    image: Image,
    loan: tuple[Any, ...],
    answer: str,
    *,
    renew: bool,
    checks: tuple[Check, ...],
    facts: tuple[Fact, ...],
) -> Task:
    """The task of a member asking to renew ``loan``; ``renew`` says whether the gold renews it."""
    loan_id, member_id, title, _due, _renewals, name, email = loan
    request = f"Hi, I'm {name} ({email}). Could you renew {title} for me, please?"
    message_id = int(image.query("SELECT COALESCE(MAX(id), 0) + 1 FROM desk_messages")[0][0])
    gold = [
        ToolCall("find_member", {"email": email}),
        ToolCall("list_loans", {"member_id": member_id}),
        *([ToolCall("renew_loan", {"loan_id": loan_id})] if renew else []),
        ToolCall("respond", {"message": answer}),
    ]
    return Task(
        world=WORLD,
        family=family,
        seed=seed,
        instruction=f'A member at the front desk says: "{request}"',
        setup=(
            SetupOp(
                "insert",
                "desk_messages",
                {"id": message_id, "member_id": member_id, "author": MEMBER, "body": request, "created_at": EPOCH},
            ),
        ),
        gold=tuple(gold),
        scope=(("member", member_id), ("loan", loan_id)),
        targets=(("loan", loan_id),),
        checks=checks,
        facts=facts,
        customer_id=member_id,
        hidden={"plan": [{"role": LIBRARIAN} for _ in gold], "request": request},
    )


class RenewLoan(TaskFamily):
    name = "renew_loan"
    description = "Renew a loan that may be renewed and tell the member its new due date."

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        loan = _loans(image, "l.renewals < ? AND l.due_on >= ?", (RENEWAL_LIMIT, TODAY), self.name, rng)
        loan_id, _member, title, due, renewals = loan[:5]
        new_due = later(due)
        table = {"table": "loans", "id": loan_id}
        return _task(
            self.name,
            seed,
            image,
            loan,
            f"I've renewed {title} for you. It is now due on {new_due}.",
            renew=True,
            checks=(
                Check("due date moved", "field", {**table, "field": "due_on", "equals": new_due}),
                Check("renewal counted", "field", {**table, "field": "renewals", "equals": renewals + 1}),
            ),
            facts=(Fact("new due date", new_due, "date", (due,)),),
        )


class DenyRenewal(TaskFamily):
    name = "deny_renewal"
    description = "Refuse to renew a loan that reached the renewal limit and tell the member when it is due."

    def generate(self, image: Image, rng: random.Random, seed: int) -> Task:
        loan = _loans(image, "l.renewals >= ? AND l.due_on >= ?", (RENEWAL_LIMIT, TODAY), self.name, rng)
        loan_id, _member, title, due, renewals = loan[:5]
        return _task(
            self.name,
            seed,
            image,
            loan,
            f"I'm sorry, I can't renew {title}: it has reached the limit of {RENEWAL_LIMIT} renewals. "
            f"It is due back on {due}.",
            renew=False,
            checks=(
                Check(
                    "loan left as it was",
                    "field",
                    {"table": "loans", "id": loan_id, "field": "renewals", "equals": renewals},
                ),
            ),
            facts=(Fact("due date", due, "date", (later(due),)),),
        )


FAMILIES: tuple[TaskFamily, ...] = (RenewLoan(), DenyRenewal())
"""The families in their fixed order (trained policies and task ids depend on it: append, never reorder)."""
