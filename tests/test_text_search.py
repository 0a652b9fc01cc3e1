"""Full-text search, the filter's ``~word`` term: over prompts, completions and tool calls, in any case;
the same groups whether they are in memory (a run), rows of a viewed file (``GroupFile.search``) or
read for ``vftui export --where``."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import REPO, run_cli, until
from vftui.figures.group_filter import in_messages, parse_filter, search_terms, searchable
from vftui.run_files.groupfile import GroupFile, group_event

FIXTURE = REPO / "tests/data/groups.jsonl"


def fixture_groups() -> list[dict]:
    return [json.loads(line) for line in FIXTURE.read_text().splitlines()]


def read_all(rows: GroupFile) -> GroupFile:
    rows.read(lambda event: None, "")
    return rows


@pytest.mark.unit
def test_a_search_looks_in_contents_parts_reasoning_and_tool_calls_in_any_case():
    conversations = [
        [
            {"role": "user", "content": [{"type": "text", "text": "Sort ZENO"}]},
            {"role": "assistant", "content": None, "reasoning_content": "Hmm, alphabet"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "lookup", "arguments": '{"q": "Gemma"}'}}],
            },
            {"role": "tool", "content": "ok"},
        ],
        [{"role": "assistant", "tool_calls": [{"name": "flat_call", "arguments": {"k": 1}}]}],
    ]
    text = searchable(conversations)
    for needle in ("sort zeno", "alphabet", "lookup", '"q": "gemma"', "flat_call", '"k": 1'):
        assert needle in text
    assert "role" not in text and "assistant" not in text, "keys and roles are not searched"


@pytest.mark.unit
def test_the_filter_reads_quoted_phrases_and_refuses_what_it_cannot_read():
    assert search_terms('varied ~Sven ~"add these" reward>0.1') == ["sven", "add these"]
    groups = [group_event(n, raw) for n, raw in enumerate(fixture_groups(), start=1)]
    phrase = parse_filter('~"whole list again: sven"')
    assert [g.item for g in groups if phrase(g)] == [2]
    for bad, said in (('~"open', "no closing quotation"), ("~", "searches for what follows")):
        with pytest.raises(ValueError, match=said):
            parse_filter(bad)


words = st.sampled_from(
    ["sven", "zeno", "felix", "sort", "nobody-says-this", "alphabetically: e", "</", "dara"]
)


@pytest.mark.unit
@settings(max_examples=30, deadline=None)
@given(st.lists(words, min_size=1, max_size=3, unique=True))
def test_a_viewed_files_search_finds_the_groups_the_messages_hold(needles):
    rows = read_all(GroupFile(FIXTURE))
    found = rows.search(needles)
    raws = fixture_groups()
    for needle in needles:
        in_file = {rows[i].offset for i in range(len(rows)) if (0, rows[i].offset) in found[needle]}
        expected = {
            rows[i].offset
            for i, raw in enumerate(raws)
            if in_messages(needle)(group_event(i + 1, raw))
        }
        assert in_file == expected


@pytest.mark.unit
def test_a_damaged_or_replaced_line_is_not_found_and_nothing_raises(tmp_path):
    path = tmp_path / "g.jsonl"
    path.write_bytes(FIXTURE.read_bytes())
    rows = read_all(GroupFile(path))
    path.write_bytes(b"\x00" * 50 + b"\n")  # the file changed under the view
    assert rows.search(["sven"]) == {"sven": set()}


async def test_the_viewer_and_export_agree_on_a_text_search(tmp_path, monkeypatch):
    """``/~sven`` in ``vftui view`` shows the groups whose conversations name Sven; ``x`` and
    ``vftui export --where`` keep exactly those."""
    from vftui.sim.server import TOKENIZER_DIR
    from vftui.ui.app import VftuiApp
    from vftui.ui.feeds import ViewedFile
    from vftui.ui.inbox import Inbox

    monkeypatch.chdir(tmp_path)
    expected = [
        raw["vftui"]["item"]
        for n, raw in enumerate(fixture_groups(), start=1)
        if "sven" in searchable(group_event(n, raw).messages)
    ]
    assert 0 < len(expected) < len(fixture_groups())
    app = VftuiApp(ViewedFile(Inbox(), GroupFile(FIXTURE), str(TOKENIZER_DIR)))
    async with app.run_test(size=(120, 36)) as pilot:
        await until(lambda: app.model.summary is not None, pilot=pilot)
        await pilot.press("slash", *"~SVEN", "enter")
        await until(lambda: app.model.filter_text == "~SVEN", pilot=pilot)
        shown = [row.item for row in app.model.visible_groups()]
    assert shown == expected
    out = tmp_path / "kept.jsonl"
    done = run_cli(
        ["export", str(FIXTURE), "-o", str(out), "--format", "atropos", "--where", "~sven"],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["vftui"]["item"] for line in out.read_text().splitlines()] == expected


@pytest.mark.unit
def test_a_live_runs_filter_searches_the_groups_in_memory():
    """A run's groups carry their messages: the filter needs no file."""
    from vftui.ui.model import DashboardModel

    model = DashboardModel()
    events = [group_event(n, raw) for n, raw in enumerate(fixture_groups(), start=1)]
    model.apply(events)
    model.set_filter("~zeno")
    assert [g.item for g in model.visible_groups()] == [
        g.item for g in events if "zeno" in searchable(g.messages)
    ]


async def test_a_search_of_a_file_with_odd_shapes_still_applies(tmp_path):
    """A tool call that is a number in one group: the search reads past it (it stuck on
    "searching…" and the filter was never applied)."""
    from vftui.sim.server import TOKENIZER_DIR
    from vftui.ui.app import VftuiApp
    from vftui.ui.feeds import ViewedFile
    from vftui.ui.inbox import Inbox

    groups = fixture_groups()
    groups[0]["messages"][0][-1]["tool_calls"] = 5
    path = tmp_path / "odd.jsonl"
    path.write_text("".join(json.dumps(g) + "\n" for g in groups))
    app = VftuiApp(ViewedFile(Inbox(), GroupFile(path), str(TOKENIZER_DIR)))
    async with app.run_test(size=(120, 36)) as pilot:
        await until(lambda: app.model.summary is not None, pilot=pilot)
        await pilot.press("slash", *"~sven", "enter")
        await until(lambda: app.model.filter_text == "~sven", pilot=pilot)
        assert 0 < len(app.model.visible_groups()) < len(groups)
