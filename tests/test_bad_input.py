"""Every mistake a user can make gets one clear sentence and a non-zero exit."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import free_port, run_cli, serve_app
from vftui.cli import main
from vftui.collector.envs import loader as env_loader
from vftui.errors import UserError
from vftui.ui.themes import load_theme

HUB = "it needs a dataset from the Hugging Face Hub, which cannot be reached here"
FAKE_ENVS = {
    # env id: (imports, body of load_environment); each raises what a real environment hits
    "fake-hub-offline": (
        "from huggingface_hub.errors import OfflineModeIsEnabled",
        "raise OfflineModeIsEnabled('Cannot reach https://huggingface.co: offline mode is enabled.')",
    ),
    "fake-hub-not-cached": (
        "from huggingface_hub import hf_hub_download",
        "hf_hub_download('vftui-tests/no-such-data', 'train.parquet', repo_type='dataset', "
        "local_files_only=True)",
    ),
    # datasets 5's own words when the Hub is offline or unreachable
    "fake-datasets-unreachable": (
        "",
        "raise ConnectionError(\"Couldn't reach 'owner/data' on the Hub (Offline...)\")",
    ),
    "fake-requests-down": (
        "import requests",
        "raise requests.ConnectionError('Max retries exceeded with url: /data')",
    ),
    "fake-optional-dep": ("", "import vftui_no_such_dep.judge"),
    "fake-dep-at-import": ("import vftui_no_such_dep_either", "pass"),
    "fake-newer-verifiers": ("from verifiers.utils.tool_registry import register_tool", "pass"),
    "fake-key-error": ("", "return vf.SingleTurnEnv(dataset=kwargs['dataset'])"),
    "fake-missing-api-key": ("", "vf.ensure_keys(['VFTUI_TEST_JUDGE_KEY'])"),
    "fake-file-missing": ("", "open('/nonexistent/vftui/data.json')"),
}


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def fake_envs(tmp_path, monkeypatch):
    """Installed verifiers environments whose load_environment fails, one module each."""
    folder = tmp_path / "site"
    folder.mkdir()
    for env_id, (imports, body) in FAKE_ENVS.items():
        source = (
            f"import verifiers as vf\n{imports}\n\n\ndef load_environment(**kwargs):\n    {body}\n"
        )
        (folder / f"{env_loader.module_name(env_id)}.py").write_text(source)
    monkeypatch.syspath_prepend(str(folder))
    yield
    for env_id in FAKE_ENVS:
        sys.modules.pop(env_loader.module_name(env_id), None)


def fails_with(args: list[str], capsys, expected: str) -> str:
    code = main(["run", "--no-ui", "--steps", "1", *args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("vftui: error: ") and expected in last, last
    return last


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--env-args", "{max_turns: 3}"], "invalid --env-args: it is not valid JSON"),
        (["--env-args", "[1, 2]"], "invalid --env-args: it must be a JSON object"),
        (["--group-size", "0"], "invalid --group-size"),
        (["--steps", "0"], "invalid --steps"),
        (["--temperature", "2.5"], "invalid --temperature"),
        (["--temperature", "-0.1"], "invalid --temperature"),
        (["--temperature", "nan"], "invalid --temperature: Input should be a finite number"),
        (["--temperature=-inf"], "invalid --temperature: Input should be a finite number"),
        (["--max-tokens", "0"], "invalid --max-tokens"),
        (["--mode", "dpo"], "invalid --mode"),
        (["--base-url", "localhost:8000"], "is not a URL like"),
        (
            ["--base-url", "https://api.example.invalid/v1"],
            "no API key for api.example.invalid: set OPENAI_API_KEY",
        ),
        (["--base-url", "https://api.example.invalid/v1", "--api-key-env", "MY_KEY"], "set MY_KEY"),
        (
            ["--tokenizer", "no-such-owner/no-such-tokenizer"],
            "cannot load tokenizer 'no-such-owner/no-such-tokenizer'",
        ),
        (
            ["--env", "no-such-env"],
            "environment 'no-such-env' is not installed (no module no_such_env); environments "
            "that can be loaded: vftui/alphabet-sort (built in)",
        ),
        (
            ["--env-args", '{"max_turns": 0}'],
            "invalid --env-args for 'vftui/alphabet-sort': max_turns: Input should be greater than or equal to 1",
        ),
        (
            ["--env-args", '{"no_such_arg": 1}'],
            "environment 'vftui/alphabet-sort' has no setting 'no_such_arg' "
            "(--env-args); its settings: num_examples, min_names, max_names, max_turns, seed",
        ),
        (
            ["--env", "vftui/alphabet-sort-classic", "--env-args", '{"max_turns": 0}'],
            "environment 'vftui/alphabet-sort-classic' did not load with "
            "--env-args '{\"max_turns\": 0}': alphabet-sort needs",
        ),
        (
            ["--env", "fake-hub-offline"],
            f"environment 'fake-hub-offline' did not load: {HUB} (OfflineModeIsEnabled",
        ),
        (
            ["--env", "fake-hub-not-cached"],
            f"environment 'fake-hub-not-cached' did not load: {HUB} (LocalEntry",
        ),
        (
            ["--env", "fake-datasets-unreachable"],
            f"did not load: {HUB} (ConnectionError: Couldn't reach 'owner/data'",
        ),
        (
            ["--env", "fake-requests-down", "--env-args", '{"split": "test"}'],
            f"'fake-requests-down' did not load with --env-args '{{\"split\": \"test\"}}': {HUB}",
        ),
        (
            ["--env", "fake-hub-offline"],
            "point it at a local dataset with --env-args, or download the dataset",
        ),
        (
            ["--env", "fake-optional-dep"],
            "environment 'fake-optional-dep' did not load: it needs the Python module "
            "'vftui_no_such_dep', which is not installed; install it (e.g. pip install vftui_no_such_dep)",
        ),
        (
            ["--env", "fake-dep-at-import"],
            "it needs the Python module 'vftui_no_such_dep_either', which is not",
        ),
        (
            ["--env", "fake-newer-verifiers"],
            "it needs 'verifiers.utils.tool_registry', which verifiers 0.",
        ),
        (
            ["--env", "fake-key-error"],
            "environment 'fake-key-error' did not load: KeyError: 'dataset'",
        ),
        (
            ["--env", "fake-missing-api-key"],
            "did not load: Missing required environment variable(s): VFTUI_TEST_JUDGE",
        ),
        (
            ["--env", "fake-file-missing"],
            "did not load: FileNotFoundError: [Errno 2] No such file or directory",
        ),
    ],
)
def test_bad_flag(args, expected, capsys, fake_envs):
    fails_with(args, capsys, expected)


def test_step_count_is_named_in_the_message(capsys):
    line = fails_with(["--steps", "-3"], capsys, "invalid --steps")
    assert "greater than or equal to 1" in line


def test_unreachable_endpoint(capsys, tmp_path):
    nobody = free_port()  # free: nothing listens there
    fails_with(["--base-url", f"http://127.0.0.1:{nobody}/v1"], capsys, "cannot reach the endpoint")
    runs = tmp_path / "data" / "vftui" / "runs"
    assert not list(runs.glob("*")), "a refused run leaves no run folder (it had left an empty one)"


def test_a_refused_run_leaves_none_of_the_folders_it_made_for_its_out(capsys, tmp_path):
    """They were left behind, empty; one that was there already, and anything in it, stays."""
    there = tmp_path / "there"
    (there / "theirs").mkdir(parents=True)
    out = there / "new" / "deeper" / "groups.jsonl"
    fails_with(["--env", "no-such-env", "--out", str(out)], capsys, "is not installed")
    assert sorted(p.name for p in there.rglob("*")) == ["theirs"]


def test_an_https_url_of_a_plain_http_server_says_so(capsys, monkeypatch):
    """It was 'connection refused or no route', for a server that did answer (and for a certificate not trusted, or
    a host name that does not resolve)."""
    from aiohttp import web

    with serve_app(web.Application()) as base_url:
        https = base_url.replace("http://", "https://")
        fails_with(
            ["--base-url", https],
            capsys,
            f"cannot reach the endpoint at {https}: the TLS handshake failed (",
        )
    monkeypatch.setenv("OPENAI_API_KEY", "x")  # a key, as any host but this one needs
    line = fails_with(
        ["--base-url", "http://no-such-host.invalid/v1"],
        capsys,
        "cannot reach the endpoint at http://",
    )
    assert "no-such-host.invalid" in line and "connection refused" not in line


@pytest.mark.serial
def test_an_endpoint_that_redirects_is_followed_and_one_that_never_ends_its_answer_is_refused_within_seconds(
    capsys,
):
    """As the OpenAI client follows a redirect, so does the first look at /models (it refused a 308 as 'not an
    OpenAI-compatible API'); a model list that trickles a byte every 2 s kept it reading for ever."""
    import asyncio

    from aiohttp import web

    from vftui.collector import endpoint

    async def moved(request):
        raise web.HTTPPermanentRedirect("/api/v1/models")

    async def models(request):
        return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})

    async def trickling(request):
        response = web.StreamResponse()
        await response.prepare(request)
        for _ in range(60):
            await response.write(b" ")
            await asyncio.sleep(2)
        return response

    app = web.Application()
    app.router.add_get("/v1/models", moved)
    app.router.add_get("/api/v1/models", models)
    with serve_app(app) as base_url:
        assert endpoint.probe(base_url, "x").models == ["m"]
    app = web.Application()
    app.router.add_get("/v1/models", trickling)
    with serve_app(app) as base_url:
        started = time.monotonic()
        fails_with(
            ["--base-url", base_url],
            capsys,
            f"the endpoint at {base_url} did not answer within 10 s",
        )
        assert time.monotonic() - started < 40


