"""The sales world's real surface: what stands behind each tool in Tryton, declared, and read back from Tryton.

:data:`SALES` declares, for every sales tool, the Tryton model it works on,
the field each argument fills (or why none does), the buttons and wizard it
runs, the records it creates and the Tryton errors that refuse it. It is data:
:func:`twin_surface` reads the real surface off a twin's pool by
introspection, in the format of :func:`mirrorworld.drift.parity.surface_of`,
and :mod:`mirrorworld.drift.parity` compares the two. Nothing in the
declaration states a type, an enum or a required flag: those are Tryton's.

An argument is one of:

* :class:`Key` — the id of a record of a model (an integer, always sent: a
  record is opened by its id);
* :class:`Value` — a value stored in a field: the field's Tryton type gives
  the JSON type (Char, Text, Reference: ``string``; Integer, Many2One,
  One2Many, Many2Many ids: ``integer``; Numeric, Float: ``number``; Boolean:
  ``boolean``; Selection: ``string`` with ``enum`` its keys) and its static
  ``required`` attribute the required flag (a requirement that depends on the
  record's state, a PYSON ``states['required']``, is not one);
* :class:`Search` — words matched against fields (``ilike``): their type, and
  never required (Tryton searches any domain, the empty one too);
* :class:`NoField` — nothing in Tryton holds it (a desk policy kept in a note,
  the final message of a conversation): absent from the real surface, and
  the mirror's argument is a declared difference with the reason given.

A tool's real error codes are those the twin's adapter raises
(:mod:`mirrorworld.twin.sales`, read statically like the mirror's), the codes
the twin backend reports the declared Tryton error classes under
(:data:`mirrorworld.twin.sales.ERROR_CODES`, else ``validation_error``) and
``invalid_arguments`` for a tool with arguments (both backends validate with
the mirror's declaration). Only the Tryton refusals an agent's input reaches
on the desk's paths are declared, not every ``UserError`` Tryton could raise.

:class:`Differs` declares, on one argument, a deliberate difference of the
mirror from Tryton with its reason; :func:`known_differences` turns the
declaration into the known differences (as data: the fields of a
:class:`~mirrorworld.drift.parity.Known`) the comparison explains mismatches
with. The twin imports nothing of :mod:`mirrorworld.drift`: the comparison
imports the twin, and passes its static error-code reader in. A declared model, field, button, wizard
or error class that the pool does not have is reported ``unresolved``: the
real system changed under the declaration.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "SALES",
    "Differs",
    "Key",
    "NoField",
    "Search",
    "ToolDecl",
    "Value",
    "known_differences",
    "twin_surface",
]


@dataclass(frozen=True)
class Differs:
    """The mirror deliberately differs from Tryton on this argument's ``kind``; ``mirror`` is the mirror's value.

    For ``enum``, the mirror accepts a subset of Tryton's values (``mirror``
    unused); for ``type`` and ``required`` it explains only that mirror value.
    """

    kind: Literal["type", "enum", "required"]
    reason: str
    mirror: Any = None


@dataclass(frozen=True)
class Key:
    """The argument is the id of a record of ``model``."""

    model: str
    differs: tuple[Differs, ...] = ()


@dataclass(frozen=True)
class Value:
    """The argument is stored in ``model.field``."""

    model: str
    field: str
    differs: tuple[Differs, ...] = ()


@dataclass(frozen=True)
class Search:
    """The argument is words matched against ``fields`` of ``model``."""

    model: str
    fields: tuple[str, ...]
    differs: tuple[Differs, ...] = ()


@dataclass(frozen=True)
class NoField:
    """No Tryton field holds the argument, for ``reason``."""

    reason: str


Arg = Key | Value | Search | NoField


@dataclass(frozen=True)
class ToolDecl:
    """What stands behind one tool in Tryton.

    ``session``: the twin's session answers the tool itself (``read`` or
    ``terminal``), no Tryton model is involved. Otherwise the tool's kind is
    ``write`` when it runs a button or a wizard, creates or deletes a record or writes
    one of its fields (``writes``), else ``read``. ``errors``: Tryton error classes (dotted paths) by the code the
    twin reports them under.
    """

    model: str | None
    args: Mapping[str, Arg] = field(default_factory=dict)
    buttons: tuple[str, ...] = ()
    wizard: str | None = None
    creates: tuple[str, ...] = ()
    deletes: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    errors: Mapping[str, str] = field(default_factory=dict)
    session: Literal["read", "terminal"] | None = None


_SEARCH = Differs(
    "required", "Tryton searches with any domain, the empty one too; the desk's search needs words to look for", True
)
_PARTY = "trytond.modules.party.exceptions"

SALES: dict[str, ToolDecl] = {
    "get_policy": ToolDecl(None, session="read"),
    "search_parties": ToolDecl("party.party", {"query": Search("party.party", ("name", "code"), (_SEARCH,))}),
    "get_party": ToolDecl("party.party", {"party_id": Key("party.party")}),
    "search_products": ToolDecl("product.product", {"query": Search("product.product", ("name", "code"), (_SEARCH,))}),
    "get_product": ToolDecl("product.product", {"product_id": Key("product.product")}),
    "get_opportunity": ToolDecl("sale.opportunity", {"opportunity_id": Key("sale.opportunity")}),
    "get_sale": ToolDecl("sale.sale", {"sale_id": Key("sale.sale")}),
    "list_sales": ToolDecl("sale.sale", {"party_id": Key("party.party")}),
    "get_invoice": ToolDecl("account.invoice", {"invoice_id": Key("account.invoice")}),
    "add_contact": ToolDecl(
        "party.contact_mechanism",
        {
            "party_id": Value("party.contact_mechanism", "party"),
            "kind": Value(
                "party.contact_mechanism",
                "type",
                (
                    Differs(
                        "enum",
                        "the desk records only e-mail addresses and phone numbers; Tryton also keeps mobile, fax, "
                        "website, skype, sip, irc, jabber and other mechanisms",
                    ),
                ),
            ),
            "value": Value("party.contact_mechanism", "value"),
        },
        creates=("party.contact_mechanism",),
        errors={f"{_PARTY}.InvalidEMail": "validation_error", f"{_PARTY}.InvalidPhoneNumber": "validation_error"},
    ),
    "create_lead": ToolDecl(
        "sale.opportunity",
        {
            "party_id": Value(
                "sale.opportunity",
                "party",
                (
                    Differs(
                        "required",
                        "Tryton requires a party only once a lead is qualified (states['required']); the desk "
                        "records every lead for a known customer",
                        True,
                    ),
                ),
            ),
            "description": Value(
                "sale.opportunity",
                "description",
                (Differs("required", "the desk records what the customer is interested in on every lead", True),),
            ),
            "amount": Value(
                "sale.opportunity",
                "amount",
                (Differs("required", "the desk states every lead's estimated revenue (zero when unknown)", True),),
            ),
        },
        creates=("sale.opportunity",),
    ),
    "qualify_lead": ToolDecl("sale.opportunity", {"opportunity_id": Key("sale.opportunity")}, buttons=("opportunity",)),
    "convert_opportunity": ToolDecl(
        "sale.opportunity", {"opportunity_id": Key("sale.opportunity")}, buttons=("convert",), creates=("sale.sale",)
    ),
    "mark_lost": ToolDecl(
        "sale.opportunity",
        {
            "opportunity_id": Key("sale.opportunity"),
            "reason": Value(
                "sale.opportunity",
                "lost_reason",
                (
                    Differs(
                        "required", "the desk records why every lost lead was lost; Tryton's reason is optional", True
                    ),
                ),
            ),
        },
        buttons=("lost",),
    ),
    "create_quotation": ToolDecl(
        "sale.sale",
        {"party_id": Value("sale.sale", "party"), "description": Value("sale.sale", "description")},
        creates=("sale.sale",),
    ),
    "request_discount_approval": ToolDecl(
        "sale.sale",
        {
            "sale_id": Key("sale.sale"),
            "discount": NoField(
                "the discount approval is the desk's own policy: Tryton's sale has no approvals, the twin keeps "
                "each one as a note on the sale (ir.note)"
            ),
            "reason": Value(
                "ir.note",
                "message",
                (Differs("required", "an approval request states why; Tryton's note message is optional", True),),
            ),
        },
        creates=("ir.note",),
    ),
    "add_line": ToolDecl(
        "sale.line",
        {
            "sale_id": Value("sale.line", "sale"),
            "product_id": Value(
                "sale.line",
                "product",
                (
                    Differs(
                        "required",
                        "the desk adds product lines only; Tryton's lines may be comments or titles without a product",
                        True,
                    ),
                ),
            ),
            "quantity": Value(
                "sale.line",
                "quantity",
                (
                    Differs(
                        "type",
                        "the desk sells whole units; Tryton keeps quantities as floats in the line's unit",
                        "integer",
                    ),
                    Differs(
                        "required",
                        "Tryton requires a quantity only on lines of type line (states['required']); the desk adds "
                        "only those",
                        True,
                    ),
                ),
            ),
            "discount": Value("sale.line", "discount_rate"),  # percent at the desk, a rate (percent / 100) in Tryton
        },
        creates=("sale.line",),
        errors={"trytond.model.exceptions.AccessError": "invalid_state"},
    ),
    "remove_line": ToolDecl(
        "sale.line",
        {"sale_id": Value("sale.line", "sale"), "line_id": Key("sale.line")},
        deletes=("sale.line",),
        errors={"trytond.model.exceptions.AccessError": "invalid_state"},
    ),
    "quote_sale": ToolDecl(
        "sale.sale",
        {"sale_id": Key("sale.sale")},
        buttons=("quote",),
        errors={"trytond.modules.sale.exceptions.SaleQuotationError": "validation_error"},
    ),
    "reopen_sale": ToolDecl("sale.sale", {"sale_id": Key("sale.sale")}, buttons=("draft",)),
    "confirm_sale": ToolDecl(
        "sale.sale",
        {"sale_id": Key("sale.sale")},
        buttons=("confirm", "process"),
        errors={"trytond.modules.account_credit_limit.exceptions.CreditLimitError": "policy_refused"},
    ),
    "cancel_sale": ToolDecl("sale.sale", {"sale_id": Key("sale.sale")}, buttons=("cancel",)),
    "set_invoice_method": ToolDecl(
        "sale.sale",
        {"sale_id": Key("sale.sale"), "method": Value("sale.sale", "invoice_method")},
        writes=("sale.sale",),
        errors={"trytond.model.exceptions.AccessError": "invalid_state"},
    ),
    "ship_shipment": ToolDecl(
        "stock.shipment.out",
        {
            "shipment_id": Key("stock.shipment.out"),
            "partial": NoField(
                "the answer to Tryton's assign wizard when stock is short: ignore what could not be reserved "
                "(assign_ignore) rather than cancel"
            ),
        },
        buttons=("assign_wizard", "assign_try", "pick", "pack", "do"),
        errors={"trytond.model.exceptions.AccessButtonError": "invalid_state"},
    ),
    "post_invoice": ToolDecl("account.invoice", {"invoice_id": Key("account.invoice")}, buttons=("post",)),
    "pay_invoice": ToolDecl(
        "account.invoice",
        {
            "invoice_id": Key("account.invoice"),
            "amount": Value("account.invoice.pay.start", "amount"),
            "settle": Value(
                "account.invoice.pay.ask",
                "type",
                (
                    Differs(
                        "required",
                        "Tryton's wizard asks how to settle only when the amount is not the amount due; the desk "
                        "answers partial unless told otherwise",
                        False,
                    ),
                ),
            ),
        },
        buttons=("pay",),
        wizard="account.invoice.pay",
        errors={
            "trytond.model.exceptions.AccessButtonError": "invalid_state",
            "trytond.modules.account_invoice.exceptions.PayInvoiceError": "policy_refused",
            "trytond.modules.account.exceptions.ReconciliationError": "validation_error",
        },
    ),
    "credit_invoice": ToolDecl(
        "account.invoice",
        {"invoice_id": Key("account.invoice")},
        wizard="account.invoice.credit",
        creates=("account.invoice",),
    ),
    "list_overdue_invoices": ToolDecl("account.invoice", {"party_id": Key("party.party")}),
    "return_sale": ToolDecl(
        "sale.sale", {"sale_id": Key("sale.sale")}, wizard="sale.return_sale", creates=("sale.sale", "sale.line")
    ),
    "receive_return": ToolDecl(
        "stock.shipment.out.return",
        {"shipment_id": Key("stock.shipment.out.return")},
        buttons=("receive", "do"),
        errors={"trytond.model.exceptions.AccessButtonError": "invalid_state"},
    ),
    "quote_price": ToolDecl(
        "product.product",
        {
            "party_id": Key("party.party"),
            "product_id": Key("product.product"),
            "quantity": Value(
                "sale.line",
                "quantity",
                (
                    Differs(
                        "type",
                        "the desk sells whole units; Tryton prices a quantity as a float in the line's unit",
                        "integer",
                    ),
                    Differs("required", "a price is quoted for a quantity (the price list's quantity rules)", True),
                ),
            ),
        },
    ),
    "respond": ToolDecl(
        None,
        {"message": NoField("the final message ends the conversation; no Tryton record holds it")},
        session="terminal",
    ),
}
"""What stands behind each sales tool in Tryton (see the module docstring)."""


def known_differences(declaration: Mapping[str, ToolDecl] = SALES) -> list[dict[str, Any]]:
    """The differences ``declaration`` states, with their reasons, as data: the fields of a
    :class:`mirrorworld.drift.parity.Known` each (``Known.from_dict`` reads one).

    Data rather than ``Known`` objects, so the twin needs nothing of :mod:`mirrorworld.drift`
    (which imports the twin to compare against it).
    """
    out: list[dict[str, Any]] = []
    for tool in sorted(declaration):
        for arg, decl in sorted(declaration[tool].args.items()):
            base = {"tool": tool, "argument": arg}
            if isinstance(decl, NoField):
                out.append({"kind": "argument", **base, "reason": decl.reason, "mirror": [arg], "real": [None]})
                continue
            for d in decl.differs:
                if d.kind == "enum":
                    out.append({"kind": "enum", **base, "reason": d.reason, "narrows": True})
                else:
                    out.append({"kind": d.kind, **base, "reason": d.reason, "mirror": [d.mirror]})
    return out


_JSON_TYPES = {
    "char": "string",
    "text": "string",
    "reference": "string",
    "selection": "string",
    "integer": "integer",
    "biginteger": "integer",
    "many2one": "integer",
    "one2many": "integer",
    "many2many": "integer",
    "numeric": "number",
    "float": "number",
    "boolean": "boolean",
}
"""Tryton field types (``Field._type``) by the JSON type an agent sends for them (ids for relations)."""


class _Reader:
    """Reads declared things off a pool, noting what is missing."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self.unresolved: list[dict[str, Any]] = []

    def miss(self, tool: str, argument: str | None, what: str) -> None:
        self.unresolved.append({"tool": tool, "argument": argument, "what": what})

    def model(self, name: str, tool: str, argument: str | None = None) -> Any:
        try:
            return self.pool.get(name)
        except KeyError:
            self.miss(tool, argument, f"no model {name}")
            return None

    def field(self, model: str, name: str, tool: str, argument: str) -> dict[str, Any] | None:
        Model = self.model(model, tool, argument)
        if Model is None:
            return None
        f = Model._fields.get(name)
        if f is None:
            self.miss(tool, argument, f"no field {model}.{name}")
            return None
        kind = self._type(f)
        json_type = _JSON_TYPES.get(kind)
        if json_type is None:
            self.miss(tool, argument, f"{model}.{name} is a {kind} field: no JSON type maps it")
            return None
        out: dict[str, Any] = {"type": json_type, "required": bool(f.required)}
        if kind == "selection":
            selection = f.selection
            if isinstance(selection, str):  # a method of the model computes it (needs a transaction)
                selection = getattr(Model, selection)()
            keys = sorted({str(k) for k, _label in selection if k not in (None, "")})
            if keys:
                out["enum"] = keys
        return out

    @staticmethod
    def _type(f: Any) -> str:
        return str(getattr(f, "_type", None) or "unknown")


