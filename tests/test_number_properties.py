"""Properties of the eval and compare numbers, and of the readers of results (issue 29.11): pass@k and its
intervals against brute force, every figure finite whatever the magnitude, compare's pairing and gate on
random sources (NaN, infinities, 1e308, 401-digit ints, bools, strings, missing fields), and the readers
fed random and mutated bytes: rows or a sentence, never a traceback."""

from __future__ import annotations

import functools
import itertools
import json
import math
import statistics
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vftui.bounds import MAX_SCORE, score
from vftui.commands.compare import as_dict, load_all
from vftui.comparing.comparison import compare, summarize, worse_beyond
from vftui.errors import UserError
from vftui.figures.eval_stats import (
    EvalTally,
    ItemResult,
    difference,
    estimate,
    pass_all_k,
    pass_at,
    pass_at_k,
    t_quantile,
)
from vftui.run_files.drops import read_drops
from vftui.run_files.files import RunFiles
from vftui.run_files.groupfile import GroupFile
from vftui.run_files.opening import open_resumed
from vftui.run_files.results import load, vf_eval_groups
from vftui.run_files.shards import WHOLE

SOME = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def draws(outcomes: list[bool], k: int) -> list[tuple[bool, ...]]:
    """Every way to draw k of the rollouts."""
    return list(itertools.combinations(outcomes, k))


@pytest.mark.unit
@SOME
@given(st.lists(st.booleans(), min_size=1, max_size=9), st.data())
def test_pass_at_k_and_pass_all_k_are_the_shares_of_every_draw_of_k(outcomes, data):
    k = data.draw(st.integers(1, len(outcomes)))
    every = draws(outcomes, k)
    assert pass_at_k(len(outcomes), sum(outcomes), k) == pytest.approx(
        sum(map(any, every)) / len(every), abs=1e-12
    )
    assert pass_all_k(len(outcomes), sum(outcomes), k) == pytest.approx(
        sum(map(all, every)) / len(every), abs=1e-12
    )


@functools.cache
def brute_t_quantile(p: float, df: int) -> float:
    """Student's t quantile by integrating its density (Simpson's rule) and bisecting: no incomplete beta."""
    scale = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def cdf(t: float, steps: int = 4000) -> float:
        h = t / steps
        density = [scale * (1 + (h * i) ** 2 / df) ** (-(df + 1) / 2) for i in range(steps + 1)]
        return 0.5 + h / 3 * (
            density[0] + density[-1] + 4 * sum(density[1:-1:2]) + 2 * sum(density[2:-1:2])
        )

    low, high = 0.0, 64.0
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if cdf(middle) < p else (low, middle)
    return (low + high) / 2


REWARDS = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]) | st.floats(-2, 2, allow_nan=False)


@SOME
@given(
    st.lists(st.lists(REWARDS, min_size=1, max_size=6), min_size=1, max_size=10),
    st.integers(1, 6),
    st.sampled_from([0.0, 0.5, 1.0]),
)
def test_pass_at_k_over_items_and_its_interval_are_the_brute_force_ones(items, k, threshold):
    estimate_ = pass_at(
        [ItemResult(n, tuple(rewards)) for n, rewards in enumerate(items)], k, threshold
    )
    values = [
        sum(map(any, every)) / len(every)
        for every in (
            draws([r >= threshold for r in rewards], k) for rewards in items if len(rewards) >= k
        )
    ]
    assert estimate_.count == len(values)
    if not values:
        assert math.isnan(estimate_.mean) and estimate_.low is None
        return
    mean = math.fsum(values) / len(values)
    assert estimate_.mean == pytest.approx(mean, abs=1e-12)
    if len(values) < 2:
        assert estimate_.low is None and estimate_.high is None, "no interval from one item"
        return
    # Wilson's interval with the items as its trials (not their rollouts), found here by bisection on its
    # defining inequality, not its closed form
    p = min(1.0, max(0.0, mean))
    low, high = brute_wilson(p, len(values))
    assert estimate_.low == pytest.approx(min(low, p), abs=1e-6)
    assert estimate_.high == pytest.approx(max(high, p), abs=1e-6)
    assert estimate_.low < estimate_.high, "never a point, even when every item passes or fails"


def brute_wilson(p: float, trials: float) -> tuple[float, float]:
    """The ends of {q in [0, 1]: (p - q)^2 <= z^2 q (1 - q) / trials}, by bisection from p outwards."""
    z = statistics.NormalDist().inv_cdf(0.975)

    def inside(q: float) -> bool:
        return (p - q) ** 2 <= z * z * q * (1 - q) / trials + 1e-15

    def edge(outer: float) -> float:
        if inside(outer):
            return outer
        lo, hi = p, outer  # inside at p, outside at outer
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if inside(mid) else (lo, mid)
        return lo

    return edge(0.0), edge(1.0)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 40))