def test_endpoint_that_is_not_an_openai_api(capsys, tmp_path):
    from aiohttp import web

    async def not_json(request):
        return web.Response(text="<html>hello</html>")

    app = web.Application()
    app.router.add_get("/v1/models", not_json)
    with serve_app(app) as base_url:
        fails_with(
            ["--base-url", base_url],
            capsys,
            f"the endpoint at {base_url} answered with a web page (HTTP 200 for /models), not an "
            "OpenAI-compatible API",
        )


@pytest.mark.parametrize("answer", ["models", "key refused"])
def test_a_base_url_without_v1_of_an_api_at_v1_says_to_add_it(capsys, answer):
    """A vLLM at http://host:8001 (no /v1): 'name the model with --model (... offers: none listed)', and with
    --model the run went on to fail on every request."""
    from aiohttp import web

    async def models(request):
        if answer == "key refused":
            return web.json_response({"error": "bad key"}, status=401)
        return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})

    async def not_found(request):
        return web.json_response({"detail": "Not Found"}, status=404)

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_get("/models", not_found)
    with serve_app(app) as v1_url:
        base_url = v1_url.removesuffix("/v1")
        for model in ([], ["--model", "m"]):
            fails_with(
                ["--base-url", base_url, *model],
                capsys,
                f"no OpenAI-compatible API answers at {base_url}, but one answers at {v1_url}: add "
                "/v1 to --base-url",
            )


