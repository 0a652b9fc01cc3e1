"""`vftui run --mode sft --no-ui` on the embedded default, checked line by line: the v1 built-in and its
classic twin write the same data (the same task, the same rewards, the same tokens and masks)."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from tests.conftest import json_events, read_jsonl, run_cli
from vftui.figures import stats
from vftui.sim import task
from vftui.sim.server import TOKENIZER_DIR

TOKENIZER = AutoTokenizer.from_pretrained(str(TOKENIZER_DIR))


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


def check_rollout(
    tokens: list[int], masks: list[int], messages: list[dict], truncated: bool
) -> None:
    assert len(tokens) == len(masks)
    trained = set()
    for i, message in enumerate(messages):
        if message["role"] == "assistant":
            start, end = template_len(messages[:i], True), template_len(messages[: i + 1], False)
            trained.update(range(start, min(end, len(tokens))))
            span = [t for j, t in enumerate(tokens[start:end]) if start + j < len(tokens)]
            text = TOKENIZER.decode(span)
            last = i == len(messages) - 1
            if truncated and last:
                assert text == message["content"]
            else:
                assert text == message["content"] + "<|im_end|>\n"
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
            check_rollout(
                group["tokens"][i],
                group["masks"][i],
                messages,
                meta["finish_reasons"][i] == "length",
            )
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
    assert (tmp_path / "groups.html").exists(), "atroposlib's process mode renders its HTML view"


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
