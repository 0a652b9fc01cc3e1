"""The dashboard's plain-Python parts, without an app: folding events, filters, layout, wording."""

from __future__ import annotations

import dataclasses
import io
import itertools
import re
import time

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from vftui import stats
from vftui.commands.headless import HeadlessView
from vftui.events import (
    ApiStatus,
    EndpointTrouble,
    GroupCollected,
    GroupDropped,
    LogRecord,
    RunStarted,
    RunState,
    RunStatus,
)
from vftui.figures.group_filter import parse_filter
from vftui.figures.run_tally import RunTally
from vftui.group_format import MASKED
from vftui.live.server import Replay
from vftui.sim import TOKENIZER_DIR
from vftui.text import wording
from vftui.text.drop_lines import DropLines
from vftui.ui.decode import TokenDecoder
from vftui.ui.inbox import Inbox
from vftui.ui.model import SORTS, DashboardModel
from vftui.ui.pager_text import pager_text
from vftui.ui.screens.best_worst import best_and_worst
from vftui.ui.widgets.token_preview import rollout_pieces, wrap_pieces
from vftui.ui.widgets.trajectory_panel import api_state
from vftui.ui.widgets.turns import fit

pytestmark = pytest.mark.unit


def group(
    index: int, scores: list[float], turns: int = 1, item: int | None = None, t: float = 1.0
) -> GroupCollected:
    n = len(scores)
    return GroupCollected(
        index,
        index - 1 if item is None else item,
        None,
        scores,
        {"ok": scores},
        [turns] * n,
        [[1, 2]] * n,
        [[-100, 2]] * n,
        [[]] * n,
        ["stop"] * n,
        t,
        float(index),
        0.5,
    )


def started(**overrides) -> RunStarted:
    fields = dict(
        mode="sft",
        env="e",
        model="m",
        endpoint="x",
        simulated=True,
        out_path="o",
        groups_total=10,
        groups_done=0,
        group_size=2,
        temperature=1.0,
        reward_functions=["ok"],
    )
    return RunStarted(**{**fields, **overrides})


def test_the_window_slides_and_the_run_totals_keep_everything():
    model = DashboardModel(window=2, clock=lambda: 100.0)
    model.apply([started(), *(group(i, [float(i), float(i)]) for i in range(1, 5))])
    assert [g.index for g in model.visible_groups()] == [3, 4]
    assert model.window_metrics()["metrics/mean_reward"] == pytest.approx(3.5)
    assert model.run_metrics()["metrics/mean_reward"] == pytest.approx(2.5)
    assert model.identical_rates() == (1.0, 1.0) and model.groups_done == 4


def test_dropped_groups_count_in_the_figures_and_the_log():
    model = DashboardModel(clock=lambda: 0.0)
    model.apply(
        [started(), group(1, [1.0, 0.0]), GroupDropped(7, stats.TOO_EASY, [1.0, 1.0], {}, [1, 1])]
    )
    assert model.dropped == {stats.TOO_EASY: 1}
    assert (
        model.run_metrics()["metrics/groups_total"] == 2
        and model.run_metrics()["metrics/mean_reward_kept"] == 0.5
    )
    assert model.logs[-1].message == f"group of item 7 left out: {stats.TOO_EASY}"


def test_texts_from_outside_are_made_printable_as_they_are_folded():
    model = DashboardModel(clock=lambda: 0.0)
    model.apply([started(model="x\x1b]0;t\x07"), EndpointTrouble(1, 5, "bad \x1b[2J", 1.0)])
    assert model.run_started.model == "x␛]0;t␇"
    assert model.logs[-1].message == wording.trouble(EndpointTrouble(1, 5, "bad ␛[2J", 1.0))


def test_status_changes_are_logged_once_with_one_wording():
    model = DashboardModel(clock=lambda: 0.0)
    model.apply([RunStatus(RunState.PAUSED, 1, 10, "finishing 2 groups in flight")] * 2)
    assert [r.message for r in model.logs] == ["run paused: finishing 2 groups in flight"]


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("identical", [2]),
        ("varied", [1, 3]),
        ("reward>0.5", [2, 3]),
        ("item=2", [3]),
        ("turns>=2", [3]),
        ("varied t<=0.7", [1]),
        ("", [1, 2, 3]),
    ],
)
def test_filters(text, kept):
    groups = [group(1, [0.0, 1.0], t=0.5), group(2, [1.0, 1.0]), group(3, [0.5, 1.0], turns=2)]
    check = parse_filter(text) if text else (lambda g: True)
    assert [g.index for g in groups if check(g)] == kept


