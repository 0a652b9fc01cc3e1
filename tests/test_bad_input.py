"""Every mistake a user can make gets one clear sentence and a non-zero exit."""

from __future__ import annotations

import pytest

from tests.conftest import free_port
from vftui.cli import main


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)


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
        (["--max-tokens", "0"], "invalid --max-tokens"),
        (["--mode", "dpo"], "invalid --mode"),
        (["--base-url", "localhost:8000"], "is not a URL like"),
        (["--base-url", "https://api.example.invalid/v1"], "no API key for api.example.invalid: set OPENAI_API_KEY"),
        (["--base-url", "https://api.example.invalid/v1", "--api-key-env", "MY_KEY"], "set MY_KEY"),
        (["--tokenizer", "no-such-owner/no-such-tokenizer"], "cannot load tokenizer 'no-such-owner/no-such-tokenizer'"),
        (["--env", "no-such-env"], "unknown environment 'no-such-env'; environments that can be loaded: alphabet-sort"),
        (["--env-args", '{"max_turns": 0}'], "environment 'alphabet-sort' did not load"),
        (["--env-args", '{"no_such_arg": 1}'], "environment 'alphabet-sort' did not load"),
    ],
)
def test_bad_flag(args, expected, capsys):
    fails_with(args, capsys, expected)


def test_step_count_is_named_in_the_message(capsys):
    line = fails_with(["--steps", "-3"], capsys, "invalid --steps")
    assert "greater than or equal to 1" in line


def test_unreachable_endpoint(capsys):
    nobody = free_port()  # free: nothing listens there
    fails_with(["--base-url", f"http://127.0.0.1:{nobody}/v1"], capsys, "cannot reach the endpoint")


def test_endpoint_that_is_not_an_openai_api(capsys, tmp_path):
    from aiohttp import web

    from tests.test_endpoint_failures import serve_app

    async def not_json(request):
        return web.Response(text="<html>hello</html>")

    app = web.Application()
    app.router.add_get("/v1/models", not_json)
    with serve_app(app) as base_url:
        fails_with(["--base-url", base_url], capsys, "did not answer like an OpenAI-compatible API")


def test_unwritable_output_folder(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    fails_with(["--out", str(blocker / "sub" / "groups.jsonl")], capsys, "cannot write to the output folder")


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
