"""Whether a final message states a fact: normalised so that harmless variation
never changes the answer, and a different value never passes for the right one."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from mirrorworld.core.task import Fact
from mirrorworld.verify.communication import dates_in, mentions, missing_facts, numbers_in

MONEY = Fact("refund amount", "25.00", "money")


@pytest.mark.parametrize(
    "text",
    [
        "I've refunded $25.00.",
        "I've refunded $25.",
        "I've refunded 25 dollars to your card",
        "A refund of USD 25 is on its way",
        "Refund: 25.0",
        "refund of $25.000 issued",
        "(25)",
        "You'll get 25 back, and 3 more in credit.",
        "REFUNDED:$25.00!",
    ],
)
def test_money_in_any_format(text: str) -> None:
    assert mentions(text, MONEY)


@pytest.mark.parametrize(
    "text",
    ["I've refunded $250.", "I've refunded $2.50", "I've refunded $25.50", "about $24.99", "1,025.00", "order 125"],
)
def test_other_money_does_not_count(text: str) -> None:
    assert not mentions(text, MONEY)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("1234.50", "We refunded $1,234.50 today."),
        ("1234.50", "We refunded 1234.5 today."),
        ("1000000", "a payout of 1,000,000 dollars"),
        ("0.99", "just $0.99"),
        ("19.99", "It costs $19.99."),
    ],
)
def test_money_with_separators_and_cents(value: str, text: str) -> None:
    assert mentions(text, Fact("amount", value, "money"))


@pytest.mark.parametrize(
    ("fact", "text", "expected"),
    [
        (Fact("window", "30", "number"), "The return window is 30 days.", True),
        (Fact("window", "30", "number"), "The return window is thirty (30) days.", True),
        (Fact("window", "30", "number"), "The return window is 300 days.", False),
        (Fact("window", "30", "number"), "The return window is 3.0 days.", False),
        (Fact("percent", "15", "number"), "A restocking fee of 15% applies.", True),
        (Fact("ticket", "812", "id"), "Your ticket is #812.", True),
        (Fact("ticket", "812", "id"), "Your ticket is 812", True),
        (Fact("ticket", "812", "id"), "Your ticket is #8120.", False),
        (Fact("ticket", "812", "id"), "Your ticket is #1812.", False),
        (Fact("ticket", "812", "id"), "Your ticket is A812.", False),
    ],
)
def test_numbers_and_ids(fact: Fact, text: str, expected: bool) -> None:
    assert mentions(text, fact) is expected


DELIVERED = Fact("delivery date", "2026-03-05", "date")


@pytest.mark.parametrize(
    "text",
    [
        "It was delivered on 2026-03-05.",
        "It was delivered on 2026-03-05T14:30:00Z.",
        "It was delivered on March 5, 2026.",
        "It was delivered on March 5th, 2026.",
        "It was delivered on march 05 2026",
        "It was delivered on Mar. 5, 2026.",
        "It was delivered on 5 Mar 2026.",
        "It was delivered on 5th of March, 2026.",
        "It was delivered on 03/05/2026.",
        "It was delivered on 3/5/2026.",
    ],
)
def test_dates_in_common_formats(text: str) -> None:
    assert mentions(text, DELIVERED)


@pytest.mark.parametrize(
    "text",
    [
        "It was delivered on 2026-05-03.",
        "It was delivered on May 3, 2026.",
        "It was delivered on 2025-03-05.",
        "It was delivered on March 5.",
        "It was delivered on 05/03/2026.",  # day-first is not read as US
        "It was delivered on 2026-02-30 or so.",
    ],
)
def test_other_dates_do_not_count(text: str) -> None:
    assert not mentions(text, DELIVERED)


def test_date_facts_may_carry_a_time() -> None:
    assert mentions("delivered March 5, 2026", Fact("delivered", "2026-03-05T10:00:00Z", "date"))


def test_impossible_dates_are_ignored() -> None:
    assert dates_in("on 2026-02-30, 13/45/2026 and February 30, 2026") == set()
    assert dates_in("on Sept 9, 2026 and 1st May 2026") == {date(2026, 9, 9), date(2026, 5, 1)}


@pytest.mark.parametrize(
    ("fact", "text", "expected"),
    [
        (Fact("email", "Ava.Kim12@NewMail.example", "email"), "Your email is now ava.kim12@newmail.example.", True),
        (Fact("email", "ava.kim12@newmail.example", "email"), "Your email is now AVA.KIM12@NEWMAIL.EXAMPLE", True),
        (Fact("email", "ava.kim12@newmail.example", "email"), "Your email is now ava.kim13@newmail.example", False),
        (Fact("status", "out for delivery", "text"), "Your parcel is  Out\nfor   Delivery.", True),
        (Fact("status", "out for delivery", "text"), "Your parcel is out of stock.", False),
    ],
)
def test_emails_and_text_ignore_case_and_whitespace(fact: Fact, text: str, expected: bool) -> None:
    assert mentions(text, fact) is expected


def test_numbers_in_reads_separators_signs_and_decimals() -> None:
    assert numbers_in("1,234.50 and -7 and +3 and 0.10 and v1.2.3 and 12,34") == {
        Decimal("1234.5"),
        Decimal("-7"),
        Decimal("3"),
        Decimal("0.1"),
        Decimal("12"),
        Decimal("34"),
    }


def test_missing_facts() -> None:
    facts = (MONEY, DELIVERED, Fact("ticket", "812", "id"))
    assert missing_facts(None, facts) == list(facts)
    assert missing_facts("", facts) == list(facts)
    assert missing_facts("Refunded $25 for ticket #812.", facts) == [DELIVERED]
    assert missing_facts("Ticket #812: $25.00 refunded; it was delivered 2026-03-05.", facts) == []
    assert missing_facts(None, ()) == []
