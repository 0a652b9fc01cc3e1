"""``vftui runs --prune`` deletes only what vftui made, for a run that collected nothing; no run file that is
not a regular file (a FIFO, a device) ever blocks a reader (issue 29.2)."""

from __future__ import annotations

import json
import os
import signal
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import SIDE_SUFFIXES, read_jsonl, read_until, run_cli, start_cli
from vftui import safe_files
from vftui.events import GroupDropped
from vftui.run_files import prune as pruning
from vftui.run_files import records
from vftui.run_files.drops import DropLog
from vftui.run_files.files import RunFiles
from vftui.run_files.listing import all_runs
from vftui.run_files.prune import Kind, Place

EVAL_SUFFIX = ".eval"  # the test's own names of a run's files, so that a renamed one shows


def own_files(out: Path) -> set[Path]:
    return {out, *RunFiles(out).side_files}


def eval_dir(out: Path) -> Path:
    return RunFiles(out).eval_dir


def data_dir(tmp_path: Path) -> Path:
    """vftui's data folder for the CLI under ``cli_env``."""
    return tmp_path / "xdg-data" / "vftui"


def stopped_before_its_first_group(args: list[str], tmp_path: Path) -> Path:
    """A run stopped by SIGTERM (twice: its groups in flight cancelled) once it is prepared; its jsonl."""
    proc = start_cli(
        ["run", "--no-ui", "--steps", "3", "--group-size", "2", "--sim-latency", "60", *args],
        tmp_path,
    )
    try:
        header = read_until(proc.stderr, "groups of 2", "the run was never prepared")
        proc.send_signal(signal.SIGTERM)
        read_until(proc.stderr, "stopping after the groups in flight", "the run did not stop")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 130
    finally:
        proc.kill()
        proc.communicate()
    return Path(header.rsplit("-> ", 1)[1].strip())


def test_prune_deletes_an_empty_runs_own_files_and_keeps_a_folder_that_holds_anything_else(
    tmp_path,
):
    """The repro: a finished run, a run stopped before its first group and the user's notes in a folder of their
    own under the runs folder; and a run vftui gave a folder, stopped before its first group."""
    myexp = data_dir(tmp_path) / "runs" / "myexp"
    myexp.mkdir(parents=True)
    (myexp / "NOTES.txt").write_text("what I tried\n")
    finished = run_cli(
        ["run", "--no-ui", "--steps", "3", "--group-size", "2", "--out", str(myexp / "a.jsonl")],
        tmp_path,
    )
    assert finished.returncode == 0, finished.stderr
    empty = stopped_before_its_first_group(["--out", str(myexp / "b.jsonl")], tmp_path)
    ours = stopped_before_its_first_group([], tmp_path)
    assert empty == myexp / "b.jsonl" and empty.stat().st_size == 0 and ours.stat().st_size == 0
    kept = {p.name for p in myexp.iterdir() if not p.name.startswith("b.")}

    pruned = run_cli(["runs", "--prune", "--json"], tmp_path)

    assert pruned.returncode == 0 and "Traceback" not in pruned.stderr, pruned.stderr
    assert {p.name for p in myexp.iterdir()} == kept, "only b's own files went"
    assert (myexp / "NOTES.txt").read_text() == "what I tried\n" and len(
        read_jsonl(myexp / "a.jsonl")
    ) == 3
    assert not ours.parent.exists(), "the folder vftui made for the empty run went with it"
    assert "2 empty runs deleted" in pruned.stderr
    assert [json.loads(line)["path"] for line in pruned.stdout.splitlines()] == [
        str(myexp / "a.jsonl")
    ]


