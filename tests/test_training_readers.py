"""``vftui.training``'s readers on real files in prime-rl's formats: ``metrics.jsonl`` as the trainer and
the orchestrator append to it (torn, replaced, cut, over long, at a FIFO, long enough to skip its middle),
the bounded history, the token exports (every damage one sentence, the worst tokens exactly the top K),
loguru's coloured logs and a re-pointed ``logs/latest``, the run folder and its configs, Prometheus pages,
and the health of simulated runs with each trouble planted. Fed random and mutated bytes, every reader
returns rows or problems, never a traceback."""

from __future__ import annotations

import json
import math
import os
import random
import re
import statistics
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.test_readers_fuzz import mutated
from vftui.bounds import MAX_SCORE
from vftui.errors import UserError
from vftui.figures.signals import TRAINING_SIGNALS
from vftui.sim.prime_run import TROUBLES, SimRun, write
from vftui.training import token_exports
from vftui.training.engines import Engine, by_engine, parse_metrics
from vftui.training.follow import Follower
from vftui.training.health import DEGRADED, DOWN, HEALTHY, judge
from vftui.training.history import EARLY_STEPS, MAX_NAMES, History
from vftui.training.layout import find, read_settings
from vftui.training.logs import LogLine, LogsReader
from vftui.training.logs import parse as parse_log
from vftui.training.metrics_file import (
    MetricsReader,
    Read,
    Row,
    append_row,
    parse,
    series_name,
    side,
)
from vftui.training.tail import FileTail

pytestmark = pytest.mark.unit
FUZZ = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
LEVELS = ("DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR", "CRITICAL")


def _real_lines() -> tuple[bytes, bytes, bytes]:
    """A metrics row, a token export record and a log line, each written by the writers that write
    them as prime-rl does: the seeds the mutations start from."""
    with tempfile.TemporaryDirectory() as folder:
        metrics = Path(folder, "metrics.jsonl")
        append_row(
            metrics,
            12,
            {"time/step": 8.1, "time/wait_for_batch": 0.4, "optim/grad_norm": 0.41, "x": 1},
            1764900000.25,
        )
        step_dir = Path(folder, "step_12")
        token_exports.write_sequence(
            step_dir,
            0,
            0,
            "reverse-text",
            [101, 7, 8, 9],
            [False, True, True, True],
            [0.5] * 4,
            [-0.2, -1.5, -0.1, -3.0],
            [-0.25, -0.2, -0.12, -2.9],
            [0.9, 1.1, 0.7, 1.3],
        )
        return (
            metrics.read_bytes(),
            (step_dir / "rank_0.jsonl").read_bytes(),
            b"\x1b[2m12:34:56\x1b[0m \x1b[31m  ERROR\x1b[0m NaN loss at micro step 3\n",
        )


METRICS_LINE, EXPORT_LINE, LOG_LINE = _real_lines()


def lines_of(data: bytes) -> st.SearchStrategy[bytes]:
    """Random bytes, or a few copies of a real line, each perhaps mutated."""
    return st.one_of(
        st.binary(max_size=300),
        st.lists(st.one_of(st.just(data), mutated(data)), min_size=1, max_size=4).map(b"".join),
    )


# --- FileTail and MetricsReader: new whole lines, across reads ----------------------------------------


def test_a_tail_returns_each_appended_line_once_across_reads(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b"one\n")
    tail = FileTail(path, 100)
    assert tail.read().lines == [b"one"]
    assert tail.read().lines == []
    with path.open("ab") as f:
        f.write(b"two\nthree\n")
    found = tail.read()
    assert found.lines == [b"two", b"three"] and not found.restarted and not found.error


def test_a_torn_last_line_is_held_back_until_its_newline_arrives(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b'{"step": 1}\n{"step": 2, "a"')
    tail = FileTail(path, 100)
    assert tail.read().lines == [b'{"step": 1}']
    with path.open("ab") as f:
        f.write(b": 0.5}")
    assert tail.read().lines == [], "still no newline: nothing to parse"
    with path.open("ab") as f:
        f.write(b"\n")
    assert tail.read().lines == [b'{"step": 2, "a": 0.5}']


def test_metrics_rows_appended_between_reads_come_in_order_and_a_torn_row_waits(tmp_path):
    path = tmp_path / "metrics.jsonl"
    append_row(path, 1, {"optim/lr": 1e-6}, 10.0)
    reader = MetricsReader(path, 100)
    assert [r.step for r in reader.read().rows] == [1]
    append_row(path, 2, {"optim/lr": 2e-6}, 20.0)
    whole = json.dumps({"step": 3, "time": 30.0, "optim/lr": 3e-6}).encode()
    with path.open("ab") as f:
        f.write(whole[:10])
    found = reader.read()
    assert [(r.step, r.time, r.values) for r in found.rows] == [(2, 20.0, {"optim/lr": 2e-6})]
    assert found.bad_lines == 0, "a row being written is not a bad line"
    with path.open("ab") as f:
        f.write(whole[10:] + b"\n")
    found = reader.read()
    assert [r.step for r in found.rows] == [3] and found.bad_lines == 0


def test_a_file_replaced_by_another_is_read_again_from_its_start(tmp_path):
    path = tmp_path / "metrics.jsonl"
    for step in range(1, 6):
        append_row(path, step, {"optim/lr": 1e-6}, float(step))
    reader = MetricsReader(path, 100)
    assert len(reader.read().rows) == 5
    new = tmp_path / "new.jsonl"
    append_row(new, 1, {"optim/lr": 5e-6}, 100.0)
    append_row(new, 2, {"optim/lr": 5e-6}, 101.0)
    append_row(new, 3, {"optim/lr": 5e-6}, 102.0)
    os.replace(new, path)  # another inode, longer than nothing but shorter than what was read
    found = reader.read()
    assert found.restarted
    assert [(r.step, r.values["optim/lr"]) for r in found.rows] == [(1, 5e-6), (2, 5e-6), (3, 5e-6)]
    assert not reader.read().restarted, "said once"


def test_a_file_cut_shorter_than_what_was_read_is_read_again_from_its_start(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b"a\nb\nc\nd\n")
    tail = FileTail(path, 100)
    assert tail.read().lines == [b"a", b"b", b"c", b"d"]
    with path.open("r+b") as f:  # the same inode, cut, then a line written
        f.truncate(0)
        f.write(b"x\n")
    found = tail.read()
    assert found.restarted and found.lines == [b"x"]


def test_a_torn_line_of_a_replaced_file_is_not_glued_to_the_new_files_first_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b"whole\ntorn-hal")
    tail = FileTail(path, 100)
    assert tail.read().lines == [b"whole"]
    new = tmp_path / "new"
    new.write_bytes(b"fresh\n")
    os.replace(new, path)
    found = tail.read()
    assert found.restarted and found.lines == [b"fresh"]


def test_a_line_over_the_bound_is_skipped_and_counted_and_the_lines_around_it_kept(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b"short\n" + b"x" * 50 + b"\nok\n" + b"y" * 10 + b"\n")
    found = FileTail(path, 10).read()
    assert found.lines == [b"short", b"ok", b"y" * 10], "a line of exactly the bound is kept"
    assert found.long_lines == 1


