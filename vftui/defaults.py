"""Defaults and flags that commands other than ``run`` name too, without loading the settings model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DEFAULT_ENV = "vftui/alphabet-sort"
DEFAULT_API_URL = "http://localhost:8000"
PASS_THRESHOLD = 0.5  # vf-eval's: a rollout passes at reward >= 0.5, so pass@k figures carry over


@dataclass(frozen=True)
class SharedFlag:
    """A flag several commands take: ``run`` builds it from its settings model, the others from here."""

    default: Any
    help: str
    metavar: str | None = None

    @property
    def argparse(self) -> dict[str, Any]:
        """``add_argument`` keywords for a command's parser; the help says the default."""
        shown = f"{self.help} (default {self.default})" if self.default is not None else self.help
        return {
            "default": self.default,
            "help": shown,
            "metavar": self.metavar,
            "type": type(self.default) if self.default is not None else str,
        }


SHARED_FLAGS = {
    "theme": SharedFlag(
        None,
        "dashboard theme: vftui-dark (default), vftui-light, vftui-contrast, a Textual "
        "theme, or one of yours in the user themes folder",
    ),
    "api_url": SharedFlag(DEFAULT_API_URL, "Atropos trajectory API"),
    "identical_alert": SharedFlag(
        0.5, "highlight the identical-score rate above this fraction of groups", metavar="RATE"
    ),
}
