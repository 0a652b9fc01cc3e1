"""verifiers' own v1 eval, the reference the v1 tests and the v1 bench hold vftui against, with everything
it resolves from the package registry while it runs held to one date.

verifiers' v1 eval prepares each harness (a PEP 723 script whose dependencies are unpinned: openai, mcp,
httpx, tenacity) with ``uv sync --script``, so what it installs depends on the day it runs: a release of
openai that needs another httpx broke every harness process between two runs of the same suite. uv takes
no file uploaded after ``REGISTRY_DATE``, so the same resolution comes back on any machine and in any month;
``tests/test_verifiers_04.py`` builds its verifiers 0.4 environment under the same date. Move the date
forward on purpose: the next run starts from an empty cache of the new date's own.
"""

from __future__ import annotations

import json
import os
import sys
from importlib.metadata import version
from pathlib import Path

from vftui.collector.envs.env_server import HARNESS_REGISTRY_DATE, harness_pins

REGISTRY_DATE = HARNESS_REGISTRY_DATE  # the date --env-server holds verifiers' harness to, as here
BIN = Path(sys.executable).parent
SHIMS = {  # verifiers' eval imports a taskset by a top-level name: these re-export the built-ins under one
    "vftui_shim_sort": "from vftui.sim.envs.alphabet_sort import AlphabetSortEnv, AlphabetSortTaskset\n"
    "__all__ = ['AlphabetSortEnv', 'AlphabetSortTaskset']\n",
    "vftui_shim_tools": "from vftui.sim.envs.alphabet_tools import AlphabetToolsTaskset\n"
    "__all__ = ['AlphabetToolsTaskset']\n",
}


def pinned(env: dict[str, str]) -> dict[str, str]:
    """``env`` with uv held to the registry as it was on ``REGISTRY_DATE``, in a cache of that date's own (uv
    keeps a script's environment resolved on another day, broken or not, whatever the date says now), using
    this machine's Pythons (no interpreter downloads) and this environment's uv first on ``PATH``."""
    return {
        **env,
        **harness_pins(env),
        "UV_PYTHON_DOWNLOADS": "never",
        "PATH": os.pathsep.join([str(BIN), env.get("PATH", os.environ["PATH"])]),
    }


def verifiers_version() -> tuple[int, int]:
    major, minor = version("verifiers").split(".")[:2]
    return int(major), int(minor)


def eval_command(
    taskset: str,
    base_url: str,
    model: str,
    key_var: str,
    out: Path,
    tasks: int,
    rollouts: int,
    concurrency: int,
    taskset_args: dict,
) -> list[str]:
    """verifiers' v1 eval of ``taskset`` (a top-level module name) with its plain chat harness and local
    runtime, writing ``out/ref/traces.jsonl``."""
    script = (
        "vf-eval" if verifiers_version() >= (0, 4) else "eval"
    )  # 0.4 renamed it; 0.3's vf-eval is classic
    args = [
        str(BIN / script),
        taskset,
        "--env.agent.harness.id",
        "null",
        "--env.agent.runtime.type",
        "subprocess",
        "--client.base-url",
        base_url,
        "--client.api-key-var",
        key_var,
        "--model",
        model,
        "--sampling.temperature",
        "1.0",
        "-n",
        str(tasks),
        "-r",
        str(rollouts),
        "-c",
        str(concurrency),
        "--no-push",
        "--no-rich",
        "-o",
        str(out),
        "--run.name",
        "ref",
    ]
    if script == "eval":
        args.append("--no-serve")  # in-process, as 0.4 always runs
    for key, value in taskset_args.items():
        args += [f"--env.taskset.{key.replace('_', '-')}", str(value)]
    return args


def episodes(out: Path) -> list[dict]:
    """What ``eval_command`` wrote: one episode a task, each with its traces."""
    return [json.loads(line) for line in (out / "ref" / "traces.jsonl").read_text().splitlines()]
