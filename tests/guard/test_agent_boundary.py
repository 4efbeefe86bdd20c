"""The agent boundary on real Chromium: a conversation's tab stays on the web, and the
keeper's own surfaces are not reachable from it. Counted on the server side."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import pytest_asyncio
from playwright.async_api import Page

from session_keeper import Grant, Guard, SessionKeeper
from session_keeper._util.surfaces import serve_surface
from session_keeper.errors import NavigationBlocked, NavigationError
from session_keeper.testing import LocalSites, RecordedRequest, SiteResponse
from tests._chaos import record

from ..conftest import BackendFactory, shared_driver_backend
from .conftest import billing_keeper, counting_server

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = [pytest.mark.chromium, pytest.mark.chaos]

CANARY = "canary-local-file-7f3a9c"

#: URLs a conversation's tab must never show: local files, the browser's own pages,
#: wrappers and script URLs.
OFF_WEB = (
    "file:///etc/hostname",
    "file:///",
    "chrome://history",
    "chrome://settings/clearBrowserData",
    "chrome://version",
    "view-source:file:///etc/hostname",
    "view-source:http://docs.example/",
    "javascript:document.title='pwned'",
    "data:text/html,<h1>not the web</h1>",
    "devtools://devtools/bundled/inspector.html",
    "about:settings",
)


def _boundary_site(request: RecordedRequest) -> SiteResponse | None:
    """Pages that try, from inside a page, to leave the web (``?to=<url>``)."""
    to = request.arg("to") or "about:blank"
    quoted = to.replace("'", "%27")
    bodies = {
        "/link": f"<a id='go' href='{quoted}'>go</a>",
        "/link-blank": f"<a id='go' href='{quoted}' target='_blank'>go</a>",
        "/form": f"<form id='f' action='{quoted}'><button id='go'>go</button></form>",
        "/location": f"<button id='go' onclick=\"location.href='{quoted}'\">go</button>",
        "/open": f"<button id='go' onclick=\"window.open('{quoted}')\">go</button>",
        "/fetch": (
            "<button id='go' onclick=\"fetch('"
            + quoted
            + "', {method: 'POST', mode: 'no-cors', body: '{}'})"
            ".then(() => { document.title = 'sent'; }, () => { document.title = 'failed'; })\">"
            "go</button><img src='" + quoted + "?img=1'>"
        ),
    }
    if request.path == "/redirect":
        return SiteResponse(status=302, headers=(("Location", to),), body="")
    body = bodies.get(request.path)
    if body is None:
        return None
    return SiteResponse(
        status=200, headers=(), body=f"<!doctype html><title>boundary</title>{body}"
    )


@pytest.fixture(scope="module")
def boundary_sites() -> Iterator[LocalSites]:
    """The local sites plus ``boundary.example``, whose pages try to leave the web."""
    with LocalSites(extra_sites={"boundary.example": _boundary_site}) as running:
        yield running


@pytest.fixture
def canary_file(tmp_path: Path) -> Path:
    """A local file holding a canary: a tab that could read it would show the canary."""
    path = tmp_path / "secret.txt"
    path.write_text(f"{CANARY}\n", encoding="utf-8")
    return path


class _Counter(BaseHTTPRequestHandler):
    arrivals: list[str]

    def _any(self) -> None:
        self.arrivals.append(f"{self.command} {self.path}")
        body = b"<!doctype html><title>surface</title><p>control surface</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._any()

    def do_POST(self) -> None:
        self._any()

    def do_OPTIONS(self) -> None:
        self._any()

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def surface() -> Iterator[tuple[int, list[str]]]:
    """A loopback control surface of this process (as the MCP server is), counting arrivals."""
    with counting_server(_Counter) as (port, arrivals), serve_surface("mcp", "127.0.0.1", port):
        yield port, arrivals


@pytest_asyncio.fixture(loop_scope="module")
async def guarded(
    playwright_backend: BackendFactory, boundary_sites: LocalSites
) -> AsyncIterator[tuple[SessionKeeper[Page], Guard]]:
    """A guarded keeper on the boundary sites; billing owns billing.example."""
    backend = playwright_backend(host_resolver_rules=boundary_sites.host_resolver_rules)
    keeper = billing_keeper(backend)
    guard = Guard(keeper)
    async with keeper:
        await keeper.ensure("research")
        yield keeper, guard


def _shows_off_web(page: Page) -> bool:
    # chrome-error://chromewebdata/ is Chromium's own "this page could not load" page.
    url = page.url.lower()
    return not url.startswith(("http:", "https:", "about:blank", "chrome-error://chromewebdata/"))


async def _conversation_pages(keeper: SessionKeeper[Page]) -> list[Page]:
    page = await keeper.unguarded_page("research")
    return list(page.context.pages)


@pytest.mark.parametrize("url", OFF_WEB)
async def test_a_tab_navigates_only_to_the_web(
    guarded: tuple[SessionKeeper[Page], Guard], boundary_sites: LocalSites, url: str
) -> None:
    """goto() to a file, browser page, wrapper or script URL raises NavigationBlocked ('scheme'),
    recorded like any block; the tab stays where it was."""
    keeper, guard = guarded
    start = boundary_sites.url("boundary.example", "/link")
    tab = await keeper.tab("research", start)
    since = len(guard.blocks)
    with pytest.raises(NavigationBlocked) as caught:
        await tab.goto(url)
    assert caught.value.block.rule == "scheme"
    assert caught.value.block.conversation == "research"
    assert guard.blocks[since:] == (caught.value.block,)
    assert tab.url == start
    assert await tab.title() == "boundary"
    record("boundary", path="tab off the web", attempts=1, arrived=int(tab.url != start))


async def test_the_keepers_own_navigation_and_a_popup_stay_on_the_web(
    guarded: tuple[SessionKeeper[Page], Guard], boundary_sites: LocalSites, canary_file: Path
) -> None:
    """keeper.tab(conv, url=file:) and a popup's goto(file:) are refused the same way."""
    keeper, _guard = guarded
    with pytest.raises(NavigationBlocked) as caught:
        await keeper.tab("research", canary_file.as_uri())
    assert caught.value.block.rule == "scheme"
    assert caught.value.block.origin == "file://"
    tab = await keeper.tab(
        "research", boundary_sites.url("boundary.example", "/open?to=" + quote("/link"))
    )
    await tab.click("#go")
    popup = tab.popups()[0] if tab.popups() else await tab.wait_for_popup()
    with pytest.raises(NavigationBlocked):
        await popup.goto(canary_file.as_uri())
    with pytest.raises(NavigationBlocked):
        await popup.goto("chrome://history")
    assert CANARY not in await popup.text()
    assert keeper.last_verified_url("research") != canary_file.as_uri()


