"""``vftui export``: a collected run to prime-rl's SFT parquet, TRL's messages and Atropos's groups, each read
back by the library that reads it (``datasets``, atroposlib's ``ScoredDataGroup``), with exactly the
rollouts the dashboard's filter shows; and the selection's rules on their own (Hypothesis)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import REPO, run_cli, until
from tests.test_readers_fuzz import inputs
from vftui.errors import UserError
from vftui.events import GroupCollected
from vftui.figures.group_filter import parse_filter
from vftui.run_files import export
from vftui.run_files.export import Picker, Selection, Tally, wire_message
from vftui.run_files.groupfile import group_event


@pytest.fixture(scope="module")
def collected(tmp_path_factory) -> Path:
    """An sft run of the embedded default: 12 groups of 4."""
    folder = tmp_path_factory.mktemp("collected")
    out = folder / "g.jsonl"
    done = run_cli(
        [
            "run",
            "--mode",
            "sft",
            "--steps",
            "12",
            "--group-size",
            "4",
            "--no-ui",
            "--out",
            str(out),
        ],
        folder,
    )
    assert done.returncode == 0, done.stderr
    return out


def groups(path: Path) -> list[tuple[dict, GroupCollected]]:
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [(raw, group_event(n, raw)) for n, raw in enumerate(lines, start=1)]


def shown_rollouts(path: Path, where: str, min_reward: float) -> list[list[dict]]:
    """The conversations the dashboard's filter shows, of rollouts at or above ``min_reward``."""
    keep = parse_filter(where)
    return [
        group.messages[i]
        for _, group in groups(path)
        if keep(group)
        for i, score in enumerate(group.scores)
        if score >= min_reward
    ]


def test_prime_rl_parquet_holds_exactly_what_the_filter_shows_and_datasets_reads_it(
    collected, tmp_path
):
    from datasets import load_dataset

    out = tmp_path / "sft" / "train.parquet"
    out.parent.mkdir()
    args = ["export", str(collected), "-o", str(out), "--format", "prime-rl", "--where", "varied"]
    result = run_cli([*args, "--min-reward", "0.5", "--json"], tmp_path)
    assert result.returncode == 0, result.stderr
    said = json.loads(result.stdout)
    expected = shown_rollouts(collected, "varied", 0.5)
    data = load_dataset("parquet", data_files=str(out))["train"]
    assert said["rows"] == len(data) == len(expected) > 0
    assert data.column_names == ["messages", "tools"]
    for row, messages in zip(data, expected, strict=True):
        assert [(m["role"], m["content"]) for m in row["messages"]] == [
            (m["role"], m["content"]) for m in messages
        ]
        assert json.loads(row["tools"]) == []
    assert (
        said["left_out"]["where"] + said["kept"] + said["left_out"].get("low_reward", 0)
        == said["rollouts"]
    )
    assert not list(out.parent.glob(".*.part"))  # nothing half-written left beside it


def test_messages_jsonl_is_trl_s_conversational_shape(collected, tmp_path):
    from datasets import load_dataset

    out = tmp_path / "m.jsonl"
    result = run_cli(["export", str(collected), "-o", str(out)], tmp_path)
    assert result.returncode == 0, result.stderr
    data = load_dataset("json", data_files=str(out))["train"]
    assert len(data) == sum(len(g.scores) for _, g in groups(collected))
    assert data[0]["messages"][-1]["role"] == "assistant"
    assert "wrote" in result.stdout and "messages" in result.stdout


