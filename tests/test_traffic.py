"""Requests across groups in flight: the item ledger, the adaptive limit, rate limits end to end."""

from __future__ import annotations

import asyncio
import base64
import email.utils
import signal
import threading
import time

import httpx
import pytest
from aiohttp import web

from tests.conftest import (
    json_events,
    read_jsonl,
    read_until,
    run_cli,
    sim_admin,
    start_cli,
    wait_for_lines,
)
from vftui.collector.sft.traffic import AdaptiveLimit, LimitedTransport, TrafficStats, retry_after_s
from vftui.run_files.ledger import ItemLedger
from vftui.sim.server import BackgroundServer, BackgroundSimServer
from vftui.text import wording


@pytest.mark.unit
def test_ledger_hands_out_lost_items_first_and_never_twice():
    ledger = ItemLedger()
    taken = [ledger.take() for _ in range(5)]
    assert taken == [0, 1, 2, 3, 4]
    for item in (3, 0, 4):
        ledger.mark_done(item)
    assert ledger.to_json() == {"done_below": 1, "done_above": [3, 4]}

    # a resumed run rebuilt from the checkpoint, the written items and the position: 1 and 2 were in flight
    resumed = ItemLedger(1, [3, 4, 0], next_item=5)
    assert resumed.lost == 2
    assert [resumed.take() for _ in range(4)] == [1, 2, 5, 6]
    for item in (6, 1, 2, 5):
        resumed.mark_done(item)
    assert resumed.to_json() == {"done_below": 7, "done_above": []}
    assert ItemLedger(0, [0, 9]).next_item == 10, "a written item past the position moves it"
    saved = {"iter": 12, **ItemLedger(0, [0, 1, 2, 5, 9], next_item=12).to_json()}
    again = ItemLedger(saved["done_below"], saved["done_above"], saved["iter"])
    assert again.lost == 7
    assert [again.take() for _ in range(8)] == [3, 4, 6, 7, 8, 10, 11, 12]


@pytest.mark.unit
async def test_adaptive_limit_holds_its_size_halves_on_a_rate_limit_and_grows_back():
    limit = AdaptiveLimit(8)
    peak = 0

    async def request() -> None:
        nonlocal peak
        async with limit.slot():
            peak = max(peak, limit.in_flight)
            await asyncio.sleep(0.01)

    await asyncio.gather(*(request() for _ in range(40)))
    assert peak == 8 and limit.in_flight == 0

    sent_before = time.monotonic()
    assert limit.rate_limited(0.05, sent_at=sent_before) is True and limit.size == 4
    assert limit.rate_limited(0.05, sent_at=sent_before) is False and limit.size == 4, (
        "one cut per back-off step: the rest of the burst sent before the cut does not cut again"
    )
    started = time.monotonic()
    peak = 0
    await asyncio.gather(*(request() for _ in range(8)))
    assert time.monotonic() - started >= 0.05, "nothing is sent before Retry-After has passed"
    assert peak == 4
    assert limit.rate_limited(0.01, sent_at=time.monotonic()) is True and limit.size == 2, (
        "sent after it: a new step"
    )
    for _ in range(200):
        limit.answered()
    assert limit.size == 8 and limit.ceiling == 8, (
        "additive increase back to the ceiling, no further"
    )


@pytest.mark.unit
async def test_holders_over_a_cut_limit_give_up_their_slots_at_the_gate():
    """Requests that took their slots before a cut must not all fire when the gate opens."""
    limit = AdaptiveLimit(8)
    sending, peak = 0, 0

    async def request() -> None:
        nonlocal sending, peak
        async with limit.slot():
            sending += 1
            peak = max(peak, sending)
            await asyncio.sleep(0.02)
            sending -= 1

    limit.rate_limited(0.1, sent_at=time.monotonic())  # size 4, the gate closed for 0.1 s
    tasks = [asyncio.ensure_future(request()) for _ in range(8)]
    await asyncio.sleep(0.02)
    assert limit.in_flight == 4, "four hold slots at the gate, four wait in line"
    limit.rate_limited(
        0.1, sent_at=time.monotonic()
    )  # a request sent after the cut is rejected: size 2
    await asyncio.gather(*tasks)
    assert peak == 2 and limit.in_flight == 0