def _codes(reader: _Reader, tool: str, errors: Mapping[str, str]) -> set[str]:
    """The codes the twin reports ``errors`` (Tryton classes) under, checking each class and code."""
    from mirrorworld.twin import tryton
    from mirrorworld.twin.sales import ERROR_CODES

    with tryton.quiet():
        from trytond.exceptions import UserError, UserWarning  # type: ignore[import-untyped,import-not-found]

    out: set[str] = set()
    for path, code in sorted(errors.items()):
        module, _dot, name = path.rpartition(".")
        try:
            with tryton.quiet():
                cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            reader.miss(tool, None, f"no Tryton error class {path}")
            continue
        if not (isinstance(cls, type) and issubclass(cls, (UserError, UserWarning))):
            reader.miss(tool, None, f"{path} is not a UserError: the twin would not report it")
            continue
        reported = ERROR_CODES.get(cls.__name__, "validation_error")
        if reported != code:
            reader.miss(tool, None, f"the twin reports {name} as {reported}, not {code}")
            continue
        out.add(code)
    return out


ErrorCodes = Callable[[Callable[..., Any]], Iterable[str]]
"""Reads the error codes a function raises (:func:`mirrorworld.drift.parity.error_codes`)."""


def twin_surface(pool: Any, declaration: Mapping[str, ToolDecl] = SALES, *, codes: ErrorCodes) -> dict[str, Any]:
    """The real surface, read off ``pool`` (a twin's Tryton pool) for the tools ``declaration`` describes.

    ``codes`` reads the twin adapter's functions for the error codes they raise,
    as the mirror's are read (``mirrorworld.drift.parity.error_codes``; passed
    in, since the comparison imports the twin and not the other way round).

    Run it inside a twin session (a Tryton transaction: a selection a method
    computes needs one). Returns a surface (see :mod:`mirrorworld.drift.parity`)
    with ``unresolved``: every declared model, field, button, wizard or error
    class the pool lacks, and every tool the twin implements that the
    declaration does not describe (or describes but the twin lacks).
    """
    from mirrorworld.twin import tryton
    from mirrorworld.twin.sales import TOOLS as TWIN_TOOLS

    reader = _Reader(pool)
    tools: dict[str, Any] = {}
    for name in sorted(declaration):
        decl = declaration[name]
        if decl.model is not None:
            Model = reader.model(decl.model, name)
            buttons = getattr(Model, "_buttons", {}) if Model is not None else {}
            for b in decl.buttons:
                if Model is not None and b not in buttons:
                    reader.miss(name, None, f"no button {b} on {decl.model}")
        for created in (*decl.creates, *decl.deletes, *decl.writes):
            reader.model(created, name)
        if decl.wizard is not None:
            try:
                pool.get(decl.wizard, type="wizard")
            except KeyError:
                reader.miss(name, None, f"no wizard {decl.wizard}")
        args: dict[str, Any] = {}
        with tryton.quiet():
            for arg in sorted(decl.args):
                a = decl.args[arg]
                if isinstance(a, Key):
                    found = reader.field(a.model, "id", name, arg)
                    if found is not None:
                        args[arg] = {"type": found["type"], "required": True}
                elif isinstance(a, Value):
                    found = reader.field(a.model, a.field, name, arg)
                    if found is not None:
                        args[arg] = found
                elif isinstance(a, Search):
                    found_all = [reader.field(a.model, f, name, arg) for f in a.fields]
                    types = {f["type"] for f in found_all if f is not None}
                    if None in found_all or not types:
                        continue
                    if len(types) == 1:
                        args[arg] = {"type": types.pop(), "required": False}
                    else:
                        reader.miss(name, arg, f"the fields {', '.join(a.fields)} of {a.model} differ in type")
        found_codes = {"invalid_arguments"} if decl.args else set()
        if decl.session is None:
            func = TWIN_TOOLS.get(name)
            if func is None:
                reader.miss(name, None, "the twin does not implement it")
            else:
                found_codes |= set(codes(func))
        found_codes |= _codes(reader, name, decl.errors)
        kind: str
        if decl.session is not None:
            kind = decl.session
        else:
            kind = "write" if decl.buttons or decl.wizard or decl.creates or decl.deletes or decl.writes else "read"
        tools[name] = {"kind": kind, "args": args, "errors": sorted(found_codes)}
    for name in sorted(set(TWIN_TOOLS) - set(declaration)):
        reader.miss(name, None, "the twin implements it, and the declaration does not describe it")
    return {
        "world": f"Tryton {tryton.versions().get('trytond', '?')} (the sales twin)",
        "tools": tools,
        "unresolved": reader.unresolved,
    }
