"""play (placeholder)."""
