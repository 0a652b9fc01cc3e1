"""The simulated OpenAI-compatible endpoint, on loopback, for machines with no GPU or key.

Serves ``/v1/models`` and ``/v1/chat/completions`` (with ``usage`` and ``finish_reason``,
``max_tokens`` honoured with the shipped tokenizer), and the vLLM-style ``/health`` and
token-level ``/generate`` that atroposlib's ManagedServer calls in rl mode: token ids in,
token ids with their (simulated) logprobs out. Asked with ``tools``, it plays the
built-in tool task with OpenAI ``tool_calls``. For tests and demos it can be told
to misbehave (``POST /sim/faults``), to rate-limit like a hosted API (at most R requests
a second, 429 with ``Retry-After`` beyond it), and it remembers what it was asked
(``GET /sim/requests``), so a test can see the temperature that reached it. Like vLLM it
serves Prometheus ``/metrics`` (running and waiting requests, KV-cache use), with at most
``max_running`` requests running at once when that is set (the rest wait, as in a full
batch).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import json
import math
import random
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Gauge, generate_latest

from vftui.sim import TOKENIZER_DIR, policy, tool_task

MODEL = "vftui-sim"
KV_CACHE_TOKENS = (
    65_536  # the simulated KV cache; each running request holds KV_TOKENS_PER_REQUEST of it
)
KV_TOKENS_PER_REQUEST = 2_048
THINKING = ("sort", "names", "first", "letter", "compare", "then", "next", "check", "order", "list")


@dataclass
class Faults:
    """Misbehaviour for the next ``count`` chat requests (``count=-1``: until reset)."""

    status: int = 0
    message: str = ""  # the error body's message, e.g. one that quotes the request's key back
    stall_s: float = 0.0
    malformed: bool = False
    count: int = 0

    def take(self) -> Faults | None:
        if self.count == 0:
            return None
        if self.count > 0:
            self.count -= 1
        return self


class TokenBucket:
    """At most ``rate`` requests a second on average, bursts up to one second's worth."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self._tokens = max(1.0, rate)
        self._at = time.monotonic()

    def wait_s(self) -> float:
        """0 when a request may go now (and takes its token); else how long until one may."""
        now = time.monotonic()
        self._tokens = min(max(1.0, self.rate), self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return 0.0
        return (1.0 - self._tokens) / self.rate


@dataclass(frozen=True)
class SimSettings:
    """How the simulated endpoint behaves; each field is a ``vftui sim-server`` flag."""

    seed: int = 0
    latency_s: float = 0.0
    rate_limit: float = 0.0  # requests a second; 0: no limit
    think_words: int = 0  # words of thinking before each answer, for long rollouts
    max_running: int = 0  # requests running at once (the rest wait); 0: no limit


class SimState:
    def __init__(self, settings: SimSettings) -> None:
        from transformers import AutoTokenizer

        self.seed = settings.seed
        self.latency_s = settings.latency_s
        self.think_words = settings.think_words
        self.max_running = settings.max_running
        self.waiting = 0
        self.bucket = TokenBucket(settings.rate_limit) if settings.rate_limit > 0 else None
        self.rate_limited_total = 0
        self.tokenizer = AutoTokenizer.from_pretrained(str(TOKENIZER_DIR))
        self.faults = Faults()
        self.requests: collections.deque[dict[str, Any]] = collections.deque(maxlen=2000)
        self.requests_total = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._seen: collections.Counter[str] = collections.Counter()
        self.registry = self._gauges()

    def _gauges(self) -> CollectorRegistry:
        """vLLM's gauge names and labels, so a scraper that reads vLLM reads this."""
        registry = CollectorRegistry()
        for name, doc, value in (
            ("vllm:num_requests_running", "Requests in the running batch.", lambda: self.in_flight),
            (
                "vllm:num_requests_waiting",
                "Requests waiting for a place in the batch.",
                lambda: self.waiting,
            ),
            (
                "vllm:kv_cache_usage_perc",
                "KV-cache usage, 1 means 100 percent.",
                lambda: min(1.0, self.in_flight * KV_TOKENS_PER_REQUEST / KV_CACHE_TOKENS),
            ),
        ):
            Gauge(name, doc, ["model_name"], registry=registry).labels(MODEL).set_function(value)
        return registry

    @contextlib.asynccontextmanager
    async def running(self):
        """A place in the running batch: waits while ``max_running`` requests run."""
        self.waiting += 1
        try:
            while self.max_running and self.in_flight >= self.max_running:
                await asyncio.sleep(0.01)
        finally:
            self.waiting -= 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            yield
        finally:
            self.in_flight -= 1

    def rng_for(self, messages: list[dict[str, Any]]) -> random.Random:
        """Seeded by the conversation and how often it was asked: reruns repeat exactly."""
        digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()
        nth = self._seen[digest]
        self._seen[digest] += 1
        if len(self._seen) > 200_000:
            self._seen.clear()
        return random.Random(f"{self.seed}|{digest}|{nth}")

    def answer(self, messages: list[dict[str, Any]], temperature: float, rng: random.Random) -> str:
        """The policy's answer, after ``think_words`` of thinking when set (a reasoning model's length)."""
        text = policy.answer(messages, temperature, rng)
        if not self.think_words:
            return text
        words = " ".join(rng.choice(THINKING) for _ in range(self.think_words))
        return f"<think>\n{words}\n</think>\n{text}"

    def count_prompt(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> int:
        return len(
            self.tokenizer.apply_chat_template(
                messages,
                tools=tools,
                add_generation_prompt=True,
                tokenize=True,
                return_dict=False,
            )
        )

    def count_calls(self, calls: list[dict[str, Any]]) -> int:
        """Completion tokens of tool calls, roughly: the JSON of each call's name and arguments."""
        return sum(
            len(self.tokenizer.encode(json.dumps(call["function"]), add_special_tokens=False))
            for call in calls
        )

    def generate_ids(
        self, text: str, max_tokens: int | None, rng: random.Random, temperature: float
    ) -> tuple[list[int], list[float], str]:
        """The answer as token ids ending in end-of-turn (as vLLM returns them), with logprobs."""
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        reason = "stop"
        if max_tokens is not None and len(ids) > max_tokens:
            ids, reason = ids[:max_tokens], "length"
        spread = 0.05 + 0.5 * temperature
        logprobs = [round(-abs(rng.gauss(0.0, spread)), 6) for _ in ids]
        return ids, logprobs, reason

    def complete(self, text: str, max_tokens: int | None) -> tuple[str, int, str]:
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        if max_tokens is not None and len(ids) > max_tokens:
            cut = self.tokenizer.decode(ids[:max_tokens])  # one list of ids: one text
            return cut, max_tokens, "length"
        return text, len(ids), "stop"


SIM = web.AppKey("sim", SimState)


def _bad_request(message: str) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": "invalid_request_error"}}, status=400
    )


def _too_many(wait_s: float) -> web.Response:
    """A hosted API's 429: the wait in whole seconds (``Retry-After``) and in ms, as OpenAI sends it."""
    headers = {
        "Retry-After": str(max(1, math.ceil(wait_s))),
        "retry-after-ms": str(max(1, round(wait_s * 1000))),
    }
    body = {"error": {"message": "simulated rate limit", "type": "rate_limit_error"}}
    return web.json_response(body, status=429, headers=headers)


async def _misbehave(state: SimState) -> web.Response | None:
    """A 429 over the rate limit; else the injected fault (after its stall), if any; then the latency."""
    if state.bucket is not None and (wait_s := state.bucket.wait_s()):
        state.rate_limited_total += 1
        return _too_many(wait_s)
    fault = state.faults.take()
    if fault is not None:
        if fault.stall_s:
            await asyncio.sleep(fault.stall_s)
        if fault.status:
            message = fault.message or f"simulated {fault.status}"
            return web.json_response({"error": {"message": message}}, status=fault.status)
        if fault.malformed:
            return web.Response(text='{"choices": [', content_type="application/json")
    if state.latency_s:
        await asyncio.sleep(state.latency_s)
    return None


async def chat_completions(request: web.Request) -> web.StreamResponse:
    state: SimState = request.app[SIM]
    async with state.running():
        return await _chat_completion(request, state)


async def _chat_completion(request: web.Request, state: SimState) -> web.StreamResponse:
    try:
        body = await request.json()
    except json.JSONDecodeError:
        return _bad_request("body is not JSON")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return _bad_request("messages must be a non-empty list")
    temperature = float(body.get("temperature", 1.0))
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    n = int(body.get("n") or 1)
    state.requests_total += 1
    state.requests.append(
        {
            "temperature": temperature,
            "max_tokens": max_tokens,
            "model": body.get("model"),
            "n": n,
            "at": time.time(),
        }
    )
    if (failure := await _misbehave(state)) is not None:
        return failure
    tools = body.get("tools") or None
    choices, completion_tokens = [], 0
    for index in range(n):
        rng = state.rng_for(messages)
        calls = None
        if tools:
            calls = tool_task.reply(messages, temperature, rng, policy.difficulty(messages))
            calls = calls if calls is not None else tool_task.any_tool_reply(messages, tools, rng)
        if calls is not None and calls[1]:
            message = {"role": "assistant", "content": calls[0] or None, "tool_calls": calls[1]}
            used, reason = state.count_calls(calls[1]), "tool_calls"
        else:
            text = calls[0] if calls is not None else state.answer(messages, temperature, rng)
            text, used, reason = state.complete(text, max_tokens)
            message = {"role": "assistant", "content": text}
        completion_tokens += used
        choices.append(
            {"index": index, "message": message, "finish_reason": reason, "logprobs": None}
        )
    prompt_tokens = state.count_prompt(messages, tools)
    completion = {
        "id": f"simcmpl-{state.requests_total}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model") or MODEL,
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    if body.get("stream"):
        return await _stream(
            request, completion, bool((body.get("stream_options") or {}).get("include_usage"))
        )
    return web.json_response(completion)


async def _stream(
    request: web.Request, completion: dict[str, Any], usage: bool
) -> web.StreamResponse:
    """The completion as server-sent chunks, as OpenAI streams one: each choice's message as one delta,
    then its finish reason, the usage when asked for, and [DONE]."""
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    head = {key: completion[key] for key in ("id", "created", "model")} | {
        "object": "chat.completion.chunk"
    }

    async def send(chunk: dict[str, Any]) -> None:
        await response.write(f"data: {json.dumps(head | chunk)}\n\n".encode())

    for choice in completion["choices"]:
        message = dict(choice["message"])
        calls = [
            {"index": i, **call} for i, call in enumerate(message.pop("tool_calls", None) or [])
        ]
        delta = message | ({"tool_calls": calls} if calls else {})
        await send({"choices": [{"index": choice["index"], "delta": delta, "finish_reason": None}]})
        await send(
            {
                "choices": [
                    {
                        "index": choice["index"],
                        "delta": {},
                        "finish_reason": choice["finish_reason"],
                    }
                ]
            }
        )
    if usage:
        await send({"choices": [], "usage": completion["usage"]})
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


async def generate(request: web.Request) -> web.Response:
    """vLLM's token-level ``/generate``: prompt token ids in, token ids and logprobs out."""
    state: SimState = request.app[SIM]
    async with state.running():
        return await _generate(request, state)


async def _generate(request: web.Request, state: SimState) -> web.Response:
    try:
        body = await request.json()
        prompt_ids = [int(t) for t in body["prompt"]["prompt_token_ids"]]
    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
        return _bad_request("expected {'prompt': {'prompt_token_ids': [...]}, ...}")
    temperature = float(body.get("temperature", 1.0))
    max_tokens = body.get("max_tokens")
    n = int(body.get("n") or 1)
    state.requests_total += 1
    record = {
        "temperature": temperature,
        "max_tokens": max_tokens,
        "n": n,
        "path": "/generate",
        "at": time.time(),
    }
    state.requests.append(record)
    if (failure := await _misbehave(state)) is not None:
        return failure
    conversation = [
        {"role": "user", "content": state.tokenizer.decode(prompt_ids, skip_special_tokens=True)}
    ]
    logprobs, reasons, texts = [], [], []
    for _ in range(n):
        rng = state.rng_for(conversation)
        answer = state.answer(conversation, temperature, rng)
        ids, lps, reason = state.generate_ids(answer, max_tokens, rng, temperature)
        logprobs.append([[{str(i): lp}] for i, lp in zip(ids, lps, strict=True)])
        reasons.append(reason)
        texts.append(state.tokenizer.decode(ids))
        record.setdefault("outputs", []).append({"ids": ids, "logprobs": lps})
    return web.json_response({"text": texts, "logprobs": logprobs, "finish_reasons": reasons})


async def metrics(request: web.Request) -> web.Response:
    return web.Response(body=generate_latest(request.app[SIM].registry), content_type="text/plain")


async def health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok", "simulated": True})


async def models(request: web.Request) -> web.Response:
    return web.json_response(
        {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "vftui"}]}
    )


