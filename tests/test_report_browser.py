"""``vftui report``'s pages and a run's own page in a real browser (Debian's headless Chromium): opened
from disk, each kind asks for nothing but itself and logs no error (a Content-Security-Policy refusal would be one), its
search and its sort work, and a hostile answer opens no dialog. A screenshot of each kind is kept
beside the test's files."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import Recorded, chromium_page
from tests.conftest import run_cli
from tests.test_report import HOSTILE, groups_file, reported

pytestmark = pytest.mark.needs("chromium", "playwright")


def opened(tmp_path: Path, kind: str, *sources: str) -> Recorded:
    """The report of ``sources`` open in a page, checked as every kind must be; its screenshot kept."""
    reported(tmp_path, *sources)
    return opened_page(tmp_path / "report.html", kind)


def opened_page(page: Path, kind: str) -> Recorded:
    """The page open, checked as every kind must be; its screenshot kept beside it."""
    tmp_path = page.parent
    with chromium_page() as seen:
        seen.page.goto(page.as_uri())
        shot = tmp_path / f"report-{kind}.png"
        seen.page.screenshot(path=str(shot), full_page=False)
        assert shot.stat().st_size > 10_000, "a screenshot of something"
        seen.page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
        for step in range(0, 1200, 40):  # over everything: an onmouseover that escaped would fire
            seen.page.mouse.move(step, step * 2 // 3)
        for _ in range(10):  # and through what takes the focus: an onfocus likewise
            seen.page.keyboard.press("Tab")
        seen.pump(300)
        assert seen.errors == [], seen.errors
        assert seen.requests == [page.as_uri()], "it asked for itself alone"
        assert seen.dialogs == []
        controls_work(seen)
    return seen


def controls_work(seen: Recorded) -> None:
    """What every kind's controls must do: the rollout search hides what does not match and counts
    the rest; sorting the item table by a column orders its rows, and again reverses them."""
    page = seen.page
    sections = page.locator("section.item")
    total = sections.count()
    assert total > 0
    page.fill("#rollout-search", "no rollout says this")
    assert page.inner_text("#rollout-count") == "0 shown"
    assert page.locator("section.item:visible").count() == 0
    page.fill("#rollout-search", "")
    assert page.inner_text("#rollout-count") == f"{total} shown"
    head = page.locator("#items thead th").first
    head.click()
    up = page.locator("#items tbody tr").evaluate_all(
        "rows => rows.map(r => r.cells[0].dataset.v ?? r.cells[0].textContent)"
    )
    head.click()
    down = page.locator("#items tbody tr").evaluate_all(
        "rows => rows.map(r => r.cells[0].dataset.v ?? r.cells[0].textContent)"
    )
    assert down == up[::-1] and len(up) > 1


@pytest.mark.e2e
def test_a_run_s_report_in_chromium(tmp_path):
    out = tmp_path / "run" / "groups.jsonl"
    done = run_cli(
        ["run", "--no-ui", "--steps", "4", "--group-size", "3", "--out", str(out)], tmp_path
    )
    assert done.returncode == 0, done.stderr
    opened(tmp_path, "run", str(out))


@pytest.mark.e2e
def test_a_comparison_s_report_in_chromium(paired_evals, tmp_path):
    opened(tmp_path, "comparison", str(paired_evals["cold"]), str(paired_evals["hot"]))


@pytest.mark.e2e
def test_a_hostile_comparison_opens_no_dialog_and_runs_no_script_but_its_own(tmp_path):
    hostile = "".join(HOSTILE)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    groups_file(a, 3, 2, hostile, key=hostile, score=1.0)
    groups_file(b, 3, 2, hostile, key=hostile, score=0.0)
    seen = opened(tmp_path, "hostile", str(a), str(b))
    assert seen.dialogs == [], "alert(...) in the answers ran"


@pytest.mark.e2e
def test_three_sources_rollouts_stand_side_by_side_in_chromium(tmp_path):
    paths = [tmp_path / f"{name}.jsonl" for name in "abc"]
    for path, score in zip(paths, (1.0, 0.0, 0.5), strict=True):
        groups_file(path, 3, 2, "Ada, Zoe", score=score)
    reported(tmp_path, *map(str, paths))
    with chromium_page(width=1400) as seen:
        seen.page.goto((tmp_path / "report.html").as_uri())
        boxes = (
            seen.page.locator("section.item")
            .first.locator(".source")
            .evaluate_all("columns => columns.map(c => c.getBoundingClientRect().toJSON())")
        )
        assert seen.errors == []
    assert len(boxes) == 3
    assert len({round(b["top"]) for b in boxes}) == 1, "one row"
    assert boxes[0]["right"] <= boxes[1]["left"] and boxes[1]["right"] <= boxes[2]["left"]


@pytest.mark.e2e
def test_a_run_s_own_page_shows_its_figures_first_once_it_ends(tmp_path):
    """The run's page, finished: the figures, charts and item table above the rollouts (they were written
    last), the note that they are missing hidden; controls and safety as the report's."""
    out = tmp_path / "run" / "groups.jsonl"
    done = run_cli(
        ["run", "--no-ui", "--steps", "4", "--group-size", "3", "--out", str(out)], tmp_path
    )
    assert done.returncode == 0, done.stderr
    opened_page(out.with_suffix(".html"), "run page")
    assert "page: " in done.stderr
    with chromium_page() as seen:
        seen.page.goto(out.with_suffix(".html").as_uri())
        found = seen.page.evaluate(
            "[...document.querySelectorAll('#summary, section.item, .unfinished')]"
            ".map(e => [e.tagName, e.className, e.getBoundingClientRect().top, e.offsetParent !== null])"
        )
        assert seen.errors == []
    shown = sorted((top, tag) for tag, _, top, visible in found if visible)
    assert [tag for _, tag in shown] == ["DIV"] + ["SECTION"] * 4, (
        "the figures first, then each group"
    )
    assert [visible for _, name, _, visible in found if "unfinished" in name] == [False]


@pytest.mark.e2e
def test_a_killed_run_s_page_reads_and_says_its_figures_are_missing(tmp_path):
    """A page with no end (the run was killed): rollouts readable, the note visible, no error logged."""
    from vftui.report.run_page import RunPage
    from vftui.run_files.files import RunFiles

    jsonl = tmp_path / "groups.jsonl"
    groups_file(jsonl, 3, 2, "".join(HOSTILE), score=1.0)
    RunPage.open(RunFiles(jsonl)).follow()  # and nothing more: no figures, no script
    with chromium_page() as seen:
        seen.page.goto(jsonl.with_suffix(".html").as_uri())
        seen.page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
        seen.pump(200)
        assert seen.errors == [] and seen.dialogs == []
        assert seen.page.locator(".unfinished").is_visible()
        assert seen.page.locator("section.item").count() == 3
        assert seen.requests == [jsonl.with_suffix(".html").as_uri()]
