"""Every place vftui reads or writes by default, from platformdirs, in one module."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP = "vftui"


def config_dir() -> Path:
    return Path(platformdirs.user_config_dir(APP))


def default_config_file() -> Path:
    return config_dir() / "config.toml"


def user_themes_dir() -> Path:
    return config_dir() / "themes"


def data_dir() -> Path:
    return Path(platformdirs.user_data_dir(APP))


def cache_dir() -> Path:
    """What can be made again: ``vftui view``'s groups form of vf-eval results."""
    return Path(platformdirs.user_cache_dir(APP))


def runs_dir() -> Path:
    return data_dir() / "runs"


def writable_dir(path: Path) -> bool:
    """Whether ``path`` (created if missing) accepts new files."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK)
