"""The one untyped boundary to Tryton (the real ERP behind the sales twin).

Tryton ships no type hints, so everything that touches it lives here and in
``build.py`` / ``sales.py`` behind ``Any``. Tryton keeps process-wide state (its
configuration, one pool of models per database, one SQLite connection per
database), so a process hosts at most one twin database at a time and a twin
session is single-threaded.

Tryton emits deprecation warnings from its own code; they are silenced here
(:func:`quiet`) so they never reach a caller that runs with warnings as errors.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import warnings
from collections.abc import Iterator
from typing import Any

__all__ = ["MODULES", "available", "configure", "fix_today", "load_pool", "quiet", "relax_email_check", "versions"]

MODULES = (
    "sale",
    "sale_opportunity",
    "sale_discount",
    "stock",
    "account_invoice",
    "account_invoice_stock",
    "account_credit_limit",
    "sale_credit_limit",
    "product_price_list",
    "sale_price_list",
)
"""The Tryton modules the sales twin activates (with their dependencies)."""

DISTRIBUTIONS = (
    "trytond",
    "trytond-sale",
    "trytond-sale-opportunity",
    "trytond-sale-discount",
    "trytond-account-credit-limit",
    "trytond-sale-credit-limit",
    "trytond-product-price-list",
    "trytond-sale-price-list",
    "trytond-stock",
    "trytond-account-invoice",
    "trytond-account",
    "trytond-product",
    "trytond-party",
    "trytond-company",
    "trytond-currency",
    "proteus",
    # Not Tryton's, but they change what it accepts and stores (contact e-mails and phones).
    "email-validator",
    "phonenumbers",
)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence Tryton's own warnings for the duration of a block."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def available() -> bool:
    """Whether Tryton and the modules the twin needs are installed."""
    import importlib.util

    with quiet():
        try:
            return all(
                importlib.util.find_spec(name) is not None
                for name in (
                    "trytond",
                    "proteus",
                    "email_validator",
                    "phonenumbers",
                    *(f"trytond.modules.{m}" for m in MODULES),
                )
            )
        except ImportError:
            return False


def versions() -> dict[str, str]:
    """Installed versions of every Tryton distribution the twin depends on."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in DISTRIBUTIONS:
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "missing"
    return out


def configure(directory: str) -> None:
    """Point Tryton at SQLite databases kept in ``directory`` (before any pool is loaded)."""
    os.environ["TRYTOND_DATABASE__URI"] = "sqlite://"
    os.environ["TRYTOND_DATABASE__PATH"] = directory
    with quiet():
        from trytond import config  # type: ignore[import-untyped,import-not-found]

        config.set("database", "uri", "sqlite://")
        config.set("database", "path", directory)


def fix_today(pool: Any, day: datetime.date) -> None:
    """Make Tryton's notion of *today* the simulated business date (determinism)."""
    date_model = pool.get("ir.date")

    def today(timezone: Any = None) -> datetime.date:
        return day

    date_model.today = staticmethod(today)


def relax_email_check() -> None:
    """Validate email syntax as Tryton does, without its DNS deliverability lookup (the twin runs offline)."""
    with quiet():
        from trytond.modules.party import contact_mechanism  # type: ignore[import-untyped,import-not-found]
        from trytond.tools import email_  # type: ignore[import-untyped,import-not-found]

    def validate_email(email: str, check_deliverability: bool = False) -> Any:
        return email_.validate_email(email, check_deliverability=False)

    contact_mechanism.validate_email = validate_email


def load_pool(name: str, day: datetime.date) -> Any:
    """Load the model pool of database ``name`` with *today* fixed to ``day``."""
    with quiet():
        from trytond.pool import Pool  # type: ignore[import-untyped,import-not-found]

        pool = Pool(name)
        pool.init()
    fix_today(pool, day)
    return pool
