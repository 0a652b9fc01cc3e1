"""``vftui report`` (issue 33.2): one HTML file that opens from disk and fetches nothing, with the figures
``vftui compare`` prints, a sortable and filterable item table and every rollout, where a hostile answer
stays text; bounded in size. Through the real CLI on a real run and real evals of the built-in
environment, and on files written with hostile text; the escaping by itself with Hypothesis.

Here the page is checked with Python's html.parser (its tags balance, no tag or attribute fetches or
runs anything but the page's one script); tests/test_report_browser.py opens it in Chromium."""

from __future__ import annotations

import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import read_jsonl, run_cli
from vftui.group_format import MASKED
from vftui.report.assets import SCRIPT
from vftui.report.html_text import escaped
from vftui.run_files.files import RunFiles
from vftui.run_files.lock import RunLock
from vftui.text.printable import printable

VOID = {"meta", "input", "br", "img", "hr", "link", "wbr", "source", "area", "col", "embed"}


class Page(HTMLParser):
    """A page read as a browser's parser would tokenize it: its tags (checked to balance), attributes,
    scripts, and text."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.open: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.cells: list[str] = []
        self.scripts: list[str] = []
        self.feed(text)
        self.close()
        assert not self.open, f"tags left open: {self.open[-5:]}"

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        assert self.open and self.open[-1] == tag, f"</{tag}> closes {self.open[-3:]}"
        self.open.pop()

    def handle_data(self, data):
        if self.open and self.open[-1] == "script":
            self.scripts.append(data)
        elif self.open and self.open[-1] == "td":
            self.cells.append(data)
        self.text.append(data)

    @property
    def all_text(self) -> str:
        return "".join(self.text)

    def named(self, tag: str) -> list[dict[str, str | None]]:
        return [attrs for name, attrs in self.tags if name == tag]


def item_rows(raw: str) -> int:
    """The rows of the per-item table."""
    return raw.split('<table id="items"')[1].split("</table>")[0].count("<tr>") - 1


def fetches_nothing(raw: str, page: Page) -> None:
    """No tag loads or runs anything from elsewhere, and nothing but the page's own script runs."""
    assert page.scripts == [SCRIPT] and page.named("script") == [{}], "one script, inline, ours"
    assert not page.named("link") and not page.named("img") and not page.named("iframe")
    for tag, attrs in page.tags:
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)
            assert name not in ("src", "srcset", "action", "formaction", "background"), (tag, name)
            if name == "href":
                assert value.startswith("#"), f"a link out of the page: {value}"
            if name != "xmlns":  # the SVG namespace's name, which nothing fetches
                assert "://" not in (value or ""), (tag, name, value)
    assert "url(" not in raw and "@import" not in raw
    assert "default-src 'none'" in page.named("meta")[1]["content"], "the policy fetches nothing"


# -- the escaping --------------------------------------------------------------------------------------

HOSTILE = [
    "<script>alert(1)</script>",
    "</textarea><img src=x onerror=alert(2)>",
    '" onmouseover="alert(3)',
    "' autofocus onfocus='alert(4)",
    "[a](javascript:alert(5)) javascript:alert(6)",
    "</details></section></table><b>x</b>",
    "&amp; &lt; &#x3c;",
    "\x1b]0;title\x07 \u202eevil\u202c \x00",
    "\ud800 lone",
]


@pytest.mark.unit
@settings(max_examples=200, deadline=None)
@given(st.text() | st.sampled_from(HOSTILE) | st.lists(st.sampled_from(HOSTILE)).map("".join))
def test_escaped_text_reads_back_as_itself_between_tags_and_in_either_quoted_attribute(text):
    e = escaped(text)
    assert not set(e) & set("<>\"'"), "nothing that opens a tag or ends an attribute"
    expected = printable(re.sub("[\ud800-\udfff]", "\ufffd", text))
    page = Page(f"<div title=\"{e}\" lang='{e}'>{e}</div><textarea>{e}</textarea>")
    assert [tag for tag, _ in page.tags] == ["div", "textarea"]
    assert page.tags[0][1] == {"title": expected, "lang": expected}
    assert page.all_text == expected * 2
    e.encode()  # a lone surrogate would not encode: the page is valid UTF-8


# -- a run, and two evals compared, through the CLI -----------------------------------------------------


def reported(tmp_path: Path, *args: str) -> tuple[str, Page]:
    out = tmp_path / "report.html"
    result = run_cli(["report", *args, "-o", str(out)], tmp_path)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert f"report written to {out}" in result.stdout
    raw = out.read_text(encoding="utf-8")
    page = Page(raw)
    fetches_nothing(raw, page)
    return raw, page


