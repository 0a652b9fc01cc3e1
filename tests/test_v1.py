"""verifiers v1 tasksets: loading and --env-args, endless tasksets and resumes, failures that are not scores,
and the same rewards as verifiers' own v1 eval gives the same conversations."""

from __future__ import annotations

import functools
import inspect
import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import CLASSIC, read_jsonl, run_cli, shimmed_env
from tests.verifiers_reference import episodes
from vftui.collector.envs import loader, v1, v1_runner
from vftui.defaults import DEFAULT_ENV
from vftui.errors import UserError
from vftui.sim.server import BackgroundSimServer

PROBE = textwrap.dedent('''
    """A v1 taskset written for these tests: its config says how it misbehaves."""
    import itertools

    import verifiers.v1 as vf

    ASK = "Sort these names alphabetically: {names}"
    SYSTEM = ("Sort names alphabetically. Answer with the sorted names, one per line, inside "
              "<alphabetical_sorted> and </alphabetical_sorted> tags, and nothing else.")


    class ProbeTaskConfig(vf.TaskConfig):
        fail: str = ""  # setup, reward, runtime


    class ProbeData(vf.TaskData):
        names: list[str]


    class Tallies(vf.State):
        count: int = 0


    class Tally(vf.Toolset[vf.SharedToolsetConfig, Tallies]):
        TOOL_PREFIX = None

        @vf.tool
        def tally(self, name: str) -> int:
            """Count a name: how many this rollout has counted."""
            self.state.count += 1
            return self.state.count


    class ProbeTask(vf.Task[ProbeData, Tallies, ProbeTaskConfig]):
        @vf.metric
        async def tallies(self, trace: vf.Trace) -> float:
            return float(trace.state.count)

        async def setup(self, trace, runtime):
            if self.config.fail == "setup":
                raise RuntimeError("the tool server went away")
            if self.config.fail == "runtime":
                await runtime.run(["sh", "-c", "echo probe > probe.txt"], {})

        @vf.reward(weight=1.0)
        async def mentions_first(self, trace: vf.Trace) -> float:
            if self.config.fail == "reward":
                raise KeyError("judge_score")
            return float(min(self.data.names) in (trace.last_reply or ""))


    class ProbeConfig(vf.TasksetConfig):
        endless: bool = False
        shared_tools: bool = False
        task: ProbeTaskConfig = ProbeTaskConfig()


    class ProbeTaskset(vf.Taskset[ProbeTask, ProbeConfig]):
        def __init__(self, config):
            super().__init__(config)
            self.INFINITE = config.endless

        @classmethod
        def toolsets(cls, config):
            return [Tally(vf.SharedToolsetConfig())] if config.shared_tools else []

        def load(self):
            names = ["Ada", "Bo", "Cy", "Di", "Ed", "Flo"]
            count = itertools.count() if self.config.endless else range(4)
            for idx in count:
                picked = [names[(idx + k) % 6] for k in range(3)]
                yield ProbeTask(ProbeData(idx=idx, prompt=ASK.format(names=", ".join(picked)), system_prompt=SYSTEM,
                                          names=picked), self.config.task)


    __all__ = ["ProbeTaskset"]
''')


@pytest.fixture
def probe(tmp_path, monkeypatch) -> Path:
    """The probe taskset as an installed module (on PYTHONPATH for the CLI, on sys.path here)."""
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "v1_probe.py").write_text(PROBE)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])
    )
    return folder


# -- loading ---------------------------------------------------------------------------------


@pytest.mark.unit
def test_flat_env_args_go_to_the_taskset_its_tasks_or_the_env(probe):
    config = v1.env_config(
        "v1_probe",
        {"endless": True, "fail": "reward", "agent.max_turns": 3, "max_concurrent_agents": 2},
    )
    assert config == {
        "taskset": {"id": "v1_probe", "endless": True, "task": {"fail": "reward"}},
        "agent": {"max_turns": 3},
        "max_concurrent_agents": 2,
    }
    environment = loader.load("v1_probe", {"agent.max_turns": 3})
    assert environment.max_turns == 3 and environment.reward_function_names == ["mentions_first"]
    settings = r"no setting 'colour' \(--env-args\); its settings: endless, shared_tools, judges"
    with pytest.raises(UserError, match=settings):
        loader.load("v1_probe", {"colour": "blue"})


def test_an_endless_taskset_is_iterated_never_listed_and_finds_the_same_task_again(probe):
    environment = loader.load("v1_probe", {"endless": True})
    assert environment.size is None
    first = [environment.item(i)["task"].data.names for i in (0, 5, 9)]
    for _ in range(
        v1.RECENT_TASKS + 10
    ):  # far past the tasks kept: item 0 is read again from the stream
        environment.item(v1.RECENT_TASKS + 20)
    assert [environment.item(i)["task"].data.names for i in (0, 5, 9)] == first
    finite = loader.load("v1_probe", {})
    assert finite.size == 4 and finite.item(5)["example_id"] == 1, (
        "past the end: from the start again"
    )


# -- per-rollout work -------------------------------------------------------------------------

