"""--slurm: the inference servers found in a SLURM allocation as atroposlib finds them, on CPU.

A stand-in ``scontrol`` on PATH lists the allocation's nodes: a training node, then 127.0.0.1.
atroposlib puts ``8 // INFER_TP`` servers on each inference node at ports 9000, 9001, ...; with
INFER_TP=4 that is two, and simulated vLLM-style servers listen on exactly those ports.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import (
    Trainer,
    collector_process,
    read_jsonl,
    run_cli,
    sim_admin,
    unavailable,
    until,
)
from tests.test_health import text_of
from vftui.bounds import LARGE
from vftui.collector.rl import slurm
from vftui.config import RunConfig, load_config
from vftui.errors import UserError
from vftui.events import RunState
from vftui.sim.server import BackgroundSimServer
from vftui.text.printable import printable
from vftui.ui.app import VftuiApp
from vftui.ui.feeds import StartedRun
from vftui.ui.inbox import Inbox
from vftui.ui.screens.health import HealthScreen

NODELIST = "gpu[0-1]"  # a glob to a shell: atroposlib's unquoted scontrol call could expand it
NODES = ("trainer-0", "127.0.0.1")
SLURM_ENV = {"SLURM_JOB_NODELIST": NODELIST, "NUM_TRAINING_NODES": "1", "INFER_TP": "4"}
URLS = [
    "http://127.0.0.1:9000/v1",
    "http://127.0.0.1:9001/v1",
]  # atroposlib's ports 9000 + i, 8 // 4 of them
GROUP_SIZE, GROUPS = 4, 4


def stand_in_scontrol(folder: Path, nodes: tuple[str, ...] = NODES, exit_code: int = 0) -> Path:
    """A folder for PATH with an ``scontrol`` that lists ``nodes`` and keeps the node list it was given."""
    folder.mkdir(exist_ok=True)
    script = folder / "scontrol"
    listed = "".join(f"{node}\\n" for node in nodes)
    script.write_text(
        f'#!/bin/sh\n[ "$1 $2" = "show hostnames" ] || exit 64\nprintf "%s" "$3" > "{folder}/asked"\n'
        f'[ {exit_code} = 0 ] || {{ echo "scontrol: error: invalid node list" >&2; exit {exit_code}; }}\n'
        f'printf "{listed}"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return folder


def on_path(folder: Path) -> str:
    return f"{folder}{os.pathsep}{os.environ['PATH']}"


@pytest.fixture
def slurm_servers() -> Iterator[list[BackgroundSimServer]]:
    """Simulated vLLM-style servers on 127.0.0.1 at the ports atroposlib's layout gives the inference node."""
    servers: list[BackgroundSimServer] = []
    try:
        for index, url in enumerate(URLS):
            server = BackgroundSimServer(
                port=int(url.split(":")[-1].removesuffix("/v1")), seed=index
            )
            try:
                servers.append(server.start())
            except OSError as e:
                server.stop()
                unavailable(
                    f"{url} is where atroposlib's --slurm layout puts a server, and its port is taken: {e}"
                )
        yield servers
    finally:
        for server in servers:
            server.stop()


# -- finding the servers ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "extra", "urls"),
    [
        (NODES, {}, URLS),
        (NODES, {"INFER_TP": "8"}, URLS[:1]),
        (
            ("t", "a", "b"),
            {"INFER_TP": "2"},
            [f"http://{n}:{9000 + i}/v1" for n in "ab" for i in range(4)],
        ),
        (
            ("t", "a"),
            {"INFER_TP": None},
            [f"http://a:{9000 + i}/v1" for i in range(8)],
        ),  # atroposlib's default, 1
        (
            ("t", "a"),
            {"NUM_TRAINING_NODES": "0", "INFER_TP": "8"},
            ["http://t:9000/v1", "http://a:9000/v1"],
        ),
    ],
)
def test_the_servers_are_atroposlibs_layout_with_infer_tp_read_as_a_number(
    tmp_path, monkeypatch, nodes, extra, urls
):
    monkeypatch.setenv("PATH", on_path(stand_in_scontrol(tmp_path / "bin", nodes)))
    environ = {k: v for k, v in {**SLURM_ENV, **extra}.items() if v is not None}
    assert slurm.inference_urls(environ) == urls
    assert (tmp_path / "bin" / "asked").read_text() == NODELIST, (
        "the node list reaches scontrol as it is"
    )


