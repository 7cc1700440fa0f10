"""Non-stationarity: world versions derived by declared changes, fault injection, drift reports, parity.

* :mod:`~mirrorworld.drift.changes`: the kinds of change a version declares;
* :mod:`~mirrorworld.drift.derive`: :func:`derive`, a world class from a base and its changes;
* :mod:`~mirrorworld.drift.faults`: seeded transient tool failures and latency, an episode option;
* :mod:`~mirrorworld.drift.report`: an agent on two versions, per-family deltas, the ablation;
* :mod:`~mirrorworld.drift.parity`: a tool surface against the real system's, or another version's.
"""

from __future__ import annotations

from mirrorworld.drift.changes import (
    CHANGE_KINDS,
    AddArgument,
    AddDistractorTools,
    AddEnumValue,
    Change,
    ChangeErrorCode,
    MoveParameter,
    ParaphraseTools,
    RemoveEnumValue,
    RemoveTool,
    RenameArgument,
    RenameTool,
    RetypeArgument,
    RevisePolicy,
    ShiftCustomer,
    change_from_dict,
)
from mirrorworld.drift.derive import DriftedWorld, derive

__all__ = [
    "CHANGE_KINDS",
    "AddArgument",
    "AddDistractorTools",
    "AddEnumValue",
    "Change",
    "ChangeErrorCode",
    "DriftedWorld",
    "MoveParameter",
    "ParaphraseTools",
    "RemoveEnumValue",
    "RemoveTool",
    "RenameArgument",
    "RenameTool",
    "RetypeArgument",
    "RevisePolicy",
    "ShiftCustomer",
    "change_from_dict",
    "derive",
]
