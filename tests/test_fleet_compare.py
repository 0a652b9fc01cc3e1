"""``vftui compare`` with sources on other machines (``HOST:PATH``): every source on one host runs compare there;
sources on several (or mixed with local ones) are each read there and brought here as JSON lines, checked as
hostile input (``source_lines``)."""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import (
    REPO,
    run_cli,
    tmux,
    tmux_cli_command,
    tmux_session,
    wait_for_screen,
)
from tests.test_fleet import hosts, remote_vftui  # noqa: F401 (a fixture: the loopback sshd)
from tests.test_fleet_answers import executable, fleet_root  # noqa: F401 (a fixture: a stand-in ssh)
from tests.test_readers_fuzz import mutated
from vftui.errors import UserError
from vftui.run_files.results import Item, Rollouts, Setup, Source, load
from vftui.run_files.source_lines import MAX_TEXT, SourceAnswer, export

A, B = REPO / "tests" / "data" / "compare" / "a", REPO / "tests" / "data" / "compare" / "b"


def compared(tmp_path: Path, *args: str, **env: str):
    return run_cli(["compare", "--json", *args], tmp_path, timeout=120, **env)


def figures(answer: str) -> dict:
    """``compare --json`` without the sources' paths, which say where each was read."""
    found = json.loads(answer)
    for source in found["sources"]:
        source.pop("path")
    for change in found["changes"]:
        change.pop("against"), change.pop("source")
    found.pop("worse")
    return found


@pytest.mark.needs("sshd")
@pytest.mark.serial
def test_a_source_on_another_host_compares_as_it_would_here_named_host_path(hosts, tmp_path):  # noqa: F811
    ssh, _ = hosts
    here = compared(tmp_path, str(A), str(B), "--fail-if-worse", "0")
    remote = ["--remote-vftui", remote_vftui()]
    mixed = compared(
        tmp_path, str(A), f"fleet-a:{B}", "--fail-if-worse", "0", *remote, VFTUI_SSH=ssh
    )
    assert mixed.returncode == here.returncode != 2, mixed.stderr
    assert figures(mixed.stdout) == figures(here.stdout)
    assert [s["path"] for s in json.loads(mixed.stdout)["sources"]] == [
        str(A / "results.jsonl"),  # the file read here, and the source there as the user named it
        f"fleet-a:{B}",
    ]
    two_hosts = compared(
        tmp_path, f"fleet-a:{A}", f"fleet-b:{B}", "--fail-if-worse", "0", *remote, VFTUI_SSH=ssh
    )
    assert two_hosts.returncode == here.returncode and figures(two_hosts.stdout) == figures(
        here.stdout
    )
    there = compared(  # JSON is read here from the sources there, never passed through as it came
        tmp_path, f"fleet-a:{A}", f"fleet-a:{B}", "--fail-if-worse", "0", *remote, VFTUI_SSH=ssh
    )
    assert there.returncode == here.returncode and figures(there.stdout) == figures(here.stdout)
    assert [s["path"] for s in json.loads(there.stdout)["sources"]] == [
        f"fleet-a:{A}",
        f"fleet-a:{B}",
    ]
    table = run_cli(["compare", str(A), f"fleet-a:{B}", *remote], tmp_path, VFTUI_SSH=ssh)
    assert table.returncode == 0 and f"B  fleet-a:{B} (vf-eval)" in table.stdout, table.stdout


@pytest.mark.needs("sshd")
@pytest.mark.serial
def test_a_host_ssh_cannot_reach_is_one_line_naming_it_and_exit_2(hosts, tmp_path):  # noqa: F811
    ssh, _ = hosts
    for sources in ([str(A), f"fleet-down:{B}"], [f"fleet-down:{A}", f"fleet-down:{B}"]):
        done = compared(tmp_path, *sources, VFTUI_SSH=ssh)
        ours = [line for line in done.stderr.splitlines() if line.startswith("vftui:")]
        assert done.returncode == 2 and len(ours) == 1 and "fleet-down" in ours[0], done.stderr
    missing = compared(
        tmp_path, str(A), "fleet-a:/no/such", "--remote-vftui", remote_vftui(), VFTUI_SSH=ssh
    )
    assert missing.returncode == 2 and missing.stderr.splitlines() == [
        "vftui: error: fleet-a: vftui: error: /no/such: no such file or folder"
    ]