@pytest.mark.parametrize(
    "how", ["/link", "/link-blank", "/form", "/location", "/open", "/redirect"]
)
@pytest.mark.parametrize("target", ["file", "chrome://settings", "chrome://history"])
async def test_a_page_cannot_take_its_tab_off_the_web(
    guarded: tuple[SessionKeeper[Page], Guard],
    boundary_sites: LocalSites,
    canary_file: Path,
    how: str,
    target: str,
) -> None:
    """Links, forms, location, window.open and redirects to file:/chrome: never show them
    (Chromium refuses renderer-initiated navigations there; this proves it stays so)."""
    keeper, _guard = guarded
    to = canary_file.as_uri() if target == "file" else target
    url = boundary_sites.url("boundary.example", f"{how}?to={quote(to, safe='')}")
    tab = await keeper.tab("research")
    if how == "/redirect":
        with pytest.raises(NavigationError):  # Chromium's own: an unsafe redirect
            await tab.goto(url)
    else:
        await tab.goto(url)
        # The page's own act (a form to file: leaves Playwright waiting for a navigation
        # Chromium never starts, so the click does not wait for one).
        page = await keeper.unguarded_page("research")
        await page.click("#go", no_wait_after=True)
    await asyncio.sleep(0.5)  # a navigation the page started has time to commit
    pages = await _conversation_pages(keeper)
    escaped = [p.url for p in pages if _shows_off_web(p)]
    texts = [await p.content() for p in pages if not p.is_closed()]
    leaked = int(bool(escaped) or any(CANARY in t for t in texts))
    record("boundary", path=f"page off the web by itself ({how[1:]})", attempts=1, arrived=leaked)
    assert escaped == []
    assert leaked == 0


async def test_the_keepers_own_surfaces_are_not_reachable_from_a_tab(
    guarded: tuple[SessionKeeper[Page], Guard],
    boundary_sites: LocalSites,
    surface: tuple[int, list[str]],
) -> None:
    """Navigation, fetch and <img> to a keeper surface (by 127.0.0.1, localhost or a name
    that resolves to loopback) never arrive: rule 'self'."""
    keeper, guard = guarded
    port, arrivals = surface
    targets = (
        f"http://127.0.0.1:{port}/",
        f"http://localhost:{port}/mcp",
        f"http://boundary.example:{port}/mcp",
    )
    tab = await keeper.tab("research")
    attempts = 0
    for target in targets:
        attempts += 1
        with pytest.raises(NavigationBlocked) as caught:
            await tab.goto(target)
        assert caught.value.block.rule == "self"
    for target in targets:
        attempts += 2  # the fetch and the image
        await tab.goto(
            boundary_sites.url("boundary.example", f"/fetch?to={quote(target, safe='')}")
        )
        await tab.click("#go")
        for _ in range(50):  # the fetch settles ('sent' or 'failed'), then the image
            if await tab.title() != "boundary":
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.2)
    record("boundary", path="keeper's own endpoints", attempts=attempts, arrived=len(arrivals))
    assert arrivals == []
    assert {b.rule for b in guard.blocks} >= {"self"}


async def test_a_grant_naming_a_surface_host_lets_its_pages_reach_it(
    playwright_backend: BackendFactory,
    boundary_sites: LocalSites,
    surface: tuple[int, list[str]],
) -> None:
    """The same navigation arrives when a grant names the surface's host: the count can move."""
    port, arrivals = surface
    backend = playwright_backend(host_resolver_rules=boundary_sites.host_resolver_rules)
    keeper = billing_keeper(backend, Grant("research", "127.0.0.1", actions={"read"}))
    Guard(keeper)
    async with keeper:
        await keeper.ensure("research")
        tab = await keeper.tab("research")
        await tab.goto(f"http://127.0.0.1:{port}/")
        assert "control surface" in await tab.text()
    assert arrivals and arrivals[0].startswith("GET /")
