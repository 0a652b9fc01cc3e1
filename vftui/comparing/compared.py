"""How a comparison is said, once, for ``compare --no-ui`` and the compare screen: each later source's change
against A with its interval and what it means, the ``--fail-if-worse`` verdict, how the sources were made,
their figures and histograms.

Text from the files (paths, model ids, env args, function names) is returned as it is: each caller makes it
printable on its way to a terminal.
"""

from __future__ import annotations

from vftui.comparing.comparison import (
    BINS,
    NONE_SHARED,
    PROMPTS_DIFFER,
    TOO_FEW,
    UNPAIRED,
    Change,
    Summary,
    worse_beyond,
)
from vftui.figures.eval_stats import Estimate
from vftui.figures.paired import PAIRED_MIN, Flips
from vftui.run_files.results import Setup, Source
from vftui.text import wording

UNKNOWN = "unknown"  # a fact a source's files do not record
LONGEST = 48  # a recorded value longer than this is cut, with an ellipsis
BARS = " ▁▂▃▄▅▆▇█"
SHOWN_EACH = 5  # items that dropped most, and that gained most
FLIPS_SHOWN = 20  # keys of the items that flipped each way in a line (--json lists them all)


def letters(count: int) -> list[str]:
    """Each source's label: A to Z, then AA, AB, ... AZ, BA, ... as a spreadsheet's columns (the 27th was
    ``[``, the character after Z)."""
    return [label(n) for n in range(count)]


def label(n: int) -> str:
    """The ``n``-th source's label, from 0: A, ..., Z, AA, AB, ..."""
    text = ""
    n += 1
    while n:
        n, digit = divmod(n - 1, 26)
        text = chr(ord("A") + digit) + text
    return text


def position(letter: str) -> int:
    """The source a label stands for, from 0 (``label``'s inverse)."""
    n = 0
    for char in letter:
        n = n * 26 + ord(char) - ord("A") + 1
    return n - 1


def title(summaries: list[Summary]) -> str:
    env = next((s.source.env_id for s in summaries if s.source.env_id), "an unnamed environment")
    return f"compare: {len(summaries)} sources of {env} (± is a 95% interval over items)"


def signed(e: Estimate) -> str:
    """``-0.188 [-0.451, +0.076]``, or the mean alone with no interval."""
    mean = wording.number(e.mean, "+")
    if e.low is None or e.high is None:
        return mean
    return f"{mean} [{wording.number(e.low, '+')}, {wording.number(e.high, '+')}]"


def meaning(change: Change) -> str:
    """What the change says at 95%: worse, better, or no clear change; or that it has no interval."""
    e = change.reward
    if e.low is None or e.high is None:
        if not change.paired and change.pairing.unpaired != NONE_SHARED:
            return "no interval, unpaired"
        held = wording.counted(change.paired, "item") if change.paired else "no item"
        return f"no interval, {held} in common"
    if e.high < 0:
        return "worse beyond its interval"
    if e.low > 0:
        return "better beyond its interval"
    return "no clear change"


def test_used(change: Change) -> str:
    """How the change's intervals were made: ``paired bootstrap over 12 items`` (``... matched by id alone``
    where a source records no prompt), ``Welch's t, no item in common``, or ``Welch's t, unpaired: 100 of
    100 ids in common hold different prompts``."""
    p = change.pairing
    if change.paired:
        alone = (
            ""
            if not p.by_id
            else " matched by id alone"
            if p.by_id == change.paired
            else f", {p.by_id:,} matched by id alone"
        )
        return f"{change.test} over {wording.counted(change.paired, 'item')}{alone}"
    if p.unpaired in (None, NONE_SHARED):
        return f"{change.test}, no item in common"
    shared = wording.counted(p.shared, "id")
    return f"{change.test}, unpaired: {p.different:,} of {shared} in common hold different prompts"


def change_line(letter: str, change: Change) -> str:
    """The answer, what it means before how it was made (a narrow screen cuts the end):
    ``B - A reward -0.188 [-0.479, +0.076]: no clear change (paired bootstrap over 12 items)``."""
    return f"{letter} - A reward {signed(change.reward)}: {meaning(change)} ({test_used(change)})"


