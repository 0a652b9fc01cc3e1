"""Without --tokenizer, a named endpoint's tokens and masks come from the served model's own tokenizer, or
the run is refused: a Llama endpoint's SFT data was tokenized with Qwen's (the old default, a guess)."""

from __future__ import annotations

import json
import shutil

import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import serve_app
from vftui.cli import main
from vftui.collector.served_tokenizer import served_tokenizer
from vftui.errors import UserError
from vftui.sim import server as sim

URL = "http://127.0.0.1:8001/v1"


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)


@pytest.mark.unit
def test_a_bare_model_name_is_refused_naming_tokenizer():
    with pytest.raises(UserError) as refused:
        served_tokenizer("my-llama", None, URL)
    assert str(refused.value) == (
        f"cannot tell which tokenizer the model 'my-llama' at {URL} uses: name it with --tokenizer "
        "(a Hugging Face name, a tokenizer folder, or the model's .gguf file)"
    )


@pytest.mark.unit
def test_what_the_server_loaded_comes_before_the_name_it_serves(tmp_path):
    folder = tmp_path / "llama"
    folder.mkdir()
    assert served_tokenizer("my-llama", str(folder), URL) == str(folder)
    assert served_tokenizer("my-llama", "meta-llama/Llama-3.2-1B", URL) == "meta-llama/Llama-3.2-1B"
    assert (
        served_tokenizer("org/alias", "meta-llama/Llama-3.2-1B", URL) == "meta-llama/Llama-3.2-1B"
    )


@pytest.mark.unit
def test_a_llama_cpp_server_s_gguf_and_a_hub_name_as_model_are_taken(tmp_path):
    gguf = tmp_path / "SmolLM2.gguf"
    gguf.write_bytes(b"GGUF")
    assert served_tokenizer(str(gguf), None, URL) == str(gguf)
    assert served_tokenizer("Qwen/Qwen2.5-0.5B-Instruct", None, URL) == "Qwen/Qwen2.5-0.5B-Instruct"


@pytest.mark.unit
def test_a_path_the_server_loaded_that_is_not_here_is_said():
    with pytest.raises(UserError) as refused:
        served_tokenizer("my-llama", "/models/llama", URL)
    assert "(it reports it loaded '/models/llama', no folder, .gguf file or Hub name here)" in str(
        refused.value
    )


@pytest.mark.unit
def test_a_folder_here_named_as_the_model_never_stands_in_for_what_the_server_loaded(
    tmp_path, monkeypatch
):
    """A probe's find: a folder in the current directory named like the model's alias won over the
    server's root, and its tokenizer made the run's tokens."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "smollm2").mkdir()
    for root in ("/nonexistent/Llama-3-8B", ".", "../x", "smollm2"):
        with pytest.raises(UserError, match="--tokenizer"):
            served_tokenizer("smollm2", root, URL)
    assert served_tokenizer("smollm2", "HuggingFaceTB/SmolLM2-135M", URL) == (
        "HuggingFaceTB/SmolLM2-135M"
    )
    with pytest.raises(UserError, match="--tokenizer"):
        served_tokenizer("smollm2", None, URL)  # a relative name is the server's, not this folder
    (tmp_path / "org").mkdir()
    (tmp_path / "org" / "model").mkdir()
    with pytest.raises(UserError, match="--tokenizer"):
        served_tokenizer("org/model", None, URL)  # a Hub name that is also a folder here: which?


@pytest.mark.unit
def test_names_no_file_system_takes_are_refused_in_one_short_sentence():
    for name in ("a" * 5000, "/" + "b" * 300, "x\0y"):
        with pytest.raises(UserError) as refused:
            served_tokenizer("llama", name, URL)
        assert "--tokenizer" in str(refused.value) and len(str(refused.value)) < 500


names = st.one_of(
    st.none(), st.text(max_size=40), st.from_regex(r"[a-z]{1,8}/[a-z.-]{1,8}", fullmatch=True)
)


@pytest.mark.unit
@given(model=st.text(min_size=1, max_size=40), root=names)
def test_never_a_tokenizer_the_server_did_not_name(model, root):
    try:
        chosen = served_tokenizer(model, root, URL)
    except UserError as refused:
        assert "--tokenizer" in str(refused)
    else:
        assert chosen in {model, root}


def endpoint_serving(listed: dict) -> web.Application:
    """The simulated endpoint's completions under another model's listing (vLLM's shape: ``root`` is what it
    loaded, ``id`` the name it serves it as)."""

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"object": "model", **listed}]})

    app = web.Application()
    app[sim.SIM] = sim.SimState(sim.SimSettings())
    app.add_routes(
        [web.get("/v1/models", models), web.post("/v1/chat/completions", sim.chat_completions)]
    )
    return app


def test_a_run_on_a_model_named_like_no_tokenizer_is_refused(capsys):
    with serve_app(endpoint_serving({"id": "my-llama"})) as base_url:
        code = main(
            ["run", "--no-ui", "--steps", "1", "--base-url", base_url, "--model", "my-llama"]
        )
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        f"vftui: error: cannot tell which tokenizer the model 'my-llama' at {base_url} uses: name it "
        "with --tokenizer (a Hugging Face name, a tokenizer folder, or the model's .gguf file)"
    )
    assert "Qwen" not in err


def test_a_run_takes_the_tokenizer_the_server_says_it_loaded(tmp_path, capsys):
    out = tmp_path / "groups.jsonl"
    listed = {"id": "served-name", "root": str(sim.TOKENIZER_DIR)}
    with serve_app(endpoint_serving(listed)) as base_url:
        code = main(
            [
                "run",
                "--no-ui",
                "--steps",
                "1",
                "--group-size",
                "2",
                "--base-url",
                base_url,
                "--out",
                str(out),
            ]
        )
    assert code == 0, capsys.readouterr().err
    record = json.loads(out.with_suffix(".run.json").read_text())
    assert record["model"] == "served-name" and record["tokenizer"] == str(sim.TOKENIZER_DIR)


def test_a_resume_from_another_folder_never_takes_another_tokenizer_of_the_same_name(
    tmp_path, capsys, monkeypatch
):
    """A probe's find: the run recorded 'smollm2', and a resume in another folder holding another
    'smollm2' appended groups tokenized with it to the same file."""
    for folder in ("a", "b"):
        shutil.copytree(sim.TOKENIZER_DIR, tmp_path / folder / "tok")
    out = tmp_path / "groups.jsonl"
    monkeypatch.chdir(tmp_path / "a")
    run = ["run", "--no-ui", "--steps", "2", "--group-size", "2", "--tokenizer", "tok"]
    assert main([*run, "--out", str(out)]) == 0, capsys.readouterr().err
    record = json.loads(out.with_suffix(".run.json").read_text())
    assert record["tokenizer"] == str(tmp_path / "a" / "tok")
    monkeypatch.chdir(tmp_path / "b")
    capsys.readouterr()
    assert main(["run", "--no-ui", "--resume", str(out), "--tokenizer", "tok"]) == 2
    assert "--resume: the run was collected with tokenizer " + str(tmp_path / "a" / "tok") in (
        capsys.readouterr().err
    )
