"""Comparing runs and evals: the figures (``comparison``) and their words (``compared``), above the readers."""
