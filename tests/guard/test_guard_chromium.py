"""The Guard on real Chromium: counted on the server, logins never leave the browser."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import pytest
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page, async_playwright

from demos.guard_attacks import SECURE_DOCS, run_suite
from demos.sites import DemoSites
from session_keeper import Durability, Grant, Guard, LoginSettings, SessionKeeper
from session_keeper.errors import InvalidArgument, InvalidArgumentType
from session_keeper.facts import PROBE_CONVERSATION
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock, LocalSites

from ..conftest import BackendFactory, shared_driver_backend
from .conftest import KEY, billing_keeper, research_reads_billing, sign_in_billing, with_login

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = pytest.mark.chromium


@pytest.mark.parametrize("samesite", ["Lax", "None"])
async def test_attack_suite_leaks_nothing_and_no_canary_is_written(
    tmp_path: Path, chromium_path: str, samesite: Literal["Lax", "None"]
) -> None:
    """Every attack is refused in the browser, on a Lax and on a SameSite=None login; no canary
    reaches the store, a log or an error."""
    password = "canary-pw-" + secrets.token_hex(8)
    with DemoSites(billing_accounts={"alice": password}, samesite=samesite) as sites:
        report = await run_suite(
            sites,
            tmp_path / "profile",
            tmp_path / "keeper.db",
            password=password,
            executable_path=chromium_path,
        )
    failed = [a for a in report.attempts if not a.ok]
    assert failed == [], "\n".join(report.rows())
    assert report.leaked_requests == 0
    assert report.canary_hits == ()
    assert report.sw_registrations == 0
    names = {a.name for a in report.attempts}
    for required in (
        "top-level navigation",
        "fetch with credentials",
        "XHR withCredentials",
        "iframe",
        "window.open popup",
        "form POST",
        "<img> subresource",
        "redirect from docs.example",
        "service worker registration",
        "<link rel=prefetch>",
        "popup through a redirect",
        "fetch from a Worker",
        "Worker fetch through a redirect",
        "fetch from a SharedWorker",
        "SharedWorker fetch through a redirect",
        "cross-site frame's first request",
        "<a ping>",
        "keepalive fetch on pagehide",
        "sendBeacon on pagehide",
        "EventSource",
        "CSS @import",
        "CSS url() font",
        "CSS url() image",
        "<object>",
        "<embed>",
        "form POST into a frame",
        "window.open noopener",
        "speculation rules prerender",
        "<a download>",
        "301/302/307/308 chain, 3 sites",
        "POST through a 3-site chain",
        "WebSocket handshake",
        "GET with a read-only grant",
        "form POST with a read-only grant",
        "write on a one-time borrow",
        "second write on that borrow",
    ):
        assert required in names
    assert report.audit_entries >= sum(1 for a in report.attempts if a.blocked_in_browser)
    assert report.result_line().startswith(f"RESULT attempts={len(report.attempts)} ")


async def test_without_the_guard_the_same_attacks_leak(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """Control: with no Guard, navigation, a popup and a redirect do carry the login out."""
    keeper = billing_keeper(playwright_backend())
    async with keeper:
        await sign_in_billing(keeper, sites)
        await keeper.ensure("research")
        page = await keeper.unguarded_page("research", sites.url("docs.example", "/"))
        mark = len(sites.requests("billing.example"))
        await page.goto(sites.url("billing.example", "/invoices"))
        await page.goto(sites.url("docs.example", "/redirect?to=http://billing.example/invoices"))
        await page.wait_for_selector("#invoices")
        await page.goto(sites.url("docs.example", "/attack/popup"))
        async with page.expect_popup() as info:
            await page.click("#open")
        popup = await info.value
        await popup.wait_for_selector("#invoices")
        assert with_login(sites, mark) == 3


async def test_service_workers_are_blocked_in_the_context(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """PlaywrightBackend's context registers no service worker, even via the prototype."""
    backend = playwright_backend(args=[SECURE_DOCS])
    session = await backend.launch()
    page = await session.open_page("research")
    mark = len(sites.requests("docs.example"))
    await page.goto(sites.url("docs.example", "/attack/sw"))
    await page.wait_for_function("document.title !== 'service worker attack'")
    assert (
        await page.evaluate("navigator.serviceWorker.getRegistrations().then(r => r.length)") == 0
    )
    scripts = [r for r in sites.requests("docs.example")[mark:] if r.path == "/attack/sw.js"]
    assert scripts == []


