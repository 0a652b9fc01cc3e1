"""Finding verifiers environments by name: the built-in ones and installed packages."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

from vftui.collector import compat
from vftui.errors import UserError

BUILTIN_DIR = Path(__file__).resolve().parent.parent / "sim" / "envs"
BUILTINS = {"alphabet-sort": "alphabet_sort"}


def module_name(env_id: str) -> str:
    """The module ``verifiers.load_environment`` imports for ``env_id``."""
    return env_id.replace("-", "_").split("/")[-1]


def expose_builtins() -> None:
    """Make the built-in environments importable by their verifiers names."""
    if str(BUILTIN_DIR) not in sys.path:
        sys.path.append(str(BUILTIN_DIR))


def installed_environments() -> list[str]:
    """Installed distributions that depend on verifiers and expose a loadable module."""
    found = set()
    for dist in importlib.metadata.distributions():
        name = dist.metadata.get("Name") or ""
        requires = dist.requires or []
        if name.lower() in ("verifiers", "atroposlib", "vftui"):
            continue
        depends = any(re.match(r"verifiers\b", req.strip()) for req in requires)
        if depends and importlib.util.find_spec(module_name(name)) is not None:
            found.add(name)
    return sorted(found)


def loadable_environments() -> list[str]:
    return [f"{name} (built in)" for name in BUILTINS] + installed_environments()


def load(env_id: str, env_args: dict[str, Any]):
    """Load an environment with verifiers' own loader; bad names and args are UserErrors.

    Must be called on the main thread: a verifiers Environment installs signal handlers.
    """
    expose_builtins()
    if importlib.util.find_spec(module_name(env_id)) is None:
        raise UserError(
            f"unknown environment '{env_id}'; environments that can be loaded: "
            + ", ".join(loadable_environments())
        )
    try:
        return compat.load_vf_environment(env_id, env_args)
    except (ValueError, RuntimeError, TypeError) as e:
        cause = e.__cause__ or e
        raise UserError(f"environment '{env_id}' did not load with --env-args {env_args}: {cause}") from e