@pytest.mark.unit
def test_retry_after_in_milliseconds_seconds_or_a_date():
    def wait(**headers: str) -> float | None:
        return retry_after_s(httpx.Response(429, headers=headers))

    assert wait(**{"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert wait(**{"retry-after": "3"}) == 3.0
    in_a_minute = email.utils.formatdate(time.time() + 60, usegmt=True)
    assert 55 < wait(**{"retry-after": in_a_minute}) <= 60
    assert wait(**{"retry-after": "soon"}) is None and wait() is None


@pytest.mark.unit
def test_traffic_figures_cover_recent_requests():
    now = [100.0]
    traffic = TrafficStats(clock=lambda: now[0])
    for latency in (0.1, 0.2, 0.3, 0.4):
        traffic.answer(latency)
        traffic.tokens(50)
        now[0] += 0.5
    traffic.rejection()
    snap = traffic.snapshot(AdaptiveLimit(16), groups_in_flight=3)
    assert snap.requests_per_s == 2.0 and snap.tokens_per_s == 100.0, (
        "four answers over the run's two seconds"
    )
    assert (snap.latency_p50_s, snap.latency_p95_s) == (0.3, 0.4)
    assert snap.requests_total == 5 and snap.rate_limited_total == 1 and snap.rate_limited
    line = wording.traffic(snap)
    assert "rate-limited" in line and "in flight 0/16 in 3 groups ·" in line
    idle = traffic.snapshot(AdaptiveLimit(16), groups_in_flight=0)
    assert (idle.requests_per_s, idle.tokens_per_s, idle.requests_total) == (0.0, 0.0, 5), (
        "paused: 0 req/s now"
    )


def test_a_rate_limited_endpoint_is_backed_off_not_hammered(tmp_path):
    """20 requests/s at 0.5 s each allow 10 in flight; the run asks for 32 and must settle near 10."""
    server = BackgroundSimServer(seed=0, latency_s=0.5, rate_limit=20).start()
    try:
        out = tmp_path / "groups.jsonl"
        args = [
            "run",
            "--no-ui",
            "--json",
            "--steps",
            "25",
            "--group-size",
            "4",
            "--base-url",
            server.base_url,
            "--out",
            str(out),
        ]
        result = run_cli(args, tmp_path)
        sim = sim_admin(server, "/sim/requests")
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    assert len(read_jsonl(out)) == 25
    events = json_events(result.stdout)
    assert not [e for e in events if e["event"] == "EndpointTrouble"], (
        "no group restarted for a rate limit"
    )
    stats = [e for e in events if e["event"] == "RequestStats"]
    assert any(s["rate_limited"] and s["limit"] < s["ceiling"] == 32 for s in stats), (
        "the limit came down"
    )
    assert stats[-1]["rate_limited_total"] == sim["rate_limited"] > 0
    assert sim["rate_limited"] < 50, (
        "backed off: rejections are a fraction of the run's 100 answered requests"
    )
    assert "the endpoint is rate-limiting" in result.stderr and "rate-limited" in result.stderr


async def test_transport_backs_off_even_when_asked_for_no_wait_and_returns_an_exhausted_quota():
    asked = {"count": 0}

    async def chat(request: web.Request) -> web.Response:
        asked["count"] += 1
        if request.headers.get("x-case") == "quota":
            return web.json_response({"error": {"code": "insufficient_quota"}}, status=429)
        if asked["count"] <= 3:
            return web.json_response(
                {"error": {"message": "slow down"}}, status=429, headers={"Retry-After": "0"}
            )
        return web.json_response({"ok": True})

    app = web.Application()
    app.add_routes([web.post("/chat", chat)])
    server = BackgroundServer(app).start()
    transport = LimitedTransport(
        AdaptiveLimit(4), TrafficStats(), timeout_s=10, max_body_bytes=1024**2
    )
    try:
        async with httpx.AsyncClient(transport=transport) as client:
            url = f"http://127.0.0.1:{server.port}/chat"
            started = time.monotonic()
            answer = await client.post(url, json={})
            assert answer.status_code == 200 and asked["count"] == 4
            assert time.monotonic() - started >= 0.5, "three short back-offs, not a hot loop"
            quota = await client.post(url, json={}, headers={"x-case": "quota"})
            assert quota.status_code == 429 and asked["count"] == 5, (
                "waiting does not refill a quota"
            )
    finally:
        server.stop()


ELSEWHERE = (
    "endpoint.invalid"  # a host that is not loopback, which only the recording proxy reaches
)


class RecordingProxy:
    """An HTTP proxy on loopback for plain http, in a thread of its own: each connection piped to the address
    its first request names (``ELSEWHERE`` is 127.0.0.1 to it alone), the request lines it carried kept (the
    simulated endpoint takes absolute-form targets)."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.headers: list[bytes] = []
        self._writers: list[asyncio.StreamWriter] = []
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, daemon=True).start()
        started = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._connection, "127.0.0.1", 0), self._loop
        )
        self._server = started.result(timeout=10)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    def stop(self) -> None:
        """Gone: listening no more, its open connections closed."""

        def close() -> None:
            self._server.close()
            for writer in self._writers:
                writer.close()
            self._loop.call_soon(self._loop.stop)  # once the sockets are closed

        self._loop.call_soon_threadsafe(close)

    async def _pipe(self, source, sink, record: bool) -> None:
        while data := await source.read(65536):
            if record:
                seen = data.split(b"\r\n")
                self.lines += [line for line in seen if b" HTTP/1.1" in line]
                self.headers += [line for line in seen if line.startswith(b"Proxy-Authorization")]
            sink.write(data)
            await sink.drain()
        sink.close()

    async def _connection(self, reader, writer) -> None:
        first = await reader.readline()
        self.lines.append(first.rstrip())
        target = httpx.URL(first.split()[1].decode())
        host = "127.0.0.1" if target.host == ELSEWHERE else target.host
        up_reader, up_writer = await asyncio.open_connection(host, target.port)
        self._writers += [writer, up_writer]
        up_writer.write(first)
        await asyncio.gather(
            self._pipe(reader, up_writer, True),
            self._pipe(up_reader, writer, False),
            return_exceptions=True,
        )


def elsewhere(base_url: str) -> str:
    """The endpoint at ``base_url`` as a host that is not loopback: reached through ``RecordingProxy`` only."""
    return base_url.replace("127.0.0.1", ELSEWHERE)


PROXIED = {  # how the environment names the proxy -> whether the requests go through it
    "HTTP_PROXY": True,
    "HTTP_PROXY with credentials": True,
    "NO_PROXY naming the host": False,
    "NO_PROXY naming the host and port": False,
    "HTTP_PROXY, the endpoint on loopback": False,
}


@pytest.mark.parametrize("named", list(PROXIED))
def test_requests_go_through_the_environments_http_proxy_unless_no_proxy_names_the_host(
    tmp_path, sim, named
):
    """Read once a host (aiohttp read them in a thread for every request), as httpx reads them; loopback is
    reached directly, whatever the environment says."""
    proxy = RecordingProxy()
    port = httpx.URL(sim.base_url).port
    base_url = sim.base_url if "loopback" in named else elsewhere(sim.base_url)
    try:
        env = {
            "HTTP_PROXY": {
                "HTTP_PROXY with credentials": proxy.url.replace("//", "//ann:p%C3%A4ss@"),
            }.get(named, proxy.url),
            "NO_PROXY": {
                "NO_PROXY naming the host": ELSEWHERE,
                "NO_PROXY naming the host and port": f"example.com,{ELSEWHERE}:{port}",
            }.get(named, ""),
            "OPENAI_API_KEY": "sk-test",  # asked for beyond loopback
        }
        args = ["run", "--no-ui", "--steps", "2", "--group-size", "2", "--base-url", base_url]
        done = run_cli([*args, "--out", str(tmp_path / "groups.jsonl")], tmp_path, **env)
    finally:
        proxy.stop()
    asked = [line for line in proxy.lines if b"/chat/completions" in line]
    if "NO_PROXY" in named:  # asked directly: only the proxy knows that name
        assert done.returncode == 2 and "does not resolve" in done.stderr, done.stderr
        assert proxy.lines == []
        return
    assert done.returncode == 0, done.stderr
    if not PROXIED[named]:
        assert proxy.lines == []
    else:
        probed = f"GET {elsewhere(sim.base_url)}/models ".encode()
        assert any(line.startswith(probed) for line in proxy.lines), proxy.lines
        assert len(asked) == 4, proxy.lines
        assert all(line.startswith(f"POST http://{ELSEWHERE}:".encode()) for line in asked)
    if "credentials" in named:
        sent = base64.b64encode("ann:päss".encode()).decode()
        assert proxy.headers.count(f"Proxy-Authorization: Basic {sent}".encode()) >= 4
        assert "päss" not in done.stderr and "p%C3%A4ss" not in done.stderr


def test_the_embedded_simulation_is_reached_directly_whatever_proxy_the_environment_names(tmp_path):
    """HTTP_PROXY without NO_PROXY sent the embedded endpoint's loopback requests to the proxy: the README's
    first command failed."""
    closed = "http://127.0.0.1:9"
    env = {"HTTP_PROXY": closed, "HTTPS_PROXY": closed, "ALL_PROXY": closed, "NO_PROXY": ""}
    args = ["run", "--no-ui", "--steps", "2", "--group-size", "2"]
    done = run_cli([*args, "--out", str(tmp_path / "groups.jsonl")], tmp_path, **env)
    assert done.returncode == 0, done.stderr
    assert len(read_jsonl(tmp_path / "groups.jsonl")) == 2
    assert "endpoint error" not in done.stderr, done.stderr


def test_a_proxy_that_goes_away_mid_run_is_named_in_the_endpoint_errors(tmp_path, slow_sim):
    """They said "cannot connect to <the endpoint>", which answered all along."""
    proxy = RecordingProxy()
    args = ["run", "--no-ui", "--steps", "1000", "--group-size", "2"]
    args += ["--base-url", elsewhere(slow_sim.base_url)]
    out = tmp_path / "groups.jsonl"
    env = {"HTTP_PROXY": proxy.url, "OPENAI_API_KEY": "sk-test"}
    process = start_cli([*args, "--out", str(out)], tmp_path, **env)
    try:
        wait_for_lines(out, 2, process)
        proxy.stop()
        read_until(process.stderr, f"through the proxy {proxy.url}", "no error named the proxy")
    finally:
        for _ in range(2):  # the second cancels the groups in flight
            process.send_signal(signal.SIGINT)
            time.sleep(0.2)  # two presses, as a person makes them: paced, not a wait for something
        process.communicate(timeout=60)


@pytest.mark.parametrize("where", ["elsewhere", "loopback", "embedded"])
def test_a_socks_proxy_in_the_environment_is_one_sentence(tmp_path, sim, where):
    """A desktop's all_proxy=socks://...: httpx raised ImportError (a traceback) without its socks extra,
    in the probe and as atroposlib made its OpenAI client (the embedded endpoint is not probed)."""
    args = ["run", "--no-ui", "--steps", "2"]
    if where != "embedded":
        args += ["--base-url", elsewhere(sim.base_url) if where == "elsewhere" else sim.base_url]
    done = run_cli(args, tmp_path, ALL_PROXY="socks5://127.0.0.1:1", OPENAI_API_KEY="sk-test")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "names a SOCKS proxy" in done.stderr, done.stderr
    if where == "elsewhere":
        assert "HTTP proxies only (NO_PROXY can leave this host out)" in done.stderr


def test_a_netrc_entry_for_the_endpoint_breaks_no_request(tmp_path, sim):
    """aiohttp's netrc lookup gave a request credentials beside its Authorization header: refused, each."""
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login someone password secret\n")
    netrc.chmod(0o600)
    args = ["run", "--no-ui", "--steps", "2", "--group-size", "2", "--base-url", sim.base_url]
    done = run_cli([*args, "--out", str(tmp_path / "groups.jsonl")], tmp_path, NETRC=str(netrc))
    assert done.returncode == 0, done.stderr
    assert len(read_jsonl(tmp_path / "groups.jsonl")) == 2
