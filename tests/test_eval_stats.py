"""The eval numbers against brute force and known values."""

from __future__ import annotations

import itertools
import json
import math
import random
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vftui.figures.eval_stats import (
    EvalTally,
    ItemResult,
    Z,
    estimate,
    k_values,
    pass_all_k,
    pass_at,
    pass_at_k,
    proportion,
    t_cdf,
    t_quantile,
    wilson,
)
from vftui.figures.signals import read_gates


def brute_pass_at_k(outcomes: list[bool], k: int) -> float:
    """Every way to draw k of the rollouts: the share in which one passes."""
    draws = list(itertools.combinations(outcomes, k))
    return sum(any(draw) for draw in draws) / len(draws)


@pytest.mark.unit
@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_equals_drawing_k_of_n_rollouts_every_way(n):
    for c in range(n + 1):
        outcomes = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(brute_pass_at_k(outcomes, k), abs=1e-12), (
                n,
                c,
                k,
            )


@pytest.mark.unit
def test_pass_at_k_stays_exact_where_the_binomials_overflow():
    n, c, k = 2000, 13, 100
    exact = 1 - math.comb(n - c, k) / math.comb(n, k)  # Python's integers do not overflow
    assert pass_at_k(n, c, k) == pytest.approx(exact, rel=1e-9)
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("df", "quantile"),
    [(1, 12.7062), (2, 4.3027), (4, 2.7764), (9, 2.2622), (29, 2.0452), (120, 1.9799)],
)
def test_t_quantiles_are_the_tables(df, quantile):
    assert t_quantile(0.975, df) == pytest.approx(quantile, abs=1e-4)
    assert t_cdf(t_quantile(0.975, df), df) == pytest.approx(0.975, abs=1e-9)
    assert t_quantile(0.025, df) == pytest.approx(-quantile, abs=1e-4)


@pytest.mark.unit
def test_a_mean_comes_with_its_95_percent_t_interval():
    values = [1.0, 2.0, 3.0, 4.0, 5.0]
    est = estimate(values)
    half = 2.7764 * statistics.stdev(values) / math.sqrt(5)  # t(0.975, 4) * s / sqrt(n)
    assert (
        est.mean == 3.0
        and est.low == pytest.approx(3 - half, abs=1e-3)
        and est.high == pytest.approx(3 + half, abs=1e-3)
    )
    assert estimate([0.7]).low is None and estimate([]).count == 0
    clipped = estimate([0.0, 1.0, 1.0], bounds=(0.0, 1.0))
    assert clipped.high == 1.0 and clipped.low >= 0.0


@pytest.mark.unit
def test_intervals_narrow_as_items_come():
    widths = [estimate([float(i % 2) for i in range(n)]).half_width for n in (4, 16, 64, 256)]
    assert widths == sorted(widths, reverse=True)


@pytest.mark.unit
def test_pass_at_k_over_items_with_a_threshold():
    items = [
        ItemResult(0, (1.0, 0.0, 0.0, 0.0)),
        ItemResult(1, (1.0, 1.0, 1.0, 1.0)),
        ItemResult(2, (0.5, 0.2, 0.1, 0.0)),
    ]
    one = pass_at(items, 1, threshold=1.0)
    assert one.mean == pytest.approx((0.25 + 1.0 + 0.0) / 3)
    four = pass_at(items, 4, threshold=1.0)
    assert four.mean == pytest.approx((1.0 + 1.0 + 0.0) / 3)
    assert pass_at(items, 1, threshold=0.5).mean == pytest.approx((0.25 + 1.0 + 0.25) / 3)
    assert (
        [round(i.std, 4) for i in items] == [0.433, 0.0, 0.1871]
        and items[2].low == 0.0
        and items[2].high == 0.5
    )


