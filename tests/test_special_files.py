"""A run's files replaced by what no reader can take (a FIFO, a link to a device, a link loop, a folder) or by
damage: each command says which file in one sentence and exits 2, never hangs, never takes a run's other
files or the listing's other runs down with it, and a refused command changes nothing on disk."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import run_cli, start_cli, wait_until
from vftui import bounds
from vftui.run_files import opening, store
from vftui.run_files.shards import WHOLE

pytestmark = pytest.mark.timeout(
    120
)  # a reader that blocks on a FIFO fails here, not at the suite's end


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """One finished sft run of 3 groups, copied by each test."""
    folder = tmp_path_factory.mktemp("made")
    done = run_cli(
        [
            "run",
            "--no-ui",
            "--steps",
            "3",
            "--group-size",
            "2",
            "--out",
            str(folder / "a" / "groups.jsonl"),
        ],
        folder,
    )
    assert done.returncode == 0, done.stderr
    return folder / "a"


def copy_of(made: Path, tmp_path: Path, name: str = "run") -> Path:
    return Path(shutil.copytree(made, tmp_path / name, symlinks=True)) / "groups.jsonl"


def replaced(path: Path, by: str) -> None:
    """``path`` replaced by a FIFO, a link to /dev/zero, a link to itself, or a folder."""
    path.unlink()
    if by == "fifo":
        os.mkfifo(path)
    elif by == "device":
        path.symlink_to("/dev/zero")
    elif by == "loop":
        path.symlink_to(path.name)
    else:
        path.mkdir()


def listed(done) -> list[dict]:
    """``vftui runs --json``'s rows (a line a run), once it exited 0 without a traceback."""
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def one_sentence(done, *parts: str) -> str:
    """The error line of a command that refused (exit 2, no traceback), holding ``parts``."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("vftui: error: ") and all(p in line for p in parts), line
    return line


@pytest.mark.parametrize(("by", "what"), [("fifo", "a FIFO"), ("device", "a device")])
@pytest.mark.parametrize("command", ["compare", "report"])
def test_groups_no_reader_can_take_are_refused_by_name_not_waited_on(
    made, tmp_path, command, by, what
):
    """A FIFO blocked compare and report for ever; /dev/zero had them hunt for a newline that never comes."""
    out = copy_of(made, tmp_path)
    replaced(out, by)
    args = ["compare", "--json", str(made), str(out.parent)] if command == "compare" else []
    args = args or ["report", str(out.parent), "-o", str(tmp_path / "r.html")]
    done = run_cli(args, tmp_path, timeout=60)
    one_sentence(done, str(out), what)


def test_a_link_loop_at_one_runs_groups_leaves_the_other_runs_listed(made, tmp_path):
    """Resolving the loop raised, and ``vftui runs`` listed nothing of the folder."""
    copy_of(made, tmp_path / "all", "good")
    replaced(copy_of(made, tmp_path / "all", "bad"), "loop")
    done = run_cli(["runs", "--json", str(tmp_path / "all")], tmp_path, timeout=60)
    rows = {Path(r["path"]).parent.name: r for r in listed(done)}
    assert rows["good"]["groups_done"] == 3 and "bad" in rows, rows


@pytest.mark.parametrize("by", ["fifo", "device", "loop", "folder"])
def test_a_runs_record_no_reader_can_take_lists_the_run_as_damaged(made, tmp_path, by):
    """A FIFO, a link or a folder at ``groups.run.json`` hid the run: "no runs found"."""
    out = copy_of(made, tmp_path)
    replaced(out.with_suffix(".run.json"), by)
    done = run_cli(["runs", "--json", str(out.parent)], tmp_path, timeout=60)
    (line,) = listed(done)
    assert line["state"] == "damaged" and "groups.run.json" in line["problem"], line


@pytest.mark.parametrize("name", ["groups.jsonl", "groups.run.json", "groups.checkpoint.json"])
def test_report_never_replaces_a_file_that_is_no_page(made, tmp_path, name):
    """``-o`` naming the run's own groups replaced them with the page."""
    out = copy_of(made, tmp_path)
    target = out.parent / name
    before = target.read_bytes()
    done = run_cli(["report", str(out.parent), "-o", str(target)], tmp_path, timeout=60)
    one_sentence(done, "is a file that is no HTML page")
    assert target.read_bytes() == before
    page = tmp_path / "r.html"
    assert run_cli(["report", str(out.parent), "-o", str(page)], tmp_path).returncode == 0
    again = run_cli(["report", str(out.parent), "-o", str(page)], tmp_path)
    assert again.returncode == 0, "a page it wrote is replaced"


