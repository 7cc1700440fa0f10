"""Building the twin's Tryton database (run in a child process by :mod:`mirrorworld.twin.db`).

Two stages, each cached on its own:

* ``modules`` — an empty SQLite database with Tryton's sale, opportunity,
  stock and invoicing modules activated (the slow part: about 35 s);
* ``world`` — on a copy of it, the company, its chart of accounts, fiscal
  year, 10% customer tax, payment method, write-off method and sales
  employee are set up with Tryton's own scenario helpers; then the sales
  world's master data (parties with their customer payment term, one of
  the standard terms Tryton ships, addresses, contacts, products, stock) is
  created in the same order as the mirror's, and the world's history of tool
  calls is replayed through the twin's tools (its date steps move Tryton's
  *today*, so invoices are posted on the mirror's dates, and its last steps
  give customers their credit limits and a few their invoice method on
  fulfillment), so the twin's pristine state is the
  mirror's. The sale price lists are Tryton's own (``product_price_list``
  lines with their formulas), given to the customers on them
  (``sale_price_list``). The desk's user is in every group but the credit-limit one: a
  sale over a customer's limit is refused, not a warning to override.

Usage: ``python -m mirrorworld.twin.build modules DIR`` or
``python -m mirrorworld.twin.build world DIR SCALE DATA_SEED [OPTIONS_JSON]``.

Options (:data:`TWIN_OPTIONS`) build a *changed* twin, the way another
deployment of the real system may be configured: ``{"tax_rounding": "line"}``
rounds tax per line instead of per document. The fidelity harness run against
such a twin shows the drift.
"""

from __future__ import annotations

import json
import random
import sys
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from mirrorworld.twin import tryton

NAME = "twin"


def build_modules(directory: Path) -> None:
    """Create ``DIR/twin.sqlite`` with the twin's Tryton modules activated."""
    path = directory / f"{NAME}.sqlite"
    path.unlink(missing_ok=True)
    path.touch()
    tryton.configure(str(directory))
    with tryton.quiet():
        from trytond import backend  # type: ignore[import-untyped,import-not-found]
        from trytond.pool import Pool  # type: ignore[import-untyped,import-not-found]

        database = backend.Database(NAME)
        database.connect()
        if not database.test():
            database.init()
        Pool(NAME).init(update=["ir", "res", *tryton.MODULES], lang=["en"], activatedeps=True)


TWIN_OPTIONS = {"tax_rounding": ("document", "line")}
"""Configuration a twin can be built with (the first value is the default, the mirror's)."""


def _setup_company(pool: Any, day: date, options: dict[str, str]) -> None:
    """Company, accounting and the sales employee, through Tryton's own scenario helpers."""
    from proteus import Model  # type: ignore[import-untyped,import-not-found]
    from proteus import config as pconfig
    from trytond.modules.account.tests.tools import (  # type: ignore[import-untyped,import-not-found]
        create_chart,
        create_fiscalyear,
        create_tax,
        get_accounts,
    )
    from trytond.modules.account_invoice.tests.tools import (  # type: ignore[import-untyped,import-not-found]
        set_fiscalyear_invoice_sequences,
    )
    from trytond.modules.company.tests.tools import create_company, get_company  # type: ignore[import-untyped,import-not-found]
    from trytond.modules.currency.tests.tools import get_currency  # type: ignore[import-untyped,import-not-found]

    pconfig.set_trytond(database=NAME, user="admin")
    tryton.fix_today(pool, day)
    Party = Model.get("party.party")
    create_company(party=Party(1), currency=get_currency("USD"))
    company = get_company()
    create_chart(company)
    accounts = get_accounts(company)
    fiscalyear = set_fiscalyear_invoice_sequences(create_fiscalyear(company, today=day))
    fiscalyear.click("create_period")
    AccountConfig = Model.get("account.configuration")
    account_config = AccountConfig(1)
    account_config.tax_rounding = options.get("tax_rounding", "document")
    account_config.save()
    tax = create_tax(Decimal("0.10"))
    tax.save()
    Category = Model.get("product.category")
    category = Category(name="Goods", accounting=True)
    category.account_revenue = accounts["revenue"]
    category.account_expense = accounts["expense"]
    category.customer_taxes.append(tax)
    category.save()
    Journal = Model.get("account.journal")
    (cash_journal,) = Journal.find([("type", "=", "cash")], limit=1)
    Method = Model.get("account.invoice.payment.method")
    Method(
        name="Bank transfer", journal=cash_journal, credit_account=accounts["cash"], debit_account=accounts["cash"]
    ).save()
    # What the pay wizard writes small differences off to: an expense, either way.
    writeoff_journal = Journal(name="Write-Off", type="write-off")
    writeoff_journal.save()
    WriteOff = Model.get("account.move.reconcile.write_off")
    WriteOff(
        name="Payment difference",
        journal=writeoff_journal,
        credit_account=accounts["expense"],
        debit_account=accounts["expense"],
    ).save()
    Employee = Model.get("company.employee")
    Employee(party=Party(2), company=company).save()


