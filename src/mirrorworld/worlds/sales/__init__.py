"""The sales mirror world (``mirrorworld/Sales-v0``): CRM and order-to-cash."""

from mirrorworld.worlds.sales.world import SalesWorld

__all__ = ["SalesWorld"]
