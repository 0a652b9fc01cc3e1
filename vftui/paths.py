"""Every place vftui reads or writes by default, from platformdirs, in one module."""

from __future__ import annotations

import os
import re
import time
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


SLUG_CHARACTERS = "A-Za-z0-9_.-"
RUN_DIR_NAME = re.compile(rf"\d{{8}}-\d{{6}}-[{SLUG_CHARACTERS}]+")  # as new_run_dir names them


def new_run_dir(env: str) -> Path:
    """A fresh folder for a run, created here: ``runs/<UTC time>-<env>``, ``-1``, ``-2``... when
    taken, so two runs started in the same second (or a folder not writable) never share one."""
    slug = re.sub(rf"[^{SLUG_CHARACTERS}]+", "-", env).strip("-") or "run"
    base = runs_dir() / f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{slug}"
    candidate, n = base, 1
    base.parent.mkdir(parents=True, exist_ok=True)
    while True:
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            candidate = base.with_name(f"{base.name}-{n}")
            n += 1


def is_run_dir_name(name: str) -> bool:
    """Whether a folder of the runs folder is named as ``new_run_dir`` names the folders it makes."""
    return RUN_DIR_NAME.fullmatch(name) is not None


def writable_dir(path: Path) -> bool:
    """Whether ``path`` (created if missing) accepts new files."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK)
