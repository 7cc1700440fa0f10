"""Auditing verifiers (mutation testing, null agents, probes) and recorded runs (hack detection)."""

from mirrorworld.audit.runlog import audit_run
from mirrorworld.audit.verifiers import AuditReport, audit_verifiers

__all__ = ["AuditReport", "audit_run", "audit_verifiers"]