@pytest.mark.unit
def test_the_start_line_lists_the_servers_by_node():
    urls = ["http://gpu-1:9000/v1", "http://gpu-1:9001/v1", "http://gpu-2:9000/v1"]
    assert slurm.described(urls) == (
        "3 inference servers in the SLURM allocation: gpu-1 (ports 9000, 9001); gpu-2 (port 9000)"
    )


@pytest.mark.parametrize(
    ("nodes", "extra", "exit_code", "sentence"),
    [
        (
            NODES,
            {"NUM_TRAINING_NODES": None},
            0,
            "--slurm needs NUM_TRAINING_NODES: how many of the allocation's",
        ),
        (
            NODES,
            {"NUM_TRAINING_NODES": "one"},
            0,
            "NUM_TRAINING_NODES must be a whole number of nodes, 0 or more, not 'one'",
        ),
        (
            NODES,
            {"INFER_TP": "16"},
            0,
            "INFER_TP must be the GPUs each inference server uses, a whole number from 1 "
            "to 8 (atroposlib runs 8 // INFER_TP servers on each inference node), not '16'",
        ),
        (NODES, {"INFER_TP": "0"}, 0, "INFER_TP must be the GPUs each inference server uses"),
        (
            ("gpu-0",),
            {},
            0,
            "the SLURM allocation has one node (gpu-0); --slurm trains on its first NUM_TRAINING_NODES "
            "nodes and serves inference on the rest, so it needs two or more",
        ),
        ((), {}, 0, "scontrol show hostnames gpu[0-1] listed no nodes"),
        (
            NODES,
            {},
            1,
            "scontrol show hostnames gpu[0-1] failed (exit 1): scontrol: error: invalid node list",
        ),
    ],
)
def test_an_allocation_it_cannot_use_is_one_sentence(
    tmp_path, monkeypatch, nodes, extra, exit_code, sentence
):
    monkeypatch.setenv("PATH", on_path(stand_in_scontrol(tmp_path / "bin", nodes, exit_code)))
    environ = {k: v for k, v in {**SLURM_ENV, **extra}.items() if v is not None}
    with pytest.raises(UserError) as refused:
        slurm.inference_urls(environ)
    assert str(refused.value).startswith(sentence)


def test_thousands_of_nodes_or_a_huge_one_are_named_in_a_sentence_of_a_line(tmp_path, monkeypatch):
    """scontrol's output was echoed whole: a 100,000-character node name made a 100 KB refusal, 5,000 training nodes
    a 49 KB one, and their servers a start line as long."""
    monkeypatch.setenv(
        "PATH", on_path(stand_in_scontrol(tmp_path / "bin", ("trainer-0", "a" * 100_000)))
    )
    with pytest.raises(UserError) as refused:
        slurm.inference_urls(SLURM_ENV)
    assert len(str(refused.value)) < 500 and f"listed '{'a' * 40}" in str(refused.value)
    nodes = tuple(f"gpu-{i}" for i in range(5000))
    monkeypatch.setenv("PATH", on_path(stand_in_scontrol(tmp_path / "many", nodes)))
    with pytest.raises(UserError) as refused:
        slurm.inference_urls({**SLURM_ENV, "NUM_TRAINING_NODES": "5000"})
    said = str(refused.value)
    assert len(said) < 500 and said.startswith(
        "the SLURM allocation's 5000 nodes (gpu-0, gpu-1, "
    ), said
    line = slurm.described(
        [f"http://gpu-{i}:{port}/v1" for i in range(5000) for port in (9000, 9001)]
    )
    assert len(line) < 500 and line.startswith(
        "10000 inference servers in the SLURM allocation: gpu-0 (ports 9000, "
    )
    nodes = tuple(
        f"gpu-{i}" for i in range(LARGE + 1)
    )  # a million took minutes and 8 GB in atroposlib's layout
    monkeypatch.setenv("PATH", on_path(stand_in_scontrol(tmp_path / "more", nodes)))
    with pytest.raises(
        UserError,
        match=f"listed {LARGE + 1:,} nodes, more than the {LARGE:,} an allocation can have",
    ):
        slurm.inference_urls(SLURM_ENV)


