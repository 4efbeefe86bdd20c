"""The agent boundary under attack from outside (issue 20 review), on real Chromium.

The attacker drives a conversation holding no grant through its ``ConversationTab`` only
(``evaluate`` included) and serves pages of its own (``attacker.example``); it tries to
take the tab off the web and to reach the keeper's own surfaces. Arrivals are counted on
the server side. Holes still open are ``xfail(strict=True)``: each says what gets through.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
import pytest_asyncio
from playwright.async_api import Page

from session_keeper import Grant, Guard, PlaywrightBackend, SessionKeeper
from session_keeper.errors import LoginNotYours, NavigationBlocked
from session_keeper.testing import LocalSites, RecordedRequest, SiteResponse
from tests._chaos import record

from ..conftest import BackendFactory, shared_driver_backend
from .conftest import billing_keeper, research_reads_billing, sign_in_billing, with_login
from .test_agent_boundary import surface  # noqa: F401  (the counting surface fixture)

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = [pytest.mark.chromium, pytest.mark.chaos]

_JS = (("Content-Type", "text/javascript"),)

#: A name the attacker maps to loopback, keeping the port (as DNS rebinding would).
REBOUND = "rebind.test"


def _attacker(request: RecordedRequest) -> SiteResponse | None:
    """The attacker's own site: a blank page, a redirect, and workers that reach ``?to=``."""
    to = request.arg("to") or "about:blank"
    quoted = json.dumps(to)
    scripts = {
        "/worker.js": f"fetch({quoted}, {{mode: 'no-cors'}})"
        ".then(() => postMessage('sent'), () => postMessage('failed'));",
        "/ws-worker.js": f"const w = new WebSocket({quoted});"
        "w.onopen = () => postMessage('open'); w.onerror = () => postMessage('error');",
    }
    if request.path == "/redirect":
        return SiteResponse(status=302, headers=(("Location", to),), body="")
    if request.path in scripts:
        return SiteResponse(status=200, headers=_JS, body=scripts[request.path])
    if request.path == "/":
        return SiteResponse(status=200, headers=(), body="<!doctype html><title>attacker</title>hi")
    return None


@pytest.fixture(scope="module")
def attacker_sites() -> Iterator[LocalSites]:
    """The local sites plus the attacker's ``attacker.example``."""
    with LocalSites(extra_sites={"attacker.example": _attacker}) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="module")
async def research(
    playwright_backend: BackendFactory, attacker_sites: LocalSites
) -> AsyncIterator[tuple[SessionKeeper[Page], Guard]]:
    """A guarded keeper (billing owns billing.example); research holds no grant at all."""
    rules = f"{attacker_sites.host_resolver_rules}, MAP {REBOUND} 127.0.0.1"
    keeper = billing_keeper(playwright_backend(host_resolver_rules=rules))
    guard = Guard(keeper)
    async with keeper:
        await keeper.ensure("research")
        yield keeper, guard


def _wait(expr: str) -> str:
    # A promise that settles with the attack's outcome, or 'timeout'.
    return f"new Promise(r => {{ {expr}; setTimeout(() => r('timeout'), 3000); }})"


def _add(tag: str, sets: str) -> str:
    made = f"const e = document.createElement('{tag}'); {sets}; document.body.append(e);"
    return f"(() => {{ {made} }})()"


def _speculation(kind: str) -> str:
    return (
        "(() => { const s = document.createElement('script'); s.type = 'speculationrules';"
        f" s.textContent = JSON.stringify({{{kind}: [{{source: 'list', urls: [T]}}]}});"
        " document.head.append(s); })()"
    )