def test_a_group_of_one_rollout_is_neither_identical_nor_varied_nor_in_the_sparkline():
    """It counted as identical (and then, once not, as varied): one score has nothing to compare."""
    alone = group(1, [1.0])
    assert not parse_filter("identical")(alone) and not parse_filter("varied")(alone)
    model = DashboardModel(clock=lambda: 0.0)
    model.apply([started(), alone, group(2, [1.0, 1.0])])
    assert list(model.identical_history) == [1.0]
    assert model.identical_rates() == (1.0, 1.0)


def test_a_filter_that_cannot_be_read_says_how_to_write_one():
    with pytest.raises(ValueError, match="cannot read 'reward<'; terms: identical"):
        parse_filter("varied reward<")


def test_tokens_wrap_whole_and_long_ones_are_cut_to_the_width():
    lines = wrap_pieces(
        [("abc", "bold"), ("de", "bold"), ("\n", "bold"), ("x" * 7, "bold")], width=4
    )
    assert ["".join(s.text for s in line) for line in lines] == ["abc", "de", "xxxx", "xxx"]


def test_the_trajectory_panel_says_the_worst_news_first():
    model = DashboardModel(clock=lambda: 0.0)
    assert api_state(model) == ("connecting…", "bold yellow")
    up = ApiStatus("http://api", True, trainer_registered=True, batch_size=8)
    model.apply([up])
    assert api_state(model) == ("trainer registered (batch size 8)", "bold green")
    model.apply([EndpointTrouble(1, 0, "refused", 1.0, "trajectory API")])
    assert api_state(model)[0] == "API unreachable (retrying)"


def test_one_rate_in_the_dashboard_the_runs_list_and_the_headless_lines():
    """Ten groups of half a second, ending a second apart, just ended: the same rate wherever it is
    shown (ten groups over the 9.5 s since the first started), 0 once paused."""
    now = time.time()
    groups = [
        dataclasses.replace(group(i, [1.0, 0.0]), started_at=now - 10.5 + i) for i in range(1, 11)
    ]
    events = [started(), RunStatus(RunState.RUNNING, 0, 10), *groups]
    model, replay = DashboardModel(), Replay(256, RunTally())
    model.apply(events)
    for event in events:
        replay.add(event)
    lines = io.StringIO()
    view = HeadlessView(json_events=False, err=lines)
    for event in events:
        view(event)
    headless = float(re.findall(r"([\d.]+) groups/s", lines.getvalue())[-1])
    rate = 10 / 9.5
    assert model.rates()[0] == pytest.approx(rate)
    assert replay.info().groups_per_s == pytest.approx(rate, abs=1e-3)  # sent rounded
    assert headless == pytest.approx(rate, abs=5e-3)  # printed with two decimals
    paused = RunStatus(RunState.PAUSED, 10, 10)
    model.apply([paused])
    replay.add(paused)
    assert model.rates() == (0.0, 0.0) and replay.info().groups_per_s == 0.0


def test_the_rate_falls_to_zero_when_no_group_has_ended_for_a_while():
    meter = stats.Throughput()
    for second in range(10):
        meter.add(float(second), 100)
    assert meter.rates(9.5, collecting=True) == (pytest.approx(1.0), pytest.approx(100.0))
    assert meter.rates(9.0 + 5.1, collecting=True) == (0.0, 0.0), (
        "five intervals without a group: idle"
    )
    assert meter.rates(9.5, collecting=False) == (0.0, 0.0)