@pytest.mark.e2e
def test_a_run_of_the_built_in_env_is_one_page_with_its_figures_charts_items_and_marked_rollouts(
    tmp_path,
):
    out = tmp_path / "run" / "groups.jsonl"
    done = run_cli(
        ["run", "--no-ui", "--steps", "4", "--group-size", "3", "--out", str(out)], tmp_path
    )
    assert done.returncode == 0, done.stderr
    raw, page = reported(tmp_path, str(out))
    groups = read_jsonl(out)
    text = page.all_text
    assert "Paired result" not in text, "one source: nothing to pair"
    assert "Mean reward over groups" in text and "Reward histogram" in text
    assert len(page.named("svg")) == 2 and len(page.named("polyline")) == 1
    rows = item_rows(raw)
    keys = {
        m["item"] if m.get("example_id") is None else m["example_id"]
        for m in (g["vftui"] for g in groups)
    }
    assert rows == len(keys)
    assert raw.count("<details>") == 4 * 3, "every rollout, folded"
    first = groups[0]["masks"][0]
    trained = len(first) - first.count(MASKED)
    assert f"trained {trained:,} tokens, masked {first.count(MASKED):,}" in text
    assert 'class="msg trained"' in raw and 'class="msg masked"' in raw
    answer = groups[0]["messages"][0][-1]["content"] or ""
    assert printable(answer) in text, "the rollout's answer, readable"


@pytest.fixture
def two_evals(paired_evals) -> list[str]:
    """The same 12 items at temperature 0 (always right) and at 2 (often wrong)."""
    return [str(paired_evals["cold"]), str(paired_evals["hot"])]


@pytest.mark.e2e
def test_two_evals_compared_hold_the_figures_compare_prints_the_paired_result_first(
    two_evals, tmp_path
):
    printed = run_cli(["compare", "--no-ui", "--pass-threshold", "1.2", *two_evals], tmp_path)
    assert printed.returncode == 0, printed.stderr
    raw, page = reported(tmp_path, "--pass-threshold", "1.2", *two_evals)
    text = page.all_text
    lines = printed.stdout.splitlines()
    said = [
        line.strip()
        for line in lines
        if line.startswith(("  B - A reward", "    pass@1", "    McNemar", "    pass -> fail"))
        or line.startswith(("    fail -> pass", "    by function", "    items: "))
    ]
    assert len(said) >= 6, lines  # "by function" where the sources share a function
    for line in said:
        assert line in text, line
    figures = [line for line in lines if re.match(r"  (reward|pass@1) {2}", line)]
    assert len(figures) == 2, lines
    for line in figures:
        label, *values = re.split(r"\s{2,}", line.strip())
        assert values and all(v in page.cells for v in values), (label, values)
    assert text.index("Paired result") < text.index("Figures") < text.index("Items")
    assert len(page.named("polyline")) == 2, "a line per source"
    assert raw.count("<details>") == 2 * 12 * 4


# -- hostile text, the size cap, bad input ---------------------------------------------------------------


