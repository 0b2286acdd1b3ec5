"""Browser tier: Playwright for Python driving Debian's headless Chromium against live_server.

Every page load records console errors, page errors, dialogs, Content-Security-Policy
violations and any request that leaves 127.0.0.1, so a test fails on a CDN, a script error,
an inline style or script the policy refuses, or an XSS that opens an alert.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.conftest import require

CHROMIUM = os.environ.get("ATLAS_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]
WIDTHS = (1440, 1024, 390)
"""The widths every page is checked at: a desktop, a small laptop (or a tablet on its side), a
phone. Tests parametrize over these rather than each keeping its own list."""
OVERFLOWS = """() => {
  const out = [];
  for (const el of document.querySelectorAll('.card')) {
    if (el.scrollWidth > el.clientWidth + 1) {
      out.push('card ' + (el.id || el.querySelector('h2,h1')?.textContent || el.className) +
               ' ' + el.scrollWidth + '>' + el.clientWidth);
    }
  }
  for (const table of document.querySelectorAll('table.data')) {
    const parent = table.parentElement;
    if (!table.closest('.wrap') && table.getBoundingClientRect().width > parent.clientWidth + 1) {
      out.push('table outside a scrolling wrapper: ' + (table.id || parent.className));
    }
  }
  const page = document.documentElement;
  if (page.scrollWidth > window.innerWidth + 1) {
    out.push('page ' + page.scrollWidth + '>' + window.innerWidth);
  }
  return out;
}"""
"""A script that lists what overflows: a card's content wider than the card, a table outside
its scrolling wrapper, the page wider than the window (an empty list: nothing)."""
ARTIFACTS = Path(
    os.environ.get("ATLAS_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "test-artifacts")
)


@pytest.fixture(scope="session")
def browser():
    require(
        Path(CHROMIUM).exists() or shutil.which("chromium") is not None,
        "Chromium not found (apt-get install chromium)",
    )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover - requirements-dev installs it
        require(False, "playwright not installed (pip install -r requirements-dev.txt)")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


CSP_LISTENER = """
document.addEventListener("securitypolicyviolation", function (e) {
  window.__atlasCspViolation(e.violatedDirective + " " + (e.blockedURI || "inline") + " at " +
    e.sourceFile + ":" + e.lineNumber + " sample=" + e.sample);
});
"""


class Watched:
    """A page with the problems it ran into."""

    def __init__(self, page, base_url: str) -> None:
        self.page = page
        self.base = base_url
        self.console_errors: list[str] = []
        self.page_errors: list[str] = []
        self.dialogs: list[str] = []
        self.outside_requests: list[str] = []
        self.csp_violations: list[str] = []
        # The browser reports each violation as an event in the page; it comes back to Python
        # as it happens, so one on a page the test has since left is not lost.
        page.expose_function("__atlasCspViolation", lambda text: self.csp_violations.append(text))
        page.add_init_script(CSP_LISTENER)
        page.on("console", lambda m: m.type == "error" and self.console_errors.append(m.text))
        page.on("pageerror", lambda e: self.page_errors.append(str(e)))
        page.on("dialog", self._dialog)
        page.on("request", self._request)

    def _dialog(self, dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def _request(self, request) -> None:
        host = urlparse(request.url).hostname
        if request.url.startswith(("data:", "blob:", "about:")):
            return
        if host not in ("127.0.0.1", "localhost"):
            self.outside_requests.append(request.url)

    def open(self, path: str, wait_for: str | None = None):
        response = self.page.goto(self.base + path)
        assert response is not None and response.status == 200, (path, response and response.status)
        drawn = re.fullmatch(r"#figure-([\w-]+) \.main-svg", wait_for or "")
        if drawn:
            self.figure(drawn[1])
        elif wait_for:
            self.page.wait_for_selector(wait_for, timeout=15000)
        return response

    def figure(self, name: str, timeout: float = 20000) -> None:
        """Scroll figure `name` into view, as a person would, and wait until it is drawn.

        static/js/figures.js draws a figure only once it nears the viewport, so waiting for
        a figure's SVG without scrolling to it waits for ever on a long page.
        """
        self.page.locator(f"#figure-{name}").scroll_into_view_if_needed(timeout=timeout)
        self.page.wait_for_selector(f"#figure-{name} .main-svg", timeout=timeout)

    def draw_all_figures(self, timeout: float = 20000) -> None:
        """Scroll to every figure on the page in turn, as a reader would, and wait for each."""
        from playwright.sync_api import expect  # the browser fixture skips when it is missing

        figures = self.page.locator("[data-figure], [data-figure-url]")
        for index in range(figures.count()):
            figure = figures.nth(index)
            figure.scroll_into_view_if_needed(timeout=timeout)
            expect(figure).not_to_have_class(re.compile(r"\bpending\b"), timeout=timeout)

    def screenshot(self, name: str) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)

    def assert_clean(self) -> None:
        assert self.console_errors == [], self.console_errors
        assert self.page_errors == [], self.page_errors
        assert self.dialogs == [], self.dialogs
        assert self.outside_requests == [], self.outside_requests
        assert self.csp_violations == [], self.csp_violations


def sign_in(
    browser,
    base_url: str,
    username: str,
    password: str,
    width: int = 1366,
    height: int = 900,
    **options,
):
    """A new browser context at `width` px, signed in through the login form: (context, page).

    `options` go to the context as they are (`color_scheme="dark"`, `accept_downloads`).
    """
    context = browser.new_context(
        viewport={"width": width, "height": 900 if width != 1366 else 850}, **options
    )
    watched = Watched(context.new_page(), base_url)
    watched.open("/login/")
    watched.page.fill("#id_username", username)
    watched.page.fill("#id_password", password)
    watched.page.click("button[type=submit]")
    watched.page.wait_for_url(base_url + "/")
    return context, watched


@pytest.fixture
def signed_in(browser, live_server, django_user_model):
    django_user_model.objects.create_user("viewer", password="viewer-password-1")
    context, watched = sign_in(browser, live_server.url, "viewer", "viewer-password-1", height=850)
    yield watched
    context.close()


@pytest.fixture
def signed_in_at(browser, live_server, django_user_model):
    """`open_at(width, staff=False)`: a page signed in at that width (a viewer, or staff)."""
    contexts = []
    made = set()

    def open_at(width: int, *, staff: bool = False) -> Watched:
        username = "oncall" if staff else "viewer"
        if username not in made:
            django_user_model.objects.create_user(
                username, password=f"{username}-password-1", is_staff=staff
            )
            made.add(username)
        context, watched = sign_in(
            browser, live_server.url, username, f"{username}-password-1", width
        )
        contexts.append(context)
        return watched

    yield open_at
    for context in contexts:
        context.close()
