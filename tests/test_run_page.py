"""The run's page is the report of its groups, built as they are written: the end of a run writes its
figures alone (kept on the way, equal to those ``vftui report`` reads from the file), a killed run leaves a
page a browser reads, a resumed run's page holds each group once, and its rollouts are always those of the
jsonl the run wrote, as the report draws them."""

from __future__ import annotations

import json
import re
import shutil
import signal
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import read_jsonl, run_cli, start_cli, wait_for_lines, wait_until
from vftui.comparing.comparison import measure
from vftui.report import page as report_page
from vftui.report.run_page import MARK, UNFINISHED, RunPage
from vftui.run_files import store
from vftui.run_files.files import RunFiles
from vftui.run_files.results import load
from vftui.text import wording

GROUP_TITLE = re.compile(rb"<h3>group ([\d,]+): item ")
REWARD = re.compile(rb" rollout \d+: reward ([^,<]*)")
SUMMARY = re.compile(rb'<div id="summary">.*</div>(?=<script>)', re.DOTALL)


def rollouts(page: bytes) -> bytes:
    """What a reader sees of the rollouts: the page less its marks and its figures, whitespace runs as one
    space."""
    return re.sub(rb"\s+", b" ", SUMMARY.sub(b"", MARK.sub(b"", page)))


def summary(page: bytes) -> bytes:
    found = SUMMARY.search(page)
    assert found is not None, "the page has its figures"
    return found.group()


def reports_figures(jsonl: Path) -> bytes:
    """The summary ``vftui report`` writes of the file as it is on disk."""
    source = load(jsonl)
    report = report_page.Report([source], *measure([source], None))
    keys = report.keys()
    return f'<div id="summary">{report_page.summary(report, keys, set(keys))}</div>'.encode()


def whole_file_render(jsonl: Path, folder: Path) -> bytes:
    """The page of the whole file in one pass, from a copy of the same name with no page beside it."""
    folder.mkdir()
    copy = folder / jsonl.name
    shutil.copyfile(jsonl, copy)
    return RunPage.open(RunFiles(copy)).finish().read_bytes()


def group_line(texts: list[str], scores: list[float]) -> bytes:
    return store.encode_line(
        {
            "tokens": [[1]] * len(texts),
            "masks": [[1]] * len(texts),
            "scores": scores,
            "messages": [[{"role": "assistant", "content": text}] for text in texts],
        }
    )


def numbers(page: bytes) -> list[int]:
    return [int(i.replace(b",", b"")) for i in GROUP_TITLE.findall(page)]


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
        page = RunPage.open(files)
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
        page = RunPage.open(files)
        with files.jsonl.open("ab") as f:
            f.writelines(group_line(*group) for group in after)
        final = page.finish().read_bytes()
        expected = whole_file_render(files.jsonl, Path(folder) / "whole")
        lines = len(read_jsonl(files.jsonl))
        figures = reports_figures(files.jsonl) if lines else b""
    assert rollouts(final) == rollouts(expected)
    assert numbers(final) == list(range(1, lines + 1)), "each group once"
    if lines:
        assert summary(final) == figures, "the figures kept on the way are the file's"
    else:
        assert b"No groups were written." in final
    assert final.endswith(b"</html>\n")
    assert b"<b>x</b>" not in final and b'href="javascript' not in final


@pytest.mark.unit
def test_the_page_shows_the_models_text_as_written_and_links_nothing_it_wrote(tmp_path):
    """No Markdown: emphasis, raw HTML and links of every scheme stay the text the model wrote; the only
    links on the page are the item table's to the rollouts on it."""
    answer = (
        "hello **there** <b>x</b> <script>alert(1)</script> [a](javascript:alert(1)) "
        "![d](javascript:alert(4)) [ok](https://example.com/a?b=1&c=2)\n\n[1]: javascript:alert(3)"
    )
    jsonl = tmp_path / "groups.jsonl"
    jsonl.write_bytes(group_line([answer, "a\n\nb"], [1.0, 0.0]) + group_line(["x"], [-0.5]))
    page = RunPage.open(RunFiles(jsonl)).finish().read_text()
    assert "hello **there** &lt;b&gt;x&lt;/b&gt; &lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "[a](javascript:alert(1)) ![d](javascript:alert(4))" in page
    assert "[ok](https://example.com/a?b=1&amp;c=2)" in page
    hrefs = re.findall(r'(?:href|src)="([^"]*)"', page)
    assert hrefs and all(re.fullmatch(r"#item-[0-9a-f]{16}", h) for h in hrefs), hrefs
    assert json.loads(jsonl.read_text().splitlines()[0])["messages"][0][0]["content"] == answer


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
    return numbers(page.read_bytes()) if page.exists() else []


