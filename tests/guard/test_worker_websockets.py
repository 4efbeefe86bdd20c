"""A dedicated worker's WebSocket (issue 20): refused by rule unless it passes spending nothing.

On real Chromium, the worker's handshake is counted on the server side: to the signed-in
``billing.example`` (a ``SameSite=None`` login, HTTPS) and to a keeper surface (loopback).
Workers come as a script of the attacker's site, a ``blob:``, a worker started by a
worker, and one started by the page's own first script.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import cast

import pytest
import pytest_asyncio
from playwright.async_api import Page, Playwright

from demos.sites import DemoSites
from session_keeper import Grant, Guard, SessionKeeper
from session_keeper._guard.sockets import SocketRules, socket_rules
from session_keeper._model.origins import parse_origins
from session_keeper.testing import FakeClock, LocalSites, RecordedRequest, SiteResponse
from tests._chaos import record

from ..conftest import BackendFactory, _backends, shared_driver_backend
from .conftest import billing_keeper, sign_in_billing, with_login
from .test_agent_boundary import surface  # noqa: F401  (the counting surface fixture)

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend

_JS = (("Content-Type", "text/javascript"),)
_HTML = (("Content-Type", "text/html; charset=utf-8"),)


def _opens(target: str) -> str:
    """A worker's first line: open a WebSocket to ``target``, then say so."""
    return f"new WebSocket({json.dumps(target)}); postMessage('made');"


def _blob_worker(code: str) -> str:
    """JS that starts a ``blob:`` worker running ``code`` and relays its messages."""
    blob = f"URL.createObjectURL(new Blob([{json.dumps(code)}], {{type: 'text/javascript'}}))"
    return f"const w = new Worker({blob}); w.onmessage = e => postMessage(e.data);"


def _attacker(request: RecordedRequest) -> SiteResponse | None:
    """The attacker's site: a page, a worker script, and a page starting a worker at load."""
    to = request.arg("to") or ""
    if request.path == "/ws-worker.js":
        return SiteResponse(status=200, headers=_JS, body=_opens(to))
    if request.path == "/load":
        # The page's first script starts the worker; the worker's first line opens it.
        page = f"<!doctype html><script>{_blob_worker(_opens(to))}</script>loaded"
        return SiteResponse(status=200, headers=_HTML, body=page)
    if request.path == "/":
        return SiteResponse(status=200, headers=_HTML, body="<!doctype html><title>a</title>hi")
    return None


#: The attacker's two sites (a frame of the second in a page of the first is cross-site).
_ATTACKERS = {"attacker.example": _attacker, "evil.example": _attacker}


@pytest.fixture(scope="module")
def plain_sites() -> Iterator[LocalSites]:
    """The local sites over HTTP with the attacker's (a ws: surface needs an http: page)."""
    with LocalSites(extra_sites=_ATTACKERS) as running:
        yield running


@pytest.fixture(scope="module")
def login_sites() -> Iterator[LocalSites]:
    """The local sites over HTTPS (``SameSite=None`` login) with the attacker's."""
    with LocalSites(samesite="None", extra_sites=_ATTACKERS) as running:
        yield running


#: A worker's worker follows rules the Guard gives its creator just after the creator
#: starts (Playwright's driver lets a worker run before anyone can set it up): a worker
#: that starts one in its first milliseconds can win that race (docs/concepts/guard.md,
#: "Known edges"). These tests nest a moment later, which the rules must then refuse.
_NESTING_DELAY_MS = 2000


def _start(kind: str, target: str) -> str:
    """JS (a promise) that has a worker of ``kind`` open a WebSocket to ``target``."""
    if kind == "script":
        body = (
            f"const w = new Worker('/ws-worker.js?to=' + encodeURIComponent({json.dumps(target)}));"
            " w.onmessage = e => r(e.data);"
        )
    elif kind == "blob":
        body = f"const postMessage = r; {_blob_worker(_opens(target))}"
    elif kind == "stream":  # the other WebSocket API
        opens = f"new WebSocketStream({json.dumps(target)}); postMessage('made');"
        body = f"const postMessage = r; {_blob_worker(opens)}"
    else:  # nested: a worker that starts, once it has run a moment, a worker opening it
        later = f"setTimeout(() => {{ {_blob_worker(_opens(target))} }}, {_NESTING_DELAY_MS});"
        body = f"const postMessage = r; {_blob_worker(later)}"
    return f"new Promise(r => {{ {body} setTimeout(() => r('timeout'), 6000); }})"