def test_a_line_over_the_bound_arriving_in_pieces_is_never_held_and_counted_once(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b"before\n" + b"y" * 8)
    tail = FileTail(path, 10)
    assert tail.read().lines == [b"before"]
    counted = 0
    for _ in range(5):  # the long line grows by 8 bytes a read, never newline-ended
        with path.open("ab") as f:
            f.write(b"y" * 8)
        found = tail.read()
        assert found.lines == [] and len(tail._pending) <= 10, "held no more than the bound"
        counted += found.long_lines
    with path.open("ab") as f:
        f.write(b"yy\nafter\n")
    found = tail.read()
    assert found.lines == [b"after"]
    assert counted + found.long_lines == 1


@FUZZ
@given(
    data=st.lists(
        st.one_of(st.binary(max_size=30), st.sampled_from([b"\n", b"abc\n", b"x" * 25])),
        max_size=12,
    ),
    cuts=st.lists(st.integers(0, 400), max_size=6),
)
def test_the_lines_are_the_same_however_the_appends_are_split_across_reads(tmp_path, data, cuts):
    stream = b"".join(data)
    at = sorted({min(c, len(stream)) for c in cuts} | {len(stream)})
    path = tmp_path / "split"
    path.write_bytes(b"")
    split, whole = FileTail(path, 16), FileTail(path, 16)
    got, long_lines, start = [], 0, 0
    for end in at:
        with path.open("ab") as f:
            f.write(stream[start:end])
        start = end
        found = split.read()
        assert not found.restarted
        got += found.lines
        long_lines += found.long_lines
    once = whole.read()
    assert got == once.lines and long_lines == once.long_lines
    expected = [line for line in stream.split(b"\n")[:-1] if len(line) <= 16]
    assert got == expected


def test_a_read_takes_at_most_its_bound_and_says_more_is_there(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b"".join(b"line %d\n" % n for n in range(10)))
    tail = FileTail(path, 100)
    first = tail.read(most=20)
    assert first.more and first.lines == [b"line 0", b"line 1"]
    rest = tail.read()
    assert not rest.more and rest.lines == [b"line %d" % n for n in range(2, 10)]


def test_a_fifo_at_the_metrics_path_is_refused_not_blocked_on(tmp_path):
    path = tmp_path / "metrics.jsonl"
    os.mkfifo(path)
    found = FileTail(path, 100).read()
    assert found.error and found.lines == []
    read = MetricsReader(path, 100).read()
    assert "FIFO" in read.error and read.rows == []


def test_a_metrics_file_not_there_yet_is_no_error_and_is_read_once_it_appears(tmp_path):
    path = tmp_path / "metrics.jsonl"
    reader = MetricsReader(path, 100)
    found = reader.read()
    assert found.rows == [] and found.error == ""
    append_row(path, 1, {"optim/lr": 1e-6}, 1.0)
    assert [r.step for r in reader.read().rows] == [1]


def test_the_first_read_of_a_long_file_takes_its_head_and_its_last_steps_and_says_what_it_skipped(
    tmp_path,
):
    path = tmp_path / "metrics.jsonl"
    pad = {f"pad/{i}": 0.5 for i in range(30)}
    total = 12_000
    with path.open("w") as f:
        for step in range(total):
            f.write(json.dumps({"step": step, "time": 1.0 + step, "optim/lr": 1e-6, **pad}) + "\n")
    assert path.stat().st_size > 5 * 1024**2  # far over what a first read takes of its head
    reader = MetricsReader(path, tail_steps=100)
    found = reader.read()
    steps = [r.step for r in found.rows]
    assert found.bad_lines == 0 and found.long_lines == 0 and not found.more
    assert len(steps) < total / 2, "its middle was not read"
    head_end = steps.index(max(s for s in steps if s < total / 2))
    assert steps[: head_end + 1] == list(range(head_end + 1)), "the head from step 0, every row"
    tail = steps[head_end + 1 :]
    assert tail == list(range(tail[0], total)) and len(tail) >= 100, "the last steps, every row"
    assert reader.skipped == (head_end + 1, tail[0] - 1)
    append_row(path, total, {"optim/lr": 1e-6}, 2.0 + total)
    assert [r.step for r in reader.read().rows] == [total], "then it follows the end"


def test_a_jump_to_a_lines_start_reads_that_whole_line(tmp_path):
    path = tmp_path / "log"
    path.write_bytes(b"aaa\nbbb\nccc\n")
    tail = FileTail(path, 100)
    tail.start_at(4)  # "the first whole line at or after offset": bbb starts at 4
    assert tail.read().lines == [b"bbb", b"ccc"]


def test_a_jump_into_a_lines_middle_reads_from_the_next_whole_line(tmp_path):
    path = tmp_path / "log"
    path.write_bytes(b"aaa\nbbb\nccc\n")
    tail = FileTail(path, 100)
    tail.start_at(5)
    assert tail.read().lines == [b"ccc"]


# --- metrics_file.parse: the rows prime-rl's FileMonitor writes --------------------------------------


def test_trainer_and_orchestrator_rows_tell_their_step_times_apart():
    found = Read()
    trainer = parse(
        b'{"step": 3, "time": 5.0, "time/step": 8.0, "time/wait_for_batch": 0.4}', found
    )
    orchestrator = parse(b'{"step": 5, "time": 5.5, "time/step": 9.0, "progress/tasks": 32}', found)
    by_prefix = parse(b'{"step": 5, "time/save_ckpt": 1.0, "train/agg/all/x/mean": 0.5}', found)
    neither = parse(b'{"step": 4, "time/step": 7.0, "loss/mean": 0.01}', found)
    assert trainer.values == {"time/step (trainer)": 8.0, "time/wait_for_batch": 0.4}
    assert trainer.step == 3 and trainer.time == 5.0
    assert orchestrator.values == {"time/step (orchestrator)": 9.0, "progress/tasks": 32.0}
    assert by_prefix.values == {"time/save_ckpt (orchestrator)": 1.0, "train/agg/all/x/mean": 0.5}
    assert neither.values == {"time/step": 7.0, "loss/mean": 0.01} and neither.time is None
    assert found.bad_lines == 0 and found.skipped_values == 0


def test_side_and_series_name_rename_only_the_names_both_sides_log():
    assert side({"optim/lr": 1.0, "progress/tasks": 1.0}) == "trainer"
    assert side({"off_policy/dropped": 0.0}) == "orchestrator"
    assert side({"loss/mean": 0.1}) == ""
    assert series_name("time/step", "trainer") == "time/step (trainer)"
    assert series_name("time/save_ckpt", "orchestrator") == "time/save_ckpt (orchestrator)"
    assert series_name("time/step", "") == "time/step"
    assert series_name("optim/lr", "trainer") == "optim/lr"


