"""Bounds on what comes from outside (the hostile probe): memory that does not grow with the input, and
damaged or hostile files that end in one sentence, never a traceback."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from aiohttp import web

from tests.conftest import cli_env, serve_app, traced_memory
from vftui.bounds import MAX_NESTING, LongLine, check_nesting, load_json, read_lines
from vftui.cli import main
from vftui.collector.sft.answers import (
    BYTES_PER_EVENT,
    BYTES_PER_LOGPROB,
    BYTES_PER_TOKEN,
    ENVELOPE_BYTES,
    Asked,
)
from vftui.run_files.ledger import ItemLedger
from vftui.sim.server import TOKENIZER_DIR

MB = 1024**2
# The simulated endpoint's tokenizer: the libraries and the environment take ~270 MB; holding any hostile
# input whole (hundreds of MB, and the copies decoding and parsing make) would be far past this.
RSS_BOUND_MB = 600


def peak_rss(args: list[str], tmp_path: Path) -> tuple[subprocess.CompletedProcess, float]:
    """``args`` in a process of its own, and its peak RSS in MB (read by the wrapper that waits for it)."""
    wrapper = (
        "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(r.returncode)"
    )
    done = subprocess.run(
        [sys.executable, "-c", wrapper, *args],
        cwd=tmp_path,
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=240,
    )
    *said, rss = done.stderr.strip().splitlines()
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout, "\n".join(said)
    ), int(rss) / 1024


def completion(content: str, completion_tokens: int) -> bytes:
    return json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "hostile",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": 1,
                "completion_tokens": completion_tokens,
                "total_tokens": 1 + completion_tokens,
            },
        }
    ).encode()


def answering(body: bytes, **headers: str) -> web.Application:
    """An OpenAI-compatible endpoint whose every chat answer is ``body``, whatever was asked."""

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "hostile", "object": "model"}]})

    async def chat(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=body, headers={"Content-Type": "application/json", **headers})

    app = web.Application()
    app.add_routes([web.get("/v1/models", models), web.post("/v1/chat/completions", chat)])
    return app


def run_against(
    base_url: str, tmp_path: Path, *extra: str
) -> tuple[subprocess.CompletedProcess, float]:
    return peak_rss(
        [
            sys.executable,
            "-m",
            "vftui",
            "run",
            "--no-ui",
            "--steps",
            "1",
            "--group-size",
            "2",
            "--retries",
            "1",
            "--base-url",
            base_url,
            "--tokenizer",
            str(TOKENIZER_DIR),
            "--out",
            str(tmp_path / "g.jsonl"),
            *extra,
        ],
        tmp_path,
    )


# -- 1. memory that does not grow with the input -------------------------------------------


def gzip_bomb(inflated_mb: int) -> bytes:
    """A gzip body a thousandth of ``inflated_mb``: spaces (JSON allows them), then a small completion."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [packer.compress(b" " * MB) for _ in range(inflated_mb)]
    return b"".join([*parts, packer.compress(completion("ok", 1)), packer.flush()])


def test_a_gzip_body_is_capped_by_what_it_inflates_to(tmp_path):
    body = gzip_bomb(300)
    assert len(body) < MB / 2
    with serve_app(answering(body, **{"Content-Encoding": "gzip"})) as base_url:
        # --max-tokens so high that --max-response-mb is the bound that binds
        result, rss = run_against(
            base_url, tmp_path, "--max-response-mb", "1", "--max-tokens", "100000"
        )
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "the response body passed 1,048,576 bytes (--max-response-mb)" in result.stderr
    assert rss < RSS_BOUND_MB, f"peak RSS {rss:.0f} MB"


