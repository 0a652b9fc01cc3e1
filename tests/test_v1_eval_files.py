"""verifiers' v1 eval output: ``vftui view``/``compare`` read its run folders with the figures verifiers' own
``Trace`` gives, refuse an unknown format in one sentence, and ``vftui run --mode eval`` writes a
``traces.jsonl`` verifiers' own loaders read.

``tests/data/v1_eval/<run>/`` was written by verifiers 0.3.1's own ``eval`` (``verifiers_reference``'s
command, 3 tasks x 2 rollouts of the tools taskset against the simulated endpoint; its logs left out and
its endpoint's port set to 8000); the serial test below reads a fresh one, made the same way
(``verifiers_own_eval``, the run test_v1's comparison holds vftui's rewards against).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from verifiers.v1.cli.eval.resume import load as resume_load
from verifiers.v1.configs.agent import WireAgentConfig
from verifiers.v1.state import State
from verifiers.v1.task import WireTaskData, task_key
from verifiers.v1.trace import Trace

from tests.conftest import REPO, run_cli
from tests.test_readers_fuzz import mutated
from tests.verifiers_reference import verifiers_version
from vftui.errors import UserError
from vftui.events import EvalReport, GroupCollected, Mode, RunStarted
from vftui.run_files import results, v1_traces
from vftui.run_files.groupfile import GroupFile
from vftui.sim import TOKENIZER_DIR

try:  # verifiers 0.4 moved them out of cli.output
    from verifiers.v1.utils.trace_store import read_episodes
except ImportError:
    from verifiers.v1.cli.output import read_episodes
try:
    from verifiers.v1.cli.output import saved_config_path
except ImportError:
    saved_config_path = None

FIXTURE = REPO / "tests" / "data" / "v1_eval"
RUN = next(FIXTURE.iterdir())
WIRE = Trace[WireTaskData, State, WireAgentConfig]
FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def loadable(tmp_path: Path) -> Path:
    """The fixture's run folder as the installed verifiers loads it: 0.4's ``Trace`` refuses 0.3.1's records
    for two agent-config keys it dropped (``retries.include``/``exclude``), so 0.4 gets a copy without them."""
    if verifiers_version() < (0, 4):
        return RUN
    copy = tmp_path / RUN.name
    copy.mkdir()
    rows = [json.loads(line) for line in (RUN / "traces.jsonl").read_text().splitlines()]
    for row in rows:
        for trace in row["traces"]:
            for key in ("include", "exclude"):
                trace["agent"]["config"]["retries"].pop(key, None)
    (copy / "traces.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return copy


def theirs(folder: Path) -> dict[str, list[tuple]]:
    """Each task's rollouts as verifiers' own ``Trace`` objects give their figures (errors left out)."""
    figures: dict[str, list[tuple]] = {}
    for episode in read_episodes(folder, WIRE):
        for t in episode.traces:
            if not t.ok:
                continue
            usage = t.usage
            scores = {k: r.score for k, r in t.rewards.items() if r is not None}
            figures.setdefault(str(episode.task.data.idx), []).append(
                (
                    round(t.reward, 9),
                    {**scores, **{k: v for k, v in t.metrics.items() if v is not None}},
                    t.num_turns,
                    sum(len(m.tool_calls or []) for m in t.assistant_messages),
                    usage.prompt_tokens + (usage.cached_input_tokens or 0) if usage else None,
                    usage.completion_tokens if usage else None,
                    t.is_truncated,
                    [m.role for m in t.messages],
                )
            )
    return figures


def ours(traces: Path) -> dict[str, list[tuple]]:
    figures: dict[str, list[tuple]] = {}
    for r in v1_traces.read(traces).rollouts:
        figures.setdefault(r.key, []).append(
            (
                round(r.reward, 9),
                r.functions,
                r.turns,
                r.tool_calls,
                r.input_tokens,
                r.output_tokens,
                r.truncated,
                [m["role"] for m in r.messages],
            )
        )
    return figures


@pytest.mark.unit
def test_a_v1_run_folders_figures_are_those_of_verifiers_own_traces(tmp_path):
    run = loadable(tmp_path)
    expected = theirs(run)
    assert ours(run / "traces.jsonl") == expected
    assert sum(len(v) for v in expected.values()) == 6
    assert any(row[3] for rows in expected.values() for row in rows), "the tools were called"
    source = results.load(FIXTURE)  # the folder above the run's: its one run
    assert source.kind == "verifiers v1" and source.env_id == "vftui_shim_tools"
    assert {k: item.rewards for k, item in source.items.items()} == {
        k: [row[0] for row in rows] for k, rows in expected.items()
    }
    assert source.setup.model == "vftui-sim" and source.setup.versions == "verifiers 0.3.1"


@pytest.mark.unit
def test_a_failed_trace_is_an_error_counted_in_view_and_compare_never_a_zero(tmp_path, monkeypatch):
    monkeypatch.setenv(
        "XDG_CACHE_HOME", str(tmp_path / "cache")
    )  # the view's groups form is kept there
    run = tmp_path / "run"
    run.mkdir()
    lines = (loadable(tmp_path) / "traces.jsonl").read_text().splitlines()
    episode = json.loads(lines[0])
    trace = WIRE.model_validate(episode["traces"][0])
    trace.record_error(RuntimeError("the tool server went away"))  # verifiers' own failure record
    trace.rewards = {name: None for name in trace.rewards}
    episode["traces"], episode["ok"] = [trace.to_record()], False
    (run / "traces.jsonl").write_text("\n".join([json.dumps(episode), *lines[1:]]) + "\n")
    source = results.load(run)
    assert source.errors == 1
    key = str(episode["task"]["data"]["idx"])
    assert len(source.items[key].rewards) == sum(key_of(line) == key for line in lines) - 1
    events: list = []
    summary = GroupFile(results.viewable(run), "file").read(events.append, str(TOKENIZER_DIR))
    assert summary.groups_done == 3  # the failed rollout's task still shows its other rollout
    assert summary.dropped == {"RuntimeError: the tool server went away (1 rollout failed)": 1}
    started = next(e for e in events if isinstance(e, RunStarted))
    assert started.mode is Mode.EVAL and started.env == "vftui_shim_tools"
    report = [e for e in events if isinstance(e, EvalReport)][-1]
    assert report.items == 3 and sum(isinstance(e, GroupCollected) for e in events) == 0


UNKNOWN_FORMATS = pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda e: e["traces"][0].update(version=2), "version 2"),
        (lambda e: e.pop("traces"), "'task' and 'traces'"),
    ],
    ids=["newer-version", "missing-keys"],
)
"""An episode made newer than this vftui knows, or missing what every version has, and what is said."""


def key_of(line: str) -> str:
    return str(json.loads(line)["task"]["data"]["idx"])


@UNKNOWN_FORMATS
def test_an_unknown_or_newer_format_is_one_sentence_and_exit_2(tmp_path, change, said):
    episode = json.loads((RUN / "traces.jsonl").read_text().splitlines()[0])
    change(episode)
    (tmp_path / "traces.jsonl").write_text(json.dumps(episode) + "\n")
    with pytest.raises(UserError, match=said):
        results.load(tmp_path)
    done = run_cli(["compare", str(tmp_path), str(RUN)], tmp_path)
    assert done.returncode == 2 and said.split()[-1] in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


@FUZZ
@given(data=st.data())
def test_the_v1_reader_fed_random_and_mutated_bytes_reads_or_says_one_sentence(tmp_path, data):
    original = (RUN / "traces.jsonl").read_bytes()
    path = tmp_path / "traces.jsonl"
    path.write_bytes(data.draw(st.one_of(st.binary(max_size=300), mutated(original))))
    try:
        source = results.load(path)
        groups = list(v1_traces.as_groups(v1_traces.read(path)))
    except UserError as e:
        assert "\n" not in str(e)
        return
    json.dumps(groups, allow_nan=False)  # the view's groups are plain JSON
    assert all(len(item.rewards) == len(item.truncated) for item in source.items.values())


def test_view_and_compare_open_a_v1_run_folder(tmp_path):
    done = run_cli(["compare", "--json", str(FIXTURE), str(RUN / "traces.jsonl")], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "verifiers v1" in done.stdout or "vftui_shim_tools" in done.stdout


def test_an_eval_writes_v1_traces_that_verifiers_own_loaders_read(tmp_path):
    out = tmp_path / "ev.jsonl"
    done = run_cli(
        [
            "run",
            "--mode",
            "eval",
            "--no-ui",
            "--env",
            "vftui/alphabet-tools",
            "--num-examples",
            "3",
            "--rollouts-per-example",
            "2",
            "--out",
            str(out),
        ],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    folder = out.with_suffix(".eval")
    episodes = read_episodes(folder, WIRE)  # replay's reader
    assert len(episodes) == 6 and all(e.ok and e.traces[0].ok for e in episodes)
    raw = [json.loads(line) for line in (folder / "traces.jsonl").read_text().splitlines()]
    assert resumed(folder, raw, 2) == (6, 0), "eval --resume keeps every rollout and owes none"
    if saved_config_path is not None:
        assert saved_config_path(folder) == folder / "configs" / "resolved" / "eval.json"
    # the figures verifiers' Traces give are vftui's own reader's, and those of the run's groups
    assert ours(folder / "traces.jsonl") == theirs(folder)
    own = results.load(out)
    v1 = results.load(folder / "traces.jsonl")
    assert {k: sorted(i.rewards) for k, i in own.items.items()} == {
        k: sorted(i.rewards) for k, i in v1.items.items()
    }
    for key, item in own.items.items():
        for name, values in item.functions.items():
            assert sorted(v1.items[key].functions[name]) == sorted(values)
    groups = {g["vftui"]["item"]: g for g in map(json.loads, out.read_text().splitlines())}
    for row in raw:
        group = groups[row["task"]["data"]["idx"]]
        assert WIRE.model_validate(row["traces"][0]).num_turns in group["vftui"]["turns"]


def resumed(folder: Path, raw: list[dict], rollouts: int) -> tuple[int, int]:
    """The rollouts verifiers' ``eval --resume`` keeps of ``folder`` and those it owes, its tasks those the
    file holds (0.3.1 selects them by the key of their data, 0.4 by their ``Task``)."""
    if verifiers_version() >= (0, 4):
        from verifiers.v1.task import Task

        tasks = {}
        for episode in read_episodes(folder, WIRE):
            task = Task(episode.task.data)
            tasks.setdefault(task.hash, task)
        plan = resume_load(folder, list(tasks.values()), rollouts)
        return sum(len(kept) for _, kept, _ in plan), sum(owed for _, _, owed in plan)
    keys = list(dict.fromkeys(task_key(row["task"]["data"]) for row in raw))
    kept, owed = resume_load(folder, keys, rollouts)
    return len(kept), sum(owed.values())


@pytest.mark.serial
@pytest.mark.needs("uv")
def test_a_run_folder_fresh_from_verifiers_own_eval_reads_as_its_traces(verifiers_own_eval):
    out = verifiers_own_eval("vftui_shim_tools", {})
    run = out / "ref"
    assert ours(run / "traces.jsonl") == theirs(run)
    assert results.load(out).kind == "verifiers v1"
