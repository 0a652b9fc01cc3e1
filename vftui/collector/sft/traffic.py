"""Every request to the model endpoint in sft mode goes through here.

verifiers bounds requests per ``generate`` call, that is per group; with many groups in
flight the bound has to sit below them all, so it lives in the HTTP client's transport:

- ``AdaptiveLimit`` keeps at most ``--concurrency`` requests in flight, halves that when
  the endpoint rate-limits (once per back-off step) and grows it back by one for every
  limit's worth of answered requests (additive increase, multiplicative decrease);
- ``LimitedTransport`` honours ``Retry-After`` on 429 (and on 503 when the server sends
  one): every request waits until then, and the rejected one is sent again, ahead of
  those not yet sent, for up to ``RATE_LIMIT_PATIENCE_S`` of waiting, so a group never
  loses its finished rollouts to a rate limit (a 429 for an exhausted quota is not a
  rate limit and goes straight back, a failure like any other). It
  also bounds each request as a whole (connect to last byte) and its answer to what it
  asked for (``answers``), counted as decoded, and sends through aiohttp: httpcore's pool
  walks every connection for every request, which with dozens of connections cost more
  CPU than the rest of the collector;
- ``TrafficStats`` turns what passed into the figures the views show.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import email.utils
import math
import time
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import aiohttp
import httpx

from vftui import stats
from vftui.collector.backoff import backoff_seconds
from vftui.collector.sft.answers import Asked
from vftui.events import RequestStats
from vftui.loopback import is_loopback_host

RATE_LIMITED = frozenset({429})
SLOW_DOWN = frozenset({503})  # retried here only when the server says when (Retry-After)
RATE_LIMIT_PATIENCE_S = (
    120.0  # waiting on rate limits, per request, before its 429 counts as a failure
)
NOT_A_RATE_LIMIT = (b"insufficient_quota",)  # OpenAI's 429 for billing: waiting will not help
# aiohttp writes these itself; it asks for the encodings it can decode, and decodes them a piece at a time
OWN_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "accept-encoding"})
DECODED_AWAY = frozenset(
    {b"content-encoding", b"content-length"}
)  # said of the body as sent, not as handed on
RECENT_S = 10.0  # requests/s, tokens/s and "rate-limited" look this far back
LATENCY_SAMPLES = 512


class AdaptiveLimit:
    """A semaphore whose size follows the endpoint's rate limit, with a gate for Retry-After."""

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self.in_flight = 0  # slots held: requests being sent, and those waiting at the gate
        self._size = float(ceiling)
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._open_at = 0.0  # monotonic time before which no request is sent
        self._last_cut = -math.inf

    @property
    def size(self) -> int:
        return max(1, int(self._size))

    @asynccontextmanager
    async def slot(self, again: bool = False) -> AsyncIterator[float]:
        """Hold one of the ``size`` slots, sent no earlier than the gate allows; yields the send time.

        A request sent ``again`` after a rejection waits ahead of those not yet sent. One
        that held its slot through a cut gives it up at the gate if the new size has no
        room for it, so no more than ``size`` requests go out when the gate opens.
        """
        await self._acquire(first=again)
        try:
            while True:
                if (wait := self._open_at - time.monotonic()) > 0:
                    await asyncio.sleep(wait)
                elif self.in_flight > self.size:
                    self._release()
                    await self._acquire(first=True)
                else:
                    break
            yield time.monotonic()
        finally:
            self._release()

    async def _acquire(self, first: bool) -> None:
        if not self._waiters and self.in_flight < self.size:
            self.in_flight += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.appendleft(waiter) if first else self._waiters.append(waiter)
        try:
            await waiter  # _hand_over counted us in before waking us
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()
            raise

    def _release(self) -> None:
        self.in_flight -= 1
        self._hand_over()

    def _hand_over(self) -> None:
        """Wake as many waiters, oldest first, as there are free slots."""
        while self._waiters and self.in_flight < self.size:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_flight += 1
                waiter.set_result(None)

    def answered(self) -> None:
        """A request was answered: grow by one slot per ``size`` answers, up to the ceiling."""
        if self._size < self.ceiling:
            self._size = min(float(self.ceiling), self._size + 1.0 / self._size)
            self._hand_over()

    def rate_limited(self, wait_s: float, sent_at: float) -> bool:
        """Close the gate for ``wait_s``; halve the size once per back-off step. True if it was cut.

        A rejection of a request sent before the last cut belongs to that step (the rest
        of the burst the cut answered), so it closes the gate but does not cut again.
        """
        now = time.monotonic()
        self._open_at = max(self._open_at, now + wait_s)
        if sent_at < self._last_cut:
            return False
        self._last_cut = now
        self._size = max(1.0, self._size / 2)
        return True


def retry_after_s(response: httpx.Response) -> float | None:
    """The server's wait, from ``retry-after-ms`` or ``Retry-After`` (seconds or a date)."""
    headers = response.headers
    try:
        if "retry-after-ms" in headers:
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