def test_a_model_list_is_read_up_to_its_bound_as_decoded(isolated, capsys):
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    bomb = b"".join(
        [
            *(packer.compress(b" " * MB) for _ in range(64)),
            packer.compress(b'{"data": []}'),
            packer.flush(),
        ]
    )

    async def models(request: web.Request) -> web.Response:
        return web.Response(
            body=bomb, headers={"Content-Type": "application/json", "Content-Encoding": "gzip"}
        )

    app = web.Application()
    app.router.add_get("/v1/models", models)
    with serve_app(app) as base_url:
        said = refused(
            ["run", "--no-ui", "--steps", "1", "--base-url", base_url, "--model", "m"], capsys
        )
    assert said == (
        f"vftui: error: {base_url}/models did not answer like an OpenAI-compatible API (a model list "
        "over 4 MB)"
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            completion("word " * (2 * MB), 2 * MB),  # 10 MB: an endpoint that ignores max_tokens
            "the response body passed 67,584 bytes, more than 16 tokens can take (--max-tokens): the endpoint ignores "
            "the token limit",
        ),
        (
            completion(
                "word " * 100, 100
            ),  # small enough in bytes, but more tokens than were asked, by its own count
            "the answer has 100 completion tokens where 16 were asked for (--max-tokens): the endpoint ignores the "
            "token limit",
        ),
    ],
    ids=["bytes", "usage"],
)
def test_an_answer_past_the_token_limit_is_a_failed_attempt_held_to_what_was_asked(
    tmp_path, body, expected
):
    with serve_app(answering(body)) as base_url:
        result, rss = run_against(base_url, tmp_path, "--max-tokens", "16")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "the endpoint failed 2 times in a row" in result.stderr and expected in result.stderr, (
        result.stderr
    )
    assert (tmp_path / "g.jsonl").read_bytes() == b""
    assert rss < RSS_BOUND_MB, f"peak RSS {rss:.0f} MB"


@pytest.mark.unit
def test_an_answers_cap_follows_what_its_request_asked_for():
    def asked(**request) -> Asked:
        return Asked.of(json.dumps({"model": "m", "messages": [], **request}).encode())

    ceiling = 64 * MB
    assert asked(max_tokens=100).body_cap(ceiling)[0] == ENVELOPE_BYTES + 100 * BYTES_PER_TOKEN
    assert asked(max_completion_tokens=100, n=4).tokens == 400
    with_logprobs = asked(max_tokens=10, logprobs=True, top_logprobs=5, stream=True)
    assert (
        with_logprobs.bytes_per_token == BYTES_PER_TOKEN + 6 * BYTES_PER_LOGPROB + BYTES_PER_EVENT
    )
    cap, said = asked(max_tokens=10**9).body_cap(ceiling)
    assert (
        cap == ceiling and said == f"the response body passed {ceiling:,} bytes (--max-response-mb)"
    )
    for unbounded in (
        Asked.of(b""),
        Asked.of(b"not json"),
        asked(),
        asked(max_tokens="many"),
        asked(max_tokens=-1),
    ):
        assert (
            unbounded.body_cap(ceiling)[0] == ceiling
            and unbounded.overrun(completion("x", 10**6)) is None
        )
    assert asked(max_tokens=5).overrun(completion("x", 5)) is None
    assert asked(max_tokens=5).overrun(b"data: {}\n\n") is None, "a stream's usage is not read"


@pytest.mark.unit
def test_lines_over_the_bound_are_measured_and_skipped_without_being_held():
    big = b"x" * (3 * MB) + b"\n"
    f = io.BytesIO(b"one\n" + big + b"two\n" + b"y" * (MB + 10) + b"\n" + b"z" * (3 * MB))
    lines = list(read_lines(f, 2 * MB))
    assert lines == [
        b"one\n",
        LongLine(len(big), True),
        b"two\n",
        b"y" * (MB + 10) + b"\n",
        LongLine(3 * MB, False),
    ]
    f = io.BytesIO(b"a\npartial")
    assert list(read_lines(f, 10)) == [b"a\n", b"partial"], (
        "a last line still being written comes as it is"
    )


