"""``vftui watch RUN_DIR``: a prime-rl run followed live (the training dashboard)."""