def test_every_order_of_the_table_and_the_filter_on_length_and_time():
    short, long_ = [[-100, 2]] * 2, [[-100, 2, 3, 4]] * 2
    groups = [
        dataclasses.replace(group(1, [0.0, 1.0]), masks=short, elapsed_s=9.0),
        dataclasses.replace(group(2, [1.0, 1.0]), masks=long_, elapsed_s=1.0),
        dataclasses.replace(group(3, [0.0, 0.5]), masks=short, elapsed_s=3.0),
    ]
    model = DashboardModel(clock=lambda: 0.0)
    model.apply([started(), *groups])
    orders = {}
    for _ in SORTS:
        name = model.cycle_sort()
        orders[name] = [g.index for g in model.visible_groups()]
    assert orders == {
        "by mean, hardest first": [3, 1, 2],
        "by worst rollout first": [1, 3, 2],
        "by spread, flakiest first": [1, 3, 2],
        "by length, longest first": [2, 1, 3],
        "by time, slowest first": [1, 3, 2],
        "as collected": [1, 2, 3],
    }
    assert [g.index for g in groups if parse_filter("length>1 secs<5")(g)] == [2]


def test_the_inbox_wakes_the_view_for_a_change_of_state_and_the_first_group_only():
    inbox, woken = Inbox(), []
    inbox.wake = lambda: woken.append(len(inbox.drain(100)))
    inbox.put(RunStatus(RunState.STARTING, 0, 10, "loading"))
    inbox.put(started())
    inbox.put(group(1, [1.0, 0.0]))
    inbox.put(group(2, [1.0, 0.0]))  # later groups wait for the tick
    inbox.put(RunStatus(RunState.PAUSED, 2, 10))
    assert woken == [1, 1, 1, 2]


def test_the_runs_duration_and_rate_survive_a_wall_clock_set_back():
    wall = [1_000_000.0]
    model = DashboardModel(clock=lambda: wall[0])
    model.apply([started(started_at=wall[0] - 5), RunStatus(RunState.RUNNING, 0, 10)])
    model.apply(
        [
            dataclasses.replace(group(i, [1.0, 0.0]), started_at=wall[0] - 10 + i)
            for i in range(1, 10)
        ]
    )
    wall[0] -= 3600
    model.apply([dataclasses.replace(group(10, [1.0, 0.0]), started_at=wall[0] - 0.5)])
    assert model.elapsed_s >= 5, "from a monotonic clock, not the wall's difference"
    assert min(model.rates()) >= 0


def test_the_turns_panel_keeps_the_most_frequent_counts_and_says_how_many_it_hides():
    hist = [(1, 5), (2, 50), (3, 7), (4, 40), (5, 1)]
    assert fit(hist, 5) == (hist, 0)
    assert fit(hist, 3) == ([(2, 50), (4, 40)], 3), "two rows of counts and one saying three more"


def test_best_and_worst_are_two_rollouts_even_when_all_scored_the_same():
    assert best_and_worst([0.2, 0.9, 0.1, 0.9, 0.1]) == (1, 4)
    assert best_and_worst([0.0] * 8) == (0, 7)


# -- reading a rollout: the preview's pieces and the pager's text -----------------------------

SPLIT_WORDS = "Sort these: café, 日本, naïve and a verylongwordthatnolinecanhold, then the rest"


def decoded_group(decoder: TokenDecoder) -> GroupCollected:
    """One rollout of a prompt (masked) and an answer (trained) whose characters the tokenizer cuts."""
    encode = decoder._tokenizer.encode
    prompt, answer = encode("user: please sort\n"), encode(SPLIT_WORDS * 3)
    tokens = prompt + answer
    masks = [MASKED] * len(prompt) + answer
    return dataclasses.replace(group(151, [0.75]), tokens=[tokens], masks=[masks])


@pytest.fixture(scope="module")
def decoder() -> TokenDecoder:
    return TokenDecoder.load(str(TOKENIZER_DIR))


def test_a_character_cut_across_tokens_shows_whole_in_the_preview(decoder):
    laid = rollout_pieces(decoded_group(decoder), 0, decoder)
    text = "".join(text for text, _ in laid.pieces)
    assert "\ufffd" not in text and "café, 日本, naïve" in text
    assert laid.pieces[laid.first_trained][0].startswith("Sort"), "the reader jumps to the answer"


