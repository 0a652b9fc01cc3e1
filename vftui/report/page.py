"""The report as one HTML page: for several sources the paired result first, then the headline figures
with their intervals, the charts, the per-item table and the rollouts.

Every figure is the one ``vftui compare`` prints, in its words (``comparing.compared``), over every rollout;
only the rollouts shown are bounded: beyond ``max_rollouts`` (or ``BYTES`` of their text) a seeded
sample of items is shown, the items that flipped or moved most in a comparison first, and the page
says so. Everything from the files goes through ``escaped``; nothing from them becomes a link.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vftui import __version__
from vftui.comparing import compared
from vftui.comparing.comparison import Change, Summary, histograms, moved
from vftui.figures.paired import in_order, item_passes
from vftui.figures.series import thinned
from vftui.report import svg
from vftui.report.assets import POLICY, SCRIPT, STYLE
from vftui.report.html_text import escaped
from vftui.run_files.results import Item, Source
from vftui.text import wording

MAX_ROLLOUTS = 2000  # shown, by default; the figures and charts are of all of them
BYTES = 32 * 2**20  # of the rollouts' HTML at most, whatever their count
TEXT_CHARS = 20_000  # of one message shown; the rest is cut, saying so
LABEL_CHARS = 200  # of a message's role, name and the tool call it answers
TABLE_ROWS = 20_000  # items in the per-item table at most
POINTS = 400  # of a chart's line at most: consecutive groups are averaged beyond
SEED = 0  # of the sample of items shown
# how every page begins (``vftui report -o`` replaces only a file that does)
DOCTYPE = "<!DOCTYPE html>"
PROGRESS_EVERY = 500  # items rendered between two progress lines


@dataclass(frozen=True)
class Report:
    sources: list[Source]
    summaries: list[Summary]
    changes: list[Change]  # each later source against the first

    @property
    def letters(self) -> list[str]:
        return compared.letters(len(self.sources))

    def keys(self) -> list[str]:
        """Every item of any source, in the order of their keys."""
        return sorted({k for s in self.sources for k in s.items}, key=in_order)

    def rollouts(self, key: str) -> int:
        return sum(len(s.items[key].rewards) for s in self.sources if key in s.items)


def render(report: Report, max_rollouts: int, progress: Callable[[str], None]) -> str:
    """The whole page."""
    keys = report.keys()
    order = _priority(report, keys)
    rollouts, shown, count = _rollouts(report, order, max_rollouts, progress)
    listed = sorted([*dict.fromkeys([*shown, *order])][:TABLE_ROWS], key=in_order)
    env = next((s.env_id for s in report.sources if s.env_id), "an unnamed environment")
    parts = [head(f"vftui report: {env}")]
    total = sum(report.rollouts(k) for k in keys)
    if count < total:
        parts.append(
            f'<p class="note">This page shows {count:,} of {total:,} rollouts ({len(shown):,} of '
            f"{len(keys):,} items: {_chosen(report)}), to stay readable and small (--max-rollouts "
            f"{max_rollouts:,}, {BYTES // 2**20} MB of text at most). The figures, charts and "
            f"paired tests are of every rollout.</p>"
        )
    parts += [
        summary(report, listed, set(shown)),
        rollouts_heading(f"{len(shown):,}"),
        *rollouts,
        END,
    ]
    return "".join(parts)


def head(title: str, body_class: str = "") -> str:
    """The page up to its first heading: its policy, style and title."""
    body = f'<body class="{body_class}">' if body_class else "<body>"
    return (
        f'{DOCTYPE}\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escaped(title)}</title><style>{STYLE}</style></head>{body}"
        f"<h1>{escaped(title)}</h1>"
        f'<p class="made">Made by vftui {escaped(__version__)}. ± is a 95% interval over items.</p>'
    )


END = f"<script>{SCRIPT}</script></body></html>\n"  # the sort and search work once the page has it


def anchor(key: str) -> str:
    """The id of an item's rollouts on a page: the same for its key on any page, whatever the key holds."""
    return "item-" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def summary(report: Report, listed: list[str], shown: set[str]) -> str:
    """The sources, the paired result of a comparison, the figures, the charts and the item table (of the
    ``listed`` items, each a link to its rollouts where they are ``shown``)."""
    return (
        _sources(report)
        + (_paired(report, shown) if report.changes else "")
        + _figures(report)
        + _charts(report)
        + _items(report, listed, shown, len(report.keys()))
    )


def rollouts_heading(shown: str) -> str:
    """The rollouts' heading and search box, saying how many are ``shown``."""
    return (
        "<h2>Rollouts</h2>"
        '<p><input id="rollout-search" type="search" placeholder="search the rollouts" '
        f'aria-label="search the rollouts"> <span id="rollout-count">{shown} shown</span></p>'
    )


