"""``vftui serve``: the dashboard in a real headless Chromium (Debian's, driven by Playwright), and the
server's door tried as an attacker would: another site's websocket, a rebound host name, a wrong token, a
bind beyond loopback without saying so."""

from __future__ import annotations

import contextlib
import http.client
import http.server
import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.browser import Recorded, chromium_page
from tests.conftest import (
    REPO,
    free_port,
    read_until,
    run_cli,
    start_cli,
    wait_until,
)
from vftui.errors import UserError
from vftui.live.client import control
from vftui.run_files.files import RunFiles

VIEWED = REPO / "tests" / "data" / "groups.jsonl"
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


@dataclass
class Served:
    url: str
    token: str
    process: subprocess.Popen
    err: str = ""  # what serve printed after its token line, once it has ended
    out: str = ""  # what serve printed on stdout, once it has ended


@contextlib.contextmanager
def served(tmp_path: Path, *args: str, **env: str) -> Iterator[Served]:
    """``vftui serve ARGS`` on a free loopback port, ended (Ctrl-C) after; no session is left behind."""
    port = free_port()
    process = start_cli(["serve", *args, "--port", str(port)], tmp_path, **env)
    try:
        served_line = read_until(process.stderr, "vftui: serving", "serve never said it served")
        token = read_until(process.stderr, "token", "serve printed no token").split()[-1]
        url = f"http://127.0.0.1:{port}"
        assert f"at {url}/" in served_line and token not in served_line
        wait_until(lambda: _answers(url), "serve never answered")
        it = Served(url, token, process)
        yield it
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGINT)
        it.out, it.err = process.communicate(timeout=30)


@contextlib.contextmanager
def tab(served: Served, client: httpx.Client, query: str = "width=80&height=24") -> Iterator[int]:
    """A browser tab's websocket, open while inside: the pid of its session."""
    headers = {"Origin": served.url, **UPGRADE}
    before = set(_children(served.process.pid))  # an earlier tab's, still ending
    with client.stream("GET", f"{home(client)}ws?{query}", headers=headers) as answer:
        assert answer.status_code == 101
        new = wait_until(lambda: set(_children(served.process.pid)) - before, "no session started")
        yield new.pop()


UPGRADE = {
    "Connection": "Upgrade",
    "Upgrade": "websocket",
    "Sec-WebSocket-Version": "13",
    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
}


def _answers(url: str) -> bool:
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(f"{url}/login", timeout=2).status_code == 200
    return False


SECRET_PATH = re.compile(r"/s/[A-Za-z0-9_-]{32}/")


def signed_in(url: str, token: str) -> httpx.Client:
    """A client with the session's cookie, which it sends under the secret path sign-in gave only."""
    client = httpx.Client(base_url=url, timeout=10)
    answer = client.post("/login", data={"token": token}, headers={"Origin": url})
    assert answer.status_code == 303, answer.text
    assert SECRET_PATH.fullmatch(answer.headers["location"]), answer.headers["location"]
    assert home(client) == answer.headers["location"], "the cookie's Path is the secret path"
    return client


def home(client: httpx.Client) -> str:
    """The secret path a signed-in client was sent to: its cookie's Path."""
    return next(c.path for c in client.cookies.jar if c.name.startswith("vftui-serve-"))


def websocket_handshake(
    url: str, client: httpx.Client, origin: str | None, path: str | None = None
) -> int:
    headers = {**UPGRADE, **({"Origin": origin} if origin is not None else {})}
    path = f"{home(client)}ws" if path is None else path
    with client.stream("GET", f"{path}?width=80&height=24", headers=headers) as answer:
        return answer.status_code


