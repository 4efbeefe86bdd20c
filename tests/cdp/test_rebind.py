"""Our own process restarts while the CDP browser lives on: a new keeper process re-binds.

A keeper *process* (``_keeper_process.py``) signs in to billing, opens a tab for two
conversations on a remote Chromium, saves, and is SIGKILLed. A new keeper (this test's
process) on the same store and endpoint then picks the browser up again.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from playwright.async_api import Page, async_playwright

from session_keeper import CdpBackend, Durability, Grant, Guard, LoginSettings, SessionKeeper
from session_keeper._browser.cdp_endpoint import MARKER_COOKIE, MARKER_HOST, marker_cookie_name
from session_keeper._browser.cdp_session import CdpSession, _identity
from session_keeper.errors import NavigationBlocked
from session_keeper.stores import SqliteStore
from session_keeper.testing import LocalSites

from ..guard.conftest import with_login
from ._remote import CutProxy, RemoteChromium

pytestmark = [pytest.mark.chromium, pytest.mark.timeout(240)]

KEY = bytes(range(32))
ROOT = Path(__file__).resolve().parents[2]


async def run_and_kill_keeper_process(
    db: Path, endpoint: str, sites: LocalSites, keeper_id: str = "default"
) -> dict[str, str]:
    """Start the keeper process, wait until it saved its tabs, SIGKILL it; its target ids."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(ROOT / "tests" / "cdp" / "_keeper_process.py"),
        str(db),
        endpoint,
        sites.url("billing.example", "").rstrip("/"),
        sites.url("docs.example", "").rstrip("/"),
        keeper_id,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), timeout=120)
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    word, _, body = line.decode().partition(" ")
    assert word == "READY", line
    targets: dict[str, str] = json.loads(body)
    assert all(targets.values())
    return targets


def page_targets(remote: RemoteChromium) -> dict[str, str]:
    """Every page target of the remote browser (id -> URL), asked over its HTTP endpoint."""
    with urllib.request.urlopen(f"http://127.0.0.1:{remote.port}/json/list", timeout=10) as r:
        listing = json.load(r)
    return {t["id"]: t["url"] for t in listing if t["type"] == "page"}


def close_target(remote: RemoteChromium, target: str) -> None:
    with urllib.request.urlopen(
        f"http://127.0.0.1:{remote.port}/json/close/{target}", timeout=10
    ) as r:
        r.read()


def new_keeper(
    backend: CdpBackend, store: SqliteStore, keeper_id: str = "default"
) -> SessionKeeper[Page]:
    return SessionKeeper(
        backend,
        durability=Durability(store=store, keeper_id=keeper_id),
        login_settings=LoginSettings(fingerprint_key=KEY),
        grants=[Grant("billing", "billing.example")],
    )


async def test_a_new_keeper_process_rebinds_to_the_browser_that_lived_on_without_a_restart(
    tmp_path: Path, remote: RemoteChromium, proxy: CutProxy, sites: LocalSites
) -> None:
    """SIGKILLed keeper, new process: no restart, same tabs (target id, URL), login survived."""
    db = tmp_path / "keeper.db"
    targets = await run_and_kill_keeper_process(db, proxy.url, sites)
    billing_url = sites.url("billing.example", "/invoices")
    docs_url = sites.url("docs.example", "/guide")
    before = await asyncio.to_thread(page_targets, remote)
    assert before[targets["billing"]] == billing_url
    assert before[targets["research"]] == docs_url

    backend = CdpBackend(proxy.url)
    async with SqliteStore(db) as store, new_keeper(backend, store) as keeper:
        billing = await keeper.ensure("billing")
        assert not billing.restarted
        assert billing.generation == 1
        assert billing.lost == ()
        assert billing.revalidate == ("billing.example",)
        research = await keeper.ensure("research")
        assert not research.restarted
        assert research.lost == ()
        assert backend.launches == 0 and backend.rebinds == 1
        session = backend.current
        assert session is not None
        for conversation, url in (("billing", billing_url), ("research", docs_url)):
            assert keeper.has_tab(conversation)
            page = await keeper.unguarded_page(conversation)
            assert session.target_id(page) == targets[conversation]
            assert page.url == url
            assert keeper.current_url(conversation) == url
        (login,) = keeper.logins()
        assert login.site == "billing.example" and login.needs_revalidation
        decision = keeper.decide("billing", "billing.example", "write", assumes_login=True)
        assert decision.allowed and decision.needs_revalidation
        # The login really is still in the jar: the re-adopted tab is signed in.
        page = await keeper.unguarded_page("billing", billing_url)
        assert await page.locator("#account").text_content() == "alice"
        assert not (await keeper.ensure("billing")).restarted
        # Nothing opened, nothing closed: the browser's pages are the ones it had.
        assert (await asyncio.to_thread(page_targets, remote)).keys() == before.keys()
        assert [g.generation for g in keeper.generations()] == [1]
        assert keeper.generations()[0].ended_at is None


