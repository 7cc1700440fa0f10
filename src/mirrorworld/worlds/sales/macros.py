"""The sales desk's macros: the canned replies its console offers, filled from the record on screen."""

from __future__ import annotations

__all__ = ["MACROS"]

MACROS: dict[str, tuple[str, ...]] = {
    "message": (
        "I recorded your project as lead {opportunity_id}.",
        "Lead {opportunity_id} is now an opportunity.",
        "Understood, I closed opportunity {opportunity_id} as lost.",
        "Your quotation {sale_id} totals ${total} including ${tax} VAT.",
        "Order {sale_id} is confirmed, total ${total}.",
        "The shipment of order {sale_id} has been sent.",
        "We received your payment of ${amount} for order {sale_id}. Thank you!",
        "Sale {sale_id} has been cancelled.",
        "Done: {value} is now on your account.",
        "Quotation {sale_id} now totals ${total} including ${tax} VAT.",
        "Order {sale_id} went out in part; backorder shipment {shipment_id} holds the rest.",
    ),
    "reason": ("Customer asked for a volume discount",),
}
