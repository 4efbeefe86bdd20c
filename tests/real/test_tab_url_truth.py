"""Tabs are where the browser says, on real Chromium: after the page moved itself (a form, a
link, a script, history, a redirect) and Chromium was SIGKILLed, the lost tab is named, and
reopened, at the URL the site last served it (the site's own request log is the truth)."""

from __future__ import annotations

import contextlib
import html
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page

from session_keeper import Durability, Grant, Guard, SessionKeeper
from session_keeper._util.redact import redact_url
from session_keeper.errors import NavigationBlocked
from session_keeper.mcp._banner import banner
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeClock, LocalSites, RecordedRequest, SiteResponse

from .._chaos import BROWSER_TRIALS, record
from ..conftest import BackendFactory, shared_driver_backend, sigkill

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = pytest.mark.chromium

HOST = "moves.example"
CONV = "c"

#: The start page: every way a page moves itself, one element each.
START = """<h1>Start</h1>
<a id="link" href="/linked?from=start">a link</a>
<a id="redirect" href="/redirect-me">a link that redirects</a>
<form id="form" method="post" action="/submit"><input name="q" value="x">
<button id="submit" type="submit">Send</button></form>
<button id="script" onclick="location.href = '/scripted?step=1'">script</button>
<button id="push" onclick="history.pushState({}, '', '/pushed?step=2')">push</button>
<button id="replace" onclick="history.replaceState({}, '', '/replaced')">replace</button>"""


def moves_site(request: RecordedRequest) -> SiteResponse:
    """Every path a page of its own (the start page at /start); /submit answers 303 to
    /submitted, /redirect-me 302 to /landed. Nothing is cached: going back asks the site."""
    fresh = ("Cache-Control", "no-store")
    if request.path == "/submit":
        return SiteResponse(status=303, headers=(("Location", "/submitted"), fresh), body="")
    if request.path == "/redirect-me":
        where = ("Location", "/landed?via=redirect")
        return SiteResponse(status=302, headers=(where, fresh), body="")
    body = START if request.path == "/start" else f"<h1>{html.escape(request.path)}</h1>"
    return SiteResponse(status=200, headers=(fresh,), body=f"<!doctype html><title>m</title>{body}")


@pytest.fixture(scope="module")
def own() -> Iterator[LocalSites]:
    """LocalSites with moves.example (its own server: its request log is this module's)."""
    with LocalSites(extra_sites={HOST: moves_site}) as running:
        yield running


def documents(sites: LocalSites) -> list[str]:
    """The path and query of every GET moves.example served (its own log), oldest first."""
    return [
        r.path + (f"?{r.query}" if r.query else "")
        for r in sites.requests(HOST)
        if r.method == "GET" and r.path != "/favicon.ico"
    ]


async def move(page: Page, how: str, sites: LocalSites) -> str:
    """Move ``page`` (at /start) by ``how``; return the URL it is at, by the site's word
    (the last page the site served it) or, for history.pushState/replaceState, which
    reach no server, the URL the script gave."""
    clicks = {"submit": "#submit", "link": "#link", "script": "#script", "redirect": "#redirect"}
    if how in clicks:
        async with page.expect_navigation():
            await page.click(clicks[how])
        return sites.url(HOST, documents(sites)[-1])
    if how in ("push", "replace"):
        path = "/pushed" if how == "push" else "/replaced"
        await page.click(f"#{how}")
        await page.wait_for_function(f"location.pathname === '{path}'")
        return sites.url(HOST, "/pushed?step=2" if how == "push" else path)
    assert how == "back"
    async with page.expect_navigation():
        await page.go_back()
    return sites.url(HOST, documents(sites)[-1])


WAYS = ("submit", "link", "script", "redirect", "push", "replace", "back")


