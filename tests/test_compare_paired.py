"""``vftui compare``'s tests of a change (issue 33.3): McNemar's exact test of pass/fail, the paired bootstrap
of the mean reward and pass@k changes, the items that flipped, Welch's t where nothing pairs, and the gate
that names the test it used. The pure pieces against brute force and known values; the whole through the
real CLI on real evals of the built-in environment at two temperatures."""

from __future__ import annotations

import json
import math
import random
import statistics
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import run_cli
from tests.test_number_properties import brute_t_quantile
from vftui.comparing.comparison import PAIRED, UNPAIRED, compare, source_series, summarize
from vftui.figures.eval_stats import difference, t_half_width
from vftui.figures.paired import (
    CELLS_FROM,
    EXACT_FLIPS,
    PAIRED_MIN,
    _cells,
    _counted_means,
    _log_half_tail,
    _picked_means,
    in_order,
    mcnemar_exact,
    paired_change,
)
from vftui.run_files.results import Item, Source

SOME = settings(max_examples=200, deadline=None)


def binomial_two_sided(lost: int, gained: int) -> Fraction:
    """The exact binomial test's two-sided p by enumeration: the chance, at 1/2 a flip each way, of every
    split no likelier than the one seen (as statisticians' binomial tests sum it)."""
    flipped = lost + gained
    chance = [Fraction(math.comb(flipped, x), 2**flipped) for x in range(flipped + 1)]
    return min(Fraction(1), sum(p for p in chance if p <= chance[lost]))


@pytest.mark.unit
@SOME
@given(st.integers(0, 60), st.integers(0, 60))
def test_mcnemars_exact_p_is_the_binomial_sum_by_enumeration(lost, gained):
    assert mcnemar_exact(lost, gained) == float(binomial_two_sided(lost, gained))
    assert mcnemar_exact(lost, gained) == mcnemar_exact(gained, lost)


@pytest.mark.unit
def test_mcnemars_exact_p_at_known_values():
    assert mcnemar_exact(0, 0) == 1.0  # nothing flipped: no evidence either way
    assert mcnemar_exact(0, 5) == 2 / 32  # all five one way: 2 * (1/2)^5
    assert mcnemar_exact(1, 9) == 2 * 11 / 1024
    assert mcnemar_exact(5, 5) == 1.0
    assert mcnemar_exact(3, 0) == 0.25
    assert 0 < mcnemar_exact(900, 1100) < 1e-4 and mcnemar_exact(0, 4000) == 0.0  # no overflow


def binomial_tail_sum(lost: int, gained: int) -> float:
    """The same p the plain way, faster than enumeration for thousands of flips: twice the smaller tail's
    binomials, each its own ``comb``, over 2^flipped (an even split: 1)."""
    flipped, fewer = lost + gained, min(lost, gained)
    return min(1.0, 2 * sum(math.comb(flipped, i) for i in range(fewer + 1)) / 2**flipped)


@settings(max_examples=60, deadline=None)
@given(st.integers(EXACT_FLIPS + 1, 3000), st.floats(0, 1))
def test_mcnemars_p_past_the_whole_number_sums_is_the_binomials_to_1e_10(flipped, share):
    """Past ``EXACT_FLIPS`` the sum is in floats from its largest term down: the same p to its 10th digit."""
    lost = round(share * flipped)
    expected = binomial_tail_sum(lost, flipped - lost)
    assert mcnemar_exact(lost, flipped - lost) == pytest.approx(expected, rel=1e-10, abs=1e-300)


@pytest.mark.unit
@SOME
@given(st.integers(3, 200), st.floats(0, 0.5))
def test_the_float_sum_is_the_binomial_tail_at_small_counts_too(flipped, share):
    fewer = min(round(share * flipped), (flipped - 2) // 2)
    expected = Fraction(sum(math.comb(flipped, i) for i in range(fewer + 1)), 2**flipped)
    assert math.exp(_log_half_tail(flipped, fewer)) == pytest.approx(float(expected), rel=1e-12)


@pytest.mark.unit
@pytest.mark.timeout(30)
def test_mcnemars_p_of_a_million_flips_is_at_hand_and_the_normal_limits():
    """A comb for each term made it cubic in the items that flipped: 20,000 flips took 47 s, two evals of
    40,000 items 55 s. At a million the continuity-corrected normal is the exact test to three digits."""
    for lost in (499_000, 498_500, 490_000):
        gained = 1_000_000 - lost
        z = (abs(gained - lost) - 1) / math.sqrt(lost + gained)
        normal = math.erfc(z / math.sqrt(2))
        assert mcnemar_exact(lost, gained) == pytest.approx(normal, rel=1e-3)
        assert mcnemar_exact(gained, lost) == mcnemar_exact(lost, gained)
    assert mcnemar_exact(500_000, 500_000) == mcnemar_exact(499_999, 500_000) == 1.0
    assert mcnemar_exact(10, 999_990) == 0.0  # 10^-301,000: no float holds it


values = st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=2, max_size=40)
changes_of_enough_items = st.lists(
    st.floats(-1e6, 1e6, allow_nan=False), min_size=PAIRED_MIN, max_size=40
)


