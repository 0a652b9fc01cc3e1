"""Past 26 sources ``vftui compare`` labels AA, AB, ... (the 27th was ``[``, the character after Z, with no
colour in the report): the same labels in its text, --json, the report and the compare screen, the colours
cycling."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from textual.widgets import DataTable

from tests.conftest import run_cli, until
from vftui.commands.compare import load_all, report
from vftui.comparing import compared
from vftui.comparing.comparison import measure
from vftui.report.svg import COLOURS
from vftui.ui.compare_app import CompareApp

SOURCES = 28  # A to Z, AA, AB
LABELS = [chr(ord("A") + n) for n in range(26)] + ["AA", "AB"]


def sources(tmp_path: Path) -> list[Path]:
    """28 vf-eval outputs of four examples; the last (AB) with other prompts than A's, so that what is said
    about it names it."""
    paths = []
    for n in range(SOURCES):
        folder = tmp_path / f"s{n:02}"
        folder.mkdir()
        prompt = "other" if n == SOURCES - 1 else "sort"
        rows = [
            {
                "example_id": e,
                "reward": (e + n) % 4 / 3,
                "prompt": [{"role": "user", "content": f"{prompt} {e}"}],
                "completion": [{"role": "assistant", "content": f"answer {e}"}],
            }
            for e in range(4)
        ]
        (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        paths.append(folder)
    return paths


@pytest.mark.unit
def test_labels_go_on_as_a_spreadsheets_columns():
    many = compared.letters(703)
    assert many[:28] == LABELS and many[51:53] == ["AZ", "BA"] and many[701:] == ["ZZ", "AAA"]
    assert len(set(many)) == len(many) and all(re.fullmatch(r"[A-Z]+", x) for x in many)
    assert [compared.position(x) for x in many] == list(range(703))


def test_compare_text_and_json_label_the_27th_source_aa(tmp_path):
    paths = list(map(str, sources(tmp_path)))
    text = run_cli(["compare", "--no-ui", *paths], tmp_path)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert f"  AA  {paths[26]}/results.jsonl (" in text.stdout
    assert f"  AB  {paths[27]}/results.jsonl (" in text.stdout
    assert f"  A   {paths[0]}/results.jsonl (" in text.stdout, "as wide as the widest label"
    assert any(line.startswith("  AA - A reward ") for line in lines)
    assert any(line.startswith("  AB - A reward ") for line in lines)
    assert not re.search(r"^\s*[\[\\\]^_`]", text.stdout, re.M), "no label past Z"

    answer = run_cli(["compare", "--json", *paths], tmp_path)
    assert answer.returncode == 0, answer.stderr
    data = json.loads(answer.stdout)
    assert [s["label"] for s in data["sources"]] == LABELS
    assert [c["label"] for c in data["changes"]] == LABELS[1:]
    said = data["changes"][-1]["pairing"]["said"]
    assert "A and AB share" in said, said


@pytest.mark.unit
def test_a_histograms_range_from_a_reward_written_minus_zero_reads_0():
    """Only the one-reward label read -0.0 as 0: a range from it read '[-0, 1]'."""
    assert compared.reward_range(-0.0, 1.0) == "[0, 1]"
    assert compared.histogram_span(-0.0, 0.5) == "10 bins over [0, 0.5]"
    assert compared.histogram_span(-0.0, -0.0) == "every reward 0"


async def test_a_histogram_of_one_reward_says_so_in_the_text_the_report_and_the_screen(tmp_path):
    """Every rollout scoring 0 read 'reward histogram, 10 bins over [0, 0]' (and '[0, 0]' on the screen); a
    zero written -0.0 reads as 0."""
    paths = sources(tmp_path)[:2]
    for path in paths:
        rows = (path / "results.jsonl").read_text().splitlines()
        lines = [json.dumps({**json.loads(row), "reward": -0.0}) + "\n" for row in rows]
        (path / "results.jsonl").write_text("".join(lines))
    text = "\n".join(report(*measure(load_all(paths), None)))
    assert "  reward histogram, every reward 0 (rollouts):" in text, text
    (other := tmp_path / "spread").mkdir()
    spread = "\n".join(report(*measure(load_all(sources(other)[:2]), None)))
    assert "  reward histogram, 10 bins over [0, 1] (rollouts):" in spread, spread
    out = tmp_path / "one.html"
    done = run_cli(["report", *map(str, paths), "-o", str(out)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "<h3>Reward histogram, every reward 0</h3>" in out.read_text()
    app = CompareApp(*measure(load_all(paths), None))
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        labels = [
            str(table.get_row_at(n)[0])
            for table in app.query(DataTable)
            for n in range(table.row_count)
        ]
        assert "histogram (every reward 0)" in labels, labels


def test_the_report_labels_and_colours_past_z(tmp_path):
    out = tmp_path / "many.html"
    done = run_cli(["report", *map(str, sources(tmp_path)), "-o", str(out)], tmp_path)
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    for n, label in enumerate(LABELS):
        hue = f"hue{n % len(COLOURS)}"
        assert f'<td class="{hue}">{label}</td>' in page, label
        assert f'<span class="{hue}">■ {label}</span>' in page, label
    for n, colour in enumerate(COLOURS):
        assert f".hue{n}{{color:{colour}}}" in page
    assert not re.search(r'class="[\[\\\]^_`]', page) and ">[<" not in page
    assert "<h3><span" in page and ">AB</span> against A</h3>" in page


async def test_the_compare_screen_labels_past_z(tmp_path):
    app = CompareApp(*measure(load_all(sources(tmp_path)), None))
    async with app.run_test(size=(160, 50)) as pilot:
        assert app.letters == LABELS
        assert " · AA " in app.title_line().plain and " · AB " in app.title_line().plain
        assert "\nAB - A reward " in app.answer().plain
        figures = app.query_one("#figures")
        await until(lambda: len(figures.columns) == SOURCES + 1, pilot=pilot)
        assert [str(c.label) for c in figures.columns.values()][-2:] == ["AA", "AB"]
        await pilot.press("q")