@pytest.mark.parametrize(
    "bad",
    [
        "-x",
        "user@host",
        "evil.example.com/#",
        "gpu\x1b]0;owned\x07",
        "gpu..1",
        "gpu-",
        "a" * 64,
        "gpu 1",
        "[::1]",
    ],
)
def test_a_node_name_that_is_no_host_name_refuses_the_allocation_naming_it(
    tmp_path, monkeypatch, bad
):
    monkeypatch.setenv("PATH", on_path(stand_in_scontrol(tmp_path / "bin", ("trainer-0", bad))))
    with pytest.raises(UserError) as refused:
        slurm.inference_urls(SLURM_ENV)
    said = str(refused.value)
    assert said.startswith(
        f"scontrol show hostnames gpu[0-1] listed {printable(bad)!r}, which is not a host name"
    )
    assert "\x1b" not in said and "\n" not in said


LABEL = st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(LABEL, min_size=1, max_size=4).map(".".join),
    st.text(max_size=30) | st.text(alphabet="aZ09-.@/#:_[]% \x1b\n", max_size=30),
)
def test_a_node_is_a_host_name_exactly_when_its_url_names_that_host(name, text):
    assert slurm.HOST_NAME.fullmatch(name) or len(name) > 253
    for node in (name, text, f"{name}{text}", f"{text}{name}"):
        if slurm.HOST_NAME.fullmatch(node):
            url = urlparse(f"http://{node}:9000/v1")
            assert (url.hostname, url.port, url.path) == (node.lower(), 9000, "/v1"), node
            assert not node.startswith(("-", ".")) and ".." not in node and "@" not in node
            assert all(1 <= len(label) <= 63 for label in node.split(".")) and len(node) <= 253


# -- the settings ---------------------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize(
    ("flags", "sentence"),
    [
        (
            {"mode": "sft"},
            "--slurm finds rl's inference servers in a SLURM allocation; sft mode takes one --base-url",
        ),
        (
            {"mode": "eval"},
            "--slurm finds rl's inference servers in a SLURM allocation; eval mode takes one --base-url",
        ),
        (
            {"mode": "rl", "base_url": "http://gpu-1:9000/v1"},
            "--slurm finds the inference servers in the SLURM allocation, so it takes no "
            "--base-url; give one or the other",
        ),
        (
            {"mode": "rl", "sim_latency": 1.0},
            "--sim-latency slows the embedded simulation; it does nothing to",
        ),
    ],
)
def test_slurm_is_for_rl_and_takes_no_base_url(flags, sentence):
    with pytest.raises(UserError) as refused:
        load_config({**flags, "slurm": True}, environ={})
    assert str(refused.value).startswith(sentence)


@pytest.mark.unit
def test_slurm_is_no_simulation():
    config = RunConfig(mode="rl", slurm=True)
    assert (
        not config.simulated
        and not config.runs_sim_trainer
        and config.endpoint == "SLURM allocation"
    )


@pytest.mark.unit
@pytest.mark.parametrize(
    ("saved", "flags", "after"),
    [
        ({"slurm": True}, {"base_url": "http://gpu-1:9000/v1"}, (False, "http://gpu-1:9000/v1")),
        (
            {"base_url": "http://gpu-1:9000/v1", "extra_base_urls": ["http://gpu-2:9000/v1"]},
            {"slurm": True},
            (True, None),
        ),
        ({"slurm": True}, {}, (True, None)),
    ],
)
def test_a_resumed_run_takes_its_servers_from_the_flag_that_names_them_anew(
    tmp_path, saved, flags, after
):
    out = tmp_path / "run" / "groups.jsonl"
    out.parent.mkdir()
    out.touch()
    config = {"mode": "rl", "env": "vftui/alphabet-sort", **saved}
    out.with_suffix(".run.json").write_text(json.dumps({"config": config}))
    resumed = load_config({"resume": out, **flags}, environ={})
    assert (resumed.slurm, resumed.base_url) == after and resumed.extra_base_urls == []


# -- a run ----------------------------------------------------------------------------------


def slurm_args(api_url: str, out: Path) -> list[str]:
    return [
        "run",
        "--mode",
        "rl",
        "--slurm",
        "--no-ui",
        "--steps",
        str(GROUPS),
        "--group-size",
        str(GROUP_SIZE),
        "--api-url",
        api_url,
        "--out",
        str(out),
    ]


