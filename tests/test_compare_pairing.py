"""``vftui compare`` pairs an item only where both sources hold its id with the same prompt (issue 42.2), and
``--fail-if-worse`` counts what the later source did not score against it (issue 42.18).

A run of the train split against an eval of the eval split paired item 10 ("Fabian, Bela, Tara...") with
item 10 ("Sana, Thea, Elke"), said "paired bootstrap over 100 items", and the gate passed on those pairs;
a later source that failed to score 24 of 30 examples, or held only 6 of them, passed the gate too. The
whole through the real CLI on vf-eval results written here; the pairing itself as properties."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import REPO, run_cli
from vftui.commands.compare import load_all
from vftui.comparing.compared import verdicts
from vftui.comparing.comparison import NONE_SHARED, PROMPTS_DIFFER, TOO_FEW, compare, measure, pair
from vftui.figures.paired import PAIRED_MIN
from vftui.run_files.results import MIXED, Item, Source, load, prompt_fingerprint
from vftui.run_files.source_lines import SourceAnswer, export

SOME = settings(max_examples=200, deadline=None)


def results(
    folder: Path,
    rollouts: dict[int, list[float]],
    prompt: Callable[[int], str | None] = lambda n: f"sort {n}",
) -> Path:
    """vf-eval's results.jsonl of these rollouts' rewards, each example's prompt ``prompt(n)`` (None: the
    rows record no prompt)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for n, rewards in rollouts.items():
        for r, reward in enumerate(rewards):
            row = {"example_id": n, "reward": reward, "completion": f"answer {n}.{r}"}
            if (words := prompt(n)) is not None:
                row["prompt"] = [
                    {"role": "system", "content": "sort"},
                    {"role": "user", "content": words},
                ]
            rows.append(row)
    (folder / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


def compared(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    result = run_cli(["compare", *args], tmp_path)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, result.stdout, result.stderr


def verdict(stderr: str) -> str:
    (said,) = [line for line in stderr.splitlines() if "--fail-if-worse" in line]
    return said


# -- issue 42.2: one id, two prompts, is no pair ------------------------------------------------------


def test_a_train_run_against_an_eval_of_other_prompts_is_compared_unpaired_and_said_so(tmp_path):
    """Every id in both, every prompt different: no pair, no drops or gains of other examples, Welch's t."""
    train = results(
        tmp_path / "train",
        {n: [1.0, float(n % 2)] for n in range(30)},
        lambda n: f"names {n}: Fabian, Bela, Tara",
    )
    evals = results(
        tmp_path / "eval",
        {n: [float(n % 3 == 0), 0.0] for n in range(30)},
        lambda n: f"names {n}: Sana, Thea, Elke",
    )
    rc, raw, stderr = compared(tmp_path, "--json", str(train), str(evals))
    (change,) = json.loads(raw)["changes"]
    said = (
        "compared unpaired (Welch's t): 30 of the 30 ids A and B share hold different prompts, so "
        "they are other examples, not the same ones scored again"
    )
    assert (change["paired"], change["test"], change["items"], change["mcnemar"]) == (
        0,
        "Welch's t",
        [],
        None,
    )
    assert change["pairing"] == {
        "same_prompt": 0,
        "by_id_alone": 0,
        "different_prompt": 30,
        "only_in_first": 0,
        "only_in_source": 0,
        "unpaired": PROMPTS_DIFFER,
        "said": said,
    }
    assert change["gate"] is None, "the gate judges no unpaired change: no figure of its own"
    rc, _, stderr = compared(tmp_path, "--fail-if-worse", "0.05", str(train), str(evals))
    assert rc == 2 and stderr.strip().splitlines()[-1].endswith(
        ": only 0 items pair (same id and prompt): 30 ids in common hold other prompts; the gate "
        "judges the same examples in both (compare runs of the same split)"
    ), "the gate passed on examples that were not the same (exit 0)"
    rc, out, stderr = compared(tmp_path, "--no-ui", str(train), str(evals))
    assert "(Welch's t, unpaired: 30 of 30 ids in common hold different prompts)" in out, out
    assert (
        f"    {said}\n" in out
        and "    items: 30 with the same id but a different prompt (no pair)\n" in out
    )
    assert "paired bootstrap" not in out + stderr and "items that dropped" not in out, out


def test_ids_of_another_prompt_are_left_out_of_the_pairs_and_counted(tmp_path):
    """Two of ten ids hold other prompts in B: the eight others pair, the two are neither pairs nor drops."""
    a = results(tmp_path / "a", {n: [1.0, 1.0] for n in range(10)})
    b = results(
        tmp_path / "b",
        {n: [1.0, 0.0] if n < 8 else [0.0, 0.0] for n in range(10)},
        lambda n: f"sort {n}" if n < 8 else f"another {n}",
    )
    rc, raw, _ = compared(tmp_path, "--json", str(a), str(b))
    (change,) = json.loads(raw)["changes"]
    assert rc == 0 and change["paired"] == 8 and change["test"] == "paired bootstrap"
    assert sorted(int(i["key"]) for i in change["items"]) == list(range(8))
    assert change["reward"]["mean"] == -0.5, (
        "the two of other prompts are in no figure of the change"
    )
    assert (change["pairing"]["same_prompt"], change["pairing"]["different_prompt"]) == (8, 2)
    assert change["pairing"]["unpaired"] is None and change["pairing"]["said"] is None
    _, out, _ = compared(tmp_path, "--no-ui", str(a), str(b))
    assert (
        "    items: 8 paired by id and prompt; 2 with the same id but a different prompt (no pair)\n"
        in out
    ), out
    assert "(paired bootstrap over 8 items)" in out


def test_too_few_pairs_left_by_other_prompts_are_compared_unpaired(tmp_path):
    a = results(tmp_path / "a", {n: [1.0, 0.5] for n in range(10)})
    b = results(
        tmp_path / "b",
        {n: [1.0, 0.0] for n in range(12)},
        lambda n: f"sort {n}" if n < 5 else f"another {n}",
    )
    rc, out, stderr = compared(tmp_path, "--no-ui", str(a), str(b))
    assert rc == 0, stderr
    assert (
        "    compared unpaired (Welch's t): 5 of the 10 ids A and B share hold different prompts, and "
        "the 5 pairs left are too few for a paired interval (it needs 6)\n" in out
    ), out
    assert (
        "    items: 5 with the same id and prompt; 5 with the same id but a different prompt (no pair); "
        "0 only in A, 2 only in B\n" in out
    ), out
    rc, _, stderr = compared(tmp_path, "--no-ui", "--fail-if-worse", "0.9", str(a), str(b))
    assert rc == 2 and "only 5 items pair (same id and prompt): 5 ids in common hold" in stderr


def test_sources_that_record_no_prompt_pair_by_id_and_say_so(tmp_path):
    bare = results(tmp_path / "bare", {n: [1.0, 0.0] for n in range(8)}, lambda n: None)
    full = results(tmp_path / "full", {n: [1.0, 1.0] for n in range(8)})
    rc, out, stderr = compared(tmp_path, "--no-ui", "--fail-if-worse", "0", str(bare), str(full))
    assert rc == 0, stderr
    assert "(paired bootstrap over 8 items matched by id alone)" in out, out
    assert "    items: 8 paired by id alone (a source records no prompt)\n" in out, out
    assert "by paired bootstrap over 8 items matched by id alone" in verdict(stderr)
    (change,) = json.loads(compared(tmp_path, "--json", str(bare), str(full))[1])["changes"]
    assert (
        change["paired"],
        change["pairing"]["by_id_alone"],
        change["pairing"]["same_prompt"],
    ) == (
        8,
        8,
        0,
    )


# -- issue 42.18: what the later source did not score counts against it -------------------------------


@pytest.mark.parametrize("how", ["errors", "missing"])
def test_the_gate_counts_the_items_the_later_source_did_not_score_as_failures(tmp_path, how):
    """B scored 6 of A's 30 examples, as A did: 'passed', exit 0, on the six alone."""
    a = results(tmp_path / "a", {n: [1.0, 1.0] for n in range(30)})
    scored = {n: [1.0, 1.0] for n in range(6)}
    failed = {n: [1.0, float("nan")] for n in range(6, 30)} if how == "errors" else {}
    b = results(tmp_path / "b", {**scored, **failed})
    rc, out, stderr = compared(tmp_path, "--no-ui", "--fail-if-worse", "0.05", str(a), str(b))
    assert rc == 3, stderr
    said = verdict(stderr)
    assert (
        "0.05 failed: " in said
        and "by paired bootstrap over 6 items, counting the 24 items it did not score as failures at reward 0"
        in said
    ), said
    assert "(B - A reward -0.800 [" in said, said
    why = (
        "B lists 24 examples that failed to score" if how == "errors" else "items it does not hold"
    )
    assert (
        f"    B holds no score for 24 of A's 30 items ({why}): --fail-if-worse counts each as a failure "
        "at reward 0, B - A reward -0.800 [" in out
    ), out
    assert "B - A reward +0.000" in out, "the change itself is over the items both scored"
    (change,) = json.loads(compared(tmp_path, "--json", str(a), str(b))[1])["changes"]
    assert change["gate"]["unscored"] == 24 and change["gate"]["unscored_reward"] == 0.0
    assert change["gate"]["reward"]["mean"] == pytest.approx(-0.8) and change["reward"]["mean"] == 0
    _, changes = measure(load_all([a, b]), None)  # and the compare screen's verdict line
    assert "B failed (paired bootstrap, 24 unscored as failures)" in verdicts(["B"], changes, 0.05)


def test_an_item_the_later_source_missed_counts_as_a_failure_not_as_worse_than_a_failure(tmp_path):
    """A's items B missed were failures in A as well: counted, they change nothing, and the gate passes."""
    a = results(tmp_path / "a", {n: [1.0, 1.0] if n < 10 else [0.0, 0.0] for n in range(14)})
    b = results(tmp_path / "b", {n: [1.0, 1.0] for n in range(10)})
    rc, out, stderr = compared(tmp_path, "--no-ui", "--fail-if-worse", "0", str(a), str(b))
    assert rc == 0 and "0 passed: " in verdict(stderr), stderr
    assert "counting the 4 items it did not score as failures at reward 0" in verdict(stderr)
    assert "B holds no score for 4 of A's 14 items (items it does not hold)" in out, out


def test_unpaired_the_gate_refuses_to_judge_other_examples(tmp_path):
    """Another split's examples, 12 of 30 of them errors: the 18 scored alike, and the gate passed; then,
    unpaired, it judged other examples against A's by Welch's t. The gate judges the same examples."""
    train = results(tmp_path / "train", {n: [1.0, 1.0] for n in range(30)}, lambda n: f"train {n}")
    rows = {n: [1.0, 1.0] if n < 18 else [float("nan")] for n in range(30)}
    evals = results(tmp_path / "eval", rows, lambda n: f"eval {n}")
    rc, _, stderr = compared(tmp_path, "--no-ui", "--fail-if-worse", "0.1", str(train), str(evals))
    assert rc == 2 and "Traceback" not in stderr, stderr
    assert (
        stderr.strip()
        .splitlines()[-1]
        .endswith(
            ": only 0 items pair (same id and prompt): 18 ids in common hold other prompts; the gate "
            "judges the same examples in both (compare runs of the same split)"
        )
    ), stderr


# -- the pairing, pure -------------------------------------------------------------------------------

PROMPTS = st.none() | st.sampled_from(["p", "q", MIXED])
ITEMS = st.dictionaries(
    st.integers(0, 12).map(str),
    st.tuples(st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=1, max_size=3), PROMPTS),
    min_size=1,
    max_size=12,
)


def source(name: str, items: dict[str, tuple[list[float], str | None]], errors: int = 0) -> Source:
    made = {}
    for key, (rewards, prompt) in items.items():
        made[key] = Item(key, list(rewards), {}, [False] * len(rewards), [1] * len(rewards))
        made[key].prompt = prompt
    return Source(Path(name), "vf-eval", "x", made, errors=errors)


@SOME
@given(ITEMS, ITEMS, st.integers(0, 5))
def test_pairing_never_pairs_two_prompts_and_counts_every_key_once(a, b, errors):
    first, later = source("a", a), source("b", b, errors)
    keys, p = pair(first, later)
    for key in keys:
        mine, theirs = a[key][1], b[key][1]
        assert mine is None or theirs is None or mine == theirs != MIXED, (key, mine, theirs)
    shared = a.keys() & b.keys()
    assert p.pairs + p.different == len(shared) == p.shared
    assert (p.pairs + p.different + p.only_first, p.pairs + p.different + p.only_later) == (
        len(a),
        len(b),
    )
    assert p.by_id == sum(a[k][1] is None or b[k][1] is None for k in shared)
    if not p.pairs:
        assert p.unpaired == (PROMPTS_DIFFER if p.different else NONE_SHARED)
    elif p.different > p.pairs:
        assert p.unpaired == PROMPTS_DIFFER
    elif p.different and p.pairs < PAIRED_MIN:
        assert p.unpaired == TOO_FEW
    else:
        assert p.unpaired is None and len(keys) == p.pairs
    assert not (keys and p.unpaired)
    back = pair(later, first)[1]
    assert (back.pairs, back.different, back.only_first, back.only_later, back.unpaired) == (
        p.pairs,
        p.different,
        p.only_later,
        p.only_first,
        p.unpaired,
    )
    change = compare(first, later)
    assert {c.key for c in change.items} == set(keys) and change.paired == len(keys)
    judged = (
        change.judged
    )  # the gate judges paired changes alone: an unpaired one is its own change
    assert judged.unscored == (p.only_first + p.different if keys else 0)
    assert judged.floor == min(0.0, *(min(r) for r, _ in [*a.values(), *b.values()]))
    if not judged.unscored:
        assert judged.reward == change.reward
    else:  # each missed item's change is the floor less its reward in A: never above 0
        total = change.reward.mean * change.paired
        assert judged.reward.mean * judged.reward.count <= total + 1e-9, "a failure never helps"


@pytest.mark.unit
@SOME
@given(st.lists(PROMPTS.filter(lambda p: p != MIXED), max_size=6), st.integers(0, 6))
def test_an_items_prompt_is_its_rollouts_one_prompt_else_mixed_in_any_order_of_shards(prompts, cut):
    whole, left, right = Item("k"), Item("k"), Item("k")
    for n, fingerprint in enumerate(prompts):
        whole.saw_prompt(fingerprint)
        (left if n < cut else right).saw_prompt(fingerprint)
    known = set(prompts) - {None}
    assert whole.prompt == (None if not known else known.pop() if len(known) == 1 else MIXED)
    left.extend(right)
    assert left.prompt == whole.prompt, "a folder's shards merged: the same as one file"


@pytest.mark.unit
def test_a_prompts_fingerprint_is_its_messages_before_the_first_answer_by_role_and_content():
    prompt = [{"role": "system", "content": "sort"}, {"role": "user", "content": "b a"}]
    fingerprint = prompt_fingerprint(prompt)
    assert fingerprint is not None and len(fingerprint) == 32
    answered = [
        *prompt,
        {"role": "assistant", "content": "a b"},
        {"role": "user", "content": "more"},
    ]
    assert prompt_fingerprint(answered) == fingerprint, "what follows the first answer is no prompt"
    assert prompt_fingerprint([{**prompt[0], "name": "x"}, prompt[1]]) == fingerprint
    assert prompt_fingerprint([prompt[0], {"role": "user", "content": "b  a"}]) != fingerprint
    assert prompt_fingerprint([{"role": "assistant", "content": "a"}]) is None
    assert prompt_fingerprint([]) is None


@pytest.mark.unit
def test_every_reader_records_each_items_prompt_and_a_remote_source_carries_it(tmp_path):
    (traces,) = (REPO / "tests" / "data" / "v1_eval").glob("*/traces.jsonl")
    v1 = load(traces)
    assert v1.items and all(item.prompt not in (None, MIXED) for item in v1.items.values())
    rows = load(results(tmp_path / "a", {n: [1.0, 0.0] for n in range(3)}) / "results.jsonl")
    assert len({item.prompt for item in rows.items.values()}) == 3 and None not in {
        item.prompt for item in rows.items.values()
    }
    for made in (v1, rows):
        answer = SourceAnswer("h", "p")
        answer.feed("".join(line + "\n" for line in export(made)).encode())
        read = answer.end()
        assert {k: i.prompt for k, i in read.items.items()} == {
            k: i.prompt for k, i in made.items.items()
        }
    older = SourceAnswer("h", "p")  # a vftui that kept no prompt: its items pair by id alone
    for line in export(rows):
        value = json.loads(line)
        value.get("item", {}).pop("prompt", None)
        older.feed((json.dumps(value) + "\n").encode())
    assert all(item.prompt is None for item in older.end().items.values())