def _priority(report: Report, keys: list[str]) -> list[str]:
    """The items in the order they are shown when not all can be: in a comparison, those that flipped and
    those that moved most; then the rest in a seeded random order."""
    first: dict[str, None] = {}
    for change in report.changes:
        if change.flips is not None:
            first.update(dict.fromkeys(change.flips.lost + change.flips.gained))
        drops, gains = moved(change.items, compared.SHOWN_EACH)
        first.update(dict.fromkeys(i.key for i in drops + gains))
    rest = [k for k in keys if k not in first]
    random.Random(SEED).shuffle(rest)
    return [*first, *rest]


def _hue(letter: str) -> str:
    """The class that writes a source's label in its charts' colour (none for a run's page, which has no
    label)."""
    return svg.hue(compared.position(letter)) if letter else ""


def _chosen(report: Report) -> str:
    return (
        "those that flipped pass/fail or moved most, then others at random"
        if report.changes
        else "chosen at random"
    )


def _sources(report: Report) -> str:
    rows = "".join(
        f'<tr><td class="{_hue(letter)}">{letter}</td><td>{escaped(s.source.path)}</td>'
        f'<td>{escaped(s.source.kind)}</td><td class="n">{len(s.source.items):,}</td>'
        f'<td class="n">{sum(len(i.rewards) for i in s.source.items.values()):,}</td></tr>'
        for letter, s in zip(report.letters, report.summaries, strict=True)
    )
    notes = "".join(
        f"<li>{escaped(f'{letter}: {line}')}</li>"
        for letter, source in zip(report.letters, report.sources, strict=True)
        for line in [*compared.unread(source), *source.warnings]
    )
    setup = compared.setup_rows(report.summaries)
    differ = compared.differing(setup) if len(report.sources) > 1 else []
    return (
        "<h2>Sources</h2><table><thead><tr><th></th><th>path</th><th>kind</th><th>items</th>"
        f"<th>rollouts</th></tr></thead><tbody>{rows}</tbody></table>"
        + (f"<ul>{notes}</ul>" if notes else "")
        + "<h3>How they were made</h3>"
        + (f"<p>They differ in: {escaped(', '.join(differ))}</p>" if differ else "")
        + _table(setup, report.letters)
    )


def _table(rows: list[tuple[str, list[str]]], letters: list[str]) -> str:
    head = "".join(f'<th class="{_hue(x)}">{x}</th>' for x in letters)
    body = "".join(
        f"<tr><th>{escaped(label)}</th>"
        + "".join(f"<td>{escaped(v)}</td>" for v in values)
        + "</tr>"
        for label, values in rows
    )
    return f"<table><thead><tr><th></th>{head}</tr></thead><tbody>{body}</tbody></table>"


def _paired(report: Report, shown: set[str]) -> str:
    """Each later source against A, as ``compare`` prints it: the change and what it means, pass@k, McNemar's
    test and the items that flipped, how the items paired, each function, the items that moved most."""
    parts = ["<h2>Paired result</h2>"]
    for letter, change in zip(report.letters[1:], report.changes, strict=True):
        lines = [compared.change_line(letter, change), compared.pass_changes(change)]
        if (flips := change.flips) is not None:
            lines += [
                f"{compared.mcnemar(flips)} ({compared.unflipped(flips)})",
                compared.flipped("pass -> fail", flips.lost),
                compared.flipped("fail -> pass", flips.gained),
            ]
        lines.append(compared.pairing(letter, change))
        lines += filter(
            None, (compared.unpaired(letter, change), compared.unscored(letter, change))
        )
        if functions := compared.function_changes(change):
            lines.append(f"by function: {functions}")
        parts.append(f'<h3><span class="{_hue(letter)}">{letter}</span> against A</h3>')
        parts += [f"<p>{escaped(line)}</p>" for line in lines]
        drops, gains = moved(change.items, compared.SHOWN_EACH)
        if drops or gains:
            rows = "".join(
                f"<tr><td>{_item_link(i.key, shown)}</td><td>{how}</td>"
                f'<td class="n">{wording.number(i.before)}</td><td class="n">'
                f'{wording.number(i.after)}</td><td class="n">{wording.number(i.change, "+")}</td></tr>'
                for how, items in (("dropped", drops), ("gained", gains))
                for i in items
            )
            parts.append(
                f"<table><thead><tr><th>item</th><th>moved most</th><th>A</th><th>{letter}</th>"
                f"<th>{letter} - A</th></tr></thead><tbody>{rows}</tbody></table>"
            )
    return "".join(parts)


