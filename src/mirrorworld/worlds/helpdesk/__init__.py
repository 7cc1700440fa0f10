"""The helpdesk mirror world (``mirrorworld/Helpdesk-v0``).

``SPEC`` is what the ``mirrorworld.worlds`` entry point names; importing this
package builds nothing and imports the world's code only when
``HelpdeskWorld`` is first used.
"""

from typing import Any

from mirrorworld.core.registry import WorldSpec

__all__ = ["SPEC", "HelpdeskWorld"]

SPEC = WorldSpec(
    "helpdesk",
    "mirrorworld/Helpdesk-v0",
    "mirrorworld.worlds.helpdesk.world:HelpdeskWorld",
    "The contact center of an online retailer: customers, orders, tickets, refunds.",
)


def __getattr__(name: str) -> Any:
    if name == "HelpdeskWorld":
        from mirrorworld.worlds.helpdesk.world import HelpdeskWorld

        return HelpdeskWorld
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