async def _worker_opens(
    keeper: SessionKeeper[Page], sites: LocalSites, kind: str, target: str
) -> None:
    """Research's tab, on the attacker's site, has a worker of ``kind`` open ``target``."""
    if kind == "at-load":
        load = sites.url("attacker.example", "/load") + "?to=" + target
        await keeper.tab("research", load)
    elif kind == "cross-site-frame":
        # Its own renderer, its own target: it starts the worker as it loads.
        frame = sites.url("evil.example", "/load") + "?to=" + target
        tab = await keeper.tab("research", sites.url("attacker.example", "/"))
        await tab.evaluate(
            "(u) => { const f = document.createElement('iframe'); f.src = u;"
            " document.body.append(f); }",
            frame,
        )
    else:
        tab = await keeper.tab("research", sites.url("attacker.example", "/"))
        assert await tab.evaluate(_start(kind, target)) == "made"


async def _refused(guard: Guard, since: int) -> None:
    """Return once the Guard recorded a WebSocket's refusal among ``blocks[since:]`` (20 s
    at most: on a loaded machine a frame's worker may start late; the test's assertions
    then say what was missing)."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(
            guard.wait_for_block(lambda b: b.resource_type == "websocket", since=since), 20
        )


async def _arrived_with_login(sites: LocalSites, mark: int) -> int:
    """Requests with the login since ``mark`` (:func:`with_login`), once there is one
    (20 s at most: then the count is 0 and the test's assertion says so). The sites'
    server is a thread with no event to await: polled every 20 ms."""
    for _ in range(1000):
        if with_login(sites, mark):
            break
        await asyncio.sleep(0.02)
    return with_login(sites, mark)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def research(
    tmp_path_factory: pytest.TempPathFactory,
    sites: DemoSites,
    chromium_path: str,
    playwright_driver: Playwright,
    login_sites: LocalSites,
) -> AsyncIterator[tuple[SessionKeeper[Page], Guard]]:
    """A guarded keeper, billing signed in (SameSite=None); research holds no grant.

    One for the file's refusal tests: none kills its browser or changes its grants, each
    opens its worker in research's one tab (the next navigation ends it) and counts the
    blocks and billing's requests since its own start, once its refusal was recorded.
    """
    profiles = tmp_path_factory.mktemp("research")
    async for make in _backends(profiles, sites, chromium_path, playwright_driver):
        keeper = billing_keeper(make(host_resolver_rules=login_sites.host_resolver_rules))
        guard = Guard(keeper)
        async with keeper:
            await sign_in_billing(keeper, login_sites)
            await keeper.ensure("research")
            yield keeper, guard


def _socket_blocks(guard: Guard, since: int) -> list[tuple[str | None, str]]:
    return [
        (b.conversation, b.rule) for b in guard.blocks[since:] if b.resource_type == "websocket"
    ]


@pytest.mark.chromium
@pytest.mark.chaos
@pytest.mark.parametrize(
    "kind", ["script", "blob", "nested", "at-load", "cross-site-frame", "stream"]
)
async def test_no_worker_websocket_carries_the_login_without_a_grant(
    research: tuple[SessionKeeper[Page], Guard], login_sites: LocalSites, kind: str
) -> None:
    """A worker's (a script's, a blob's, a worker's worker's, one started at page load)
    wss: handshake to the signed-in site never arrives with the login; rule 'grant'."""
    keeper, guard = research
    mark, since = len(login_sites.requests("billing.example")), len(guard.blocks)
    target = login_sites.url("billing.example", "/ws").replace("https:", "wss:")
    await _worker_opens(keeper, login_sites, kind, target)
    await _refused(guard, since)  # the handshake's fate is decided: refused, or sent
    arrived = with_login(login_sites, mark)
    record("boundary", path=f"login by a {kind} worker's websocket", attempts=1, arrived=arrived)
    assert arrived == 0
    assert _socket_blocks(guard, since) == [("research", "grant")]


@pytest.mark.chromium
@pytest.mark.chaos
async def test_a_pages_websocket_stream_carries_no_login_without_a_grant(
    research: tuple[SessionKeeper[Page], Guard], login_sites: LocalSites
) -> None:
    """A page's own WebSocketStream (which no route handler sees) to the signed-in site
    never arrives with the login: its page's rules refuse it as they refuse a worker's."""
    keeper, _guard = research
    mark = len(login_sites.requests("billing.example"))
    target = login_sites.url("billing.example", "/ws").replace("https:", "wss:")
    tab = await keeper.tab("research", login_sites.url("attacker.example", "/"))
    await tab.evaluate(f"new WebSocketStream({json.dumps(target)}) && 0")
    await asyncio.sleep(1.5)
    arrived = with_login(login_sites, mark)
    record("boundary", path="login by a page's WebSocketStream", attempts=1, arrived=arrived)
    assert arrived == 0


@pytest.mark.chromium
@pytest.mark.chaos
@pytest.mark.parametrize("kind", ["script", "blob", "nested", "at-load", "cross-site-frame"])
async def test_no_worker_websocket_reaches_a_keeper_surface(
    playwright_backend: BackendFactory,
    plain_sites: LocalSites,
    surface: tuple[int, list[str]],  # noqa: F811
    kind: str,
) -> None:
    """A worker's ws: handshake to a keeper surface (of any kind of worker) never arrives;
    the block says rule 'self'."""
    port, arrivals = surface
    keeper = billing_keeper(playwright_backend(host_resolver_rules=plain_sites.host_resolver_rules))
    guard = Guard(keeper)
    async with keeper:
        await keeper.ensure("research")
        await _worker_opens(keeper, plain_sites, kind, f"ws://127.0.0.1:{port}/")
        await _refused(guard, 0)  # while the browser is still open
    record("boundary", path=f"surface by a {kind} worker's websocket", attempts=1,
           arrived=len(arrivals))  # fmt: skip
    assert arrivals == []
    assert _socket_blocks(guard, 0) == [("research", "self")]


@pytest.mark.chromium
async def test_a_worker_of_a_page_that_may_read_the_site_reaches_it_with_the_login(
    playwright_backend: BackendFactory, login_sites: LocalSites
) -> None:
    """The owner's page (a standing grant) has its worker's wss: handshake arrive with
    the login: the rules refuse only what the conversation may not reach."""
    keeper = billing_keeper(playwright_backend(host_resolver_rules=login_sites.host_resolver_rules))
    guard = Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, login_sites)
        tab = await keeper.tab("billing", login_sites.url("billing.example", "/"))
        mark = len(login_sites.requests("billing.example"))
        target = login_sites.url("billing.example", "/ws").replace("https:", "wss:")
        assert await tab.evaluate(_start("nested", target)) == "made"
        assert await _arrived_with_login(login_sites, mark) == 1
        assert _socket_blocks(guard, 0) == []


@pytest.mark.chromium
async def test_a_workers_websocket_rides_only_on_what_its_page_load_read(
    playwright_backend: BackendFactory, login_sites: LocalSites
) -> None:
    """Under a counted read grant, a worker of a page load that read the site reaches it
    with the login; after the tab navigates away, a new worker's socket is refused."""
    backend = playwright_backend(host_resolver_rules=login_sites.host_resolver_rules)
    keeper = billing_keeper(backend, Grant("research", "billing.example", actions={"read"}, uses=1))
    guard = Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, login_sites)
        await keeper.ensure("research")
        # The navigation spends the one read use: this page load may read the site.
        tab = await keeper.tab("research", login_sites.url("billing.example", "/"))
        target = login_sites.url("billing.example", "/ws").replace("https:", "wss:")
        mark = len(login_sites.requests("billing.example"))
        assert await tab.evaluate(_start("blob", target)) == "made"
        assert await _arrived_with_login(login_sites, mark) == 1
        await tab.goto(login_sites.url("docs.example", "/"))
        mark, since = len(login_sites.requests("billing.example")), len(guard.blocks)
        assert await tab.evaluate(_start("blob", target)) == "made"
        await _refused(guard, since)
        assert with_login(login_sites, mark) == 0
        assert _socket_blocks(guard, since) == [("research", "grant")]