@pytest.mark.unit
def test_the_tally_gives_each_figure_over_items():
    tally = EvalTally(rollouts=3, threshold=0.5)
    tally.add(0, [1.0, 0.0, 0.0], {"f": [1.0, 1.0, 0.0]})
    tally.add(1, [1.0, 1.0, 1.0], {"f": [0.0, 0.0, 0.0]})
    figures = tally.figures()
    assert list(figures) == ["reward", "pass@1", "pass@2", "pass@3", "accuracy"]
    assert figures["reward"].mean == pytest.approx((1 / 3 + 1) / 2)
    assert figures["pass@2"].mean == pytest.approx((pass_at_k(3, 1, 2) + 1.0) / 2)
    assert figures["pass@3"].mean == 1.0 and figures["accuracy"].mean == pytest.approx(2 / 3)
    assert tally.function_figures()["f"].mean == pytest.approx(1 / 3)
    assert k_values(1) == [1] and k_values(8) == [1, 2, 4, 8] and k_values(6) == [1, 2, 4, 6]
    assert pass_all_k(4, 2, 2) == pytest.approx(1 / 6) and pass_all_k(4, 4, 4) == 1.0


@pytest.mark.unit
def test_gates_read_both_directions_for_eval_figures_only():
    gates = read_gates("identical>0.8, pass@1<0.6, reward>0.2")
    assert [(g.name, g.op, g.threshold, g.is_eval) for g in gates] == [
        ("identical", ">", 0.8, False),
        ("pass@1", "<", 0.6, True),
        ("reward", ">", 0.2, True),
    ]
    assert gates[1].passed(0.5) and not gates[1].passed(0.6)
    for bad in ("identical<0.3", "pass@0<1", "pass@x<1", "accuracy<nan"):
        with pytest.raises(ValueError, match="cannot read"):
            read_gates(bad)


@pytest.mark.unit
def test_saved_results_with_bad_values_are_skipped_and_counted_never_a_crash(tmp_path):
    from vftui.run_files.results import load
    from vftui.ui.widgets.token_preview import message_pieces

    good = {"example_id": 1, "reward": 1.0, "prompt": [], "completion": "ok"}
    rows = [
        good,
        {"example_id": 2, "reward": "abc"},
        {"example_id": 3, "reward": None},
        {"example_id": 4},
        {"example_id": 5, "reward": [1]},
        {**good, "example_id": 6, "completion": 3},
    ]
    (tmp_path / "results.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows) + '{"reward": NaN, "ex\n' + "not json\n"
    )
    source = load(tmp_path)
    assert sorted(source.items) == ["1", "6"] and source.skipped == 6, (
        "a missing reward is not a zero"
    )
    groups = tmp_path / "groups.jsonl"
    bad = [
        {"scores": s, "tokens": [[]], "masks": [[]]}
        for s in ([float("nan")], [], None, ["a"], {"a": 1})
    ]
    groups.write_text(
        "".join(json.dumps(g) + "\n" for g in [*bad, {"scores": [0.5], "messages": "x"}])
    )
    source = load(groups)
    assert len(source.items) == 1 and source.skipped == 5
    shown = "".join(
        text for text, _ in message_pieces([{"role": "assistant", "content": "\x1b]0;pwned\x07hi"}])
    )
    assert "\x1b" not in shown and "\x07" not in shown and "hi" in shown


def brute_wilson(passed: int, n: int, steps: int = 20_000) -> tuple[float, float]:
    """Every q on a fine grid the score test at 95% does not reject: (p - q)^2 <= Z^2 q(1 - q) / n."""
    p = passed / n
    kept = [
        q / steps
        for q in range(steps + 1)
        if (p - q / steps) ** 2 <= Z * Z * q / steps * (1 - q / steps) / n
    ]
    return min(kept), max(kept)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 300).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_is_the_score_tests_acceptance_region(case):
    passed, n = case
    low, high = wilson(passed / n, n)
    brute_low, brute_high = brute_wilson(passed, n)
    assert low == pytest.approx(brute_low, abs=1e-4) and high == pytest.approx(brute_high, abs=1e-4)


@pytest.mark.unit
def test_every_item_passing_or_failing_keeps_an_interval():
    """The known values: 10 of 10 is [0.7225, 1], 0 of 10 is [0, 0.2775]; never ``1.000 ± 0.000``."""
    all_pass, none_pass = proportion([1.0] * 10), proportion([0.0] * 10)
    assert (all_pass.mean, all_pass.high) == (1.0, 1.0)
    assert all_pass.low == pytest.approx(0.7225, abs=1e-4)
    assert none_pass.low == 0.0 and none_pass.high == pytest.approx(0.2775, abs=1e-4)
    tally = EvalTally(rollouts=1, threshold=0.5)
    for item in range(10):
        tally.add(item, [1.0], {})
    figures = tally.figures()
    assert figures["pass@1"].half_width == pytest.approx((1 - 0.7225) / 2, abs=1e-4)
    assert figures["accuracy"].half_width == pytest.approx((1 - 0.7225) / 2, abs=1e-4)
    assert proportion([1.0]).low is None, "one item: no interval over items"


