"""How long to wait before trying a failed request or group again."""

from __future__ import annotations

import random


def backoff_seconds(attempt: int) -> float:
    """0.5 s doubling to 30 s, with jitter so several collectors don't retry in step."""
    return min(30.0, 0.5 * 2 ** (attempt - 1)) * random.uniform(0.8, 1.2)