def test_a_plain_web_server_is_said_to_be_one(capsys):
    """A web server that is no OpenAI API (python -m http.server: a 404 page for GET, 501 for POST) was taken
    for one with no models listed; with --model the run failed later as 'InternalServerError: <!DOCTYPE
    HTML>...'."""
    from aiohttp import web

    page = "<!DOCTYPE HTML>\n<html><head><title>Error response</title></head></html>\n"

    async def error_page(request):
        status = 404 if request.method == "GET" else 501
        return web.Response(text=page, status=status, content_type="text/html")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", error_page)
    with serve_app(app) as v1_url:
        for base_url in (v1_url, v1_url.removesuffix("/v1")):
            for model in ([], ["--model", "m"]):
                line = fails_with(
                    ["--base-url", base_url, *model],
                    capsys,
                    f"the endpoint at {base_url} answered with a web page (HTTP 404 for /models), not "
                    "an OpenAI-compatible API: give --base-url the model server's address",
                )
                assert "add /v1" not in line


def test_unwritable_output_folder(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    fails_with(
        ["--out", str(blocker / "sub" / "groups.jsonl")],
        capsys,
        "cannot write to the output folder",
    )


def test_config_file_that_does_not_parse(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("group_size = = 4\n")
    fails_with(["--config", str(bad)], capsys, "does not parse as TOML")


def test_config_file_with_bad_value_names_its_source(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text("group-size = 0\n")
    fails_with(["--config", str(cfg)], capsys, f"invalid --group-size (in {cfg})")


def test_env_var_with_bad_value_names_its_source(monkeypatch, capsys):
    monkeypatch.setenv("VFTUI_TEMPERATURE", "9")
    fails_with([], capsys, "invalid --temperature (from VFTUI_TEMPERATURE)")


def test_resume_of_something_that_is_not_a_run(tmp_path, capsys):
    fails_with(["--resume", str(tmp_path)], capsys, "found no run there")


USERS_CLASSIC = "def load_environment(**kwargs):\n    raise RuntimeError('the installed alphabet_sort was loaded')\n"
USERS_V1 = """
import verifiers.v1 as vf


class SortData(vf.TaskData):
    names: list[str] = []


class SortTask(vf.Task[SortData]):
    @vf.reward(weight=1.0)
    async def users_own_reward(self, trace: vf.Trace) -> float:
        return 1.0


class SortConfig(vf.TasksetConfig):
    dataset_name: str = "the user's"


class SortTaskset(vf.Taskset[SortTask, SortConfig]):
    def load(self):
        yield SortTask(SortData(idx=0, prompt="Sort: Bo, Al"), self.config.task)


__all__ = ["SortTaskset"]
"""


@pytest.mark.parametrize("kind", ["classic", "v1"])
def test_a_built_in_never_stands_in_for_a_users_environment(tmp_path, monkeypatch, capsys, kind):
    """``alphabet-sort`` is the user's installed alphabet_sort (classic or v1); ours is ``vftui/alphabet-sort``."""
    site = tmp_path / "site"
    (site / "alphabet_sort-0.1.dist-info").mkdir(parents=True)
    (site / "alphabet_sort-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: alphabet-sort\nVersion: 0.1\nRequires-Dist: verifiers\n"
    )
    (site / "alphabet_sort.py").write_text(USERS_CLASSIC if kind == "classic" else USERS_V1)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "alphabet_sort", raising=False)
    try:
        assert "alphabet-sort" in env_loader.installed_environments()
        for env_id in ("alphabet-sort", "primeintellect/alphabet-sort"):
            if kind == "classic":
                with pytest.raises(UserError, match="the installed alphabet_sort was loaded"):
                    env_loader.load(env_id, {"dataset_name": "x"})
            else:
                environment = env_loader.load(env_id, {"dataset_name": "./data"})
                assert environment.reward_function_names == ["users_own_reward"]
        ours = env_loader.load("vftui/alphabet-sort", {})
        assert sorted(ours.reward_function_names) == ["format_ok", "sorted_correctly"]
    finally:
        sys.modules.pop(
            "alphabet_sort", None
        )  # not monkeypatch's delitem: its undo would put the module back
    assert (
        main(
            [
                "run",
                "--no-ui",
                "--steps",
                "1",
                "--group-size",
                "2",
                "--out",
                str(tmp_path / "g.jsonl"),
            ]
        )
        == 0
    ), capsys.readouterr().err


def test_an_environment_that_is_not_installed_is_named_with_what_can_be_loaded(capsys):
    for env_id in ("alphabet-sort", "primeintellect/alphabet-sort"):
        said = f"environment '{env_id}' is not installed (no module alphabet_sort)"
        line = fails_with(["--env", env_id], capsys, said)
        assert (
            "vftui/alphabet-sort (built in)" in line and "vftui/alphabet-tools (built in)" in line
        )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--window", "-5"], "invalid --window: Input should be greater than or equal to 1"),
        (["--temperature", "9"], "invalid --temperature: Input should be less than or equal to 2"),
        (["--mode", "dpo"], "invalid --mode"),
    ],
)
def test_resume_with_a_bad_setting(args, expected, tmp_path, capsys):
    out = tmp_path / "x" / "groups.jsonl"
    assert main(["run", "--no-ui", "--steps", "1", "--group-size", "2", "--out", str(out)]) == 0
    capsys.readouterr()
    fails_with(["--resume", str(out.parent), *args], capsys, expected)