async def set_faults(request: web.Request) -> web.Response:
    body = await request.json()
    request.app[SIM].faults = Faults(
        status=int(body.get("status", 0)),
        message=str(body.get("message", "")),
        stall_s=float(body.get("stall_s", 0.0)),
        malformed=bool(body.get("malformed", False)),
        count=int(body.get("count", 1)),
    )
    return web.json_response({"ok": True})


async def change_settings(request: web.Request) -> web.Response:
    """Change how the endpoint behaves mid-run (tests make it misbehave on purpose): ``think_words``,
    ``latency_s``, ``max_running``."""
    body = await request.json()
    state: SimState = request.app[SIM]
    state.think_words = int(body.get("think_words", state.think_words))
    state.latency_s = float(body.get("latency_s", state.latency_s))
    state.max_running = int(body.get("max_running", state.max_running))
    return web.json_response(
        {
            "think_words": state.think_words,
            "latency_s": state.latency_s,
            "max_running": state.max_running,
        }
    )


async def recent_requests(request: web.Request) -> web.Response:
    state: SimState = request.app[SIM]
    return web.json_response(
        {
            "total": state.requests_total,
            "max_in_flight": state.max_in_flight,
            "faults_left": state.faults.count,
            "rate_limited": state.rate_limited_total,
            "requests": list(state.requests),
        }
    )


