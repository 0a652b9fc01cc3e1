"""`--shard I/N`: runs that split a dataset's items between them, each item once; SLURM arrays' defaults; a
resume that keeps its shard; `vftui view` and `vftui compare` of a folder of a run's shards as one run."""

from __future__ import annotations

import collections
import json
import re
import shutil
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import json_events, read_jsonl, run_cli, start_cli, until, wait_until
from vftui.config import load_config
from vftui.errors import UserError
from vftui.events import LogRecord
from vftui.run_files.groupfile import GroupFile
from vftui.run_files.results import load, viewable
from vftui.run_files.shard_folder import MISSING_NAMED, gaps
from vftui.run_files.shards import MAX_COUNT, Shard, from_slurm, parse
from vftui.sim.server import TOKENIZER_DIR
from vftui.ui.app import VftuiApp
from vftui.ui.feeds import ViewedFile
from vftui.ui.inbox import Inbox

SFT = ["--steps", "7", "--group-size", "2"]
EVAL = ["--mode", "eval", "--num-examples", "7", "--rollouts-per-example", "2"]
SLURM_3_OF_3 = {
    "SLURM_ARRAY_TASK_ID": "3",
    "SLURM_ARRAY_TASK_COUNT": "3",
    "SLURM_ARRAY_TASK_MIN": "1",
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """On the embedded default, 7 items each: an sft run's shards 0/2 and 1/2 (a folder each, in sft/) and the
    same run unsharded; two evals' shards (evals-a/, evals-b/ another seed), beside each other in a folder."""
    root = tmp_path_factory.mktemp("shards")
    plans = {
        "sft/s0/groups.jsonl": [*SFT, "--shard", "0/2"],
        "sft/s1/groups.jsonl": [*SFT, "--shard", "1/2"],
        "whole/groups.jsonl": SFT,
        "evals-a/e0.jsonl": [*EVAL, "--shard", "0/2"],
        "evals-a/e1.jsonl": [*EVAL, "--shard", "1/2"],
        "evals-b/e0.jsonl": [*EVAL, "--shard", "0/2", "--seed", "1"],
        "evals-b/e1.jsonl": [*EVAL, "--shard", "1/2", "--seed", "1"],
    }
    started = []
    for out, args in plans.items():
        (root / out).parent.mkdir(parents=True, exist_ok=True)
        started.append(
            start_cli(["run", "--no-ui", "--out", str(root / out), *args], root)
        )  # at once: they wait on each other
    for proc in started:
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
    return root


def items(path: Path) -> list[int]:
    return [g["vftui"]["item"] for g in read_jsonl(path)]


# -- a shard, and where a run finds its own -----------------------------------------------------------------------


@pytest.mark.unit
def test_a_shard_takes_every_nth_item_and_the_shards_together_take_each_once():
    shards = [parse(f"{i}/3") for i in range(3)]
    taken = [[s.item(p) for p in range(s.share(10))] for s in shards]
    assert taken == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    assert sorted(i for t in taken for i in t) == list(range(10))
    assert all(s.position(s.item(p)) == p and s.owns(s.item(p)) for s in shards for p in range(5))
    assert parse([1, 4]) == Shard(1, 4) and str(Shard(1, 4)) == "1/4"
    for bad, says in (
        ("4/4", "I must be 0 to 3"),
        ("-1/2", "I must be 0 to 1"),
        ("1/0", "must be 1 or more"),
        ("x", "cannot read 'x'"),
        ("1", "cannot read '1'"),
        ([1, 2, 3], "write I/N"),
    ):
        with pytest.raises(ValueError, match=says):
            parse(bad)


@pytest.mark.unit
def test_a_slurm_array_task_is_a_shard_numbered_from_the_arrays_first_task():
    assert from_slurm({}) is None and from_slurm({"SLURM_ARRAY_TASK_ID": "1"}) is None
    assert from_slurm({"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "4"})[0] == "0/4"
    assert from_slurm(SLURM_3_OF_3)[0] == "2/3", "--array=1-3: task 3 is the third"
    stepped = {
        "SLURM_ARRAY_TASK_ID": "12",
        "SLURM_ARRAY_TASK_COUNT": "4",
        "SLURM_ARRAY_TASK_MIN": "0",
        "SLURM_ARRAY_TASK_STEP": "4",
    }
    assert from_slurm(stepped)[0] == "3/4", "--array=0-12:4"
    for broken in (
        {**SLURM_3_OF_3, "SLURM_ARRAY_TASK_ID": "7"},
        {**SLURM_3_OF_3, "SLURM_ARRAY_TASK_MIN": "x"},
    ):
        with pytest.raises(UserError, match="SLURM job array"):
            from_slurm(broken)


@pytest.mark.unit
def test_the_shard_comes_from_a_flag_then_vftui_shard_then_the_slurm_array_and_never_in_rl(
    tmp_path,
):
    none = tmp_path / "none.toml"
    none.write_text("")
    assert load_config({}, none, SLURM_3_OF_3).shard == (2, 3)
    assert load_config({}, none, {**SLURM_3_OF_3, "VFTUI_SHARD": "0/5"}).shard == (0, 5)
    assert load_config({"shard": "1/2"}, none, {**SLURM_3_OF_3, "VFTUI_SHARD": "0/5"}).shard == (
        1,
        2,
    )
    assert load_config({"mode": "rl"}, none, SLURM_3_OF_3).shard is None, (
        "an rl run in an array is one run"
    )
    assert load_config({}, none, {}).shard is None
    with pytest.raises(
        UserError, match=r"invalid --shard \(from VFTUI_SHARD\): 3/3: shards are numbered from 0"
    ):
        load_config({}, none, {"VFTUI_SHARD": "3/3"})


# -- collecting -------------------------------------------------------------------------------------------------


def test_two_shards_collect_disjoint_items_that_together_are_one_runs(runs):
    first, second = items(runs / "sft/s0/groups.jsonl"), items(runs / "sft/s1/groups.jsonl")
    assert sorted(first) == [0, 2, 4, 6] and sorted(second) == [1, 3, 5], (
        "--steps counts over all the shards"
    )
    assert sorted(first + second) == sorted(items(runs / "whole/groups.jsonl")) == list(range(7))
    whole = {g["vftui"]["item"]: g for g in read_jsonl(runs / "whole/groups.jsonl")}
    for shard in ("s0", "s1"):
        for group in read_jsonl(runs / f"sft/{shard}/groups.jsonl"):
            assert group["vftui"]["shard"] == [int(shard[1]), 2]
            assert (
                group["vftui"]["example_id"] == whole[group["vftui"]["item"]]["vftui"]["example_id"]
            )
        saved = json.loads((runs / f"sft/{shard}/groups.run.json").read_text())
        assert saved["config"]["shard"] == [int(shard[1]), 2]
    assert "shard" not in read_jsonl(runs / "whole/groups.jsonl")[0]["vftui"], (
        "an unsharded run's lines as before"
    )
    assert [len(read_jsonl(runs / f"evals-a/e{i}.jsonl")) for i in (0, 1)] == [4, 3]
    listed = {
        Path(r["path"]).parent.name: r
        for r in json_events(run_cli(["runs", "--json"], runs).stdout)
    }
    assert [
        (listed[s]["state"], listed[s]["groups_done"], listed[s]["groups_total"])
        for s in ("s0", "s1")
    ] == [("finished", 4, 4), ("finished", 3, 3)], "vftui runs counts a shard's own share"


def test_a_resume_keeps_its_shard_and_goes_on_with_its_share(runs, tmp_path):
    shutil.copytree(runs / "sft/s1", tmp_path / "s1")
    out = tmp_path / "s1/groups.jsonl"
    more = run_cli(["run", "--no-ui", "--json", "--steps", "11", "--resume", str(out)], tmp_path)
    assert more.returncode == 0, more.stderr
    assert sorted(items(out)[3:]) == [7, 9] and json_events(more.stdout)[-1]["groups_total"] == 5
    before = out.read_bytes()
    other = run_cli(
        ["run", "--no-ui", "--steps", "11", "--resume", str(out), "--shard", "0/2"], tmp_path
    )
    assert other.returncode == 2 and "Traceback" not in other.stderr
    assert (
        "--resume: the run was collected with --shard 1/2, and its lines mean that; drop --shard 0/2"
        in other.stderr
    ), other.stderr
    assert out.read_bytes() == before, "nothing appended"
    unsharded = tmp_path / "whole"
    shutil.copytree(runs / "whole", unsharded)
    now_sharded = run_cli(
        ["run", "--no-ui", "--resume", str(unsharded), "--shard", "0/2"], tmp_path
    )
    assert now_sharded.returncode == 2 and "collected with --shard (none)" in now_sharded.stderr


def test_a_slurm_array_task_collects_its_shard(tmp_path):
    out = tmp_path / "task.jsonl"
    done = run_cli(
        ["run", "--no-ui", "--steps", "6", "--group-size", "2", "--out", str(out)],
        tmp_path,
        **SLURM_3_OF_3,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(items(out)) == [2, 5] and {
        tuple(g["vftui"]["shard"]) for g in read_jsonl(out)
    } == {(2, 3)}


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (
            ["--shard", "2/2"],
            {},
            "invalid --shard: 2/2: shards are numbered from 0, so I must be 0 to 1",
        ),
        (
            ["--shard", "1/0"],
            {},
            "invalid --shard: 1/0: N, the number of shards, must be 1 or more",
        ),
        (["--shard", "half"], {}, "invalid --shard: cannot read 'half': write I/N"),
        (
            ["--mode", "rl", "--shard", "0/2"],
            {},
            "--shard splits an sft or eval run's items between runs; rl mode",
        ),
        (
            [],
            {**SLURM_3_OF_3, "SLURM_ARRAY_TASK_ID": "9"},
            "cannot tell this task's shard from the SLURM job array",
        ),
        (
            ["--steps", "2", "--shard", "3/4"],
            {},
            "--shard 3/4 takes none of the 2 groups of --steps",
        ),
    ],
)
def test_a_shard_that_cannot_be_is_refused_in_one_sentence(tmp_path, args, env, says):
    done = run_cli(["run", "--no-ui", "--out", str(tmp_path / "x.jsonl"), *args], tmp_path, **env)
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr, (
        done.stderr
    )
    assert not (tmp_path / "x.jsonl").exists()


# -- a folder of shards, viewed and compared as one run ---------------------------------------------------------


def read_view(folder: Path) -> tuple[GroupFile, list]:
    events: list = []
    rows = GroupFile(viewable(folder), "item")
    rows.read(events.append, str(TOKENIZER_DIR))
    return rows, events


def test_view_reads_a_folder_of_shards_as_one_run(runs):
    rows, events = read_view(runs / "sft")
    assert [row.item for row in rows] == list(range(7)) and not rows.warnings and not rows.skipped
    whole = {
        g["vftui"]["item"]: g["vftui"]["example_id"]
        for g in read_jsonl(runs / "whole/groups.jsonl")
    }
    assert all(rows.group(row).example_id == whole[row.item] for row in rows), (
        "each group read from its shard"
    )
    flat, _ = read_view(runs / "evals-a")  # shards beside each other
    assert sorted(row.item for row in flat) == list(range(7))
    assert events[-1].groups_done == 7 and events[-1].out_path == str(runs / "sft")


async def test_the_view_app_shows_a_folder_of_shards_and_each_groups_own_rollouts(runs):
    app = VftuiApp(ViewedFile(Inbox(), GroupFile(viewable(runs / "evals-a")), str(TOKENIZER_DIR)))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(
            lambda: (
                app.model.summary is not None
                and app.model.eval_report is not None
                and app.model.eval_report.final
            ),
            pilot=pilot,
        )
        assert app.model.groups_done == 7 and app.model.eval_report.items == 7
        await pilot.press("end")
        await until(
            lambda: (
                app.dashboard.selected_group() is not None
                and app.dashboard.selected_group().index == 7
            ),
            pilot=pilot,
        )
        last = read_jsonl(runs / "evals-a/e1.jsonl")[-1]
        assert app.dashboard.selected_group().item == last["vftui"]["item"], (
            "the last row is the second shard's last line"
        )
        await pilot.press("q")


def test_compare_of_two_folders_of_shards_pairs_every_item(runs, tmp_path):
    done = run_cli(["compare", str(runs / "evals-a"), str(runs / "evals-b"), "--json"], tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    shards = [len(read_jsonl(runs / f"evals-a/e{i}.jsonl")) for i in (0, 1)]
    assert [s["items"] for s in report["sources"]] == [sum(shards)] * 2 == [7, 7]
    assert [s["kind"] for s in report["sources"]] == ["shards", "shards"]
    assert report["changes"][0]["paired"] == 7 and not any(s["warnings"] for s in report["sources"])


def test_a_shard_there_twice_is_refused_naming_an_item_both_hold(runs, tmp_path):
    folder = tmp_path / "twice"
    shutil.copytree(runs / "sft", folder)
    shutil.copytree(runs / "sft/s0", folder / "s0-again")
    done = run_cli(["compare", str(runs / "whole"), str(folder), "--no-ui"], tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert (
        "shard 0/2 is there twice, in s0/groups.jsonl and s0-again/groups.jsonl, which overlap (both hold item"
        in done.stderr
    ), done.stderr
    with pytest.raises(UserError, match="shard 0/2 is there twice"):
        viewable(folder)


def test_a_line_of_another_shards_item_is_an_overlap(runs, tmp_path):
    folder = tmp_path / "edited"
    shutil.copytree(runs / "sft", folder)
    lines = (folder / "s1/groups.jsonl").read_text().splitlines()
    group = json.loads(lines[0])
    group["vftui"]["item"] = 4
    (folder / "s1/groups.jsonl").write_text("\n".join([json.dumps(group), *lines[1:]]) + "\n")
    done = run_cli(["compare", str(runs / "whole"), str(folder), "--no-ui"], tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert (
        "s1/groups.jsonl (shard 1/2) holds item 4, which is shard 0/2's: the shards overlap"
        in done.stderr
    )
    rows, events = read_view(folder)  # the view is open by then: the line is reported and skipped
    assert rows.skipped == 1 and len(rows) == 6
    assert any(
        isinstance(e, LogRecord) and "holds item 4, which is shard 0/2's" in e.message
        for e in events
    )


def test_a_missing_shard_and_a_shard_stopped_early_are_warnings(runs, tmp_path):
    folder = tmp_path / "partial"
    shutil.copytree(runs / "sft", folder)
    shutil.move(folder / "s1", tmp_path / "s1")
    done = run_cli(["compare", str(runs / "whole"), str(folder), "--json"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sources"][1]["warnings"] == ["shard 1/2 missing"]
    assert f"vftui: warning: {folder}: shard 1/2 missing" in done.stderr
    rows, events = read_view(folder)
    assert rows.warnings == ["shard 1/2 missing"] and len(rows) == 4
    assert any(isinstance(e, LogRecord) and e.message == "shard 1/2 missing" for e in events)

    shutil.move(tmp_path / "s1", folder / "s1")
    lines = (folder / "s1/groups.jsonl").read_text().splitlines()
    first = next(line for line in lines if json.loads(line)["vftui"]["item"] == 1)
    (folder / "s1/groups.jsonl").write_text(first + "\n")  # stopped after its first item
    rows, _ = read_view(folder)
    assert rows.warnings == [
        "shard 1/2 holds 1 of its 3 items up to item 6 (2 missing: stopped early, or groups "
        "dropped)"
    ]
    report = json.loads(
        run_cli(["compare", str(runs / "whole"), str(folder), "--json"], tmp_path).stdout
    )
    assert report["sources"][1]["items"] == 5 and report["sources"][1]["warnings"] == rows.warnings


def described(folder: Path, name: str, **config) -> None:
    """A run's files as far as finding shards goes: its settings and an empty jsonl."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.run.json").write_text(
        json.dumps({"config": {"env": "e", "mode": "eval", **config}})
    )
    (folder / f"{name}.jsonl").write_text("")


@pytest.mark.unit
@pytest.mark.parametrize(
    ("runs", "says"),
    [
        (
            {"a": {"shard": [0, 2]}, "b": {"shard": [1, 4]}},
            "split the items in different numbers of shards (0/2 in a.jsonl, 1/4 in b.jsonl); "
            "a run's shards share one N",
        ),
        (
            {"a": {"shard": [0, 2]}, "b": {"shard": [1, 2], "mode": "sft"}},
            "are not of one run (a.jsonl: eval of e; b.jsonl: sft of e)",
        ),
        (
            {"a": {"shard": [0, 2]}, "b": {"shard": [0, 2]}},
            "shard 0/2 is there twice, in a.jsonl and b.jsonl; keep one",
        ),
    ],
)
def test_a_folder_of_runs_that_are_not_one_runs_shards_is_refused_naming_why(tmp_path, runs, says):
    for name, config in runs.items():
        described(tmp_path, name, **config)
    with pytest.raises(UserError, match=re.escape(says)):
        viewable(tmp_path)


@pytest.mark.unit
def test_a_shard_count_past_the_bound_is_refused_naming_the_file(tmp_path):
    for index in (0, 1):
        described(tmp_path, f"s{index}", shard=[index, 10**12])
    with pytest.raises(
        UserError,
        match=re.escape(f"{tmp_path / 's0.run.json'} is damaged (config.shard: 0/10")
        + ".*: N, the number of shards, must be at most 100,000",
    ):
        viewable(tmp_path)
    with pytest.raises(ValueError, match="must be at most 100,000"):
        parse("3/100001")
    assert parse("3/100000") == Shard(3, 100_000)


def test_compare_and_view_of_shards_counted_past_the_bound_end_in_a_sentence(tmp_path):
    for index in (0, 1):
        described(tmp_path / "f", f"s{index}", shard=[index, 10**12])
    for args in (["compare", "f", "f", "--json"], ["view", "f"]):
        done = run_cli(args, tmp_path, timeout=60)
        assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
        assert (
            "s0.run.json is damaged (config.shard: 0/1000000000000: N, the number of shards, must be at most "
            "100,000)" in done.stderr
        )


@pytest.mark.unit
@pytest.mark.parametrize(
    ("present", "count", "says"),
    [
        ((0, 2), 3, ["shard 1/3 missing"]),
        ((0, 3), 10, ["8 of 10 shards missing: 1, 2, 4, 5, 6, 7, 8, 9"]),
        (
            (0, 99_999),
            100_000,
            ["99,998 of 100,000 shards missing: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, …"],
        ),
        ((0, 1), 2, []),
    ],
)
def test_missing_shards_are_one_line_however_many(tmp_path, present, count, says):
    for index in present:
        described(tmp_path, f"s{index}", shard=[index, count])
    sharded = viewable(tmp_path)
    assert sharded.missing() == says


@pytest.mark.unit
def test_shards_stopped_early_are_named_up_to_ten_and_the_rest_counted():
    said = gaps({Shard(i, 20): 0 for i in range(20)}, 20, 99)
    assert said[:2] == [
        "shard 0/20 holds 0 of its 5 items up to item 99 (5 missing: stopped early, or groups "
        "dropped)",
        "shard 1/20 holds 0 of its 5 items up to item 99 (5 missing: stopped early, or "
        "groups dropped)",
    ]
    assert (
        len(said) == 11 and said[-1] == "and 10 more shards of 20 hold fewer items than their share"
    )
    assert len(gaps({Shard(i, 20): 0 for i in range(11)}, 20, 99)) == 11, (
        "eleven are named, not ten and one"
    )


@pytest.mark.unit
def test_a_folder_holding_one_run_or_runs_that_are_not_shards_keeps_its_old_meaning(tmp_path):
    described(tmp_path / "one", "groups", shard=[0, 2])
    assert viewable(tmp_path / "one") == tmp_path / "one/groups.jsonl", (
        "one shard alone opens as itself"
    )
    described(tmp_path / "beside", "a")
    described(tmp_path / "beside", "b", shard=[1, 2])
    with pytest.raises(UserError, match=r"holds 2 runs; name one.s \.jsonl file"):
        viewable(tmp_path / "beside")
    described(tmp_path / "folders/a", "groups", shard=[0, 2])
    described(tmp_path / "folders/b", "groups")
    with pytest.raises(UserError, match="hold 2 runs that are not all shards of one run"):
        viewable(tmp_path / "folders")


def test_following_a_folder_of_shards_shows_each_shards_new_lines(runs, tmp_path):
    folder = tmp_path / "growing"
    shutil.copytree(runs / "sft", folder)
    lines = (folder / "s1/groups.jsonl").read_text().splitlines(keepends=True)
    (folder / "s1/groups.jsonl").write_text(lines[0])
    rows, stop = GroupFile(viewable(folder)), threading.Event()
    reader = threading.Thread(
        target=rows.read,
        args=(lambda event: None, str(TOKENIZER_DIR)),
        kwargs={"follow_until": stop},
    )
    reader.start()
    try:
        wait_until(lambda: len(rows) == 5, "the shards as they stand")
        with (folder / "s1/groups.jsonl").open("a") as f:
            f.writelines(lines[1:])
        wait_until(lambda: len(rows) == 7, "the lines appended to shard 1/2")
        assert sorted(rows.group(row).item for row in rows) == list(range(7))
    finally:
        stop.set()
        reader.join()


# -- properties: any number of shards, any folder of them ----------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.integers(1, MAX_COUNT), st.integers(0, 3000), st.data())
def test_any_number_of_shards_takes_every_item_exactly_once(count, total, data):
    assert sum(Shard(i, count).share(total) for i in range(min(count, total))) == total, (
        "those past it take none"
    )
    assert all(Shard(i, count).share(total) == 0 for i in {total, count - 1} if total <= i < count)
    for item in data.draw(st.lists(st.integers(0, 10 * total + count), max_size=20)):
        owner = Shard(item % count, count)
        others = {data.draw(st.integers(0, count - 1)) for _ in range(3)} - {owner.index}
        assert owner.owns(item) and not any(Shard(i, count).owns(item) for i in others)
        assert owner.item(owner.position(item)) == item
    if (
        count * total <= 20_000
    ):  # every shard, every item: each item's one owner, at its place in that shard
        taken = sorted(
            (s.item(p), s.index, p)
            for s in map(Shard, range(count), [count] * count)
            for p in range(s.share(total))
        )
        assert [item for item, _, _ in taken] == list(range(total))


@pytest.mark.unit
@settings(max_examples=200, deadline=None)
@given(
    st.text(max_size=12)
    | st.builds("{}/{}".format, st.integers(), st.integers())
    | st.lists(st.integers() | st.booleans() | st.floats() | st.text(max_size=3), max_size=3)
    | st.text(min_size=200, max_size=2000)
    | st.builds("{}/{}".format, st.integers(10**300), st.integers(10**300))
)
def test_a_shard_as_written_is_a_shard_within_bounds_or_a_sentence(value):
    """A sentence of a line: a damaged run.json's 4 MB shard value was echoed whole."""
    try:
        shard = parse(value)
    except ValueError as e:
        assert 0 < len(str(e)) < 200, str(e)
    else:
        assert 0 <= shard.index < shard.count <= MAX_COUNT


@st.composite
def shard_runs(draw: st.DrawFn) -> list[dict]:
    """Runs meant as one run's shards, each with its own items; now and then what goes wrong: an item of another
    shard's, a shard of another N, there twice, out of bounds or none, another mode, bytes put in its jsonl."""
    count = draw(st.sampled_from([1, 2, 3, 5, MAX_COUNT]))
    indices = draw(st.lists(st.integers(0, min(count, 5) - 1), min_size=1, max_size=5, unique=True))
    places = st.lists(st.integers(0, 3), min_size=1, max_size=4)  # where its items are in its shard
    runs = [
        {
            "shard": [i, count],
            "mode": "eval",
            "damage": None,
            "items": [i + k * count for k in draw(places)],
        }
        for i in indices
    ]
    for run in runs:
        mistake = draw(
            st.sampled_from([None] * 5 + ["foreign", "shard", "unsharded", "mode", "damage"])
        )
        if mistake == "foreign":
            run["items"].append(draw(st.integers(0, 20)))
        elif mistake == "shard":
            run["shard"] = draw(
                st.tuples(st.integers(-1, 5), st.sampled_from([1, 2, 3, MAX_COUNT + 1, 10**12]))
            )
        elif mistake == "unsharded":
            run["shard"] = None
        elif mistake == "mode":
            run["mode"] = "sft"
        elif mistake == "damage":
            run["damage"] = (draw(st.binary(min_size=1, max_size=6)), draw(st.integers(0, 10**6)))
    return runs


@settings(max_examples=150, deadline=None)
@given(shard_runs(), st.booleans())
def test_a_folder_of_any_shards_reads_as_rows_or_one_sentence(plans, each_in_a_folder):
    with tempfile.TemporaryDirectory() as root:
        folder = Path(root)
        for n, plan in enumerate(plans):
            where, name = (folder / f"r{n}", "groups") if each_in_a_folder else (folder, f"r{n}")
            where.mkdir(exist_ok=True)
            config = {
                "env": "e",
                "mode": plan["mode"],
                **({"shard": plan["shard"]} if plan["shard"] else {}),
            }
            (where / f"{name}.run.json").write_text(json.dumps({"config": config}))
            lines = b"".join(
                json.dumps(
                    {"scores": [1.0], "tokens": [[]], "masks": [[]], "vftui": {"item": item}}
                ).encode()
                + b"\n"
                for item in plan["items"]
            )
            damage, at = plan["damage"] or (b"", 0)
            at %= len(lines) + 1
            (where / f"{name}.jsonl").write_bytes(lines[:at] + damage + lines[at:])
        try:
            source = load(folder)
        except UserError as e:
            assert str(e) and "\n" not in str(e)
        else:
            assert len(source.warnings) <= 1 + MISSING_NAMED + 1, (
                "one line for the shards missing, 11 for gaps"
            )
            if source.kind == "shards" and not any(plan["damage"] for plan in plans):
                shards = [Shard(*plan["shard"]) for plan in plans]
                assert len(set(shards)) == len(shards), "no shard read twice"
                owned = (
                    shard.owns(item)
                    for shard, plan in zip(shards, plans, strict=True)
                    for item in plan["items"]
                )
                assert all(owned), "no item of another shard's"
                written = collections.Counter(str(item) for plan in plans for item in plan["items"])
                assert {key: len(item.rewards) for key, item in source.items.items()} == written
        try:
            rows = GroupFile(viewable(folder), "item")
        except UserError as e:
            assert str(e)
        else:
            rows.read(lambda event: None, str(TOKENIZER_DIR))
            assert len(rows.warnings) <= 1 + MISSING_NAMED + 1
