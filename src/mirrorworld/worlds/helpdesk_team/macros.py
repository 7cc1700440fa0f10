"""The team desk's macros: the helpdesk's, and the canned texts of the team's own tools.

Questions to the customer (``ask_customer``), the summaries a request for
approval or a transfer carries, a supervisor's decision notes and the
closing messages of team contacts. Each is filled from a record on screen, as
the helpdesk's are (:mod:`mirrorworld.worlds.helpdesk.macros`); which one, and
when, is the agent's choice.
"""

from __future__ import annotations

from mirrorworld.worlds.helpdesk.macros import MACROS as DESK

__all__ = ["MACROS"]

MACROS: dict[str, tuple[str, ...]] = {
    **DESK,
    "message": (
        *DESK["message"],
        "I'm sorry about the {product}. Your refund was approved and I've refunded ${refundable} for it on "
        "order #{order_id}.",
        "Thank you. Your account email is now {new_email}.",
        "I'm sorry your parcel never arrived. I've refunded ${refunded} for order #{order_id}.",
    ),
    "question": (
        "Could you give me your order number?",
        "Sorry, what is your order number again?",
        "That order number isn't on your account. Could you check it and tell me again?",
        "I've emailed a code to the address on file. Could you read it to me?",
    ),
    "summary": (
        "Customer reports a problem with the {product} on order #{order_id}; full refund of ${refundable} "
        "for line {line_id}, within the return window.",
        "Lost parcel: order #{order_id} shipped {order_shipped_at}, never delivered; customer wants a refund.",
    ),
    "note": (
        "Delivered, within the return window and refundable.",
        "Not refundable under the policy.",
    ),
}