def test_a_run_whose_jsonl_is_empty_but_that_recorded_dropped_groups_or_eval_rows_is_not_pruned(
    tmp_path,
):
    """An rl run at temperature 0 has every group dropped: its jsonl stays empty while its drops file holds each
    scored group (what view counts); an eval folder can hold rows its jsonl no longer does. --prune deleted both as
    runs that collected nothing."""
    runs = data_dir(tmp_path) / "runs"
    dropped, evaluated, empty = (runs / f"20260101-00000{i}-x" / "groups.jsonl" for i in range(3))
    for out in (dropped, evaluated, empty):
        out.parent.mkdir(parents=True)
        out.touch()
        out.with_suffix(".run.json").write_text(
            json.dumps({"config": {"env": "x", "mode": "rl", "steps": 3}})
        )
    DropLog(RunFiles(dropped)).add(
        GroupDropped(0, "identical scores, all high (too easy)", [1.0, 1.0], {}, [1, 1])
    )
    eval_dir(evaluated).mkdir()
    (eval_dir(evaluated) / "results.jsonl").write_text('{"example_id": 0, "reward": 1.0}\n')
    (eval_dir(evaluated) / "metadata.json").write_text("{}")
    (eval_dir(empty) / "atropos").mkdir(
        parents=True
    )  # an eval stopped before its first example writes these
    for name in ("results.jsonl", "items.jsonl"):
        (eval_dir(empty) / name).touch()
    for name in ("metadata.json", "atropos/metrics.json"):
        (eval_dir(empty) / name).write_text("{}")
    kept = everything(dropped.parent) | everything(evaluated.parent)

    pruned = run_cli(["runs", "--prune"], tmp_path)

    assert pruned.returncode == 0 and "Traceback" not in pruned.stderr, pruned.stderr
    assert kept <= everything(runs), "a run that recorded anything keeps every file"
    assert not empty.parent.exists(), (
        "a run that recorded nothing goes, its empty eval's files with it"
    )
    assert "1 empty runs deleted" in pruned.stderr


def test_an_empty_file_an_index_entry_names_is_no_run_and_prune_deletes_nothing_beside_it(tmp_path):
    """An index entry (anyone may write one) naming an empty data.jsonl in a folder named as vftui names its
    own: --prune deleted the user's data.html and data.collector.log beside it, and the folder."""
    folder = data_dir(tmp_path) / "runs" / "20240101-000000-mine"
    folder.mkdir(parents=True)
    (folder / "data.jsonl").touch()
    (folder / "data.html").write_text("<html>my own page</html>")
    (folder / "data.collector.log").write_text("my log\n")
    (data_dir(tmp_path) / "index").mkdir(parents=True)
    (data_dir(tmp_path) / "index" / "mine.json").write_text(
        json.dumps({"out": str(folder / "data.jsonl")})
    )
    before = everything(folder)

    pruned = run_cli(["runs", "--prune"], tmp_path)

    assert pruned.returncode == 0 and "Traceback" not in pruned.stderr, pruned.stderr
    assert everything(folder) == before, "no run of vftui's (no record): nothing of it goes"
    assert (folder / "data.html").read_text() == "<html>my own page</html>"


def test_a_run_listed_through_a_link_in_the_runs_folder_is_not_counted_as_forgotten(tmp_path):
    """A run folder linked into the runs folder is listed from there, not from the index: prune said '1 runs kept
    elsewhere forgotten', and the next vftui runs listed it all the same."""
    elsewhere = tmp_path / "scratch" / "run"
    elsewhere.mkdir(parents=True)
    (elsewhere / "groups.jsonl").write_text('{"scores": [1.0, 0.0]}\n')
    (elsewhere / "groups.run.json").write_text(json.dumps({"config": {"env": "x", "steps": 1}}))
    runs = data_dir(tmp_path) / "runs"
    runs.mkdir(parents=True)
    (runs / "linked").symlink_to(elsewhere)

    pruned = run_cli(["runs", "--prune", "--json"], tmp_path)

    assert pruned.returncode == 0 and "pruned: 0 runs kept elsewhere forgotten" in pruned.stderr, (
        pruned.stderr
    )
    assert [json.loads(line)["path"] for line in pruned.stdout.splitlines()] == [
        str(elsewhere / "groups.jsonl")
    ]