@SOME
@given(changes_of_enough_items)
def test_a_changes_interval_holds_the_bootstrap_and_the_t_interval_and_is_the_same_each_time(
    changes,
):
    e = paired_change(changes)
    assert e.low is not None and e.high is not None
    assert e.low <= e.mean <= e.high, e
    assert e.mean == pytest.approx(statistics.fmean(changes), rel=1e-9, abs=1e-6)
    half = t_half_width(changes)
    assert e.low <= e.mean - half + 1e-6 and e.high >= e.mean + half - 1e-6, "never narrower than t"
    assert paired_change(changes) == e, "seeded: the same inputs, the same interval"
    negated = paired_change([-c for c in changes])
    assert (negated.mean, negated.low, negated.high) == (-e.mean, -e.high, -e.low)


@pytest.mark.unit
def test_a_change_has_no_interval_under_six_items_and_a_point_when_six_agree():
    """2 items that both dropped a little were 'worse beyond the interval' ([-0.050, -0.025]), and the gate
    failed: the bootstrap cannot reach past the changes seen."""
    assert paired_change([-0.025, -0.05]).low is None and paired_change([]).count == 0
    assert paired_change([0.3] * (PAIRED_MIN - 1)).high is None
    same = paired_change([0.1] * PAIRED_MIN)  # six alike: the sign-flip test's p is 2/64
    assert same.low == same.mean == same.high


def test_a_changes_interval_rules_out_no_change_5_percent_of_the_time_when_nothing_changed():
    """Seeded simulations of no change (normal changes; a few items moved, most did not): how often the
    interval excludes 0. The bootstrap alone did at 50% with 2 items, 25% with 3, 13% with 4."""
    rng, runs = random.Random(0), 250
    for count in (2, 3, 4, PAIRED_MIN, 8):
        for draw in (lambda: rng.gauss(0, 1), lambda: rng.choice([0, 0, 0, 0.25, -0.25, 1, -1])):
            excluded = 0
            for _ in range(runs):
                e = paired_change([draw() for _ in range(count)])
                excluded += e.low is not None and (e.low > 0 or e.high < 0)
            assert excluded <= 0.08 * runs, (count, excluded)  # 2,000 runs: 2-5% at 6 and 8 items


@pytest.mark.timeout(60)
def test_a_change_over_a_million_items_is_resampled_in_seconds_the_same_each_time_and_negated():
    """Picking each resample's items one by one took 232 s at a million items; counting cells of like values
    takes a second, seeded, and swapping the sources still negates the interval to the last bit."""
    rng = random.Random(0)
    levels = [-1.0, -0.5, -0.25, 0.0, 0.0, 0.25, 0.5, 1.0]
    for changes in (
        [rng.choice(levels) for _ in range(1_000_000)],
        [rng.gammavariate(2, 1) - 2 for _ in range(200_000)],  # skewed, every value its own
    ):
        e = paired_change(changes)
        assert e.low < e.mean < e.high and e.mean == pytest.approx(statistics.fmean(changes))
        negated = paired_change([-c for c in changes])
        assert (negated.mean, negated.low, negated.high) == (-e.mean, -e.high, -e.low)
        assert paired_change(changes) == e


def resampled(means, data) -> list[float]:
    """The resampled means' spread and percentiles, in standard errors of the mean from it."""
    import numpy as np

    se = float(data.std()) / math.sqrt(len(data))
    at = np.quantile((means - data.mean()) / se, [0.025, 0.5, 0.975])  # what the interval reads
    return [float(means.std()) / se, *map(float, at)]