def test_the_door_turns_away_other_sites_rebound_names_and_wrong_tokens(tmp_path):
    with served(tmp_path, str(VIEWED), OPENAI_API_KEY="sk-test123") as it:
        url, token = it.url, it.token
        anonymous = httpx.Client(base_url=url, timeout=10)
        first = anonymous.get("/")
        assert first.status_code == 303 and first.headers["location"] == "/login"
        assert "default-src 'none'" in first.headers["content-security-policy"]
        assert anonymous.get("/ws").status_code in (401, 403)
        wrong = anonymous.post("/login", data={"token": "guess"}, headers={"Origin": url})
        assert wrong.status_code == 403 and "not the token" in wrong.text
        assert not wrong.cookies
        rebound = anonymous.get(
            "/login", headers={"Host": f"attacker.example:{url.rsplit(':')[-1]}"}
        )
        assert rebound.status_code == 403, "a name rebound to 127.0.0.1 is refused"
        forged = anonymous.post(
            "/login", data={"token": token}, headers={"Origin": "http://attacker.example"}
        )
        assert forged.status_code == 403, "another site's form cannot sign the browser in"

        client = signed_in(url, token)
        assert 'class="textual-terminal"' in client.get(home(client)).text
        assert websocket_handshake(url, client, "http://attacker.example") == 403
        assert websocket_handshake(url, client, None) == 403
        assert websocket_handshake(url, client, url) == 101, "its own page's websocket opens"
        for page in (home(client), "/login"):
            assert "googleapis" not in client.get(page).text, "the page fetches nothing outside"
        assert client.get("/static/js/").status_code == 404, "textual-serve's folder listings"
        forwarded = anonymous.get("/login", headers={"Host": "127.0.0.1:9000"})
        assert forwarded.status_code == 200, "ssh -L 9000:127.0.0.1:PORT: another port, same name"
        for body, kind in (
            (b"token=\xff", "application/x-www-form-urlencoded"),
            (b"token=x", "application/x-www-form-urlencoded; charset=bogus"),
        ):
            odd = anonymous.post(
                "/login", content=body, headers={"Origin": url, "Content-Type": kind}
            )
            assert odd.status_code == 400
        stray = anonymous.post("/login", data={"token": token + "é"}, headers={"Origin": url})
        assert stray.status_code == 403 and "not the token" in stray.text
        session = client.cookies.get(f"vftui-serve-{url.rsplit(':')[-1]}")
        big = anonymous.get("/", headers={"Cookie": f"vftui-serve-1={session}; pad={'x' * 9000}"})
        assert big.status_code >= 400
        with tab(it, client) as pid:
            assert b"sk-test123" not in Path(f"/proc/{pid}/environ").read_bytes()
    assert "Traceback" not in it.err and session not in it.err, it.err


def test_the_session_s_cookie_opens_the_dashboard_under_its_secret_path_only(tmp_path):
    """Issue 42, item 22: the cookie went to every port of 127.0.0.1 (a browser sends a host's cookies to
    all of its ports); another local user's server on another port got it and, replayed with a forged
    Origin, it opened the dashboard's websocket and steered the run. Its Path is now a secret path, and
    nothing opens with it anywhere else."""
    with served(tmp_path, str(VIEWED)) as it:
        url = it.url
        anonymous = httpx.Client(base_url=url, timeout=10)
        answer = anonymous.post("/login", data={"token": it.token}, headers={"Origin": url})
        secret = answer.headers["location"]
        assert answer.status_code == 303 and SECRET_PATH.fullmatch(secret), secret
        set_cookie = answer.headers["set-cookie"]
        assert f"Path={secret}" in set_cookie and "HttpOnly" in set_cookie, set_cookie
        assert "SameSite=Strict" in set_cookie, set_cookie
        name = f"vftui-serve-{url.rsplit(':')[-1]}"
        replayed = {"Cookie": f"{name}={answer.cookies[name]}", "Origin": url}
        replay = httpx.Client(base_url=url, timeout=10, headers=replayed)
        again = replay.post("/login", data={"token": it.token})
        assert again.headers["location"] == secret, "one secret path per serve"
        other = "/s/" + "A" * 32 + "/"
        for path in ("/ws", f"{other}ws", "/ws/open/view/ffffffff", f"{secret.rstrip('/')}ws"):
            assert websocket_handshake(url, replay, url, path) in (401, 403), path
        for path in ("/", other, f"{other}open/view/ffffffff", secret.upper(), secret.rstrip("/")):
            page = replay.get(path)
            assert page.status_code in (303, 401, 404), (path, page.status_code)
            assert "textual-terminal" not in page.text and secret not in page.text, path
            assert page.headers.get("location", "/login") == "/login", "/ never names the path"
        cookieless = httpx.Client(base_url=url, timeout=10)
        assert websocket_handshake(url, cookieless, url, f"{secret}ws") == 401, "no cookie: closed"
        assert replay.get(secret).status_code == 200, "under the secret path, the cookie opens"
        assert websocket_handshake(url, replay, url, f"{secret}ws") == 101
        bare = httpx.get(f"{url}{secret}", timeout=10)
        assert bare.status_code == 303 and bare.headers["location"] == "/login"
    assert "Traceback" not in it.err and secret not in it.err, it.err