def test_view_reports_and_skips_a_line_over_the_bound_without_reading_it_whole(tmp_path):
    path = tmp_path / "groups.jsonl"
    good = json.dumps({"tokens": [[1]], "masks": [[1]], "scores": [1.0]}) + "\n"
    with path.open("w") as f:
        f.write(
            good + '{"tokens": [[1]], "masks": [[1]], "scores": [1.0], "messages": [[{"content": "'
        )
        for _ in range(300):
            f.write("a" * MB)
        f.write('"}]]}\n' + good)
    code = (
        "import sys; from pathlib import Path; from vftui.run_files.groupfile import GroupFile; events = []; "
        "g = GroupFile(Path(sys.argv[1])); g.read(events.append, ''); "
        "print(len(g), *[e.message for e in events if type(e).__name__ == 'LogRecord'], sep='|')"
    )
    result, rss = peak_rss([sys.executable, "-c", code, str(path)], tmp_path)
    assert result.returncode == 0, result.stderr
    long = path.stat().st_size - 2 * len(good)
    assert (
        result.stdout.strip()
        == f"2|groups.jsonl line 2 skipped: longer than 128 MB ({long:,} bytes)"
    )
    assert rss < 200, f"peak RSS {rss:.0f} MB viewing a file with a 300 MB line"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("vftui", "reason"),
    [
        ({"item": 10**30}, "its item 1000000000000000000000000000000 is not a dataset position"),
        ({"started_at": "x"}, "it holds 'x', not a number"),
        ({"metrics": [1]}, "its metrics or generation_params are not an object"),
        ({"metrics": {"f": [10**400]}}, "0000000000000000000, beyond ±1e+100"),
    ],
    ids=["item", "start", "metrics", "overflow"],
)
def test_view_skips_a_group_whose_figures_do_not_fit_and_names_why(tmp_path, vftui, reason):
    from vftui.run_files.groupfile import GroupFile

    good = {"tokens": [[1]], "masks": [[1]], "scores": [0.5]}
    path = tmp_path / "groups.jsonl"
    path.write_text(json.dumps({**good, "vftui": vftui}) + "\n" + json.dumps(good) + "\n")
    events: list = []
    rows = GroupFile(path)
    rows.read(events.append, str(TOKENIZER_DIR))
    assert len(rows) == 1 and rows.skipped == 1
    (said,) = [e.message for e in events if type(e).__name__ == "LogRecord"]
    assert said.startswith("groups.jsonl line 1 skipped: bad group (") and reason in said


# -- 2. damaged run files: one sentence, never a traceback ----------------------------------


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def two_runs(isolated, tmp_path) -> list[Path]:
    """Two finished runs, one in the default runs folder and one elsewhere (found through the index)."""
    outs = [tmp_path / "elsewhere" / "groups.jsonl", None]
    assert main(["run", "--no-ui", "--steps", "2", "--group-size", "2", "--out", str(outs[0])]) == 0
    assert main(["run", "--no-ui", "--steps", "2", "--group-size", "2"]) == 0
    from vftui import paths

    (default,) = paths.runs_dir().glob("*/groups.jsonl")
    return [outs[0], default]


def refused(args: list[str], capsys) -> str:
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    return err.strip().splitlines()[-1]


def deep(levels: int) -> str:
    return '{"a": ' * levels + "1" + "}" * levels


@pytest.mark.parametrize(
    ("checkpoint", "expected"),
    [
        (
            {"done_below": 10**15, "done_above": [], "iter": 0},
            "(done_below: Input should be less than or equal to",
        ),
        (
            {"done_below": 0, "done_above": [], "iter": 10**15},
            "(iter: Input should be less than or equal to",
        ),
        (
            {"done_below": 0, "done_above": [], "iter": 0, "groups": "many"},
            "(groups: Input should be a valid integer",
        ),
        ({"done_below": 0, "done_above": ["x"]}, "(done_above.0: Input should be a valid integer"),
        (None, f"(it nests deeper than {MAX_NESTING} levels)"),
    ],
    ids=["done-below", "iter", "groups", "done-above", "nested"],
)
def test_a_damaged_checkpoint_is_one_sentence_for_resume_and_a_damaged_row_for_runs(
    two_runs, capsys, checkpoint, expected
):
    out = two_runs[0]
    text = json.dumps(checkpoint) if checkpoint is not None else deep(5000)
    out.with_suffix(".checkpoint.json").write_text(text)
    said = refused(["run", "--no-ui", "--resume", str(out)], capsys)
    assert said.startswith(
        f"vftui: error: --resume: the checkpoint {out.with_suffix('.checkpoint.json')} is damaged"
    )
    assert expected in said and "remove it to resume from the groups in the file alone" in said

    assert main(["runs", "--no-ui"]) == 0
    listed = capsys.readouterr()
    rows = {line.split()[-1]: line.split()[1] for line in listed.out.splitlines()[1:]}
    assert rows == {str(out): "damaged", str(two_runs[1]): "finished"}, listed.out
    assert f"is damaged {expected}" in listed.err and "Traceback" not in listed.err


