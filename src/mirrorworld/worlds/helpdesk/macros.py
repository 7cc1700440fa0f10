"""The helpdesk's macros: the canned replies and notes an agent's console offers.

Each is filled from a record on screen (``{product}`` and ``{refundable}`` of an
order line, ``{order_delivered_at}`` of its order); the action menu
(:mod:`mirrorworld.envs.menu`) offers one wherever a record fills every slot.
They are the desk's standard wording, not answers: which record, which macro
and when are the agent's choice.
"""

from __future__ import annotations

__all__ = ["MACROS"]

MACROS: dict[str, tuple[str, ...]] = {
    "message": (
        "I'm sorry about the {product}. I've refunded ${refundable} for it on order #{order_id}.",
        "I'm sorry, but I can't refund the {product}: it was delivered on {order_delivered_at} and the return "
        "window for {category} items is {return_window_days} days, which has passed.",
        "Order #{order_id} is cancelled and ${refunded} will be refunded.",
        "I'm sorry for the wait. Ticket #{ticket_id} has been escalated to our Escalations team as urgent.",
        "Done - I merged your requests into ticket #{target_ticket_id}.",
        "Your account email is now {email}.",
        "According to our help center: {best_sentence}",
    ),
    "reason": (
        "SLA breached without a response",
        "Needs a specialist",
    ),
    "body": ("Thanks for your message, we are looking into it.",),
}