@pytest.mark.parametrize("kind", ["levels", "skewed", "heavy tails"])
def test_counting_cells_resamples_as_picking_items_does(kind):
    """The cells' resampled means have the spread and percentiles of items picked one by one: the same
    distribution where values repeat, within a small share of a standard error otherwise (both draws seeded,
    so the 20,000 resamples' own noise is the same each time)."""
    import numpy as np

    rng = np.random.default_rng(7)
    data = {
        "levels": rng.choice(
            [-1.0, -0.5, 0.0, 0.5, 1.0], p=[0.05, 0.15, 0.5, 0.2, 0.1], size=CELLS_FROM
        ),
        "skewed": rng.lognormal(0, 1, size=CELLS_FROM),
        "heavy tails": rng.standard_cauchy(CELLS_FROM),
    }[kind]
    cells = _cells(data)
    assert cells is not None and cells[0].sum() == len(data)
    counted = resampled(_counted_means(*cells, np.random.default_rng(1), 20_000), data)
    picked = resampled(_picked_means(data, np.random.default_rng(2), 20_000), data)
    assert counted[0] == pytest.approx(picked[0], abs=0.03)  # the spread: 1 for both
    assert counted[1:] == pytest.approx(
        picked[1:], abs=0.1
    )  # picks' own noise: 0.07 at heavy tails


@pytest.mark.unit
def test_cells_hold_values_that_repeat_exactly_and_give_way_to_picks_where_values_spread():
    import numpy as np

    data = np.array([0.5, -1.0, 0.5, 0.0, -1.0, 0.5] * 10)
    sizes, centres = _cells(data)
    assert sizes.tolist() == [30, 20, 10] and centres.tolist() == [0.5, -1.0, 0.0], "by first item"
    assert (
        _cells(np.geomspace(1, 1e6, 1000)) is None
    )  # a cell for most values: picking is less work
    assert _cells(np.full(10, 0.25))[0].tolist() == [10]


@settings(max_examples=40, deadline=None)  # the brute-force t quantile integrates its density
@given(values, values)
def test_welchs_interval_is_the_textbooks(a, b):
    e = difference(a, b)
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    if va + vb == 0:
        return
    fa, fb = Fraction(va), Fraction(vb)  # the squares in exact arithmetic: 1e-146 squared is no 0
    df = float((fa + fb) ** 2 / (fa**2 / (len(a) - 1) + fb**2 / (len(b) - 1)))
    half = brute_t_quantile(0.975, df) * math.sqrt(va + vb)
    mean = statistics.fmean(b) - statistics.fmean(a)
    assert e.mean == pytest.approx(mean)
    assert e.low == pytest.approx(mean - half, rel=1e-6, abs=1e-9)
    assert e.high == pytest.approx(mean + half, rel=1e-6, abs=1e-9)


REWARDS = st.lists(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]), min_size=1, max_size=4)
ITEMS = st.dictionaries(st.integers(0, 30).map(str), REWARDS, min_size=1, max_size=16)


def source(name: str, items: dict[str, list[float]]) -> Source:
    return Source(
        Path(name),
        "vf-eval",
        "x",
        {k: Item(k, list(r), {}, [False] * len(r), [1] * len(r)) for k, r in items.items()},
    )


def passes(rewards: list[float], threshold: float) -> bool:
    """The item's pass at ``threshold`` as the README says it: at least half its rollouts reach it."""
    return statistics.fmean(r >= threshold for r in rewards) >= 0.5


@SOME
@given(ITEMS, ITEMS, st.sampled_from([0.25, 0.5, 1.0]))
def test_swapping_a_and_b_flips_every_sign_and_swaps_the_flips(a, b, threshold):
    forth = compare(source("a", a), source("b", b), threshold)
    back = compare(source("b", b), source("a", a), threshold)
    assert forth.test == back.test == (PAIRED if a.keys() & b.keys() else UNPAIRED)
    for there, here in [
        (forth.reward, back.reward),
        *zip(forth.passes.values(), back.passes.values(), strict=True),
    ]:
        assert here.mean == pytest.approx(-there.mean)
        assert (here.low, here.high) == (
            (None, None) if there.low is None else (-there.high, -there.low)
        )
    if forth.flips is None:
        assert back.flips is None and not a.keys() & b.keys()
        return
    assert (back.flips.lost, back.flips.gained) == (forth.flips.gained, forth.flips.lost)
    assert (back.flips.both, back.flips.neither) == (forth.flips.both, forth.flips.neither)
    assert back.flips.p_value == forth.flips.p_value