def a_host_answering(root: Path, name: str, answer: bytes) -> str:
    """A host (``fleet_root``'s stand-in ssh) whose vftui answers ``answer`` to anything."""
    (root / name).mkdir(exist_ok=True)
    (root / name / "answer").write_bytes(answer)
    executable(root / name / "bin/vftui", '#!/bin/sh\ncat "$HOME/answer"\n')
    return name


def test_a_hostile_answer_is_left_out_line_by_line_or_one_sentence(fleet_root):  # noqa: F811
    root, ssh = fleet_root
    lines = list(export(load(B)))
    item = json.loads(lines[1])
    cases = {
        "nan": lines[1].replace(json.dumps(item["item"]["rewards"])[1:-1].split(",")[0], "NaN", 1),
        "big": lines[1].replace(
            json.dumps(item["item"]["rewards"])[1:-1].split(",")[0], "1e400", 1
        ),
        "long": json.dumps({"item": {**item["item"], "key": "k" * (MAX_TEXT + 1)}}),
        "deep": "[" * 100_000 + "]" * 100_000,
    }
    for name, bad in cases.items():
        a_host_answering(root, name, "\n".join([lines[0], bad, *lines[2:]]).encode() + b"\n")
        done = run_cli(["compare", "--json", str(A), f"{name}:b"], root, timeout=60, VFTUI_SSH=ssh)
        assert done.returncode in (0, 3) and "Traceback" not in done.stderr, (name, done.stderr)
        warned = [line for line in done.stderr.splitlines() if "left out 1 of the" in line]
        assert len(warned) == 1 and f"{name}:b" in warned[0], (name, done.stderr)
        assert json.loads(done.stdout)["sources"][1]["items"] == len(lines) - 2
    header = json.loads(lines[0])
    header["source"]["warnings"] = ["w\x1b]0;PWNED\x07\x1b[2J"]
    a_host_answering(root, "esc", "\n".join([json.dumps(header), *lines[1:]]).encode() + b"\n")
    for sources in ([str(A), "esc:b"], ["esc:a", "esc:b"]):  # mixed, and every source on that host
        done = run_cli(["compare", "--json", *sources], root, timeout=60, VFTUI_SSH=ssh)
        assert done.returncode in (0, 3) and "\x1b" not in done.stdout + done.stderr, done.stderr
        assert "vftui: warning: esc:b: w␛]0;PWNED␇␛[2J" in done.stderr.splitlines()
    a_host_answering(root, "newer", b'{"source": {"form": 2}}\n')
    done = run_cli(["compare", str(A), "newer:b"], root, timeout=60, VFTUI_SSH=ssh)
    assert done.returncode == 2 and "its form 2 is not this vftui's (1)" in done.stderr, done.stderr
    for name, answer in {"banner": b"Welcome to gpu-9!\n", "empty": b""}.items():
        a_host_answering(root, name, answer)
        done = run_cli(["compare", str(A), f"{name}:b"], root, timeout=60, VFTUI_SSH=ssh)
        assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
        assert done.stderr.startswith(
            f"vftui: error: {name}: its vftui answered no compare source for b"
        )


# -- the lines, fed anything ---------------------------------------------------------------------------------

SCORES = st.floats(-1e100, 1e100, allow_nan=False)
TEXTS = st.text(max_size=12)
COUNTS = st.integers(0, 10**12)
MESSAGES = st.lists(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]), "content": TEXTS}),
    max_size=3,
)


