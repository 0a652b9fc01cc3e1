"""Small frictions of the screens (issue 31): the command palette's own entries, a viewed eval's name and
header, what an unknown environment's sentence lists, the charts at 100x30, the health screen's alerts."""

from __future__ import annotations

import itertools
import json
import math
import re
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from textual.command import CommandList, CommandPalette

from tests.conftest import inside_lines, screen_lines, until
from tests.test_dashboard import make_app, quit_app  # noqa: F401 - the fixture
from tests.test_screens import at_repo_root, open_charts, settle, viewer_app  # noqa: F401
from vftui.collector.envs import loader as env_loader
from vftui.commands.view import viewer
from vftui.errors import UserError
from vftui.events import Alert, ApiStatus, Health, RunState, ServerStatus
from vftui.figures.series import NICE_STEPS, nice_ticks, tick_label
from vftui.ui.palette import key_commands


async def palette_pick(pilot, query: str, pick: str) -> list[str]:
    """ctrl+p, ``query`` typed: the titles of the entries it lists; the one titled ``pick`` run."""
    app = pilot.app
    await pilot.press("ctrl+p")
    await until(lambda: isinstance(app.screen, CommandPalette), pilot=pilot)
    await pilot.press(*query)
    options = app.screen.query_one(CommandList)

    def titles() -> list[str]:
        return [options.get_option_at_index(i).hit.text for i in range(options.option_count)]

    def highlighted() -> str | None:
        return None if options.highlighted is None else titles()[options.highlighted]

    await until(lambda: pick in titles(), pilot=pilot)
    await pilot.pause(0.3)  # every provider answered
    listed = titles()
    # the highlight moved down to the entry itself: a list still sorting its late hits moves entries, and
    # a count of presses made from an earlier reading ran the wrong one (seen once)
    for _ in range(len(listed)):
        if highlighted() == pick:
            break
        await pilot.press("down")
    assert highlighted() == pick, titles()
    await pilot.press("enter")
    await until(lambda: not isinstance(app.screen, CommandPalette), pilot=pilot)
    return listed


async def test_the_palette_offers_the_keys_of_the_screen_in_front_and_runs_their_actions(make_app):  # noqa: F811
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot=pilot, predicate=lambda: app.model.groups_done >= 1)
        titles = [c.title for c in key_commands(app.screen)]
        for key in ("pause", "T+", "T-", "set T", "dump", "filter", "health", "charts", "help"):
            assert key in titles, titles
        assert "quit" not in titles, "Textual's own Quit is the q key's question already"
        listed = await palette_pick(pilot, "temperature", "T+")  # found by their help lines
        assert {"T+", "T-", "set T"} <= set(listed), listed
        await until(lambda: app.controls.temperature == pytest.approx(1.1), pilot=pilot)
        await palette_pick(pilot, "pause", "pause")
        await until(lambda: app.model.state is RunState.PAUSED, pilot=pilot)
        await palette_pick(pilot, "health", "health")
        await until(lambda: app.screen.__class__.__name__ == "HealthScreen", pilot=pilot)
        assert [c.title for c in key_commands(app.screen)] == ["close"], "the health screen's own"
        await pilot.press("escape")
        await quit_app(pilot, app)


async def test_a_viewed_file_offers_no_key_that_steers_a_run():
    app = viewer_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        titles = [c.title for c in key_commands(app.screen)]
        assert {"charts", "filter", "dump", "export"} <= set(titles)  # they write files, not steer
        assert not {"pause", "T+", "health"} & set(titles), titles


def vf_eval_folder(folder):
    """vf-eval's output: results.jsonl (messages, no token ids) and metadata.json."""
    folder.mkdir(parents=True)
    rows = [
        {
            "example_id": item,
            "reward": reward,
            "prompt": [{"role": "user", "content": "Sort: Bo, Al"}],
            "completion": [{"role": "assistant", "content": "Al, Bo"}],
            "metrics": {"sorted": reward},
        }
        for item in range(3)
        for reward in (0.0, 1.0)
    ]
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    meta = {"env_id": "alphabet-sort", "model": "tiny-model", "sampling_args": {"temperature": 0.7}}
    (folder / "metadata.json").write_text(json.dumps(meta))