def test_prune_refuses_an_index_entry_through_dot_dot_or_a_link_and_deletes_nothing(tmp_path):
    """An index entry naming ``runs/../groups.jsonl`` (an empty file there) deleted the whole data folder."""
    data = data_dir(tmp_path)
    (data / "index").mkdir(parents=True)
    (data / "runs" / "20260101-000000-x").mkdir(parents=True)
    (data / "groups.jsonl").touch()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for name in ("groups.jsonl", "groups.run.json"):
        (elsewhere / name).write_text("")
    (data / "runs" / "linked").symlink_to(elsewhere)
    entries = {
        "dots": str(data / "runs" / ".." / "groups.jsonl"),
        "link": str(data / "runs" / "linked" / "groups.jsonl"),
    }
    for name, out in entries.items():
        (data / "index" / f"{name}.json").write_text(json.dumps({"out": out}))
    before = sorted(p for p in tmp_path.rglob("*") if "xdg-config" not in p.parts)

    pruned = run_cli(["runs", "--prune"], tmp_path)

    assert pruned.returncode == 0 and "Traceback" not in pruned.stderr, pruned.stderr
    assert sorted(p for p in tmp_path.rglob("*") if "xdg-config" not in p.parts) == before, (
        "nothing deleted"
    )
    for name, out in entries.items():
        assert (
            f"the run index entry {data / 'index' / name}.json names {out}, which goes through a symbolic link "
            "or '..'; it was skipped"
        ) in pruned.stderr


def test_a_fifo_among_the_run_files_is_a_note_never_a_reader_blocked_for_ever(tmp_path):
    """A FIFO as an index entry, as a run's ``.run.json`` and as another run's checkpoint: ``runs`` and ``runs
    --prune`` list the others and name each FIFO."""
    data = data_dir(tmp_path)
    (data / "index").mkdir(parents=True)
    os.mkfifo(data / "index" / "fifo.json")
    described, checkpointed = (
        data / "runs" / name for name in ("20260101-000000-x", "20260101-000001-x")
    )
    for folder in (described, checkpointed):
        folder.mkdir(parents=True)
        (folder / "groups.jsonl").touch()
    os.mkfifo(described / "groups.run.json")
    (checkpointed / "groups.run.json").write_text(json.dumps({"config": {"env": "x", "steps": 3}}))
    os.mkfifo(checkpointed / "groups.checkpoint.json")

    for args in (["runs", "--no-ui"], ["runs", "--prune", "--json"]):
        done = run_cli(args, tmp_path, timeout=60)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        for fifo in (
            data / "index" / "fifo.json",
            described / "groups.run.json",
            checkpointed / "groups.checkpoint.json",
        ):
            assert (
                f"{fifo} is damaged (cannot be read: it is a FIFO, not a regular file)"
                in done.stderr
            )
    assert described.exists() and checkpointed.exists(), "a damaged run is not pruned"


@pytest.mark.unit
def test_a_run_file_that_is_not_a_regular_file_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "fifo.json")  # no writer: a plain open would wait for one for ever
    (tmp_path / "device.json").symlink_to("/dev/zero")  # endless
    (tmp_path / "folder.json").mkdir()
    for name, kind in (("fifo", "a FIFO"), ("device", "a device"), ("folder", "a folder")):
        with pytest.raises(OSError) as refused:
            safe_files.open_to_read(tmp_path / f"{name}.json")
        assert refused.value.strerror == f"it is {kind}, not a regular file"
        with pytest.raises(
            records.Damaged, match=f"cannot be read: it is {kind}, not a regular file"
        ):
            records.read(tmp_path / f"{name}.json", records.Checkpoint)
    (tmp_path / "file.json").write_text('{"groups": 2}')
    assert records.read(tmp_path / "file.json", records.Checkpoint).groups == 2


# -- prune's decisions, against random trees ---------------------------------------------------------------