def _item_link(key: str, shown: set[str]) -> str:
    """The item's key, a link to its rollouts on this page where they are shown (an anchor, never a URL)."""
    return f'<a href="#{anchor(key)}">{escaped(key)}</a>' if key in shown else escaped(key)


def _figures(report: Report) -> str:
    return "<h2>Figures</h2>" + _table(compared.figure_rows(report.summaries), report.letters)


def _charts(report: Report) -> str:
    """The reward over groups (over items for a source of rows) and the rewards' histogram."""
    lines = []
    for source in report.sources:
        values = source.group_means or [item.mean for item in source.items.values()]
        lines.append(thinned(values, POINTS))
    over = "groups" if any(s.group_means for s in report.sources) else "items"
    low, high, counts = histograms(report.summaries)
    legend = " ".join(f'<span class="{_hue(x)}">■ {x}</span>' for x in report.letters)
    return (
        f"<h2>Charts</h2><p>{legend}</p>"
        f"<h3>Mean reward over {over}</h3>"
        + svg.lines(f"mean reward over {over}", lines, f"{over} (averaged down to {POINTS} points)")
        + f"<h3>Reward histogram, {compared.histogram_span(low, high)}</h3>"
        + svg.histogram("reward histogram", counts, low, high)
    )


def _items(report: Report, listed: list[str], shown: set[str], everyone: int) -> str:
    """The per-item table, sortable by any column and filtered by any text in a row."""
    head = ["item"]
    for letter in report.letters:
        head += [f"{letter} reward", f"{letter} rollouts", f"{letter} passes"]
    head += [f"{letter} - A" for letter in report.letters[1:]]
    over = len(report.sources) > 2  # steps of a run, checkpoints: the item's way through them
    if over:
        head.append("over the sources")
    rows = []
    for rank, key in enumerate(listed):
        cells = [f'<td data-v="{rank}">{_item_link(key, shown)}</td>']
        items = [s.items.get(key) for s in report.sources]
        for item, summary in zip(items, report.summaries, strict=True):
            cells += _item_cells(item, summary.threshold)
        for item in items[1:]:
            first = items[0]
            change = item.mean - first.mean if item is not None and first is not None else None
            cells.append(_number_cell(change, "+"))
        if over:
            means = [item.mean if item is not None else None for item in items]
            cells.append(f'<td data-v="{_last_minus_first(means)!r}">{svg.sparkline(means)}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    more = (
        f" The table lists {len(listed):,} of the {everyone:,} items (the shown ones first)."
        if len(listed) < everyone
        else ""
    )
    return (
        "<h2>Items</h2><p>Click a column to sort; type to keep the rows that hold the text."
        f"{more}</p>"
        '<p><input id="item-filter" type="search" placeholder="filter items" '
        f'aria-label="filter items"> <span id="item-count">{len(listed):,} shown</span></p>'
        '<table id="items" class="sortable"><thead><tr>'
        + "".join(f"<th>{escaped(h)}</th>" for h in head)
        + "</tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
    )


def _last_minus_first(means: list[float | None]) -> float | str:
    """What the sparkline's column sorts by: the change from the first source that has the item to the last."""
    known = [m for m in means if m is not None]
    return known[-1] - known[0] if len(known) > 1 else ""


def _item_cells(item: Item | None, threshold: float) -> list[str]:
    if item is None:
        return ['<td data-v="">-</td>'] * 3
    passes = item_passes(item.rewards, threshold)
    return [
        _number_cell(item.mean),
        f'<td class="n" data-v="{len(item.rewards)}">{len(item.rewards)}</td>',
        f'<td data-v="{int(passes)}">{"yes" if passes else "no"}</td>',
    ]


def _number_cell(value: float | None, sign: str = "") -> str:
    if value is None:
        return '<td data-v="">-</td>'
    return f'<td class="n" data-v="{value!r}">{wording.number(value, sign)}</td>'


def _rollouts(
    report: Report,
    order: list[str],
    max_rollouts: int,
    progress: Callable[[str], None],
) -> tuple[list[str], list[str], int]:
    """The sections of the items shown, in the order of their keys; those items; their rollouts."""
    picked, count, size = [], 0, 0
    sections: dict[str, str] = {}
    for key in order:
        more = report.rollouts(key)
        if count + more > max_rollouts:
            continue
        section = _item_section(report, key)
        if size + len(section.encode()) > BYTES:
            break
        picked.append(key)
        sections[key] = section
        count, size = count + more, size + len(section.encode())
        if len(picked) % PROGRESS_EVERY == 0:
            progress(f"{len(picked):,} items rendered ({count:,} rollouts)")
    shown = sorted(picked, key=in_order)
    return [sections[k] for k in shown], shown, count


