"""A prime-rl training run read from its folder: metrics, logs, token exports, health.

Pure readers and figures: no Textual, no verifiers, no atroposlib. ``vftui watch RUN_DIR``,
``vftui status`` and ``vftui tokens`` show what these read.
"""