@pytest.mark.xdist_group("slurm-ports")
def test_rl_collects_from_the_servers_of_the_slurm_allocation(slurm_servers, api, tmp_path):
    (tmp_path / "gpu1").touch()  # what a shell would put in place of the unquoted gpu[0-1]
    trainer = Trainer(api.api_url, batches=GROUPS // 2)
    out = tmp_path / "groups.jsonl"
    result = run_cli(
        slurm_args(api.api_url, out),
        tmp_path,
        PATH=on_path(stand_in_scontrol(tmp_path / "bin")),
        **SLURM_ENV,
    )
    trainer.thread.join(timeout=60)
    assert result.returncode == 0, result.stderr
    assert (
        "2 inference servers in the SLURM allocation: 127.0.0.1 (ports 9000, 9001)" in result.stderr
    )
    assert "endpoint SLURM allocation" in result.stderr
    assert len(trainer.groups) == len(read_jsonl(out)) == GROUPS, "every group reached the trainer"
    served = [
        sum(r.get("path") == "/generate" for r in sim_admin(s, "/sim/requests")["requests"])
        for s in slurm_servers
    ]
    assert all(n > 0 for n in served), f"atroposlib balanced both servers: {served}"
    assert json.loads(out.with_suffix(".run.json").read_text())["config"]["slurm"] is True


@pytest.mark.xdist_group("slurm-ports")
async def test_the_dashboard_lists_the_servers_with_their_nodes(
    slurm_servers, api, tmp_path, monkeypatch
):
    monkeypatch.setenv("PATH", on_path(stand_in_scontrol(tmp_path / "bin")))
    for name, value in SLURM_ENV.items():
        monkeypatch.setenv(name, value)  # the collector's process inherits them
    Trainer(api.api_url, batches=300)
    config = RunConfig(
        mode="rl",
        slurm=True,
        api_url=api.api_url,
        group_size=GROUP_SIZE,
        steps=500,
        out=tmp_path / "groups.jsonl",
    )
    inbox = Inbox()
    run = collector_process(config, inbox.put).start()
    try:
        app = VftuiApp(StartedRun(inbox, run))
        async with app.run_test(size=(120, 40)) as pilot:
            await until(
                lambda: app.model.state is RunState.RUNNING and app.model.groups_done > 0,
                pilot=pilot,
                timeout=120,
            )
            await pilot.press("h")
            await until(lambda: isinstance(app.screen, HealthScreen), pilot=pilot)

            def body() -> str:
                return text_of(app.screen.query_one("#health-body").render())

            await until(lambda: all(url in body() for url in URLS), pilot=pilot)
            await pilot.press("escape")
            run.controls.stop()
            await until(lambda: app.result is not None, pilot=pilot, timeout=90)
            await pilot.press("q")
    finally:
        run.close()


@pytest.mark.parametrize(
    ("env", "sentence"),
    [
        (
            {"SLURM_JOB_NODELIST": None},
            "--slurm finds the inference servers from SLURM_JOB_NODELIST, which is not set: "
            "run it inside a SLURM job (sbatch, salloc), or give --base-url instead",
        ),
        (
            {"PATH": os.environ["PATH"]},
            "--slurm lists the allocation's nodes with scontrol, which is not on PATH: run "
            "it on a node of the SLURM cluster, or give --base-url instead",
        ),
        (
            {"NUM_TRAINING_NODES": "2"},
            "the SLURM allocation's 2 nodes (trainer-0, 127.0.0.1) are all training nodes "
            "(NUM_TRAINING_NODES=2), so none is left for inference servers",
        ),
    ],
)
def test_an_allocation_without_inference_servers_is_refused_with_exit_2(tmp_path, env, sentence):
    if shutil.which("scontrol") is not None:
        pytest.skip("a real scontrol is on PATH here")
    out = tmp_path / "groups.jsonl"
    settings = {"PATH": on_path(stand_in_scontrol(tmp_path / "bin")), **SLURM_ENV, **env}
    result = run_cli(slurm_args("http://127.0.0.1:9", out), tmp_path, **settings)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1] == f"vftui: error: {sentence}"
    assert "Traceback" not in result.stderr and not out.exists(), "refused before any work"