@pytest.mark.chromium
async def test_a_workers_websocket_is_refused_under_a_grant_that_expires(
    playwright_backend: BackendFactory, login_sites: LocalSites
) -> None:
    """A read grant with an expiry (live now) lets the page read the site, but not its
    worker's socket: the rules cannot follow a clock, so they refuse it ahead of time."""
    backend = playwright_backend(host_resolver_rules=login_sites.host_resolver_rules)
    expires = FakeClock().start + timedelta(hours=1)
    grant = Grant("research", "billing.example", actions={"read"}, expires_at=expires)
    keeper = billing_keeper(backend, grant)
    guard = Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, login_sites)
        await keeper.ensure("research")
        tab = await keeper.tab("research", login_sites.url("billing.example", "/"))
        target = login_sites.url("billing.example", "/ws").replace("https:", "wss:")
        mark, since = len(login_sites.requests("billing.example")), len(guard.blocks)
        assert await tab.evaluate(_start("blob", target)) == "made"
        await _refused(guard, since)
        assert with_login(login_sites, mark) == 0
        assert _socket_blocks(guard, since) == [("research", "grant")]


@pytest.mark.chromium
async def test_a_pages_own_websocket_under_a_counted_grant_still_connects(
    playwright_backend: BackendFactory, login_sites: LocalSites
) -> None:
    """The page's own socket spends its read use and connects with the login: the rules
    that refuse its workers are lifted for what its page load has read, before it connects."""
    backend = playwright_backend(host_resolver_rules=login_sites.host_resolver_rules)
    keeper = billing_keeper(backend, Grant("research", "billing.example", actions={"read"}, uses=1))
    Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, login_sites)
        await keeper.ensure("research")
        tab = await keeper.tab("research", login_sites.url("docs.example", "/"))
        target = login_sites.url("billing.example", "/ws").replace("https:", "wss:")
        mark = len(login_sites.requests("billing.example"))
        await tab.evaluate(f"new WebSocket({json.dumps(target)}) && 0")
        assert await _arrived_with_login(login_sites, mark) == 1