def build_world(directory: Path, scale: float, data_seed: int, options: dict[str, str] | None = None) -> None:
    """Turn ``DIR/twin.sqlite`` (a copy of the modules database) into the sales world's twin."""
    from mirrorworld.twin.backend import TwinSession
    from mirrorworld.worlds.sales import SalesWorld, data
    from mirrorworld.worlds.sales.rules import SIM_DATE

    tryton.configure(str(directory))
    day = date.fromisoformat(SIM_DATE)
    world = SalesWorld(scale=scale, data_seed=data_seed)
    master, history = data.build(random.Random(f"{world.name}/data/{data_seed}"), scale)
    with tryton.quiet():
        from trytond.transaction import Transaction  # type: ignore[import-untyped,import-not-found]

        pool = tryton.load_pool(NAME, day)
        tryton.relax_email_check()
        with Transaction().start(NAME, 0):
            Party = pool.get("party.party")
            for pid, _code, name, _role in master.parties[:2]:
                (party,) = Party.create([{"name": name}])
                _expect(party.id, pid, "party")
            # The user the setup runs as: Tryton fills some defaults only for a real user.
            # Not the credit-limit group: the desk cannot override a customer's credit limit, Tryton refuses.
            no_override = pool.get("ir.model.data").get_id("account_credit_limit", "group_credit_limit")
            groups = [g.id for g in pool.get("res.group").search([]) if g.id != no_override]
            pool.get("res.user").create([{"name": "Administrator", "login": "admin", "groups": [("add", groups)]}])
        _setup_company(pool, day, options or {})
        with Transaction().start(NAME, 0) as tx, tx.set_context(company=1):
            _master(pool, master, day)

    class _Backend:
        pass

    backend: Any = _Backend()
    backend.world, backend.pool = world, pool
    session = TwinSession(backend, commit_on_close=True)
    try:

        def due(invoice_id: int) -> Decimal:
            result = session.call("get_invoice", {"invoice_id": invoice_id})
            return Decimal(result.data["invoice"]["amount_due"])

        for call in history:
            if call.tool == data.SET_DATE and isinstance(call.args, dict):  # the date of the calls that follow
                tryton.fix_today(pool, date.fromisoformat(str(call.args["date"])))
                continue
            if call.tool == data.SET_CREDIT_LIMIT and isinstance(call.args, dict):  # set by accounts, not the desk
                _credit_limit(pool, int(call.args["party_id"]), Decimal(str(call.args["limit"])))
                continue
            if call.tool == data.SET_INVOICE_METHOD and isinstance(call.args, dict):  # the customer's default
                _invoice_method(pool, int(call.args["party_id"]), str(call.args["method"]))
                continue
            call = data.resolve(call, due)
            result = session.call(call.tool, call.args)
            if not result.ok:
                raise RuntimeError(f"history call {call.tool}({call.args}) refused by the twin: {result.error}")
    except BaseException:
        session.commit_on_close = False
        raise
    finally:
        session.close()


def _credit_limit(pool: Any, party_id: int, limit: Decimal) -> None:
    """Give a customer their credit limit (``account_credit_limit``'s company-dependent amount)."""
    from trytond.transaction import Transaction  # type: ignore[import-untyped,import-not-found]

    Party = pool.get("party.party")
    with Transaction().set_context(company=1):
        Party.write([Party(party_id)], {"credit_limit_amount": limit})


def _invoice_method(pool: Any, party_id: int, method: str) -> None:
    """Give a customer the invoice method their new sales take (``sale``'s company-dependent party field)."""
    from trytond.transaction import Transaction  # type: ignore[import-untyped,import-not-found]

    Party = pool.get("party.party")
    with Transaction().set_context(company=1):
        Party.write([Party(party_id)], {"sale_invoice_method": method})