NAMES = st.sampled_from(["runtime", "trace", "task", "self", "state", "a", "b"])


@pytest.mark.unit
@settings(max_examples=200, deadline=None)
@given(names=st.lists(NAMES, unique=True, max_size=4), asked=st.integers(1, 3))
def test_whether_a_hook_takes_a_runtime_is_read_once_and_answered_as_inspect_answers(names, asked):
    space: dict = {}
    exec(f"def hook({', '.join(names)}): pass", space)  # a function of these parameters
    hook = space["hook"]
    plugged = functools.wraps(hook)(lambda *a, **k: hook(*a, **k))  # as verifiers plugs one
    callables = [hook, plugged]
    if names:  # the same function bound: its first parameter is the instance's
        callables.append(types.MethodType(hook, object()))
    for fn in callables * asked:
        assert v1_runner.takes_runtime(fn) == ("runtime" in inspect.signature(fn).parameters)


@pytest.mark.unit
def test_a_task_gets_a_runtime_only_when_a_hook_of_its_own_takes_one(probe):
    """``vf.Task``'s own setup and finalize take a runtime and do nothing with it: a runtime folder a
    rollout for them alone is work for nothing."""
    builtin = loader.load(DEFAULT_ENV, {}).item(0)["task"]
    assert not v1_runner.needs_runtime(builtin)
    probed = loader.load("v1_probe", {}).item(0)["task"]  # its own setup takes one
    assert v1_runner.needs_runtime(probed)


@pytest.mark.skipif(CLASSIC, reason="verifiers 0.3 runs classic environments (this is for 0.4)")
def test_a_classic_environment_on_verifiers_04_says_what_runs_it(tmp_path):
    result = run_cli(
        ["run", "--no-ui", "--env", "vftui/alphabet-sort-classic", "--steps", "1"], tmp_path
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "vftui: error: environment 'vftui/alphabet-sort-classic' is a classic verifiers environment "
        "(load_environment), which verifiers 0.4.0 no longer runs; install verifiers 0.3 beside vftui to run it "
        "(pip install 'vftui[classic]')"
    )


# -- runs ------------------------------------------------------------------------------------


def probe_run(tmp_path, sim, args: dict, *extra: str, steps: int = 3, **env: str):
    """The probe taskset run to its end; forked from the worker's imports unless ``env`` changes what they read
    (HOME: where verifiers keeps its runtimes)."""
    return run_cli(
        [
            "run",
            "--no-ui",
            "--json",
            "--env",
            "v1_probe",
            "--env-args",
            json.dumps(args),
            "--steps",
            str(steps),
            "--group-size",
            "2",
            "--retries",
            "1",
            "--base-url",
            sim.base_url,
            "--out",
            str(tmp_path / "groups.jsonl"),
            *extra,
        ],
        tmp_path,
        PYTHONPATH=os.environ["PYTHONPATH"],
        **env,
    )


def test_an_endless_taskset_runs_and_resumes_where_it_stopped(tmp_path, probe, sim):
    done = probe_run(tmp_path, sim, {"endless": True}, steps=3)
    assert done.returncode == 0, done.stderr
    resumed = run_cli(
        ["run", "--no-ui", "--resume", str(tmp_path / "groups.jsonl"), "--steps", "6"],
        tmp_path,
        PYTHONPATH=os.environ["PYTHONPATH"],
    )
    assert resumed.returncode == 0, resumed.stderr
    groups = read_jsonl(tmp_path / "groups.jsonl")
    assert sorted(g["vftui"]["example_id"] for g in groups) == list(range(6)), (
        "new tasks, none twice"
    )
    names = [min(m["content"] for m in g["messages"][0] if m["role"] == "user") for g in groups]
    assert len(set(names)) == 6


def test_a_reward_function_that_raises_drops_its_group_naming_it(tmp_path, probe, sim):
    result = probe_run(tmp_path, sim, {"fail": "reward"})
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert (
        "reward function 'mentions_first' failed in 2 groups in a row; last error: TaskError"
        in result.stderr
    )
    assert "KeyError: 'judge_score'" in result.stderr
    assert not read_jsonl(tmp_path / "groups.jsonl"), "a failed reward is not a score of 0"


def test_a_task_whose_setup_fails_is_a_failure_with_its_reason_not_a_zero(tmp_path, probe, sim):
    result = probe_run(tmp_path, sim, {"fail": "setup"})
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "the task's setup failed: RuntimeError: the tool server went away" in result.stderr
    assert not read_jsonl(tmp_path / "groups.jsonl")


def test_a_task_that_needs_a_runtime_gets_a_local_one_and_leaves_nothing_behind(
    tmp_path, probe, sim
):
    result = probe_run(tmp_path, sim, {"fail": "runtime"}, HOME=str(tmp_path / "home"))
    assert result.returncode == 0, result.stderr
    assert len(read_jsonl(tmp_path / "groups.jsonl")) == 3
    runtimes = tmp_path / "home" / ".cache" / "verifiers" / "runtimes" / "subprocess"
    assert not runtimes.exists() or not any(runtimes.iterdir()), (
        "each rollout's runtime folder is removed"
    )