@SOME
@given(ITEMS, ITEMS, st.sampled_from([0.25, 0.5, 1.0]))
def test_the_flips_are_the_items_that_passed_on_one_side_only(a, b, threshold):
    change = compare(source("a", a), source("b", b), threshold)
    common = sorted(a.keys() & b.keys(), key=int)
    if not common:
        return
    flips = change.flips
    assert flips.lost == [k for k in common if passes(a[k], threshold) > passes(b[k], threshold)]
    assert flips.gained == [k for k in common if passes(a[k], threshold) < passes(b[k], threshold)]
    assert flips.both == sum(passes(a[k], threshold) and passes(b[k], threshold) for k in common)
    assert flips.both + flips.neither + len(flips.lost) + len(flips.gained) == change.paired
    assert flips.p_value == mcnemar_exact(len(flips.lost), len(flips.gained))


@SOME
@given(st.lists(st.tuples(REWARDS, REWARDS), min_size=1, max_size=12))
def test_the_bootstrap_resamples_items_with_their_rollouts_and_pass_at_1_is_the_sides_difference(
    pairs,
):
    """An item's rollouts copied twice over change no item's figures: an interval over items is the same
    (one over rollouts would narrow); on the same items pass@1's change is B's pass@1 less A's."""
    a = {str(n): first for n, (first, _) in enumerate(pairs)}
    b = {str(n): later for n, (_, later) in enumerate(pairs)}
    change = compare(source("a", a), source("b", b), 0.5)
    doubled = compare(
        source("a", {k: r * 2 for k, r in a.items()}),
        source("b", {k: r * 2 for k, r in b.items()}),
        0.5,
    )
    assert (doubled.reward.low, doubled.reward.high) == (change.reward.low, change.reward.high)
    for twice, once in ((doubled.passes["pass@1"], change.passes["pass@1"]),):
        assert [twice.mean, twice.low, twice.high] == pytest.approx(
            [once.mean, once.low, once.high]
        )
    summaries = [summarize(source(n, s), 0.5) for n, s in (("a", a), ("b", b))]
    assert change.passes["pass@1"].mean == pytest.approx(
        summaries[1].pass1.mean - summaries[0].pass1.mean
    )


@pytest.mark.unit
@SOME
@given(st.lists(st.text(max_size=5) | st.integers(0, 10**30).map(str), max_size=12))
def test_items_are_in_one_total_order_numbers_as_numbers(keys):
    ordered = sorted(set(keys), key=in_order)
    numbers = [k for k in ordered if k.isascii() and k.isdigit()]
    assert [int(k) for k in numbers] == sorted(int(k) for k in numbers)
    assert sorted(reversed(ordered), key=in_order) == ordered


# -- through the CLI, on real evals of the built-in environment ---------------------------------------

e2e = pytest.mark.e2e