@st.composite
def items(draw, key: str) -> Item:
    n = draw(st.integers(1, 4))
    each = {"min_size": n, "max_size": n}
    return Item(
        key,
        draw(st.lists(SCORES, **each)),
        draw(st.dictionaries(TEXTS, st.lists(SCORES, max_size=4), max_size=3)),
        draw(st.lists(st.booleans(), **each)),
        draw(st.lists(COUNTS, **each)),
        Rollouts(draw(st.lists(MESSAGES, **each))),
        draw(st.lists(st.none() | st.tuples(COUNTS, COUNTS), **each)),
    )


@st.composite
def sources(draw) -> Source:
    keys = draw(st.lists(TEXTS, min_size=1, max_size=4, unique=True))
    maybe = st.none() | TEXTS
    return Source(
        Path("h:p"),
        draw(TEXTS),
        draw(TEXTS),
        {key: draw(items(key)) for key in keys},
        draw(COUNTS),
        draw(st.none() | SCORES),
        draw(COUNTS),
        draw(st.lists(TEXTS, max_size=3)),
        Setup(
            draw(maybe),
            tuple(draw(st.lists(SCORES, max_size=3))),
            draw(maybe),
            draw(maybe),
            draw(maybe),
        ),
        draw(st.lists(SCORES, max_size=5)),
    )


def read_back(data: bytes, cuts: list[int]) -> Source:
    answer = SourceAnswer("h", "p")
    for start, end in zip([0, *cuts], [*cuts, len(data)], strict=True):  # as the pipe hands it over
        answer.feed(data[start:end])
    return answer.end()


@settings(max_examples=200, deadline=None)
@given(sources(), st.lists(st.integers(0, 10_000), max_size=4))
def test_a_source_exported_then_read_is_the_same_source(source, cuts):
    data = "".join(line + "\n" for line in export(source)).encode()
    assert read_back(data, sorted(c for c in cuts if c <= len(data))) == source


@settings(max_examples=200, deadline=None)
@given(sources(), st.data())
def test_random_or_mutated_lines_read_as_a_source_of_checked_figures_or_one_sentence(source, data):
    original = "".join(line + "\n" for line in export(source)).encode()
    raw = data.draw(mutated(original) | st.binary(max_size=300))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=4)))
    try:
        read = read_back(raw, cuts)
    except UserError as e:
        assert str(e) and "\n" not in str(e)
        return
    for item in read.items.values():
        assert item.rewards and all(math.isfinite(r) for r in item.rewards)
        assert len(item.truncated) == len(item.rollouts) == len(item.tokens) == len(item.rewards)
        assert math.isfinite(item.mean)


@pytest.mark.needs("sshd", "tmux")
@pytest.mark.serial
def test_compare_of_sources_on_one_host_draws_its_screen_here_through_ssh_t(hosts, tmp_path):  # noqa: F811
    ssh, _ = hosts
    args = ["compare", f"fleet-a:{A}", f"fleet-a:{B}", "--remote-vftui", remote_vftui()]
    command = (
        f"export VFTUI_SSH={shlex.quote(ssh)} && "
        + tmux_cli_command(tmp_path, shlex.join(args))
        + "; echo EXIT=$?; sleep 30"
    )
    with tmux_session(command, 120, 40) as session:
        screen = wait_for_screen(session, "paired bootstrap")
        tmux("send-keys", "-t", session, "q")
        wait_for_screen(session, "EXIT=0")
    assert str(B) in screen or "B - A" in screen


def test_a_remote_source_whose_every_item_was_left_out_says_why(tmp_path):
    """The hostile probe's find: a good source line and garbage after it was refused as 'no result compare
    can read in it (0 lines skipped ...)', the reason each line was left out lost."""
    from vftui.commands.compare import readable

    good = tmp_path / "a.jsonl"
    good.write_text(json.dumps({"scores": [1.0], "vftui": {"item": 0, "example_id": 0}}) + "\n")
    head, *_ = export(load(good))
    source = read_back((head + "\ngarbage\n").encode(), [])
    assert not source.items
    with pytest.raises(UserError) as said:
        readable([source])
    assert "not JSON: 'garbage'" in str(said.value), str(said.value)
