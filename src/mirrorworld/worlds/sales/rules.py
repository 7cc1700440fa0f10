"""The sales world's business rules: the figures of its policy, the rule ids and
the arithmetic of amounts (shared by the mirror and the real twin's adapter).

``policy.md`` states these in prose for the agent; ``tools.py`` enforces them.
The arithmetic follows the real system: a line amount is ``quantity x unit
price`` rounded to the cent, taxes are computed on the unrounded line amounts
and rounded once per document, and every rounding is half-to-even (banker's
rounding).
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal

from mirrorworld.core.world import Rule

EPOCH = "2026-03-16T09:00:00Z"
SIM_DATE = EPOCH[:10]
"""The business date of every record the world creates."""

TAX_RATE = Decimal("0.10")
"""The one customer tax ("VAT 10%") applied to every product."""

DISCOUNT_FREE_LIMIT = Decimal(10)
"""Line discounts up to this percentage need no approval."""

DISCOUNT_MAX = Decimal(30)
"""The sales manager approves discounts up to this percentage, never more."""

CENT = Decimal("0.01")
PRICE_UNIT = Decimal("0.0001")

SALE_STATES = ("draft", "quotation", "confirmed", "processing", "done", "cancelled")
OPPORTUNITY_STATES = ("lead", "opportunity", "converted", "won", "lost", "cancelled")


def money(value: Decimal) -> str:
    """An amount rounded half-to-even to the cent, as canonical text (``"12.50"``)."""
    return str(value.quantize(CENT, rounding=ROUND_HALF_EVEN))


def unit_price(list_price: Decimal, discount: Decimal) -> Decimal:
    """The discounted unit price, rounded half-to-even to 4 decimals."""
    return (list_price * (1 - discount / 100)).quantize(PRICE_UNIT, rounding=ROUND_HALF_EVEN)


def price_text(value: Decimal) -> str:
    """A unit price as canonical text with 4 decimals."""
    return str(value.quantize(PRICE_UNIT, rounding=ROUND_HALF_EVEN))


def amounts(lines: list[tuple[int, Decimal]]) -> tuple[str, str, str]:
    """(untaxed, tax, total) of a document from its ``(quantity, unit_price)`` lines."""
    untaxed = sum((Decimal(q) * p).quantize(CENT, rounding=ROUND_HALF_EVEN) for q, p in lines) or Decimal(0)
    tax = (sum((Decimal(q) * p * TAX_RATE for q, p in lines), Decimal(0))).quantize(CENT, rounding=ROUND_HALF_EVEN)
    untaxed = untaxed.quantize(CENT)
    return money(untaxed), money(tax), money(untaxed + tax)


RULES = (
    Rule("discount_approval", "A line discount above 10% needs a recorded approval covering it."),
    Rule("discount_max", "No discount above 30% is ever approved."),
    Rule("sale_workflow", "Sales move only along the allowed transitions of their state machine."),
    Rule("opportunity_workflow", "Leads and opportunities move only along their allowed transitions."),
    Rule("quotation_address", "A sale is quoted only for a customer with an address."),
    Rule("stock_availability", "A shipment is sent only when every product is available in full."),
    Rule("payment_limit", "A payment never exceeds the amount still due on the invoice."),
)