async def test_a_tab_closed_while_no_keeper_process_ran_is_lost_as_closed_without_a_restart(
    tmp_path: Path, remote: RemoteChromium, proxy: CutProxy, sites: LocalSites
) -> None:
    """Re-binding to the same browser: only the tab whose target is gone is lost ("closed")."""
    db = tmp_path / "keeper.db"
    targets = await run_and_kill_keeper_process(db, proxy.url, sites)
    await asyncio.to_thread(close_target, remote, targets["research"])

    backend = CdpBackend(proxy.url)
    async with SqliteStore(db) as store, new_keeper(backend, store) as keeper:
        research = await keeper.ensure("research")
        assert not research.restarted
        assert [str(x) for x in research.lost] == ["tab:research"]
        assert research.lost[0].cause == "closed"
        assert research.lost[0].last_url == sites.url("docs.example", "/guide")
        billing = await keeper.ensure("billing")
        assert not billing.restarted and billing.lost == ()
        assert billing.revalidate == ("billing.example",)
        assert keeper.has_tab("billing") and not keeper.has_tab("research")
        session = backend.current
        assert session is not None
        page = await keeper.unguarded_page("billing")
        assert session.target_id(page) == targets["billing"]
        assert backend.launches == 0


async def test_a_browser_replaced_while_no_keeper_process_ran_is_one_restart_with_measured_losses(
    tmp_path: Path, remote: RemoteChromium, proxy: CutProxy, sites: LocalSites
) -> None:
    """A new browser behind the endpoint (marker gone): one restart, login and tabs lost."""
    db = tmp_path / "keeper.db"
    await run_and_kill_keeper_process(db, proxy.url, sites)
    proxy.upstream_port = await remote.restart_fresh()

    backend = CdpBackend(proxy.url)
    async with SqliteStore(db) as store, new_keeper(backend, store) as keeper:
        billing = await keeper.ensure("billing")
        assert billing.restarted
        assert billing.generation == 2 and billing.previous_generation == 1
        assert [str(x) for x in billing.lost] == ["login:billing.example", "tab:billing"]
        research = await keeper.ensure("research")
        assert research.restarted
        assert research.lost_tab is not None
        assert research.lost_tab.last_url == sites.url("docs.example", "/guide")
        assert backend.launches == 1 and backend.rebinds == 0
        assert not (await keeper.ensure("billing")).restarted
        assert keeper.logins() == ()


async def test_a_rebound_browser_is_guarded_on_its_readopted_tabs_per_grant(
    tmp_path: Path, proxy: CutProxy, sites: LocalSites
) -> None:
    """New process with a Guard: re-adopted tabs are watched; blocked/admitted per grant."""
    db = tmp_path / "keeper.db"
    await run_and_kill_keeper_process(db, proxy.url, sites)
    backend = CdpBackend(proxy.url)
    async with SqliteStore(db) as store:
        keeper = new_keeper(backend, store)
        guard = Guard(keeper)
        async with keeper:
            assert not (await keeper.ensure("research")).restarted
            assert not (await keeper.ensure("billing")).restarted
            assert guard.enforcing and backend.rebinds == 1
            mark = len(sites.requests("billing.example"))
            research = await keeper.tab("research")
            with pytest.raises(NavigationBlocked):
                await research.goto(sites.url("billing.example", "/invoices"))
            assert with_login(sites, mark) == 0
            # The owner's re-adopted tab is watched: its navigation is admitted, signed in.
            keeper.confirm_login("billing", "billing.example")
            billing = await keeper.tab("billing")
            await billing.goto(sites.url("billing.example", "/invoices?again=1"))
            assert with_login(sites, mark) == 1


