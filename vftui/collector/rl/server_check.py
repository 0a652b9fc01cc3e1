"""rl: refuse, before the first group, an inference server that atroposlib cannot drive.

atroposlib's rl servers are driven through two routes of the server's own, beside its OpenAI API: ``/health``,
which it polls until it answers (a server without one is waited for, silently, for ever), and the
token-level ``/generate``, which gives each generated token's id and logprob (vLLM's
``{"prompt": {"prompt_token_ids": ...}, "logprobs": 0}`` answered with ``logprobs`` as ``[{id: logprob}]``
a token; SGLang's ``input_ids`` with ``return_logprob`` answered with ``meta_info.output_token_logprobs``).
An OpenAI-compatible server without them (llama.cpp's, Ollama, LM Studio, a hosted API) answers ``/models``
and looked usable until every group timed out. Each server that answers is asked both once, for one token;
a server that does not answer yet (vLLM loading a model) is left to atroposlib's own wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from vftui.bounds import load_json
from vftui.errors import UserError
from vftui.loopback import unproxied
from vftui.text.printable import printable

TIMEOUT_S = 10.0
ASKED_AT_ONCE = 64  # servers checked at a time: an allocation's 8 a node, of a few nodes
MAX_ANSWER_BYTES = 1024**2  # one token's answer is a few hundred bytes
DRIVABLE = "rl drives vLLM or SGLang servers (a /health route and a token-level /generate with token ids and logprobs)"
ELSEWHERE = "for any other OpenAI-compatible server (llama.cpp, Ollama, a hosted API) use --mode sft or --mode eval"
PROBE_TOKEN = 1  # a token id every vocabulary has


def check_servers(
    base_urls: tuple[str, ...], api_key: str, server_type: str, step: Callable[[str], None]
) -> None:
    """Each server that answers must answer ``/health`` and a one-token ``/generate`` with token ids and logprobs.
    They are asked at once (an allocation's dozens of servers that do not answer yet cost ``TIMEOUT_S`` or so, not
    that each); redirects are followed as atroposlib's aiohttp follows them (a 307 or 308 with the same POST)."""
    headers = (
        {"Authorization": f"Bearer {api_key}", "Accept-Encoding": "identity"} if api_key else {}
    )
    servers = base_urls[0] if len(base_urls) == 1 else f"the {len(base_urls)} inference servers"
    step(
        f"checking that {servers} serve{'s' if len(base_urls) == 1 else ''} /health and token logprobs"
    )
    at_once = min(len(base_urls), ASKED_AT_ONCE)
    limits = httpx.Limits(max_connections=at_once)
    with (
        httpx.Client(
            timeout=TIMEOUT_S,
            headers=headers,
            follow_redirects=True,
            limits=limits,
            **unproxied(*base_urls),  # loopback never through a proxy
        ) as client,
        ThreadPoolExecutor(max_workers=at_once) as pool,
    ):
        for _ in pool.map(lambda url: check_server(client, url, server_type), base_urls):
            pass  # the first refusal, in the servers' order


def check_server(client: httpx.Client, base_url: str, server_type: str) -> None:
    root = base_url.rstrip("/").removesuffix("/v1")
    health = _ask(client, "GET", f"{root}/health", read=False)  # atroposlib reads its status alone
    if health is None:
        return  # not up yet: atroposlib waits for it, and the run shows that it waits
    status, _ = health
    _refuse_rejections(base_url, status)
    if status in (404, 405):
        raise UserError(
            f"the inference server at {base_url} has no /health (HTTP {status}): {DRIVABLE}; {ELSEWHERE}"
        )
    if status >= 500:
        return  # up but not ready (vLLM answers 503 while it loads): atroposlib waits for it
    answer = _ask(client, "POST", f"{root}/generate", json=_one_token(server_type))
    if answer is None or answer[0] >= 500 or answer[0] in (408, 429):
        return  # busy (other workers share it), failing for now (a proxy's 502) or gone since: the run retries
    status, body = answer
    _refuse_rejections(base_url, status)
    if status in (404, 405):
        raise UserError(
            f"the inference server at {base_url} has no token-level /generate (HTTP {status}): {DRIVABLE}; {ELSEWHERE}"
        )
    if body is None:
        raise UserError(
            f"the inference server at {base_url} did not end its answer to a one-token /generate within "
            f"{TIMEOUT_S:g} s and {MAX_ANSWER_BYTES // 1024**2} MB: {DRIVABLE}"
        )
    if status >= 400:
        said = printable(body[:200].decode("utf-8", errors="replace"))
        raise UserError(
            f"the inference server at {base_url} refused a one-token /generate as {server_type} "
            f"(HTTP {status}: {said}): is --server-type right? {DRIVABLE}"
        )
    missing = _missing_from(body, server_type)
    if missing:
        raise UserError(
            f"the inference server at {base_url} answered /generate without {missing}, which rl trains on: {DRIVABLE}"
        )