def test_config_file_that_is_not_utf8(tmp_path, capsys):
    bad = tmp_path / "latin1.toml"
    bad.write_bytes("group-size = 4 # caf\xe9\n".encode("latin-1"))
    fails_with(["--config", str(bad)], capsys, "is not UTF-8 text")


def test_a_config_file_or_theme_that_is_a_fifo_is_refused_not_waited_on(tmp_path, capsys):
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)  # nobody writes to it: a read would wait for ever
    fails_with(
        ["--config", str(fifo)],
        capsys,
        f"cannot read the config file {fifo}: it is a FIFO, not a regular file",
    )
    with pytest.raises(UserError) as refused:
        load_theme(fifo)
    assert str(refused.value) == f"cannot read theme file {fifo}: it is a FIFO, not a regular file"


def test_config_file_whose_run_is_not_a_table(tmp_path, capsys):
    bad = tmp_path / "c.toml"
    bad.write_text("run = 3\n")
    fails_with(["--config", str(bad)], capsys, "'run' must be a table")


def test_a_number_too_big_for_any_run(monkeypatch, capsys):
    monkeypatch.setenv("VFTUI_WINDOW", "9" * 20)
    fails_with(
        [],
        capsys,
        "invalid --window (from VFTUI_WINDOW): Input should be less than or equal to 100000",
    )


