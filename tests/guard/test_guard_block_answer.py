"""How the Guard answers a refused top-level navigation, on real Chromium.

A tab that shows a document keeps it: the refused navigation is aborted, the call that
navigated raises :class:`NavigationBlocked`, and the page's later requests still work
(the local 403 page, once shown, made Chromium refuse every later request of the tab).
"""

from __future__ import annotations

import pytest

from session_keeper import Grant, Guard
from session_keeper.errors import NavigationBlocked
from session_keeper.testing import LocalSites

from ..conftest import BackendFactory, shared_driver_backend
from .conftest import billing_keeper, sign_in_billing, with_login

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = pytest.mark.chromium

FETCH = "u => fetch(u, {credentials: 'include', mode: 'no-cors'}).then(() => 'ok', e => String(e))"


def arrived(sites: LocalSites, host: str, query: str) -> int:
    """Requests to ``host`` whose query string is ``query`` (server-counted)."""
    return sum(1 for r in sites.requests(host) if r.query == query)


async def test_a_refused_navigation_leaves_the_tab_on_its_page_and_its_later_fetches_work(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """goto into a site without a grant raises, nothing arrives, and the page keeps working."""
    keeper = billing_keeper(playwright_backend())
    Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, sites)
        await keeper.ensure("research")
        tab = await keeper.tab("research")
        docs = await tab.goto(sites.url("docs.example", "/"))
        with pytest.raises(NavigationBlocked) as refused:
            await tab.goto(sites.url("billing.example", "/invoices?refused=1"))
        assert refused.value.block.path == "/invoices"
        assert tab.url == docs
        assert await tab.locator("#session-keeper-blocked").count() == 0
        assert arrived(sites, "billing.example", "refused=1") == 0
        # The page still reaches a site it may reach, and a site granted after the refusal.
        assert await tab.evaluate(FETCH, sites.url("docs.example", "/?after=1")) == "ok"
        assert arrived(sites, "docs.example", "after=1") == 1
        keeper.grant(Grant("research", "billing.example", actions={"read"}))
        assert await tab.evaluate(FETCH, sites.url("billing.example", "/?granted=1")) == "ok"
        assert arrived(sites, "billing.example", "granted=1") == 1
        assert arrived(sites, "billing.example", "refused=1") == 0


async def test_a_refused_redirect_hop_history_step_or_click_raises_and_keeps_the_page(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """A hop into billing, back() into it after a revoke, and a link click: each raises."""
    keeper = billing_keeper(playwright_backend())
    Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, sites)
        await keeper.ensure("research")
        tab = await keeper.tab("research")
        docs = await tab.goto(sites.url("docs.example", "/"))
        mark = len(sites.requests("billing.example"))
        with pytest.raises(NavigationBlocked) as hop:
            await tab.goto(
                sites.url("docs.example", "/redirect?to=http://billing.example/invoices")
            )
        assert hop.value.block.path == "/invoices" and hop.value.block.redirect
        assert tab.url == docs
        await tab.evaluate(
            "u => { const a = document.createElement('a'); a.id = 'go'; a.href = u;"
            " a.textContent = 'invoices'; document.body.appendChild(a); }",
            sites.url("billing.example", "/invoices"),
        )
        with pytest.raises(NavigationBlocked) as clicked:
            await tab.click("#go")
        assert clicked.value.block.path == "/invoices"
        assert tab.url == docs
        assert with_login(sites, mark) == 0
        # History: granted, research reads billing, leaves; revoked, back() is refused.
        keeper.grant(Grant("research", "billing.example", actions={"read"}))
        await tab.goto(sites.url("billing.example", "/invoices"))
        await tab.goto(docs)
        keeper.revoke("research", "billing.example")
        mark = len(sites.requests("billing.example"))
        with pytest.raises(NavigationBlocked) as back:
            await tab.back()
        assert back.value.block.path == "/invoices"
        assert tab.url == docs
        assert with_login(sites, mark) == 0
        assert await tab.evaluate(FETCH, sites.url("docs.example", "/?after=2")) == "ok"


async def test_a_fresh_tab_refused_on_its_first_navigation_shows_the_block_page(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """Nothing to keep (about:blank): the 403 page names the reason, and goto still raises."""
    keeper = billing_keeper(playwright_backend())
    Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, sites)
        await keeper.ensure("research")
        tab = await keeper.tab("research")
        with pytest.raises(NavigationBlocked):
            await tab.goto(sites.url("billing.example", "/invoices"))
        assert "has no grant" in await tab.locator("#session-keeper-blocked").inner_text()
        # A navigation refused while the tab shows that 403 page replaces it again.
        with pytest.raises(NavigationBlocked):
            await tab.goto(sites.url("billing.example", "/statement"))
        assert tab.url == sites.url("billing.example", "/statement")
