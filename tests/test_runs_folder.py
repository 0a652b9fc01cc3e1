"""``vftui runs FOLDER``: the runs found under a folder, whatever wrote them (vftui, verifiers v1 eval, prime-rl,
vf-eval), from their own files (the fixtures verifiers' eval and prime-rl's layout wrote), within bounds."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import REPO, cli_env, ended_run, run_cli, unavailable, unprivileged
from tests.test_fleet import hosts, remote_vftui  # noqa: F401 (a fixture: the loopback sshd)
from tests.test_fleet_answers import fleet_root, host  # noqa: F401 (a fixture: a stand-in ssh)
from tests.test_prime_rl_files import write_run
from vftui.run_files.folder_runs import MAX_DEPTH, MAX_ENTRIES, READ_WHOLE_BYTES

V1_RUN = next((REPO / "tests" / "data" / "v1_eval").iterdir())
VF_EVAL = REPO / "tests" / "data" / "compare" / "a"


def aged(path: Path, when: float) -> None:
    """Every file under ``path`` (and it) last written at ``when``."""
    for p in [path, *path.rglob("*")]:
        os.utime(p, (when, when))


def a_folder_of_every_kind(tmp_path: Path) -> Path:
    """``outputs/``: a vftui run (newest), a prime-rl run, a v1 eval, a vf-eval results folder (oldest)."""
    outputs = tmp_path / "outputs"
    v1 = outputs / "evals" / V1_RUN.name / "ref"
    shutil.copytree(V1_RUN, v1)
    aged(v1, 1_700_000_200)
    write_run(outputs / "rl" / "run-1", tmp_path)
    aged(outputs / "rl" / "run-1", 1_700_000_300)
    shutil.copytree(VF_EVAL, outputs / "vf" / "abc")
    aged(outputs / "vf" / "abc", 1_700_000_100)
    ended_run(outputs / "own", "vftui/alphabet-sort", "sft", 4, 4, 0.25, 1_700_000_400)
    return outputs


def listed(tmp_path: Path, *args: str) -> list[dict]:
    done = run_cli(["runs", "--json", *args], tmp_path)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_runs_folder_lists_every_kind_newest_first_with_what_their_files_tell(tmp_path):
    outputs = a_folder_of_every_kind(tmp_path)
    rows = listed(tmp_path, str(outputs))
    assert [r["kind"] for r in rows] == ["vftui", "prime-rl", "verifiers v1", "vf-eval"]
    own, rl, v1, vf = rows
    assert (own["env"], own["groups_done"], own["mean_reward"]) == ("vftui/alphabet-sort", 4, 0.25)
    assert (v1["env"], v1["model"], v1["mode"]) == ("vftui_shim_tools", "vftui-sim", "eval")
    assert (v1["groups_done"], v1["groups_total"], v1["state"]) == (3, 3, "finished")
    assert v1["mean_reward"] is not None and v1["path"].endswith("ref")
    assert (rl["env"], rl["mode"], rl["groups_done"], rl["groups_total"]) == (
        "tools",
        "rl",
        3,
        None,
    )
    assert (vf["env"], vf["model"], vf["groups_total"]) == ("alphabet_sort", "acme/sorter-7b", 12)
    assert vf["started"] < v1["started"] < rl["started"], "newest first"
    table = run_cli(["runs", str(outputs)], tmp_path).stdout.splitlines()
    assert table[0].split()[:3] == ["KIND", "ID", "STATE"]
    kind, _, state, _, _, took, *_ = table[2].split()
    assert (kind, state, took) == ("prime-rl", "-", "-") and "3/-" in table[2], "not known: -"
    for row in rows[1:]:  # each path is one view and compare open
        shown = run_cli(["compare", "--json", row["path"], row["path"]], tmp_path)
        assert shown.returncode == 0, shown.stderr


def test_a_run_too_big_to_read_whole_is_listed_from_its_config_alone(tmp_path):
    run = tmp_path / "out" / "big"
    shutil.copytree(V1_RUN, run)
    with (run / "traces.jsonl").open("a") as f:  # an eval still being written, past the bound
        f.write(" " * (READ_WHOLE_BYTES + 1))
    (row,) = listed(tmp_path, str(tmp_path / "out"))
    assert (row["env"], row["groups_total"], row["groups_done"], row["mean_reward"]) == (
        "vftui_shim_tools",
        3,
        None,
        None,
    )


def test_a_run_just_begun_or_copied_at_once_says_what_its_files_tell_and_no_made_up_rate(tmp_path):
    """An empty results.jsonl beside its metadata made the row 'damaged'; files copied together gave a rate
    of 461,758 groups/s from their times (found by a hostile probe)."""
    begun = tmp_path / "out" / "begun"
    begun.mkdir(parents=True)
    shutil.copy(VF_EVAL / "metadata.json", begun)
    (begun / "results.jsonl").write_bytes(b"")
    shutil.copytree(V1_RUN, tmp_path / "out" / "copied")
    rows = {Path(r["path"]).name: r for r in listed(tmp_path, str(tmp_path / "out"))}
    assert (rows["begun"]["state"], rows["begun"]["groups_done"], rows["begun"]["env"]) == (
        "-",
        0,
        "alphabet_sort",
    )
    assert rows["begun"]["mean_reward"] is None, "metadata's reward, of no row here, is not shown"
    assert all(r["groups_per_s"] == 0.0 and r["duration_s"] == 0.0 for r in rows.values()), rows


def test_a_folders_mean_reward_is_the_mean_of_its_examples_as_compare_gives_it(tmp_path):
    """It was the mean over rollouts: an example with fewer rows weighed less, and the same results read
    1.085 here and 1.066 in compare."""
    folder = tmp_path / "out" / "uneven"
    folder.mkdir(parents=True)
    shutil.copy(VF_EVAL / "metadata.json", folder)
    rows = [(0, 1.0), (1, 0.0), (1, 0.0), (1, 0.0)]  # example 0 once, example 1 three times
    (folder / "results.jsonl").write_text(
        "".join(json.dumps({"example_id": n, "reward": r}) + "\n" for n, r in rows)
    )
    (row,) = listed(tmp_path, str(tmp_path / "out"))
    compared = json.loads(run_cli(["compare", "--json", str(folder), str(folder)], tmp_path).stdout)
    assert row["mean_reward"] == compared["sources"][0]["reward"]["mean"] == 0.5


@pytest.mark.parametrize("what", ["missing", "file", "loop", "empty"])
def test_a_folder_that_is_not_one_is_one_sentence_and_exit_2(tmp_path, what):
    target = tmp_path / "target"
    if what == "file":
        target.write_text("")
    if what == "loop":
        target.symlink_to(tmp_path / "other")
        (tmp_path / "other").symlink_to(target)
    done = run_cli(["runs", "" if what == "empty" else str(target)], tmp_path)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert ("is empty" if what == "empty" else str(target)) in done.stderr, "names what was named"
    if what == "loop":
        assert "a link that leads nowhere, or loops" in done.stderr


def test_the_walk_never_goes_through_a_link_nor_too_deep_nor_past_its_cap(tmp_path):
    outside = tmp_path / "outside"
    shutil.copytree(V1_RUN, outside / "run")
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "link").symlink_to(outside)  # a link out of the folder
    (folder / "loop").symlink_to(folder)
    deep = folder.joinpath(*["d"] * (MAX_DEPTH + 1))
    shutil.copytree(V1_RUN, deep / "run")
    shutil.copytree(V1_RUN, folder / "near")
    done = run_cli(["runs", "--json", str(folder)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert [Path(json.loads(line)["path"]).name for line in done.stdout.splitlines()] == ["near"]
    assert f"more than {MAX_DEPTH} levels below" in done.stderr
    wide = tmp_path / "wide"
    for n in range(MAX_ENTRIES + 10):
        (wide / f"{n:05d}").mkdir(parents=True)
    done = run_cli(["runs", str(wide)], tmp_path, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("no runs found under"), done.stdout
    assert done.stderr.splitlines() == [
        f"vftui: note: looked at the first {MAX_ENTRIES:,} files and folders under {wide} only; "
        "name a folder nearer the runs"
    ]


def test_a_folder_that_cannot_be_read_is_skipped_and_counted_in_one_line():
    """Run as a user the folder's mode shuts out: root reads a folder of mode 000 (CI runs as root), so there
    it runs as ``nobody`` (``unprivileged``), in a folder all may read, made outside pytest's own (root's)."""
    shared = Path(tempfile.mkdtemp(prefix="vftui-unreadable-"))
    folder = shared / "folder"
    try:
        shared.chmod(0o755)
        shutil.copytree(V1_RUN, folder / "ok")
        (shared / "home").mkdir(mode=0o777)
        (shared / "home").chmod(0o777)  # whoever runs it writes its settings and caches here
        prefix = unprivileged(shared)
        if prefix is None:
            unavailable("root here, and neither setpriv nor runuser can run vftui unprivileged")
        (folder / "closed").mkdir()
        (folder / "closed").chmod(0)
        env = cli_env(shared / "home", HOME=str(shared / "home"))
        done = subprocess.run(
            [*prefix, sys.executable, "-m", "vftui", "runs", "--json", str(folder)],
            cwd=shared,
            env={**env, "XDG_CACHE_HOME": str(shared / "home" / "cache")},
            capture_output=True,
            text=True,
            timeout=240,
        )
    finally:
        if (folder / "closed").exists():
            (folder / "closed").chmod(0o755)
        shutil.rmtree(shared)
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 1, done.stderr
    assert done.stderr.splitlines() == [
        f"vftui: note: skipped 1 folder(s) under {folder} that cannot be read"
    ]


def test_prune_takes_no_folder(tmp_path):
    done = run_cli(["runs", "--prune", str(tmp_path)], tmp_path)
    assert done.returncode == 2 and "takes no FOLDER" in done.stderr


@pytest.mark.needs("sshd")
@pytest.mark.serial
def test_runs_host_folder_lists_the_runs_under_that_folder_on_each_host(hosts, tmp_path):  # noqa: F811
    ssh, _ = hosts
    home = Path.home() / f"vftui-folder-{tmp_path.name}"
    shutil.copytree(V1_RUN, home / "outputs" / "ref")
    shutil.copytree(V1_RUN, home.joinpath("outputs", *["d"] * (MAX_DEPTH + 1), "run"))
    try:
        args = ["runs", "--host", "fleet-a,fleet-b", "--remote-vftui", remote_vftui()]
        done = run_cli([*args, "--json", f"~/{home.name}/outputs"], tmp_path, VFTUI_SSH=ssh)
        assert done.returncode == 0, done.stderr
        assert sorted(
            done.stderr.splitlines()
        ) == [  # what each host noted reaches here (was dropped)
            f"vftui: note: {name}: did not look in 1 folder(s) more than {MAX_DEPTH} levels below "
            f"{home}/outputs"
            for name in ("fleet-a", "fleet-b")
        ]
        rows = [json.loads(line) for line in done.stdout.splitlines()]
        assert sorted((r["host"], r["kind"], r["groups_done"]) for r in rows) == [
            ("fleet-a", "verifiers v1", 3),
            ("fleet-b", "verifiers v1", 3),
        ]
        table = run_cli([*args, f"~/{home.name}/outputs"], tmp_path, VFTUI_SSH=ssh)
        assert table.stdout.splitlines()[0].split()[:3] == ["HOST", "KIND", "ID"]
        missing = run_cli([*args, "~/no such folder"], tmp_path, VFTUI_SSH=ssh)
        assert missing.returncode == 1 and len(missing.stderr.splitlines()) == 2
        assert all("no such folder" in line for line in missing.stderr.splitlines())
    finally:
        shutil.rmtree(home)


def test_the_folder_reaches_each_host_as_one_word_after_dashes(fleet_root):  # noqa: F811
    root, ssh = fleet_root
    host(root, "plain", "")
    done = run_cli(
        ["runs", "--host", "plain", "~/out puts", "--json"], root, timeout=60, VFTUI_SSH=ssh
    )
    assert done.returncode == 0, done.stderr
    assert (root / "plain/asked").read_text() == f"runs --json -- {root}/plain/out puts\n", (
        "~/ is the home there, the rest one word"
    )


def test_an_eval_whose_examples_failed_to_score_says_so_beside_its_reward(tmp_path):
    """An eval where 5 of 10 examples failed to score was listed as 'finished 10/10  1.000': its reward is over
    the other 5 alone. Its own runs and a folder's results both carry the count."""
    own = ended_run(tmp_path / "own", "vftui/alphabet-sort", "eval", 10, 10, 1.0, 1_700_000_400)
    (own.parent / "groups.eval").mkdir()
    failed = [{"item": n, "error": "flaky judge"} for n in range(5)]
    (own.parent / "groups.eval" / "metadata.json").write_text(json.dumps({"errors": failed}))
    folder = tmp_path / "out" / "vf"
    shutil.copytree(VF_EVAL, folder)
    with (folder / "results.jsonl").open("a") as f:
        f.write(json.dumps({"example_id": 0, "reward": None}) + "\n")  # example 0: no number
    for where in (own.parent, tmp_path / "out"):
        (row,) = listed(tmp_path, str(where))
        assert row["errors"] == (5 if where == own.parent else 1), row
        table = run_cli(["runs", str(where)], tmp_path).stdout
        assert f"({row['errors']} errors)" in table, table
