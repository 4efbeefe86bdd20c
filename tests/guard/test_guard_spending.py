"""Counted grants under the Guard: a use is spent only on a request that leaves."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import BrowserContext, CDPSession, Frame, Page

from session_keeper import Durability, Grant, Guard, SessionKeeper
from session_keeper.errors import NavigationBlocked, UnsavedChanges
from session_keeper.security import GuardPolicy
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock, LocalSites

from ..conftest import BackendFactory, shared_driver_backend
from .conftest import research_reads_billing, sign_in_billing

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend


def _posts_with_login(sites: LocalSites, mark: int, path: str = "/card") -> int:
    return sum(
        1
        for r in sites.requests("billing.example")[mark:]
        if r.method == "POST" and r.path == path and r.cookie("billing_session") is not None
    )


@pytest.mark.chromium
async def test_a_cors_preflight_spends_nothing_so_the_write_it_precedes_reaches_the_site(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """A same-site, cross-origin JSON POST on a one-time borrow: the write must reach the site.

    Chromium sends an OPTIONS preflight first. It carries no cookies, so it must not
    count as a write: spending the borrow on it would refuse the real POST.
    """
    keeper = research_reads_billing(playwright_backend())
    guard = Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, sites)
        await keeper.ensure("research")
        # Same site as billing.example (so the Lax cookie goes), another origin.
        page = await keeper.unguarded_page("research", sites.url("www.billing.example", "/"))
        mark = len(sites.requests("billing.example"))
        keeper.approve_borrow("research", "billing.example", "write", approved_by="alice")
        assert keeper.decide("research", "billing.example", "write").outcome == "act"
        outcome = await page.evaluate(
            """(u) => fetch(u, {method: 'POST', credentials: 'include',
                    headers: {'Content-Type': 'application/json'}, body: '{}'})
                  .then(r => r.status, e => 'error: ' + e)""",
            sites.url("billing.example", "/card?card=4242"),
        )
        await asyncio.sleep(0.3)
        blocks = [(b.method, b.reason) for b in guard.blocks if b.conversation == "research"]
        assert _posts_with_login(sites, mark) == 1, (outcome, blocks)


@pytest.mark.chromium
async def test_a_held_unwatched_navigation_spends_no_use(
    playwright_backend: BackendFactory, sites: LocalSites, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A popup's form POST that arrives before its watch is held and re-issued as a GET.

    The POST never leaves, so the route must not spend (or store) the borrow before
    deciding to hold it: the one-time write stays for the request that is sent. (The
    watch is slowed down here to make the popup's window between announcement and
    watch reliable.)
    """
    keeper = research_reads_billing(playwright_backend())
    Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, sites)
        await keeper.ensure("research")
        page = await keeper.unguarded_page("research", sites.url("billing.example", "/invoices"))
        context_type = type(page.context)
        real_new_cdp_session = context_type.new_cdp_session

        async def slow_new_cdp_session(self: BrowserContext, target: Page | Frame) -> CDPSession:
            await asyncio.sleep(1.5)
            return await real_new_cdp_session(self, target)

        # Slows the Guard's watch (it opens a CDP session per page), not the Guard.
        monkeypatch.setattr(context_type, "new_cdp_session", slow_new_cdp_session)
        mark = len(sites.requests("billing.example"))
        keeper.approve_borrow("research", "billing.example", "write", approved_by="alice")
        async with page.expect_popup() as info:
            await page.evaluate(
                """(u) => { const w = window.open('');
                    setTimeout(() => {
                      w.document.body.innerHTML = '<form method=post action="' + u + '">'
                        + '<input name=card value=4242></form>';
                      w.document.forms[0].submit();
                    }, 400); }""",
                sites.url("billing.example", "/card"),
            )
        popup = await info.value
        await asyncio.sleep(3.0)
        await popup.close()
        assert _posts_with_login(sites, mark) == 0  # held, then re-issued as a GET
        # Nothing was written: the borrow must still be there.
        assert keeper.permits("research", "billing.example", "write").outcome == "act"


class _BrokenStore(SqliteStore):
    """A SqliteStore whose keeper-state saves fail while ``broken`` is set."""

    broken = False

    async def save_keeper_rows(self, keeper_id: str, **batch: Any) -> None:
        if self.broken:
            raise OSError("disk full")
        await super().save_keeper_rows(keeper_id, **batch)


@pytest.mark.chromium
async def test_a_spent_use_that_cannot_be_stored_refuses_its_request(
    playwright_backend: BackendFactory, sites: LocalSites, tmp_path: Path
) -> None:
    """A use that cannot be stored refuses its request (403): the Guard fails closed."""
    async with _BrokenStore(str(tmp_path / "k.db")) as store:
        keeper = research_reads_billing(playwright_backend(), durability=Durability(store=store))
        guard = Guard(keeper)
        async with keeper:
            await sign_in_billing(keeper, sites)
            await keeper.ensure("research")
            page = await keeper.unguarded_page(
                "research", sites.url("billing.example", "/invoices")
            )
            keeper.approve_borrow("research", "billing.example", "write", approved_by="alice")
            await keeper.persist()
            mark = len(sites.requests("billing.example"))
            store.broken = True
            try:
                status = await page.evaluate(
                    "fetch('/card', {method: 'POST', body: new URLSearchParams({card: '4242'})})"
                    ".then(r => r.status)"
                )
            finally:
                store.broken = False
            assert status == 403
            assert _posts_with_login(sites, mark) == 0
            # The failed write reaches the application too: the Guard does not swallow it.
            with pytest.raises(UnsavedChanges):
                await keeper.persist()
            await keeper.persist()
        assert any("could not be stored" in b.reason for b in guard.blocks)


