"""Verifiers: grade a finished (or running) episode from its state and events."""

from mirrorworld.verify.verdict import Gate, Verdict
from mirrorworld.verify.verifier import Verifier, verify

__all__ = ["Gate", "Verdict", "Verifier", "verify"]
