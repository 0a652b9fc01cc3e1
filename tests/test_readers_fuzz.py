"""Every file vftui reads back, fed random and mutated bytes: a value, rows, or one sentence naming the file,
never a traceback. The mutations start from what vftui itself writes (a real saved group, real settings
and checkpoints), so most inputs are almost right, which is where readers go wrong."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import REPO
from vftui.config import load_config
from vftui.errors import UserError
from vftui.events import GroupCollected
from vftui.run_files import records
from vftui.run_files.drops import read_drops
from vftui.run_files.files import RunFiles
from vftui.run_files.groupfile import GroupFile
from vftui.ui.themes import load_theme

pytestmark = pytest.mark.unit
FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

GROUP_LINE = (REPO / "tests" / "data" / "groups.jsonl").read_bytes().splitlines(keepends=True)[0]
RUN_JSON = json.dumps(
    {
        "config": {
            "env": "vftui/alphabet-sort",
            "mode": "eval",
            "steps": 5,
            "shard": [0, 2],
            "pass_threshold": 0.5,
        },
        "model": "m",
        "endpoint": "http://127.0.0.1:1/v1",
        "tokenizer": "t",
        "created": 1764900000.5,
    }
).encode()
CHECKPOINT = json.dumps(
    {
        "done_below": 3,
        "done_above": [5, 7],
        "iter": 8,
        "groups": 5,
        "elapsed_s": 2.5,
        "state": "finished",
        "mean_reward": 0.25,
    }
).encode()
CONFIG = b'[run]\nmode = "sft"\ngroup-size = 4\nsteps = 10\ntemperature = 0.7\nenv-args = {max_turns = 2}\n'
THEME = (REPO / "themes").glob("*.toml").__next__().read_bytes()


@st.composite
def mutated(draw, original: bytes) -> bytes:
    """``original`` with a few bytes flipped, inserted, deleted or duplicated, or cut short."""
    data = bytearray(original)
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        match draw(st.sampled_from(["flip", "insert", "delete", "cut", "repeat"])):
            case "flip":
                data[at] ^= 1 << draw(st.integers(0, 7))
            case "insert":
                data[at:at] = draw(st.binary(min_size=1, max_size=8))
            case "delete":
                del data[at : at + draw(st.integers(1, 8))]
            case "cut":
                del data[at:]
            case "repeat":
                data[at:at] = data[at : at + draw(st.integers(1, 64))]
    return bytes(data)


def inputs(original: bytes) -> st.SearchStrategy[bytes]:
    return st.one_of(st.binary(max_size=300), mutated(original))


@FUZZ
@pytest.mark.parametrize(
    ("name", "model", "seed"),
    [
        ("run.json", records.RunRecord, RUN_JSON),
        ("checkpoint.json", records.Checkpoint, CHECKPOINT),
    ],
)
@given(data=st.data())
def test_a_runs_settings_and_checkpoint_read_as_records_or_damaged(
    tmp_path, name, model, seed, data
):
    path = tmp_path / f"groups.{name}"
    path.write_bytes(data.draw(inputs(seed)))
    try:
        record = records.read(path, model)
    except records.Damaged as e:
        assert str(e).startswith(f"{path} is damaged (")
    else:
        assert isinstance(record, model)
        assert not isinstance(record, records.RunRecord) or record.config.own_shard.count >= 1


@FUZZ
@given(lines=st.lists(st.one_of(inputs(GROUP_LINE), st.just(GROUP_LINE)), min_size=1, max_size=4))
def test_a_damaged_group_file_shows_its_whole_groups_and_counts_the_rest(tmp_path, lines):
    path = tmp_path / "groups.jsonl"
    path.write_bytes(b"".join(lines))
    events: list = []
    rows = GroupFile(path)
    summary = rows.read(events.append, "")
    assert summary.groups_done == len(rows) <= len(b"".join(lines).splitlines())
    for position in range(
        len(rows)
    ):  # each row's group reads back from disk as the preview asks for it
        assert isinstance(rows._group(rows[position]), GroupCollected)


@FUZZ
@given(
    data=inputs(
        json.dumps(
            {
                "item": 3,
                "reason": "identical",
                "scores": [1.0, 1.0],
                "metrics": {"f": [1, 1]},
                "turns": [1, 2],
            }
        ).encode()
        + b"\n"
    )
)
def test_recorded_drops_read_as_drops_or_are_left_out(tmp_path, data):
    (tmp_path / "groups.dropped.jsonl").write_bytes(data)
    drops, offset = read_drops(RunFiles(tmp_path / "groups.jsonl"))
    assert 0 <= offset <= len(data) and len(drops) <= data.count(b"\n")


@FUZZ
@pytest.mark.parametrize(
    ("name", "read", "seed"),
    [
        ("config.toml", lambda path: load_config({}, config_file=path, environ={}), CONFIG),
        ("mine.toml", load_theme, THEME),
    ],
    ids=["config", "theme"],
)
@given(data=st.data())
def test_a_config_file_or_theme_gives_its_settings_or_one_sentence(
    tmp_path, name, read, seed, data
):
    path = tmp_path / name
    path.write_bytes(data.draw(inputs(seed)))
    try:
        read(path)
    except UserError as e:
        assert len(str(e).splitlines()) == 1 and "Traceback" not in str(e)


def test_the_seeds_are_what_vftui_writes(tmp_path):
    """The mutations start from valid files: each seed reads as it is."""
    assert json.loads(GROUP_LINE)["scores"] and load_theme(next((REPO / "themes").glob("*.toml")))
    assert records.Checkpoint.model_validate_json(CHECKPOINT).done_above == [5, 7]
    assert records.RunRecord.model_validate_json(RUN_JSON).config.own_shard.count == 2
    (tmp_path / "config.toml").write_bytes(CONFIG)
    assert load_config({}, config_file=tmp_path / "config.toml", environ={}).group_size == 4