class TrafficStats:
    """Counts and recent samples of requests and generated tokens."""

    def __init__(self, clock=time.monotonic) -> None:
        self._clock = clock
        self._answered: collections.deque[float] = collections.deque(maxlen=8192)
        self._latencies: collections.deque[float] = collections.deque(maxlen=LATENCY_SAMPLES)
        self._tokens: collections.deque[tuple[float, int]] = collections.deque(maxlen=8192)
        self.requests_total = 0
        self.rate_limited_total = 0
        self.failed_total = 0
        self._last_rate_limited = -math.inf
        self._first_answer: float | None = None

    def answer(self, latency_s: float) -> None:
        self.requests_total += 1
        now = self._clock()
        if self._first_answer is None:
            self._first_answer = now
        self._answered.append(now)
        self._latencies.append(latency_s)

    def rejection(self) -> None:
        self.requests_total += 1
        self.rate_limited_total += 1
        self._last_rate_limited = self._clock()

    def failure(self) -> None:
        self.requests_total += 1
        self.failed_total += 1

    def tokens(self, count: int) -> None:
        self._tokens.append((self._clock(), count))

    def snapshot(self, limit: AdaptiveLimit, groups_in_flight: int) -> RequestStats:
        now = self._clock()
        since = now - RECENT_S
        # a young run is measured over its life so far, not diluted over the whole window
        span = (
            RECENT_S
            if self._first_answer is None
            else min(RECENT_S, max(1.0, now - self._first_answer))
        )
        recent = sum(1 for t in self._answered if t >= since)
        tokens = sum(n for t, n in self._tokens if t >= since)
        ordered = sorted(self._latencies)
        if (
            groups_in_flight == 0 and limit.in_flight == 0
        ):  # paused: no traffic now, whatever came before
            recent = tokens = 0
        return RequestStats(
            in_flight=limit.in_flight,
            limit=limit.size,
            ceiling=limit.ceiling,
            groups_in_flight=groups_in_flight,
            requests_per_s=round(recent / span, 2),
            tokens_per_s=round(tokens / span, 1),
            latency_p50_s=stats.quantile(ordered, 0.5),
            latency_p95_s=stats.quantile(ordered, 0.95),
            rate_limited=limit.size < limit.ceiling or now - self._last_rate_limited < RECENT_S,
            requests_total=self.requests_total,
            rate_limited_total=self.rate_limited_total,
            failed_total=self.failed_total,
        )


class ResponseTooLarge(httpx.ReadError):
    """The answer holds more than its request asked for (``answers``)."""


@dataclass(frozen=True)
class Proxy:
    url: str
    headers: dict[str, str]  # its Proxy-Authorization, when its URL holds credentials


HTTP_PROXIES = (
    "http",
    "https",
)  # aiohttp speaks to no other: a desktop's all_proxy=socks:// is refused


def env_proxy(url: httpx.URL) -> Proxy | None:
    """The HTTP proxy the environment names for ``url`` (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, less
    the hosts in ``NO_PROXY``, with or without the port), as the endpoint's other client, httpx, reads them;
    its credentials as a header (UTF-8). One that is not a URL is one sentence, each request. A loopback host
    has none: it is reached directly."""
    if is_loopback_host(url.host):
        return None
    where = url.host if ":" in url.host or url.port is None else f"{url.host}:{url.port}"
    if urllib.request.proxy_bypass(where):
        return None
    proxies = urllib.request.getproxies()
    named = proxies.get(url.scheme) or proxies.get("all")
    if not named:
        return None
    try:
        proxy = httpx.URL(named if "://" in named else f"http://{named}")
    except httpx.InvalidURL as e:
        raise httpx.ConnectError(f"the environment's proxy for {url.host} is not a URL: {e}") from e
    if proxy.scheme not in HTTP_PROXIES:
        raise httpx.ConnectError(
            f"the environment's proxy for {url.host} is a {proxy.scheme} proxy; vftui's requests go through "
            "HTTP proxies only (NO_PROXY can leave this host out)"
        )
    headers = {}
    if proxy.username:
        pair = f"{proxy.username}:{proxy.password}".encode()
        headers["Proxy-Authorization"] = f"Basic {base64.b64encode(pair).decode()}"
    return Proxy(str(proxy.copy_with(userinfo=b"")), headers)