async def test_a_request_refused_for_one_site_spends_no_use_of_another() -> None:
    """A host under two protected sites: refused by the second, the first's borrow stays."""
    backend = FakeBackend()
    keeper = SessionKeeper(
        backend,
        clock=FakeClock(),
        grants=[Grant("billing", "billing.example", actions={"read", "write"})],
    )
    # api.billing.example is protected but nobody is signed in there: refused.
    guard = GuardPolicy(keeper, protect=["api.billing.example"])
    async with keeper:
        await keeper.ensure("billing")
        await keeper.ensure("research")
        await backend.sign_in("billing.example", name="billing_session")
        await keeper.record_login("billing", "billing.example")
        keeper.approve_borrow("research", "billing.example", "write", approved_by="alice")
        verdict = guard.decide("research", "http://api.billing.example/card", "POST", spend=True)
        assert not verdict.allowed
        # The refused request never left; the borrow must still be there.
        assert keeper.permits("research", "billing.example", "write").outcome == "act"


POST_CARD = (
    "u => fetch(u, {method: 'POST', body: new URLSearchParams({card: '4242'})})"
    ".then(r => r.status, () => -1)"
)


@pytest.mark.chromium
async def test_an_armed_act_admits_only_a_request_of_the_page_and_url_it_was_armed_for(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """decide() arms the main tab's write: a popup's POST or a beacon elsewhere cannot spend it."""
    keeper = research_reads_billing(playwright_backend())
    guard = Guard(keeper)
    card = sites.url("billing.example", "/card")
    async with keeper:
        await sign_in_billing(keeper, sites)
        await keeper.ensure("research")
        tab = await keeper.tab("research", sites.url("billing.example", "/invoices"))
        await tab.evaluate("u => { window.open(u); }", sites.url("billing.example", "/invoices"))
        popup = await tab.wait_for_popup()
        await popup.wait_for(selector="#invoices")
        mark = len(sites.requests("billing.example"))

        keeper.approve_borrow("research", "billing.example", "write", approved_by="alice")
        assert keeper.decide("research", "billing.example", "write").outcome == "act"
        # Another page of the same conversation writes first: refused, the act stays armed.
        assert await popup.evaluate(POST_CARD, card) == 403
        assert _posts_with_login(sites, mark) == 0
        assert await tab.evaluate(POST_CARD, card) == 200
        assert _posts_with_login(sites, mark) == 1
        assert await tab.evaluate(POST_CARD, card) == 403

        # Armed for one URL of the popup: a beacon of that page to another path cannot
        # spend it; the request it was armed for can.
        keeper.approve_borrow("research", "billing.example", "write", approved_by="alice")
        decision = keeper.decide("research", "billing.example", "write", page=popup, url=card)
        assert decision.outcome == "act"
        since = len(guard.blocks)
        await popup.evaluate(
            "u => navigator.sendBeacon(u, 'ping')", sites.url("billing.example", "/beacon")
        )
        await asyncio.wait_for(
            guard.wait_for_block(lambda b: b.path == "/beacon", since=since), timeout=30
        )
        assert await tab.evaluate(POST_CARD, card) == 403
        assert await popup.evaluate(POST_CARD, card) == 200
        assert _posts_with_login(sites, mark) == 2
        assert _posts_with_login(sites, mark, "/beacon") == 0


@pytest.mark.chromium
async def test_a_request_the_browser_makes_on_its_own_never_spends_a_borrow(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """A borrow approved while the tab shows the block page survives the tab's icon fetch."""
    keeper = research_reads_billing(playwright_backend())
    keeper.revoke("research", "billing.example")
    guard = Guard(keeper)
    invoices = sites.url("billing.example", "/invoices")
    async with keeper:
        await sign_in_billing(keeper, sites)
        await keeper.ensure("research")
        tab = await keeper.tab("research")
        with pytest.raises(NavigationBlocked):
            await tab.goto(invoices)
        mark = len(sites.requests("billing.example"))
        since = len(guard.blocks)
        keeper.approve_borrow("research", "billing.example", "read", approved_by="alice")
        # Chromium fetches a tab's icon on its own, whenever it likes: make it happen now.
        await tab.evaluate(
            "u => { const l = document.createElement('link'); l.rel = 'icon'; l.href = u;"
            " document.head.appendChild(l); }",
            sites.url("billing.example", "/icon.png"),
        )
        icon = await asyncio.wait_for(
            guard.wait_for_block(lambda b: b.path == "/icon.png", since=since), timeout=30
        )
        assert icon.resource_type == "Other"
        assert await tab.goto(invoices) == invoices
        arrived = [
            r.path
            for r in sites.requests("billing.example")[mark:]
            if r.cookie("billing_session") is not None
        ]
        assert arrived == ["/invoices"]
