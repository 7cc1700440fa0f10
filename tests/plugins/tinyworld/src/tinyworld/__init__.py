"""tinyworld: the front desk of a lending library, a mirror world packaged on its own.

``SPEC`` is what the ``mirrorworld.worlds`` entry point of this distribution
names. Importing this package builds nothing: the world's code is imported
when the registry first builds ``tinyworld.world:TinyWorld``.
"""

from mirrorworld.core.registry import WorldSpec

__all__ = ["SPEC"]

SPEC = WorldSpec(
    "tiny",
    "mirrorworld/Tiny-v0",
    "tinyworld.world:TinyWorld",
    "The front desk of a lending library: members, loans and renewals, with a member and a librarian.",
)
