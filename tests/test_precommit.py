"""The pre-commit hooks (.pre-commit-config.yaml) check a commit with the tools and versions the test extra pins
in pyproject.toml, so a hook and the suite (tests/test_lint.py, tests/test_types.py) can never judge the same code
differently: a rev bumped on one side only fails here."""

from __future__ import annotations

import re
import tomllib
from typing import Any

import pytest
import yaml

from tests.conftest import REPO

pytestmark = pytest.mark.unit

RUFF_HOOKS = "https://github.com/astral-sh/ruff-pre-commit"
MIRRORED = {RUFF_HOOKS: "ruff", "https://github.com/pre-commit/mirrors-mypy": "mypy"}
"""Hook repositories whose tags are a tool's own version (``v`` and the version), and that tool."""
PIN = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*==\s*([^\s;]+)")


def pins() -> dict[str, str]:
    """Each package the test extra pins exactly (``name==version``), by its lower-case name."""
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    found = (PIN.match(requirement) for requirement in extra["test"])
    return {m[1].lower(): m[2] for m in found if m}


def repos() -> list[dict[str, Any]]:
    return yaml.safe_load((REPO / ".pre-commit-config.yaml").read_text())["repos"]


def hook_ids() -> set[str]:
    return {hook["id"] for repo in repos() for hook in repo["hooks"]}


def stated_versions(repo: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(tool, version, where) for each version the config states: a mirror's rev, and each
    ``name==version`` its hooks install beside them."""
    stated = []
    if repo["repo"] in MIRRORED:
        stated.append((MIRRORED[repo["repo"]], repo["rev"].removeprefix("v"), repo["repo"]))
    for hook in repo["hooks"]:
        for dependency in hook.get("additional_dependencies", []):
            if m := PIN.match(dependency):
                stated.append((m[1].lower(), m[2], f"hook {hook['id']}"))
    return stated


def test_the_hooks_are_ruff_check_ruff_format_and_mypy():
    assert {"ruff-check", "ruff-format", "mypy"} <= hook_ids()


def drift(config: list[dict[str, Any]], pinned: dict[str, str]) -> list[str]:
    """Each version ``config`` states that is not the one ``pinned``, said."""
    found = []
    for tool, version, where in (stated for repo in config for stated in stated_versions(repo)):
        if tool not in pinned:
            found.append(
                f"{where} installs {tool} {version}, which pyproject's test extra does not pin"
            )
        elif version != pinned[tool]:
            found.append(
                f"{where} runs {tool} {version}; pyproject's test extra pins {tool}=={pinned[tool]}: "
                "bump both together"
            )
    return found


def test_every_version_a_hook_states_is_the_one_pyproject_pins():
    assert any(tool == "ruff" for repo in repos() for tool, _, _ in stated_versions(repo)), (
        "the ruff hooks state their version"
    )
    assert drift(repos(), pins()) == []


def test_a_rev_bumped_on_one_side_only_is_found():
    drifted = [{"repo": RUFF_HOOKS, "rev": "v0.0.1", "hooks": [{"id": "ruff-check"}]}]
    assert drift(drifted, {"ruff": "0.17.6"}) == [
        f"{RUFF_HOOKS} runs ruff 0.0.1; pyproject's test extra pins ruff==0.17.6: bump both together"
    ]
    unpinned = [
        {"repo": "local", "hooks": [{"id": "x", "additional_dependencies": ["black==1.0"]}]}
    ]
    assert drift(unpinned, {}) == [
        "hook x installs black 1.0, which pyproject's test extra does not pin"
    ]


def test_a_hook_of_the_environment_runs_a_tool_the_test_extra_pins_under_pyprojects_settings():
    """A local hook (``language: system``) has no version of its own: it runs what ``pip install -e
    '.[test]'`` installed, so its tool must be one the extra pins, and it must take its settings from
    pyproject.toml (no file list or flags of its own that the suite's run would not have)."""
    pinned = pins()
    local = [hook for repo in repos() if repo["repo"] == "local" for hook in repo["hooks"]]
    assert local, "mypy runs as a local hook"
    for hook in local:
        assert hook["language"] == "system", hook
        assert hook.get("pass_filenames") is False, f"{hook['id']} checks what [tool.mypy] names"
        tool = hook["entry"].removeprefix("python -m ").split()[0]
        assert hook["entry"] in (tool, f"python -m {tool}"), f"{hook['id']}: no flags of its own"
        assert tool in pinned, (
            f"{hook['id']} runs {tool}, which pyproject's test extra does not pin"
        )