def pairing(letter: str, change: Change) -> str:
    """How the items lined up by id and prompt: ``items: 12 paired by id and prompt; 3 with the same id but a
    different prompt (no pair); 5 only in A, 0 only in B``."""
    p = change.pairing
    same, alone = (
        ("paired by id and prompt", "paired by id alone")
        if change.paired
        else ("with the same id and prompt", "with the same id")
    )
    parts = [
        f"{p.by_prompt:,} {same}" if p.by_prompt else "",
        f"{p.by_id:,} {alone} (a source records no prompt)" if p.by_id else "",
        f"{p.different:,} with the same id but a different prompt (no pair)" if p.different else "",
        f"{p.only_first:,} only in A, {p.only_later:,} only in {letter}"
        if p.only_first or p.only_later
        else "",
    ]
    return "items: " + "; ".join(filter(None, parts))


def unpaired(letter: str, change: Change) -> str | None:
    """The sentence saying why items that share ids were compared unpaired; None where they were not."""
    p = change.pairing
    differ = (
        f"{p.different:,} of the {wording.counted(p.shared, 'id')} A and {letter} share hold "
        "different prompts"
    )
    if p.unpaired == PROMPTS_DIFFER:
        return (
            f"compared unpaired ({UNPAIRED}): {differ}, so they are other examples, not the same "
            "ones scored again"
        )
    if p.unpaired == TOO_FEW:
        return (
            f"compared unpaired ({UNPAIRED}): {differ}, and the {wording.counted(p.pairs, 'pair')} "
            f"left are too few for a paired interval (it needs {PAIRED_MIN})"
        )
    return None


def unscored(letter: str, change: Change) -> str | None:
    """What ``--fail-if-worse`` counts against the later source: the items it did not score, as failures;
    None where it scored every one."""
    j = change.judged
    if not j.unscored or not change.paired:  # the gate judges no unpaired change: nothing to count
        return None
    p = change.pairing
    why = (
        f"{letter} lists {wording.counted(j.errors, 'example')} that failed to score"
        if j.errors
        else "items it does not hold"
    )
    missed = f"{letter} holds no score for {j.unscored:,} of A's {p.shared + p.only_first:,} items ({why})"
    return (
        f"{missed}: --fail-if-worse counts each as a failure at reward {j.floor:g}, "
        f"{letter} - A reward {signed(j.reward)}"
    )


def pass_changes(change: Change) -> str:
    """pass@k's change for each k, as the reward's: ``pass@1 -0.188 [...], pass@4 -0.083 [...]``."""
    return ", ".join(f"{name} {signed(e)}" for name, e in change.passes.items())


def mcnemar(flips: Flips) -> str:
    """McNemar's test of pass/fail: ``McNemar exact p = 0.25: 3 items pass -> fail, 0 fail -> pass``."""
    return (
        f"McNemar exact p = {flips.p_value:.3g}: {wording.counted(len(flips.lost), 'item')} pass -> "
        f"fail, {len(flips.gained)} fail -> pass"
    )


def unflipped(flips: Flips) -> str:
    """The rest of the paired items, and what passing is: ``9 pass in both, 0 fail in both; ...``."""
    return (
        f"{flips.both} pass in both, {flips.neither} fail in both; an item passes when half its "
        f"rollouts reach reward >= {flips.threshold:g}"
    )


def flipped(way: str, keys: list[str]) -> str:
    """The items that flipped one ``way`` (``pass -> fail``), counted, then the first ``FLIPS_SHOWN`` keys:
    ``pass -> fail: 2 items (ids 60, 61)``; bare keys read as a count (``pass -> fail: 60``)."""
    if not keys:
        return f"{way}: no item"
    more = len(keys) - FLIPS_SHOWN
    ids = ", ".join(keys[:FLIPS_SHOWN]) + (f" and {more} more" if more > 0 else "")
    return f"{way}: {wording.counted(len(keys), 'item')} (id{'s' if len(keys) > 1 else ''} {ids})"


def function_changes(change: Change) -> str:
    """Each reward function's change, as the reward's: ``format_ok +0.000 [...], ...``; "" when none."""
    return ", ".join(f"{name} {signed(e)}" for name, e in change.functions.items())


def passed(change: Change, margin: float) -> str:
    return "failed" if worse_beyond(change, margin) else "passed"


def verdict(later: str, first: str, change: Change, margin: float) -> str:
    """``--fail-if-worse``'s verdict on one later source, passed or failed."""
    worse = worse_beyond(change, margin)
    missed = change.judged.unscored
    counting = (
        f", counting the {wording.counted(missed, 'item')} it did not score as failures at reward "
        f"{change.judged.floor:g}"
        if missed
        else ""
    )
    return (
        f"--fail-if-worse {margin:g} {passed(change, margin)}: {later} is {'' if worse else 'not '}"
        f"worse than {first} by more than {margin:g} beyond the 95% interval, by "
        f"{test_used(change)}{counting}"
    )


