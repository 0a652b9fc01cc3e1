"""vftui: a terminal dashboard for the Atropos verifiers collector."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("vftui")  # pyproject's, as installed: one place to change it
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
