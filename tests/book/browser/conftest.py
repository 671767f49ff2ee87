"""Fixtures of the browser tests: the book (built once per session by ``site`` in ``tests/conftest.py``)
served on 127.0.0.1, and headless Chromium;
``wait_until``, a condition waited for instead of a fixed sleep; and ``Visit``, one page opened with every request and console message recorded (shared by
``test_site.py`` and ``test_live.py``: ``from tests.book.browser.conftest import SHOTS, Visit``), and
``site_pages``, every page of the built site.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parents[3]

SHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SETTLE_S = 15  # at most this long for the requests still in flight after a page's load event


@pytest.fixture(scope="session")
def server(site):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).is_file():
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (apt-get install -y chromium)")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    with pytest.importorskip("playwright.sync_api").sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield b
        b.close()


def wait_until(page, condition: str, arg=None, timeout_ms: float = 500) -> None:
    """Wait until the JavaScript ``condition`` (a function of ``arg``) holds, at most ``timeout_ms``:
    the fixed wait it replaces. The check that follows reports it if it never does."""
    from playwright.sync_api import TimeoutError

    try:
        page.wait_for_function(condition, arg=arg, timeout=timeout_ms)
    except TimeoutError:
        pass


def site_pages(site: Path) -> list[str]:
    """Every page of the built site, as paths relative to it (without ``_static``, ``_sources`` etc.)."""
    return sorted(
        str(p.relative_to(site))
        for p in site.rglob("*.html")
        if not any(part.startswith(("_", ".")) for part in p.relative_to(site).parts)
    )


class Visit:
    """One page load with every request and console message recorded.

    Requests to any other scheme and host than ``allowed_scheme_host`` (and ``data:``) are aborted
    and listed in ``foreign``; console errors and uncaught exceptions are listed in ``errors``.
    Use it as a context manager (``with Visit.served(server, browser, name) as visit:``) so that
    its browser context is closed however the test ends.
    """

    def __init__(self, browser, url: str, allowed_scheme_host: tuple[str, str]):
        self.foreign, self.errors = [], []
        self.context = browser.new_context(viewport={"width": 1280, "height": 1000})
        self.page = self.context.new_page()

        def route(r):
            u = urlparse(r.request.url)
            if u.scheme == "data" or (u.scheme, u.netloc) == allowed_scheme_host:
                r.continue_()
            else:
                self.foreign.append(r.request.url)
                r.abort()

        self.page.route("**/*", route)
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        in_flight = set()  # requests asked for and not yet answered (or aborted)
        self.page.on("request", lambda r: in_flight.add(r))
        self.page.on("requestfinished", lambda r: in_flight.discard(r))
        self.page.on("requestfailed", lambda r: in_flight.discard(r))
        self.page.goto(url, wait_until="load")
        # Settled when no request is in flight and the web fonts have loaded (after the load event
        # these pages ask only for the favicon). This replaces Playwright's "networkidle", which
        # waits for 500 ms without a request: half a second per page, on about 90 page loads. A page
        # that redirects (index.html: a meta refresh, which navigates just after its load event)
        # still waits for "networkidle", which covers the next page's load.
        from playwright.sync_api import Error

        try:
            redirects = self.page.evaluate(
                "() => !!document.querySelector('meta[http-equiv=refresh]')"
            )
        except Error:  # the page went away: it is navigating already
            redirects = True
        if redirects:
            self.page.wait_for_load_state("networkidle")
        deadline = time.monotonic() + SETTLE_S
        while in_flight and time.monotonic() < deadline:
            self.page.wait_for_timeout(10)  # the events are delivered meanwhile
        self.page.evaluate("() => document.fonts.ready.then(() => true)")
        # MathJax (loaded only on pages with math) typesets after load; wait until it says it is done.
        if self.page.evaluate("() => !!document.querySelector('script[src*=mathjax]')"):
            self.page.wait_for_function(
                "() => window.MathJax && MathJax.startup && MathJax.startup.promise"
            )
            self.page.evaluate("() => MathJax.startup.promise")

    @classmethod
    def served(cls, server: str, browser, name: str) -> Visit:
        """The page ``name`` (e.g. ``live.html``) of the served site; only the server's own host is allowed."""
        u = urlparse(server)
        return cls(browser, f"{server}/{name}", (u.scheme, u.netloc))

    def close(self):
        self.context.close()

    def __enter__(self) -> Visit:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
