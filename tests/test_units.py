"""The pure pieces: statistics, the store, config precedence, tokens, the policy."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer

from tests.conftest import RATE_LIMITED_TRAFFIC
from vftui import stats
from vftui.collector.endpoint import is_loopback
from vftui.collector.envs.classic import rollout_error
from vftui.collector.sft.traffic import Proxy, env_proxy
from vftui.collector.tokens import ChatTemplateTokenizer, Turn, rl_tokens, sft_tokens
from vftui.config import load_config
from vftui.errors import UserError
from vftui.events import (
    GroupDropped,
    Health,
    Mode,
    RunStarted,
    RunState,
    RunStatus,
    RunSummary,
)
from vftui.loopback import unproxied
from vftui.run_files import store
from vftui.sim import policy, task
from vftui.sim.server import TOKENIZER_DIR
from vftui.ui.model import DashboardModel
from vftui.ui.widgets.status_bar import render_status


@dataclass
class G:
    scores: list[float]
    metrics: dict[str, list[float]] = field(default_factory=dict)
    turns: list[int] = field(default_factory=list)
    kept: bool = True


def metrics_of(groups) -> dict[str, float]:
    acc = stats.Accumulator()
    for group in groups:
        acc.add(group)
    return acc.metrics()


@pytest.mark.unit
def test_reference_metrics_formulas():
    m = metrics_of([G([1.0, 0.0], {"f": [1, 0]}, [1, 3]), G([0.5, 0.5], {"f": [1, 1]}, [2, 2])])
    assert m["metrics/mean_reward"] == 0.5
    assert m["metrics/reward_std"] == pytest.approx(0.125**0.5)
    assert m["metrics/f"] == 0.75
    assert m["metrics/avg_num_turns"] == 2.0 and m["metrics/max_num_turns"] == 3.0
    assert m["metrics/groups_with_identical_scores"] == 1.0 and m["metrics/groups_total"] == 2.0
    assert m["metrics/identical_score_rate"] == 0.5
    assert stats.population_std([3.0]) == 0.0
    assert metrics_of([]) == {}


@pytest.mark.unit
@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=1, max_size=4), max_size=30))
def test_the_identical_score_rate_is_over_groups_of_two_or_more_rollouts(groups):
    """A group of one rollout read as identical: a run of them said 100% here and compare said 0%."""
    m = metrics_of([G(scores) for scores in groups])
    compared = [scores for scores in groups if len(scores) > 1]
    if not compared:
        assert "metrics/identical_score_rate" not in m
        return
    alike = sum(len(set(scores)) == 1 for scores in compared)
    assert m["metrics/identical_score_rate"] == alike / len(compared)
    assert m["metrics/groups_with_identical_scores"] == alike
    assert m["metrics/groups_total"] == len(groups)


@pytest.mark.unit
def test_unique_path_and_torn_tail(tmp_path):
    target = tmp_path / "g.jsonl"
    assert store.unique_path(target) == target
    target.write_text('{"a": 1}\n{"b": ')
    assert store.unique_path(target) == tmp_path / "g_1.jsonl"
    assert store.repair_tail(target) == len('{"b": ')
    assert target.read_text() == '{"a": 1}\n'
    assert store.repair_tail(target) == 0


@pytest.mark.unit
def test_appender_writes_whole_lines_and_feeds_the_window(tmp_path):
    window = store.GroupWindow(2)
    appender = store.JsonlAppender(tmp_path / "g.jsonl", on_line=window.add)
    for i in range(3):
        appender.write({"tokens": [[i]], "scores": [float(i)]})
    appender.close()
    assert appender.lines_written == 3 and len(window) == 2
    path, count, held = window.dump(tmp_path / "d.jsonl")
    assert (
        count == held == 2
        and path.read_text().splitlines() == (tmp_path / "g.jsonl").read_text().splitlines()[1:]
    )


@pytest.mark.unit
def test_read_groups_reports_bad_lines_with_numbers(tmp_path):
    path = tmp_path / "g.jsonl"
    path.write_text('{"tokens": [], "scores": []}\nnot json\n{"x": 1}\n')
    entries = list(store.read_groups(path))
    assert entries[0][0] == 1
    assert entries[1] == store.BadLine(2, entries[1].reason) and "not JSON" in entries[1].reason
    assert entries[2].number == 3


@pytest.mark.unit
def test_config_precedence_flags_env_file_defaults(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "empty"))
    cfg = tmp_path / "c.toml"
    cfg.write_text("group-size = 3\nsteps = 7\ntemperature = 0.5\nenv_args = {max_turns = 2}\n")
    env = {"VFTUI_STEPS": "9", "VFTUI_TEMPERATURE": "0.7"}
    c = load_config({"temperature": 0.9, "mode": "process"}, cfg, env)
    assert (c.group_size, c.steps, c.temperature, c.mode) == (3, 9, 0.9, "sft")
    assert c.env_args == {"max_turns": 2}
    assert load_config({}, None, {}).group_size == 8
    bad = tmp_path / "bad.toml"
    bad.write_text("colour = 'red'\n")
    with pytest.raises(UserError, match="unknown setting 'colour'"):
        load_config({}, bad, {})


@pytest.mark.unit
def test_default_config_file_lives_in_the_user_config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "vftui").mkdir()
    (tmp_path / "vftui" / "config.toml").write_text("[run]\nsteps = 11\n")
    assert load_config({}, None, {}).steps == 11


TOKENIZER = AutoTokenizer.from_pretrained(str(TOKENIZER_DIR))
CHAT = [
    {"role": "system", "content": "Sort."},
    {"role": "user", "content": "Sort these names alphabetically: Zoe, Ada"},
    {"role": "assistant", "content": "<alphabetical_sorted>\nAda\nZoe\n</alphabetical_sorted>"},
]


@pytest.mark.unit
def test_transformers_5_breaks_tokenize_for_trainer_and_compat_fixes_it():
    broken = tokenize_for_trainer(TOKENIZER, CHAT, train_on_all_assistant_turns=True)
    assert len(broken["tokens"]) != len(broken["masks"]) or len(broken["tokens"]) < 5
    fixed = tokenize_for_trainer(
        ChatTemplateTokenizer(TOKENIZER), CHAT, train_on_all_assistant_turns=True
    )
    assert len(fixed["tokens"]) == len(fixed["masks"]) > 20
    trained = [t for t, m in zip(fixed["tokens"], fixed["masks"], strict=True) if m != -100]
    assert TOKENIZER.decode(trained) == CHAT[2]["content"] + "<|im_end|>\n"


@pytest.mark.unit
def test_truncated_rollouts_drop_the_end_of_turn_tokens():
    tok = ChatTemplateTokenizer(TOKENIZER)
    cut = [*CHAT[:2], {"role": "assistant", "content": "<alphabetical_sorted>\nAda"}]
    whole = sft_tokens(tok, cut, ["stop"])
    truncated = sft_tokens(tok, cut, ["length"])
    assert not whole.stripped_end_of_turn and truncated.stripped_end_of_turn
    assert whole.tokens[: len(truncated.tokens)] == truncated.tokens
    assert TOKENIZER.decode(whole.tokens[len(truncated.tokens) :]) == "<|im_end|>\n"
    trained = [t for t, m in zip(truncated.tokens, truncated.masks, strict=True) if m != -100]
    assert TOKENIZER.decode(trained) == "<alphabetical_sorted>\nAda"


TWO_TURNS = [
    *CHAT[:2],
    {"role": "assistant", "content": "<alphabetical_sorted>\nAda"},
    {"role": "user", "content": "Add these names and sort them all: Bo"},
    {"role": "assistant", "content": "<alphabetical_sorted>\nAda\nBo\nZoe\n</alphabetical_sorted>"},
]


@pytest.mark.unit
def test_a_turn_cut_before_the_last_keeps_its_end_of_turn_in_the_sequence_but_does_not_train_it():
    """The next turn's context held the template's end of turn, so it stays; the model never wrote it."""
    tok = ChatTemplateTokenizer(TOKENIZER)
    whole = sft_tokens(tok, TWO_TURNS, ["stop", "stop"])
    first_cut = sft_tokens(tok, TWO_TURNS, ["length", "stop"])
    assert first_cut.tokens == whole.tokens and not first_cut.stripped_end_of_turn
    trained = [t for t, m in zip(first_cut.tokens, first_cut.masks, strict=True) if m != -100]
    answers = TWO_TURNS[2]["content"] + TWO_TURNS[4]["content"]
    assert TOKENIZER.decode(trained) == answers + "<|im_end|>\n"
    both_cut = sft_tokens(tok, TWO_TURNS, ["length", "length"])
    assert both_cut.tokens == whole.tokens[: len(both_cut.tokens)] and both_cut.stripped_end_of_turn
    trained = [t for t, m in zip(both_cut.tokens, both_cut.masks, strict=True) if m != -100]
    assert TOKENIZER.decode(trained) == answers


@pytest.mark.unit
def test_rl_trains_only_the_servers_ids_so_a_cut_turn_has_no_end_of_turn_to_learn():
    """rl's trained spans are what the server generated: a cut answer's has no end of turn, and the
    template's after it is context (masked), as sft now does."""

    def generated(text: str, finished: bool) -> Turn:
        ids = TOKENIZER.encode(text, add_special_tokens=False)
        ids += [TOKENIZER.eos_token_id] if finished else []
        return Turn(ids, [-0.5] * len(ids), "stop" if finished else "length")

    turns = [generated(TWO_TURNS[2]["content"], False), generated(TWO_TURNS[4]["content"], True)]
    out = rl_tokens(ChatTemplateTokenizer(TOKENIZER), TWO_TURNS, turns)
    assert TOKENIZER.decode(out.tokens) == TOKENIZER.apply_chat_template(TWO_TURNS, tokenize=False)
    trained = [t for t, m in zip(out.tokens, out.masks, strict=True) if m != -100]
    answers = TWO_TURNS[2]["content"] + TWO_TURNS[4]["content"]
    assert TOKENIZER.decode(trained) == answers + "<|im_end|>"