def groups_file(path: Path, items: int, rollouts: int, answer: str, key: str = "", score=1.0):
    """``items`` groups, with ``answer`` from the model, a tool call and a function of ``answer``'s name."""
    lines = []
    for n in range(items):
        message = [
            {"role": "user", "content": f"sort {answer}"},
            {
                "role": "assistant",
                "content": answer,
                "tool_calls": [
                    {
                        "id": answer,
                        "type": "function",
                        "function": {"name": answer, "arguments": answer},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": answer, "content": answer},
        ]
        lines.append(
            {
                "tokens": [[1, 2, 3]] * rollouts,
                "masks": [[MASKED, 2, 3]] * rollouts,
                "scores": [score] * rollouts,
                "messages": [message] * rollouts,
                "vftui": {
                    "item": n,
                    "example_id": f"{key}{n}",
                    "metrics": {answer: [0.5] * rollouts},
                },
            }
        )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


@pytest.mark.e2e
def test_a_hostile_answer_key_and_function_name_stay_text_in_a_comparison(tmp_path):
    hostile = "".join(HOSTILE)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    groups_file(a, 3, 2, hostile, key=hostile, score=1.0)
    groups_file(b, 3, 2, hostile, key=hostile, score=0.0)  # every item flips pass -> fail
    raw, page = reported(tmp_path, str(a), str(b))
    shown = printable(hostile.replace("\ud800", "\ufffd"))
    text = page.all_text
    assert text.count(shown) >= 3 * 2 * 2 * 4, "answer, tool call, tool reply, prompt: all text"
    assert f"pass -> fail: 3 items (ids {shown}0, " in text, "the flipped items' keys, as text"
    assert [tag for tag, _ in page.tags if tag in ("img", "b", "textarea", "script")] == ["script"]
    assert "<script>alert" not in raw and "<img" not in raw and "</textarea>" not in raw
    assert "javascript:" not in "".join(str(v) for _, attrs in page.tags for v in attrs.values())


@pytest.mark.e2e
def test_beyond_the_cap_a_sample_of_items_is_shown_and_the_page_says_so(tmp_path):
    source = tmp_path / "big.jsonl"
    groups_file(source, 300, 4, "x")
    raw, page = reported(tmp_path, str(source), "--max-rollouts", "100")
    assert "This page shows 100 of 1,200 rollouts (25 of 300 items: chosen at random)" in (
        page.all_text
    )
    assert raw.count("<details>") == 100
    assert item_rows(raw) == 300, "the table lists them all"
    whole, _ = reported(tmp_path, str(source), "--max-rollouts", "5000")
    assert whole.count("<details>") == 1200 and "This page shows" not in whole


@pytest.mark.e2e
def test_a_long_answer_is_cut_and_says_how_much_more_there_is(tmp_path):
    source = tmp_path / "long.jsonl"
    groups_file(source, 1, 1, "x" * 30_000)
    raw, page = reported(tmp_path, str(source))
    assert page.all_text.count("more characters, in the source file") == 4
    assert page.all_text.count("… 10,000 more characters") == 2, "the answer and the tool's reply"
    assert len(raw) < 200_000, "user, answer, tool call and reply cut; the labels cut"


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda p: None, "no such file or folder"),
        (lambda p: p.write_text(""), "no results in it"),
        (lambda p: p.write_text('{"a": 1}\n'), "neither groups"),
    ],
)
def test_bad_input_is_one_sentence_and_exit_2(tmp_path, make, said):
    source = tmp_path / "source.jsonl"
    make(source)
    result = run_cli(["report", str(source), "-o", str(tmp_path / "r.html")], tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert said in result.stderr.strip().splitlines()[-1], result.stderr
    assert not (tmp_path / "r.html").exists()


@pytest.mark.e2e
def test_a_link_at_the_output_is_refused_and_its_target_untouched(tmp_path):
    source = tmp_path / "g.jsonl"
    groups_file(source, 1, 1, "ok")
    victim = tmp_path / "victim"
    victim.write_text("mine")
    (tmp_path / "r.html").symlink_to(victim)
    result = run_cli(["report", str(source), "-o", str(tmp_path / "r.html")], tmp_path)
    assert result.returncode == 2 and "is a symbolic link" in result.stderr, result.stderr
    assert victim.read_text() == "mine"


@pytest.mark.e2e
def test_a_live_run_s_own_page_or_file_is_refused_as_the_output(tmp_path):
    """A running run writes NAME.html beside its jsonl: ``-o NAME.html`` replaced it without a word. Its lock
    held as a live run holds it; let go, the (ended) run's page is a page like any."""
    source = tmp_path / "g.jsonl"
    groups_file(source, 1, 1, "ok")
    run = RunFiles(tmp_path / "live.jsonl")
    run.jsonl.write_text("")
    own = "<!DOCTYPE html><title>the run's own page</title>\n"
    run.html.write_text(own)
    held = RunLock(run).acquire("no")
    try:
        for out, what in ((run.html, "the page"), (run.jsonl, "a file")):
            result = run_cli(["report", str(source), "-o", str(out)], tmp_path)
            assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
            said = result.stderr.strip().splitlines()[-1]
            assert f"-o {out} is {what} of the live run {run.jsonl} (pid {os.getpid()})" in said
            assert "name another file, like -o " in said, said
        assert run.html.read_text() == own and run.jsonl.read_text() == ""
        beside = run_cli(
            ["report", str(source), "-o", str(tmp_path / "live-report.html")], tmp_path
        )
        assert beside.returncode == 0, beside.stderr
    finally:
        held.release()
    ended = run_cli(["report", str(source), "-o", str(run.html)], tmp_path)
    assert ended.returncode == 0, ended.stderr
    assert run.html.read_text() != own


@pytest.mark.e2e
def test_three_sources_show_each_item_s_way_through_them_and_its_rollouts_side_by_side(tmp_path):
    """Steps of a run or checkpoints: each item's mean reward from one source to the next (a sparkline in
    the table, sorted by the change from the first to the last; the means above its rollouts), and each
    source's rollouts in a column of its own."""
    paths = [tmp_path / f"{name}.jsonl" for name in "abc"]
    for path, score in zip(paths, (1.0, 0.0, 0.5), strict=True):
        groups_file(path, 3, 2, "Ada, Zoe", score=score)
    raw, page = reported(tmp_path, *map(str, paths))
    assert "over the sources" in page.all_text
    labels = [a["aria-label"] for a in page.named("svg") if a.get("width") == "120"]
    assert labels == ["1, 0, 0.5"] * 3, labels
    assert raw.count('data-v="-0.5"><svg') == 3, "sorted by the last source's mean less the first's"
    assert page.all_text.count("mean reward: A 1.000 → B 0.000 → C 0.500") == 3
    assert raw.count('<div class="source">') == 3 * 3