def _raw_get(url: str, path: str, cookie: str = "") -> tuple[int, str]:
    """GET ``path`` as written (no client normalises ``%2e`` or ``..`` away)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request("GET", path, headers={"Cookie": cookie} if cookie else {})
        answer = connection.getresponse()
        return answer.status, answer.read().decode("utf-8", "replace")
    finally:
        connection.close()


def test_the_static_folder_lists_nothing_and_serves_only_its_files(tmp_path):
    with served(tmp_path, str(VIEWED)) as it:
        client = signed_in(it.url, it.token)
        cookie = "; ".join(f"{name}={value}" for name, value in client.cookies.items())
        for who in ("", cookie):  # anonymous, then signed in
            for path in (
                "/static/js",
                "/static/css",
                "/static/%2e",
                "/static/js/",
                "/static/",
                "/static",
                "/static/%2e%2e/server.py",
                "/static/..%2fserver.py",
                "/static/js/../../server.py",
            ):
                status, body = _raw_get(it.url, path, who)
                assert status in (403, 404), (path, bool(who), status)
                assert "Index of" not in body and "textual.js" not in body, (path, body[:200])
            status, body = _raw_get(it.url, "/static/js/textual.js", who)
            assert status == 200 and len(body) > 1000, "the page's own script still loads"
        assert client.get("/static/css/xterm.css").status_code == 200
    assert "Traceback" not in it.err, it.err


def test_bad_serve_settings_are_one_sentence_each(tmp_path):
    port = str(free_port())
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    cases = {
        ("--host", "0.0.0.0", "--port", port): "--allow-remote",
        ("--host", "", "--port", port): "--host is empty",
        ("--host", "no such host!", "--allow-remote", "--port", port): "is --host this machine's?",
        (str(tmp_path / "nowhere.jsonl"), "--port", port): "no such file, folder or run id",
        (str(fifo), "--port", port): "not a regular file or a folder",
        ("--theme", "nonsense", "--port", port): "unknown theme",
        ("--port", "70000"): "is not a port",
    }
    for args, said in cases.items():
        result = run_cli(["serve", *args], tmp_path)
        assert result.returncode == 2 and said in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr
    with served(tmp_path, str(VIEWED)) as it:
        taken = run_cli(["serve", "--port", it.url.rsplit(":")[-1]], tmp_path)
        assert taken.returncode == 2 and "--port another" in taken.stderr, taken.stderr


def test_a_host_name_is_served_and_printed_as_one_literal_address(tmp_path):
    """--host localhost printed http://localhost:P/, which Chromium tries at [::1]:P first: any local user
    listening there could show a sign-in page of their own and take the token."""
    with served(tmp_path, str(VIEWED), "--host", "localhost") as it:
        assert it.url.startswith("http://127.0.0.1:")  # served() checks the line printed says so
        assert httpx.get(f"{it.url}/login", timeout=10).status_code == 200


def test_ctrl_c_ends_serve_and_the_sessions_it_started(tmp_path):
    with served(tmp_path, str(VIEWED)) as it, tab(it, signed_in(it.url, it.token)) as session:
        it.process.send_signal(signal.SIGINT)
        it.process.wait(30)
    assert it.process.returncode == 0 and "Traceback" not in it.err, it.err
    wait_until(lambda: not _alive([session]), "the session's vftui outlived serve", timeout=15)


def test_a_second_ctrl_c_while_serve_stops_ends_it_at_once_saying_so(tmp_path):
    """It exited 1, silently."""
    with served(tmp_path, str(VIEWED)) as it, tab(it, signed_in(it.url, it.token)) as session:
        it.process.send_signal(signal.SIGINT)
        # two presses, as a person makes them (serve says nothing of the first): paced, not a wait
        time.sleep(0.2)
        it.process.send_signal(signal.SIGINT)
        it.process.wait(30)
    if it.process.returncode == 130:
        assert "stopped at once" in it.err
    else:  # the first had ended it before the second came
        assert it.process.returncode == 0, it.err
    assert "Traceback" not in it.err, it.err
    wait_until(lambda: not _alive([session]), "the session outlived serve", timeout=15)


def test_kill_9_of_serve_ends_its_sessions_too(tmp_path):
    """Nobody could see or close a session whose serve is gone: it ends with it (it outlived it, steering)."""
    with served(tmp_path, str(VIEWED)) as it, tab(it, signed_in(it.url, it.token)) as session:
        it.process.kill()
        it.process.wait(30)
        wait_until(lambda: not _alive([session]), "the session outlived serve", timeout=15)


def test_a_tab_s_terminal_size_is_bounded(tmp_path):
    """99999x99999 grew a session by 80 MB a second; a negative size crashed it."""
    with served(tmp_path, str(VIEWED)) as it:
        client = signed_in(it.url, it.token)
        with tab(it, client, "width=99999&height=99999") as huge:
            # not a wait for something: the span the session is watched growing (or not) for
            time.sleep(4)
            assert _rss_mb(huge) < 400, f"{_rss_mb(huge):.0f} MB"
        with tab(it, client, "width=-5&height=-5") as negative:
            # not a wait for something: the span the session is watched ending (or not) in
            time.sleep(3)
            assert _alive([negative]), "a negative size ended the session"
    assert "Traceback" not in it.err, it.err


def _rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status)[1]) / 1024


def _children(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in found.split()]


def _alive(pids: list[int]) -> bool:
    return any(Path(f"/proc/{p}").exists() for p in pids)


@pytest.fixture
def detached_run(tmp_path, slow_sim) -> Iterator[Path]:
    """A run in the background, long enough to steer; stopped at the end."""
    out = tmp_path / "groups.jsonl"
    detached = ["run", "--detach", "--steps", "100000", "--group-size", "2", "--out", str(out)]
    started = run_cli([*detached, "--base-url", slow_sim.base_url], tmp_path)
    assert started.returncode == 0, started.stderr
    try:
        yield out
    finally:
        with contextlib.suppress(UserError):  # it may have ended
            control(RunFiles(out).socket, lambda controls: controls.stop())


def signed_in_page(seen: Recorded, url: str, token: str) -> None:
    seen.page.goto(url)
    seen.page.fill("input[name=token]", token)
    seen.page.click("button")


@pytest.mark.needs("chromium", "playwright")
def test_in_chromium_a_key_pauses_the_run_and_its_figures_update(tmp_path, detached_run):
    out = detached_run
    with served(tmp_path, str(out)) as it, chromium_page() as seen:
        url, token = it.url, it.token
        signed_in_page(seen, url, token)
        wait_until(lambda: "running" in screen(seen), "the dashboard never came", timeout=60)
        first = wait_until(lambda: groups(seen), "no group count on the page", timeout=60)
        wait_until(lambda: groups(seen) > first, "the figures never updated", timeout=60)
        seen.page.focus(".xterm-helper-textarea")  # where xterm.js takes the keyboard
        seen.page.keyboard.press("Space")
        wait_until(lambda: state(tmp_path, out) == "paused", "the key did not pause", timeout=30)
        wait_until(lambda: "paused" in screen(seen)[-4000:], "the page never said paused")
        assert seen.errors == [], "the page logged errors"
        assert all(u.startswith(url) or u.startswith("data:") for u in seen.requests)
    assert state(tmp_path, out) == "paused", "closing the tab left the run as it was"


@pytest.mark.needs("chromium", "playwright")
def test_in_chromium_the_runs_screen_opens_a_run_in_a_tab_of_its_own(tmp_path, detached_run):
    """A second app in the tab's process would find its connection closed with the first: the run opens in a
    new tab, whose dashboard steers it, while the runs screen stays."""
    with served(tmp_path) as it, chromium_page() as seen:
        url, token = it.url, it.token
        signed_in_page(seen, url, token)
        wait_until(lambda: "running" in screen(seen), "the runs screen never listed the run")
        seen.page.focus(".xterm-helper-textarea")
        with seen.page.context.expect_page(timeout=30_000) as opening:
            seen.page.keyboard.press("Enter")
        tab = Recorded(opening.value)
        secret = urlsplit(seen.page.url).path
        assert SECRET_PATH.fullmatch(secret), seen.page.url
        assert re.fullmatch(rf"{url}{secret}open/attach/[0-9a-f]+", tab.page.url), tab.page.url
        wait_until(lambda: "ATTACHED" in screen(tab), "the new tab shows no dashboard", timeout=60)
        tab.page.focus(".xterm-helper-textarea")
        tab.page.keyboard.press("Space")
        wait_until(lambda: state(tmp_path, detached_run) == "paused", "its key did not pause")
        assert "-closed" not in seen.page.evaluate("document.body.className"), "the list stays"
        assert {c["path"] for c in seen.page.context.cookies()} == {secret}
        cookies = {c["name"]: c["value"] for c in seen.page.context.cookies()}
        unknown = httpx.get(f"{url}{secret}open/view/ffffffff", cookies=cookies)
        assert unknown.status_code == 404
        assert seen.errors == tab.errors == []


@pytest.mark.needs("chromium", "playwright")
def test_in_chromium_another_port_of_the_host_never_gets_the_session_s_cookie(tmp_path):
    """Issue 42, item 22: a server on another port of 127.0.0.1 got the cookie when the signed-in browser
    visited it (cookies do not keep to a port); replayed, it opened the dashboard's websocket."""
    heard: list[str] = []

    class Recording(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            heard.append(f"{self.path} {self.headers.get('Cookie', '')}")
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<p>another server</p>")

        def log_message(self, *args: object) -> None:
            pass

    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recording)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    elsewhere = f"http://127.0.0.1:{other.server_address[1]}"
    try:
        with served(tmp_path, str(VIEWED)) as it, chromium_page() as seen:
            signed_in_page(seen, it.url, it.token)
            wait_until(
                lambda: "textual-terminal" in seen.page.content(), "no dashboard", timeout=60
            )
            wait_until(lambda: screen(seen).strip(), "the dashboard never drew", timeout=60)
            assert SECRET_PATH.fullmatch(urlsplit(seen.page.url).path), seen.page.url
            for path in ("/", "/ws", "/login", "/open/view/ffffffff", "/s/"):
                seen.page.goto(elsewhere + path)
                assert "another server" in seen.page.content()
            seen.page.goto(it.url)
            assert seen.page.url == f"{it.url}/login", (
                "/ sends to the sign-in page, signed in or not"
            )
    finally:
        other.shutdown()
        other.server_close()
    visited = {line.split()[0] for line in heard}
    assert {"/", "/ws", "/login", "/open/view/ffffffff", "/s/"} <= visited, heard
    assert not [line for line in heard if "vftui-serve" in line], heard


