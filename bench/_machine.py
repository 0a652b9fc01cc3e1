"""What a bench's figures were taken on, printed before them: a ratio means little without the machine's load
(its neighbours here swing a run by ±15%) and the library versions behind it."""

from __future__ import annotations

import os
import platform
from importlib.metadata import version


def described() -> str:
    one, five, _ = os.getloadavg()
    libraries = ", ".join(
        f"{name} {version(name)}" for name in ("verifiers", "atroposlib", "textual")
    )
    return (
        f"machine: {os.cpu_count()} cores, load {one:.2f} (1 min) {five:.2f} (5 min) at the start; "
        f"Python {platform.python_version()}, {libraries}"
    )
