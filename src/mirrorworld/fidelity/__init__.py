"""Measured sim-to-real fidelity: the mirror against its real twin, call by call.

See :mod:`mirrorworld.fidelity.harness` for the comparison,
:mod:`mirrorworld.fidelity.traces` for what is replayed and
:mod:`mirrorworld.fidelity.baseline` for drift detection.
"""