@pytest.mark.needs("chromium", "playwright")
def test_in_chromium_the_sign_in_page_needs_no_font_to_draw(tmp_path):
    """The sign-in page was blank until the terminal's font loaded (a low of issue 42): it is drawn in
    the system's monospace and asks for no font at all."""
    with served(tmp_path, str(VIEWED)) as it, chromium_page() as seen:
        seen.page.goto(f"{it.url}/login")
        seen.page.wait_for_selector("input[name=token]")
        family = seen.page.evaluate("getComputedStyle(document.body).fontFamily")
        assert family == "monospace", family
        assert "paste the token" in seen.page.inner_text("body")
        seen.pump(300)
        assert not [url for url in seen.requests if "/fonts/" in url], seen.requests
        assert seen.errors == []


@pytest.mark.needs("chromium", "playwright")
def test_in_chromium_a_session_that_cannot_start_says_why_in_its_tab(tmp_path):
    """The file served went away: its tab shows the sentence (it was blank, the sentence on serve's stdout)."""
    served_file = tmp_path / "gone.jsonl"
    served_file.write_text('{"scores": [1.0], "tokens": [[1]], "masks": [[1]]}\n')
    with served(tmp_path, str(served_file)) as it, chromium_page() as seen:
        served_file.unlink()
        signed_in_page(seen, it.url, it.token)
        wait_until(lambda: "no such file" in words(seen), "the tab never said why", timeout=60)
        assert "q ends this session" in words(seen) and seen.errors == []
    assert "no such file" not in it.out + it.err, "said in the tab, not on serve's terminal"