def compared(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    result = run_cli(["compare", "--pass-threshold", "1.2", *args], tmp_path)  # fully right
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, result.stdout, result.stderr


@e2e
def test_paired_evals_print_mcnemar_the_flips_and_bootstrap_intervals_the_same_every_time(
    paired_evals, tmp_path
):
    cold, hot = str(paired_evals["cold"]), str(paired_evals["hot"])
    rc, out, _ = compared(tmp_path, "--no-ui", cold, hot)
    assert rc == 0
    assert compared(tmp_path, "--no-ui", cold, hot)[1] == out, "seeded: the same lines again"
    rc, raw, _ = compared(tmp_path, "--json", cold, hot)
    (change,) = json.loads(raw)["changes"]
    test = change["mcnemar"]
    assert change["test"] == "paired bootstrap" and change["paired"] == 12
    assert change["bootstrap"] == {"resamples": 10_000, "seed": 0}
    assert change["reward"]["mean"] < 0, "greedy answers are always right: hot is worse"
    assert set(change["pass_at_k"]) == {"pass@1", "pass@2", "pass@4"}
    lost, gained = test["pass_to_fail"], test["fail_to_pass"]
    assert test["both_pass"] + test["both_fail"] + len(lost) + len(gained) == 12
    assert gained == [] and test["both_fail"] == 0, "greedy passes every item at temperature 0"
    assert lost, "temperature 2 gets most of some items' rollouts wrong"
    assert test["p"] == mcnemar_exact(len(lost), len(gained))
    lines = out.splitlines()
    at = next(n for n, line in enumerate(lines) if line.startswith("  B - A reward "))
    reward = change["reward"]
    assert lines[at] == (
        f"  B - A reward {reward['mean']:+.3f} [{reward['ci_low']:+.3f}, {reward['ci_high']:+.3f}]: "
        f"{'worse beyond its interval' if reward['ci_high'] < 0 else 'no clear change'} "
        "(paired bootstrap over 12 items)"
    )
    assert lines[at + 1].startswith("    pass@1 ") and ", pass@4 " in lines[at + 1]
    assert lines[at + 2] == (
        f"    McNemar exact p = {test['p']:.3g}: {len(lost)} item{'' if len(lost) == 1 else 's'} "
        f"pass -> fail, 0 fail -> pass ({test['both_pass']} pass in both, 0 fail in both; an item "
        "passes when half its rollouts reach reward >= 1.2)"
    )
    ids = f"id{'s' if len(lost) > 1 else ''} {', '.join(lost)}"
    assert (
        lines[at + 3] == f"    pass -> fail: {len(lost)} item{'s' if len(lost) > 1 else ''} ({ids})"
    )
    assert [int(key) for key in lost] == sorted(int(key) for key in lost), "by example id"
    assert lines[at + 4] == "    fail -> pass: no item"


@e2e
def test_swapped_evals_negate_the_interval_and_swap_the_flips(paired_evals, tmp_path):
    forth, back = (
        json.loads(compared(tmp_path, "--json", *map(str, pair))[1])["changes"][0]
        for pair in (
            (paired_evals["cold"], paired_evals["hot"]),
            (paired_evals["hot"], paired_evals["cold"]),
        )
    )
    assert (back["reward"]["ci_low"], back["reward"]["ci_high"]) == (
        -forth["reward"]["ci_high"],
        -forth["reward"]["ci_low"],
    )
    assert back["mcnemar"]["pass_to_fail"] == forth["mcnemar"]["fail_to_pass"]
    assert back["mcnemar"]["fail_to_pass"] == forth["mcnemar"]["pass_to_fail"]


@e2e
@pytest.mark.parametrize(
    "pair, test",
    [(("cold", "hot"), "paired bootstrap over 12 items")],
)
def test_the_gate_says_which_test_judged_and_exits_by_its_interval(
    paired_evals, tmp_path, pair, test
):
    paths = [str(paired_evals[name]) for name in pair]
    rc, raw, stderr = compared(tmp_path, "--json", "--fail-if-worse", "0", *paths)
    (change,) = json.loads(raw)["changes"]
    worse = change["reward"]["ci_high"] < 0
    assert rc == (3 if worse else 0), stderr
    (said,) = [line for line in stderr.splitlines() if "--fail-if-worse" in line]
    verdict = "failed" if worse else "passed"
    assert (
        f"--fail-if-worse 0 {verdict}: " in said and f"beyond the 95% interval, by {test}" in said
    )


@e2e
def test_sources_of_no_common_example_are_compared_by_welch_but_never_gated(paired_evals, tmp_path):
    paths = [str(paired_evals[name]) for name in ("cold", "other")]
    rc, raw, _ = compared(tmp_path, "--json", *paths)
    (change,) = json.loads(raw)["changes"]
    assert change["paired"] == 0 and change["mcnemar"] is None and change["bootstrap"] is None
    rc, out, _ = compared(tmp_path, "--no-ui", *paths)
    assert "(Welch's t, no item in common)" in out and "McNemar" not in out
    rc, _, stderr = compared(tmp_path, "--fail-if-worse", "0", *paths)
    assert rc == 2 and "they share no example id; the gate judges the same examples" in stderr


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(st.floats(-10, 10, allow_nan=False), st.booleans(), st.integers(0, 10**6)),
            max_size=6,
        ),
        max_size=30,
    )
)
def test_a_sources_series_are_one_point_an_item_with_rewards_rates_within_0_and_1(items):
    source = Source(Path("s.jsonl"), "groups", "env", {})
    for n, rollouts in enumerate(items):
        item = source.items.setdefault(str(n), Item(str(n)))
        for reward, truncated, chars in rollouts:
            item.rewards.append(reward)
            item.truncated.append(truncated)
            item.completion_chars.append(chars)
    series = source_series(source)
    scored = [rollouts for rollouts in items if rollouts]
    assert len(series.reward) == len(series.length) == len(series.identical) == len(scored)
    assert all(0.0 <= v <= 1.0 for v in series.truncated)
    assert series.identical == [float(len(r) > 1 and len({x[0] for x in r}) == 1) for r in scored]
    assert series.reward == pytest.approx([sum(x[0] for x in r) / len(r) for r in scored])
