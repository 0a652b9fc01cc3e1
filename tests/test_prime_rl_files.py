"""prime-rl's run folders: ``vftui view``/``compare`` read the train rollouts it streams, a group per rollout
group and step, with verifiers' own figures and failures counted; ``view --follow`` shows a growing run.

The run folders here are written as prime-rl writes them at PrimeIntellect-ai/prime-rl 559b44772e47
(``src/prime_rl/monitors/file.py``: ``rollouts/step_<N>/<kind>/<subset>/traces.jsonl``, one
``Episode.to_record()`` a line, appended; ``metrics.jsonl``; ``configs/orchestrator.json``), each episode
stamped as its dispatcher's ``emit_episode`` does (``env.name``, ``GroupInfo``, ``TrainRunInfo`` with
``TrainWorkInfo``), by verifiers' own models, from the episodes verifiers' own eval wrote
(``tests/data/v1_eval``). One episode is a trace-less failure, as prime-rl's ``all`` file keeps them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from verifiers.v1.episode import GroupInfo, TrainRunInfo, TrainWorkInfo, WireEpisode
from verifiers.v1.trace import Error

from tests.conftest import run_cli, screen_lines, until
from tests.test_readers_fuzz import mutated
from tests.test_v1_eval_files import FUZZ, UNKNOWN_FORMATS, loadable, theirs
from vftui.errors import UserError
from vftui.events import Mode, RunStarted
from vftui.group_format import META
from vftui.run_files import prime_rl, results
from vftui.run_files.drops import read_drops
from vftui.run_files.files import RunFiles
from vftui.run_files.groupfile import GroupFile
from vftui.sim import TOKENIZER_DIR
from vftui.ui.app import VftuiApp
from vftui.ui.feeds import ViewedFile
from vftui.ui.inbox import Inbox

SOURCE = {"name": "tools", "group_size": 2, "env": {"taskset": {"id": "vftui_shim_tools"}}}


def episodes(tmp_path: Path) -> list[list[WireEpisode]]:
    """verifiers' eval episodes of the fixture by task, the last task's second rollout made a trace-less
    failure (an env server that went away)."""
    by_task: dict[int, list[WireEpisode]] = {}
    for line in (loadable(tmp_path) / "traces.jsonl").read_text().splitlines():
        episode = WireEpisode.model_validate_json(line)
        by_task.setdefault(episode.task.data.idx, []).append(episode)
    tasks = list(by_task.values())
    failed = tasks[-1][1]
    failed.traces, failed.ok = [], False
    failed.errors = [Error(type="EnvServerError", message="the env server went away")]
    return tasks


def stamped(episode: WireEpisode, group: int, step: int) -> str:
    """``episode`` as prime-rl's dispatcher stamps it and its file monitor writes it (orjson: compact)."""
    episode.env.name = "tools"
    episode.group = GroupInfo(id=f"group-{group}")
    episode.record_run(TrainRunInfo(id="run0", name="r", work=TrainWorkInfo(step=step)))
    return json.dumps(episode.to_record(), separators=(",", ":")) + "\n"


def stream_file(run: Path, step: int, subset: str = "all") -> Path:
    path = run / "rollouts" / f"step_{step}" / "train" / subset / "traces.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def write_run(run: Path, tmp_path: Path) -> list[list[WireEpisode]]:
    """A two-step run: the first two tasks' groups at step 0, the third's (one rollout failed) at step 1."""
    tasks = episodes(tmp_path)
    (run / "configs").mkdir(parents=True)
    (run / "configs" / "orchestrator.json").write_text(json.dumps({"train": {"source": [SOURCE]}}))
    for n, task in enumerate(tasks):
        step = 0 if n < 2 else 1
        with stream_file(run, step).open("a") as f:
            f.writelines(stamped(e, n, step) for e in task)
        if all(e.ok for e in task):
            with stream_file(run, step, "effective").open("a") as f:
                f.writelines(stamped(e, n, step) for e in task)
    with (run / "metrics.jsonl").open("w") as f:
        for step in (0, 1):
            f.write(json.dumps({"step": step, "time": 1.0, "train/agg/all/agent/reward/mean": 0.5}))
            f.write("\n")
    return tasks