def test_unknown_metric_names_are_kept_under_their_own_names_even_with_escapes():
    found = Read()
    line = json.dumps({"step": 1, "\x1b[31mred": 1.5, "my/env/custom@3": 2, "": 0.25}).encode()
    row = parse(line, found)
    assert row.values == {"\x1b[31mred": 1.5, "my/env/custom@3": 2.0, "": 0.25}
    assert all(type(v) is float for v in row.values.values())


def test_values_that_are_not_finite_numbers_are_skipped_and_counted_and_the_row_kept():
    found = Read()
    line = (
        b'{"step": 2, "time": 1.5, "ok": 0.5, "nan": NaN, "inf": Infinity, "ninf": -Infinity, '
        b'"null": null, "text": "0.5", "flag": true, "big": 1e400, "list": [1], "huge": 1e200}'
    )
    row = parse(line, found)
    assert row.values == {"ok": 0.5}
    assert found.skipped_values == 9 and found.bad_lines == 0


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (b'{"step": 1.0, "a": 1}', "its step is 1.0"),
        (b'{"step": "1", "a": 1}', 'its step is "1"'),
        (b'{"step": true, "a": 1}', "its step is true"),
        (b'{"step": -1, "a": 1}', "its step is -1"),
        (b'{"step": null, "a": 1}', "its step is null"),
        (b'{"a": 1}', "its step is null"),
        (b'{"step": 1000000000000}', "its step is 1000000000000"),
        (b'{"step": [1]}', "its step is not a number"),
        (b"[1, 2]", "not a JSON object"),
        (b"{not json", "not JSON"),
        (b"\xff\xfe\xfd", "not JSON"),
    ],
)
def test_a_line_whose_step_is_not_a_step_number_is_a_bad_line_said_once(line, said):
    found = Read()
    assert parse(line, found) is None
    assert found.bad_lines == 1 and found.first_bad.startswith(said)
    parse(b"{}", found)
    assert found.bad_lines == 2 and found.first_bad.startswith(said), "the first is said"


def test_a_bad_line_among_rows_is_counted_and_the_rows_around_it_read(tmp_path):
    path = tmp_path / "metrics.jsonl"
    append_row(path, 1, {"a": 1.0}, 1.0)
    with path.open("a") as f:
        f.write('{"step": "two"}\n\n   \n')
    append_row(path, 3, {"a": 3.0}, 3.0)
    found = MetricsReader(path, 10).read()
    assert [r.step for r in found.rows] == [1, 3]
    assert found.bad_lines == 1, "blank lines are not bad lines"


def test_append_row_drops_non_finite_values_as_prime_rls_file_monitor_does(tmp_path):
    path = tmp_path / "metrics.jsonl"
    append_row(
        path,
        4,
        {"a": 1.5, "nan": math.nan, "inf": math.inf, "ninf": -math.inf, "n": 2, "s": "x"},
        7.0,
    )
    text = path.read_text()
    assert text.endswith("\n") and text.count("\n") == 1
    assert json.loads(text) == {"step": 4, "time": 7.0, "a": 1.5, "n": 2}
    assert "NaN" not in text and "Infinity" not in text
    found = MetricsReader(path, 10).read()
    assert [(r.step, r.time, r.values) for r in found.rows] == [(4, 7.0, {"a": 1.5, "n": 2.0})]


# --- History: bounded, with early levels and resumes --------------------------------------------------


def test_a_history_holds_at_most_its_window_per_name_however_long_the_run():
    history = History(window=50)
    for step in range(500):
        history.add(Row(step, float(step), {"a": float(step), "b": -float(step)}), "trainer")
    for name in ("a", "b"):
        points = history.points(name)
        assert (
            len(points) == 50 and points[0][0] == 450 and points[-1] == (499, history.value(name))
        )
        assert len(history.series[name].early) == EARLY_STEPS
    assert all(len(times) <= 64 for times in history.step_times.values())
    assert history.rows == 500 and history.step == 499 and history.resumed_at == []
    assert history.values("a", last=3) == [497.0, 498.0, 499.0]


def test_the_early_level_is_the_median_of_the_first_ten_values_once_there_are_ten():
    history = History()
    values = [10.0, 1.0, 9.0, 2.0, 8.0, 3.0, 7.0, 4.0, 6.0, 50.0]
    for step, value in enumerate(values[:-1]):
        history.add(Row(step, None, {"entropy/all/mean": value}))
    assert history.early("entropy/all/mean") is None, "nine values make no early level"
    history.add(Row(9, None, {"entropy/all/mean": values[-1]}))
    for step in range(10, 40):
        history.add(Row(step, None, {"entropy/all/mean": 1000.0}))
    assert history.early("entropy/all/mean") == statistics.median(values) == 6.5
    assert history.early("missing") is None


def test_a_step_going_back_drops_the_later_points_and_records_the_resume_once():
    history = History()
    for step in range(1, 21):
        history.add(Row(step, float(step), {"a": 1.0, "b": 2.0}), "trainer")
    history.add(Row(15, 100.0, {"a": 9.0, "b": 8.0}), "trainer")
    assert history.points("a")[-2:] == [(14, 1.0), (15, 9.0)]
    assert [s for s, _ in history.points("b")] == list(range(1, 16))
    assert history.resumed_at == [15], "two names at once: one resume"
    assert list(history.step_times["trainer"])[-1] == (15, 100.0)
    history.add(Row(15, 101.0, {"a": 7.0}), "trainer")  # the same step again is not a resume
    assert history.points("a")[-1] == (15, 7.0) and history.resumed_at == [15]
    history.add(Row(16, 102.0, {"a": 1.0}), "trainer")
    history.add(Row(3, 103.0, {"a": 1.0}), "trainer")
    assert history.resumed_at == [15, 3] and history.step == 3
    assert history.points("b")[-1][0] == 2, "a resume drops every series' later points"


def test_a_resume_seen_first_in_the_orchestrators_rows_takes_the_trainer_back_too():
    """A finished run resumed from step 3: its first new row is the orchestrator's. The trainer's
    figures from step 3 on are gone, not shown as the run's step (it said "40 / 40 (finished)")."""
    history = History()
    for step in range(1, 41):
        history.add(Row(step, float(step), {"time/step (trainer)": 8.0}), "trainer")
        history.add(Row(step, float(step), {"reward": 0.5}), "orchestrator")
    history.add(Row(3, 50.0, {"reward": 0.2}), "orchestrator")
    assert history.trainer_step() == 2 and history.value("reward") == 0.2
    assert history.resumed_at == [3]


def test_names_over_the_cap_are_counted_not_kept_and_the_kept_ones_still_follow():
    history = History()
    history.add(Row(1, None, {f"n/{i}": 1.0 for i in range(MAX_NAMES + 3)}))
    assert len(history.series) == MAX_NAMES and history.names_over == 3
    history.add(Row(2, None, {"n/0": 2.0, "new": 1.0}))
    assert history.latest("n/0") == (2, 2.0) and "new" not in history.series
    assert history.names_over == 4


def test_usual_step_time_is_the_median_gap_of_the_side_that_logged_most_steps():
    history = History()
    assert history.usual_step_s() is None
    for step, when in enumerate([0.0, 10.0, 20.0, 31.0, 40.0, 50.0]):
        history.add(Row(step, when, {"optim/lr": 1.0}), "trainer")
    history.add(Row(0, 0.0, {"progress/tasks": 1.0}), "orchestrator")
    assert history.usual_step_s() == 10.0
    assert history.last_time == 50.0