@pytest.mark.parametrize(
    ("run_json", "expected"),
    [
        ({"config": [1, 2], "model": "m"}, "config: Input should be a valid dictionary"),
        ({"config": {"steps": 10**30}}, "config.steps: Input should be less than or equal to"),
        ({"config": {"env": {"a": 1}}}, "config.env: Input should be a valid string"),
        ({"created": "yesterday", "config": {}}, "created: Input should be a valid number"),
        (None, f"it nests deeper than {MAX_NESTING} levels"),
    ],
    ids=["config-list", "steps", "env", "created", "nested"],
)
def test_a_damaged_run_file_is_one_sentence_for_resume_a_row_for_runs_and_a_warning_for_view(
    two_runs, capsys, run_json, expected
):
    out = two_runs[0]
    run_file = out.with_suffix(".run.json")
    run_file.write_text(
        json.dumps(run_json) if run_json is not None else '{"config": ' + deep(5000) + "}"
    )
    damaged = f"{run_file} is damaged ({expected}"
    said = refused(["run", "--no-ui", "--resume", str(out)], capsys)
    assert said.startswith(f"vftui: error: --resume {out}: {damaged}"), said

    assert main(["runs", "--no-ui", "--json"]) == 0
    listed = capsys.readouterr()
    listed_runs = map(json.loads, listed.out.splitlines())
    states = {r["path"]: (r["state"], r.get("problem", "")[: len(damaged)]) for r in listed_runs}
    assert states == {str(out): ("damaged", damaged), str(two_runs[1]): ("finished", "")}

    from vftui.run_files.groupfile import GroupFile

    events: list = []
    rows = GroupFile(out)
    rows.read(events.append, str(TOKENIZER_DIR))
    assert len(rows) == 2, "the groups are shown without the run's settings"
    (warning,) = [e.message for e in events if type(e).__name__ == "LogRecord"]
    assert warning.startswith(damaged) and warning.endswith(
        "): the groups are shown without the run's settings"
    )


def test_a_damaged_run_index_entry_is_skipped_with_a_note(two_runs, capsys):
    from vftui.run_files.index import index_dir

    entries = sorted(index_dir().glob("*.json"))
    entries[0].write_text(json.dumps({"out": ["not", "a", "path"]}))
    (index_dir() / "deep.json").write_text(deep(5000))
    (index_dir() / "relative.json").write_text(json.dumps({"out": "groups.jsonl"}))
    assert main(["runs", "--no-ui"]) == 0
    listed = capsys.readouterr()
    assert str(two_runs[1]) in listed.out and "Traceback" not in listed.err
    notes = listed.err.strip().splitlines()
    assert len(notes) == 3 and all(
        n.startswith("vftui: note: the run index entry ") for n in notes
    ), notes
    assert (
        f"{index_dir() / 'deep.json'} is damaged (it nests deeper than {MAX_NESTING} levels)"
        in listed.err
    )
    assert (
        f"{index_dir() / 'relative.json'} is damaged (out: it is not an absolute path)"
        in listed.err
    )


def test_a_resume_weighs_big_checkpoint_claims_without_listing_them(two_runs, capfd):
    """A checkpoint's ``iter`` and ``done_below`` cost nothing however far they are: nothing is listed; and the
    file, not the checkpoint, says what is done (issue 29.3), so the claims are repaired down."""
    out = two_runs[0]
    far = 10**11
    out.with_suffix(".checkpoint.json").write_text(
        json.dumps({"done_below": far, "done_above": [far + 2], "iter": far + 4, "groups": 2})
    )
    assert main(["run", "--no-ui", "--resume", str(out), "--steps", "5"]) == 0
    said = capfd.readouterr().err  # the run's stderr descriptor
    assert (
        "counts 99,999,999,999 items done that neither groups.jsonl nor its drop log holds" in said
    )
    assert "says items up to 100,000,000,004 were handed out, far past the 2" in said
    items = [json.loads(line)["vftui"]["item"] for line in out.read_text().splitlines()]
    assert sorted(items[2:]) == [2, 3, 4]


