"""Finding an environment by id, classic or v1, built in or installed, and loading it.

An id names a module as verifiers' loaders do (``owner/name@version`` imports ``name``, with
``-`` as ``_``). A module with ``load_environment`` is a classic environment; one exporting a
``Taskset`` subclass is a v1 one. vftui's own environments have ids in a namespace of their
own (``vftui/...``), so they can never stand in for a user's: ``alphabet-sort`` loads the
installed ``alphabet_sort`` or says it is not installed. A failed load is one sentence naming
the environment and the cause (``load_failure``).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from vftui.collector.envs import classic
from vftui.collector.envs.base import Environment
from vftui.errors import UserError

BUILTINS = {
    "vftui/alphabet-sort": "vftui.sim.envs.alphabet_sort",
    "vftui/alphabet-tools": "vftui.sim.envs.alphabet_tools",
    "vftui/alphabet-sort-classic": "vftui.sim.envs.alphabet_sort_classic",
    "vftui/alphabet-tools-classic": "vftui.sim.envs.alphabet_tools_classic",
}
"""vftui's own environment ids -> their modules (v1 tasksets, and the classic ones for verifiers 0.3)."""
CLASSIC_BUILTINS = frozenset({"vftui/alphabet-sort-classic", "vftui/alphabet-tools-classic"})
V1_BUILTIN_TASKSETS = "verifiers.v1.tasksets"  # where verifiers' v1 loader looks first
CLASSIC_INSTALL = "pip install 'vftui[classic]'"

PLAIN_ERRORS = (ValueError, TypeError, RuntimeError)
"""Errors whose message alone says what is wrong; others are shown with their type."""


def module_name(env_id: str) -> str:
    """The module an environment id names, as verifiers' loaders read it."""
    return env_id.rsplit("/", 1)[-1].split("@", 1)[0].replace("-", "_")


def installed_environments() -> list[str]:
    """Installed distributions that expose a module of their name and depend on verifiers or import it: a
    v1 taskset of verifiers' own examples (``reverse-text-v1``) requires only what its dataset needs."""
    found = set()
    for dist in importlib.metadata.distributions():
        name = dist.metadata.get_all("Name", [""])[0] or ""  # the first Name field, if any
        if name.lower() in ("verifiers", "atroposlib", "vftui"):
            continue
        module = module_name(name)
        if any(re.match(r"verifiers\b", req.strip()) for req in dist.requires or []):
            if _find(module) is not None:
                found.add(name)
        elif "." not in module and _imports_verifiers(module):  # a dotted one: its parent imports
            found.add(name)
    return sorted(found)


IMPORTS_VERIFIERS = re.compile(rb"^\s*(from|import)\s+verifiers\b", re.MULTILINE)
MAX_SOURCES = 32  # files of a package read to tell whether it imports verifiers


def _imports_verifiers(target: str) -> bool:
    """The top-level module's source, or its package's top-level files, import verifiers (read, never
    imported)."""
    try:
        spec = importlib.util.find_spec(target)
    except (ImportError, ValueError):
        return False
    if spec is None or spec.origin is None:
        return False
    origin = Path(spec.origin)
    sources = (
        sorted(origin.parent.glob("*.py"))[:MAX_SOURCES]
        if spec.submodule_search_locations
        else [origin]
    )
    for source in sources:
        try:
            if IMPORTS_VERIFIERS.search(source.read_bytes()):
                return True
        except OSError:
            continue
    return False


def loadable_environments() -> list[str]:
    """What this verifiers can run: classic environments only where it still runs them (0.3), else one entry
    saying how many there are and what they need, so none is offered that would then be refused."""
    builtins = [name for name in BUILTINS if classic.available() or name not in CLASSIC_BUILTINS]
    installed = installed_environments()
    if not classic.available():
        runnable = [name for name in installed if not _defines_load_environment(module_name(name))]
        held_back = len(CLASSIC_BUILTINS) + len(installed) - len(runnable)
        return (
            [f"{name} (built in)" for name in builtins]
            + runnable
            + [f"({held_back} classic ones need verifiers 0.3: {CLASSIC_INSTALL})"]
        )
    return [f"{name} (built in)" for name in builtins] + installed


def _find(module: str) -> str | None:
    """The module to import for ``module``: itself, its lower-case form, or verifiers' own v1 taskset."""
    for candidate in (module, module.lower(), f"{V1_BUILTIN_TASKSETS}.{module.lower()}"):
        try:
            if importlib.util.find_spec(candidate) is not None:
                return candidate
        except (ImportError, ValueError):
            continue
    return None


