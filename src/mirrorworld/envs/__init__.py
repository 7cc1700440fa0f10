"""Adapters that expose sessions to agents: Gymnasium and OpenAI-style chat."""