#: Ways a page's script reaches ``T`` (a keeper surface) that the Guard must stop.
SURFACE_PATHS = {
    "websocket": _wait(
        "const w = new WebSocket(T.replace('http', 'ws')); w.onopen = () => r('open');"
        " w.onerror = () => r('error')"
    ),
    "worker-fetch": _wait(
        "const w = new Worker('/worker.js?to=' + encodeURIComponent(T));"
        " w.onmessage = e => r(e.data)"
    ),
    "beacon": "navigator.sendBeacon(T, 'x')",
    "eventsource": _wait("const s = new EventSource(T); s.onerror = () => r('error')"),
    "fetch-redirected": "fetch('/redirect?to=' + encodeURIComponent(T), {mode: 'no-cors'})"
    ".then(() => 'sent', () => 'failed')",
    "link-prefetch": _add("link", "e.rel = 'prefetch'; e.href = T"),
    "stylesheet": _add("link", "e.rel = 'stylesheet'; e.href = T"),
    "iframe": _add("iframe", "e.src = T"),
    "object": _add("object", "e.data = T"),
    "srcdoc-iframe-fetch": _add(
        "iframe", "e.srcdoc = '<script>fetch(' + JSON.stringify(T) + ')</scr' + 'ipt>'"
    ),
    "sandboxed-iframe-fetch": _add(
        "iframe",
        "e.sandbox = 'allow-scripts';"
        " e.srcdoc = '<script>fetch(' + JSON.stringify(T) + ')</scr' + 'ipt>'",
    ),
    "form-post-text-plain": _add(
        "form",
        "e.method = 'POST'; e.enctype = 'text/plain'; e.action = T;"
        ' e.innerHTML = \'<input name=\\\'{"jsonrpc":"2.0","x":"\\\' value=\\\'"}\\\'>\';'
        " setTimeout(() => e.submit())",
    ),
    "anchor-ping": _add("a", "e.href = '#x'; e.ping = T; setTimeout(() => e.click())"),
    "window-open": "window.open(T) && 'opened'",
    "worker-websocket": _wait(
        "const w = new Worker('/ws-worker.js?to=' + encodeURIComponent(T.replace('http', 'ws')));"
        " w.onmessage = e => r(e.data)"
    ),
    "speculative-prefetch": _speculation("prefetch"),
}

#: Paths the browser never requests: PlaywrightBackend's profile makes no speculative loads.
NEVER_REQUESTED = frozenset({"speculative-prefetch"})

#: Paths that still get through (issue 20 review), and why.
OPEN_HOLES: dict[str, str] = {}


async def _attack(
    keeper: SessionKeeper[Page], sites: LocalSites, script: str, target: str
) -> object:
    """Run ``script`` (with ``T`` = ``target``) in research's tab on the attacker's page."""
    tab = await keeper.tab("research", sites.url("attacker.example", "/"))
    out = await tab.evaluate(f"(T) => {script}", target)
    await asyncio.sleep(1.5)  # whatever the page started has time to arrive
    return out


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=OPEN_HOLES[p]))
        if p in OPEN_HOLES
        else p
        for p in sorted(SURFACE_PATHS)
    ],
)
async def test_no_script_path_of_a_page_reaches_a_keeper_surface(
    research: tuple[SessionKeeper[Page], Guard],
    attacker_sites: LocalSites,
    surface: tuple[int, list[str]],  # noqa: F811
    path: str,
) -> None:
    """WebSocket, workers, beacons, EventSource, redirects, prefetch links, frames, a
    text/plain form POST, pings and popups aimed at a surface never arrive: rule 'self'."""
    keeper, guard = research
    port, arrivals = surface
    await _attack(keeper, attacker_sites, SURFACE_PATHS[path], f"http://127.0.0.1:{port}/")
    record("boundary", path=f"surface by {path}", attempts=1, arrived=len(arrivals))
    assert arrivals == []
    # A speculative load is never made at all (the profile predicts nothing): no block.
    if path not in OPEN_HOLES and path not in NEVER_REQUESTED:
        assert "self" in {b.rule for b in guard.blocks}