async def test_a_viewed_eval_is_named_as_its_eval_and_claims_no_tokens(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = tmp_path / "run" / "groups.eval"
    vf_eval_folder(folder)
    app, _ = viewer(folder)
    async with app.run_test(size=(120, 30)) as pilot:
        await until(lambda: app.model.summary is not None, pilot=pilot)
        app.dashboard.refresh_preview()
        await pilot.pause(0.3)
        status = str(app.query_one("#status").render())
        assert "run/groups.eval" in status and "cache" not in status, status
        header = str(app.query_one("#token-counts").render())
        assert "2 messages, no token ids kept" in header, header
        assert "trained" not in header and "masked" not in header, header


def test_an_unknown_environment_lists_an_installed_v1_taskset_that_requires_no_verifiers(
    tmp_path, monkeypatch
):
    """verifiers' own example tasksets (``reverse-text-v1``) require only their dataset's library."""
    site = tmp_path / "site"
    (site / "reverse_text_v1-0.2.0.dist-info").mkdir(parents=True)
    (site / "reverse_text_v1-0.2.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: reverse-text-v1\nVersion: 0.2.0\nRequires-Dist: datasets\n"
    )
    (site / "reverse_text_v1").mkdir()
    (site / "reverse_text_v1" / "__init__.py").write_text('"""reverse-text-v1."""\n')
    (site / "reverse_text_v1" / "taskset.py").write_text("import verifiers.v1 as vf\n")
    (site / "plain_lib-1.0.dist-info").mkdir()
    (site / "plain_lib-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: plain-lib\nVersion: 1.0\n"
    )
    (site / "plain_lib.py").write_text("import json\n")
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(UserError) as raised:
        env_loader.load("no-such-env", {})
    said = str(raised.value)
    assert "environments that can be loaded: vftui/alphabet-sort (built in)" in said
    assert "reverse-text-v1" in said and "plain-lib" not in said, said
    assert "reverse_text_v1" not in sys.modules, "found by reading, never imported"


async def test_charts_at_100x30_keep_their_titles_legends_off_the_lines_round_ticks():
    app = viewer_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await open_charts(pilot)
        shown = "\n".join(screen_lines(app))
        for name in ("reward", "functions", "histogram", "length", "rates"):
            chart = app.screen.query_one(f"#chart-{name}")
            title = chart.border_title
            assert title and title[:20] in shown, (name, title, shown)
        reward = app.screen.query_one("#chart-reward")
        inside = "\n".join(inside_lines(app, reward))
        assert "mean reward" in reward.border_subtitle and "mean reward" not in inside
        canvas = "\n".join(inside_lines(app, app.screen.query_one("#chart-histogram")))
        ticks = [float(t) for t in re.findall(r"^\s*(-?[\d.]+)\s*[┫╋]", canvas, re.MULTILINE)]
        assert len(ticks) >= 2, canvas
        steps = {round(b - a, 9) for a, b in itertools.pairwise(sorted(ticks))}
        assert len(steps) == 1, f"evenly spaced: {ticks}"
        assert all(t == round(t, 6) and t % next(iter(steps)) == 0 for t in ticks), ticks


@pytest.mark.unit
@settings(max_examples=200, deadline=None)
@given(
    st.floats(-1e4, 1e4),
    st.floats(1e-3, 1e6),
    st.integers(3, 12),
)
def test_ticks_are_few_round_even_and_span_the_data(low, span, most):
    high = low + span
    ticks = nice_ticks(low, high, most)
    assert 2 <= len(ticks) <= most
    step = ticks[1] - ticks[0]
    assert ticks[0] <= low + 1e-6 * step and ticks[-1] >= high - 1e-6 * step, "within float noise"
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert any(abs(mantissa - nice) < 1e-6 for nice in (*NICE_STEPS, 10.0)), (step, ticks)
    assert all(abs((b - a) - step) <= 1e-9 * max(1.0, abs(b)) for a, b in itertools.pairwise(ticks))


@pytest.mark.unit
@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False), st.integers(3, 12))
def test_a_flat_line_gets_ticks_that_read_differently_around_it(value, most):
    """A constant series (every reward 1.0, every count 0) had one tick, and the chart's own labels all read
    the same ("0, 0, 0")."""
    ticks = nice_ticks(value, value, most)
    assert len(ticks) >= 1
    if abs(value) < 1e300:
        assert 2 <= len(ticks) <= most and ticks[0] <= value <= ticks[-1], ticks
        assert len({tick_label(t) for t in ticks}) == len(ticks), ticks


async def test_an_rl_runs_alert_is_on_the_health_screen_at_80x24_however_many_servers():
    app = viewer_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        signals = {"lag": 6.0, "trainer_stall": 0.0}
        events = [
            ApiStatus(
                "http://127.0.0.1:8000", True, True, current_step=3, workers=2, workers_allowed=4
            ),
            *[
                ServerStatus(f"http://127.0.0.1:{9000 + n}/v1", True, 40, 0, 0.2, 0.4, kv_cache=0.3)
                for n in range(4)
            ],
            Health(8, {"stop": 32}, 20.0, 30.0, {}, 0.5, 0.5, 0.2, 0.4, 900.0, signals, ["lag"]),
            Alert("lag", 6.0, 4.0, True, "the trainer is 6 steps behind the groups collected"),
        ]
        for event in events:
            app.inbox.put(event)
        await until(lambda: "lag" in app.model.alerts, pilot=pilot)
        app.dashboard.action_health()
        await until(lambda: app.screen.__class__.__name__ == "HealthScreen", pilot=pilot)
        # said with the signal's value now, in its own words (the screen re-says an alert that way)
        await until(lambda: "groups began 6 trainer" in "\n".join(screen_lines(app)), pilot=pilot)


@pytest.mark.parametrize("action", ["health", "charts"])
async def test_a_tick_between_a_screens_push_and_its_compose_draws_it_once_composed(action):
    """The app hands the model to the screen in front on every tick; one that came before the screen had
    composed its widgets raised NoMatches (seen under load)."""
    app = viewer_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        getattr(app.dashboard, f"action_{action}")()
        app.tick()  # before the pushed screen has composed
        await until(lambda: app.screen.is_mounted, pilot=pilot)
        title = "run health" if action == "health" else "over the whole run"
        await until(lambda: title in "\n".join(screen_lines(app)), pilot=pilot, timeout=10)


async def test_the_first_frame_has_the_footers_keys():
    """Textual's footer composed empty until the screen said its bindings changed, a refresh or two after the
    first frame: seconds on a busy machine."""
    app = viewer_app()
    frames: list[str] = []
    app.call_after_refresh(lambda: frames.append(screen_lines(app)[-1]))
    async with app.run_test(size=(80, 24)) as pilot:
        await until(lambda: frames, pilot=pilot)
        assert "filter" in frames[0] and "help" in frames[0], frames
