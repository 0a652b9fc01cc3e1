"""The terminal sees the same screen through ``StyleRuns``, from fewer bytes.

Frames are made the way Textual makes them (``Strip.render`` of styled segments, cursor
moves, line breaks, mode switches, clears) and played into two terminal emulators: one
gets Textual's bytes, the other the rewritten ones. Every cell must match.
"""

from __future__ import annotations

import random

import pyte
import pytest
from rich.color import ColorSystem
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from vftui.ui.lean_output import Pen, StyleRuns

pytestmark = pytest.mark.unit

WIDTH, HEIGHT = 60, 12
COLOURS = ["#ff0000", "#00ff00", "#203040", "#e0e0e0", "red", "bright_blue", "default", None]


def random_style(rng: random.Random) -> Style | None:
    if rng.random() < 0.1:
        return None
    return Style(
        color=rng.choice(COLOURS),
        bgcolor=rng.choice(COLOURS),
        bold=rng.random() < 0.3,
        italic=rng.random() < 0.2,
        underline=rng.random() < 0.2,
        reverse=rng.random() < 0.1,
        strike=rng.random() < 0.1,
    )


def random_frame(rng: random.Random, console: Console, styles: list) -> str:
    """One write as Textual's compositor makes it: rows of strips, with the odd mode or clear."""
    parts = []
    if rng.random() < 0.2:
        parts.append("\x1b[?2026h")
    for _ in range(rng.randint(1, 6)):
        if rng.random() < 0.1:
            parts.append(
                rng.choice(["\x1b[2J", "\x1b[K", "\x1b[2K"])
            )  # erasing paints with the current style
        y, x = rng.randrange(HEIGHT), rng.randrange(WIDTH - 10)
        segments = [
            Segment(rng.choice(["ab", " ", "█▇", "x", "  q "]), rng.choice(styles))
            for _ in range(rng.randint(1, 6))
        ]
        parts.append(f"\x1b[{y + 1};{x + 1}H{Strip(segments).render(console)}")
        if rng.random() < 0.3:
            parts.append("\n")
    if rng.random() < 0.2:
        parts.append("\x1b[?2026l")
    return "".join(parts)


def cells(screen: pyte.Screen) -> list:
    return [
        [
            (c.data, c.fg, c.bg, c.bold, c.italics, c.underscore, c.reverse, c.strikethrough)
            for c in (screen.buffer[y][x] for x in range(WIDTH))
        ]
        for y in range(HEIGHT)
    ]


@pytest.mark.parametrize(
    "colours", [ColorSystem.EIGHT_BIT, ColorSystem.TRUECOLOR, ColorSystem.STANDARD]
)
@pytest.mark.parametrize("seed", range(5))
def test_the_screen_is_the_same_from_fewer_bytes(colours, seed):
    rng = random.Random(seed)
    console = Console(
        color_system={
            ColorSystem.EIGHT_BIT: "256",
            ColorSystem.TRUECOLOR: "truecolor",
            ColorSystem.STANDARD: "standard",
        }[colours],
        force_terminal=True,
    )
    styles = [random_style(rng) for _ in range(6)]
    screens = [pyte.Screen(WIDTH, HEIGHT), pyte.Screen(WIDTH, HEIGHT)]
    streams = [pyte.Stream(screen) for screen in screens]
    runs = StyleRuns()
    sent = [0, 0]
    for _ in range(40):
        frame = random_frame(rng, console, styles)
        lean = runs(frame)
        streams[0].feed(frame)
        streams[1].feed(lean)
        sent[0] += len(frame)
        sent[1] += len(lean)
        assert cells(screens[1]) == cells(screens[0])
        assert screens[1].cursor.attrs == screens[0].cursor.attrs, (
            "each write ends in the style it found"
        )
    assert sent[1] < sent[0]


def test_only_what_differs_is_written():
    pen = Pen.parse("1;38;5;114;48;5;234")
    assert pen.change_to(Pen.parse("1;38;5;203;48;5;234")) == "\x1b[38;5;203m", (
        "the foreground alone"
    )
    assert pen.change_to(Pen.parse("38;5;203;48;5;234")) == "\x1b[0;38;5;203;48;5;234m", (
        "bold off needs a reset"
    )
    assert pen.change_to(pen) == ""
    runs = StyleRuns()
    same = "\x1b[38;5;114m█\x1b[0m" * 3
    assert runs(same) == "\x1b[38;5;114m███\x1b[0m"
