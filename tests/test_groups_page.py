"""The run's html page is built as its groups are written: the end of a run writes its tail alone, a killed
run leaves a page a browser reads, a resumed run's page holds each group once, and it always says what the
jsonl the run wrote says (the whole-file render's content)."""

from __future__ import annotations

import re
import shutil
import signal
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import read_jsonl, run_cli, start_cli, wait_for_lines, wait_until
from vftui.collector.sft.html_page import MARK, NO_DATA, GroupsPage
from vftui.run_files import store
from vftui.run_files.files import RunFiles

GROUP_TITLE = re.compile(rb"<summary>Group (\d+)</summary>")
REWARD = re.compile(rb"<strong>Reward:</strong> ([^<]*)</p>")


def content(page: bytes) -> bytes:
    """What a reader sees: the page less its marks, whitespace runs as one space."""
    return re.sub(rb"\s+", b" ", MARK.sub(b"", page))


def whole_file_render(jsonl: Path, folder: Path) -> bytes:
    """The page of the whole file in one pass, from a copy of the same name with no page beside it."""
    folder.mkdir()
    copy = folder / jsonl.name
    shutil.copyfile(jsonl, copy)
    return GroupsPage.open(RunFiles(copy)).finish().read_bytes()


def group_line(texts: list[str], scores: list[float]) -> bytes:
    return store.encode_line(
        {
            "tokens": [[1]] * len(texts),
            "masks": [[1]] * len(texts),
            "scores": scores,
            "messages": [[{"role": "assistant", "content": text}] for text in texts],
        }
    )


# -- the page as a run writes it, in-process on real files -----------------------------------------

TEXT = st.lists(
    st.sampled_from([*"ab z\n*_`#<>&\"'", "<b>x</b>", "[l](javascript:1)", "&amp;"]), max_size=12
).map("".join)
GROUP = st.integers(1, 3).flatmap(
    lambda n: st.tuples(
        st.lists(TEXT, min_size=n, max_size=n), st.lists(st.floats(-1, 1), min_size=n, max_size=n)
    )
)


@pytest.mark.unit
@settings(max_examples=60, deadline=None)
@given(
    before=st.lists(st.lists(GROUP, max_size=3), max_size=4),
    after=st.lists(GROUP, max_size=3),
    page_cut=st.floats(0, 1),
    torn=st.booleans(),
)
def test_a_page_cut_anywhere_and_resumed_says_what_its_jsonl_says_each_group_once(
    before, after, page_cut, torn
):
    """Groups written in batches, followed after each; then a crash cuts the page anywhere (its tail, a
    section, a mark, its head) and perhaps tears the jsonl's last line (the page ahead of the file, as after
    a power cut); a resume cuts the torn line, reopens the page and writes the rest: the page is the
    whole-file render's, each group once, the model's markup shown as text."""
    with tempfile.TemporaryDirectory() as folder:
        files = RunFiles(Path(folder) / "groups.jsonl")
        files.jsonl.touch()
        page = GroupsPage.open(files)
        for batch in before:
            with files.jsonl.open("ab") as f:
                f.writelines(group_line(*group) for group in batch)
            page.follow()
        page.finish()
        written = files.html.read_bytes()
        with files.html.open("r+b") as f:
            f.truncate(int(len(written) * page_cut))
        if torn and files.jsonl.stat().st_size:
            with files.jsonl.open("r+b") as f:
                f.truncate(files.jsonl.stat().st_size - 3)
            store.repair_tail(files.jsonl)  # as a resume does
        page = GroupsPage.open(files)
        with files.jsonl.open("ab") as f:
            f.writelines(group_line(*group) for group in after)
        final = page.finish().read_bytes()
        expected = whole_file_render(files.jsonl, Path(folder) / "whole")
        lines = len(read_jsonl(files.jsonl))
    assert content(final) == content(expected)
    assert [int(i) for i in GROUP_TITLE.findall(final)] == list(range(lines)), "each group once"
    assert final.count(NO_DATA.encode()) == (lines == 0) and final.endswith(b"</html>\n")
    assert b"<b>x</b>" not in final and b'href="javascript' not in final