@pytest.mark.parametrize(
    "host", ["2130706433", "0x7f.1", "127.1", "0177.0.0.1", "localhost.", REBOUND]
)
async def test_no_spelling_of_loopback_reaches_a_keeper_surface(
    research: tuple[SessionKeeper[Page], Guard],
    attacker_sites: LocalSites,
    surface: tuple[int, list[str]],  # noqa: F811
    host: str,
) -> None:
    """Decimal, hex, octal and short IPv4 forms, a trailing-dot localhost and a name mapped
    to loopback (DNS rebinding) are all refused, by navigation and by fetch."""
    keeper, guard = research
    port, arrivals = surface
    target = f"http://{host}:{port}/"
    tab = await keeper.tab("research")
    with pytest.raises(NavigationBlocked) as caught:
        await tab.goto(target)
    assert caught.value.block.rule == "self"
    await _attack(keeper, attacker_sites, "fetch(T, {mode: 'no-cors'}).catch(() => 0)", target)
    record("boundary", path=f"surface as {host}", attempts=2, arrived=len(arrivals))
    assert arrivals == []
    assert {b.rule for b in guard.blocks} == {"self"}


async def test_a_prerender_does_not_show_a_keeper_surface_in_the_tab(
    research: tuple[SessionKeeper[Page], Guard],
    attacker_sites: LocalSites,
    surface: tuple[int, list[str]],  # noqa: F811
) -> None:
    """A prerendered surface URL never arrives, and activating it never shows its answer."""
    keeper, _guard = research
    port, arrivals = surface
    target = f"http://127.0.0.1:{port}/prerendered"
    await _attack(keeper, attacker_sites, _speculation("prerender"), target)
    tab = await keeper.tab("research")
    await tab.evaluate("(T) => { location.href = T; }", target)
    await asyncio.sleep(1.5)
    shown = "control surface" in await tab.text()
    record("boundary", path="surface by prerender", attempts=1, arrived=len(arrivals))
    assert not shown
    assert arrivals == []


#: What a page does to leave the web by itself, beyond test_agent_boundary's links, forms,
#: location, window.open and redirects.
OFF_WEB_PATHS = {
    "iframe-file": _add("iframe", "e.src = 'file:///etc/hostname'"),
    "embed-file": _add("embed", "e.src = 'file:///etc/hostname'"),
    "object-file": _add("object", "e.data = 'file:///etc/hostname'"),
    "iframe-chrome": _add("iframe", "e.src = 'chrome://version'"),
    "meta-refresh-file": _add(
        "meta", "e.httpEquiv = 'refresh'; e.content = '0;url=file:///etc/hostname'"
    ),
    "location-chrome-extension": "location.href = "
    "'chrome-extension://mhjfbmdgcfjbbpaeojofohoefgiehjai/index.html'",
    "location-filesystem": "location.href = 'filesystem:http://attacker.example/temporary/x'",
    "location-srcdoc": "location.href = 'about:srcdoc'",
    "location-intent": "location.href = 'intent://x#Intent;scheme=http;end'",
    "open-view-source": "window.open('view-source:http://attacker.example/') && 0",
    "open-data": "window.open('data:text/html,<title>d</title>') && 0",
}


def _off_web(url: str) -> bool:
    # The empty document Chromium shows for a refused about: page, or its error page.
    u = url.lower()
    return not (u.startswith(("http:", "https:", "about:blank", "chrome-error://")) or u == "")


@pytest.mark.parametrize("path", sorted(OFF_WEB_PATHS))
async def test_a_page_cannot_frame_or_open_what_is_off_the_web(
    research: tuple[SessionKeeper[Page], Guard], attacker_sites: LocalSites, path: str
) -> None:
    """Frames, embeds, objects, meta refresh and other schemes from a page show no local
    file, browser page or extension page in any of the conversation's pages or frames."""
    keeper, _guard = research
    await _attack(keeper, attacker_sites, OFF_WEB_PATHS[path], "")
    page = await keeper.unguarded_page("research")
    shown = [f.url for p in page.context.pages for f in p.frames if _off_web(f.url)]
    # chrome://version's own words, in a page that came to show it.
    texts = [await p.content() for p in page.context.pages]
    leaked = int(bool(shown) or any("Executable Path" in t for t in texts))
    record("boundary", path=f"off the web by {path}", attempts=1, arrived=leaked)
    assert shown == []
    assert leaked == 0