@pytest.mark.parametrize("where", ["flag", "variable", "config file"])
def test_settings_nested_too_deep_are_one_sentence(isolated, tmp_path, capsys, monkeypatch, where):
    args = ["run", "--no-ui", "--steps", "1"]
    if where == "flag":
        args += ["--env-args", deep(5000)]
        expected = f"invalid --env-args: it nests deeper than {MAX_NESTING} levels"
    elif where == "variable":
        monkeypatch.setenv("VFTUI_ENV_ARGS", deep(MAX_NESTING + 1))
        expected = (
            f"invalid --env-args (from VFTUI_ENV_ARGS): it nests deeper than {MAX_NESTING} levels"
        )
    else:
        config = tmp_path / "deep.toml"
        config.write_text("env_args = " + "[" * 5000 + "]" * 5000 + "\n")
        args += ["--config", str(config)]
        expected = f"the config file {config} nests deeper than {MAX_NESTING} levels"
    assert refused(args, capsys) == f"vftui: error: {expected}"


def test_damaged_eval_metadata_is_one_sentence(isolated, tmp_path, capsys):
    folder = tmp_path / "vf"
    folder.mkdir()
    row = {
        "example_id": 0,
        "reward": 1.0,
        "prompt": [{"role": "user", "content": "hi"}],
        "completion": "ok",
    }
    (folder / "results.jsonl").write_text(json.dumps(row) + "\n")
    for metadata, expected in [
        ({"env_id": ["x"]}, "env_id: Input should be a valid string"),
        (None, f"it nests deeper than {MAX_NESTING} levels"),
    ]:
        (folder / "metadata.json").write_text(
            json.dumps(metadata) if metadata is not None else deep(5000)
        )
        for command in (["compare", "--no-ui", str(folder), str(folder)], ["view", str(folder)]):
            said = refused(command, capsys)
            assert said == f"vftui: error: {folder / 'metadata.json'} is damaged ({expected})", (
                command
            )


@pytest.mark.unit
def test_nesting_is_bounded_without_recursion():
    assert check_nesting(json.loads(deep(MAX_NESTING))) == json.loads(deep(MAX_NESTING))
    for text in (deep(MAX_NESTING + 1), "[" * 100_000 + "]" * 100_000):
        with pytest.raises(ValueError, match=f"it nests deeper than {MAX_NESTING} levels"):
            load_json(text)


@pytest.mark.unit
def test_the_ledger_costs_nothing_for_far_items():
    ledger = ItemLedger(10**12 - 5, [10**12 - 3], next_item=10**12)
    assert ledger.lost == 4
    assert [ledger.take() for _ in range(5)] == [
        10**12 - 5,
        10**12 - 4,
        10**12 - 2,
        10**12 - 1,
        10**12,
    ]


# -- vftui runs FOLDER: what listing a run reads and holds ----------------------------------------------------


def listed_as_read_whole(kind: str, path: Path) -> tuple:
    """A foreign run's figures as every reader gives them (``results.load``: the whole file, messages and all):
    what the listing must show, however it reads it."""
    import math

    from vftui.run_files import results
    from vftui.run_files.folder_runs import PRIME_RL, V1

    source = results.load(
        path if kind == PRIME_RL else path / ("traces.jsonl" if kind == V1 else "results.jsonl")
    )
    means = [math.fsum(item.rewards) / len(item.rewards) for item in source.items.values()]
    return len(source.items), math.fsum(means) / len(means) if means else None, source.errors