def _one_token(server_type: str) -> dict[str, Any]:
    """A request for one generated token with its id and logprob, as atroposlib words it for the server type."""
    if server_type == "sglang":
        return {
            "input_ids": [PROBE_TOKEN],
            "sampling_params": {"max_new_tokens": 1, "temperature": 0.0},
            "return_logprob": True,
            "return_text_in_logprobs": False,
        }
    return {
        "prompt": {"prompt_token_ids": [PROBE_TOKEN]},
        "logprobs": 0,
        "max_tokens": 1,
        "temperature": 0.0,
    }


def _missing_from(body: bytes, server_type: str) -> str:
    """What atroposlib reads of a /generate answer and this one lacks ("" when all is there)."""
    try:
        answer = load_json(body)
    except ValueError:
        return "a JSON body"
    if server_type == "sglang":
        first = answer[0] if isinstance(answer, list) and answer else answer
        meta = first.get("meta_info") if isinstance(first, dict) else None
        tokens = meta.get("output_token_logprobs") if isinstance(meta, dict) else None
        ok = isinstance(tokens, list) and tokens and all(_is_logprob_id(t) for t in tokens)
        return "" if ok else "meta_info.output_token_logprobs (each token's logprob and id)"
    if not isinstance(answer, dict):
        return "a JSON object"
    sequences, reasons = answer.get("logprobs"), answer.get("finish_reasons")
    if not (
        isinstance(sequences, list)
        and sequences
        and all(isinstance(s, list) and s for s in sequences)
    ):
        return "logprobs (each generated token's id and logprob)"
    if not all(_is_id_logprob(token) for sequence in sequences for token in sequence):
        return "logprobs as [{token id: logprob}] a token"
    if not (isinstance(reasons, list) and len(reasons) == len(sequences)):
        return "finish_reasons"
    return ""


def _is_id_logprob(token: Any) -> bool:
    """vLLM's ``[{"<id>": <logprob>}]``: the sampled token's id and logprob."""
    if not (isinstance(token, list) and token and isinstance(token[0], dict) and token[0]):
        return False
    ((key, value),) = list(token[0].items())[:1]
    return str(key).lstrip("-").isdigit() and _is_number(value)


def _is_logprob_id(token: Any) -> bool:
    """SGLang's ``(logprob, id, text)``."""
    return (
        isinstance(token, list)
        and len(token) >= 2
        and _is_number(token[0])
        and isinstance(token[1], int)
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _ask(
    client: httpx.Client, method: str, url: str, read: bool = True, **kwargs: Any
) -> tuple[int, bytes | None] | None:
    """The status and body (``read``: else none), or None when the server does not answer; a body still coming
    after ``TIMEOUT_S`` in all (each piece within the read timeout: a trickle) or past ``MAX_ANSWER_BYTES`` is
    None."""
    deadline = time.monotonic() + TIMEOUT_S
    try:
        with client.stream(method, url, **kwargs) as response:
            body = bytearray()
            for chunk in response.iter_bytes() if read else ():
                body += chunk
                if len(body) > MAX_ANSWER_BYTES or time.monotonic() > deadline:
                    return response.status_code, None
            return response.status_code, bytes(body)
    except httpx.HTTPError:
        return None


def _refuse_rejections(base_url: str, status: int) -> None:
    if status in (401, 403):
        raise UserError(f"the inference server at {base_url} rejected the API key (HTTP {status})")
