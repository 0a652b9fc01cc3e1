"""``vftui compare A B [C ...]``: runs, evals, dumps, vf-eval outputs and folders of a run's shards, of one
environment, side by side.

Each later source is set against the first (A). Printed as a table, or as one JSON object
(``--json``); with ``--fail-if-worse D`` it exits 3 when a later source's reward is below A's
by more than D beyond the 95% interval of the change, for CI.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from vftui.defaults import PASS_THRESHOLD
from vftui.errors import EXIT_GATE, UserError
from vftui.figures.comparison import (
    BINS,
    Change,
    Summary,
    compare,
    histograms,
    summarize,
    worse_beyond,
)
from vftui.figures.eval_stats import Estimate
from vftui.run_files.results import Source, load
from vftui.text import wording
from vftui.text.json_lines import finite_json
from vftui.text.printable import one_line, say

SHOWN_ITEMS = 10
BARS = " ▁▂▃▄▅▆▇█"


def load_all(paths: list[Path]) -> list[Source]:
    """The sources, refused with a sentence when one holds no result it can read, or they name different
    environments."""
    if len(paths) < 2:
        raise UserError("compare needs at least two runs, evals, dumps or vf-eval outputs")
    sources = [load(path) for path in paths]
    if empty := next((s for s in sources if not s.items), None):  # nothing to compare: never a pass
        raise UserError(
            f"{empty.path}: no result compare can read in it ({empty.skipped} lines skipped: torn, "
            "foreign, or a reward that is not a number)"
        )
    named = {s.env_id for s in sources if s.env_id}
    if len({module_name(env) for env in named}) > 1:
        raise UserError(
            f"these are runs of different environments ({', '.join(sorted(named))}); compare runs of one"
        )
    return sources


def module_name(env_id: str) -> str:
    """``owner/alphabet-sort`` as vf-eval names it once installed: ``alphabet_sort``."""
    return env_id.rsplit("/", 1)[-1].replace("-", "_")


def run_compare(
    paths: list[Path],
    as_json: bool,
    fail_if_worse: float | None,
    threshold: float | None,
    no_ui: bool = False,
    theme: str | None = None,
) -> int:
    """The comparison as JSON, as text, or (in a terminal, without --no-ui) in the compare app."""
    sources = load_all(paths)
    for source in sources:
        if source.skipped:
            print(
                f"vftui: {one_line(str(source.path))}: {source.skipped} lines skipped (not results: torn, "
                "foreign, or a reward that is not a number)",
                file=sys.stderr,
            )
        if source.errors:
            print(
                f"vftui: {one_line(str(source.path))}: {source.errors} examples failed to score (errors): they are "
                "in none of its figures, nor paired",
                file=sys.stderr,
            )
        for warning in source.warnings:
            print(f"vftui: warning: {one_line(str(source.path))}: {warning}", file=sys.stderr)
    # pass@1 at the threshold asked for, else the one each eval recorded, else vf-eval's default
    summaries = [
        summarize(s, threshold if threshold is not None else s.threshold or PASS_THRESHOLD)
        for s in sources
    ]
    changes = [compare(sources[0], s) for s in sources[1:]]
    if fail_if_worse is not None:
        refuse_unjudged(sources, changes)
    worse = [
        s.path
        for s, c in zip(sources[1:], changes, strict=True)
        if fail_if_worse is not None and worse_beyond(c, fail_if_worse)
    ]
    if as_json:
        print(json.dumps(finite_json(as_dict(summaries, changes, fail_if_worse, worse))))
    elif no_ui or not (sys.stdout.isatty() and sys.stdin.isatty()):
        say(report(summaries, changes), sys.stdout)
    else:
        from vftui.ui import themes
        from vftui.ui.compare_app import CompareApp

        ours = themes.available_themes()
        header = report(summaries, changes)
        CompareApp(
            summaries,
            changes[0],
            "\n".join(header[: len(summaries) + 1]),
            themes.resolve(theme, ours=ours),
            ours,
        ).run()
    for path in worse:
        print(
            f"vftui: {one_line(str(path))} is worse than {one_line(str(sources[0].path))} by more than "
            f"{fail_if_worse:g} beyond the 95% interval",
            file=sys.stderr,
        )
    return EXIT_GATE if worse else 0


def refuse_unjudged(sources: list[Source], changes: list[Change]) -> None:
    """The gate never passes a change it has no interval for (one item in common, or one in a source): a sentence."""
    for source, change in zip(sources[1:], changes, strict=True):
        if change.reward.high is None:
            held = (
                f"only {change.paired} item in common"
                if change.paired
                else f"no item in common and only {min(len(sources[0].items), len(source.items))} in one of them"
            )
            raise UserError(
                f"--fail-if-worse cannot judge {one_line(str(source.path))} against "
                f"{one_line(str(sources[0].path))}: {held}, too few for a 95% interval of the change "
                "(it needs 2 or more); compare more examples"
            )


def as_dict(
    summaries: list[Summary], changes: list[Change], margin: float | None, worse: list[Path]
) -> dict[str, Any]:
    low, high, counts = histograms(summaries)
    return {
        "sources": [
            {**_summary_dict(s), "histogram": bins}
            for s, bins in zip(summaries, counts, strict=True)
        ],
        "histogram_range": [low, high],
        "changes": [
            {
                "against": str(summaries[0].source.path),
                "source": str(s.source.path),
                "paired": c.paired,
                "reward": c.reward.as_dict(),
                "functions": {n: e.as_dict() for n, e in c.functions.items()},
                "items": [
                    {"key": i.key, "before": i.before, "after": i.after, "change": i.change}
                    for i in c.items
                ],
            }
            for s, c in zip(summaries[1:], changes, strict=True)
        ],
        "fail_if_worse": margin,
        "worse": [str(p) for p in worse],
    }


def _summary_dict(s: Summary) -> dict[str, Any]:
    return {
        "path": str(s.source.path),
        "kind": s.source.kind,
        "env_id": s.source.env_id,
        "items": len(s.source.items),
        "errors": s.source.errors,
        "rollouts": s.rollouts,
        "reward": s.reward.as_dict(),
        "pass@1": s.pass1.as_dict(),
        "pass_threshold": s.threshold,
        "skipped_lines": s.source.skipped,
        "functions": {n: e.as_dict() for n, e in s.functions.items()},
        "truncated": s.truncated,
        "identical": s.identical,
        "completion_chars": s.completion_chars,
        "warnings": s.source.warnings,
    }


def report(summaries: list[Summary], changes: list[Change]) -> list[str]:
    """The side-by-side table, the histograms, each change and the items that changed most."""
    letters = [chr(ord("A") + i) for i in range(len(summaries))]
    env = next((s.source.env_id for s in summaries if s.source.env_id), "an unnamed environment")
    lines = [f"compare: {len(summaries)} sources of {env} (± is a 95% interval over items)"]
    lines += [
        f"  {letter}  {s.source.path} ({s.source.kind})"
        for letter, s in zip(letters, summaries, strict=True)
    ]
    rows = [
        ("items", [str(len(s.source.items)) for s in summaries]),
        ("errors", [str(s.source.errors) for s in summaries]),
        ("rollouts/item", [str(s.rollouts) for s in summaries]),
        ("reward", [_figure(s.reward) for s in summaries]),
        ("pass@1", [_figure(s.pass1) for s in summaries]),
        ("passes at", [f"reward >= {s.threshold:g}" for s in summaries]),
        ("truncated", [f"{s.truncated:.1%}" for s in summaries]),
        ("identical", [f"{s.identical:.1%}" for s in summaries]),
        ("completion", [f"{s.completion_chars:.0f} chars" for s in summaries]),
    ]
    names = sorted({n for s in summaries for n in s.functions})
    rows += [
        (name, [_figure(s.functions[name]) if name in s.functions else "-" for s in summaries])
        for name in names
    ]
    width = max(len(label) for label, _ in rows)
    lines.append(f"  {'':<{width}}  " + "".join(f"{letter:<18}" for letter in letters))
    lines += [
        f"  {label:<{width}}  " + "".join(f"{v:<18}" for v in values) for label, values in rows
    ]
    low, high, counts = histograms(summaries)
    lines.append(f"  reward histogram, {BINS} bins over [{low:g}, {high:g}]:")
    lines += [f"    {letter}  {_bars(bins)}" for letter, bins in zip(letters, counts, strict=True)]
    for letter, change in zip(letters[1:], changes, strict=True):
        how = f"paired over {change.paired} items" if change.paired else "no common items: unpaired"
        lines.append(
            f"  {letter} - A ({how}): reward {_signed(change.reward)}"
            + "".join(f", {n} {_signed(e)}" for n, e in change.functions.items())
        )
        if change.items:
            lines.append(
                f"    items that changed most, worst first ({min(SHOWN_ITEMS, len(change.items))} of "
                f"{len(change.items)}):"
            )
            lines += [
                f"      {i.key:<12} {wording.number(i.before)} -> {wording.number(i.after)}  "
                f"{wording.number(i.change, '+')}"
                for i in change.items[:SHOWN_ITEMS]
            ]
    return lines


def _figure(e: Estimate) -> str:
    return wording.figure(e.as_dict())


def _signed(e: Estimate) -> str:
    mean = wording.number(e.mean, "+")
    if e.low is None or e.high is None:
        return mean
    return f"{mean} [{wording.number(e.low, '+')}, {wording.number(e.high, '+')}]"


def _bars(bins: list[int]) -> str:
    top = max(bins) or 1
    return (
        "".join(BARS[round(count / top * (len(BARS) - 1))] for count in bins)
        + f"  ({sum(bins)} rollouts)"
    )