WORDS = st.lists(st.sampled_from(["Ada", "Zoe", " Bo", "<alphabetical_sorted>", "\n", "é", "42"]))


@pytest.mark.unit
@settings(max_examples=60, deadline=None)
@given(
    st.lists(WORDS, max_size=2),  # few-shot answers in the prompt: trained, never cut
    st.lists(
        st.tuples(WORDS, st.sampled_from(["stop", "length", "tool_calls", None])),
        min_size=1,
        max_size=4,
    ),
)
def test_every_cut_answer_and_only_those_trains_without_its_end_of_turn(shots, calls):
    """Whatever the turns and which of them were cut: each answer is trained as the model wrote it,
    with the end of turn only after those it finished; only the last call's cut shortens the sequence."""
    chat = [{"role": "system", "content": "Sort."}]
    for words in [*shots, *(words for words, _ in calls)]:
        chat.append({"role": "user", "content": "Sort these names alphabetically: Zoe, Ada"})
        chat.append({"role": "assistant", "content": "".join(words)})
    reasons = [reason for _, reason in calls]
    out = sft_tokens(ChatTemplateTokenizer(TOKENIZER), chat, reasons)
    expected = "".join(
        m["content"] + ("" if reason == "length" else "<|im_end|>\n")
        for m, reason in zip(chat[2::2], [*[None] * len(shots), *reasons], strict=True)
    )
    trained = [t for t, m in zip(out.tokens, out.masks, strict=True) if m != -100]
    assert TOKENIZER.decode(trained) == expected
    rendered = TOKENIZER.apply_chat_template(chat, tokenize=False)
    if reasons[-1] == "length":
        rendered = rendered.removesuffix("<|im_end|>\n")
    assert TOKENIZER.decode(out.tokens) == rendered
    assert all(m in (-100, t) for t, m in zip(out.tokens, out.masks, strict=True))