@pytest.mark.needs("chromium", "playwright")
def test_in_chromium_sigterm_ends_serve_and_a_dashboard_s_tab_promptly(tmp_path, detached_run):
    """The tabs were left to aiohttp's wait for open connections: a dashboard's tab held serve 23 s."""
    with served(tmp_path, str(detached_run)) as it, chromium_page() as seen:
        signed_in_page(seen, it.url, it.token)
        wait_until(lambda: "running" in screen(seen), "the dashboard never came", timeout=60)
        sessions = _children(it.process.pid)
        asked = time.monotonic()
        it.process.send_signal(signal.SIGTERM)
        while it.process.poll() is None and time.monotonic() - asked < 60:
            seen.pump(50)  # the browser answers the page's closing as it goes
        took = time.monotonic() - asked
    # the bound tells serve's own end from aiohttp's wait for the open tab (which held serve 23 s)
    assert it.process.returncode == 0 and took < 15, (
        f"exit {it.process.returncode} after {took:.1f} s"
    )
    wait_until(lambda: not _alive(sessions), "the session outlived serve", timeout=15)
    assert state(tmp_path, detached_run) == "running", "the run goes on"


def screen(seen: Recorded) -> str:
    """The dashboard's terminal bytes the browser got, without their escape sequences."""
    return ANSI.sub("", seen.received())