def rewards(page: bytes) -> list[str]:
    return [r.decode() for r in REWARD.findall(rollouts(page))]


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
    assert UNFINISHED.encode() in killed and b'id="summary"' not in killed
    shown = sections(page)
    assert shown == list(range(1, len(shown) + 1)) and lines - len(shown) <= 2, (
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
    assert len(groups) == STEPS and sections(page) == list(range(1, STEPS + 1)), "each group once"
    assert rewards(final) == [wording.number(s) for g in groups for s in g["scores"]]
    assert rollouts(final) == rollouts(whole_file_render(out, tmp_path / "whole"))
    assert summary(final) == reports_figures(out), "the figures of the groups before the kill too"


def test_the_page_is_of_the_lines_the_run_wrote_and_its_end_reads_no_file(tmp_path):
    """The end of the run writes the figures it kept: with the jsonl moved away mid-run and a decoy left
    at its name, the page holds the run's own groups and figures (the old end re-read the file at the
    name); the page seen mid-run is where the finished one begins, the same file, appended to."""
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
    assert b"DECOY" not in final and sections(page) == list(range(1, STEPS + 1))
    assert final.startswith(early) and page.stat().st_ino == inode
    assert rollouts(final) == rollouts(whole_file_render(moved, tmp_path / "whole"))
    assert rewards(final) == [wording.number(s) for g in read_jsonl(moved) for s in g["scores"]]
    figures = re.compile(rb"<h2>Figures</h2>.*?</table>", re.DOTALL)
    assert figures.search(final).group() == figures.search(reports_figures(moved)).group()


# -- damaged and hostile files ---------------------------------------------------------------------


def meta_line(score: float, item: int) -> bytes:
    return store.encode_line({"tokens": [[1]], "scores": [score], "vftui": {"item": item}})


DAMAGED = {
    "a torn line": b'{"tokens":[[1]],"sco\n',
    "a line not UTF-8": b'{"tokens":[],"scores":[1.0],"messages":[[{"content":"\xff"}]]}\n',
    "a JSON array": b"[1, 2]\n",
    "a group with a NaN metric": b'{"tokens":[],"scores":[0.75],"vftui":{"metrics":{"f":[NaN]}}}\n',
    "a group without tokens": b'{"scores":[0.5]}\n',
    "blank lines": b"\n \n",
}


@pytest.mark.unit
@pytest.mark.parametrize("damage", list(DAMAGED))
def test_the_figures_of_a_damaged_jsonl_are_the_reports_and_a_resume_keeps_them(tmp_path, damage):
    """A line the report skips is one the page says it skipped, and a group the report reads (a NaN in a
    metric, no tokens) is on the page too, with the same key: the page's figures are ``vftui report``'s,
    at the end of the run and after a resume re-reads the groups before its mark."""
    jsonl = tmp_path / "groups.jsonl"
    jsonl.write_bytes(meta_line(1.0, 0) + DAMAGED[damage] + b'{"tokens":[],"scores":[0.25]}\n')
    expected = reports_figures(jsonl)
    assert summary(RunPage.open(RunFiles(jsonl)).finish().read_bytes()) == expected
    with jsonl.open("ab") as f:
        f.write(meta_line(0.0, 7))
    resumed = RunPage.open(RunFiles(jsonl)).finish().read_bytes()
    assert summary(resumed) == reports_figures(jsonl)
    assert numbers(resumed) == list(range(1, len(GROUP_TITLE.findall(resumed)) + 1))


FORGED = st.one_of(st.integers(0, 2**64), st.integers(2**64, 10**30)).map(lambda n: str(n).encode())
FORGED |= st.just(b"1" + b"0" * 5000)  # past the digits Python parses as an int


@pytest.mark.unit
@settings(max_examples=60, deadline=None)
@given(
    span=st.tuples(FORGED, FORGED, FORGED),
    groups=FORGED,
    real=st.booleans(),
    at=st.integers(0, 2),
)
def test_a_page_whose_marks_were_forged_is_rebuilt_not_a_crash(span, groups, real, at):
    """A mark edited by hand (numbers past any file, past a C long, past Python's int parsing; or a real
    line's span with a forged count of groups) is not trusted: the resume draws each group once, numbered
    from 1, and never fails the run."""
    with tempfile.TemporaryDirectory() as folder:
        files = RunFiles(Path(folder) / "groups.jsonl")
        files.jsonl.touch()
        page = RunPage.open(files)
        for i in range(3):
            with files.jsonl.open("ab") as f:
                f.write(meta_line(i / 4, i))
            page.follow()
        page.finish()
        text = files.html.read_bytes()
        marks = list(MARK.finditer(text))
        assert len(marks) == 3, "a mark after each group"
        mark = marks[at]
        begin, end, crc = mark.groups()[1:] if real else span
        forged = b"<!-- vftui page: %s groups, jsonl bytes %s-%s, crc %s -->\n" % (
            groups, begin, end, crc,
        )  # fmt: skip
        files.html.write_bytes(text[: mark.start()] + forged + text[mark.end() :])
        final = RunPage.open(files).finish().read_bytes()
    assert numbers(final) == [1, 2, 3], "each group once, numbered from 1"
    assert final.endswith(b"</html>\n")


@pytest.mark.unit
def test_a_page_whose_figures_cannot_be_made_is_a_warning_not_a_failed_run(tmp_path):
    """The end of the page reads the run's run.json; damaged under it (by hand, another tool), the page
    stays unfinished, saying so (a warning says why), and its run ends as it would have: ``finish`` raises
    nothing."""
    jsonl = tmp_path / "groups.jsonl"
    jsonl.write_bytes(meta_line(1.0, 0))
    page = RunPage.open(RunFiles(jsonl))
    RunFiles(jsonl).run_json.write_bytes(b"{not json")
    assert page.finish() is None
    written = RunFiles(jsonl).html.read_bytes()
    assert numbers(written) == [1] and UNFINISHED.encode() in written


def test_a_group_of_many_rollouts_draws_no_more_than_the_pages_bytes(tmp_path):
    """One group can hold more rollouts than the page has room for (600,000 empty ones: a 1.8 MB line,
    70 MB of HTML): the page draws them until it holds ``BYTES`` and says how many it left out; its
    figures count every one."""
    jsonl = tmp_path / "groups.jsonl"
    count = 600_000
    jsonl.write_bytes(store.encode_line({"tokens": [], "scores": [0.5] * count}) + meta_line(1, 1))
    written = RunPage.open(RunFiles(jsonl)).finish().read_bytes()
    figures = summary(written)
    drawn = written.count(b"<details>")
    assert len(written) - len(figures) < report_page.BYTES + 2**20
    assert 0 < drawn < count
    assert f"{count - drawn:,} more rollouts of this group are not drawn".encode() in written
    assert f'<td class="n">{count + 1:,}</td>'.encode() in figures, (
        "the figures count every rollout"
    )


def test_past_the_tables_rows_the_items_on_the_page_are_listed_first(tmp_path):
    """The table holds ``TABLE_ROWS`` items: those whose rollouts the page shows first, as the report's does
    (it listed the first 20,000 keys: a full page's items, sorting last, were not in it)."""
    jsonl = tmp_path / "groups.jsonl"
    full = {"tokens": [], "scores": [0.5] * 600_000, "vftui": {"example_id": "zzz"}}
    later = (
        store.encode_line({"tokens": [], "scores": [1.0], "vftui": {"example_id": f"a{n:05}"}})
        for n in range(report_page.TABLE_ROWS + 1)
    )
    jsonl.write_bytes(store.encode_line(full) + b"".join(later))
    figures = summary(RunPage.open(RunFiles(jsonl)).finish().read_bytes())
    table = figures[figures.index(b'<table id="items"') :]
    assert table.count(b"<tr>") == report_page.TABLE_ROWS + 1, "its head and TABLE_ROWS items"
    assert f'<a href="#{report_page.anchor("zzz")}">zzz</a>'.encode() in table


def test_a_runs_page_and_compare_name_the_versions_that_made_it(tmp_path):
    """An sft run's page said "versions unknown" (a low of issue 42): its run.json now records them, as an
    eval's metadata.json does, and its page and compare read them from there."""
    from importlib.metadata import version

    out = tmp_path / "made.jsonl"
    result = run_cli(["run", "--no-ui", "--steps", "2", "--out", str(out)], tmp_path)
    assert result.returncode == 0, result.stderr
    made_by = f"atroposlib {version('atroposlib')}, verifiers {version('verifiers')}, vftui {version('vftui')}"
    assert json.loads(out.with_suffix(".run.json").read_text())["version_info"]["vftui"] == version(
        "vftui"
    )
    assert f"versions</th><td>{made_by}" in out.with_suffix(".html").read_text()
    compared = run_cli(["compare", "--no-ui", str(out), str(out)], tmp_path)
    assert any(
        line.split() == ["versions", *made_by.split(), *made_by.split()]
        for line in compared.stdout.splitlines()
    ), compared.stdout
    record = out.with_suffix(".run.json")  # a mistyped version_info is unknown, never a damaged run
    record.write_text(json.dumps({**json.loads(record.read_text()), "version_info": ["a"]}))
    again = run_cli(["compare", "--no-ui", str(out), str(out)], tmp_path)
    assert again.returncode == 0, again.stderr
    assert any(
        line.split() == ["versions", "unknown", "unknown"] for line in again.stdout.splitlines()
    )
