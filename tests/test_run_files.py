"""``RunFiles``: every path of a run from its jsonl, and the constructors that find or make one."""

from __future__ import annotations

import os
import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import SIDE_SUFFIXES
from vftui.errors import UserError
from vftui.run_files.files import RunFiles
from vftui.run_files.opening import open_new

pytestmark = pytest.mark.unit
STEMS = st.text(string.ascii_letters + string.digits + "_-.", min_size=1, max_size=40)


@settings(max_examples=200, deadline=None)
@given(STEMS)
def test_side_files_take_the_jsonl_name_less_its_suffix_and_a_record_names_its_run(stem):
    files = RunFiles(Path("/r") / f"{stem}.jsonl")
    assert {p.name for p in files.side_files} == {f"{stem}{suffix}" for suffix in SIDE_SUFFIXES}
    assert all(p.parent == files.folder for p in (*files.side_files, files.eval_dir))
    assert files.eval_dir.name == f"{stem}.eval" and files.eval_atropos.parent == files.eval_dir
    assert RunFiles.of_record(files.run_json) == files
    assert RunFiles.of_record(files.jsonl) is None


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 200))
def test_a_socket_sits_beside_its_jsonl_unless_that_path_is_too_long_for_the_kernel(length):
    jsonl = Path("/r") / ("d" * length) / "groups.jsonl"
    files = RunFiles(jsonl)
    beside = jsonl.with_name("groups.sock")
    if len(os.fsencode(beside)) <= 100:
        assert files.socket == beside and not files.socket_is_private
    else:
        assert files.socket_is_private and files.socket.name == f"{files.digest}.sock"
        assert files.socket.parent.name == f"vftui-{os.getuid()}"
        assert len(os.fsencode(files.socket)) < 108


def test_a_run_is_found_by_its_folder_its_jsonl_or_its_record_and_a_folder_of_two_is_refused(
    tmp_path,
):
    one = RunFiles(tmp_path / "a" / "groups.jsonl")
    one.folder.mkdir()
    one.run_json.write_text("{}")
    assert (
        RunFiles.find(one.folder) == RunFiles.find(one.jsonl) == RunFiles.find(one.run_json) == one
    )
    (one.folder / "b.run.json").write_text("{}")
    with pytest.raises(UserError, match=r"vftui attach .*: found 2 runs there"):
        RunFiles.find(one.folder, asked_by="vftui attach")
    assert RunFiles.all_in(tmp_path, depth=2) == [RunFiles(one.folder / "b.jsonl"), one]
    with pytest.raises(UserError, match="not a vftui run"):
        RunFiles.find(tmp_path / "a" / "other.jsonl")


def test_a_new_run_gets_a_folder_vftui_made_or_the_out_it_was_given_if_it_ends_in_jsonl(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    made = RunFiles.new(None, "owner/env")
    assert made.folder.is_dir() and made.in_runs_dir and made.made_by_vftui
    assert made.jsonl.name == "groups.jsonl" and made.folder.name.endswith("-owner-env")
    chosen = RunFiles.new(tmp_path / "mine.jsonl", "owner/env")
    assert chosen.jsonl == tmp_path / "mine.jsonl" and not chosen.in_runs_dir
    mine = made.folder.parent / "mine" / "groups.jsonl"
    assert RunFiles(mine).in_runs_dir and not RunFiles(mine).made_by_vftui
    with pytest.raises(UserError, match=r"must end in \.jsonl"):
        RunFiles.new(tmp_path / "mine.v2", "env")
    with pytest.raises(UserError, match="is a folder"):
        RunFiles.new(tmp_path, "env")


def test_a_new_run_over_an_existing_file_writes_beside_it_and_its_side_files_follow(tmp_path):
    out = tmp_path / "groups.jsonl"
    out.write_text("{}\n")
    output = open_new(out, "env")
    try:
        assert output.files == RunFiles(tmp_path / "groups_1.jsonl")
        assert output.lock.path == tmp_path / "groups_1.lock" and output.lock.path.exists()
    finally:
        output.lock.release()
    assert out.read_text() == "{}\n"


def _snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every entry under ``folder``: a file's bytes, else what it is (a link's target, a FIFO, a folder)."""
    seen: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.is_symlink():
            seen[name] = f"link to {os.readlink(path)}"
        elif path.is_file():
            seen[name] = path.read_bytes()
        else:
            seen[name] = "fifo" if path.is_fifo() else "folder"
    return seen


@settings(max_examples=60, deadline=None)
@given(
    st.sets(
        st.sampled_from([*SIDE_SUFFIXES, ".eval", ".jsonl", "_1.jsonl", "_1.html"]), min_size=1
    ),
    st.sampled_from(["file", "folder", "link", "fifo"]),
)
def test_a_new_run_takes_a_name_where_nothing_is_and_leaves_what_was_there(
    tmp_path_factory, taken, kind
):
    """Only the jsonl was looked at: a new run wrote over the user's notes.html, notes.run.json and
    notes.checkpoint.json, deleted a notes.lock and notes.sock, filled an eval's notes.eval/ folder and
    appended its drops to the run whose jsonl is notes.dropped.jsonl."""
    folder = tmp_path_factory.mktemp("taken")
    for suffix in taken:
        path = folder / f"notes{suffix}"
        if kind == "file":
            path.write_bytes(b'{"scores": [1], "tokens": [[1]]}\n')
        elif kind == "folder":
            path.mkdir()
            (path / "results.jsonl").write_text("mine\n")
        elif kind == "link":
            path.symlink_to(folder / "elsewhere")
        else:
            os.mkfifo(path)
    before = _snapshot(folder)
    try:
        output = open_new(folder / "notes.jsonl", "env")
    except UserError:  # --out itself a link, a folder, a FIFO: refused, as given
        assert ".jsonl" in taken and kind != "file"
        assert _snapshot(folder) == before
        return
    try:
        files = output.files
        assert files.taken_by == files.jsonl, "only its own new files are there"
        # the log is only ever appended to (a FIFO or a link there passed over): what was there stays
        made_or_appended = (files.lock_path, files.drops, files.log)
        assert all(not os.path.lexists(p) for p in files.side_files if p not in made_or_appended)
    finally:
        output.lock.release()
    after = _snapshot(folder)
    assert {k: v for k, v in after.items() if k in before} == before, "nothing there was touched"
    assert set(after) - set(before) == {files.jsonl.name, files.drops.name}
    assert files.jsonl.read_bytes() == files.drops.read_bytes() == b""


def test_a_live_run_at_a_later_name_is_passed_over_not_a_refusal(tmp_path):
    """Only the name asked for refuses for its live run: one at groups_1 refused a new run asking for groups
    (the old code took groups_2)."""
    (tmp_path / "groups.jsonl").write_text("{}\n")
    live = open_new(tmp_path / "groups_1.jsonl", "env")
    try:
        later = open_new(tmp_path / "groups.jsonl", "env")
        later.lock.release()
        assert later.files == RunFiles(tmp_path / "groups_2.jsonl")
        with pytest.raises(
            UserError, match=r"groups_1.jsonl is being written by another vftui run"
        ):
            open_new(tmp_path / "groups_1.jsonl", "env")
    finally:
        live.lock.release()