def test_a_toolset_shared_by_the_taskset_keeps_each_rollouts_state_apart(tmp_path, probe, sim):
    result = probe_run(tmp_path, sim, {"shared_tools": True}, steps=4)
    assert result.returncode == 0, result.stderr
    for group in read_jsonl(tmp_path / "groups.jsonl"):
        assert [t["function"]["name"] for t in group["tools"]] == ["tally"]
        for messages, tallies in zip(
            group["messages"], group["vftui"]["metrics"]["tallies"], strict=True
        ):
            calls = [
                c for m in messages if m["role"] == "assistant" for c in m.get("tool_calls", [])
            ]
            results = [m["content"] for m in messages if m["role"] == "tool"]
            assert calls and tallies == len(calls), "one server for all rollouts, a count for each"
            assert results == [str(n) for n in range(1, len(calls) + 1)]


def test_the_temperature_reaches_the_endpoint_for_v1_rollouts(tmp_path, probe, sim):
    result = probe_run(tmp_path, sim, {}, "--temperature", "0.3")
    assert result.returncode == 0, result.stderr
    temperatures = {r["temperature"] for r in sim_requests(sim)}
    assert temperatures == {0.3}


def sim_requests(sim) -> list[dict]:
    import httpx

    return httpx.get(sim.base_url.removesuffix("/v1") + "/sim/requests", timeout=10).json()[
        "requests"
    ]


# -- the same rewards as verifiers' own eval ---------------------------------------------------------


@pytest.mark.serial
@pytest.mark.needs("uv")
@pytest.mark.parametrize(
    ("shim", "env_args"),
    [("vftui_shim_sort", {"max_turns": 2}), ("vftui_shim_tools", {})],
    ids=["scripted-turns", "tools"],
)
def test_rewards_equal_verifiers_own_eval_of_the_same_conversations(
    tmp_path, shim, env_args, verifiers_own_eval
):
    env = shimmed_env(tmp_path)
    tasks, rollouts = 2, 2  # as verifiers_own_eval runs them
    ours_sim = BackgroundSimServer(
        seed=0
    ).start()  # each run gets a fresh simulated model: the same answers
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "vftui",
                "run",
                "--no-ui",
                "--env",
                shim,
                "--env-args",
                json.dumps(env_args),
                "--steps",
                str(tasks),
                "--group-size",
                str(rollouts),
                "--base-url",
                ours_sim.base_url,
                "--out",
                str(tmp_path / "ours.jsonl"),
            ],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
    finally:
        ours_sim.stop()
    theirs_out = verifiers_own_eval(shim, env_args)
    ours = {}
    for group in read_jsonl(tmp_path / "ours.jsonl"):
        meta = group["vftui"]
        names = list(meta["metrics"])
        ours[meta["example_id"]] = sorted(
            (
                round(group["scores"][i], 6),
                tuple(round(meta["metrics"][n][i], 6) for n in names),
                meta["turns"][i],
                [m["content"] for m in group["messages"][i] if m["role"] == "assistant"],
            )
            for i in range(rollouts)
        )
    theirs: dict[int, list] = {}
    for episode in episodes(theirs_out):
        for trace in episode["traces"]:
            assert trace["ok"], trace.get("errors")
            rewards = {k: v for k, v in trace["rewards"].items() if v is not None}
            scores = {**{k: v["score"] for k, v in rewards.items()}, **(trace.get("metrics") or {})}
            total = sum(v["score"] * v["weight"] for v in rewards.values())
            assistant = [
                m["content"] or "" for m in trace_messages(trace) if m["role"] == "assistant"
            ]
            theirs.setdefault(episode["task"]["data"]["idx"], []).append(
                (
                    round(total, 6),
                    tuple(round(scores[n], 6) for n in names),
                    len(assistant),
                    assistant,
                )
            )
    assert ours == {idx: sorted(rows) for idx, rows in theirs.items()}


def trace_messages(trace: dict) -> list[dict]:
    """A saved trace's last branch, as the plain list of its messages."""
    from verifiers.v1.trace import Trace

    return [m.model_dump() for m in Trace.model_validate(trace).messages]


def test_an_unknown_env_lists_only_what_this_verifiers_runs():
    """A classic environment was offered on verifiers 0.4, which then refused it (a low of issue 42):
    listed where this verifiers runs classic ones (0.3), counted with what they need where it does not."""
    with pytest.raises(UserError) as said:
        loader.load("no-such-env", {})
    offered = str(said.value).split("environments that can be loaded: ", 1)[1]
    classic = ("vftui/alphabet-sort-classic (built in)", "vftui/alphabet-tools-classic (built in)")
    assert "vftui/alphabet-sort (built in)" in offered
    if loader.classic.available():
        assert all(name in offered for name in classic) and "need verifiers 0.3" not in offered
    else:
        assert not any(name in offered for name in classic)
        assert "classic ones need verifiers 0.3: pip install 'vftui[classic]'" in offered