@pytest.mark.unit
def test_simulated_policy_spread_grows_with_temperature():
    rows = task.make_examples(60, 3, 6, 1, 0)

    def spread(temperature: float) -> tuple[float, int]:
        stds, identical = [], 0
        for row in rows:
            messages = [
                {"role": "system", "content": task.SYSTEM_PROMPT},
                {"role": "user", "content": row["question"]},
            ]
            rng = random.Random(1)
            scores = []
            for _ in range(8):
                answer = policy.answer(messages, temperature, rng)
                completion = [{"role": "assistant", "content": answer}]
                scores.append(task.sorted_correctly_score(completion, row["info"]["batches"]))
            stds.append(stats.population_std(scores))
            identical += stats.is_identical(scores)
        return stats.mean(stds), identical

    cold, warm, hot = spread(0.0), spread(1.0), spread(2.0)
    assert cold == (0.0, 60)
    assert 0 < warm[0] < hot[0]
    assert 0 < warm[1] < 60, "some groups come out identical at the default temperature, not all"


@pytest.mark.unit
def test_unknown_prompts_get_a_labelled_reply():
    text = policy.answer([{"role": "user", "content": "What is 2+2?"}], 1.0, random.Random(0))
    assert "simulated" in text


@pytest.mark.unit
def test_loopback_detection_and_error_lines():
    assert is_loopback("http://127.0.0.1:8000/v1") and is_loopback("http://localhost/v1")
    assert is_loopback("http://[::1]:9/v1") and not is_loopback("https://api.example.com/v1")
    assert rollout_error(
        {"error": {"error_chain_repr": "ModelError() -> APIConnectionError('x')"}}
    ) == ("APIConnectionError('x')")
    assert rollout_error({"error": None}) is None


