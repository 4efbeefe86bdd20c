"""The conversation handle on real Chromium: no path out of its conversation, counted."""

from __future__ import annotations

import re

import pytest
from playwright.async_api import Error as PlaywrightError

from session_keeper import ConversationTab, Grant, Guard, TabLocator
from session_keeper.errors import BrowserGoneError, NavigationBlocked
from session_keeper.testing import LocalSites
from tests._chaos import record

from ..conftest import BackendFactory, shared_driver_backend
from .conftest import billing_keeper, sign_in_billing, with_login

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = pytest.mark.chromium

#: Every way out of a conversation that a Playwright Page, Locator or Frame offers.
BYPASSES = (
    "page",  # Locator.page, Frame.page → the raw Page
    "context",  # Page.context → cookies(), pages, request
    "request",  # APIRequestContext: skips routing and the Guard
    "cookies",
    "pages",  # other conversations' tabs
    "frames",
    "main_frame",  # Frame.page.context ...
    "opener",
    "browser",
    "element_handle",  # ElementHandle.owner_frame().page
    "element_handles",
    "frame_locator",
    "evaluate_handle",  # JSHandle → element → frame → page
    "expose_binding",  # a binding's source carries page and context
    "route",  # could unroute or answer the Guard's requests
    "unroute_all",
    "add_init_script",
    "set_extra_http_headers",
    "_impl_obj",
)


@pytest.mark.chaos
async def test_the_tab_has_no_path_to_the_context_cookies_request_api_or_other_pages(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """No bypass is reachable through the handle, its locators or popups; 0 login arrivals."""
    keeper = billing_keeper(playwright_backend())
    guard = Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, sites)
        await keeper.ensure("research")
        tab = await keeper.tab("research", sites.url("docs.example", "/attack/popup"))
        mark = len(sites.requests("billing.example"))
        loc = tab.locator("#open")
        assert isinstance(loc, TabLocator)
        attempts = 0
        for obj in (tab, loc, loc.first, tab.get_by_role("button")):
            for name in BYPASSES:
                attempts += 1
                assert not hasattr(obj, name), f"{type(obj).__name__}.{name} is reachable"
        # evaluate() returns values, not handles: a DOM node comes back as plain data.
        assert not isinstance(await tab.evaluate("document.body"), ConversationTab)
        # The request APIs a tool *can* reach run in the page, so the Guard decides them.
        before = len(guard.blocks)
        for method in ("GET", "POST"):
            attempts += 1
            await tab.evaluate(
                "([u, m]) => fetch(u, {method: m, credentials: 'include', mode: 'no-cors'})"
                ".then(() => 'sent', () => 'failed')",
                [sites.url("billing.example", "/invoices"), method],
            )
        refused = [(b.method, b.site) for b in guard.blocks[before:]]
        assert ("GET", "billing.example") in refused and ("POST", "billing.example") in refused
        # Its own popup comes back as a handle of the same conversation, just as closed off.
        await loc.click()
        popup = tab.popups()[0] if tab.popups() else await tab.wait_for_popup()
        assert popup.conversation == "research" and popup.is_popup
        await popup.wait_for(text="Blocked by session_keeper")
        for name in BYPASSES:
            attempts += 1
            assert not hasattr(popup, name)
        arrivals = with_login(sites, mark)
        record("handle bypasses", attempts=attempts + 1, with_login=arrivals)  # +1: the popup
        assert arrivals == 0


async def test_the_unguarded_page_does_reach_the_login_past_the_guard(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """Control: the raw page's request API skips the Guard — why tools get the handle."""
    keeper = billing_keeper(playwright_backend())
    Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, sites)
        await keeper.ensure("research")
        page = await keeper.unguarded_page("research", sites.url("docs.example", "/"))
        # Playwright sends these from its driver, not the browser: no route sees them, so
        # the login cookie goes out (its call log shows it; the driver cannot resolve the
        # test's host names, which is all that stops it reaching the server here).
        for api in (page.request, page.context.request):
            with pytest.raises(PlaywrightError) as sent:
                await api.get(sites.url("billing.example", "/invoices"))
            assert "cookie: billing_session=" in str(sent.value)
        assert any(c["name"] == "billing_session" for c in await page.context.cookies())


async def test_a_blocked_navigation_raises_navigation_blocked_and_is_never_the_verified_url(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """goto() into a site without a grant (directly or via a redirect) raises with the block."""
    keeper = billing_keeper(playwright_backend())
    Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, sites)
        await keeper.ensure("research")
        tab = await keeper.tab("research")
        docs = await tab.goto(sites.url("docs.example", "/"))
        assert keeper.last_verified_url("research") == docs
        mark = len(sites.requests("billing.example"))
        with pytest.raises(NavigationBlocked) as direct:
            await tab.goto(sites.url("billing.example", "/invoices"))
        assert direct.value.block.site == "billing.example"
        assert direct.value.block.conversation == "research"
        assert direct.value.block.rule == "grant"
        assert keeper.last_verified_url("research") == docs
        with pytest.raises(NavigationBlocked) as hop:
            await tab.goto(
                sites.url("docs.example", "/redirect?to=http://billing.example/invoices")
            )
        assert hop.value.block.path == "/invoices"
        assert keeper.last_verified_url("research") == docs
        assert with_login(sites, mark) == 0
        # Granted, research reads billing; revoked, reloading that page is refused.
        keeper.grant(Grant("research", "billing.example", actions={"read"}))
        invoices = await tab.goto(sites.url("billing.example", "/invoices"))
        keeper.revoke("research", "billing.example")
        mark = len(sites.requests("billing.example"))
        with pytest.raises(NavigationBlocked):
            await tab.reload()
        assert keeper.last_verified_url("research") == invoices
        assert with_login(sites, mark) == 0
        # The owner's navigation is not blocked and is recorded.
        billing = await keeper.tab("billing")
        assert (await billing.goto(sites.url("billing.example", "/invoices"))).endswith("/invoices")
        assert keeper.last_verified_url("billing") == billing.url