class LimitedTransport(httpx.AsyncBaseTransport):
    """httpx transport: the adaptive limit, Retry-After, a whole-request timeout, a body cap."""

    def __init__(
        self,
        limit: AdaptiveLimit,
        stats: TrafficStats,
        *,
        timeout_s: float,
        max_body_bytes: int,
        on_cut=None,
    ) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._limit = limit
        self._stats = stats
        self._timeout_s = timeout_s
        self._max_body = max_body_bytes
        self._on_cut = on_cut or (lambda size, wait_s: None)
        self._proxies: dict[tuple[str, str, int | None], Proxy | None] = {}  # by scheme, host, port

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()  # a rejected request is sent again, so its body must be replayable
        rejections, first_rejected = 0, 0.0
        while True:
            async with self._limit.slot(again=rejections > 0) as sent_at:
                try:
                    status, headers, body = await self._send(request)
                except Exception:  # a cancellation is not the endpoint's failure
                    self._stats.failure()
                    raise
                response = httpx.Response(status, headers=headers, content=body, request=request)
                wait_s = self._wait_s(response, rejections + 1)
                if wait_s is None:
                    self._count(status, time.monotonic() - sent_at)
                    return response
                rejections += 1
                first_rejected = first_rejected or time.monotonic()
                self._stats.rejection()
                if time.monotonic() - first_rejected > RATE_LIMIT_PATIENCE_S:
                    return response  # a failed attempt for the group's own retries
                if self._limit.rate_limited(wait_s, sent_at):  # before the slot is handed on
                    self._on_cut(self._limit.size, wait_s)

    def _count(self, status: int, latency_s: float) -> None:
        if status < 500 and status not in RATE_LIMITED:
            self._stats.answer(latency_s)
            self._limit.answered()
        else:
            self._stats.failure()

    @staticmethod
    def _wait_s(response: httpx.Response, rejection: int) -> float | None:
        """How long to wait before sending again, or None when this is not a rate limit.

        As long as the endpoint asks, and never less than a fifth of the usual back-off, so
        a server that asks for 0 s does not get a hot loop; a 429 that does not say gets
        the usual back-off.
        """
        status = response.status_code
        if status in RATE_LIMITED and not any(
            marker in response.content for marker in NOT_A_RATE_LIMIT
        ):
            asked = retry_after_s(response)
        elif status in SLOW_DOWN:
            asked = retry_after_s(response)
            if asked is None:
                return None
        else:
            return None
        usual = backoff_seconds(rejection)
        return usual if asked is None else max(asked, usual / 5)

    def _proxy(self, url: httpx.URL) -> Proxy | None:
        """``env_proxy``, read once a host: aiohttp's own reading (``trust_env``) took two trips to a thread
        a request, 5% of a CPU-bound run, and its netrc lookup broke every request to a host in ~/.netrc (an
        Authorization header and netrc credentials at once: refused)."""
        key = (url.scheme, url.host, url.port)  # NO_PROXY may name a host's port
        if key not in self._proxies:
            self._proxies[key] = env_proxy(url)
        return self._proxies[key]

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=2 * self._limit.ceiling, limit_per_host=0)
            self._session = aiohttp.ClientSession(
                connector=connector,
                auto_decompress=True,  # in bounded pieces, so the cap counts what the body inflates to
                timeout=aiohttp.ClientTimeout(total=None),  # --timeout is ours, whole-request
                trust_env=False,  # the proxies are read once a host (``_proxy``), not per request
                cookie_jar=aiohttp.DummyCookieJar(),  # cookies are httpx's business, not a second jar
            )
        return self._session

    async def _send(self, request: httpx.Request) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """One attempt, connect to last byte, within the timeout; the body decoded, within what was asked."""
        asked = Asked.of(request.content)
        cap, too_large = asked.body_cap(self._max_body)
        proxy = self._proxy(request.url)
        # a plain request goes to the proxy whole, its credentials with it; an https one through a tunnel the
        # proxy opens (CONNECT), which carries them
        tunnelled = request.url.scheme == "https"
        try:
            async with asyncio.timeout(self._timeout_s):
                # a URL's user and password are in the Authorization header already, as httpx puts them there
                # (aiohttp refuses both at once)
                async with self._client().request(
                    request.method,
                    str(request.url.copy_with(userinfo=b"")),
                    data=request.content,
                    headers=[
                        (k, v) for k, v in request.headers.multi_items() if k not in OWN_HEADERS
                    ]
                    + (list(proxy.headers.items()) if proxy and not tunnelled else []),
                    allow_redirects=False,
                    compress=None,
                    skip_auto_headers=("User-Agent",),
                    proxy=proxy.url if proxy is not None else None,
                    proxy_headers=proxy.headers if proxy and tunnelled else None,
                ) as response:
                    chunks, size = [], 0
                    async for chunk in response.content.iter_any():
                        size += len(chunk)
                        if size > cap:
                            raise ResponseTooLarge(too_large, request=request)
                        chunks.append(chunk)
                    body = b"".join(chunks)
                    if overrun := asked.overrun(body):
                        raise ResponseTooLarge(overrun, request=request)
                    headers = [
                        (k, v) for k, v in response.raw_headers if k.lower() not in DECODED_AWAY
                    ]
                    return response.status, headers, body
        except TimeoutError as e:
            raise httpx.ReadTimeout(
                f"the request took longer than {self._timeout_s:g} s", request=request
            ) from e
        except aiohttp.ClientConnectorError as e:
            through = f" through the proxy {proxy.url}" if proxy is not None else ""
            raise httpx.ConnectError(
                f"cannot connect to {request.url.host}:{request.url.port}{through}", request=request
            ) from e
        except aiohttp.ClientError as e:
            raise httpx.RemoteProtocolError(f"{type(e).__name__}: {e}", request=request) from e

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