# --- token exports ------------------------------------------------------------------------------------


def write_step(step_dir: Path, seed: int, ranks: int = 2, sequences: int = 3, n: int = 40) -> None:
    """Sequences with random logprobs, entropies and per-token advantages: no two keys tie."""
    rng = random.Random(seed)
    for rank in range(ranks):
        for index in range(sequences):
            inference = [-abs(rng.gauss(1.0, 0.8)) for _ in range(n)]
            trainer = [min(0.0, lp + rng.gauss(0, 0.3)) for lp in inference]
            token_exports.write_sequence(
                step_dir,
                rank,
                index,
                f"env-{rank}",
                [rng.randrange(50_000) for _ in range(n)],
                [i >= n // 4 for i in range(n)],
                [rng.uniform(-1, 1) for _ in range(n)],
                inference,
                trainer,
                [rng.uniform(0, 3) for _ in range(n)],
            )


def missing(value: object) -> bool:
    """A column's "no value here": null in the file, read as None or as NaN."""
    return value is None or (not isinstance(value, bool) and math.isnan(float(value)))


def flags(column) -> list[bool | None]:
    """A flag column as the file meant it, however it is held (bools, or 1.0 and 0.0)."""
    return [None if missing(v) else bool(v) for v in column]


def test_written_sequences_read_back_with_prime_rls_derived_columns(tmp_path):
    step_dir = tmp_path / "token_exports" / "step_7"
    token_exports.write_sequence(
        step_dir,
        1,
        0,
        "env",
        [5, 6, 7],
        [False, True, True],
        [1.0, 1.0, -1.0],
        [-1.0, -2.0, -0.1],
        [-1.1, -0.1, -2.5],
        [0.5, 0.6, 0.7],
    )
    assert token_exports.steps(tmp_path / "token_exports") == [
        token_exports.ExportStep(7, step_dir, False)
    ]
    token_exports.mark_stable(step_dir)
    (export,) = token_exports.steps(tmp_path / "token_exports")
    assert export.stable and export.step == 7
    problems: list[str] = []
    (seq,) = token_exports.sequences(step_dir, problems)
    assert problems == []
    assert (seq.step, seq.rank, seq.index, seq.env, seq.tokens) == (7, 1, 0, "env", [5, 6, 7])
    for i, (t, inf) in enumerate(zip([-1.1, -0.1, -2.5], [-1.0, -2.0, -0.1], strict=True)):
        log_ratio = t - inf
        assert seq.columns["log_importance_ratio"][i] == pytest.approx(log_ratio)
        assert seq.columns["importance_ratio"][i] == pytest.approx(math.exp(log_ratio))
        assert seq.columns["mismatch_kl"][i] == pytest.approx(math.exp(log_ratio) - log_ratio - 1)
        assert seq.columns["prob_delta"][i] == pytest.approx(math.exp(t) - math.exp(inf))
    # token 1: advantage > 0 and prob_delta 0.77 > 0.2; token 2: advantage < 0 and -0.82 < -0.2
    assert flags(seq.columns["is_masked_high"]) == [False, True, False]
    assert flags(seq.columns["is_masked_low"]) == [False, False, True]
    assert flags(seq.columns["is_masked"]) == [False, True, True]
    assert flags(seq.columns["loss_mask"]) == [False, True, True]
    assert all(missing(v) for v in seq.columns["rl_weights"])
    again = token_exports.find_sequence(export, 1, 0, problems)
    assert (again.rank, again.index, again.tokens) == (1, 0, [5, 6, 7])
    assert token_exports.find_sequence(export, 0, 0, problems) is None


def _expected_worst(step_dir: Path, column: str, absolute: bool, k: int | None) -> list[tuple]:
    """The top ``k`` trained tokens by ``column``, from the files' own JSON: (key, rank, sequence,
    position, token id), ties in file order."""
    found = []
    for path in sorted(step_dir.glob("rank_*.jsonl")):
        rank = int(path.stem.removeprefix("rank_"))
        for line in path.read_text().splitlines():
            record = json.loads(line)
            for i, trained in enumerate(record["loss_mask"]):
                value = record[column][i]
                if trained is not True or value is None:
                    continue
                key = abs(float(value)) if absolute else float(value)
                found.append((key, rank, record["export_sequence_idx"], i, record["token_ids"][i]))
    return sorted(found, key=lambda e: (-e[0], e[1], e[2], e[3]))[:k]


@pytest.mark.parametrize(
    ("pick", "column", "absolute"),
    [
        ("mismatch_kl", "mismatch_kl", False),
        ("log_ratio", "log_importance_ratio", True),
        ("prob_delta", "prob_delta", True),
        ("entropy", "entropy", False),
        ("advantage", "advantages", True),
        ("masked", "is_masked", False),
    ],
)
def test_a_steps_worst_tokens_are_exactly_the_top_k_trained_tokens_by_the_picked_column(
    tmp_path, pick, column, absolute
):
    step_dir = tmp_path / "step_2"
    write_step(step_dir, seed=3)
    token_exports.mark_stable(step_dir)
    figures = token_exports.read_step(token_exports.ExportStep(2, step_dir, True), pick, worst=15)
    every = _expected_worst(step_dir, column, absolute, None)
    expected = every[:15]
    assert [w.key for w in figures.worst] == [e[0] for e in expected]
    last = expected[-1][0]  # the tokens above the last key are the ones expected, in order
    assert [
        (w.rank, w.sequence, w.position, w.token_id) for w in figures.worst if w.key > last
    ] == [e[1:] for e in expected if e[0] > last]
    at_last = {e[1:] for e in every if e[0] == last}  # one token, but for the 0/1 of "masked"
    assert {
        (w.rank, w.sequence, w.position, w.token_id) for w in figures.worst if w.key == last
    } <= (at_last)
    records = {
        (int(path.stem.removeprefix("rank_")), json.loads(line)["export_sequence_idx"]): json.loads(
            line
        )
        for path in step_dir.glob("rank_*.jsonl")
        for line in path.read_text().splitlines()
    }
    for w in figures.worst:
        record = records[(w.rank, w.sequence)]
        tokens = record["token_ids"]
        assert w.before == tuple(tokens[max(0, w.position - 6) : w.position])
        assert w.after == tuple(tokens[w.position + 1 : w.position + 7])
        assert w.values["loss_mask"] is True and w.step == 2
        for name in ("mismatch_kl", "prob_delta", "advantages", "is_masked", "rl_weights"):
            assert w.values[name] == record[name][w.position], "its values as the file has them"
    assert figures.problems == [] and figures.stable and figures.sequences == 6


def test_worst_tokens_tied_at_the_cut_are_the_first_in_file_order(tmp_path):
    step_dir = tmp_path / "step_1"
    step_dir.mkdir()
    record = {"schema_version": 1, "step": 1, "rank": 0, "env_name": "e"}
    lines = [
        {**record, "export_sequence_idx": 0, "token_ids": [1, 2], "loss_mask": [True, True]}
        | {"is_masked": [False, False]},
        {**record, "export_sequence_idx": 1, "token_ids": [3], "loss_mask": [True]}
        | {"is_masked": [True]},
    ]
    (step_dir / "rank_0.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    figures = token_exports.read_step(token_exports.ExportStep(1, step_dir, True), "masked", 2)
    assert [(w.sequence, w.position) for w in figures.worst] == [(1, 0), (0, 0)]


def test_a_steps_tails_are_the_trained_tokens_own_figures(tmp_path):
    step_dir = tmp_path / "step_2"
    write_step(step_dir, seed=4)
    records = [
        json.loads(line)
        for path in sorted(step_dir.glob("rank_*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    figures = token_exports.read_step(token_exports.ExportStep(2, step_dir, False))
    trained = [(r, i) for r in records for i, m in enumerate(r["loss_mask"]) if m is True]
    kl = [r["mismatch_kl"][i] for r, i in trained]
    assert figures.tokens == sum(len(r["token_ids"]) for r in records)
    assert figures.trained == len(trained) and figures.sequences == len(records)
    assert figures.masked == sum(r["is_masked"][i] is True for r, i in trained)
    assert figures.masked_high + figures.masked_low == figures.masked
    assert figures.mismatch_kl["mean"] == pytest.approx(statistics.fmean(kl))
    assert figures.mismatch_kl["max"] == max(kl)
    assert figures.abs_log_ratio["max"] == max(
        abs(r["log_importance_ratio"][i]) for r, i in trained
    )
    assert figures.entropy["mean"] == pytest.approx(
        statistics.fmean(r["entropy"][i] for r, i in trained)
    )
    assert figures.envs == {"env-0": 3, "env-1": 3}
    assert not figures.sampled and not figures.stable


def test_each_damaged_record_is_one_sentence_and_the_rest_of_the_step_still_reads(tmp_path):
    step_dir = tmp_path / "step_5"
    write_step(step_dir, seed=5, ranks=1, sequences=2, n=10)
    good = (step_dir / "rank_0.jsonl").read_bytes().splitlines(keepends=True)
    record = json.loads(good[0])
    misaligned = {**record, "entropy": record["entropy"][:-1]}
    newer = {**record, "schema_version": 2}
    not_list = {**record, "entropy": 0.5}
    bad_tokens = {**record, "token_ids": [1, -2, *record["token_ids"][2:]]}
    damaged = [
        good[0],
        (json.dumps(misaligned) + "\n").encode(),
        (json.dumps(newer) + "\n").encode(),
        (json.dumps(not_list) + "\n").encode(),
        (json.dumps(bad_tokens) + "\n").encode(),
        b"{not json\n",
        b"\n",
        good[1],
        good[0][:40],  # being written: no newline yet
    ]
    (step_dir / "rank_0.jsonl").write_bytes(b"".join(damaged))
    figures = token_exports.read_step(token_exports.ExportStep(5, step_dir, False))
    assert figures.sequences == 2
    said = figures.problems
    assert said == [
        "rank_0.jsonl line 2: its columns are not aligned (10 token_ids, 9 entropy), left out",
        "rank_0.jsonl line 3: schema_version 2, not 1, left out",
        "rank_0.jsonl line 4: its entropy is not a list, left out",
        "rank_0.jsonl line 5: its token_ids are not a list of token ids, left out",
        said[4],
        "rank_0.jsonl line 9: not whole yet (being written), left out",
    ]
    assert said[4].startswith("rank_0.jsonl line 6: not JSON (") and said[4].endswith("left out")
    assert all("\n" not in s for s in said)


def test_a_record_line_over_the_bound_is_one_sentence_and_never_read_whole(tmp_path):
    step_dir = tmp_path / "step_1"
    write_step(step_dir, seed=6, ranks=2, sequences=1, n=8)
    with (step_dir / "rank_1.jsonl").open("ab") as f:
        f.write(b'{"schema_version": 1, "pad": "' + b"a" * token_exports.MAX_LINE + b'"}\n')
    more = tmp_path / "more" / "step_1"
    write_step(more, seed=7, ranks=2, sequences=1, n=8)
    with (step_dir / "rank_1.jsonl").open("ab") as f:
        f.write((more / "rank_1.jsonl").read_bytes())
    problems: list[str] = []
    seqs = list(token_exports.sequences(step_dir, problems))
    assert [(s.rank, s.index) for s in seqs] == [(0, 0), (1, 0), (1, 0)]
    assert problems == [
        f"rank_1.jsonl line 2: longer than 64 MB ({token_exports.MAX_LINE + 33:,} bytes), left out"
    ]


def test_a_step_without_its_stable_file_is_not_stable_and_one_with_it_is(tmp_path):
    root = tmp_path / "token_exports"
    write_step(root / "step_10", seed=1, ranks=1, sequences=1, n=4)
    write_step(root / "step_9", seed=1, ranks=1, sequences=1, n=4)
    token_exports.mark_stable(root / "step_9")
    (root / "step_x").mkdir()
    (root / "step_11").write_text("a file")
    assert [(s.step, s.stable) for s in token_exports.steps(root)] == [(9, True), (10, False)]
    assert token_exports.steps(tmp_path / "none") == []


def test_none_and_unusable_values_in_a_record_are_tolerated_and_never_ranked(tmp_path):
    step_dir = tmp_path / "step_1"
    step_dir.mkdir()
    record = {
        "schema_version": 1,
        "step": 1,
        "rank": 0,
        "export_sequence_idx": 0,
        "env_name": None,
        "token_ids": [1, 2, 3, 4],
        "loss_mask": [True, True, None, True],
        "mismatch_kl": [None, 0.5, 9.0, "x"],
        "entropy": [None, None, None, None],
        "log_importance_ratio": [1e300, -0.1, 0.2, None],
        "is_masked": [None, True, False, "yes"],
    }
    (step_dir / "rank_0.jsonl").write_text(json.dumps(record) + "\n")
    figures = token_exports.read_step(token_exports.ExportStep(1, step_dir, False), worst=10)
    assert figures.problems == [] and figures.trained == 3 and figures.masked == 1
    assert [(w.position, w.key) for w in figures.worst] == [(1, 0.5)], (
        "None, text and the untrained token are not ranked"
    )
    assert figures.mismatch_kl == {"mean": 0.5, "max": 0.5, "p99": 0.5}
    assert figures.abs_log_ratio["max"] == 0.1, "1e300 is beyond a score: left out"
    assert figures.entropy == {} and figures.envs == {"": 1}


def test_quantiles_over_a_sample_keep_the_mean_and_max_exact(tmp_path, monkeypatch):
    monkeypatch.setattr(token_exports, "SAMPLE", 1000)
    step_dir = tmp_path / "step_3"
    write_step(step_dir, seed=8, ranks=2, sequences=4, n=800)
    records = [
        json.loads(line)
        for path in sorted(step_dir.glob("rank_*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    kl = [r["mismatch_kl"][i] for r in records for i, m in enumerate(r["loss_mask"]) if m]
    ratio = [r["importance_ratio"][i] for r in records for i, m in enumerate(r["loss_mask"]) if m]
    assert len(kl) > 4000
    figures = token_exports.read_step(token_exports.ExportStep(3, step_dir, False))
    assert figures.sampled
    assert figures.mismatch_kl["mean"] == pytest.approx(statistics.fmean(kl), rel=1e-12)
    assert figures.mismatch_kl["max"] == max(kl)
    assert min(kl) <= figures.mismatch_kl["p99"] <= max(kl)
    assert figures.ratio["max"] == max(ratio)
    assert min(ratio) <= figures.ratio["p1"] <= figures.ratio["p50"] <= figures.ratio["p99"]
    exact = statistics.quantiles(ratio, n=100)
    assert abs(figures.ratio["p50"] - exact[49]) < (exact[74] - exact[24]) / 2
    assert figures.worst[0].key == max(kl), "the worst tokens are never sampled"


# --- logs ---------------------------------------------------------------------------------------------


def test_a_loguru_line_is_read_with_its_colour_codes_stripped():
    line = parse_log(b"\x1b[2m12:34:56\x1b[0m \x1b[31m  ERROR\x1b[0m NaN loss at step 3\r", "t.log")
    assert line == LogLine("t.log", "12:34:56", "ERROR", "NaN loss at step 3")
    plain = parse_log(b"01:02:03  WARNING  a warning  ", "o.log")
    assert plain == LogLine("o.log", "01:02:03", "WARNING", "a warning")
    assert parse_log(b"Traceback (most recent call last):", "t.log") is None
    assert parse_log(b"12:34:56 NOTICE something", "t.log") is None
    assert parse_log(b"", "t.log") is None


def _log(path: Path, level: str, message: str) -> None:
    colour = {"WARNING": "\x1b[33m", "ERROR": "\x1b[31m"}.get(level, "")
    with path.open("a") as f:
        f.write(f"\x1b[2m10:00:00\x1b[0m {colour}{level: >7}\x1b[0m {message}\n")


def _point_latest(logs: Path, attempt: str) -> None:
    """``logs/latest`` re-pointed at once, as prime-rl does for a new attempt."""
    os.symlink(attempt, logs / ".latest")
    os.replace(logs / ".latest", logs / "latest")


def test_the_logs_reader_follows_logs_latest_and_reads_only_the_serious_lines(tmp_path):
    logs = tmp_path / "logs"
    (logs / "attempt_1" / "envs").mkdir(parents=True)
    _point_latest(logs, "attempt_1")
    trainer, env = logs / "attempt_1" / "trainer.log", logs / "attempt_1" / "envs" / "worker.log"
    for level in LEVELS:
        _log(trainer, level, f"{level.lower()} line")
    _log(env, "WARNING", "slow env")
    (logs / "attempt_1" / "notes.txt").write_text("10:00:00 ERROR not a log file\n")
    reader = LogsReader(tmp_path)
    found = reader.read()
    assert {(line.file, line.level, line.message) for line in found} == {
        ("trainer.log", "WARNING", "warning line"),
        ("trainer.log", "ERROR", "error line"),
        ("trainer.log", "CRITICAL", "critical line"),
        ("envs/worker.log", "WARNING", "slow env"),
    }
    assert reader.counts == {"WARNING": 2, "ERROR": 1, "CRITICAL": 1} and reader.restarts == []
    assert reader.read() == []
    _log(trainer, "INFO", "fine")
    _log(trainer, "ERROR", "again")
    assert [line.message for line in reader.read()] == ["again"]
    assert reader.counts["ERROR"] == 2 and len(reader.lines) == 5


def test_a_re_pointed_logs_latest_is_a_restart_and_the_new_attempt_is_read(tmp_path):
    logs = tmp_path / "logs"
    (logs / "attempt_1").mkdir(parents=True)
    _point_latest(logs, "attempt_1")
    _log(logs / "attempt_1" / "trainer.log", "ERROR", "old error")
    reader = LogsReader(tmp_path)
    assert [line.message for line in reader.read()] == ["old error"]
    (logs / "attempt_2").mkdir()
    _log(logs / "attempt_2" / "trainer.log", "WARNING", "new warning")
    _point_latest(logs, "attempt_2")
    assert [line.message for line in reader.read()] == ["new warning"]
    assert reader.restarts == ["attempt_2"] and reader.attempt == "attempt_2"
    assert reader.counts == {"WARNING": 1}, "the counts are the current attempt's"
    assert reader.read() == [] and reader.restarts == ["attempt_2"]


def test_a_run_without_logs_reads_no_lines(tmp_path):
    reader = LogsReader(tmp_path)
    assert reader.read() == [] and reader.attempt is None and reader.restarts == []


# --- layout: the run folder and its configs -----------------------------------------------------------


def test_a_run_folder_is_found_as_it_is(tmp_path):
    run = tmp_path / "my-run"
    run.mkdir()
    append_row(run / "metrics.jsonl", 1, {"a": 1.0}, 1.0)
    found = find(run)
    assert found.path == run.resolve() and found.others == 0 and found.name == "my-run"
    assert found.metrics == run.resolve() / "metrics.jsonl"


def test_an_output_folder_gives_its_newest_run_by_metrics_time_and_counts_the_others(tmp_path):
    out = tmp_path / "outputs"
    for name, changed in (("old", 1000), ("newest", 3000), ("middle", 2000)):
        (out / name).mkdir(parents=True)
        append_row(out / name / "metrics.jsonl", 1, {"a": 1.0}, 1.0)
        os.utime(out / name / "metrics.jsonl", (changed, changed))
        os.utime(out / name, (5000, 5000))  # a folder's time is not what counts when it has metrics
    (out / "configs-only").mkdir()
    (out / "configs-only" / "configs").mkdir()
    os.utime(out / "configs-only", (2500, 2500))
    (out / "not-a-run").mkdir()
    (out / "stray.txt").write_text("x")
    found = find(out)
    assert found.path == (out / "newest").resolve() and found.others == 3
    os.utime(out / "configs-only", (4000, 4000))
    assert find(out).path.name == "configs-only", "without metrics, its folder's time"


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda p: p.mkdir(), "is not a prime-rl run"),
        (lambda p: p.write_text("x"), "is not a folder"),
        (lambda p: None, "does not exist"),
    ],
    ids=["empty-folder", "file", "missing"],
)
def test_what_is_not_a_run_is_one_sentence(tmp_path, make, said):
    target = tmp_path / "target\nname"
    make(target)
    with pytest.raises(UserError) as caught:
        find(target)
    text = str(caught.value)
    assert said in text and "\n" not in text and "target" in text


def test_settings_are_read_from_rl_json(tmp_path):
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "rl.json").write_text(
        json.dumps(
            {
                "max_steps": 250,
                "model": {"name": "Qwen/Qwen3-0.6B"},
                "tokenizer": {"name": "Qwen/Qwen3-0.6B-tok"},
                "trainer": {
                    "enable_token_export": True,
                    "loss": {"dppo_mask_low": 0.1, "dppo_mask_high": 0.3},
                },
                "orchestrator": {
                    "train": {"sampling": {"temperature": 1.0, "extra_body": {"top_p": 0.9}}}
                },
            }
        )
    )
    found = read_settings(configs)
    assert found.max_steps == 250 and found.model == "Qwen/Qwen3-0.6B-tok"
    assert found.token_export is True
    assert (found.dppo_mask_low, found.dppo_mask_high) == (0.1, 0.3)
    assert found.renormalised == "top_p=0.9" and found.note == ""


def test_settings_are_read_from_trainer_and_orchestrator_json_without_rl_json(tmp_path):
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "trainer.json").write_text(
        json.dumps(
            {
                "max_steps": 30,
                "model": {"name": "m"},
                "enable_token_export": False,
                "loss": {"dppo_mask_low": 0.2},
            }
        )
    )
    (configs / "orchestrator.json").write_text(
        json.dumps({"train": {"sampling": {"top_k": 20, "extra_body": {"min_p": 0.05}}}})
    )
    found = read_settings(configs)
    assert (found.max_steps, found.model, found.token_export) == (30, "m", False)
    assert (found.dppo_mask_low, found.dppo_mask_high) == (0.2, None)
    assert found.renormalised == "top_k=20, min_p=0.05"


@pytest.mark.parametrize(
    "sampling",
    [
        {"top_p": 0.5},  # top_p outside extra_body: prime-rl samples train rollouts at top_p 1
        {"extra_body": {"top_p": 1.0, "top_k": -1, "min_p": 0.0}},
        {"extra_body": {"top_p": "0.5", "top_k": True}},
        {"extra_body": [1, 2]},
        "not a table",
    ],
)
def test_sampling_that_does_not_renormalise_is_not_said(tmp_path, sampling):
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "orchestrator.json").write_text(json.dumps({"train": {"sampling": sampling}}))
    assert read_settings(configs).renormalised == ""


@pytest.mark.parametrize(
    "damage",
    ["not-json", "not-utf8", "too-big", "too-deep", "a-folder", "a-fifo"],
)
def test_a_damaged_config_is_a_note_never_a_raise_and_the_other_configs_still_read(
    tmp_path, damage
):
    configs = tmp_path / "configs"
    configs.mkdir()
    rl = configs / "rl.json"
    match damage:
        case "not-json":
            rl.write_bytes(b'{"max_steps": ')
        case "not-utf8":
            rl.write_bytes(b'{"max_steps": "\xff\xfe"}')
        case "too-big":
            rl.write_bytes(b" " * (4 * 1024**2 + 1))
        case "too-deep":
            rl.write_bytes(b"[" * 100_000)
        case "a-folder":
            rl.mkdir()
        case "a-fifo":
            os.mkfifo(rl)
    (configs / "trainer.json").write_text(json.dumps({"max_steps": 7}))
    found = read_settings(configs)
    assert found.note.startswith("configs/rl.json cannot be read (") and "\n" not in found.note
    assert found.max_steps == 7


def test_configs_of_the_wrong_shape_give_no_settings_and_no_raise(tmp_path):
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "rl.json").write_text(
        json.dumps(
            {
                "max_steps": True,
                "model": {"name": 5},
                "trainer": {"enable_token_export": "yes", "loss": [1]},
                "orchestrator": {"train": "x"},
            }
        )
    )
    (configs / "trainer.json").write_text("[1, 2]")
    (configs / "orchestrator.json").write_text(
        json.dumps({"max_steps": -3, "model": {"name": " "}})
    )
    found = read_settings(configs)
    assert (found.max_steps, found.model, found.token_export) == (None, None, None)
    assert (found.dppo_mask_low, found.renormalised, found.note) == (None, "", "")
    assert read_settings(tmp_path / "missing") == read_settings(configs)


# --- engines: Prometheus pages ------------------------------------------------------------------------

PAGE = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 8.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 0.0
vllm:num_requests_waiting{engine="1",model_name="m"} 12.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.2
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.99
vllm:kv_cache_usage_perc{engine="2",model_name="m"} NaN
vllm:num_requests_waiting{engine="2",model_name="m"} -1
# TYPE vllm:prompt_tokens counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 12345.0
"""


def test_each_engine_of_a_prometheus_page_is_kept_apart_and_the_full_one_stands_out():
    assert by_engine(PAGE) == {
        "0": {"running": 3.0, "waiting": 0.0, "kv_cache": 0.2},
        "1": {"running": 8.0, "waiting": 12.0, "kv_cache": 0.99},
    }, "a NaN or negative value is left out"
    assert parse_metrics(PAGE) == {"running": 11.0, "waiting": 12.0, "kv_cache": 0.99}
    engines = [
        Engine("http://h:8000", label, g.get("running"), g.get("waiting"), g.get("kv_cache"))
        for label, g in by_engine(PAGE).items()
    ]
    verdict = judge(History(), time.time(), engines=engines)
    assert {a.name for a in verdict.alerts} == {"kv_cache", "backlog"}
    assert verdict.signals["backlog"] == 1.5 and verdict.word == DEGRADED


def test_an_sglang_server_of_one_engine_has_the_empty_label():
    page = "sglang:num_running_reqs 2\nsglang:num_queue_reqs 1\nsglang:token_usage 0.5\n"
    assert by_engine(page) == {"": {"running": 2.0, "waiting": 1.0, "kv_cache": 0.5}}


@pytest.mark.parametrize(
    "page", ["<html><body>Not Found</body></html>", "hello world\n", '{"running": 1}']
)
def test_a_page_that_is_not_prometheus_text_is_a_value_error(page):
    with pytest.raises(ValueError):
        by_engine(page)
    with pytest.raises(ValueError):
        parse_metrics(page)


# --- health, on simulated runs ------------------------------------------------------------------------

TRIPS = {trouble: trouble for trouble in TROUBLES} | {"log_error": "log_errors"}


def followed(tmp_path: Path, **sim) -> Follower:
    run = write(SimRun(tmp_path / "run", **sim))
    follower = Follower(find(run))
    follower.poll(until_end=True)
    return follower


@pytest.mark.parametrize("trouble", sorted(TROUBLES))
def test_each_planted_trouble_trips_its_own_alert_and_no_other(tmp_path, trouble):
    snapshot = followed(tmp_path, steps=40, troubles=frozenset({trouble})).snapshot()
    verdict = snapshot.verdict
    alerts = {a.name: a for a in verdict.alerts}
    tripped = alerts[TRIPS[trouble]]
    assert tripped.sentence and tripped.threshold == TRAINING_SIGNALS[TRIPS[trouble]].threshold
    if trouble == "reward_flat":
        assert tripped.value < tripped.threshold
    else:
        assert tripped.value > tripped.threshold
    serious = {a.name for a in verdict.alerts if a.level != "note"}
    if trouble == "trainer_waits":  # who waits on whom is said, never a degradation
        assert tripped.level == "note" and serious == set() and verdict.word == HEALTHY
        assert "orchestrator_waits" not in alerts
    else:
        assert serious == {TRIPS[trouble]} and verdict.word == DEGRADED
    assert snapshot.finished and snapshot.overview.step == 40 and snapshot.notes == []


def test_a_run_with_no_trouble_is_healthy_with_only_the_orchestrator_waiting_said(tmp_path):
    follower = followed(tmp_path, steps=40)
    snapshot = follower.snapshot()
    assert snapshot.verdict.word == HEALTHY
    assert [(a.name, a.level) for a in snapshot.verdict.alerts] == [("orchestrator_waits", "note")]
    assert snapshot.settings.max_steps == 40 and snapshot.settings.token_export is True
    assert len(snapshot.exports) == 40 and all(e.stable for e in snapshot.exports)
    assert "time/step (trainer)" in follower.history.series
    assert "time/step (orchestrator)" in follower.history.series
    assert "stalled" not in snapshot.verdict.signals


def test_an_unfinished_run_whose_last_step_was_an_hour_ago_is_down_and_stalled(tmp_path):
    run = write(SimRun(tmp_path / "run", steps=40, ago_s=3600))
    (run / "configs" / "rl.json").write_text(json.dumps({"max_steps": 100}))
    follower = Follower(find(run))
    follower.poll(until_end=True)
    verdict = follower.snapshot().verdict
    assert verdict.word == DOWN and not verdict.finished
    (stalled,) = [a for a in verdict.alerts if a.level == DOWN]
    assert stalled.name == "stalled" and stalled.value == pytest.approx(360, rel=0.02)
    assert "no new step for" in stalled.sentence


def test_a_finished_run_is_never_stalled_however_long_ago_it_ended(tmp_path):
    run = write(SimRun(tmp_path / "run", steps=40, ago_s=3600))
    (run / "configs" / "rl.json").write_text(json.dumps({"max_steps": 40}))
    follower = Follower(find(run))
    follower.poll(until_end=True)
    for later in (0.0, 10**6):
        snapshot = follower.snapshot(now=time.time() + later)
        assert snapshot.finished and "stalled" not in snapshot.verdict.signals
        assert snapshot.verdict.word == HEALTHY


def test_a_simulated_run_written_with_ago_reads_as_stalled_as_its_help_says(tmp_path):
    verdict = followed(tmp_path, steps=40, ago_s=3600).snapshot().verdict
    assert verdict.word == DOWN


def test_a_replaced_metrics_file_starts_the_history_again_and_is_said(tmp_path):
    follower = followed(tmp_path, steps=20)
    metrics = follower.run.metrics
    assert follower.history.trainer_step() == 20
    new = metrics.with_name("new.jsonl")
    for step in (1, 2, 3):
        append_row(new, step, {"time/step": 8.0, "time/wait_for_batch": 0.4}, time.time())
    os.replace(new, metrics)
    assert follower.poll(until_end=True) == 3
    assert follower.history.trainer_step() == 3 and follower.history.resumed_at == []
    assert "metrics.jsonl was replaced or cut: read again from its start" in follower.notes


# --- every reader fed random and mutated bytes --------------------------------------------------------


def _rows_are_sound(rows: list[Row]) -> None:
    for row in rows:
        assert type(row.step) is int and row.step >= 0
        assert row.time is None or (type(row.time) is float and math.isfinite(row.time))
        for name, value in row.values.items():
            assert isinstance(name, str) and type(value) is float and math.isfinite(value)


@FUZZ
@given(data=lines_of(METRICS_LINE))
def test_the_metrics_reader_fed_random_and_mutated_rows_returns_sound_rows_and_counts_the_rest(
    tmp_path, data
):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(data)
    found = MetricsReader(path, 100).read()
    _rows_are_sound(found.rows)
    assert len(found.rows) + found.bad_lines <= data.count(b"\n")
    assert found.error == "" and found.long_lines == 0
    assert (found.bad_lines > 0) == bool(found.first_bad)
    history = History()
    for row in found.rows:
        history.add(row, side(row.values))
    assert history.rows == len(found.rows)


def _record_is_sound(seq: token_exports.ExportedSequence) -> None:
    assert type(seq.step) is int and type(seq.index) is int and isinstance(seq.env, str)
    n = len(seq.tokens)
    assert all(type(t) is int and t >= 0 for t in seq.tokens)
    for name, column in seq.columns.items():
        assert name in token_exports.COLUMNS and len(column) == n
        assert all(missing(v) or abs(float(v)) <= MAX_SCORE for v in column)
    for pick in token_exports.PICKS:
        assert all(missing(v) or abs(float(v)) <= MAX_SCORE for v in seq.pick(pick))


@FUZZ
@given(data=lines_of(EXPORT_LINE))
def test_token_export_records_fed_random_and_mutated_bytes_read_or_say_why(tmp_path, data):
    for line in data.splitlines(keepends=True):
        found = token_exports.record(line, 0)
        if isinstance(found, str):
            assert found and "\n" not in found
        else:
            _record_is_sound(found)
    step_dir = tmp_path / "step_1"
    step_dir.mkdir(exist_ok=True)
    (step_dir / "rank_0.jsonl").write_bytes(data)
    problems: list[str] = []
    seqs = list(token_exports.sequences(step_dir, problems))
    for seq in seqs:
        _record_is_sound(seq)
    assert len(seqs) + len(problems) <= data.count(b"\n") + 1
    assert all(p.startswith("rank_0.jsonl line ") and "\n" not in p for p in problems)
    figures = token_exports.read_step(token_exports.ExportStep(1, step_dir, False), "masked", 5)
    assert figures.sequences == len(seqs) and figures.problems == problems
    assert 0 <= figures.masked <= figures.trained <= figures.tokens
    for tail in (figures.mismatch_kl, figures.abs_log_ratio, figures.ratio, figures.entropy):
        assert all(math.isfinite(v) for v in tail.values())
    assert len(figures.worst) <= min(5, figures.trained)
    assert all(w.values.get("loss_mask", True) is True for w in figures.worst), "trained only"


@FUZZ
@given(data=lines_of(LOG_LINE))
def test_log_lines_fed_random_and_mutated_bytes_read_as_log_lines_or_nothing(data):
    for raw in data.split(b"\n"):
        line = parse_log(raw, "trainer.log")
        if line is not None:
            assert line.file == "trainer.log" and line.level in LEVELS
            assert re.fullmatch(r"\d\d:\d\d:\d\d", line.time)


def test_the_fuzz_seeds_are_what_the_writers_write():
    """The mutations start from real lines: each reads as it is."""
    found = Read()
    row = parse(METRICS_LINE.rstrip(b"\n"), found)
    assert row.step == 12 and row.values["time/step (trainer)"] == 8.1 and found.bad_lines == 0
    seq = token_exports.record(EXPORT_LINE, 0)
    assert not isinstance(seq, str) and seq.tokens == [101, 7, 8, 9] and seq.env == "reverse-text"
    assert parse_log(LOG_LINE.rstrip(b"\n"), "t").level == "ERROR"
    assert EXPORT_LINE.count(b"\n") == 1 and METRICS_LINE.count(b"\n") == 1