def test_atropos_groups_keep_their_tokens_and_masks_and_atroposlib_reads_them(collected, tmp_path):
    from atroposlib.api.server import ScoredData  # what the trajectory API accepts

    out = tmp_path / "a.jsonl"
    result = run_cli(
        ["export", str(collected), "-o", str(out), "--format", "atropos", "--best-of", "2"],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    source = {raw["vftui"]["item"]: raw for raw, _ in groups(collected)}
    for line in out.read_text().splitlines():
        written = json.loads(line)
        ScoredData.model_validate(written)
        original = source[written["vftui"]["item"]]
        best = sorted(range(4), key=lambda i: (-original["scores"][i], i))[:2]
        kept = sorted(best)
        assert written["scores"] == [original["scores"][i] for i in kept]
        assert written["tokens"] == [original["tokens"][i] for i in kept]
        assert written["masks"] == [original["masks"][i] for i in kept]


def test_refusals_overwrite_and_nothing_kept_are_one_sentence_each(collected, tmp_path):
    out = tmp_path / "x.jsonl"
    out.write_text("mine\n")
    exists = run_cli(["export", str(collected), "-o", str(out)], tmp_path)
    assert exists.returncode == 2 and "pass --force" in exists.stderr
    assert out.read_text() == "mine\n"
    forced = run_cli(["export", str(collected), "-o", str(out), "--force"], tmp_path)
    assert forced.returncode == 0 and out.read_text() != "mine\n"
    none = run_cli(
        ["export", str(collected), "-o", str(tmp_path / "n.jsonl"), "--min-reward", "9"], tmp_path
    )
    assert none.returncode == 1 and "nothing to export" in none.stderr
    assert not (tmp_path / "n.jsonl").exists()
    for args, said in (
        (["--where", "reward>>1"], "--where: cannot read"),
        (["--format", "prime-rl"], "name OUT with .parquet"),
        (["--best-of", "0"], "--best-of takes"),
        (["--min-reward", "nan"], "--min-reward must be a finite number"),
    ):
        bad = run_cli(["export", str(collected), "-o", str(tmp_path / "b.jsonl"), *args], tmp_path)
        assert bad.returncode == 2 and said in bad.stderr, bad.stderr
        assert "Traceback" not in bad.stderr


def test_a_tool_call_in_verifiers_flat_form_is_written_in_openai_s_nested_one():
    flat = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "name": "f", "arguments": {"x": 1}}],
    }
    wire = wire_message(flat)
    assert wire["tool_calls"] == [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
    ]
    assert set(wire) == {
        "role",
        "content",
        "reasoning_content",
        "tool_calls",
        "tool_call_id",
        "name",
    }


def group_of(
    scores: list[float], completions: list[str], reasons: list[str | None]
) -> GroupCollected:
    messages = [
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": c}] for c in completions
    ]
    raw = {
        "tokens": [[1, 2]] * len(scores),
        "masks": [[-100, 2]] * len(scores),
        "scores": [0.0] * len(scores),
        "messages": messages,
        "vftui": {"finish_reasons": reasons},
    }
    # a file's NaN score skips its line when read; the picker still guards the event itself
    return dataclasses.replace(group_event(1, raw), scores=scores)


