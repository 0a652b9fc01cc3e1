"""Every bench runs in its quick form and prints its table, so a renamed module breaks CI rather than the
figures the README quotes. What the figures are is the benches' business (run them in full), not a test's."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO, cli_env

pytestmark = pytest.mark.needs("tmux")

RUNS = {  # each bench's quick form (throughput's sections one by one, so they can run side by side)
    **{
        f"throughput.py --sections {section}": tables
        for section, tables in {
            "cpu": [r"## no added latency", r"vftui run --no-ui\s+[\d.]+\s+[\d.]+"],
            "latency": [r"## with latency", r"0.2s\s+1\s+[\d.]+\s+[\d.]+ \([\d.]+x\)"],
            "rate": [r"## rate-limited endpoint: .*\nanswered [\d.]+ requests/s"],
            "memory": [r"peak RSS of vftui run --no-ui: \d+ MB"],
            "v1": [
                r"vftui run --no-ui\s+[\d.]+ groups/s; verifiers' own v1 eval [\d.]+ groups/s",
                r"at 1 s a request, --concurrency 64: [\d.]+ groups/s",
            ],
            "eval": [
                r"vftui run --mode eval\s+[\d.]+ examples/s; vf-eval [\d.]+ examples/s",
                r"at 1 s a request: [\d.]+ examples/s = [\d.]+ x the limit",
            ],
            "end": [r"last group written to exit: [\d.]+ s"],
            "rl": [r"vftui run --mode rl\s+[\d.]+\s+[\d.]+"],
        }.items()
    },
    "env_server.py": [
        r"## alphabet-sort \(single turn\): 1 groups x 2, 1 workers(.*\n){2}in-process\s+[\d.]+\s+1.000",
        r"warm pool at an address\s+[\d.]+\s+[\d.]+\s+[\d.]+\n*$",
    ],
    "first_frame.py": [
        r"median of 1 starts: first frame [\d.]+ s, running [\d.]+ s, first group [\d.]+ s",
        r"imports, each alone .*AutoTokenizer [\d.]+ s",
        r"first group [\d.]+ s = import floor of what sft needs [\d.]+ s .* \+ vftui's own share "
        r"-?[\d.]+ s",
    ],
    "chart_widgets.py": [
        r"textual-plotext [\d.]+, plotext [\d.]+, textual-plot [\d.]+",
        r"textual-plotext\s+80x24: redraw\s+[\d.]+ ms, six mounted\s+\d+ ms, "
        r"axis labels on screen: .*tick labels",
        r"textual-plot\s+80x24: redraw\s+[\d.]+ ms, .*axis labels on screen: group, reward",
        r"textual-plot\s+160x48: redraw\s+[\d.]+ ms",
    ],
    "key_latency_tmux.py": [r"key-to-screen in tmux over 3 presses: p50 [\d.]+ ms"],
    "terminal_bytes.py": [r"80x24: [\d.]+ KB/s collecting, [\d.]+ KB/s paused"],
    "ui_latency.py": [
        r"key-to-repaint latency over 5 presses: p50 [\d.]+ ms",
        r"RSS before [\d.]+ MB",
    ],
    "training_follow.py": [
        r"first frame with figures: [\d.]+ s; a new step on screen [\d.]+ s after it was written",
        r"heap held: [\d.]+ MB after [\d,]+ steps, [\d.]+ MB after [\d,]+ \([\d.]+x\); following: "
        r"[\d.]+ MB after [\d,]+ more steps, [\d.]+ MB after [\d,]+ \([\d.]+x\)",
        r"read_step: [\d.]+ s \([\d.]+x the quarter's\); heap peak [\d.]+ MB \([\d.]+x\)",
    ],
    "export.py": [
        r"## prime-rl parquet.*\n.*quarter: [\d.]+ MB.*peak RSS \d+ MB\n.*whole: .*\n"
        r"peak RSS whole/quarter: [\d.]+x",
        r"## atropos jsonl",
    ],
    "view_big_file.py": [r"vftui view of 2,000 groups", r"End to the last group on screen: \d+ ms"],
    "paired_stats.py": [
        r"## McNemar's exact p.*\n.*\n\s+2,000\s+[\d.]+\s+[\d.]+\s+\d+x\s+[\d.]+",
        r"\s+10,000\s+levels\s+[\d.]+\s+[\d.]+\s+[\d.]+x",
        r"\s+10,000\s+skewed\s+[\d.]+\s+[\d.]+\s+[\d.]+x",
    ],
}


def test_every_bench_is_checked():
    benches = [
        p.name for p in (REPO / "bench").glob("*.py") if not p.name.startswith("_")
    ]  # _pane: shared
    assert sorted(benches) == sorted({run.split()[0] for run in RUNS})


@pytest.mark.parametrize("run", sorted(RUNS))
def test_the_bench_runs_and_prints_its_table(run, tmp_path):
    bench, *options = run.split()
    env = {
        **cli_env(tmp_path),
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / bench), "--quick", *options],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"^machine: \d+ cores, load [\d.]+ .*verifiers [\d.]+", done.stdout, re.M), (
        done.stdout[:500]
    )
    for table in RUNS[run]:
        assert re.search(table, done.stdout), f"{table!r} not in:\n{done.stdout}"