STEMS, FOREIGN = ("a", "b", "groups"), ("NOTES.txt", "data.csv", "keep")
OWN_NAMES = [
    Path(f"{stem}.jsonl").with_suffix(suffix).name
    for stem in STEMS
    for suffix in (".jsonl", *SIDE_SUFFIXES, EVAL_SUFFIX)
]
RUNS = Path("/d/vftui/runs")


@pytest.mark.unit
@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(["runs", "d", "vftui", "x", "..", "20260101-000000-env", "a.jsonl"]),
        max_size=6,
    ),
    st.sampled_from(["same", "other", "none"]),
)
def test_only_a_plain_path_in_a_folder_of_the_runs_folder_is_a_run_folder(parts, resolution):
    out = Path("/", *parts)
    resolved = {"same": out, "other": Path("/elsewhere/a.jsonl"), "none": None}[resolution]
    where = pruning.place(out, resolved, RUNS)
    if where is not Place.REFUSED:
        assert ".." not in out.parts and resolved == out, (
            "a path through a link or '..' is left as it is"
        )
    if where is Place.RUN_FOLDER:
        assert out.parent.parent == RUNS and out.is_relative_to(RUNS)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(STEMS),
    st.dictionaries(st.sampled_from([*OWN_NAMES, *FOREIGN]), st.sampled_from(Kind)),
    st.booleans(),
)
def test_an_empty_run_loses_its_own_files_and_its_folder_only_when_vftui_made_it_and_nothing_else_is_there(
    stem, beside, made_by_vftui
):
    out = RUNS / "f" / f"{stem}.jsonl"
    plan = pruning.to_delete(RunFiles(out), beside, made_by_vftui)
    own = {p.name for p in own_files(out)} | {eval_dir(out).name}
    gone = {p.name for p in (*plan.files, *plan.trees)}
    assert all(p.parent == out.parent for p in (*plan.files, *plan.trees)), (
        "nothing outside the run's folder"
    )
    assert gone <= own, "only the run's own names"
    assert all(beside[p.name] is not Kind.FOLDER for p in plan.files), "a folder is unlinked never"
    assert all(p == eval_dir(out) and beside[p.name] is Kind.FOLDER for p in plan.trees), (
        "no tree but its eval's"
    )
    assert gone >= {
        n
        for n, kind in beside.items()
        if n in own and (kind is not Kind.FOLDER or n == eval_dir(out).name)
    }
    if plan.folder is not None:
        assert made_by_vftui and set(beside) == gone, (
            "a folder goes only when vftui made it and it holds nothing else"
        )
    else:
        assert not made_by_vftui or set(beside) - gone


Spec = dict[tuple[str, str], tuple[bool, list[tuple[str, str]], list[str]]]


def make_tree(root: Path, spec: Spec, entries: list[str]) -> Path:
    """A data folder under ``root`` with a run in folder F of the runs folder for each ``(F, stem)`` of ``spec``:
    whether its jsonl is empty, which of its own names are files, folders or links to a file outside, and the user's
    files beside it; ``runs/linked`` a link to a folder outside; ``entries``: index entries, relative to the data
    folder. Its ``a.jsonl`` is an empty file, for an entry through ``runs/..`` to name."""
    data, outside = root / "data" / "vftui", root / "outside"
    (outside / "folder").mkdir(parents=True)
    (outside / "target.txt").write_text("the user's\n")
    (data / "index").mkdir(parents=True)
    (data / "runs").mkdir()
    (data / "runs" / "linked").symlink_to(outside / "folder")
    (data / "a.jsonl").touch()
    for (folder, stem), (empty, own, foreign) in spec.items():
        out = data / "runs" / folder / f"{stem}.jsonl"
        out.parent.mkdir(exist_ok=True)
        out.write_text("" if empty else '{"scores": [1]}\n')
        out.with_suffix(".run.json").write_text(json.dumps({"config": {"env": "x", "steps": 3}}))
        for suffix, kind in own:
            path = out.with_suffix(suffix)
            if os.path.lexists(path):
                continue
            if kind == "folder":
                path.mkdir()
                (path / "inside.txt").write_text("whose?\n")
            elif kind == "link":
                path.symlink_to(outside / "target.txt")
            else:
                path.write_text("")
        for name in foreign:
            (out.parent / name).write_text("the user's\n")
    for i, entry in enumerate(entries):
        (data / "index" / f"{i}.json").write_text(json.dumps({"out": f"{data}/{entry}"}))
    return data