@pytest.mark.unit
def test_loopback_is_asked_without_the_environments_proxies(monkeypatch):
    """127.0.0.0/8, ::1 and localhost never through HTTP_PROXY (the embedded endpoint's run failed); other hosts
    as the environment says."""
    closed = "http://127.0.0.1:9"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, closed)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    for url in (
        "http://127.0.0.1:8000/v1",
        "http://127.0.1.1/v1",
        "http://[::1]:9/",
        "http://LOCALHOST",
    ):
        assert unproxied(url)["trust_env"] is False and env_proxy(httpx.URL(url)) is None, url
    mixed = ("http://127.0.1.1:8000/v1", "https://api.example.com/v1")
    with httpx.Client(**unproxied(*mixed)) as client:
        for url in (*mixed, "http://localhost:1/", "http://[::1]:1/"):
            proxied = client._transport_for_url(httpx.URL(url)) is not client._transport
            assert proxied == ("example" in url), url
    assert env_proxy(httpx.URL("https://api.example.com/v1")) == Proxy(closed, {})


@pytest.mark.unit
def test_shipped_tokenizer_is_small_and_loads_anywhere():
    size = sum(p.stat().st_size for p in Path(TOKENIZER_DIR).iterdir())
    assert size < 100_000
    assert TOKENIZER.eos_token == "<|im_end|>"
    text = "Ünïcode 漢字 and emoji 🙂 still round-trip"
    assert TOKENIZER.decode(TOKENIZER.encode(text, add_special_tokens=False)) == text


@pytest.mark.unit
def test_status_line_says_how_many_groups_are_still_in_flight_and_the_request_figures():
    model = DashboardModel()
    stats = RATE_LIMITED_TRAFFIC
    model.apply([RunStatus(RunState.PAUSING, 3, 10, "finishing 3 groups in flight"), stats])
    line = render_status(model).plain.splitlines()[1]
    assert line.startswith("pausing… (finishing 3 groups in flight)  0/10 groups")
    assert (
        "in flight 12/32 in 3 groups · rate-limited to 16 · 20.4 req/s · p50 0.52 s p95 0.57 s · 417 tok/s"
        in line
    )
    assert line.count("tok/s") == 1, "one tokens/s figure, the endpoint's"
    model.apply([RunStatus(RunState.PAUSED, 6, 10)])
    assert render_status(model).plain.splitlines()[1].startswith("paused  0/10 groups")


@pytest.mark.unit
def test_the_header_names_a_run_that_ended_short_of_its_groups_stopped():
    """As its summary, its controls and vftui runs do: a gate or a stop ended it, it did not finish."""
    for done, said in ((11, "stopped"), (300, "finished")):
        model = DashboardModel()
        model.apply(
            [
                RunStatus(RunState.FINISHED, done, 300),
                RunSummary(RunState.FINISHED, done, 300, "g.jsonl", 2.0, {}, gate="identical"),
            ]
        )
        assert render_status(model).plain.splitlines()[1].startswith(f"{said}  {done}/300 groups")