def test_out_that_is_not_a_regular_file(capsys):
    fails_with(["--out", "/dev/null"], capsys, "--out /dev/null is not a regular file")
    assert not any(p.name.startswith("null.") for p in Path("/dev").iterdir())


def test_out_whose_name_does_not_end_in_jsonl_is_refused_before_it_shares_another_runs_side_files(
    finished_run, capsys
):
    """A run's side files take its name less its suffix: --out groups.v2 wrote groups.run.json, .checkpoint.json and
    .html over those of groups.jsonl's finished run, and neither could be resumed (--resume finds a .jsonl)."""
    side = {p.name: p.read_bytes() for p in finished_run.parent.iterdir()}
    elsewhere = finished_run.parent / "g"
    for args in (
        ["--out", str(finished_run.with_suffix(".v2"))],
        ["--detach", "--out", str(elsewhere)],
    ):
        out = Path(args[-1])
        fails_with(
            args, capsys, f"--out {out}: a run's file must end in .jsonl (e.g. --out {out}.jsonl)"
        )
    assert {p.name: p.read_bytes() for p in finished_run.parent.iterdir()} == side, (
        "nothing written"
    )


def test_view_of_a_folder(tmp_path, capsys):
    assert main(["view", str(tmp_path)]) == 2
    said = f"vftui: error: {tmp_path} holds no run, eval, vf-eval results or verifiers traces; name a .jsonl file"
    assert capsys.readouterr().err.strip() == said


@pytest.fixture
def finished_run(tmp_path):
    out = tmp_path / "x" / "groups.jsonl"
    assert main(["run", "--no-ui", "--steps", "2", "--group-size", "2", "--out", str(out)]) == 0
    return out


def test_resume_with_a_damaged_checkpoint(finished_run, capsys):
    finished_run.with_suffix(".checkpoint.json").write_text('{"done_below": "many"')
    fails_with(["--resume", str(finished_run)], capsys, "the checkpoint")
    finished_run.with_suffix(".checkpoint.json").write_text("[1, 2]")
    line = fails_with(
        ["--resume", str(finished_run)], capsys, "is damaged (it is not a JSON object); remove it"
    )
    assert "groups dropped before would be collected again" in line


@pytest.mark.parametrize(
    ("first_line", "expected"),
    [
        (
            b'{"tokens": [[1]], "masks": [[1]], "scores": [1.0], "vftui": [1]}\n',
            "line 1 of {out} is not a group vftui can read (ValueError: its 'vftui' is not an object)",
        ),
        (
            b'{"tokens": [[1]], "masks": [[1]], "scores": [1.0], "note": "\xff\xfe"}\n',
            "line 1 of {out} is not UTF-8 text",
        ),
        (
            b'{"tokens": [[1]], "masks": [[1]], "scores": [NaN]}\n',
            "line 1 of {out} is not strict JSON (NaN is not JSON)",
        ),
    ],
    ids=["meta-not-object", "not-utf8", "nan"],
)
def test_resume_refuses_a_file_with_a_bad_line(finished_run, capsys, first_line, expected):
    finished_run.write_bytes(first_line + finished_run.read_bytes())
    line = fails_with(["--resume", str(finished_run)], capsys, expected.format(out=finished_run))
    assert "only a torn last line is cut" in line


def test_resume_still_cuts_a_torn_last_line_that_is_not_utf8(finished_run, capfd):
    """(capfd: a headless run writes its lines to the stderr descriptor it kept before capturing the run's output)"""
    whole = finished_run.read_bytes()
    torn = b'{"tokens": [[1, \xff'
    finished_run.write_bytes(whole + torn)
    assert main(["run", "--no-ui", "--resume", str(finished_run), "--steps", "3"]) == 0
    assert f"cut a torn last line ({len(torn)} bytes)" in capfd.readouterr().err
    assert (
        finished_run.read_bytes().startswith(whole) and finished_run.read_bytes().count(b"\n") == 3
    )


