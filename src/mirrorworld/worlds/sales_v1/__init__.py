"""Sales v1: the sales desk after its ERP switched to rounding taxes per line (:mod:`mirrorworld.drift`).

The real system's change is a setting of the twin (``--twin-option
tax_rounding=line``): a fidelity run of Sales v0 against that twin, compared
with its baseline, reports the regression; Sales v1 declares the same change
and agrees with the changed twin again::

    mirrorworld fidelity --world sales --save-baseline base.json
    mirrorworld fidelity --world sales --twin-option tax_rounding=line --against base.json     # exit 1
    mirrorworld fidelity --world sales_v1 --twin-option tax_rounding=line --against base.json  # exit 0
"""

from __future__ import annotations

from pathlib import Path

from mirrorworld.core.registry import WorldSpec
from mirrorworld.drift import MoveParameter, derive
from mirrorworld.worlds.sales.world import SalesWorld

__all__ = ["CHANGES", "SPEC", "SalesV1"]

CHANGES = (
    MoveParameter(
        "tax_rounding",
        "line",
        policy=(
            (
                "Tax is computed on the unrounded\n  line amounts and rounded once for the whole document, "
                "half-to-even to the\n  cent (once for the lines of positive amount and once for those of negative\n"
                "  amount, then added, when a document has both, as a return sale with a line\n  added).",
                "Tax is computed on each line's\n  unrounded amount and rounded per line, half-to-even to "
                "the cent; the\n  document's tax is the sum of its lines' taxes.",
            ),
        ),
    ),
)
"""The change from Sales v0."""

SalesV1 = derive(
    SalesWorld,
    version=1,
    changes=CHANGES,
    name="sales_v1",
    module=__name__,
    qualname="SalesV1",
    source_dir=Path(__file__).resolve().parent,
)

SPEC = WorldSpec.of(SalesV1, description="the sales desk after its ERP rounds taxes per line (drift)")