@pytest.mark.chaos
@pytest.mark.parametrize("trial", range(BROWSER_TRIALS))
@pytest.mark.parametrize("how", WAYS)
async def test_a_tab_that_moved_itself_is_named_and_reopened_where_it_was_after_a_sigkill(
    how: str, trial: int, playwright_backend: BackendFactory, own: LocalSites
) -> None:
    """A tab opened at /start and moved by the page itself (not through tab(url)) is told
    lost at the URL it was at, in the facts, the prompt and the MCP banner, and reopening
    that URL loads it again at the site."""
    backend = playwright_backend(host_resolver_rules=own.host_resolver_rules)
    async with SessionKeeper(backend, clock=FakeClock()) as keeper:
        await keeper.ensure(CONV)
        start = own.url(HOST, "/start")
        page = await keeper.unguarded_page(CONV, start)
        if how == "back":
            # The keeper's own last navigation goes elsewhere: only the browser's
            # history brings the tab back to /start.
            await keeper.unguarded_page(CONV, own.url(HOST, "/other"))
        where = await move(page, how, own)
        assert where != own.url(HOST, "/other") and (where == start) == (how == "back")
        await sigkill(backend.current)
        turn = await keeper.ensure(CONV)
        assert turn.restarted
        lost = turn.lost_tab
        named = (
            lost is not None
            and lost.last_url == where
            and f"Lost tab at {redact_url(where)}:" in turn.to_prompt()
            and f"it was at {where}" in banner(turn)
        )
        reopened: list[str] = []
        if lost is not None and lost.last_url is not None:
            mark = len(documents(own))
            await keeper.unguarded_page(CONV, lost.last_url)
            reopened = documents(own)[mark:]
        back_there = bool(reopened) and own.url(HOST, reopened[0]) == where
        record("tab_truth", how=how, named_right=int(named), reopened_right=int(back_there))
        assert lost is not None and lost.last_url == where
        assert f"Lost tab at {redact_url(where)}:" in turn.to_prompt()
        assert f"it was at {where}" in banner(turn)
        assert own.url(HOST, reopened[0]) == where


async def test_a_moved_tab_is_named_where_it_was_after_our_process_restarts(
    playwright_backend: BackendFactory, own: LocalSites, tmp_path: Path
) -> None:
    """The URL a page moved itself to is saved with the tab's row (no other save after it):
    a keeper of a new process on the same store names the lost tab there (query redacted)."""
    db = tmp_path / "keeper.db"
    backend = playwright_backend(host_resolver_rules=own.host_resolver_rules)
    async with SqliteStore(db) as store:
        keeper = SessionKeeper(backend, durability=Durability(store=store))
        await keeper.ensure(CONV)
        page = await keeper.unguarded_page(CONV, own.url(HOST, "/start"))
        async with page.expect_navigation():
            await page.click("#script")
        where = own.url(HOST, "/scripted?step=1")
        # The write is throttled, not skipped: it lands within a second with no call made.
        for _ in range(100):
            if not keeper.unsaved:
                break
            await page.wait_for_timeout(50)
        assert not keeper.unsaved
        # Our process "dies": its browser goes, the keeper is dropped without aclose.
        await sigkill(backend.current)
    async with SqliteStore(db) as store:
        again_backend = playwright_backend(host_resolver_rules=own.host_resolver_rules)
        async with SessionKeeper(again_backend, durability=Durability(store=store)) as again:
            turn = await again.ensure(CONV)
            assert turn.lost_tab is not None
            assert turn.lost_tab.last_url == redact_url(where)


async def test_a_page_the_guard_refused_is_never_where_the_tab_is(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """A conversation without a grant sent to the signed-in billing site, by tab(url) from a
    blank tab (the Guard's 403 page commits there) or by a script of its page (aborted), is
    told lost where it last was on the web, never at the refused URL."""
    backend = playwright_backend()
    keeper = SessionKeeper(backend, clock=FakeClock(), grants=[Grant("billing", "billing.example")])
    Guard(keeper)
    async with keeper:
        await keeper.ensure("billing")
        page = await keeper.unguarded_page("billing", sites.url("billing.example", "/login"))
        await page.fill("input[name=username]", "alice")
        await page.fill("input[name=password]", "correct horse")
        async with page.expect_navigation():
            await page.click("button[type=submit]")
        await keeper.record_login("billing", "billing.example", account="alice")
        await keeper.ensure("blank")
        await keeper.ensure("docs")
        refused = sites.url("billing.example", "/invoices")
        with contextlib.suppress(NavigationBlocked):
            await keeper.unguarded_page("blank", refused)
        docs = sites.url("docs.example", "/guide")
        other = await keeper.unguarded_page("docs", docs)
        with contextlib.suppress(PlaywrightError):
            await other.evaluate("url => { location.href = url; }", refused)
            await other.wait_for_timeout(500)
        await sigkill(backend.current)
        blank = (await keeper.ensure("blank")).lost_tab
        moved = (await keeper.ensure("docs")).lost_tab
        assert blank is not None and blank.last_url is None
        assert moved is not None and moved.last_url == docs