def verdicts(letters: list[str], changes: list[Change], margin: float) -> str:
    """Every later source's verdict in one line: ``--fail-if-worse 0.02: B passed, C failed (...)``."""
    each = ", ".join(
        f"{letter} {passed(c, margin)} ({c.test}{_failures(c)})"
        for letter, c in zip(letters, changes, strict=True)
    )
    return (
        f"--fail-if-worse {margin:g}: {each} (fails: worse than A by more than {margin:g} beyond the "
        "95% interval)"
    )


def _failures(change: Change) -> str:
    """``, 24 unscored as failures`` where the gate counted items the later source did not score."""
    missed = change.judged.unscored
    return f", {missed:,} unscored as failures" if missed else ""


def cut(text: str, width: int = LONGEST, tail: bool = False) -> str:
    """``text`` in ``width`` characters: its start and an ellipsis, or (``tail``) an ellipsis and its end."""
    if len(text) <= width:
        return text
    return "…" + text[len(text) - width + 1 :] if tail else text[: width - 1] + "…"


def setup_rows(summaries: list[Summary]) -> list[tuple[str, list[str]]]:
    """How each source was made: the same facts for each, ``unknown`` where its files do not say (each value
    whole: a caller cuts it to the room it has)."""
    setups = [s.source.setup for s in summaries]

    def row(label: str, value) -> tuple[str, list[str]]:
        return label, [value(s) or UNKNOWN for s in setups]

    return [
        row("model", lambda s: s.model),
        row("temperature", lambda s: temperatures(s)),
        row("env args", lambda s: s.env_args),
        row("split", lambda s: s.split),
        row("versions", lambda s: s.versions),
    ]


def temperatures(setup: Setup) -> str:
    """``1``, ``0.7, 1`` or ``0.2 to 1 (5 values)``: it may have changed during a run."""
    values = setup.temperatures
    if len(values) > 3:
        return f"{values[0]:g} to {values[-1]:g} ({len(values)} values)"
    return ", ".join(f"{t:g}" for t in values)


def differing(rows: list[tuple[str, list[str]]]) -> list[str]:
    """The labels of the rows whose sources do not all agree (an unknown is a difference too)."""
    return [label for label, values in rows if len(set(values)) > 1]


def figure_rows(summaries: list[Summary]) -> list[tuple[str, list[str]]]:
    """Each source's figures, a row a figure, the answer's first, then a row for each reward function."""
    rows = [
        ("reward", [_figure(s.reward) for s in summaries]),
        ("pass@1", [_figure(s.pass1) for s in summaries]),
        ("passes at", [f"reward >= {s.threshold:g}" for s in summaries]),
        ("rollouts/item", [str(s.rollouts) for s in summaries]),
        ("items", [str(len(s.source.items)) for s in summaries]),
        ("errors", [str(s.source.errors) for s in summaries]),
        ("truncated", [f"{s.truncated:.1%}" for s in summaries]),
        ("identical", ["-" if s.identical is None else f"{s.identical:.1%}" for s in summaries]),
        ("completion", [f"{s.completion_chars:.0f} chars" for s in summaries]),
    ]
    names = sorted({n for s in summaries for n in s.functions})
    return rows + [
        (name, [_figure(s.functions[name]) if name in s.functions else "-" for s in summaries])
        for name in names
    ]


def reward_range(low: float, high: float) -> str:
    """``[low, high]`` as a histogram's labels write it (+ 0.0: a reward written -0.0 reads 0)."""
    return f"[{low + 0.0:g}, {high + 0.0:g}]"


def histogram_span(low: float, high: float) -> str:
    """What a reward histogram's bins split: the rewards' range, or the one reward they all had ('10 bins over
    [0, 0]' said nothing)."""
    return (
        f"{BINS} bins over {reward_range(low, high)}"
        if high > low
        else f"every reward {low + 0.0:g}"
    )


def bars(bins: list[int]) -> str:
    """A histogram in one line of block characters, and how many rollouts it counts."""
    top = max(bins) or 1
    return "".join(BARS[round(count / top * (len(BARS) - 1))] for count in bins) + f" {sum(bins)}"


def _figure(e: Estimate) -> str:
    return wording.figure(e.as_dict())


def unread(source: Source) -> list[str]:
    """What ``source`` holds that is in none of its figures: lines skipped, examples that failed to score."""
    lines = []
    if source.skipped:
        lines.append(
            f"{source.skipped} lines skipped (not results: torn, foreign, or a reward that is not a number)"
        )
    if source.errors:
        lines.append(
            f"{source.errors} examples failed to score (errors): they are in none of its figures, nor paired"
        )
    return lines