async def test_enter_submitting_a_form_into_a_blocked_site_raises_navigation_blocked(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """press('Enter') and type(submit=True) that submit a form to a site without a grant
    raise NavigationBlocked with the block; the tab keeps its page and nothing leaves."""
    keeper = billing_keeper(playwright_backend())
    Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, sites)
        await keeper.ensure("research")
        tab = await keeper.tab("research")
        docs = await tab.goto(sites.url("docs.example", "/"))
        await tab.evaluate(
            """(action) => { document.body.innerHTML =
                   `<form method='get' action='${action}'><input id='q' name='q'></form>`; }""",
            sites.url("billing.example", "/invoices"),
        )
        mark = len(sites.requests("billing.example"))
        await tab.fill("#q", "x")
        with pytest.raises(NavigationBlocked) as pressed:
            await tab.press("Enter", selector="#q")
        assert pressed.value.block.path == "/invoices"
        with pytest.raises(NavigationBlocked):
            await tab.type("#q", "y", submit=True)
        assert tab.url == docs
        assert with_login(sites, mark) == 0


async def test_the_unguarded_page_never_records_a_blocked_navigation_as_verified(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """unguarded_page(conv, url) into a blocked site raises and leaves the last verified URL."""
    keeper = billing_keeper(playwright_backend())
    Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, sites)
        await keeper.ensure("research")
        await keeper.unguarded_page("research", sites.url("docs.example", "/"))
        docs = keeper.last_verified_url("research")
        # The tab shows docs: the refused navigation is aborted, the page keeps docs.
        with pytest.raises(NavigationBlocked):
            await keeper.unguarded_page("research", sites.url("billing.example", "/invoices"))
        assert keeper.last_verified_url("research") == docs


async def test_the_handle_reads_and_acts_on_its_own_page(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """snapshot, text, title, fill/type/click, screenshot and wait_for work through the handle."""
    keeper = billing_keeper(playwright_backend())
    Guard(keeper)
    async with keeper:
        await keeper.ensure("billing")
        tab = await keeper.tab("billing", sites.url("billing.example", "/login"))
        assert "textbox" in await tab.snapshot()
        with_refs = await tab.snapshot(refs=True)
        ref = re.search(r"textbox[^\n]*\[ref=(e\d+)\]", with_refs)
        assert ref is not None, with_refs
        await tab.ref(ref.group(1)).fill("mallory")
        assert await tab.locator("input[name=username]").input_value() == "mallory"
        assert await tab.title()
        await tab.fill("input[name=username]", "alice")
        await tab.type("input[name=password]", "correct horse")
        assert await tab.locator("input[name=username]").input_value() == "alice"
        await tab.click("button[type=submit]")
        await tab.wait_for(selector="#invoices")
        assert "invoice" in (await tab.text()).lower()
        assert (await tab.screenshot()).startswith(b"\x89PNG")
        with pytest.raises(Exception, match="exactly one"):
            await tab.wait_for()


async def test_a_handle_of_a_dead_browser_raises_browser_gone(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """After a crash the old handle refuses every call (BrowserGoneError); ensure(), then tab()."""
    backend = playwright_backend()
    keeper = billing_keeper(backend)
    Guard(keeper)
    async with keeper:
        await keeper.ensure("research")
        tab = await keeper.tab("research", sites.url("docs.example", "/"))
        session = backend.current
        assert session is not None
        await session.kill()
        with pytest.raises(BrowserGoneError):
            await tab.goto(sites.url("docs.example", "/"))
        with pytest.raises(BrowserGoneError):
            await tab.locator("body").count()
        facts = await keeper.ensure("research")
        assert facts.restarted
        fresh = await keeper.tab("research", sites.url("docs.example", "/"))
        assert not fresh.closed and tab.closed


async def test_a_page_the_conversation_opens_is_its_own_guarded_page_and_not_its_tab(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """open_page() gives the conversation another page: listed with its popups, refused
    another conversation's login inside the browser (0 arrivals), and the tab stays the
    conversation's main page."""
    keeper = billing_keeper(playwright_backend())
    Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, sites)
        await keeper.ensure("research")
        tab = await keeper.tab("research", sites.url("docs.example", "/"))
        extra = await tab.open_page()
        assert extra.is_popup and extra.url == "about:blank"
        assert [p.url for p in tab.popups()] == ["about:blank"]
        assert (await keeper.tab("billing")).popups() == []
        mark = len(sites.requests("billing.example"))
        with pytest.raises(NavigationBlocked):
            await extra.goto(sites.url("billing.example", "/invoices"))
        assert with_login(sites, mark) == 0
        assert await extra.goto(sites.url("docs.example", "/guide")) == sites.url(
            "docs.example", "/guide"
        )
        assert (await keeper.tab("research")).url == sites.url("docs.example", "/")
        assert keeper.current_url("research") == sites.url("docs.example", "/")