async def info(request: web.Request) -> web.Response:
    state: SimState = request.app[SIM]
    return web.json_response({"simulated": True, "model": MODEL, "seed": state.seed})


def make_app(settings: SimSettings = SimSettings()) -> web.Application:
    app = web.Application(client_max_size=64 * 1024**2)
    app[SIM] = SimState(settings)
    app.add_routes(
        [
            web.get("/v1/models", models),
            web.post("/v1/chat/completions", chat_completions),
            web.get("/health", health),
            web.get("/metrics", metrics),
            web.post("/generate", generate),
            web.post("/sim/faults", set_faults),
            web.post("/sim/settings", change_settings),
            web.get("/sim/requests", recent_requests),
            web.get("/sim/info", info),
        ]
    )
    return app


STOP_GRACE_S = 1.0


class BackgroundServer:
    """An aiohttp app on a loopback port (0: a free one), in a thread with its own loop."""

    def __init__(self, app: web.Application, port: int = 0) -> None:
        self._app = app
        self._port = port
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="vftui-sim", daemon=True
        )
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> BackgroundServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)
        return self

    async def _start(self) -> None:
        # A simulated endpoint has nothing to drain: stop() must be quick and bounded even
        # when a client hangs up mid-response (aiohttp's graceful default waits 60 s).
        self._runner = web.AppRunner(self._app, access_log=None, shutdown_timeout=STOP_GRACE_S)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self._port))
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._stop(self._runner), self._loop).result(
                timeout=10 + 2 * STOP_GRACE_S
            )
            self._runner = None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    async def _stop(self, runner: web.AppRunner) -> None:
        """Close the site, then end what the grace period cut short, so no task dies pending with the loop."""
        await runner.cleanup()
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)


class BackgroundSimServer(BackgroundServer):
    """The simulated endpoint, for the embedded default and for tests."""

    def __init__(self, port: int = 0, **settings: Any) -> None:
        super().__init__(make_app(SimSettings(**settings)), port)


def serve(host: str, port: int, settings: SimSettings) -> None:
    """``vftui sim-server``: serve until interrupted."""
    limit = f", at most {settings.rate_limit:g} requests/s" if settings.rate_limit > 0 else ""
    print(
        f"vftui simulated endpoint (not a real model) on http://{host}:{port}/v1 — model '{MODEL}'{limit}",
        flush=True,
    )
    web.run_app(make_app(settings), host=host, port=port, print=None, access_log=None)
