"""The helpdesk mirror world (``mirrorworld/Helpdesk-v0``)."""

from mirrorworld.worlds.helpdesk.world import HelpdeskWorld

__all__ = ["HelpdeskWorld"]