rollouts = st.lists(
    st.tuples(
        st.one_of(st.floats(-2, 2), st.just(math.nan)),
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from([None, "stop", "length"]),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(
    rollouts,
    st.one_of(st.none(), st.integers(1, 4)),
    st.one_of(st.none(), st.floats(-1, 1)),
    st.booleans(),
    st.booleans(),
)
def test_the_selection_keeps_what_its_rules_say_and_counts_every_other(
    found, best_of, min_reward, drop_truncated, dedupe
):
    scores, completions, reasons = (list(x) for x in zip(*found, strict=True))
    group = group_of(scores, completions, reasons)
    tally = Tally()
    picker = Picker(Selection(None, min_reward, drop_truncated, best_of, dedupe), tally, True)
    kept = picker.kept({}, group)
    assert kept == sorted(kept) and tally.kept == len(kept)
    assert tally.kept + sum(tally.left_out.values()) == len(
        scores
    )  # every rollout kept or counted once
    for i in kept:
        assert math.isfinite(scores[i])  # a reward that is not a number is never exported
        assert min_reward is None or scores[i] >= min_reward
        assert not (drop_truncated and reasons[i] == "length")
    if best_of is not None:
        assert len(kept) <= best_of
    if dedupe:
        assert len({completions[i] for i in kept}) == len(kept)


async def test_the_viewers_d_and_x_write_what_the_filter_shows_as_the_command_does(
    collected, tmp_path, monkeypatch
):
    """``vftui view``: ``d`` dumps the groups the filter shows as collected; ``x`` exports their
    rollouts through the code ``vftui export`` runs: the files equal the command's."""
    import pyarrow.parquet as pq

    from vftui.run_files.groupfile import GroupFile
    from vftui.sim.server import TOKENIZER_DIR
    from vftui.ui.app import VftuiApp
    from vftui.ui.feeds import ViewedFile
    from vftui.ui.inbox import Inbox
    from vftui.ui.screens.prompt import PromptScreen

    monkeypatch.chdir(tmp_path)
    means = sorted(sum(g.scores) / len(g.scores) for _, g in groups(collected))
    where = f"reward>{(means[0] + means[-1]) / 2:.4f}"
    shown = [raw for raw, group in groups(collected) if parse_filter(where)(group)]
    assert 0 < len(shown) < 12, "the filter must choose"
    by_command = tmp_path / "by-command.parquet"
    assert (
        run_cli(
            ["export", str(collected), "-o", str(by_command), "--where", where], tmp_path
        ).returncode
        == 0
    )
    app = VftuiApp(ViewedFile(Inbox(), GroupFile(collected), str(TOKENIZER_DIR)))
    async with app.run_test(size=(120, 36)) as pilot:
        await until(lambda: app.model.summary is not None, pilot=pilot)
        await pilot.press("slash", *where, "enter")
        await until(lambda: app.model.filter_text == where, pilot=pilot)
        await pilot.press("d")
        await until(lambda: list(tmp_path.glob("g-*-dump.jsonl")), pilot=pilot, timeout=60)
        await pilot.press("x")
        await until(lambda: isinstance(app.screen, PromptScreen), pilot=pilot)
        prompt = app.screen.query_one("Input")
        assert prompt.value.endswith("-sft.parquet")
        prompt.value = str(by_command)  # an existing file is refused, under the input
        await pilot.press("enter")
        await until(
            lambda: "exists" in str(app.screen.query_one(".prompt-error").render()), pilot=pilot
        )
        prompt.value = str(tmp_path / "by-key.parquet")
        await pilot.press("enter")
        await until(lambda: (tmp_path / "by-key.parquet").exists(), pilot=pilot, timeout=60)
        await until(
            lambda: any("rollouts kept" in n.message for n in app._notifications), pilot=pilot
        )
    (dump,) = tmp_path.glob("g-*-dump.jsonl")
    assert [json.loads(line) for line in dump.read_text().splitlines()] == shown
    assert (
        pq.read_table(tmp_path / "by-key.parquet").to_pylist()
        == pq.read_table(by_command).to_pylist()
    )
    assert not list(tmp_path.glob(".*.part")), "nothing half-written is left"


@pytest.mark.parametrize(
    ("suffix", "sig"), [(".parquet", "SIGINT"), (".jsonl", "SIGTERM"), (".parquet", "SIGHUP")]
)
def test_a_stop_leaves_nothing_half_written(collected, tmp_path, suffix, sig):
    """Ctrl-C, SIGTERM or a closed terminal mid-write: exit 130, neither OUT nor its temporary
    file left behind."""
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import cli_env

    lines = collected.read_text().splitlines()
    big = tmp_path / "big.jsonl"
    with big.open("w") as f:
        for copy in range(400):  # some 20 MB: seconds to export, the temporary file seen first
            for line in lines:
                group = json.loads(line)
                group["vftui"]["item"] = copy * len(lines) + group["vftui"]["item"]
                f.write(json.dumps(group) + "\n")
    out = tmp_path / f"out{suffix}"
    process = subprocess.Popen(
        [sys.executable, "-m", "vftui", "export", str(big), "-o", str(out)],
        cwd=tmp_path,
        env=cli_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(f".out{suffix}.*.part")):
        assert process.poll() is None, "it ended before it was interrupted: make the source bigger"
        assert time.monotonic() < deadline, "no temporary file appeared"
        time.sleep(0.01)
    process.send_signal(getattr(signal, sig))
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "Traceback" not in err
    assert not out.exists() and not list(tmp_path.glob(".out*")), "nothing half-written is left"


def test_a_tool_environments_calls_and_schemas_reach_the_parquet_and_render(tmp_path):
    """The built-in tool env: each row's ``tools`` are the schemas the model was sent, its tool
    calls are in OpenAI's shape, and a chat template renders the row with them as a trainer does."""
    import datasets
    from transformers import AutoTokenizer

    from vftui.sim.server import TOKENIZER_DIR

    run = tmp_path / "t.jsonl"
    done = run_cli(
        ["run", "--no-ui", "--env", "vftui/alphabet-tools", "--steps", "2", "--out", str(run)],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    out = tmp_path / "t.parquet"
    assert (
        run_cli(["export", str(run), "-o", str(out), "--format", "prime-rl"], tmp_path).returncode
        == 0
    )
    rows = datasets.load_dataset("parquet", data_files=str(out))["train"]
    raws = [raw for raw, _ in groups(run)]
    assert len(rows) == sum(len(raw["scores"]) for raw in raws)
    tokenizer = AutoTokenizer.from_pretrained(str(TOKENIZER_DIR))
    for row, (raw, i) in zip(
        rows, ((r, i) for r in raws for i in range(len(r["scores"]))), strict=True
    ):
        assert json.loads(row["tools"]) == raw["tools"]
        calls = [c for m in row["messages"] for c in m["tool_calls"] or []]
        sent = [c for m in raw["messages"][i] for c in m.get("tool_calls") or []]
        assert len(calls) == len(sent) > 0
        assert all(
            c["type"] == "function" and json.loads(c["function"]["arguments"]) for c in calls
        )
        messages = [{k: v for k, v in m.items() if v is not None} for m in row["messages"]]
        for m in messages:  # templates take arguments as a mapping, as prime-rl hands them over
            for c in m.get("tool_calls", []):
                c["function"]["arguments"] = json.loads(c["function"]["arguments"])
        text = tokenizer.apply_chat_template(
            messages, tools=json.loads(row["tools"]), tokenize=False
        )
        assert raw["tools"][0]["function"]["name"] in text and calls[0]["function"]["name"] in text


@pytest.mark.parametrize(
    ("source", "rollouts", "tools"),
    [
        (
            "tests/data/v1_eval/vftui_shim_tools--vftui-sim--null--ref",
            6,
            ["compare_names", "count_letters"],
        ),
        ("tests/data/compare/a", 48, []),  # vf-eval's results folder
    ],
)
def test_verifiers_own_eval_folders_export_with_their_tool_schemas(
    source, rollouts, tools, tmp_path
):
    """A v1 eval folder's traces carry the tools they were sent (v1's flat ``Tool``): they reach
    the rows in OpenAI's shape, as a run's own groups do."""
    from tests.conftest import REPO

    out = tmp_path / "o.jsonl"
    done = run_cli(["export", str(REPO / source), "-o", str(out), "--json"], tmp_path)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == json.loads(done.stdout)["rows"] == rollouts
    for row in rows:
        assert [t["function"]["name"] for t in row["tools"]] == tools
        assert all(t["type"] == "function" for t in row["tools"])
        assert row["messages"][-1]["role"] == "assistant"


# -- the hostile probe's findings (2026-12-07), each with the test that would have caught it --------


def odd_lines(collected: Path) -> list[dict]:
    """One good group made into the shapes a stranger's file has."""
    good = json.loads(collected.read_text().splitlines()[0])

    def changed(edit) -> dict:
        group = json.loads(json.dumps(good))
        edit(group)
        return group

    def set_message(i, value):
        return lambda g: g["messages"].__setitem__(i, value)

    def set_first(key, value):
        return lambda g: g["messages"][0][-1].__setitem__(key, value)

    return [
        changed(set_message(0, ["hello", "world"])),  # unreadable: not chat messages
        changed(lambda g: g.__setitem__("messages", "abcd")),  # unreadable
        changed(lambda g: g.__setitem__("messages", {"a": 1})),  # unreadable
        changed(lambda g: g["tokens"].pop()),  # unreadable: 3 tokens for 4 scores
        changed(set_first("tool_calls", 5)),  # rollout 0: not chat; 3 kept
        changed(
            set_first("content", [{"type": "text", "text": "Ab"}, {"type": "text", "text": "c"}])
        ),
        changed(lambda g: g["scores"].__setitem__(1, None)),  # rollout 1: no reward; 3 kept
    ]


def test_a_strangers_shapes_are_counted_never_a_traceback(collected, tmp_path):
    source = tmp_path / "odd.jsonl"
    source.write_text("".join(json.dumps(g) + "\n" for g in odd_lines(collected)))
    source.write_text(source.read_text().replace("null", "NaN", 1))  # the score: a bare NaN
    out = tmp_path / "odd.jsonl.out.jsonl"
    done = run_cli(["export", str(source), "-o", str(out), "--json"], tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    said = json.loads(done.stdout)
    assert said["unreadable_lines"] == 4
    assert said["left_out"] == {"not_chat": 1, "no_reward": 1}
    assert said["kept"] == said["rows"] == 10 and said["rollouts"] == 12
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[3]["messages"][-1]["content"] == "Abc", "text parts are joined"
    atropos = tmp_path / "a.jsonl"
    assert (
        run_cli(
            ["export", str(source), "-o", str(atropos), "--format", "atropos"], tmp_path
        ).returncode
        == 0
    )
    for group in map(json.loads, atropos.read_text().splitlines()):
        n = len(group["scores"])
        assert all(len(group[k]) == n for k in ("tokens", "masks", "messages")), "aligned"


def test_what_is_not_a_run_is_bad_input_and_nothing_kept_still_answers_json(collected, tmp_path):
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    done = run_cli(["export", str(passwd), "-o", str(tmp_path / "o.jsonl")], tmp_path)
    assert done.returncode == 2 and "no groups in" in done.stderr and "1 lines" in done.stderr
    assert "line 1: not JSON" in done.stderr
    none = run_cli(
        ["export", str(collected), "-o", str(tmp_path / "n.jsonl"), "--min-reward", "9", "--json"],
        tmp_path,
    )
    assert none.returncode == 1 and json.loads(none.stdout)["kept"] == 0


@pytest.mark.parametrize(
    ("name", "written", "code"),
    [("o.PARQUET", "parquet", 0), ("o.Jsonl", "jsonl", 0), ("o.txt", None, 2)],
)
def test_the_suffix_says_the_format_in_any_case(collected, tmp_path, name, written, code):
    out = tmp_path / name
    done = run_cli(["export", str(collected), "-o", str(out)], tmp_path)
    assert done.returncode == code, done.stderr
    if written == "parquet":
        assert out.read_bytes()[:4] == b"PAR1"
    elif written == "jsonl":
        assert out.read_text().startswith('{"messages"')
    else:
        assert "name OUT with .parquet or .jsonl" in done.stderr and not out.exists()


def test_a_folder_it_cannot_write_in_is_one_sentence(collected, tmp_path):
    done = run_cli(["export", str(collected), "-o", "/proc/vftui-export.jsonl"], tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0 and "cannot write in /proc" in done.stderr


@pytest.mark.unit
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_export_fed_random_and_mutated_bytes_writes_or_says_one_sentence(data, tmp_path_factory):

    folder = tmp_path_factory.mktemp("fuzz")
    seed = (REPO / "tests/data/groups.jsonl").read_bytes()
    source = folder / "g.jsonl"
    source.write_bytes(b"".join(data.draw(inputs(line + b"\n")) for line in seed.splitlines()[:3]))
    for fmt, name in (("messages", "o.jsonl"), ("prime-rl", "o.parquet"), ("atropos", "a.jsonl")):
        try:
            tally = export.export([source], folder / name, fmt, Selection(), force=True)
        except UserError as e:
            assert "\n" not in str(e)
            continue
        assert tally.kept + sum(tally.left_out.values()) == tally.rollouts
    assert not list(folder.glob(".*.part"))


async def test_closing_the_viewer_mid_export_leaves_nothing_half_written(collected, tmp_path):
    """``x`` on a big file, then ``q`` at once (or a dropped terminal): the export is given up and
    its temporary file removed, not left by a daemon thread killed at exit."""
    from vftui.run_files.groupfile import GroupFile
    from vftui.sim.server import TOKENIZER_DIR
    from vftui.ui.app import VftuiApp
    from vftui.ui.feeds import ViewedFile
    from vftui.ui.inbox import Inbox
    from vftui.ui.screens.prompt import PromptScreen

    lines = collected.read_text().splitlines()
    big = tmp_path / "big.jsonl"
    big.write_text("\n".join(lines * 2000) + "\n")  # some 120 MB: seconds to export
    out = tmp_path / "sft.parquet"
    app = VftuiApp(ViewedFile(Inbox(), GroupFile(big), str(TOKENIZER_DIR)))
    async with app.run_test(size=(120, 36)) as pilot:
        await until(lambda: app.model.run_started is not None, pilot=pilot)
        await pilot.press("x")
        await until(lambda: isinstance(app.screen, PromptScreen), pilot=pilot)
        app.screen.query_one("Input").value = str(out)
        await pilot.press("enter")
        await until(lambda: list(tmp_path.glob(".sft.parquet.*.part")), pilot=pilot, timeout=60)
    assert not list(tmp_path.glob(".sft*")), "nothing half-written is left"
    if out.exists():  # it ended before the quit: whole
        import pyarrow.parquet as pq

        assert pq.read_table(out).num_rows == 2000 * sum(
            len(g.scores) for _, g in groups(collected)
        )