def made_by_vftui(folder: Path) -> bool:
    return RunFiles(folder / "groups.jsonl").made_by_vftui


def everything(root: Path) -> set[Path]:
    """Every path under ``root``, links not followed."""
    return {
        Path(folder) / name
        for folder, folders, files in os.walk(root)
        for name in (*folders, *files)
    }


def prunable(folder: str, empty: bool, own: list[tuple[str, str]]) -> bool:
    """Whether a run of ``make_tree`` is to be deleted: empty, truly in the runs folder, not damaged (any checkpoint
    it has reads as damaged), its lock takeable (no link or folder at its name), no file in its eval folder."""
    kinds = dict(reversed(own))  # the first of a name is the one made
    return (
        empty
        and folder != "linked"
        and ".checkpoint.json" not in kinds
        and kinds.get(".lock", "file") == "file"
        and kinds.get(EVAL_SUFFIX) != "folder"
    )


FOLDERS = st.sampled_from(["20260101-000000-env", "20260101-000001-env-1", "myexp", "linked"])
OWN = st.lists(
    st.tuples(
        st.sampled_from([*SIDE_SUFFIXES, EVAL_SUFFIX]),
        st.sampled_from(["file", "folder", "link"]),
    ),
    max_size=4,
)
RUN = st.tuples(st.booleans(), OWN, st.lists(st.sampled_from(FOREIGN), max_size=2))
ENTRIES = st.lists(
    st.sampled_from(
        [
            "runs/../a.jsonl",
            "runs/linked/a.jsonl",
            "runs/myexp/../myexp/a.jsonl",
            "runs/myexp/a.jsonl",
            "a.jsonl",
            "index/0.json",
        ]
    ),
    max_size=3,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.tuples(FOLDERS, st.sampled_from(STEMS)), RUN, max_size=5), ENTRIES)
def test_prune_deletes_nothing_but_empty_runs_own_files_and_the_empty_folders_vftui_made(
    spec, entries
):
    with tempfile.TemporaryDirectory() as temporary, pytest.MonkeyPatch.context() as env:
        root = Path(temporary).resolve()
        env.setenv("XDG_DATA_HOME", str(root / "data"))
        data = make_tree(root, spec, entries)
        runs, outside = data / "runs", root / "outside"
        refused = {
            f"{i}.json"
            for i, entry in enumerate(entries)
            if (".." in entry or "linked" in entry) and os.path.exists(f"{data}/{entry}")
        }
        before = everything(root)
        for line in all_runs():
            pruning.prune(line)
        gone = before - everything(root)

        deletable = {
            path
            for (folder, stem), (empty, _, _) in spec.items()
            if empty and folder != "linked"
            for path in own_files(runs / folder / f"{stem}.jsonl")
        }
        trees = {eval_dir(path) for path in deletable}
        for path in gone:
            assert (
                path in deletable
                or any(path.is_relative_to(tree) for tree in trees)
                or (path.parent == runs and made_by_vftui(path))
                or path.parent == data / "index"
            ), f"{path} was not an empty run's own"
        assert not {path for path in gone if path.is_relative_to(outside)}, (
            "nothing outside is touched"
        )
        assert not {path for path in gone if path.parent == runs and not made_by_vftui(path)}
        assert refused <= {path.name for path in (data / "index").iterdir()}, (
            "an entry through a link or '..' stays"
        )
        for (folder, stem), (empty, own, _) in spec.items():
            if prunable(folder, empty, own):
                assert not (runs / folder / f"{stem}.jsonl").exists(), "an empty run is deleted"