def _item_section(report: Report, key: str) -> str:
    """An item's rollouts; with several sources (checkpoints, steps of a run) each source a column beside
    the others (scrolled sideways when they do not fit), under the item's mean reward from one source to
    the next."""
    parts = [f'<section class="item" id="{anchor(key)}"><h3>item {escaped(key)}</h3>']
    items = [s.items.get(key) for s in report.sources]
    if len(items) > 1:
        parts.append(f"<p>mean reward: {_trajectory_text(report.letters, items)}</p>")
        parts.append('<div class="sources">')
    for letter, item in zip(report.letters, items, strict=True):
        if len(items) > 1:
            parts.append(f'<div class="source"><div class="{_hue(letter)}">{letter}</div>')
        if item is not None:
            parts.extend(rollout(item, r, letter) for r in range(len(item.rewards)))
        if len(items) > 1:
            parts.append("</div>" if item is not None else "<p>not in this source</p></div>")
    parts.append("</div></section>" if len(items) > 1 else "</section>")
    return "".join(parts)


def _trajectory_text(letters: list[str], items: list[Item | None]) -> str:
    return " → ".join(
        f'<span class="{_hue(letter)}">{letter}</span> '
        + (wording.number(item.mean) if item is not None else "-")
        for letter, item in zip(letters, items, strict=True)
    )


def rollout(item: Item, r: int, letter: str) -> str:
    """One rollout, folded: its reward and marks in the summary; its functions' scores and messages inside."""
    tokens = item.tokens[r] if r < len(item.tokens) else None
    said = [f"reward {wording.number(item.rewards[r])}"]
    if item.truncated[r]:
        said.append("truncated")
    if tokens is not None:
        said.append(f"trained {tokens[0]:,} tokens, masked {tokens[1]:,}")
    scores = {
        name: values[r]
        for name, values in sorted(item.functions.items())
        if len(values) == len(item.rewards)  # a score per rollout: each is this rollout's
    }
    functions = "".join(
        f'<tr><th>{escaped(name)}</th><td class="n">{wording.number(value)}</td></tr>'
        for name, value in scores.items()
    )
    messages = "".join(_message(m, tokens is not None) for m in item.rollouts[r])
    return (
        f'<details><summary><span class="{_hue(letter)}">{letter}</span> rollout {r + 1}: '
        f"{escaped(', '.join(said))}</summary>"
        + (f"<table>{functions}</table>" if functions else "")
        + (messages or "<p>No messages were saved.</p>")
        + "</details>"
    )


def _message(message: dict[str, Any], masked: bool) -> str:
    """A message: its role (and, where the source has masks, whether the trainer learns from it: the model's
    own turns), its text, its tool calls."""
    role = str(message.get("role") or "?")
    label = role + (f" ({message['name']})" if isinstance(message.get("name"), str) else "")
    if isinstance(message.get("tool_call_id"), str):
        label += f", answering {message['tool_call_id']}"
    label = compared.cut(label, LABEL_CHARS)
    mark = ("trained" if role == "assistant" else "masked") if masked else ""
    calls = c if isinstance(c := message.get("tool_calls"), list) else []
    return (
        f'<div class="msg {mark}"><div class="role">{escaped(label)}'
        + (f' <span class="mark">{mark}</span>' if mark else "")
        + "</div>"
        + _text(_content(message.get("content")))
        + "".join(_text(f"tool call: {_call(call)}") for call in calls)
        + "</div>"
    )


def _content(content: Any) -> str:
    """A message's content as text: a string, or the text of its parts (any other part as its JSON)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part["text"]
            if isinstance(part, dict) and isinstance(part.get("text"), str)
            else _json(part)
            for part in content
        )
    return _json(content)


def _call(call: Any) -> str:
    """``name(arguments)`` of an OpenAI-style tool call, else the call's JSON."""
    function = call.get("function") if isinstance(call, dict) else None
    if isinstance(function, dict) and isinstance(function.get("name"), str):
        arguments = function.get("arguments")
        return (
            f"{function['name']}({arguments if isinstance(arguments, str) else _json(arguments)})"
        )
    return _json(call)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _text(text: str) -> str:
    """``text`` shown as written (its line breaks kept), cut at ``TEXT_CHARS`` saying how much more there is."""
    cut = ""
    if len(text) > TEXT_CHARS:
        cut = f'<div class="cut">… {len(text) - TEXT_CHARS:,} more characters, in the source file</div>'
        text = text[:TEXT_CHARS]
    return f'<div class="text">{escaped(text)}</div>{cut}'
