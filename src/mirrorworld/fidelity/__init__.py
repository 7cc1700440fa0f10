"""Measured sim-to-real fidelity: the mirror against its real twin, call by call and agent by agent.

See :mod:`mirrorworld.fidelity.harness` for the call-by-call comparison,
:mod:`mirrorworld.fidelity.traces` for what is replayed,
:mod:`mirrorworld.fidelity.baseline` for drift detection,
:mod:`mirrorworld.fidelity.episode` for agents' episodes on the twin and their
grading, and :mod:`mirrorworld.fidelity.agents` for the agent-level gap.
"""
