"""Contact data (e-mail addresses and phone numbers) validated and stored as the ERP the sales world mirrors does.

Tryton's party module decides what a contact mechanism may hold, with two
optional packages that change its behaviour (both are dependencies here and in
the ``twin`` extra, so the mirror and its twin read contacts alike):

* **e-mail** — the address is normalised by ``email-validator`` (the domain
  lower-cased and IDNA-normalised, the local part NFC-normalised, its case
  kept) and must be valid syntax: a dot in the domain, no special-use domain
  (``localhost``, ``.test``, ``.local``, ...), no quoted or display-name forms.
  Deliverability (a DNS lookup) is not checked: mirror and twin run offline.
* **phone** — the number is parsed by ``phonenumbers``, first in the regions of
  the party's addresses (the sales world's addresses carry none) and then
  without a region, so it needs its international prefix; a number that is not
  a valid one is refused, a valid one is stored in the international format
  (``+1 212-555-0123``).

A refusal is ``validation_error`` with Tryton's own message text.
"""

from __future__ import annotations

from collections.abc import Iterable

import phonenumbers
from email_validator import EmailNotValidError, validate_email

from mirrorworld.errors import ToolError

__all__ = ["normalise_contact"]


def _email(value: str) -> str | None:
    try:
        return validate_email(value, check_deliverability=False, test_environment=False).normalized
    except EmailNotValidError:
        return None


def _phone(value: str, regions: Iterable[str]) -> str | None:
    for region in (*regions, None):
        try:
            number = phonenumbers.parse(value, region)
        except phonenumbers.NumberParseException:
            continue
        if phonenumbers.is_valid_number(number):
            return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.INTERNATIONAL)
    return None


def normalise_contact(kind: str, value: str, party: str, regions: Iterable[str] = ()) -> str:
    """The value a contact of ``kind`` (``email`` or ``phone``) is stored as, or a ``validation_error``.

    ``party`` is the party's name (it appears in the refusal); ``regions`` are
    the ISO country codes of its addresses, tried in order before no region.
    """
    if kind == "email":
        stored = _email(value)
        if stored is None:
            raise ToolError("validation_error", f'The email address "{value}" for party "{party}" is not valid.')
        return stored
    if kind == "phone":
        stored = _phone(value, regions)
        if stored is None:
            raise ToolError("validation_error", f'The phone number "{value}" for party "{party}" is not valid.')
        return stored
    return value