def words(seen: Recorded) -> str:
    """The tab's text as one line of words: a sentence wrapped inside its frame reads whole (its break
    fell elsewhere under a longer tmp_path: xdist's popen-gwN made "no such" end a line, "file" start one)."""
    return FRAMED_WRAP.sub(" ", screen(seen))


FRAMED_WRAP = re.compile(r"[\s│]+")


def groups(seen: Recorded) -> int:
    counts = re.findall(r"(\d+)/100000 groups", screen(seen))
    return int(counts[-1]) if counts else 0


def state(tmp_path: Path, out: Path) -> str:
    rows = [json.loads(line) for line in run_cli(["runs", "--json"], tmp_path).stdout.splitlines()]
    return next(r["state"] for r in rows if r["path"] == str(out))


@pytest.mark.needs("chromium", "playwright")
def test_in_chromium_a_prime_rl_run_is_followed_live_in_its_tab(tmp_path):
    """``vftui serve RUN_DIR`` of a prime-rl run: the tab runs ``watch``, and a step written after the
    page opened reaches it."""
    run = tmp_path / "out" / "run"
    writer = start_cli(["sim-prime-run", str(run), "--steps", "12", "--every", "1"], tmp_path)
    try:
        wait_until(lambda: (run / "metrics.jsonl").exists(), "the run never began")
        with served(tmp_path, str(run)) as it, chromium_page() as seen:
            signed_in_page(seen, it.url, it.token)
            wait_until(lambda: "stability" in screen(seen), "the dashboard never came", timeout=60)
            wait_until(
                lambda: "step 12 / 12 (finished)" in words(seen),
                "the new steps never came",
                timeout=90,
            )
            assert seen.errors == [], "the page logged errors"
    finally:
        writer.wait(timeout=60)