async def test_the_service_worker_attack_page_does_register_when_workers_are_allowed(
    tmp_path: Path, sites: LocalSites, chromium_path: str
) -> None:
    """Control: the same page registers a worker in a context that allows them."""
    async with async_playwright() as pw:
        context = await pw.chromium.launch_persistent_context(
            str(tmp_path / "allow"),
            executable_path=chromium_path,
            args=[f"--host-resolver-rules={sites.host_resolver_rules}", SECURE_DOCS],
            service_workers="allow",
        )
        try:
            page = await context.new_page()
            await page.goto(sites.url("docs.example", "/attack/sw"))
            await page.wait_for_function("document.title !== 'service worker attack'")
            assert await page.title() == "registered"
        finally:
            await context.close()


async def test_a_page_nobody_owns_cannot_carry_the_login_through_a_redirect(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """A stray page's navigation via docs.example/redirect into billing is refused at the hop."""
    backend = playwright_backend()
    keeper = SessionKeeper(
        backend,
        clock=FakeClock(),
        grants=[Grant("billing", "billing.example")],
        login_settings=LoginSettings(fingerprint_key=KEY),
    )
    guard = Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, sites)
        session = backend.current
        assert session is not None
        mark = len(sites.requests("billing.example"))
        stray = await session.context.new_page()  # not opened through the keeper
        target = (
            sites.url("docs.example", "/redirect")
            + "?to="
            + sites.url("billing.example", "/invoices")
        )
        await stray.goto(target)
        await stray.wait_for_selector("#session-keeper-blocked", state="attached")
        assert with_login(sites, mark) == 0
        # The harmless first hop did go out; the hop into billing did not.
        assert [r.path for r in sites.requests("docs.example")[-1:]] == ["/redirect"]
    assert any(b.redirect and b.rule == "unowned" for b in guard.blocks)


