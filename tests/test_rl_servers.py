"""rl refuses, within seconds and in one sentence, an inference server atroposlib cannot drive: one without
/health (llama.cpp's OpenAI-compatible server, Ollama, a hosted API), one without a token-level /generate,
one whose /generate gives no token ids and logprobs. Each is a server on loopback that answers as such a
server does; the simulated vLLM-style server, which has both, is driven by every other rl test."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import free_port, run_cli, serve_app
from vftui.collector.rl import server_check
from vftui.errors import UserError
from vftui.sim.server import TOKENIZER_DIR

ANSWER = {
    "id": "c",
    "object": "chat.completion",
    "model": "tiny",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "<alphabetical_sorted>a</alphabetical_sorted>",
            },
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


def openai_server(health: bool = False, generate=None) -> web.Application:
    """An OpenAI-compatible server (a model list and chat completions), with a /health and a /generate if given."""

    async def models(request):
        return web.json_response({"object": "list", "data": [{"id": "tiny", "object": "model"}]})

    async def chat(request):
        return web.json_response(ANSWER)

    async def healthy(request):
        return web.Response(text="")

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    if health:
        app.router.add_get("/health", healthy)
    if generate is not None:
        app.router.add_post("/generate", generate)
    return app


def answering(body: dict):
    async def generate(request):
        return web.json_response(body)

    return generate


def refused_rl(tmp_path, app: web.Application, *extra: str) -> str:
    """``vftui run --mode rl`` against ``app``: its one-sentence refusal, after checking it came within seconds."""
    out = tmp_path / "groups.jsonl"
    with serve_app(app) as base_url:
        started = time.monotonic()
        result = run_cli(
            [
                "run",
                "--mode",
                "rl",
                "--no-ui",
                "--steps",
                "2",
                "--base-url",
                base_url,
                "--api-url",
                f"http://127.0.0.1:{free_port()}",
                "--tokenizer",
                str(TOKENIZER_DIR),
                "--out",
                str(out),
                *extra,
            ],
            tmp_path,
            timeout=120,
        )
        took = time.monotonic() - started
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and not out.exists(), "refused before any work"
    assert took < 60, (
        f"refused only after {took:.0f} s"
    )  # it waited 400 s, then timed out every group
    return result.stderr.strip().splitlines()[-1]


def test_a_server_without_health_is_refused_naming_what_rl_needs_and_what_to_use_instead(tmp_path):
    said = refused_rl(tmp_path, openai_server())
    assert (
        said.startswith("vftui: error: the inference server at http://127.0.0.1:")
        and "has no /health (HTTP 404)" in said
    )
    assert "vLLM or SGLang" in said and "token ids and logprobs" in said and "--mode sft" in said


def test_a_server_without_a_token_level_generate_is_refused(tmp_path):
    said = refused_rl(tmp_path, openai_server(health=True))
    assert "has no token-level /generate (HTTP 404)" in said and "vLLM or SGLang" in said


def test_a_generate_without_logprobs_is_refused_naming_them(tmp_path):
    said = refused_rl(tmp_path, openai_server(health=True, generate=answering({"text": ["a"]})))
    assert "answered /generate without logprobs (each generated token's id and logprob)" in said


def test_a_vllm_server_asked_as_sglang_is_refused_asking_about_the_server_type(tmp_path):
    async def vllm_only(request):  # as a vLLM-style /generate answers SGLang's request
        return web.json_response(
            {"error": "expected {'prompt': {'prompt_token_ids': [...]}, ...}"}, status=400
        )

    said = refused_rl(
        tmp_path, openai_server(health=True, generate=vllm_only), "--server-type", "sglang"
    )
    assert (
        "refused a one-token /generate as sglang (HTTP 400" in said
        and "is --server-type right?" in said
    )


@pytest.mark.unit
@pytest.mark.parametrize(
    ("server_type", "body"),
    [
        ("vllm", {"text": ["a"], "logprobs": [[[{"17": -0.5}]]], "finish_reasons": ["length"]}),
        (
            "sglang",
            {
                "text": "a",
                "meta_info": {
                    "output_token_logprobs": [[-0.5, 17, None]],
                    "finish_reason": "length",
                },
            },
        ),
        ("sglang", [{"text": "a", "meta_info": {"output_token_logprobs": [[-0.5, 17]]}}]),
    ],
)
def test_what_atroposlib_reads_of_each_servers_answer_is_accepted(server_type, body):
    assert server_check._missing_from(json.dumps(body).encode(), server_type) == ""


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)


@pytest.mark.unit
@settings(max_examples=300, deadline=None)
@given(
    body=st.one_of(st.binary(max_size=200), JSON.map(lambda v: json.dumps(v).encode())),
    server_type=st.sampled_from(["vllm", "sglang"]),
)
def test_any_answer_is_either_what_atroposlib_reads_or_named_as_missing_never_a_crash(
    body, server_type
):
    missing = server_check._missing_from(body, server_type)
    assert isinstance(missing, str)
    if not missing and server_type == "vllm":  # atroposlib's own reading of it then works
        answer = json.loads(body)
        for sequence in answer["logprobs"]:
            assert [int(next(iter(token[0]))) for token in sequence]


VLLM_ANSWER = {"text": ["a"], "logprobs": [[[{"17": -0.5}]]], "finish_reasons": ["length"]}


def checked(app: web.Application) -> str:
    """``check_servers`` against ``app`` on loopback: "accepted", or its refusal; either within 30 s."""
    with serve_app(app) as base_url:
        started = time.monotonic()
        try:
            server_check.check_servers((base_url,), "", "vllm", lambda _: None)
            said = "accepted"
        except UserError as e:
            said = str(e)
        took = time.monotonic() - started
    assert took < 30, f"the check took {took:.0f} s"
    return said


def test_a_server_that_redirects_as_atroposlib_follows_or_answers_500_is_not_refused():
    """atroposlib's aiohttp follows a 307/308 with the same POST (a proxy's http -> https, a trailing slash): the
    check read the redirect's empty body as 'answered /generate without a JSON body'. A 5xx (a proxy's 502, a busy
    engine) is the run's to retry, as a 5xx on /health is atroposlib's to wait for, not a wrong --server-type."""

    async def moved(request):
        raise web.HTTPPermanentRedirect("/engine/generate")

    async def failing(request):
        return web.Response(status=502, text="Bad Gateway")

    redirecting = openai_server(health=True, generate=moved)
    redirecting.router.add_post("/engine/generate", answering(VLLM_ANSWER))
    assert checked(redirecting) == "accepted"
    assert checked(openai_server(health=True, generate=failing)) == "accepted"


@pytest.mark.serial
def test_an_answer_that_never_ends_is_refused_or_left_within_seconds():
    """A /generate that sends a byte every 2 s (a keep-alive stream, a broken proxy) kept the check reading for
    ever, each byte within the read timeout; a /health whose body never ends is healthy, as atroposlib reads only
    its status."""

    async def trickling(request):
        response = web.StreamResponse()
        await response.prepare(request)
        for _ in range(60):
            await response.write(b" ")
            await asyncio.sleep(2)
        return response

    app = web.Application()
    app.router.add_get("/health", trickling)
    app.router.add_post("/generate", answering(VLLM_ANSWER))
    assert checked(app) == "accepted"
    said = checked(openai_server(health=True, generate=trickling))
    assert "did not end its answer to a one-token /generate" in said and "vLLM or SGLang" in said, (
        said
    )


@pytest.mark.serial
def test_servers_that_do_not_answer_are_waited_for_together_not_one_after_another():
    """An allocation's servers are checked at once: eight whose /health hangs took 80 s (10 s each, in turn), an
    allocation of 16 nodes of 8 such servers 21 minutes, before the run's first request."""

    async def hanging(request):
        await asyncio.sleep(60)

    app = web.Application()
    app.router.add_get("/health", hanging)
    with serve_app(app) as base_url:
        started = time.monotonic()
        server_check.check_servers((base_url,) * 8, "", "vllm", lambda _: None)
        took = time.monotonic() - started
    assert took < 30, f"checked in {took:.0f} s"
