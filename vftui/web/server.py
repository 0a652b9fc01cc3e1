"""``vftui serve``'s web server: textual-serve, with a door.

textual-serve starts a command per browser tab and streams its screen over a websocket; it checks
no one. Any page the user visits could open that websocket to localhost, a name rebound to
127.0.0.1 reaches it, any local user of a shared machine can connect to a loopback port (a run's
control socket is its owner's alone), and its page fetches a font from the internet. So here:

- a token, printed once at the start, is asked for on a page of its own and then kept in a cookie
  (HttpOnly, SameSite=Strict), never in a URL, so no access log or browser history holds it;
- that cookie is bound to this server by a secret path: a browser sends a host's cookies to all of
  its ports, but only for paths under their ``Path``. Sign-in sends the browser to ``/s/SECRET/``,
  the cookie's Path, and the dashboard's page, its websocket and the tabs the runs screen opens are
  served there only, so a server on another port of the host never gets the cookie (it can neither
  read nor guess the path), and a cookie replayed anywhere else opens nothing. ``/`` never names the
  path, whatever cookie comes with it: it sends to the sign-in page;
- the websocket must come from a page of this server (its Origin), and on loopback every request
  must name a loopback host (a rebound name is refused);
- the page is vftui's own: xterm's stylesheet, textual.js and the font from the installed packages,
  under a Content-Security-Policy that lets it reach nothing else.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import secrets
import sys
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import aiohttp_jinja2
import jinja2
from aiohttp import web
from textual_serve.server import Server
from yarl import URL

from vftui.errors import EXIT_INTERRUPTED
from vftui.loopback import is_loopback_host
from vftui.text.printable import one_line, say

TEMPLATES = Path(__file__).parent / "templates"
COOKIE = "vftui-serve"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; font-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'"
)
PUBLIC = ("/login", "/vftui/page.css", "/static/")  # what a browser without the cookie may fetch
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
OPENED = "/open/{how:attach|view}/{id:[0-9a-f]{4,24}}"  # a run the runs screen opened in a tab
HOME = "/s/{secret:[A-Za-z0-9_-]{1,64}}"  # the session's secret path: its cookie's Path
PAGES = {"vftui-page", "vftui-opened"}  # without the session: the sign-in page
WEBSOCKETS = {"websocket", "vftui-ws", "vftui-opened-ws"}  # textual-serve's, at /ws, and ours


LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}
# a tab's terminal, in cells: beyond, a session's memory runs away
MIN_SIZE, MAX_SIZE = (10, 5), (500, 200)
SESSION: ContextVar[str] = ContextVar("session")  # the command of the tab this request serves


Opener = Callable[[str, str], str | None]
"""The command of a tab the runs screen opened: (attach or view, the run's id) -> the command, or None
for an id no run has."""


class VftuiServer(Server):
    """Serves ``command()`` at ``/s/SECRET/``, asked again as each tab connects (a run that ended since is
    viewed), and at ``/s/SECRET/open/{how}/{id}`` what ``opener`` says: the tabs the runs screen opens, one
    a run. ``/`` sends to the sign-in page, which sends to ``/s/SECRET/``."""

    def __init__(
        self, command: Callable[[], str], opener: Opener, what: str, host: str, port: int
    ) -> None:
        url_host = f"[{host}]" if ":" in host else host
        super().__init__(command(), host=host, port=port, title=f"vftui: {what}")
        self.public_url = f"http://{url_host}:{port}"
        self._command, self._opener, self._what = command, opener, what
        self._exiting = False
        self._tabs: set[asyncio.Task[Any]] = set()  # each open tab's websocket handler
        self.token = secrets.token_urlsafe(24)
        # the cookie's value: the token itself never leaves
        self._session = secrets.token_urlsafe(32)
        # the secret path, the cookie's: given at sign-in, to a browser that had the token
        self._secret = secrets.token_urlsafe(24)
        self._home = f"/s/{self._secret}/"
        self._cookie = f"{COOKIE}-{port}"  # a browser sends a host's cookies to all its ports
        # by name alone: a port forwarded to another (ssh -L 9000:127.0.0.1:8000) keeps working
        self._names = LOOPBACK_NAMES | {host.strip("[]")} if is_loopback_host(host) else None

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self._guard)
        aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(TEMPLATES))
        app.router.add_get("/login", self._login_page)
        app.router.add_post("/login", self._login)
        app.router.add_get("/vftui/page.css", self._css)
        # textual-serve's own / and /ws stay: / sends to the sign-in page, /ws opens for no one
        app.router.add_get(HOME + "/", self.handle_index, name="vftui-page")
        app.router.add_get(HOME + "/ws", self.handle_websocket, name="vftui-ws")
        app.router.add_get(HOME + OPENED, self.handle_index, name="vftui-opened")
        app.router.add_get(HOME + "/ws" + OPENED, self.handle_websocket, name="vftui-opened-ws")
        app.on_shutdown.append(self._close_tabs)
        return app

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            response = await self._checked(request, handler)
        except web.HTTPException as e:
            _secured(e)
            raise
        return _secured(response)

    async def _checked(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self._names is not None and _host_name(request) not in self._names:
            raise web.HTTPForbidden(text="vftui serve answers its own host name only")
        if _static(request) and not self._a_static_file(request.match_info["filename"]):
            raise web.HTTPNotFound()  # textual-serve lists its folders, to anyone
        route = request.match_info.route.name
        websocket = route in WEBSOCKETS or request.path.startswith("/ws")
        if websocket and request.headers.get("Origin") != self._origin(request):
            raise web.HTTPForbidden(text="the dashboard's websocket opens from its own page only")
        if not request.path.startswith(PUBLIC) and not self._signed_in(request):
            if request.path == "/" or route in PAGES:
                raise web.HTTPSeeOther("/login")
            raise web.HTTPUnauthorized(text="sign in at /login with the token vftui serve printed")
        return await handler(request)

    def _a_static_file(self, filename: str) -> bool:
        """A file under the static folder: no folder (``/static/js``, ``/static/%2e``), nothing above it."""
        root = Path(self.statics_path).resolve()
        if Path(filename).is_absolute():
            return False
        path = (root / filename).resolve()
        return path.is_relative_to(root) and path.is_file()

    def _origin(self, request: web.Request) -> str:
        return f"{request.scheme}://{request.host}"

    def _signed_in(self, request: web.Request) -> bool:
        """The session's cookie, under the secret path (a cookie replayed to any other path is none)."""
        secret = request.match_info.get("secret")
        if secret is None or not _same(secret, self._secret):
            return False
        return _same(request.cookies.get(self._cookie, ""), self._session)

    async def _login_page(self, request: web.Request, refused: bool = False) -> web.Response:
        return aiohttp_jinja2.render_template(
            "login.html",
            request,
            {"title": self.title, "refused": refused},
            status=403 if refused else 200,
        )

    async def _login(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Origin", self._origin(request)) != self._origin(request):
            raise web.HTTPForbidden(text="sign in from this server's own page")
        try:
            form = await request.post()
        except (UnicodeDecodeError, LookupError, ValueError):
            raise web.HTTPBadRequest(text="a form this page did not send") from None
        given = form.get("token")
        if not isinstance(given, str) or not _same(given, self.token):
            return await self._login_page(request, refused=True)
        response = web.HTTPSeeOther(self._home)
        response.set_cookie(
            self._cookie, self._session, httponly=True, samesite="Strict", path=self._home
        )
        raise response

    async def _css(self, request: web.Request) -> web.FileResponse:
        return web.FileResponse(TEMPLATES / "page.css")

    async def handle_index(self, request: web.Request) -> web.Response:
        """vftui's page: textual-serve's would fetch a font from the internet."""
        opened = "how" in request.match_info
        if opened and await asyncio.to_thread(self._opened, request) is None:
            raise web.HTTPNotFound(text="no run has that id")
        opened_path = (
            f"/open/{request.match_info['how']}/{request.match_info['id']}" if opened else ""
        )
        context: dict[str, Any] = {
            "title": self.title,
            "static": "/static/",
            # under the secret path, where the cookie goes (textual.js takes this URL as it is)
            "websocket": f"ws://{request.host}{self._home}ws{opened_path}",
            "font_size": min(max(_int(request.query.get("fontsize"), 16), 6), 48),
        }
        return aiohttp_jinja2.render_template("app_index.html", request, context)

    @property
    def command(self) -> str:
        """The command of the tab being connected (textual-serve reads it as it starts the session)."""
        return SESSION.get(self._first)

    @command.setter
    def command(self, value: str) -> None:
        self._first = value  # textual-serve's own, at its start

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """The tab's command, asked in a thread (a run that does not answer must not stop the others), in this
        request's context alone (two tabs connecting at once each get their own); its size bounded."""
        if "how" in request.match_info:
            command = await asyncio.to_thread(self._opened, request)
        else:
            command = await asyncio.to_thread(self._command)
        if command is None:
            raise web.HTTPNotFound(text="no run has that id")
        SESSION.set(command)
        width, height = _clamped(
            _int(request.query.get("width"), 80), _int(request.query.get("height"), 24)
        )
        sized = request.clone(rel_url=request.rel_url.update_query(width=width, height=height))
        this = asyncio.current_task()
        assert this is not None  # a request is always handled in a task
        self._tabs.add(this)
        try:
            return await super().handle_websocket(sized)
        finally:
            self._tabs.discard(this)

    async def _close_tabs(self, app: web.Application) -> None:
        """As serve stops: each tab's page closed and its session told to quit, at once (they were left to the
        shutdown's wait for open connections: a dashboard's tab held serve 23 s)."""
        for tab in self._tabs:
            tab.cancel()
        await asyncio.gather(*self._tabs, return_exceptions=True)

    async def _process_messages(self, websocket: web.WebSocketResponse, app_service: Any) -> None:
        """A resize from the page, bounded as the first size is; a tab the session opens, under the secret
        path."""
        resize, write = app_service.set_terminal_size, app_service.remote_write_str

        async def bounded(width: int, height: int) -> None:
            await resize(*_clamped(int(width), int(height)))

        async def homed(text: str) -> None:
            await write(self._homed(text))

        app_service.set_terminal_size, app_service.remote_write_str = bounded, homed
        await super()._process_messages(websocket, app_service)

    def _homed(self, text: str) -> str:
        """The runs screen opens ``/open/HOW/ID`` (``App.open_url``): under the secret path, where the
        cookie goes, as ``/s/SECRET/open/HOW/ID``. Anything else the session says, as it is."""
        try:
            message = json.loads(text)
        except ValueError:
            return text
        if not (isinstance(message, list) and len(message) == 2 and message[0] == "open_url"):
            return text
        opened = message[1]
        if not (isinstance(opened, dict) and str(opened.get("url", "")).startswith("/open/")):
            return text
        opened["url"] = self._home + opened["url"].removeprefix("/")
        return json.dumps(message)

    def _opened(self, request: web.Request) -> str | None:
        return self._opener(request.match_info["how"], request.match_info["id"])

    def request_exit(self) -> None:
        """Ctrl-C or SIGTERM: close the tabs and stop; again while that goes on: stop now (the sessions end
        with this process)."""
        if self._exiting:
            say("vftui: serve: stopped at once", sys.stderr)
            os._exit(EXIT_INTERRUPTED)
        self._exiting = True
        super().request_exit()

    def initialize_logging(self) -> None:
        """Its own lines only: textual-serve's logo and request log would bury the token's line, and aiohttp's
        errors about a request it could not read quote its headers, a cookie included. A tab's session that
        fails is one line."""
        quiet = logging.getLogger("aiohttp")
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False
        sessions = logging.getLogger("textual-serve")
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(OneLine())
        sessions.addHandler(handler)
        sessions.propagate = False

    async def on_startup(self, app: web.Application) -> None:
        say(
            [
                f"vftui: serving {self._what} at {self.public_url}/ (Ctrl-C stops serving; a run "
                "goes on)",
                f"vftui: the page asks for this token once per browser: {self.token}",
            ],
            sys.stderr,
        )


def _secured(response: web.StreamResponse) -> web.StreamResponse:
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "same-origin"  # no-referrer makes a form's Origin null
    return response


class OneLine(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"vftui: serve: a tab's session failed: {one_line(str(record.msg))[:300]}"


def _same(given: str, secret: str) -> bool:
    """In constant time; any text (a stray non-ASCII character is no match, not an error)."""
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), secret.encode())


def _static(request: web.Request) -> bool:
    """A request for textual-serve's static folder (``/static`` itself included)."""
    return isinstance(request.match_info.route.resource, web.StaticResource)


def _host_name(request: web.Request) -> str | None:
    try:
        return URL(f"http://{request.host}").host
    except ValueError:
        return None


def _clamped(width: int, height: int) -> tuple[int, int]:
    return (
        min(max(width, MIN_SIZE[0]), MAX_SIZE[0]),
        min(max(height, MIN_SIZE[1]), MAX_SIZE[1]),
    )


def _int(text: str | None, default: int) -> int:
    try:
        return int(text or "")
    except ValueError:
        return default