def test_a_folders_runs_are_listed_with_the_figures_read_whole_gives(tmp_path):
    """The listing reads a run's rollouts a line at a time and keeps a reward each: its figures are those
    of the run read whole, whatever the kind (rows that fail, are no number, or are not results included)."""
    import shutil

    from tests.test_prime_rl_files import write_run
    from vftui.run_files.folder_runs import PRIME_RL, V1, VF_EVAL, describe_found

    data = Path(__file__).parent / "data"
    v1 = tmp_path / "v1"
    shutil.copytree(next((data / "v1_eval").iterdir()), v1)
    vf = tmp_path / "vf"
    shutil.copytree(data / "compare" / "a", vf)
    with (vf / "results.jsonl").open(
        "a"
    ) as f:  # a failed example, a row of no example, a foreign line
        f.write(json.dumps({"example_id": 0, "reward": None}) + "\n")
        f.write(json.dumps({"reward": 1.0}) + "\n" + "not json\n")
    write_run(tmp_path / "rl", tmp_path / "scratch")
    groups = tmp_path / "groups"  # results.jsonl holding vftui's groups
    groups.mkdir()
    lines = [{"scores": [1.0, 0.0], "vftui": {"example_id": n % 2, "item": n}} for n in range(3)]
    lines.append({"scores": [float("nan")], "vftui": {"example_id": 5}})
    (groups / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    cases = ((V1, v1), (VF_EVAL, vf), (PRIME_RL, tmp_path / "rl"), (VF_EVAL, groups))
    for kind, path in cases:
        row = describe_found(kind, path)
        assert (row.groups_done, row.mean_reward, row.errors) == listed_as_read_whole(kind, path), (
            kind
        )
        assert row.groups_done and row.mean_reward is not None, kind


def test_listing_a_run_holds_its_rewards_not_its_rollouts(tmp_path):
    """A run of up to 8 MB was read whole, every message kept (8 MB of ``{}`` prompts held some 200 MB), and
    32 runs at once: now a line at a time, a reward kept each, and one run's lines parsed at a time."""
    from vftui.run_files.folder_runs import READ_WHOLE_BYTES, VF_EVAL, describe_found

    folder = tmp_path / "vf"
    folder.mkdir()
    (folder / "metadata.json").write_text(json.dumps({"env_id": "e", "model": "m"}))
    row = {"reward": 0.5, "prompt": [{}] * 1000, "completion": "ok"}
    line = lambda n: json.dumps({"example_id": n % 100, **row}) + "\n"  # noqa: E731
    count = (READ_WHOLE_BYTES - 1024) // len(line(99))
    (folder / "results.jsonl").write_text("".join(line(n) for n in range(count)))
    with traced_memory() as memory:
        listed = describe_found(VF_EVAL, folder)
    peak = memory.peak
    assert (listed.groups_done, listed.mean_reward) == (100, 0.5)
    # less than the file itself (its metadata.json is read into a buffer of its bound, 4 MB), not 20 times it
    assert peak < READ_WHOLE_BYTES, f"{peak:,} bytes held to list a run of {count:,} rows"


def test_compare_holds_a_groups_file_of_short_messages_in_about_its_size(tmp_path):
    """Issue 42, item 20: compare and report parsed every row into memory and kept each rollout's messages
    as dicts, so 100 MB of tool turns took 636 MB at its peak; read a line at a time and kept as compact
    text, what a file holds stays within twice its size, and its peak too."""
    from vftui.run_files.results import load

    turns = [{"role": "user", "content": "a"}]
    for _ in range(20):
        call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        turns += [
            {"role": "assistant", "content": "b", "tool_calls": [call]},
            {"role": "tool", "content": "d", "tool_call_id": "c"},
        ]
    path = tmp_path / "tiny.jsonl"
    with path.open("w") as f:
        for n in range(300):  # about 9 MB
            group = {"scores": [0.5] * 8, "tokens": [[1]] * 8, "masks": [[1]] * 8}
            group |= {"messages": [turns] * 8, "vftui": {"item": n, "example_id": n}}
            f.write(json.dumps(group) + "\n")
    size = path.stat().st_size
    with traced_memory() as memory:
        source = load(path)
    held, peak = memory.held, memory.peak
    assert len(source.items) == 300 and source.items["7"].rollouts[3] == turns
    assert held < 2 * size and peak < 2 * size, (held / size, peak / size)