def test_wandb_without_a_login_is_refused_before_any_work(tmp_path):
    result = run_cli(
        ["run", "--no-ui", "--steps", "1", "--wandb", "--out", str(tmp_path / "g.jsonl")],
        tmp_path,
        WANDB_MODE=None,
        HOME=str(tmp_path),
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "vftui: error: --wandb needs a W&B login: run `wandb login` (or set WANDB_API_KEY), "
        "or set WANDB_MODE=offline to log to local files"
    )
    assert not (tmp_path / "g.jsonl").exists()


def test_true_or_false_is_no_number_in_a_config_file_or_theme(tmp_path, capsys):
    config = tmp_path / "config.toml"
    config.write_text("group-size = true\n")  # pydantic would read it as 1
    said = fails_with(
        ["--config", str(config)], capsys, "true or false is not a value of this setting"
    )
    assert "group-size" in said or "group_size" in said, said
    (tmp_path / "theme.toml").write_text(
        'primary = "#ff0000"\ndark = "false"\n'
    )  # a non-empty string is true
    with pytest.raises(UserError, match="dark must be true or false"):
        load_theme(tmp_path / "theme.toml")


@pytest.mark.unit
def test_a_mistyped_flag_is_named_with_the_flag_meant(capsys):
    with pytest.raises(SystemExit) as ended:
        main(["run", "--temprature", "0.5", "--stpes=3", "--bogus"])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert ended.value.code == 2
    assert last == (
        "vftui: error: unrecognized arguments: --temprature 0.5 --stpes=3 --bogus "
        "(did you mean --temperature, --steps?)"
    )
    with pytest.raises(SystemExit):
        main(["compare", "a", "--fail-if-wrose", "0.1"])
    assert "(did you mean --fail-if-worse?)" in capsys.readouterr().err


def test_a_run_id_that_names_no_run_or_several_is_said_as_such(tmp_path, capsys):
    """'abc123: no such file or folder' hid that it was read as an id too."""
    from vftui.run_files import index
    from vftui.run_files.files import RunFiles

    assert main(["view", "abc123"]) == 2
    assert capsys.readouterr().err.strip() == (
        "vftui: error: abc123: no such file or folder, and no run has that id (vftui runs lists "
        "the ids)"
    )
    by_prefix: dict[str, RunFiles] = {}
    for n in range(5000):  # two runs whose ids share their first four digits
        files = RunFiles(tmp_path / f"run-{n}" / "groups.jsonl")
        files.jsonl.parent.mkdir()
        files.jsonl.write_text("")
        if (twin := by_prefix.setdefault(files.digest[:4], files)) is not files:
            index.remember(twin)
            index.remember(files)
            break
    prefix = files.digest[:4]
    assert main(["view", prefix]) == 2
    assert capsys.readouterr().err.strip() == (
        f"vftui: error: {prefix}: 2 runs have ids that start with it; give more of the id "
        "(vftui runs lists them)"
    )
    assert main(["view", prefix.upper()]) == 2, "an id in capitals is the same id"
    assert "2 runs have ids that start with it" in capsys.readouterr().err
    for command in ("view", "attach"):  # too short to be an id: said so, not "not a vftui run"
        assert main([command, files.digest[:3]]) == 2
        assert capsys.readouterr().err.strip() == (
            f"vftui: error: {files.digest[:3]}: no such file or folder; a run id takes at least 4 of "
            "its characters (vftui runs lists the ids)"
        )


@pytest.mark.parametrize("command", ["view", "report", "attach", "compare"])
def test_a_name_too_long_for_the_file_system_is_one_sentence(command, capsys):
    """A probe's find: a 306-character id crashed each of them with OSError: File name too long."""
    name = "251bb4" + "0" * 300
    code = main([command, name, name] if command == "compare" else [command, name])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert err.strip().startswith("vftui: error: 251bb4") and len(err) < 400, err


def test_attach_to_an_empty_name_is_refused_as_the_other_commands_refuse_it(capsys):
    """A probe's find: attach "" read the current folder and attached to a run there."""
    with pytest.raises(SystemExit) as ended:
        main(["attach", ""])
    assert ended.value.code == 2 and "an empty path names nothing" in capsys.readouterr().err