async def test_an_about_page_a_popup_opened_stays_empty_on_reload(
    research: tuple[SessionKeeper[Page], Guard], attacker_sites: LocalSites
) -> None:
    """window.open('about:version') shows an empty page, and the tab's reload() of it does
    not turn it into chrome://version."""
    keeper, _guard = research
    tab = await keeper.tab("research", attacker_sites.url("attacker.example", "/"))
    await tab.evaluate("window.open('about:version')")
    popup = tab.popups()[0] if tab.popups() else await tab.wait_for_popup()
    await popup.reload()
    assert "Chromium" not in await popup.content()
    assert not popup.url.startswith("chrome:")


@pytest.mark.parametrize("how", ["location.href = u", "window.open(u)"])
async def test_a_blob_url_a_page_shows_is_its_own_origins_content(
    research: tuple[SessionKeeper[Page], Guard], attacker_sites: LocalSites, how: str
) -> None:
    """A page may show a blob: it made itself (its own origin's content, as document.write
    would); never a blob: of another origin, and the tab stays on that page's origin."""
    keeper, _guard = research
    script = (
        "(() => { const u = URL.createObjectURL(new Blob(['<title>blob</title>made'],"
        f" {{type: 'text/html'}})); {how}; }})()"
    )
    await _attack(keeper, attacker_sites, script, "")
    page = await keeper.unguarded_page("research")
    own = attacker_sites.url("attacker.example", "/").rstrip("/")
    shown = [p.url for p in page.context.pages if p.url.startswith("blob:")]
    foreign = [u for u in shown if not u.startswith("blob:" + own + "/")]
    record("boundary", path=f"blob: of another origin by {how.split('(')[0]}", attempts=1,
           arrived=len(foreign))  # fmt: skip
    assert foreign == []


async def test_a_read_grantee_does_not_take_over_the_owners_login(
    playwright_backend: BackendFactory, attacker_sites: LocalSites
) -> None:
    """research may only read billing.example; billing signing in again while research's
    tab is there leaves billing the owner (LoginNotYours for research)."""
    backend = playwright_backend(host_resolver_rules=attacker_sites.host_resolver_rules)
    keeper = research_reads_billing(backend)
    Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, attacker_sites)
        await keeper.ensure("research")
        # research's own window on the site opens (its tab's navigation there)...
        await keeper.tab("research", attacker_sites.url("billing.example", "/"))
        # ...and the site re-issues the owner's billing_session (the owner's page signs in
        # again; nobody records it, as with a site that rotates its session cookie).
        page = await keeper.unguarded_page(
            "billing", attacker_sites.url("billing.example", "/login")
        )
        await page.fill("input[name=username]", "alice")
        await page.fill("input[name=password]", "correct horse")
        async with page.expect_navigation():
            await page.click("button[type=submit]")
        with pytest.raises(LoginNotYours):
            await keeper.record_login("research", "billing.example")
        assert [(r.site, r.owner) for r in keeper.logins()] == [("billing.example", "billing")]


async def test_a_workers_websocket_carries_no_login_without_a_grant(
    secure_backend: Callable[..., PlaywrightBackend], secure_sites: LocalSites
) -> None:
    """A worker's wss: handshake to a signed-in site (SameSite=None login) from a page of a
    conversation without a grant never arrives with the login cookie."""
    keeper = billing_keeper(secure_backend(), Grant("research", "docs.example"))
    Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, secure_sites)
        await keeper.ensure("research")
        tab = await keeper.tab("research", secure_sites.url("docs.example", "/"))
        mark = len(secure_sites.requests("billing.example"))
        target = secure_sites.url("billing.example", "/ws").replace("https:", "wss:")
        code = json.dumps(f"new WebSocket({json.dumps(target)}); postMessage('made');")
        await tab.evaluate(
            f"new Promise(r => {{ const w = new Worker(URL.createObjectURL(new Blob([{code}],"
            " {type: 'text/javascript'}))); w.onmessage = () => r(1); })"
        )
        await asyncio.sleep(1.5)
        arrived = with_login(secure_sites, mark)
        record("boundary", path="login by a worker's websocket", attempts=1, arrived=arrived)
        assert arrived == 0