@pytest.mark.unit
def test_dropped_groups_count_in_the_rates_and_the_kept_mean_is_separate():
    acc = stats.Accumulator()
    acc.add(GroupDropped(0, stats.TOO_EASY, [1.0, 1.0], {}, [1, 1]))
    acc.add(GroupDropped(1, stats.TOO_HARD, [0.0, 0.0], {}, [1, 1]))
    acc.add(GroupDropped(2, "malformed group", [0.2, 0.6], {}, [1, 1]))
    acc.add(G([0.2, 0.8], {}, [1, 1]))
    m = acc.metrics()
    assert m["metrics/identical_score_rate"] == 0.5 and m["metrics/groups_total"] == 4
    assert m["metrics/mean_reward"] == pytest.approx(0.475) and m[
        "metrics/mean_reward_kept"
    ] == pytest.approx(0.5)
    assert (
        stats.identical_kind(0.0, None) == stats.TOO_HARD
        and stats.identical_kind(1.2, None) == stats.TOO_EASY
    )
    assert (
        stats.identical_kind(0.9, (0.0, 1.2)) == stats.TOO_EASY
        and stats.identical_kind(0.5, (0.0, 1.2)) == stats.TOO_HARD
    )


@pytest.mark.unit
def test_the_header_keeps_the_runs_path_shortened_from_the_left_after_its_counters():
    model = DashboardModel()
    path = "/home/someone/.local/share/vftui/runs/2026-12-04-231500-alphabet-sort/groups.jsonl"
    model.apply(
        [
            RunStarted(
                Mode.SFT,
                "vftui/alphabet-sort",
                "m",
                "http://127.0.0.1:1/v1",
                True,
                path,
                10,
                0,
                4,
                1.0,
                [],
                "t",
            ),
            RunStatus(RunState.RUNNING, 3, 10),
        ]
    )
    for width in (80, 200):
        line = render_status(model, width).plain.splitlines()[1]
        assert len(line) <= width and line.startswith("running  0/10 groups") and "g/s" in line
        assert line.endswith("groups.jsonl") and (path in line) == (width == 200)
    assert render_status(model, 30).plain.splitlines()[1].startswith("running"), (
        "no room: the path goes, not a counter"
    )
    assert "→" not in render_status(model, 30).plain.splitlines()[1]


def test_health_figures_say_their_alert_thresholds_and_a_short_run_has_them(tmp_path):
    from rich.console import Console

    from tests.conftest import json_events, run_cli
    from vftui.ui.screens.health import render_health

    result = run_cli(
        [
            "run",
            "--no-ui",
            "--json",
            "--steps",
            "2",
            "--group-size",
            "2",
            "--identical-alert",
            "0.7",
            "--out",
            str(tmp_path / "g.jsonl"),
        ],
        tmp_path,
    )
    events = json_events(result.stdout)
    kinds = [e["event"] for e in events]
    assert "Health" in kinds and kinds.index("Health") < kinds.index("RunSummary"), (
        "a run under a second has them"
    )
    # the last before the summary: the run's end checks once more (a periodic check under load can come first)
    health = [e for e in events[: kinds.index("RunSummary")] if e["event"] == "Health"][-1]
    assert health["thresholds"]["identical"] == 0.7 and health["groups"] == 2
    model = DashboardModel()
    signals, thresholds = {"truncated": 0.0, "identical": 1.0}, {"truncated": 0.2, "identical": 0.7}
    model.apply(
        [
            Health(
                2, {"stop": 4}, 20.0, 30.0, {}, 1.0, 1.0, None, None, None, signals, [], thresholds
            )
        ]
    )
    console = Console(width=160, record=True)
    console.print(render_health(model))
    text = console.export_text()
    assert "0.0% (alert > 20.0%)" in text and "100.0% (alert > 70.0%)" in text


@pytest.mark.unit
def test_an_alert_is_said_with_the_signals_value_now_not_the_one_it_fired_at():
    """The hostile probe's find: the health screen said "51% of recent groups have identical scores" while
    the row below it read 100%: the alert kept the words of the moment it fired."""
    from rich.console import Console

    from vftui.events import Alert
    from vftui.ui.screens.health import render_health

    model = DashboardModel()
    fired = Alert(
        "identical", 0.51, 0.5, True, "51% of recent groups have identical scores (> 0.5)"
    )
    signals = {"identical": 1.0}
    model.apply([fired, Health(8, {}, 20.0, 30.0, {}, 1.0, 1.0, None, None, None, signals, [])])
    console = Console(width=200, record=True)
    console.print(render_health(model))
    text = console.export_text()
    assert "100% of recent groups have identical scores (> 0.5)" in text and "51%" not in text