def load(env_id: str, env_args: dict[str, Any]) -> Environment:
    """The environment ``env_id``, built by verifiers' own loader for its kind; any failure is a UserError.

    Must be called on the main thread: a classic Environment installs signal handlers.
    """
    target = BUILTINS.get(env_id) or _find(module_name(env_id))
    if target is None:
        raise UserError(
            f"environment '{env_id}' is not installed (no module {module_name(env_id)}); "
            f"environments that can be loaded: {', '.join(loadable_environments())}"
        )
    try:
        module = importlib.import_module(target)
    except Exception as e:
        if not classic.available() and _defines_load_environment(target):
            raise UserError(
                _classic_needs_03(env_id)
            ) from e  # it imports the classic API 0.4 removed
        raise load_error(env_id, env_args, e) from e
    if hasattr(module, "load_environment"):
        return _load_classic(env_id, module, env_args)
    taskset = _exported_taskset(module)
    if taskset is None:
        raise UserError(
            f"environment '{env_id}' ({target}) is neither a classic verifiers environment (no "
            "load_environment) nor a v1 taskset (no Taskset subclass in its __all__)"
        )
    return _load_v1(env_id, _v1_id(target, module), env_args)


def _v1_id(target: str, module: ModuleType) -> str:
    """The id verifiers' v1 loader finds ``module`` by. It looks an id up first among its own tasksets
    (``find_spec("verifiers.v1.tasksets.<id>")``, which imports that package and with it nemo_gym and
    mcp), then as a top-level name; a built-in in vftui's package is already imported, so it is named
    where that first lookup finds it in ``sys.modules``, with no import at all."""
    if "." not in target or target.startswith(V1_BUILTIN_TASKSETS + "."):
        return target
    alias = "vftui_" + target.rsplit(".", 1)[-1]
    sys.modules.setdefault(f"{V1_BUILTIN_TASKSETS}.{alias}", module)
    return alias


def _load_classic(env_id: str, module: ModuleType, env_args: dict[str, Any]) -> Environment:
    if not classic.available():
        raise UserError(_classic_needs_03(env_id))
    try:
        return classic.ClassicEnvironment(env_id, classic.load(env_id, module, env_args))
    except Exception as e:
        raise load_error(env_id, env_args, e) from e


def _classic_needs_03(env_id: str) -> str:
    return (
        f"environment '{env_id}' is a classic verifiers environment (load_environment), which verifiers "
        f"{importlib.metadata.version('verifiers')} no longer runs; install verifiers 0.3 beside vftui to run it "
        f"({CLASSIC_INSTALL})"
    )


def _defines_load_environment(target: str) -> bool:
    """Whether the module's source defines ``load_environment`` (read, for a module that would not import)."""
    try:
        spec = importlib.util.find_spec(target)
        source = Path(spec.origin).read_text(errors="replace") if spec and spec.origin else ""
    except (ImportError, ValueError, OSError):
        return False
    return re.search(r"^def load_environment\(", source, re.MULTILINE) is not None


def _load_v1(env_id: str, target: str, env_args: dict[str, Any]) -> Environment:
    from vftui.collector.envs import v1

    try:
        return v1.load(env_id, target, env_args)
    except UserError:
        raise
    except Exception as e:
        raise load_error(env_id, env_args, e) from e


def _exported_taskset(module: ModuleType) -> type | None:
    """The ``Taskset`` subclass a v1 package exports in ``__all__``, if any."""
    if not hasattr(module, "__all__"):
        return None
    from verifiers.v1 import Harness, Taskset

    exported = [getattr(module, name, None) for name in module.__all__]
    classes = [obj for obj in exported if isinstance(obj, type)]
    if any(issubclass(c, Harness) and c is not Harness for c in classes):
        raise UserError(
            f"environment '{module.__name__}' brings its own harness (an agent program that runs "
            "the tasks); vftui runs plain chat and tool tasks in-process: run it with verifiers' eval"
        )
    return next((c for c in classes if issubclass(c, Taskset) and c is not Taskset), None)


def load_error(env_id: str, env_args: dict[str, Any], error: Exception) -> BaseException:
    """What a failed load raises: the stop that interrupted it, where a library wrapped that stop in an error
    of its own (a stop while an environment loads is exit 130, not "did not load: KeyboardInterrupt"), else
    the sentence of ``load_failure``."""
    if any(isinstance(link, KeyboardInterrupt) for link in _chain(error)):
        return KeyboardInterrupt()
    return UserError(load_failure(env_id, env_args, error))


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
        if package in (
            "verifiers",
            "atroposlib",
        ):  # installed, so a part of another version is missing
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

    network = (
        ConnectionError,
        TimeoutError,
        requests.ConnectionError,
        requests.Timeout,
        httpx.TransportError,
    )
    return isinstance(error, (*network, LocalEntryNotFoundError))


def _describe(error: BaseException) -> str:
    """The error's first line, with its type where the message alone would be unclear (KeyError: 'x')."""
    text = (str(error).strip().splitlines() or [""])[0]
    if isinstance(error, PLAIN_ERRORS) and text:
        return text
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