@pytest.mark.parametrize("width", [40, 78, 131])
def test_the_pager_text_has_a_header_marks_spans_and_wraps_between_words(decoder, width):
    group = decoded_group(decoder)
    lines = pager_text(group, 0, decoder, width).splitlines()
    marks = [line for line in lines if line.startswith("── ")]
    header = " ".join(lines[: lines.index(marks[0])])
    assert header.startswith("group 151 · rollout 1/1 · reward 0.750 · trained "), header
    assert [m.split(" · ")[0] for m in marks] == ["── masked", "── trained"], marks
    assert all(len(line) <= width for line in lines if "verylongword" not in line)
    body = " ".join(lines[lines.index(marks[1]) + 1 :])
    assert body.split() == (SPLIT_WORDS * 3).split(), "every word whole, none cut at a line's end"
    assert "\ufffd" not in body


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
@example("\ufffd")  # one the model wrote, three byte tokens: was shown as three
@example("a\ufffd\ufffd中")
def test_the_pieces_of_any_text_cover_each_token_once_and_read_as_the_whole(decoder, text):
    tokens = decoder._tokenizer.encode(text)
    pieces = decoder.pieces(tokens)
    assert sum(size for size, _ in pieces) == len(tokens)
    assert "".join(piece for _, piece in pieces) == decoder.text(tokens)


def test_a_burst_of_groups_left_out_is_one_line_after_the_first():
    """rl leaves out every group of identical scores: a line each flooded the log."""
    now = [0.0]
    model = DashboardModel(clock=lambda: 0.0, monotonic=lambda: now[0])
    model.apply([started()])
    drops = [GroupDropped(i, stats.TOO_EASY, [1.0, 1.0], {}, [1, 1]) for i in range(8)]
    model.apply(drops[:1])
    model.apply(drops[1:])
    said = [r.message for r in model.logs if "left out" in r.message]
    assert said == [f"group of item 0 left out: {stats.TOO_EASY}"]
    now[0] = 10.0
    assert model.apply([])  # the line owed is a change
    said = [r.message for r in model.logs if "left out" in r.message]
    assert said[1] == f"7 more groups left out (items 1, 2, 3, 4, 5, …): 7 {stats.TOO_EASY}"
    assert model.dropped == {stats.TOO_EASY: 8}, "every drop still counts"


@given(gaps=st.lists(st.floats(0, 30), max_size=60))
def test_every_drop_is_said_once_and_drop_lines_come_no_closer_than_every_s(gaps):
    lines, now, told, said_at = DropLines(), 0.0, 0, []
    for item, gap in enumerate(gaps):
        now += gap
        for line in filter(
            None, [lines.due(now), lines.add(GroupDropped(item, "r", [1.0], {}, [1]), now)]
        ):
            told += int(line.split()[0]) if "more" in line else 1
            said_at.append(now)
    last = lines.flush()
    told += int(last.split()[0]) if last else 0
    assert told == len(gaps)
    assert all(b - a >= lines.every_s for a, b in itertools.pairwise(said_at))


def test_identical_rates_count_the_groups_left_out_too():
    """The rl rates chart drew 0% identical (rl leaves every such group out) beside health's 26%."""
    model = DashboardModel(clock=lambda: 0.0)
    model.apply(
        [started(), group(1, [1.0, 0.0]), GroupDropped(7, stats.TOO_EASY, [1.0, 1.0], {}, [1, 1])]
    )
    assert list(model.series.identical) == [0.0, 1.0] == list(model.identical_history)
    assert model.identical_rates() == (0.5, 0.5)


def test_the_headless_view_says_vftuis_own_warnings_as_sentences():
    """It printed '[warning] vftui.collector.run: --stall-timeout 3: ...': a module's name is no news."""
    view = HeadlessView(json_events=False, err=io.StringIO())
    ours = LogRecord("WARNING", "vftui.collector.run", "--stall-timeout 3: no group for 3 s", 0.0)
    theirs = LogRecord("ERROR", "atroposlib.envs.base", "it broke", 0.0)
    assert view.line_for(ours) == "warning: --stall-timeout 3: no group for 3 s"
    assert view.line_for(theirs) == "[error] atroposlib.envs.base: it broke"