def test_t_quantiles_are_the_integrated_densitys(df):
    assert t_quantile(0.975, df) == pytest.approx(brute_t_quantile(0.975, df), rel=1e-6)


SCORES = st.floats(-MAX_SCORE, MAX_SCORE, allow_nan=False) | st.sampled_from(
    [MAX_SCORE, -MAX_SCORE, 0.0, 1e-300]
)


def finite_figures(value: Any) -> bool:
    """Every float in ``value`` (nested dicts and lists) is finite; None is a figure there is none of."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(map(finite_figures, value.values()))
    if isinstance(value, list | tuple):
        return all(map(finite_figures, value))
    return True


@SOME
@given(
    st.lists(st.lists(SCORES, min_size=1, max_size=5), min_size=1, max_size=8),
    st.lists(SCORES, min_size=1, max_size=8),
)
def test_every_figure_of_scores_of_any_magnitude_is_finite(items, other):
    tally = EvalTally(3, 0.5)
    for n, rewards in enumerate(items):
        tally.add(n, rewards, {"judge": rewards})
    report = tally.report(len(items), final=True)
    assert finite_figures(report.figures) and finite_figures(report.functions)
    means = [statistics.fmean(rewards) for rewards in items]
    for figure in (estimate(means), difference(means, other), difference(other, other)):
        assert finite_figures([figure.mean, figure.low, figure.high])
        if figure.low is not None:
            assert figure.low <= figure.high


MISSING = object()
ODD_REWARDS = (
    st.floats()
    | st.integers(-(10**400), 10**400)
    | st.sampled_from([1e308, -1e308, 10**400, MAX_SCORE])
    | st.booleans()
    | st.none()
    | st.text(max_size=3)
    | st.just(MISSING)
)
ROWS = st.lists(
    st.fixed_dictionaries(
        {"example_id": st.integers(0, 6) | st.none() | st.just(MISSING), "reward": ODD_REWARDS}
    ),
    max_size=12,
)


def results_file(folder: Path, rows: list[dict[str, Any]]) -> Path:
    """vf-eval's results.jsonl: JSON's NaN and Infinity as Python writes them, whole ints, fields left out."""
    folder.mkdir()
    lines = [
        json.dumps({key: value for key, value in row.items() if value is not MISSING})
        for row in rows
    ]
    (folder / "results.jsonl").write_text("".join(line + "\n" for line in lines))
    return folder / "results.jsonl"


def results_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows that are results: an example id and a reward that is a number."""
    return [
        row
        for row in rows
        if row["example_id"] not in (None, MISSING)
        and row["reward"] is not MISSING
        and score(row["reward"]) is not None
    ]


def failed(rows: list[dict[str, Any]]) -> set[str]:
    """The examples with a row whose reward is no number: errors, none of their rows in a figure."""
    return {
        str(row["example_id"])
        for row in rows
        if row["example_id"] not in (None, MISSING)
        and (row["reward"] is MISSING or score(row["reward"]) is None)
    }


def readable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [row for row in results_rows(rows) if str(row["example_id"]) not in failed(rows)]


@SOME
@given(ROWS, ROWS, st.floats(0, 1))
def test_compare_pairs_what_both_hold_its_figures_are_finite_and_its_gate_never_passes_on_nothing(
    a, b, margin
):
    with tempfile.TemporaryDirectory() as tmp:
        paths = [results_file(Path(tmp) / name, rows) for name, rows in (("a", a), ("b", b))]
        try:
            sources = load_all(paths)
        except UserError:
            assert not readable(a) or not readable(b), "a side with something readable is compared"
            return
    assert readable(a) and readable(b), "a side with nothing readable is refused, never passed"
    for source, rows in zip(sources, (a, b), strict=True):
        assert sum(len(item.rewards) for item in source.items.values()) == len(readable(rows))
        assert source.skipped == len(rows) - len(results_rows(rows)), (
            "each row is a result or counted as skipped"
        )
        assert source.errors == len(failed(rows)), "an example with a reward that is no number"
    first, later = sources
    change = compare(first, later)
    common = first.items.keys() & later.items.keys()
    assert change.paired == len(common) and {c.key for c in change.items} == common
    for c in change.items:
        assert c.before == pytest.approx(statistics.fmean(first.items[c.key].rewards))
        assert c.after == pytest.approx(statistics.fmean(later.items[c.key].rewards))
    report = as_dict([summarize(s, 0.5) for s in sources], [change], margin, [])
    assert finite_figures(report)
    if worse_beyond(change, margin):  # what B did not score counts against it (issue 42.18)
        assert change.judged.reward.high is not None and change.judged.reward.high < -margin


