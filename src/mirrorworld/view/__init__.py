"""view (placeholder)."""
