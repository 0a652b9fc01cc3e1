"""The report's two charts as inline SVG: lines over groups and a histogram, one colour per source.

No chart library is installed that writes SVG (textual-plot draws in a terminal), and these need
only polylines, rectangles and a few labels; every label goes through ``escaped``.
"""

from __future__ import annotations

from vftui.report.html_text import escaped

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
WIDTH, HEIGHT = 720, 240
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 12, 36  # room for the axes' labels


def colour(n: int) -> str:
    return COLOURS[n % len(COLOURS)]


def hue(n: int) -> str:
    """The page's class for the ``n``-th source's colour (``colour``): its label is written in it."""
    return f"hue{n % len(COLOURS)}"


def _frame(
    title: str, low: float, high: float, x_first: str, x_last: str, x_label: str
) -> list[str]:
    """The chart's box, the y axis's ends and middle, the x axis's ends and its label."""
    right, bottom = WIDTH - RIGHT, HEIGHT - BOTTOM
    middle = (low + high) / 2
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
        f'height="{HEIGHT}" role="img" aria-label="{escaped(title)}"><title>{escaped(title)}</title>',
        f'<rect x="{LEFT}" y="{TOP}" width="{right - LEFT}" height="{bottom - TOP}" fill="none" '
        'stroke="#999"/>',
    ]
    for value, y in ((high, TOP), (middle, (TOP + bottom) / 2), (low, bottom)):
        parts.append(
            f'<text x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">{escaped(f"{value:.3g}")}</text>'
        )
    parts += [
        f'<text x="{LEFT}" y="{bottom + 16}">{escaped(x_first)}</text>',
        f'<text x="{right}" y="{bottom + 16}" text-anchor="end">{escaped(x_last)}</text>',
        f'<text x="{(LEFT + right) / 2}" y="{bottom + 30}" text-anchor="middle">{escaped(x_label)}</text>',
    ]
    return parts


def lines(title: str, series: list[tuple[list[float], list[float]]], x_label: str) -> str:
    """Each source's (x, y) points as a polyline in its colour, over the x and y ranges of them all."""
    xs = [x for points, _ in series for x in points] or [0.0, 1.0]
    ys = [y for _, values in series for y in values] or [0.0, 1.0]
    x_low, x_high, y_low, y_high = min(xs), max(xs), min(ys), max(ys)
    x_span, y_span = (x_high - x_low) or 1.0, (y_high - y_low) or 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    parts = _frame(title, y_low, y_high, f"{x_low:g}", f"{x_high:g}", x_label)
    for n, (points, values) in enumerate(series):
        at = " ".join(
            f"{LEFT + (x - x_low) / x_span * plot_w:.1f},{TOP + (y_high - y) / y_span * plot_h:.1f}"
            for x, y in zip(points, values, strict=True)
        )
        parts.append(
            f'<polyline points="{at}" fill="none" stroke="{colour(n)}" stroke-width="1.5"/>'
        )
    return "".join(parts) + "</svg>"


def histogram(title: str, counts: list[list[int]], low: float, high: float) -> str:
    """Each source's counts in the same bins side by side, as shares of its rollouts (sources of different
    sizes compare), over the rewards' range ``low`` to ``high``."""
    shares = [[c / (sum(bins) or 1) for c in bins] for bins in counts]
    top = max((s for bins in shares for s in bins), default=0.0) or 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / max(1, len(counts[0]) if counts else 1)
    bar = slot * 0.8 / max(1, len(counts))
    parts = _frame(title, 0.0, top, f"{low:g}", f"{high:g}", "reward (share of rollouts)")
    for n, bins in enumerate(shares):
        for b, share in enumerate(bins):
            height = share / top * plot_h
            parts.append(
                f'<rect x="{LEFT + b * slot + slot * 0.1 + n * bar:.1f}" y="{TOP + plot_h - height:.1f}" '
                f'width="{bar:.1f}" height="{height:.1f}" fill="{colour(n)}"/>'
            )
    return "".join(parts) + "</svg>"


SPARK_W, SPARK_H, SPARK_DOT = 120, 24, 2.5


def sparkline(values: list[float | None]) -> str:
    """An item's mean reward across the sources in their order (a dot each, in its source's colour; a gap
    where a source lacks the item), over the range of its own values, labelled by them."""
    known = [v for v in values if v is not None]
    low, high = (min(known), max(known)) if known else (0.0, 1.0)
    span = (high - low) or 1.0
    step = (SPARK_W - 2 * SPARK_DOT) / max(1, len(values) - 1)
    dot = min(SPARK_DOT, step / 2)  # many sources: dots that do not run together

    def at(n: int, v: float) -> tuple[float, float]:
        y = (
            SPARK_H - SPARK_DOT - (v - low) / span * (SPARK_H - 2 * SPARK_DOT)
            if high > low
            else SPARK_H / 2
        )
        return SPARK_DOT + n * step, y

    said = ", ".join("-" if v is None else f"{v:.3g}" for v in values)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {SPARK_W} {SPARK_H}" width="{SPARK_W}" '
        f'height="{SPARK_H}" role="img" aria-label="{escaped(said)}"><title>{escaped(said)}</title>'
    ]
    run: list[str] = []
    for n, v in enumerate([*values, None]):
        if v is None:
            if len(run) > 1:
                parts.append(f'<polyline points="{" ".join(run)}" fill="none" stroke="#999"/>')
            run = []
            continue
        x, y = at(n, v)
        run.append(f"{x:.1f},{y:.1f}")
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{dot:.2f}" fill="{colour(n)}"/>')
    return "".join(parts) + "</svg>"