TOKENS = [
    b"NaN",
    b"Infinity",
    b"-1e308",
    b"1e400",
    b"1" + b"0" * 400,
    b"true",
    b"null",
    b'"0.5"',
    b"[",
    b"]",
    b"{",
    b"}",
    b",",
    b":",
    b"\n",
    b"\xff\xfe",
    b"\x1b]0;x\x07",
    b"",
    b"-0",
    b"[" * 80,
    b'"vftui"',
    b'"scores"',
]
GROUP = {
    "tokens": [[1, 2], [3]],
    "masks": [[-100, 2], [3]],
    "scores": [0.5, 1.0],
    "messages": [[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]] * 2,
    "generation_params": {"temperature": 1.0},
    "vftui": {
        "item": 0,
        "example_id": 0,
        "mode": "eval",
        "metrics": {"judge": [0.5, 1.0]},
        "turns": [1, 1],
        "finish_reasons": ["stop", "length"],
        "started_at": 1.0,
        "elapsed_s": 0.5,
    },
}
ROW = {
    "example_id": 0,
    "reward": 0.5,
    "metrics": {"judge": 0.5},
    "prompt": [{"role": "user", "content": "q"}],
    "completion": "a",
    "is_truncated": False,
}
DROP = {
    "item": 1,
    "reason": "reward function 'judge' failed",
    "scores": [],
    "metrics": {},
    "turns": [],
}
METADATA = {
    "env_id": "x",
    "model": "m",
    "pass_threshold": 0.5,
    "sampling_args": {"temperature": 1.0},
}
CHECKPOINT = {"done_below": 1, "done_above": [3], "iter": 4, "groups": 2}


@st.composite
def mutated(draw, seed: dict[str, Any], lines: int = 3) -> bytes:
    """``lines`` copies of ``seed``'s JSON line, with bytes cut and replaced by odd tokens or random ones; or
    random bytes altogether."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=300))
    data = bytearray((json.dumps(seed) + "\n").encode() * lines)
    for _ in range(draw(st.integers(0, 6))):
        at, cut = draw(st.integers(0, len(data))), draw(st.integers(0, 12))
        data[at : at + cut] = draw(st.sampled_from(TOKENS) | st.binary(max_size=6))
    return bytes(data)


def assert_rows_or_a_sentence(path: Path) -> None:
    """compare's reader: results whose every reward is a finite number, or a ``UserError`` (a sentence)."""
    try:
        source = load(path)
    except UserError:
        return
    assert all(finite_figures(item.rewards) for item in source.items.values())


@SOME
@given(mutated(GROUP), mutated(DROP), mutated(CHECKPOINT, lines=1))
def test_a_groups_file_and_its_side_files_read_as_rows_or_a_sentence(groups, drops, checkpoint):
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "groups.jsonl"
        out.write_bytes(groups)
        out.with_suffix(".dropped.jsonl").write_bytes(drops)
        out.with_suffix(".checkpoint.json").write_bytes(checkpoint)
        events: list[Any] = []
        view = GroupFile(out)
        summary = view.read(events.append, "")
        assert summary.groups_done == len(view) and all(
            finite_figures(list(row.scores)) for row in view
        )
        found, _ = read_drops(RunFiles(out))
        assert all(type(drop.item) is int and finite_figures(drop.scores) for drop in found)
        assert_rows_or_a_sentence(out)
        try:
            opened = open_resumed(out, 8, WHOLE)
        except UserError:
            return
        opened.lock.release()
        done = {group.item for group in [*opened.written, *opened.dropped]}
        assert opened.ledger.take() not in done, (
            "what the file and its drop log hold is never collected again"
        )


@SOME
@given(mutated(ROW), mutated(METADATA, lines=1))
def test_vf_eval_results_read_as_rows_or_a_sentence(rows, metadata):
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "results.jsonl"
        results.write_bytes(rows)
        (Path(tmp) / "metadata.json").write_bytes(metadata)
        assert_rows_or_a_sentence(results)
        try:
            groups, _ = vf_eval_groups(results)
        except UserError:
            return
        assert all(finite_figures(group["scores"]) for group in groups)
