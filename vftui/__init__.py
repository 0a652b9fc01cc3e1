"""vftui: a terminal dashboard for the Atropos verifiers collector."""

__version__ = "0.1.0"
