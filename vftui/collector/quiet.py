"""Library noise off, before the libraries load: set first thing by every command that uses them."""

from __future__ import annotations

import os
import warnings


def quiet_libraries() -> None:
    """Silence advisory noise that would otherwise land in every run's output."""
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    warnings.filterwarnings("ignore", message="Trainer requested to ignore max length")
