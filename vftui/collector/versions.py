"""The versions of what made a run (vftui, verifiers, atroposlib), recorded in its run.json and an eval's
metadata.json alike, so ``compare`` and ``report`` can say when two sources were made by different ones."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

MADE_BY = ("vftui", "verifiers", "atroposlib")


def made_by() -> dict[str, str | None]:
    """Each package's installed version, None where it is not installed."""
    return {name: _version(name) for name in MADE_BY}


def _version(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None