@pytest.mark.unit
def test_a_prime_rl_run_reads_as_verifiers_own_figures_a_group_per_rollout_group_and_step(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    run = tmp_path / "run"
    tasks = write_run(run, tmp_path)
    expected = theirs(loadable(tmp_path))
    last = str(tasks[-1][0].task.data.idx)
    expected[last] = expected[last][:1]  # its second rollout failed
    source = results.load(run)
    assert source.kind == "prime-rl" and source.env_id == "vftui_shim_tools"
    assert source.errors == 1 and source.setup.versions == "verifiers 0.3.1"
    assert {k: item.rewards for k, item in source.items.items()} == {
        k: [row[0] for row in rows] for k, rows in expected.items()
    }
    events: list = []
    summary = GroupFile(results.viewable(run), "file").read(events.append, str(TOKENIZER_DIR))
    started = next(e for e in events if isinstance(e, RunStarted))
    assert started.mode is Mode.RL and started.model == "vftui-sim"
    assert summary.groups_done == 3
    assert summary.dropped == {"EnvServerError: the env server went away (1 rollout failed)": 1}
    lines = [json.loads(line) for line in results.viewable(run).read_text().splitlines()]
    assert [g[META]["step"] for g in lines] == [0, 0, 1]
    assert [g[META]["turns"] for g in lines] == [[row[2] for row in expected[k]] for k in expected]
    assert any(any(g[META]["tool_calls"]) for g in lines) and all(
        None not in g[META]["input_tokens"] for g in lines
    )
    one_step = results.load(stream_file(run, 1))  # its stream file alone: that step's rollouts
    assert set(one_step.items) == {last} and one_step.errors == 1


@UNKNOWN_FORMATS
def test_an_unknown_or_newer_format_is_one_sentence_and_exit_2(tmp_path, change, said):
    tasks = episodes(tmp_path)
    episode = json.loads(stamped(tasks[0][0], 0, 0))
    change(episode)
    run = tmp_path / "run"
    stream_file(run, 0).write_text(json.dumps(episode) + "\n")
    with pytest.raises(UserError, match=said):
        results.load(run)
    done = run_cli(["compare", str(run), str(run)], tmp_path)
    assert done.returncode == 2 and said.split()[-1] in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


@FUZZ
@given(data=st.data())
def test_the_prime_rl_reader_fed_random_and_mutated_bytes_reads_or_says_one_sentence(
    tmp_path, data
):
    run = tmp_path / "fuzzed"
    path = stream_file(run, 0)
    original = "".join(stamped(e, n, 0) for n, task in enumerate(episodes(tmp_path)) for e in task)
    path.write_bytes(data.draw(st.one_of(st.binary(max_size=300), mutated(original.encode()))))
    try:
        source = results.load(run)
        reader = prime_rl.read(prime_rl.Stream(run))
    except UserError as e:
        assert "\n" not in str(e)
        return
    lines = [prime_rl.group_line(reader, g) for g in reader.groups.values() if g.rollouts]
    json.dumps(lines, allow_nan=False)  # the view's groups are plain JSON
    assert all(len(item.rewards) == len(item.truncated) for item in source.items.values())


def test_compare_opens_a_prime_rl_run_through_the_cli(tmp_path):
    run = tmp_path / "run"
    write_run(run, tmp_path)
    done = run_cli(["compare", "--json", str(run), str(stream_file(run, 0))], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "vftui_shim_tools" in done.stdout


async def test_view_follow_shows_a_growing_prime_rl_run_a_group_once_it_is_whole(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    run = tmp_path / "run"
    (run / "configs").mkdir(parents=True)
    (run / "configs" / "orchestrator.json").write_text(json.dumps({"train": {"source": [SOURCE]}}))
    tasks = episodes(tmp_path)
    first = stream_file(run, 0)
    first.write_text(stamped(tasks[0][0], 0, 0))  # half of the first group
    mirror = prime_rl.Live(prime_rl.Stream(run))
    app = VftuiApp(
        ViewedFile(Inbox(), GroupFile(mirror.path), str(TOKENIZER_DIR), follow=True, mirror=mirror)
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(1.5 * prime_rl.FOLLOW_EVERY_S)
        assert app.dashboard.table.row_count == 0, "a group shows once all its rollouts are in"
        with first.open("a") as f:
            f.write(stamped(tasks[0][1], 0, 0) + stamped(tasks[1][0], 1, 0)[:50])  # a torn line
        await until(lambda: app.dashboard.table.row_count == 1, pilot=pilot)
        with first.open("a") as f:
            f.write(stamped(tasks[1][0], 1, 0)[50:] + stamped(tasks[1][1], 1, 0))
        with stream_file(run, 1).open("a") as f:
            f.writelines(stamped(e, 2, 1) for e in tasks[2])
        await until(lambda: app.dashboard.table.row_count == 3, pilot=pilot)
        assert app.model.rows.skipped == 0
        drops, _ = read_drops(RunFiles(mirror.path))  # what the view counts as the run's errors
        assert [d.reason for d in drops] == [
            "EnvServerError: the env server went away (1 rollout failed)"
        ]
        await pilot.press("q")


@pytest.mark.unit
def test_a_followed_group_that_never_fills_shows_once_the_stream_is_two_steps_on(tmp_path):
    run = tmp_path / "run"
    (run / "configs").mkdir(parents=True)
    (run / "configs" / "orchestrator.json").write_text(json.dumps({"train": {"source": [SOURCE]}}))
    tasks = episodes(tmp_path)
    stream_file(run, 0).write_text(stamped(tasks[0][0], 0, 0))  # its other rollout was cancelled
    stream_file(run, 1).write_text(stamped(tasks[1][0], 1, 1))
    reader = prime_rl.read(prime_rl.Stream(run))
    assert not any(reader.ready(g) for g in reader.groups.values())
    stream_file(run, 2).write_text(stamped(tasks[2][0], 2, 2))
    reader.look(whole_lines=True)
    assert [reader.ready(g) for g in reader.groups.values()] == [True, False, False]


def test_view_follow_of_a_run_of_an_unknown_format_is_one_sentence_through_the_cli(tmp_path):
    tasks = episodes(tmp_path)
    episode = json.loads(stamped(tasks[0][0], 0, 0))
    episode["traces"][0]["version"] = 2
    run = tmp_path / "run"
    stream_file(run, 0).write_text(json.dumps(episode) + "\n")
    done = run_cli(["view", "--follow", str(run)], tmp_path)
    assert done.returncode == 2 and "version 2" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


async def test_an_item_over_training_its_groups_in_step_order_and_exported_with_tools(
    tmp_path, monkeypatch
):
    """The same task at steps 0, 1 and 2: ``/item=N`` in ``vftui view RUN_DIR`` shows its three
    groups in step order; ``vftui export RUN_DIR`` keeps their tool schemas."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    task = episodes(tmp_path)[0]
    run = tmp_path / "run"
    (run / "configs").mkdir(parents=True)
    (run / "configs" / "orchestrator.json").write_text(json.dumps({"train": {"source": [SOURCE]}}))
    for step in (0, 1, 2):
        with stream_file(run, step).open("a") as f:
            f.writelines(stamped(e, step, step) for e in task)
    item = task[0].task.data.idx
    app = VftuiApp(ViewedFile(Inbox(), GroupFile(results.viewable(run)), str(TOKENIZER_DIR)))
    async with app.run_test(size=(120, 36)) as pilot:
        await until(lambda: app.model.summary is not None, pilot=pilot)
        await pilot.press("slash", *f"item={item}", "enter")
        await until(lambda: app.model.filter_text == f"item={item}", pilot=pilot)
        shown = list(app.model.visible_groups())
    steps = [
        json.loads(line)[META]["step"]
        for line in results.viewable(run).read_text().splitlines()
        if json.loads(line)[META]["item"] == item
    ]
    assert len(shown) == 3 and steps == [0, 1, 2]
    out = tmp_path / "sft.parquet"
    done = run_cli(
        ["export", str(run), "-o", str(out), "--format", "prime-rl", "--where", f"item={item}"],
        tmp_path,
        XDG_CACHE_HOME=str(tmp_path / "cache"),
    )
    assert done.returncode == 0, done.stderr
    import pyarrow.parquet as pq

    rows = pq.read_table(out).to_pylist()
    assert len(rows) == 3 * len(task)
    assert all(json.loads(r["tools"]) and r["messages"][-1]["role"] == "assistant" for r in rows)


async def test_compare_overlays_training_runs_reward_by_trainer_step(tmp_path, monkeypatch):
    """Two prime-rl runs, one begun later: ``g`` in ``vftui compare`` draws each one's mean reward
    per trainer step on one step axis (the steps the files say), not over items."""
    from vftui.commands.compare import load_all
    from vftui.comparing.comparison import measure, source_series
    from vftui.ui.compare_app import CompareApp
    from vftui.ui.screens.compare_charts import CompareChartsScreen

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    task = episodes(tmp_path)[0]
    runs = []
    for name, steps in (("early", (0, 1, 2)), ("late", (2, 3))):
        run = tmp_path / name
        (run / "configs").mkdir(parents=True)
        config = {"train": {"source": [SOURCE]}}
        (run / "configs" / "orchestrator.json").write_text(json.dumps(config))
        for step in steps:
            with stream_file(run, step).open("a") as f:
                f.writelines(stamped(e, step, step) for e in task)
        runs.append(run)
    rewards = [e.traces[0].reward for e in task]
    mean = sum(rewards) / len(rewards)
    sources = load_all(runs)
    assert [source_series(s).by_step for s in sources] == [
        [(0, mean), (1, mean), (2, mean)],
        [(2, mean), (3, mean)],
    ]
    app = CompareApp(*measure(sources, 0.5))
    async with app.run_test(size=(130, 40)) as pilot:
        await pilot.press("g")
        await until(lambda: isinstance(app.screen, CompareChartsScreen), pilot=pilot)
        await pilot.pause()
        assert app.screen.by_step
        text = "\n".join(screen_lines(app))
        assert "mean reward per trainer step" in text and "step" in text
