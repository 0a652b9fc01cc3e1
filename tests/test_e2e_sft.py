"""`vftui run --mode sft --no-ui` on the embedded default, checked line by line: the v1 built-in and its
classic twin write the same data (the same task, the same rewards, the same tokens and masks)."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from tests.conftest import json_events, read_jsonl, run_cli
from vftui import stats
from vftui.sim import task
from vftui.sim.server import TOKENIZER_DIR, BackgroundSimServer

TOKENIZER = AutoTokenizer.from_pretrained(str(TOKENIZER_DIR))
THINK_WORDS, CUT_AT = 40, 140  # answers of 120 to 170 tokens: first ones either side of the cut


def template_len(messages: list[dict], generation_prompt: bool) -> int:
    return len(
        TOKENIZER.apply_chat_template(
            messages, add_generation_prompt=generation_prompt, tokenize=True, return_dict=False
        )
    )


def expected_reward(messages: list[dict], batches: list[list[str]]) -> float:
    """What the env's two reward functions give, recomputed from the saved messages."""
    return 1.0 * task.sorted_correctly_score(messages, batches) + 0.2 * task.format_ok_score(
        messages
    )


END_OF_TURN = "<|im_end|>\n"


def check_rollout(tokens: list[int], masks: list[int], messages: list[dict], cut: set[int]) -> None:
    """Each answer trained as written, with the end of turn only after those not ``cut`` (indices of
    messages): a cut one's stays in the sequence before a later turn, untrained; a cut last one's goes."""
    assert len(tokens) == len(masks)
    end_of_turn = len(TOKENIZER.encode(END_OF_TURN, add_special_tokens=False))
    trained = set()
    for i, message in enumerate(messages):
        if message["role"] == "assistant":
            start, end = template_len(messages[:i], True), template_len(messages[: i + 1], False)
            end -= end_of_turn if i in cut else 0
            trained.update(range(start, end))
            text = TOKENIZER.decode(tokens[start:end])
            assert text == message["content"] + ("" if i in cut else END_OF_TURN)
    last_cut = len(messages) - 1 in cut
    assert len(tokens) == template_len(messages, False) - (end_of_turn if last_cut else 0)
    for j, (token, mask) in enumerate(zip(tokens, masks, strict=True)):
        assert mask == (token if j in trained else -100), f"position {j}"


ENVS = pytest.mark.parametrize(
    "env",
    ["vftui/alphabet-sort", pytest.param("vftui/alphabet-sort-classic", marks=pytest.mark.classic)],
    ids=["v1", "classic"],
)


def run_and_check(tmp_path, env: str, extra: list[str], max_turns: int) -> tuple[list[dict], dict]:
    out = tmp_path / "groups.jsonl"
    result = run_cli(
        [
            "run",
            "--mode",
            "sft",
            "--no-ui",
            "--json",
            "--steps",
            "6",
            "--group-size",
            "4",
            "--env",
            env,
            "--out",
            str(out),
            *extra,
        ],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "SIMULATION" in result.stderr
    groups = read_jsonl(out)
    assert len(groups) == 6
    rows = task.make_examples(200, 3, 6, max_turns, 0)
    for group in groups:
        meta = group["vftui"]
        assert (
            len(group["scores"])
            == len(group["tokens"])
            == len(group["masks"])
            == len(group["messages"])
            == 4
        )
        assert group["generation_params"]["temperature"] == 1.0
        assert meta["env"] == env
        batches = rows[meta["example_id"]]["info"]["batches"]
        for i in range(4):
            messages = group["messages"][i]
            assert messages[0]["role"] == "system" and messages[1]["role"] == "user"
            assert group["scores"][i] == pytest.approx(expected_reward(messages, batches), abs=1e-9)
            last_cut = {len(messages) - 1} if meta["finish_reasons"][i] == "length" else set()
            check_rollout(group["tokens"][i], group["masks"][i], messages, last_cut)
    summary = next(e for e in json_events(result.stdout) if e["event"] == "RunSummary")
    return groups, summary


@ENVS
def test_sft_run_writes_trainable_groups_and_a_true_summary(tmp_path, env):
    groups, summary = run_and_check(tmp_path, env, [], max_turns=1)
    scores = [s for g in groups for s in g["scores"]]
    identical = sum(len(set(g["scores"])) == 1 for g in groups)
    assert summary["state"] == "finished" and summary["groups_done"] == 6
    assert summary["metrics"]["metrics/mean_reward"] == pytest.approx(sum(scores) / len(scores))
    assert summary["metrics"]["metrics/reward_std"] == pytest.approx(stats.population_std(scores))
    assert summary["metrics"]["metrics/identical_score_rate"] == pytest.approx(identical / 6)
    assert all(t == 1 for g in groups for t in g["vftui"]["turns"])
    assert b'id="summary"' in (tmp_path / "groups.html").read_bytes(), "the run's page, finished"


@ENVS
def test_multi_turn_variant_keeps_every_turn(tmp_path, env):
    groups, summary = run_and_check(tmp_path, env, ["--env-args", '{"max_turns": 3}'], max_turns=3)
    assert all(t == 3 for g in groups for t in g["vftui"]["turns"])
    assert summary["metrics"]["metrics/avg_num_turns"] == pytest.approx(3.0)
    assert all(
        sum(m["role"] == "assistant" for m in msgs) == 3 for g in groups for msgs in g["messages"]
    )


@ENVS
def test_truncated_completions_lose_their_end_of_turn(tmp_path, env):
    groups, _ = run_and_check(tmp_path, env, ["--max-tokens", "12"], max_turns=1)
    reasons = [r for g in groups for r in g["vftui"]["finish_reasons"]]
    assert "length" in reasons
    for g in groups:
        for reason, stripped in zip(
            g["vftui"]["finish_reasons"], g["vftui"]["stripped_end_of_turn"], strict=True
        ):
            assert stripped == (reason == "length")


@ENVS
def test_an_answer_cut_before_the_last_turn_trains_without_its_end_of_turn(tmp_path, env):
    """Two turns, each thinking a different length first: some first answers are cut at --max-tokens
    while the second is not; the model never wrote the end of turn the template put after the cut."""
    out = tmp_path / "groups.jsonl"
    server = BackgroundSimServer(seed=0, think_words=THINK_WORDS).start()
    try:
        result = run_cli(
            [
                "run",
                "--mode",
                "sft",
                "--no-ui",
                "--steps",
                "4",
                "--group-size",
                "4",
                "--temperature",
                "0",  # the answer always closes its tags: an unclosed one was cut
                "--max-tokens",
                str(CUT_AT),
                "--env",
                env,
                "--env-args",
                '{"max_turns": 2}',
                "--base-url",
                server.base_url,
                "--out",
                str(out),
            ],
            tmp_path,
        )
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    seen = set()
    for group in read_jsonl(out):
        for i, messages in enumerate(group["messages"]):
            answers = [j for j, m in enumerate(messages) if m["role"] == "assistant"]
            cut = {j for j in answers if not messages[j]["content"].endswith(f"</{task.TAG}>")}
            last_cut = group["vftui"]["finish_reasons"][i] == "length"
            assert (answers[-1] in cut) == last_cut == group["vftui"]["stripped_end_of_turn"][i]
            check_rollout(group["tokens"][i], group["masks"][i], messages, cut)
            seen.add(tuple(j in cut for j in answers))
    assert {(True, False), (True, True), (False, False)} <= seen, seen  # cut: first, both, none
