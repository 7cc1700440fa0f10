"""The sales mirror world (``mirrorworld/Sales-v0``): CRM and order-to-cash.

``SPEC`` is what the ``mirrorworld.worlds`` entry point names; importing this
package builds nothing and imports the world's code only when ``SalesWorld``
is first used.
"""

from typing import Any

from mirrorworld.core.registry import WorldSpec

__all__ = ["SPEC", "SalesWorld"]

SPEC = WorldSpec(
    "sales",
    "mirrorworld/Sales-v0",
    "mirrorworld.worlds.sales.world:SalesWorld",
    "A CRM sales pipeline and order-to-cash flow, mirrored on the Tryton ERP.",
)


def __getattr__(name: str) -> Any:
    if name == "SalesWorld":
        from mirrorworld.worlds.sales.world import SalesWorld

        return SalesWorld
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
