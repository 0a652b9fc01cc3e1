"""Finding verifiers environments by id, the built-in ones and installed packages, and loading them.

A failed load is one sentence naming the environment and the cause (``load_failure``).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vftui.collector.envs import classic
from vftui.collector.envs.base import Environment
from vftui.errors import UserError

BUILTIN_DIR = Path(__file__).resolve().parents[2] / "sim" / "envs"
BUILTINS = {"alphabet-sort": "alphabet_sort", "alphabet-tools": "alphabet_tools"}
"""Built-in environment id -> its module in ``BUILTIN_DIR``."""

PLAIN_ERRORS = (ValueError, TypeError, RuntimeError)
"""Errors whose message alone says what is wrong; others are shown with their type."""


def module_name(env_id: str) -> str:
    """The module ``verifiers.load_environment`` imports for ``env_id``."""
    return env_id.replace("-", "_").split("/")[-1]


class BuiltinFinder(importlib.abc.MetaPathFinder):
    """Finds the built-in modules in ``BUILTIN_DIR`` before any installed module of the same name."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in BUILTINS.values():
            return None
        return importlib.machinery.PathFinder.find_spec(fullname, [str(BUILTIN_DIR)])


def expose_builtins() -> None:
    """Make the built-in environments importable by their verifiers names, ahead of installed ones.

    verifiers imports ``env_id.replace('-', '_')`` as a top-level module, so an installed
    package of that name (the upstream ``alphabet-sort``) would otherwise win.
    """
    if not any(isinstance(finder, BuiltinFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, BuiltinFinder())


def installed_environments() -> list[str]:
    """Installed distributions that depend on verifiers and expose a loadable module (built-in ids win)."""
    found = set()
    for dist in importlib.metadata.distributions():
        name = dist.metadata.get("Name") or ""
        requires = dist.requires or []
        if name.lower() in ("verifiers", "atroposlib", "vftui") or module_name(name) in BUILTINS.values():
            continue
        depends = any(re.match(r"verifiers\b", req.strip()) for req in requires)
        if depends and importlib.util.find_spec(module_name(name)) is not None:
            found.add(name)
    return sorted(found)


def loadable_environments() -> list[str]:
    return [f"{name} (built in)" for name in BUILTINS] + installed_environments()


def load(env_id: str, env_args: dict[str, Any]) -> Environment:
    """Load an environment with verifiers' own loader; any failure is a UserError.

    Must be called on the main thread: a verifiers Environment installs signal handlers.
    """
    expose_builtins()
    if importlib.util.find_spec(module_name(env_id)) is None:
        raise UserError(
            f"unknown environment '{env_id}'; environments that can be loaded: "
            + ", ".join(loadable_environments())
        )
    try:
        return classic.ClassicEnvironment(env_id, classic.load(env_id, env_args))
    except Exception as e:
        raise UserError(load_failure(env_id, env_args, e)) from e


def load_failure(env_id: str, env_args: dict[str, Any], error: Exception) -> str:
    """One sentence for a failed load: the environment, the cause and, where one fits, what to do."""
    cause = error.__cause__ or error  # verifiers wraps the environment's own error
    failed = f"environment '{env_id}' did not load"
    if env_args:
        failed += f" with --env-args '{json.dumps(env_args)}'"
    if any(_unreachable(link) for link in _chain(error)):
        return (
            f"{failed}: it needs a dataset from the Hugging Face Hub, which cannot be reached here "
            f"({_describe(cause)}); point it at a local dataset with --env-args, or download the dataset "
            "while online and run again"
        )
    if isinstance(cause, ModuleNotFoundError) and cause.name:
        package = cause.name.split(".")[0]
        if package in ("verifiers", "atroposlib"):  # installed, so a part of another version is missing
            return (
                f"{failed}: it needs '{cause.name}', which {package} {importlib.metadata.version(package)} does "
                f"not have; the environment was written for another {package} version"
            )
        return (
            f"{failed}: it needs the Python module '{cause.name}', which is not installed; "
            f"install it (e.g. pip install {package})"
        )
    return f"{failed}: {_describe(cause)}"


def _chain(error: BaseException) -> Iterator[BaseException]:
    """``error`` and the errors it was raised from or while handling."""
    seen: set[int] = set()
    link: BaseException | None = error
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        link = link.__cause__ or link.__context__


def _unreachable(error: BaseException) -> bool:
    """Whether ``error`` means the network (the Hub) could not be reached, offline mode included."""
    import httpx
    import requests
    from huggingface_hub.errors import LocalEntryNotFoundError

    network = (ConnectionError, TimeoutError, requests.ConnectionError, requests.Timeout, httpx.TransportError)
    return isinstance(error, (*network, LocalEntryNotFoundError))


def _describe(error: BaseException) -> str:
    """The error's first line, with its type where the message alone would be unclear (KeyError: 'x')."""
    text = (str(error).strip().splitlines() or [""])[0]
    if isinstance(error, PLAIN_ERRORS) and text:
        return text
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
