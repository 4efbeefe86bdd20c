"""The tabs of a browser the keeper attached to: its blank first tab becomes a
conversation's (as Playwright MCP reuses it), a tab a person used never does, and the
browser is never left without a tab (Chromium would end its session, cookies and all)."""

from __future__ import annotations

import pytest
from playwright.async_api import async_playwright

from session_keeper import CdpBackend, Guard
from session_keeper._model.cookies import Cookie
from session_keeper.errors import NavigationBlocked
from session_keeper.testing import LocalSites

from ..guard.conftest import billing_keeper, sign_in_billing
from ._remote import CutProxy, RemoteChromium
from .test_cdp_backend import session_of

pytestmark = pytest.mark.chromium


async def test_a_conversations_first_tab_is_the_attached_browsers_blank_tab_and_guarded(
    proxy: CutProxy, sites: LocalSites
) -> None:
    """The browser's one blank tab becomes research's tab (no second tab opens), the
    next conversation gets a new tab, and the Guard refuses research billing's site."""
    backend = CdpBackend(proxy.url)
    keeper = billing_keeper(backend)
    Guard(keeper)
    async with keeper:
        await keeper.ensure("research")
        session = session_of(backend)
        (blank,) = session.context.pages
        tab = await keeper.tab("research", sites.url("docs.example", "/"))
        assert session.context.pages == [blank] and session.owner_of(blank) == "research"
        await sign_in_billing(keeper, sites)
        assert len(session.context.pages) == 2
        with pytest.raises(NavigationBlocked):
            await tab.goto(sites.url("billing.example", "/invoices"))


@pytest.mark.parametrize("used", ["shows a page", "has a page behind it"])
async def test_a_tab_a_person_used_is_never_a_conversations(
    used: str, remote: RemoteChromium, proxy: CutProxy, sites: LocalSites
) -> None:
    """A tab that shows a page, or went back to about:blank from one, stays nobody's:
    the conversation gets a tab of its own and the person's tab keeps its page."""
    async with async_playwright() as pw:
        person = await pw.chromium.connect_over_cdp(f"http://127.0.0.1:{remote.port}")
        (page,) = person.contexts[0].pages
        await page.goto(sites.url("docs.example", "/guide"))
        if used == "has a page behind it":
            await page.goto("about:blank")
        where = page.url
        await person.close()  # disconnects only
    backend = CdpBackend(proxy.url)
    keeper = billing_keeper(backend)
    Guard(keeper)
    async with keeper:
        await keeper.ensure("research")
        await keeper.tab("research", sites.url("docs.example", "/"))
        session = session_of(backend)
        theirs = [p for p in session.context.pages if session.owner_of(p) is None]
        assert [p.url for p in theirs] == [where]
        assert len(session.context.pages) == 2


async def test_closing_an_attached_browsers_last_tab_keeps_its_session_cookies(
    remote: RemoteChromium, proxy: CutProxy
) -> None:
    """A conversation closing the browser's only tab, and the keeper leaving, each leave a
    blank tab open, so the browser's session cookies (most logins) live on."""
    backend = CdpBackend(proxy.url)
    async with billing_keeper(backend) as keeper:
        await keeper.ensure("research")
        session = session_of(backend)
        await session.add_cookies([Cookie(name="sid", value="canary-1", domain="a.example")])
        tab = await keeper.tab("research")
        assert len(session.context.pages) == 1
        await tab.close()
        assert [p.url for p in session.context.pages] == ["about:blank"]
        await keeper.tab("research")  # the blank tab left behind is the next tab
    async with async_playwright() as pw:
        person = await pw.chromium.connect_over_cdp(f"http://127.0.0.1:{remote.port}")
        context = person.contexts[0]
        assert [c["name"] for c in await context.cookies("http://a.example/")] == ["sid"]
        assert len(context.pages) == 1
        await person.close()
