"""Debian's headless Chromium, driven by Playwright, with what a page did recorded: its console errors (a
Content-Security-Policy refusal is one), every address it asked for, and every dialog it opened (a script
that escaped the escaping would alert)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from tests.conftest import need, tool_path


@contextlib.contextmanager
def chromium_page(width: int = 1200, height: int = 800) -> Iterator[Recorded]:
    """A fresh page in a fresh browser (``@pytest.mark.needs("chromium", "playwright")`` on the test; without
    it, a missing one is still skipped outside CI and a failure in CI, never a skip there)."""
    need("chromium")
    need("playwright")
    from playwright import sync_api

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=tool_path("chromium"))
        try:
            yield Recorded(browser.new_page(viewport={"width": width, "height": height}))
        finally:
            browser.close()


class Recorded:
    """A page and what it did. Playwright's sync API hears the browser only during its own calls: ``pump``."""

    def __init__(self, page) -> None:
        self.page = page
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        self.frames: list[bytes] = []
        page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("request", lambda r: self.requests.append(r.url))
        page.on("dialog", self._dialog)
        page.on("websocket", lambda ws: ws.on("framereceived", self._frame))

    def _dialog(self, dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def _frame(self, payload: bytes | str) -> None:
        self.frames.append(payload if isinstance(payload, bytes) else payload.encode())

    def pump(self, ms: int = 100) -> None:
        self.page.wait_for_timeout(ms)

    def received(self) -> str:
        """What its websockets brought, as text (a served terminal's bytes)."""
        self.pump()
        return b"".join(self.frames).decode("utf-8", "replace")