def test_socket_rules_refuse_hosts_and_surfaces_first_and_pass_only_allowed_websockets() -> None:
    """Refused hosts (with subdomains) and surface ports come first; under an allowlist
    only its ws(s) origins pass, then everything else is offline; http(s) entries pass none."""
    allowed = parse_origins(["wss://chat.example", "feed.example:8443", "https://docs.example"])
    rules = socket_rules(["billing.example"], [8931], allowed)
    shown = [(r["urlPattern"], bool(r.get("offline"))) for r in rules]
    assert shown == [
        ("ws://*:8931/*", True),
        ("wss://*:8931/*", True),
        ("ws://{*.}?billing.example:*/*", True),
        ("wss://{*.}?billing.example:*/*", True),
        ("ws://feed.example:8443/*", False),
        ("wss://feed.example:8443/*", False),
        ("wss://chat.example:*/*", False),
        ("ws://*:*/*", True),
        ("wss://*:*/*", True),
    ]
    # A surface on a default port carries no port in its URLs: every socket is refused.
    assert [r["urlPattern"] for r in socket_rules([], [443], None)] == ["ws://*:*/*", "wss://*:*/*"]
    assert socket_rules([], [], None) == []


class _Target:
    """A rule-holding target that counts what it was sent (and can be gone)."""

    def __init__(self, *, gone: bool = False) -> None:
        self.sent: list[object] = []
        self.gone = gone

    async def call(self, method: str, params: object = None) -> None:
        if self.gone:
            raise RuntimeError("no such target")
        self.sent.append(params)


async def test_socket_rules_are_sent_only_when_they_change() -> None:
    """A page's navigations that leave its rules as they were send nothing (no added
    round trip); a change reaches every target of the page once; a gone one is dropped."""
    keys = {"now": "a"}
    sockets = SocketRules(rules_for=lambda page: (keys["now"], []), refused=_never_refused)
    page, page_target, worker, gone = cast("Page", object()), _Target(), _Target(), _Target()
    await sockets.add(page, page_target)
    await sockets.add(page, worker)
    await sockets.add(page, gone)
    gone.gone = True
    for _ in range(3):
        await sockets.refresh(page)
    assert (len(page_target.sent), len(worker.sent)) == (1, 1)
    keys["now"] = "b"
    await sockets.refresh(page)
    await sockets.refresh(page)
    assert (len(page_target.sent), len(worker.sent)) == (2, 2)
    keys["now"] = "c"
    await sockets.refresh_all()
    assert (len(page_target.sent), len(worker.sent), len(gone.sent)) == (3, 3, 1)


async def _never_refused(page: Page, url: str) -> None:
    raise AssertionError(f"no socket was refused: {url}")
