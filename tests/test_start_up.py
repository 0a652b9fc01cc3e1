"""A run's start imports only what its mode needs: sft's path, prepared for real in a fresh interpreter,
never loads rl's or eval's modules nor verifiers' own tasksets (whose package imports nemo_gym and mcp,
up to a second of a start). How long a start takes is measured in bench/first_frame.py."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO, cli_env

NOT_FOR_SFT = (
    "verifiers.v1.tasksets",  # verifiers' v1 loader looks a built-in up there first
    "vftui.collector.rl.collection",
    "vftui.collector.rl.slurm",  # atroposlib's server manager and unittest.mock
    "vftui.collector.eval.collection",
)

PREPARED = textwrap.dedent("""
    import json, sys
    from vftui.collector.run import prepare
    from vftui.config import RunConfig

    prepare(RunConfig(env=sys.argv[1], steps=1, out=sys.argv[2]), lambda event: None).close()
    print(json.dumps(sorted(name for name in json.loads(sys.argv[3]) if name in sys.modules)))
""")


@pytest.mark.parametrize("env", ["vftui/alphabet-sort", "vftui/alphabet-tools"])
def test_an_sft_run_prepared_on_a_built_in_imports_nothing_of_other_modes_or_verifiers_tasksets(
    tmp_path: Path, env: str
) -> None:
    out = tmp_path / "groups.jsonl"
    done = in_a_fresh_interpreter(tmp_path, PREPARED, env, str(out), json.dumps(NOT_FOR_SFT))
    assert json.loads(done.stdout.splitlines()[-1]) == []


def in_a_fresh_interpreter(tmp_path: Path, code: str, *args: str) -> subprocess.CompletedProcess:
    """``code`` run by a Python started afresh, as a run's process is: what it imports is what a start pays."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def test_the_dashboard_starts_its_collector_before_it_imports_the_app() -> None:
    """The app's widgets and screens load while the child loads the collector's libraries, not before."""
    code = "import sys, vftui.commands.dashboard; print('vftui.ui.app' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"


THROUGH_ITS_LIFE = textwrap.dedent("""
    import contextlib, gc, json, sys
    from vftui.collector.lifecycle import run_to_end
    from vftui.config import RunConfig
    from vftui.errors import UserError

    seen = {}

    class Host:
        def prepared(self, run):
            seen.update(enabled=gc.isenabled(), frozen=gc.get_freeze_count())

        def while_running(self, run):
            return contextlib.nullcontext()

        def say(self, line):
            pass

    run_to_end(RunConfig(steps=1, out=sys.argv[1]), lambda event: None, Host())
    try:
        run_to_end(RunConfig(env="no-such-env", steps=1, out=sys.argv[2]), lambda e: None, Host())
    except UserError:
        seen["enabled after a refusal"] = gc.isenabled()
    with open(sys.argv[3], "w") as f:
        json.dump(seen, f)
""")


def test_the_collector_pauses_while_the_libraries_load_and_runs_with_them_frozen(
    tmp_path: Path,
) -> None:
    """A start no longer scans the libraries' objects each time they grow (0.4-0.6 s of it): the cyclic
    collector is paused while they load and back, without them, for the run, or after a refusal."""
    seen = tmp_path / "seen.json"
    outs = [str(tmp_path / "a" / "groups.jsonl"), str(tmp_path / "b" / "groups.jsonl")]
    in_a_fresh_interpreter(tmp_path, THROUGH_ITS_LIFE, *outs, str(seen))
    found = json.loads(seen.read_text())
    assert found["enabled"] is True and found["enabled after a refusal"] is True
    assert found["frozen"] > 100_000, "the libraries' objects are out of the run's collections"