async def test_unowned_pages_are_refused_and_probe_pages_only_read(
    playwright_backend: BackendFactory,
    sites: LocalSites,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A page nobody owns cannot reach billing; the probe reads it but cannot POST; both logged."""
    async with SqliteStore(str(tmp_path / "s.db")) as store:
        backend = playwright_backend()
        keeper = SessionKeeper(
            backend,
            clock=FakeClock(),
            grants=[Grant("billing", "billing.example")],
            login_settings=LoginSettings(fingerprint_key=KEY),
            durability=Durability(store=store),
        )
        guard = Guard(keeper)
        async with keeper:
            await sign_in_billing(keeper, sites)
            assert guard.enforcing
            session = backend.current
            assert session is not None
            mark = len(sites.requests("billing.example"))
            caplog.set_level(logging.INFO, logger="session_keeper")

            stray = await session.context.new_page()  # not opened through the keeper
            await stray.goto(sites.url("billing.example", "/invoices?token=secret-in-query"))
            await stray.wait_for_selector("#session-keeper-blocked", state="attached")
            assert with_login(sites, mark) == 0

            probe = await session.open_page(PROBE_CONVERSATION)
            await probe.goto(sites.url("billing.example", "/invoices"))
            await probe.wait_for_selector("#invoices")
            status = await probe.evaluate(
                "fetch('/card', {method: 'POST', body: new URLSearchParams({card: '4242'})})"
                ".then(r => r.status)"
            )
            assert status == 403
            assert [r.method for r in sites.requests("billing.example")[mark:]] == ["GET"]
        events = await store.events(kind="guard_block")
    rules = [(e.data["rule"], e.data["conversation"], e.data["method"]) for e in events]
    assert ("unowned", None, "GET") in rules
    assert ("grant", PROBE_CONVERSATION, "POST") in rules
    stored = json.dumps([e.to_dict() for e in events])
    assert "secret-in-query" not in stored and "token=" not in stored
    assert any("guard blocked GET http://billing.example/invoices" in m for m in caplog.messages)
    assert not any("secret-in-query" in m for m in caplog.messages)


async def test_a_one_time_write_borrow_lets_exactly_one_write_reach_the_site(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """Counted on the server: one borrow, one POST with the login; decide() arms exactly one."""
    keeper = research_reads_billing(playwright_backend())
    guard = Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, sites)
        await keeper.ensure("research")
        page = await keeper.unguarded_page("research", sites.url("billing.example", "/invoices"))
        post = (
            "fetch('/card', {method: 'POST', body: new URLSearchParams({card: '4242'})})"
            ".then(r => r.status)"
        )

        def posts_with_login() -> int:
            return sum(
                1
                for r in sites.requests("billing.example")
                if r.method == "POST" and r.cookie("billing_session") is not None
            )

        before = posts_with_login()
        # Nobody called decide(): the borrow's one use is spent by the first request.
        keeper.approve_borrow("research", "billing.example", "write", approved_by="alice")
        assert await page.evaluate(post) == 200
        assert await page.evaluate(post) == 403
        assert posts_with_login() == before + 1
        # decide() spends the next borrow and admits the one request that acts on it.
        keeper.approve_borrow("research", "billing.example", "write", approved_by="alice")
        assert keeper.decide("research", "billing.example", "write").outcome == "act"
        assert await page.evaluate(post) == 200
        assert await page.evaluate(post) == 403
        assert posts_with_login() == before + 2
    refused = [b for b in guard.blocks if b.method == "POST" and b.conversation == "research"]
    assert len(refused) == 2


async def test_a_one_time_read_borrow_admits_exactly_one_page_load(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """Counted on the server: one read use = one navigation plus its own subresources; no more."""
    keeper = billing_keeper(playwright_backend())  # research holds no grant of its own
    guard = Guard(keeper)
    statement = sites.url("billing.example", "/statement")
    load = ["/logo.svg", "/statement", "/statement.css"]

    def reads_with_login(mark: int) -> list[str]:
        return sorted(
            r.path
            for r in sites.requests("billing.example")[mark:]
            if r.cookie("billing_session") is not None and r.path != "/favicon.ico"
        )

    async def loads(page: Page, url: str) -> bool:
        """Navigate; whether the page loaded (the Guard neither aborted it nor showed its 403)."""
        since = len(guard.blocks)
        try:
            await page.goto(url)
        except PlaywrightError:
            # A refused navigation of a page showing a document is aborted.
            assert any(b.resource_type == "Document" for b in guard.blocks[since:])
            return False
        return await page.locator("#session-keeper-blocked").count() == 0

    async with keeper:
        await sign_in_billing(keeper, sites)
        await keeper.ensure("research")
        page = await keeper.unguarded_page("research", sites.url("docs.example", "/"))
        mark = len(sites.requests("billing.example"))
        # Nobody called decide(): the first navigation spends the borrow's one use.
        keeper.approve_borrow("research", "billing.example", "read", approved_by="alice")
        assert await loads(page, statement)
        assert await page.locator("#logo").evaluate("img => img.naturalWidth") == 8
        assert reads_with_login(mark) == load
        assert not await loads(page, statement)
        assert not await loads(page, sites.url("billing.example", "/invoices"))
        assert reads_with_login(mark) == load
        # decide() spends the next borrow: it arms exactly one page load, the next one.
        keeper.approve_borrow("research", "billing.example", "read", approved_by="alice")
        assert keeper.decide("research", "billing.example", "read").outcome == "act"
        mark = len(sites.requests("billing.example"))
        assert await loads(page, statement)
        assert reads_with_login(mark) == load
        assert not await loads(page, statement)
        # A script's read from a page of another site is no page load of billing's: it
        # would need a use of its own, and none is left.
        assert await loads(page, sites.url("docs.example", "/"))
        status = await page.evaluate(
            f"fetch({statement!r}, {{credentials: 'include'}}).then(r => r.status, () => -1)"
        )
        assert status in (403, -1)
        assert reads_with_login(mark) == load
    refused_navigations = [
        b for b in guard.blocks if b.conversation == "research" and b.resource_type == "Document"
    ]
    assert len(refused_navigations) == 3


class _GatedStore(SqliteStore):
    """A SqliteStore whose keeper-state saves wait for ``gate`` while it is closed."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.gate = asyncio.Event()
        self.gate.set()

    async def save_keeper_rows(self, keeper_id: str, **batch: Any) -> None:
        await self.gate.wait()
        await super().save_keeper_rows(keeper_id, **batch)


async def test_a_spent_use_is_stored_before_its_request_leaves_the_browser(
    playwright_backend: BackendFactory, sites: LocalSites, tmp_path: Path
) -> None:
    """While the store cannot save, the borrowed POST waits in the browser; then it goes."""
    async with _GatedStore(str(tmp_path / "k.db")) as store:
        keeper = research_reads_billing(playwright_backend(), durability=Durability(store=store))
        Guard(keeper)
        async with keeper:
            await sign_in_billing(keeper, sites)
            await keeper.ensure("research")
            page = await keeper.unguarded_page(
                "research", sites.url("billing.example", "/invoices")
            )
            keeper.approve_borrow("research", "billing.example", "write", approved_by="alice")
            await keeper.persist()
            mark = len(sites.requests("billing.example"))
            store.gate.clear()
            posting = asyncio.ensure_future(
                page.evaluate(
                    "fetch('/card', {method: 'POST', body: new URLSearchParams({card: '4242'})})"
                    ".then(r => r.status)"
                )
            )
            try:
                await asyncio.sleep(1.0)
                held = [r for r in sites.requests("billing.example")[mark:] if r.method == "POST"]
                still_waiting = not posting.done()
            finally:
                store.gate.set()  # a failing check must not leave the keeper's close hanging
            assert held == []
            assert still_waiting
            assert await posting == 200
            arrived = [r for r in sites.requests("billing.example")[mark:] if r.method == "POST"]
            assert len(arrived) == 1


async def test_a_navigation_that_cannot_be_watched_is_refused(
    playwright_backend: BackendFactory, sites: LocalSites, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No CDP watch for a page (attach fails): its navigation is refused, rule 'unwatched'."""
    backend = playwright_backend()
    keeper = research_reads_billing(backend)
    guard = Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, sites)
        session = backend.current
        assert session is not None

        async def refuse(self: object, target: object) -> None:
            raise PlaywrightError("Target.attachToTarget: refused")  # as Chromium may

        # The Guard's watch opens a CDP session per page: make Chromium refuse it.
        monkeypatch.setattr(type(session.context), "new_cdp_session", refuse)
        mark = len(sites.requests("docs.example"))
        stray = await session.context.new_page()
        await stray.goto(sites.url("docs.example", "/redirect") + "?to=/")
        await stray.wait_for_selector("#session-keeper-blocked", state="attached")
        assert sites.requests("docs.example")[mark:] == []  # nothing left the browser
    assert [b.rule for b in guard.blocks if b.origin == "http://docs.example"] == ["unwatched"]


@pytest.mark.parametrize("code", [307, 308])
async def test_a_307_or_308_hop_of_a_one_time_write_is_the_same_write(
    playwright_backend: BackendFactory, sites: LocalSites, code: int
) -> None:
    """A POST on a one-time borrow that the site redirects (307/308, still a POST) arrives once."""
    keeper = research_reads_billing(playwright_backend())
    guard = Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, sites)
        await keeper.ensure("research")
        page = await keeper.tab("research", sites.url("billing.example", "/invoices"))
        keeper.approve_borrow("research", "billing.example", "write", approved_by="alice")
        mark = len(sites.requests("billing.example"))
        moved = f"/redirect?code={code}&to=" + quote(sites.url("billing.example", "/card"))
        status = await page.evaluate(
            "(u) => fetch(u, {method: 'POST', body: new URLSearchParams({card: '4242'})})"
            ".then(r => r.status)",
            moved,
        )
        arrived = [
            (r.method, r.path)
            for r in sites.requests("billing.example")[mark:]
            if r.cookie("billing_session") is not None
        ]
        assert status == 200, [b.reason for b in guard.blocks]
        assert arrived == [("POST", "/redirect"), ("POST", "/card")]
        # The borrow was one use: spent by that one write, nothing more goes.
        assert keeper.permits("research", "billing.example", "write").outcome != "act"


@pytest.mark.parametrize(
    ("hold_timeout", "reissued"),
    [(timedelta(seconds=10), True), (timedelta(milliseconds=1), False)],
)
async def test_a_held_navigation_is_reissued_only_within_the_hold_timeout(
    playwright_backend: BackendFactory,
    sites: LocalSites,
    hold_timeout: timedelta,
    reissued: bool,
) -> None:
    """A popup's first navigation (before the popup can be watched) is held, then re-issued
    once its holding page shows; when the holding page is not there within
    ``hold_timeout``, it is dropped: nothing is sent, and the popup keeps the holding page."""
    backend = playwright_backend()
    keeper = billing_keeper(backend)
    Guard(keeper, hold_timeout=hold_timeout)
    async with keeper:
        await keeper.ensure("billing")
        page = await keeper.unguarded_page("billing", sites.url("docs.example", "/"))
        mark = len(sites.requests("docs.example"))
        async with page.expect_popup() as opened:
            await page.evaluate("(u) => { window.open(u); }", sites.url("docs.example", "/guide"))
        popup = await opened.value
        if reissued:
            await popup.wait_for_selector("#text")
        else:
            await asyncio.sleep(1.5)  # long past the timeout: a late re-issue would show
            assert await popup.locator("meta[name='session-keeper-hold']").count() == 1
        arrived = [
            r.path for r in sites.requests("docs.example")[mark:] if r.path != "/favicon.ico"
        ]
        assert arrived == (["/guide"] if reissued else [])


def test_the_hold_timeout_must_be_a_positive_timedelta() -> None:
    """A hold_timeout that is not a positive timedelta is refused at once."""
    keeper = SessionKeeper(FakeBackend(), clock=FakeClock())
    with pytest.raises(InvalidArgumentType):
        Guard(keeper, hold_timeout=10)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        Guard(keeper, hold_timeout=timedelta(0))
