"""The sales world's business rules: the figures of its policy, the rule ids, the
arithmetic of amounts and the desk's own checks on arguments and discounts
(shared by the mirror and the real twin's adapter, which enforce them alike).

``policy.md`` states these in prose for the agent; ``tools.py`` enforces them.
The arithmetic follows the real system: a line amount is ``quantity x unit
price`` rounded to the cent, taxes are computed on the unrounded line amounts
and rounded once per document, and every rounding is half-to-even (banker's
rounding).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from decimal import ROUND_HALF_EVEN, Decimal

from mirrorworld.core.world import Rule
from mirrorworld.errors import ToolError

EPOCH = "2026-03-16T09:00:00Z"
SIM_DATE = EPOCH[:10]
"""The business date of every record the world creates."""

TAX_RATE = Decimal("0.10")
"""The one customer tax ("VAT 10%") applied to every product."""

DISCOUNT_FREE_LIMIT = Decimal(10)
"""Line discounts up to this percentage need no approval."""

DISCOUNT_MAX = Decimal(30)
"""The sales manager approves discounts up to this percentage, never more."""

WRITEOFF_MAX = Decimal("5.00")
"""The most the desk writes off when it settles an invoice (short or over), in dollars."""

CENT = Decimal("0.01")
PRICE_UNIT = Decimal("0.0001")

SALE_STATES = ("draft", "quotation", "confirmed", "processing", "done", "cancelled")
OPPORTUNITY_STATES = ("lead", "opportunity", "converted", "won", "lost", "cancelled")


def money(value: Decimal) -> str:
    """An amount rounded half-to-even to the cent, as canonical text (``"12.50"``; zero is ``"0.00"``, never
    ``"-0.00"``, which the real system's sums of opposite amounts can give)."""
    rounded = value.quantize(CENT, rounding=ROUND_HALF_EVEN)
    return str(rounded.copy_abs() if rounded == 0 else rounded)


def unit_price(list_price: Decimal, discount: Decimal) -> Decimal:
    """The discounted unit price, rounded half-to-even to 4 decimals."""
    return (list_price * (1 - discount / 100)).quantize(PRICE_UNIT, rounding=ROUND_HALF_EVEN)


def discount_read_back(list_price: Decimal, price: Decimal) -> Decimal:
    """A line's discount in percent as the real system reports it: derived from the prices it stored.

    Tryton's sale_discount keeps the base (list) price and the unit price; the
    discount it shows is ``1 - unit price / base price`` rounded half-to-even
    to 4 decimals of a rate, so a discount the 4-decimal unit price cannot
    express (0.01% of $0.50) reads back as the one it can (0%).
    """
    if not list_price:
        return Decimal(0)
    return (1 - price / list_price).quantize(PRICE_UNIT, rounding=ROUND_HALF_EVEN) * 100


def price_text(value: Decimal) -> str:
    """A unit price as canonical text with 4 decimals."""
    return str(value.quantize(PRICE_UNIT, rounding=ROUND_HALF_EVEN))


TAX_ROUNDING = ("document", "line")
"""How taxes are rounded (Tryton's ``account.configuration.tax_rounding``): once for the whole
document (the default), or per line and then summed."""

PARAMETERS: dict[str, str] = {"tax_rounding": "document"}
"""The figures tools, task families and the data generator read from the world (``World.parameters``)."""


def amounts(lines: Iterable[tuple[int, Decimal | str]], tax_rounding: str = "document") -> tuple[str, str, str]:
    """(untaxed, tax, total) of a document from its ``(quantity, unit_price)`` lines.

    Unit prices have at most 4 decimals (text as stored, or ``Decimal``). The
    sums are exact integer arithmetic in units of 1/10,000 (the result equals
    the decimal computation, rounding included). ``tax_rounding`` is
    ``document`` (tax on the sum of the unrounded line amounts, rounded once)
    or ``line`` (each line's tax rounded, then summed). As the real system
    does, a document rounds the tax of its lines of positive (or zero) amount
    and of its lines of negative amount apart, then adds them: a return sale
    with a line added, or an invoice with a credited line.
    """
    if tax_rounding not in TAX_ROUNDING:
        raise ValueError(f"tax_rounding must be one of {TAX_ROUNDING}")
    untaxed = 0  # cents
    raw = [0, 0]  # sums of unrounded line amounts, in 1/10,000: lines of positive (or zero), of negative amount
    per_line = 0  # cents: each line's tax rounded
    for quantity, price in lines:
        line = quantity * _price_units(price)
        raw[line < 0] += line
        untaxed += _round_half_even(line, 100)
        per_line += _round_half_even(line * _TAX_UNITS, 10**6)
    if tax_rounding == "line":
        tax = per_line
    else:  # 1/10,000^2 -> cents
        tax = sum(_round_half_even(r * _TAX_UNITS, 10**6) for r in raw)
    return _cents_text(untaxed), _cents_text(tax), _cents_text(untaxed + tax)


_TAX_UNITS = int(TAX_RATE * 10_000)
if Decimal(_TAX_UNITS) / 10_000 != TAX_RATE:  # pragma: no cover - a constant of this module
    raise ValueError("TAX_RATE must have at most 4 decimals")


def _price_units(price: Decimal | str) -> int:
    """A unit price in 1/10,000 (exact; more than 4 decimals is an error)."""
    text = price if isinstance(price, str) else format(price, "f")
    whole, _, frac = text.partition(".")
    if len(frac) > 4:
        if frac[4:].strip("0"):
            raise ValueError(f"unit price {text} has more than 4 decimals")
        frac = frac[:4]
    sign = -1 if whole.startswith("-") else 1
    return int(whole) * 10_000 + sign * int(frac.ljust(4, "0"))


def _round_half_even(value: int, step: int) -> int:
    """``value / step`` rounded half-to-even to an integer."""
    q, r = divmod(value, step)
    if 2 * r > step or (2 * r == step and q % 2):
        q += 1
    return q


def _cents_text(cents: int) -> str:
    sign = "-" if cents < 0 else ""
    whole, frac = divmod(abs(cents), 100)
    return f"{sign}{whole}.{frac:02d}"


# -- the desk's checks (Tryton has no notion of them; both backends run these) ----------


def _cents_exact(value: Decimal) -> bool:
    return value == value.quantize(CENT)


def check_lead_amount(amount: Decimal) -> None:
    """A lead's estimated revenue: zero or more, in cents."""
    if amount < 0:
        raise ToolError("invalid_arguments", "amount must not be negative")
    if not _cents_exact(amount):
        raise ToolError("invalid_arguments", "amount has more than two decimal places")


def check_payment_amount(amount: Decimal) -> None:
    """A payment: positive, in cents (the amount due is the twin's or the mirror's own check)."""
    if amount <= 0 or not _cents_exact(amount):
        raise ToolError("invalid_arguments", "amount must be positive with two decimals at most")


def currency_text(value: Decimal) -> str:
    """An amount as the real system prints it in messages: ``$940.46``, ``-$4.54`` (no grouping)."""
    return f"{'-' if value < 0 else ''}${money(abs(value))}"


def writeoff_refusal(invoice: str, writeoff: Decimal) -> ToolError | None:
    """The desk's refusal of a settlement that would write off more than :data:`WRITEOFF_MAX` (either way)."""
    if abs(writeoff) <= WRITEOFF_MAX:
        return None
    what, instead = ("a shortfall", "a partial payment") if writeoff > 0 else ("an excess", "an overpayment")
    return ToolError(
        "policy_refused",
        f'settling invoice "{invoice}" with this amount would write off {what} of {currency_text(abs(writeoff))}; '
        f"the desk writes off at most {currency_text(WRITEOFF_MAX)}: record {instead} instead",
        rule="writeoff_limit",
    )


def check_quantity(quantity: int) -> None:
    if quantity < 1 or quantity > 100_000:
        raise ToolError("invalid_arguments", "quantity must be a whole number from 1 to 100000")


def check_approval_request(discount: Decimal) -> None:
    """A discount the manager is asked to approve: above the free limit, at most the maximum."""
    if discount <= 0 or discount > 100 or not _cents_exact(discount):
        raise ToolError("invalid_arguments", "discount must be a percentage above 0 and at most 100, two decimals")
    if discount <= DISCOUNT_FREE_LIMIT:
        raise ToolError("policy_refused", f"a discount of {discount}% needs no approval", rule="discount_approval")
    if discount > DISCOUNT_MAX:
        raise ToolError("policy_refused", f"discounts above {DISCOUNT_MAX}% are never approved", rule="discount_max")


def check_line_discount(discount: Decimal, best_approved: Callable[[], Decimal | None]) -> None:
    """A line's discount: 0 to 100 in cents, and above the free limit covered by an approval.

    ``best_approved`` returns the sale's largest approved discount (None without
    any); it is asked only when the discount needs an approval.
    """
    if discount < 0 or discount > 100 or not _cents_exact(discount):
        raise ToolError("invalid_arguments", "discount must be a percentage from 0 to 100 with two decimals at most")
    if discount > DISCOUNT_FREE_LIMIT:
        best = best_approved()
        if best is None or best < discount:
            raise ToolError(
                "policy_refused",
                f"a discount of {discount}% needs an approval for this sale (above {DISCOUNT_FREE_LIMIT}%)",
                rule="discount_approval",
            )


RULES = (
    Rule("discount_approval", "A line discount above 10% needs a recorded approval covering it."),
    Rule("discount_max", "No discount above 30% is ever approved."),
    Rule("sale_workflow", "Sales move only along the allowed transitions of their state machine."),
    Rule("opportunity_workflow", "Leads and opportunities move only along their allowed transitions."),
    Rule("quotation_address", "A sale is quoted only for a customer with an address."),
    Rule("stock_availability", "A shipment is sent only when every product is available in full."),
    Rule("payment_limit", "A payment never exceeds the amount still due on the invoice, unless it is an overpayment."),
    Rule("writeoff_limit", "A payment settles an invoice with a write-off of at most $5.00, short or over."),
    Rule("credit_limit", "A sale is confirmed only while it keeps the customer within their credit limit."),
    Rule("credit_note", "Only a posted or paid invoice is credited; a credit note is not paid at the desk."),
    Rule("data_disclosure", "Never reveal another customer's data (name, contacts, address, sales, leads)."),
)