def _expect(got: int, want: int, what: str) -> None:
    if got != want:
        raise RuntimeError(f"twin {what} got id {got}, the mirror has {want}: creation order differs")


def _master(pool: Any, master: Any, day: date) -> None:
    Party = pool.get("party.party")
    Address = pool.get("party.address")
    Mechanism = pool.get("party.contact_mechanism")
    Template = pool.get("product.template")
    Uom = pool.get("product.uom")
    Category = pool.get("product.category")
    Location = pool.get("stock.location")
    Move = pool.get("stock.move")
    Company = pool.get("company.company")
    company = Company(1)
    Term = pool.get("account.invoice.payment_term")
    for tid, term_name, days in master.payment_terms:  # the standard terms Tryton ships
        term = Term(tid)
        if term.name != term_name or term.compute(Decimal(1), company.currency, day)[0][0] != day + timedelta(days):
            raise RuntimeError(f"Tryton's payment term {tid} is not {term_name!r} ({days} days)")
    for pid, _code, name, _role in master.parties[2:]:
        (party,) = Party.create([{"name": name, "customer_payment_term": master.party_terms.get(pid)}])
        _expect(party.id, pid, "party")
    for aid, pid, street, city, postal in master.addresses:
        (address,) = Address.create([{"party": pid, "street": street, "city": city, "postal_code": postal}])
        _expect(address.id - _offset(Address, master), aid, "address")
    for cid, pid, kind, value in master.contacts:
        (mech,) = Mechanism.create([{"party": pid, "type": kind, "value": value}])
        _expect(mech.id, cid, "contact")
    (unit,) = Uom.search([("name", "=", "Unit")], limit=1)
    (category,) = Category.search([("name", "=", "Goods")], limit=1)
    supplier = Location.search([("type", "=", "supplier")], limit=1)[0]
    storage = Location.search([("type", "=", "warehouse")], limit=1)[0].storage_location
    moves = []
    for prid, code, name, price, on_hand in master.products:
        (template,) = Template.create(
            [
                {
                    "name": name,
                    "code": code,
                    "type": "goods",
                    "salable": True,
                    "list_price": Decimal(price),
                    "default_uom": unit.id,
                    "sale_uom": unit.id,
                    "account_category": category.id,
                    "products": [("create", [{}])],
                }
            ]
        )
        (product,) = template.products
        _expect(product.id, prid, "product")
        if on_hand:
            moves.append(
                {
                    "product": product.id,
                    "unit": unit.id,
                    "quantity": float(on_hand),
                    "from_location": supplier.id,
                    "to_location": storage.id,
                    "planned_date": day,
                    "effective_date": day,
                    "company": company.id,
                    "unit_price": Decimal(price) / 2,
                    "currency": company.currency.id,
                }
            )
    Move.do(Move.create(moves))
    _price_lists(pool, master)


def _price_lists(pool: Any, master: Any) -> None:
    """The sale price lists (``product_price_list``: on the list price, lines tried by sequence, each with its
    product and quantity conditions and its formula) and the customers on them (``sale_price_list``)."""
    PriceList = pool.get("product.price_list")
    Party = pool.get("party.party")
    for plid, name in master.price_lists:
        lines = [
            {"sequence": seq, "product": product, "quantity": quantity, "formula": formula}
            for _lid, pl, seq, product, quantity, formula, _factor in master.price_list_lines
            if pl == plid
        ]
        (price_list,) = PriceList.create([{"name": name, "price": "list_price", "lines": [("create", lines)]}])
        _expect(price_list.id, plid, "price list")
    for pid, plid in sorted(master.party_price_lists.items()):
        Party.write([Party(pid)], {"sale_price_list": plid})


def _offset(Address: Any, master: Any) -> int:
    """Addresses Tryton created before the customers' (the company's own, if any)."""
    return int(Address.search_count([("party", "in", [1, 2])]))


def main(argv: list[str]) -> int:
    stage, directory = argv[0], Path(argv[1])
    if stage == "modules":
        build_modules(directory)
    elif stage == "world":
        build_world(directory, float(argv[2]), int(argv[3]), json.loads(argv[4]) if len(argv) > 4 else {})
    else:
        raise SystemExit(f"unknown stage {stage!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