async def test_a_tab_that_went_to_a_forbidden_site_while_no_keeper_ran_fails_closed_as_a_restart(
    tmp_path: Path, remote: RemoteChromium, proxy: CutProxy, sites: LocalSites
) -> None:
    """Re-binding under the Guard: a found page now on a site it may not read → restart."""
    db = tmp_path / "keeper.db"
    targets = await run_and_kill_keeper_process(db, proxy.url, sites)
    # While no keeper runs, something drives research's page to billing.
    async with async_playwright() as pw:
        other = await pw.chromium.connect_over_cdp(f"http://127.0.0.1:{remote.port}")
        for page in other.contexts[0].pages:
            cdp = await page.context.new_cdp_session(page)
            info = await cdp.send("Target.getTargetInfo")
            if info["targetInfo"]["targetId"] == targets["research"]:
                await page.goto(sites.url("billing.example", "/invoices"))
        await other.close()
    backend = CdpBackend(proxy.url)
    async with SqliteStore(db) as store:
        keeper = new_keeper(backend, store)
        guard = Guard(keeper)
        async with keeper:
            research = await keeper.ensure("research")
            assert research.restarted and research.generation == 2
            assert [str(x) for x in research.lost] == ["tab:research"]
            assert any(b.conversation == "research" and b.path == "/invoices" for b in guard.blocks)
            billing = await keeper.ensure("billing")
            assert billing.restarted and [str(x) for x in billing.lost] == ["tab:billing"]
            assert billing.revalidate == ("billing.example",)
            assert backend.rebinds == 1 and backend.launches == 1
            assert targets["research"] not in await asyncio.to_thread(page_targets, remote)


async def test_two_keepers_on_one_browser_each_rebind_without_a_restart(
    tmp_path: Path, proxy: CutProxy, sites: LocalSites
) -> None:
    """Markers are per keeper_id: two keepers sharing a CDP browser both re-bind, no restart."""
    db = tmp_path / "keeper.db"
    first = await run_and_kill_keeper_process(db, proxy.url, sites, keeper_id="alpha")
    second = await run_and_kill_keeper_process(db, proxy.url, sites, keeper_id="beta")
    async with SqliteStore(db) as store:
        for keeper_id, targets in (("alpha", first), ("beta", second)):
            backend = CdpBackend(proxy.url)
            async with new_keeper(backend, store, keeper_id) as keeper:
                facts = await keeper.ensure("research")
                assert not facts.restarted and facts.lost == (), keeper_id
                assert backend.rebinds == 1 and backend.launches == 0
                session = backend.current
                assert session is not None
                page = await keeper.unguarded_page("research")
                assert session.target_id(page) == targets["research"]
                # Detach, as a process that dies would: the browser and its pages live on.
                await session.detach()


async def test_an_identity_saved_under_the_shared_legacy_marker_still_rebinds(
    proxy: CutProxy,
) -> None:
    """Backward compatible: a marker planted under the old shared name is found and re-bound."""
    async with async_playwright() as pw:
        other = await pw.chromium.connect_over_cdp(proxy.url)
        await other.contexts[0].add_cookies(
            [{"name": MARKER_COOKIE, "value": "0" * 32, "domain": MARKER_HOST, "path": "/"}]
        )
        await other.close()
    backend = CdpBackend(proxy.url)
    backend.serve_keeper("alpha")
    try:
        rebound = await backend.rebind(_identity("0" * 32), {})
        assert rebound is not None and backend.rebinds == 1
        assert isinstance(rebound.session, CdpSession)
        assert rebound.session.identity == _identity("0" * 32)
        jar = await rebound.session.context.cookies(f"https://{MARKER_HOST}/")
        assert {c["name"] for c in jar} == {MARKER_COOKIE, marker_cookie_name("alpha")}
    finally:
        await backend.aclose()


async def test_a_tab_moved_while_no_keeper_process_ran_is_where_the_browser_says(
    tmp_path: Path, remote: RemoteChromium, proxy: CutProxy, sites: LocalSites
) -> None:
    """A person moved a tab while no keeper process ran: the re-bound tab's URL is the one
    the browser shows, not the one the dead process saved."""
    db = tmp_path / "keeper.db"
    await run_and_kill_keeper_process(db, proxy.url, sites)
    moved = sites.url("docs.example", "/api")
    async with async_playwright() as pw:
        browser = await pw.chromium.connect_over_cdp(f"http://127.0.0.1:{remote.port}")
        (page,) = [
            p
            for c in browser.contexts
            for p in c.pages
            if p.url == sites.url("docs.example", "/guide")
        ]
        await page.goto(moved)
        await browser.close()  # only our connection: the browser lives on

    backend = CdpBackend(proxy.url)
    async with SqliteStore(db) as store, new_keeper(backend, store) as keeper:
        research = await keeper.ensure("research")
        assert not research.restarted and research.lost == ()
        assert keeper.last_verified_url("research") == moved
