"""Adapters to training frameworks (each imports its framework lazily; install the matching extra).

* :mod:`mirrorworld.integrations.trl` — a world as a TRL ``GRPOTrainer``
  ``environment_factory`` (``pip install 'mirrorworld[trl]'``).
"""
