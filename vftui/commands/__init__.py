"""One module a command: ``vftui run`` (headless or dashboard), ``vftui view``, ``vftui watch``."""