@pytest.mark.unit
@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(0.0, 1.0), min_size=2, max_size=60),
)
def test_a_proportions_interval_is_wilsons_over_the_items_inside_zero_to_one(values):
    """The items are the trials, however many rollouts stand under each value."""
    est = proportion(values)
    assert 0.0 <= est.low < est.high <= 1.0
    assert est.low <= est.mean <= est.high
    low, high = wilson(est.mean, len(values))
    assert est.low == pytest.approx(min(low, est.mean)) and est.high == pytest.approx(
        max(high, est.mean)
    )


@pytest.mark.unit
@settings(max_examples=100, deadline=None)
@given(st.lists(st.booleans(), min_size=2, max_size=200))
def test_one_rollout_an_item_is_the_textbook_wilson_interval(outcomes):
    est = proportion([float(o) for o in outcomes])
    low, high = wilson(sum(outcomes) / len(outcomes), len(outcomes))
    assert (est.low, est.high) == (pytest.approx(low), pytest.approx(high))


@pytest.mark.unit
def test_eight_items_all_passing_at_4_are_wilsons_8_trials_not_32():
    """The rollouts were counted as trials: 8 items x 4 all passing printed pass@4 1.000 +- 0.054
    ([0.893, 1]); over the 8 items it is [0.676, 1]."""
    tally = EvalTally(rollouts=4, threshold=0.5)
    for item in range(8):
        tally.add(item, [1.0] * 4, {})
    for name in ("pass@1", "pass@4", "accuracy"):
        assert tally.figures()[name].low == pytest.approx(wilson(1.0, 8)[0])
        assert tally.figures()[name].low == pytest.approx(0.676, abs=1e-3)


def test_pass_at_k_intervals_hold_the_true_figure_95_percent_of_the_time():
    """Simulated evals of the size people run (some items never pass, the rest pass with 0.9), from a fixed
    seed: the share of intervals that hold the true pass@k. Counting rollouts as trials held it 71-90%."""
    rng = random.Random(0)
    for items, rollouts, hard in ((8, 4, 0.2), (8, 8, 0.15), (20, 8, 0.1)):
        truth = {k: (1 - hard) * (1 - 0.1**k) for k in (1, rollouts)}
        held = dict.fromkeys(truth, 0)
        for _ in range(1000):
            tally = EvalTally(rollouts, threshold=0.5)
            for item in range(items):
                easy = rng.random() >= hard
                tally.add(item, [float(easy and rng.random() < 0.9) for _ in range(rollouts)], {})
            for k, true in truth.items():
                e = tally.figures()[f"pass@{k}"]
                held[k] += e.low <= true <= e.high
        assert all(count >= 930 for count in held.values()), (items, rollouts, held)


@pytest.mark.unit
def test_pass_at_k_intervals_narrow_as_items_come():
    widths = [proportion([float(i % 2) for i in range(n)]).half_width for n in (4, 16, 64, 256)]
    assert widths == sorted(widths, reverse=True)


@pytest.mark.unit
def test_a_reward_interval_of_items_all_equal_says_so_and_bad_figures_read_as_none():
    from vftui.text.wording import figure

    assert figure(estimate([0.5, 0.5, 0.5]).as_dict()) == "0.500 ± n/a"
    assert "± 0.000" not in figure(proportion([1.0] * 40).as_dict())
    assert figure({"mean": math.nan, "ci_low": None, "ci_high": None, "n": 3}) == "-"
    assert figure({"mean": 1.0, "ci_low": -math.inf, "ci_high": math.inf, "n": 3}) == "1.000"
    # the farther end: half of [0, 0.793] read as 0.000 +- 0.397, i.e. pass@1 <= 0.4
    assert figure({"mean": 0.0, "ci_low": 0.0, "ci_high": 0.793, "n": 2}) == "0.000 ± 0.793"
    assert figure({"mean": 1.0, "ci_low": 0.676, "ci_high": 1.0, "n": 8}) == "1.000 ± 0.324"