@pytest.mark.parametrize(
    ("name", "by"), [("groups.jsonl", "fifo"), ("groups.dropped.jsonl", "folder")]
)
def test_resume_refuses_a_file_no_reader_can_take_by_name(made, tmp_path, name, by):
    out = copy_of(made, tmp_path)
    (out.parent / name).touch()
    replaced(out.parent / name, by)
    done = run_cli(["run", "--no-ui", "--resume", str(out)], tmp_path, timeout=60)
    one_sentence(done, "--resume: ", str(out.parent / name))


def test_a_refused_resume_changes_nothing(made, tmp_path):
    """Random bytes were refused, but only after their "torn last line" had been cut."""
    out = copy_of(made, tmp_path)
    damaged = out.read_bytes() + b"\x89not json\n" + os.urandom(300).replace(b"\n", b" ")
    out.write_bytes(damaged)
    done = run_cli(["run", "--no-ui", "--resume", str(out)], tmp_path, timeout=60)
    one_sentence(done, "line 4 of")
    assert out.read_bytes() == damaged


def test_a_last_group_that_only_lacks_its_newline_is_kept_by_a_resume(made, tmp_path):
    """A whole group without its newline (a file joined or edited by hand) was cut as if torn."""
    out = copy_of(made, tmp_path)
    out.write_bytes(out.read_bytes().rstrip(b"\n"))
    done = run_cli(["run", "--no-ui", "--resume", str(out), "--steps", "4"], tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "cut a torn last line" not in done.stderr
    lines = out.read_bytes().splitlines()
    assert len(lines) == 4 and all(isinstance(json.loads(line), dict) for line in lines)


def test_the_index_keeps_a_run_whose_folder_is_away_until_prune(made, tmp_path):
    """A listing forgot a run for good when its folder was moved or not mounted for a moment."""
    out = copy_of(made, tmp_path)
    assert run_cli(["run", "--no-ui", "--resume", str(out)], tmp_path).returncode == 0  # indexed
    away = out.parent.rename(tmp_path / "away")
    listed = run_cli(["runs", "--no-ui"], tmp_path)
    assert (
        listed.returncode == 0 and "1 run(s) in the index are not where they were" in listed.stderr
    )
    away.rename(out.parent)
    assert str(out) in run_cli(["runs", "--json"], tmp_path).stdout, "listed again once back"
    out.parent.rename(away)
    pruned = run_cli(["runs", "--prune"], tmp_path)
    assert "1 no longer there forgotten" in pruned.stderr, pruned.stderr
    away.rename(out.parent)
    assert str(out) not in run_cli(["runs", "--json"], tmp_path).stdout, "forgotten by --prune"


LINE = st.builds(
    lambda d: json.dumps(d).encode(),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


@settings(max_examples=200, deadline=None)
@given(
    whole=st.lists(LINE, max_size=4),
    tail=st.one_of(st.binary(max_size=40), LINE, LINE.map(lambda line: line[: len(line) // 2])),
)
def test_repair_tail_cuts_only_a_torn_last_line_and_ends_a_whole_one(tmp_path_factory, whole, tail):
    path = tmp_path_factory.mktemp("tail") / "groups.jsonl"
    data = b"".join(line + b"\n" for line in whole) + tail
    path.write_bytes(data)
    torn = store.torn_tail(path)
    cut = store.repair_tail(path)
    after = path.read_bytes()
    last = data.rsplit(b"\n", 1)[-1]
    try:
        whole_object = isinstance(json.loads(last), dict)
    except (ValueError, RecursionError):
        whole_object = False
    if not last:
        assert cut == torn == 0 and after == data
    elif last.startswith(b"{") and not whole_object:  # a write cut short
        assert cut == torn == len(last) and after == data[: len(data) - cut]
    else:  # a group that only lacks its newline, a blank line, or damage the reader refuses: nothing cut
        assert cut == torn == 0 and after == data + b"\n"


@pytest.mark.parametrize(("by", "what"), [("fifo", "a FIFO"), ("damaged", "Expecting value")])
def test_a_foreign_runs_note_names_the_file_not_only_its_folder(tmp_path, by, what):
    """A vf-eval folder whose metadata.json did not read was noted as '<folder>: it is a FIFO'."""
    out = tmp_path / "e" / "eval.jsonl"
    made = run_cli(
        ["run", "--mode", "eval", "--no-ui", "--num-examples", "2", "--out", str(out)], tmp_path
    )
    assert made.returncode == 0, made.stderr
    results = Path(shutil.copytree(out.with_suffix(".eval"), tmp_path / "all" / "results"))
    metadata = results / "metadata.json"
    if by == "fifo":
        replaced(metadata, "fifo")
    else:
        metadata.write_text("")
    done = run_cli(["runs", "--json", str(tmp_path / "all")], tmp_path, timeout=60)
    (line,) = listed(done)
    assert line["state"] == "damaged" and line["problem"].startswith("metadata.json: "), line
    assert what in line["problem"], line


@pytest.mark.parametrize(
    "args",
    [["compare", "", "x"], ["report", ""], ["view", ""], ["run", "--no-ui", "--resume", ""]],
    ids=["compare", "report", "view", "resume"],
)
def test_an_empty_path_names_nothing(tmp_path, args):
    """``Path("")`` is the current folder: compare, report, view and --resume searched it."""
    done = run_cli(args, tmp_path, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().endswith("an empty path names nothing"), done.stderr


def test_an_integer_past_pythons_digit_limit_is_said_as_such():
    """Python's own error told the user to call sys.set_int_max_str_digits()."""
    with pytest.raises(ValueError, match=r"^it holds an integer of more than 4,300 digits$"):
        bounds.load_json('{"n": ' + "9" * 5000 + "}")
    assert bounds.load_json('{"n": -' + "9" * 400 + "}")["n"] == -int("9" * 400)
    line = b'{"tokens": [], "scores": [' + b"1" * 5000 + b"]}\n"
    assert store.parse_group_line(line) == "not a group (an integer of more than 4,300 digits)"


def test_a_resumed_runs_time_counts_its_earlier_sessions(made, tmp_path):
    """The checkpoint kept only the last session's seconds beside every session's groups: resuming a finished
    run listed it at 6,000 groups/s."""
    out = copy_of(made, tmp_path)
    checkpoint = out.with_suffix(".checkpoint.json")
    before = json.loads(checkpoint.read_text())["elapsed_s"]
    assert before > 0
    assert run_cli(["run", "--no-ui", "--resume", str(out)], tmp_path).returncode == 0
    saved = json.loads(checkpoint.read_text())
    assert saved["groups_done"] == 3 and saved["elapsed_s"] >= before, saved


@pytest.mark.parametrize("junk", [b"\x89junk without a newline", b'{"item": 1}\n\x89junk\n{"item"'])
def test_a_resume_refuses_a_drop_log_that_holds_no_drops_and_leaves_it(made, tmp_path, junk):
    """A drop log of junk passed the checks, then was cut to nothing as a 'torn last line'."""
    out = copy_of(made, tmp_path)
    drops = out.with_suffix(".dropped.jsonl")
    drops.write_bytes(junk)
    done = run_cli(["run", "--no-ui", "--resume", str(out), "--steps", "4"], tmp_path, timeout=60)
    one_sentence(done, f"of {drops} is not a JSON object")
    assert drops.read_bytes() == junk


def test_a_fifo_at_the_runs_log_is_passed_over_not_waited_on(tmp_path):
    """Opening the log to append blocked on a FIFO with no reader: the run hung before its first group."""
    out = tmp_path / "f" / "groups.jsonl"
    out.parent.mkdir()
    os.mkfifo(out.with_suffix(".collector.log"))
    done = run_cli(["run", "--no-ui", "--steps", "2", "--out", str(out)], tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "groups.collector.log: it is a FIFO, not a regular file" in done.stderr
    assert len(out.read_bytes().splitlines()) == 2


def test_report_writes_over_an_empty_file_and_says_a_missing_folder_before_reading(made, tmp_path):
    """An empty file (mktemp's) was refused as 'no page'; a missing folder was said only after the page was made."""
    empty = tmp_path / "empty.html"
    empty.touch()
    assert run_cli(["report", str(made), "-o", str(empty)], tmp_path).returncode == 0
    assert empty.read_text().startswith("<!DOCTYPE html>")
    done = run_cli(["report", str(made), "-o", str(tmp_path / "nope" / "r.html")], tmp_path)
    one_sentence(done, "there is no folder")
    assert "reading" not in done.stderr, "refused before any source was read"


@pytest.mark.parametrize("by", ["fifo", "folder"])
def test_a_run_whose_groups_are_no_file_is_listed_as_damaged(made, tmp_path, by):
    """A FIFO or a folder at the jsonl was listed as 'finished 3/3' from its checkpoint."""
    out = copy_of(made, tmp_path)
    replaced(out, by)
    (line,) = listed(run_cli(["runs", "--json", str(out.parent)], tmp_path, timeout=60))
    assert line["state"] == "damaged" and str(out) in line["problem"], line


def test_prune_forgets_every_index_entry_naming_a_run(made, tmp_path):
    """An entry copied under another name kept its run listed after each --prune, counted as forgotten."""
    out = copy_of(made, tmp_path)
    assert run_cli(["run", "--no-ui", "--resume", str(out)], tmp_path).returncode == 0  # indexed
    (entry,) = (tmp_path / "xdg-data").rglob("index/*.json")
    shutil.copy(entry, entry.with_name("copy.json"))
    pruned = run_cli(["runs", "--prune"], tmp_path)
    assert "1 runs kept elsewhere forgotten" in pruned.stderr, pruned.stderr
    assert str(out) not in run_cli(["runs", "--json"], tmp_path).stdout


@pytest.mark.parametrize("command", ["compare", "report"])
def test_a_source_that_is_a_link_loop_is_said_as_one(tmp_path, command):
    """compare and report said 'no such file or folder' of a link loop, where view says what it is."""
    loop = tmp_path / "ll"
    loop.symlink_to("ll")
    args = [command, str(loop), *(["x"] if command == "compare" else [])]
    one_sentence(run_cli(args, tmp_path, timeout=60), f"{loop} is a symbolic link loop")


@pytest.mark.parametrize("command", ["view", "compare", "report"])
def test_a_source_that_is_not_there_is_said_alike_by_every_reader(tmp_path, command):
    """view said 'no such file: X' where compare and report said 'X: no such file or folder'."""
    nowhere = tmp_path / "nowhere.jsonl"
    args = [command, str(nowhere), *(["x"] if command == "compare" else [])]
    one_sentence(run_cli(args, tmp_path, timeout=60), f"{nowhere}: no such file or folder")


def test_a_whole_last_drop_that_only_lacks_its_newline_counts_on_resume(made, tmp_path):
    """The drops were read before the repair ended that line: its item was collected again, and counted
    twice after."""
    out = copy_of(made, tmp_path)
    drops = out.with_suffix(".dropped.jsonl")
    drops.write_bytes(
        b'{"item": 3, "reason": "identical scores", "scores": [1.0, 1.0], "turns": []}'
    )
    output = opening.open_resumed(out, 8, WHOLE)
    try:
        assert [drop.item for drop in output.dropped] == [3]
        assert output.ledger.lost == 0 and output.ledger.next_item == 4, "item 3 is done"
    finally:
        output.lock.release()
    assert drops.read_bytes().endswith(b"]}\n")


def test_a_resumed_run_killed_mid_way_keeps_its_earlier_sessions_seconds(made, tmp_path):
    """Only the run's end wrote its seconds; each group's checkpoint wrote none (0), so a resumed run killed
    mid-way lost every earlier session's."""
    out = copy_of(made, tmp_path)
    checkpoint = out.with_suffix(".checkpoint.json")
    before = json.loads(checkpoint.read_text())["elapsed_s"]
    args = ["run", "--no-ui", "--resume", str(out), "--steps", "40", "--sim-latency", "0.2"]
    process = start_cli(args, tmp_path)
    try:
        wait_until(
            lambda: json.loads(checkpoint.read_text()).get("groups", 0) >= 5, "two groups more"
        )
    finally:
        process.kill()
        process.wait()
    assert json.loads(checkpoint.read_text())["elapsed_s"] > before


V1_RUN = next((Path(__file__).parent / "data" / "v1_eval").iterdir())


def foreign_run(tmp_path: Path, kind: str) -> tuple[Path, Path]:
    """A verifiers v1 eval folder, or a prime-rl run holding the same episodes as one step's rollouts, and where
    its config is (``configs/resolved/eval.json``, ``configs/orchestrator.json``)."""
    run = tmp_path / kind
    if kind == "v1":
        shutil.copytree(V1_RUN, run)
        return run, run / "configs" / "resolved" / "eval.json"
    stream = run / "rollouts" / "step_0" / "train" / "all" / "traces.jsonl"
    stream.parent.mkdir(parents=True)
    shutil.copy(V1_RUN / "traces.jsonl", stream)
    config = run / "configs" / "orchestrator.json"
    config.parent.mkdir()
    config.write_text(json.dumps({"train": {"source": [{"name": "tools", "group_size": 2}]}}))
    return run, config


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("by", "what"),
    [
        ("fifo", "it is a FIFO"),
        ("device", "it is a device"),
        ("folder", "it is a folder"),
        ("damaged", "Expecting"),
    ],
)
@pytest.mark.parametrize("kind", ["v1", "prime-rl"])
@pytest.mark.parametrize("command", ["compare", "report", "view"])
def test_a_foreign_runs_config_no_reader_can_take_is_one_sentence_not_waited_on(
    tmp_path, command, kind, by, what
):
    """verifiers' resolved config and prime-rl's orchestrator config were read whole with ``read_bytes()``: a
    FIFO there hung compare, report and view for ever, a link to /dev/zero grew to GBs until a MemoryError."""
    run, config = foreign_run(tmp_path, kind)
    if by == "damaged":
        config.write_text("{")
    else:
        replaced(config, by)
    args = {
        "compare": ["compare", str(run), str(run)],
        "report": ["report", str(run), "-o", str(tmp_path / "page.html")],
        "view": ["view", str(run)],
    }[command]
    done = run_cli(args, tmp_path, timeout=30, XDG_CACHE_HOME=str(tmp_path / "cache"))
    one_sentence(done, str(config), what)


@pytest.mark.parametrize("kind", ["v1", "prime-rl"])
def test_a_foreign_runs_config_that_is_not_there_or_no_object_is_passed_over(tmp_path, kind):
    """Only a config that cannot be read is refused: one that is absent or another form still compares."""
    run, config = foreign_run(tmp_path, kind)
    for content in (None, "[1, 2]"):
        config.unlink(missing_ok=True)
        if content is not None:
            config.write_text(content)
        done = run_cli(["compare", "--json", str(run), str(run)], tmp_path, timeout=30)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