@pytest.mark.unit
def test_the_page_of_plain_text_is_atroposlibs_own(tmp_path):
    """With nothing to escape, the page is atroposlib's jsonl2html render of the file, in content."""
    from atroposlib.frontend import jsonl2html

    jsonl = tmp_path / "groups.jsonl"
    jsonl.write_bytes(
        group_line(["hello **there**", "a\n\nb"], [1.0, 0.0]) + group_line(["x"], [-0.5])
    )
    page = GroupsPage.open(RunFiles(jsonl))
    ours = page.finish().read_bytes()
    jsonl2html.generate_html(str(jsonl), str(tmp_path / "theirs.html"))
    assert content(ours) == content((tmp_path / "theirs.html").read_bytes())


# -- the page of a real run ------------------------------------------------------------------------


STEPS = 12  # two groups a second: the run lasts about 6 s


def one_at_a_time(out: Path, steps: int, latency: float) -> list[str]:
    """A run of two-rollout groups, one in flight at a time, each taking about ``latency`` s."""
    return [
        "run", "--no-ui", "--steps", str(steps), "--group-size", "2", "--concurrency", "2",
        "--sim-latency", str(latency), "--out", str(out),
    ]  # fmt: skip


def grown_to(page: Path, count: int, out: Path, steps: int) -> None:
    """Until the page holds ``count`` sections, the run still collecting (fails if its groups are all in first)."""

    def grown() -> bool:
        assert out.read_bytes().count(b"\n") < steps, "the page held no group until the run's end"
        return len(sections(page)) >= count

    wait_until(grown, "the page does not grow with the groups", 30)


def sections(page: Path) -> list[int]:
    return [int(i) for i in GROUP_TITLE.findall(page.read_bytes())] if page.exists() else []


def rewards(page: bytes) -> list[str]:
    return [r.decode() for r in REWARD.findall(page)]


def test_a_killed_run_leaves_a_readable_page_and_its_resume_holds_each_group_once(tmp_path):
    out = tmp_path / "groups.jsonl"
    page = out.with_suffix(".html")
    proc = start_cli(one_at_a_time(out, STEPS, 0.5), tmp_path)
    wait_for_lines(out, 3, proc)
    grown_to(page, 3, out, STEPS)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    killed = page.read_bytes()
    lines = len(read_jsonl(out))
    assert killed.startswith(b"<!DOCTYPE html>") and b"</html>" not in killed
    shown = sections(page)
    assert shown == list(range(len(shown))) and lines - len(shown) <= 2, (
        "in order, behind by those in flight"
    )
    data = out.read_bytes()
    out.write_bytes(
        data[:-5]
    )  # the last line torn, as a power cut would leave it: the page is ahead

    result = run_cli(["run", "--no-ui", "--resume", str(out)], tmp_path)
    assert result.returncode == 0, result.stderr
    groups = read_jsonl(out)
    final = page.read_bytes()
    assert len(groups) == STEPS and sections(page) == list(range(STEPS)), "each group once"
    assert rewards(final) == [str(s) for g in groups for s in g["scores"]]
    assert content(final) == content(whole_file_render(out, tmp_path / "whole"))


def test_the_page_is_of_the_lines_the_run_wrote_and_its_end_reads_no_file(tmp_path):
    """The end of the run writes the page's tail alone: with the jsonl moved away mid-run and a decoy left
    at its name, the page holds the run's own groups (the old end re-read the file at the name); the page
    seen mid-run is where the finished one begins, the same file, appended to."""
    out = tmp_path / "groups.jsonl"
    page = out.with_suffix(".html")
    proc = start_cli(one_at_a_time(out, STEPS, 0.5), tmp_path)
    wait_for_lines(out, 2, proc)
    grown_to(page, 2, out, STEPS)
    early, inode = page.read_bytes(), page.stat().st_ino
    moved = tmp_path / "moved" / "groups.jsonl"
    moved.parent.mkdir()
    out.rename(moved)
    out.write_bytes(group_line(["DECOY"], [1.0]))
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    final = page.read_bytes()
    assert b"DECOY" not in final and sections(page) == list(range(STEPS))
    assert final.startswith(early) and page.stat().st_ino == inode
    assert content(final) == content(whole_file_render(moved, tmp_path / "whole"))
    assert rewards(final) == [str(s) for g in read_jsonl(moved) for s in g["scores"]]
