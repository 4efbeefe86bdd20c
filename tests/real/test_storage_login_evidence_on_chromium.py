"""Logins kept in web storage, through the keeper on real Chromium, with the site's own log
(which account it served each API call as) as the truth: recorded on the token's evidence,
measured after restarts, guarded, and deleted by the idle sweep."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page

from session_keeper import Durability, Grant, Guard, LoginSettings, SessionKeeper
from session_keeper.errors import LoginNotObserved, NavigationBlocked
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeClock, LocalSites
from session_keeper.testing._login_sites import SHAPE_PASSWORD, SPA_TOKEN_KEY

from ..conftest import BackendFactory, shared_driver_backend, sigkill

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = pytest.mark.chromium

KEY = bytes(range(32))
SPA = "spa.example"
SPA_SESSION = "spa-session.example"


def spa_keeper(backend: Any, clock: FakeClock | None = None, **kw: Any) -> SessionKeeper[Page]:
    """A keeper where conversation ``spa`` may read and write both single-page apps."""
    kw.setdefault("login_settings", LoginSettings(fingerprint_key=KEY))
    grants = [Grant("spa", site, actions={"read", "write"}) for site in (SPA, SPA_SESSION)]
    return SessionKeeper(backend, clock=clock or FakeClock(), grants=grants, **kw)


async def spa_sign_in(
    keeper: SessionKeeper[Page], sites: LocalSites, host: str, password: str = SHAPE_PASSWORD
) -> Page:
    """The person signs in through the app's script in the conversation's own page."""
    page = await keeper.unguarded_page("spa", sites.url(host, "/login"))
    await page.fill("input[name=username]", "alice")
    await page.fill("input[name=password]", password)
    if password != SHAPE_PASSWORD:
        await page.click("button[type=submit]")
        await page.wait_for_function("document.getElementById('error').textContent !== ''")
        return page
    async with page.expect_navigation():
        await page.click("button[type=submit]")
    assert await app_account(page) == "alice"  # the premise: signed in
    return page


async def app_account(page: Page) -> str | None:
    """What the app's /app page shows once its API call was answered."""
    await page.wait_for_function("document.getElementById('account').textContent !== '...'")
    return await page.text_content("#account")


async def site_says(keeper: SessionKeeper[Page], sites: LocalSites, host: str) -> str | None:
    """Which account the site serves /app's API call as now (its own log, not the page)."""
    mark = len(sites.served(host))
    page = await keeper.unguarded_page("spa", sites.url(host, "/app"))
    await app_account(page)
    served = [a for path, a in sites.served(host)[mark:] if path == "/api/whoami"]
    assert len(served) == 1
    return served[0]


async def token_of(keeper: SessionKeeper[Page], sites: LocalSites, host: str) -> str:
    """The token the site issued, read from the browser (the canary a test searches for)."""
    page = await keeper.unguarded_page("spa")
    area = "localStorage" if host == SPA else "sessionStorage"
    token = await page.evaluate(f"() => {area}.getItem('{SPA_TOKEN_KEY}')")
    assert isinstance(token, str) and len(token) > 20
    return token


def files_hold(directory: Path, pattern: str, secret: str) -> bool:
    """Whether any file matching ``pattern`` (the store, its WAL) holds ``secret``'s bytes."""
    files = list(directory.glob(pattern))
    assert files  # the premise: the store wrote something
    return any(secret.encode() in f.read_bytes() for f in files)


async def test_an_spa_sign_in_is_recorded_on_its_storage_token_whose_value_is_kept_nowhere(
    playwright_backend: BackendFactory,
    sites: LocalSites,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No cookie at all: the token that appeared in localStorage since begin_login() is the
    evidence; the record, the store file, the events and the logs hold no byte of it."""
    caplog.set_level(logging.DEBUG, logger="session_keeper")
    store = SqliteStore(tmp_path / "keeper.db")
    keeper = spa_keeper(playwright_backend(), durability=Durability(store=store))
    async with store, keeper:
        await keeper.ensure("spa")
        await keeper.begin_login("spa", SPA)  # before the first visit: nothing there yet
        await spa_sign_in(keeper, sites, SPA)
        record = await keeper.record_login("spa", SPA, account="alice")
        assert record.cookies == ()
        assert [(i.area, i.key) for i in record.storage] == [("local", SPA_TOKEN_KEY)]
        assert keeper.decide("spa", SPA, "write", assumes_login=True).outcome == "act"
        token = await token_of(keeper, sites, SPA)
        events = [repr(e) for e in await store.events()]
    assert token not in repr(record)
    assert not any(token in e for e in events)
    assert token not in caplog.text
    assert not files_hold(tmp_path, "keeper.db*", token)


async def test_a_failed_spa_sign_in_records_nothing(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """A wrong password leaves no token (the app shows its error): nothing is recorded,
    and the site's word is that it served nobody."""
    async with spa_keeper(playwright_backend()) as keeper:
        await keeper.ensure("spa")
        mark = len(sites.served(SPA))
        await keeper.begin_login("spa", SPA)
        await spa_sign_in(keeper, sites, SPA, password="wrong password")
        with pytest.raises(LoginNotObserved):
            await keeper.record_login("spa", SPA, account="alice")
        assert keeper.logins() == ()
        assert {a for _, a in sites.served(SPA)[mark:]} == {None}


async def test_a_clean_restart_keeps_a_localstorage_login_and_loses_a_sessionstorage_one(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """Closed cleanly, the localStorage token is there again (re-validate, and the site serves
    alice); the sessionStorage one went with its tab (told lost; the site serves nobody)."""
    backend = playwright_backend()
    async with spa_keeper(backend) as keeper:
        await keeper.ensure("spa")
        for host in (SPA, SPA_SESSION):
            await keeper.begin_login("spa", host)
            await spa_sign_in(keeper, sites, host)
            await keeper.record_login("spa", host, account="alice")
        assert backend.current is not None
        await backend.current.close()
        turn = await keeper.ensure("spa")
        assert turn.restarted
        assert turn.revalidate == (SPA,)
        assert [str(x) for x in turn.lost_logins] == [f"login:{SPA_SESSION}"]
        assert await site_says(keeper, sites, SPA) == "alice"
        assert await site_says(keeper, sites, SPA_SESSION) is None


async def test_after_a_sigkill_the_keeper_believes_what_the_site_serves(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """Chromium writes localStorage to the profile lazily, so a SIGKILL may or may not take
    the token: whichever it did, the keeper's verdict matches the site's own word."""
    backend = playwright_backend()
    async with spa_keeper(backend) as keeper:
        await keeper.ensure("spa")
        await keeper.begin_login("spa", SPA)
        await spa_sign_in(keeper, sites, SPA)
        await keeper.record_login("spa", SPA, account="alice")
        await sigkill(backend.current)
        turn = await keeper.ensure("spa")
        assert turn.restarted
        believed = SPA in turn.revalidate
        assert believed != any(str(x) == f"login:{SPA}" for x in turn.lost_logins)
        assert (await site_says(keeper, sites, SPA) == "alice") == believed


async def test_a_conversation_without_a_grant_cannot_reach_a_storage_login(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """The token is in the profile for every tab of the origin: a conversation with no grant
    is refused the app's pages, so the site never serves it as alice."""
    keeper = spa_keeper(playwright_backend())
    guard = Guard(keeper)
    async with keeper:
        await keeper.ensure("spa")
        await keeper.begin_login("spa", SPA)
        await spa_sign_in(keeper, sites, SPA)
        await keeper.record_login("spa", SPA, account="alice")
        mark = len(sites.served(SPA))
        await keeper.ensure("research")
        with pytest.raises(NavigationBlocked):
            await keeper.tab("research", sites.url(SPA, "/app"))
        assert [a for _, a in sites.served(SPA)[mark:]] == []
        assert guard.blocks


async def test_the_idle_sweep_deletes_an_spa_token_from_the_profile(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """By default a swept profile holds no live credential: the localStorage token is gone
    from the relaunched profile too, and the site serves it nobody."""
    clock = FakeClock()
    backend = playwright_backend()
    async with spa_keeper(backend, clock) as keeper:
        await keeper.ensure("spa")
        await keeper.begin_login("spa", SPA)
        await spa_sign_in(keeper, sites, SPA)
        await keeper.record_login("spa", SPA, account="alice")
        clock.advance(timedelta(minutes=11))
        report = await keeper.sweep()
        assert report.closed_browser is not None
    relaunched = playwright_backend(backend.profile_dir)
    session = await relaunched.launch()
    origin = sites.url(SPA).rstrip("/")
    assert list(await session.storage(origin)) == []
    page = await session.open_page("spa")
    mark = len(sites.served(SPA))
    await page.goto(sites.url(SPA, "/app"))
    assert await app_account(page) == "signed out"
    assert [a for p, a in sites.served(SPA)[mark:] if p == "/api/whoami"] == [None]


SPA_IDB = "spa-idb.example"


def idb_keeper(backend: Any, clock: FakeClock | None = None) -> SessionKeeper[Page]:
    """A keeper where conversation ``spa`` may read and write the IndexedDB app."""
    return SessionKeeper(
        backend,
        clock=clock or FakeClock(),
        login_settings=LoginSettings(fingerprint_key=KEY),
        grants=[Grant("spa", SPA_IDB, actions={"read", "write"})],
    )


async def test_an_indexeddb_token_is_the_evidence_and_survives_a_clean_close(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """The app keeps its token in IndexedDB (database auth, store tokens): that record is
    the login's evidence, and after a clean close it is there again (re-validate) and the
    site serves alice."""
    backend = playwright_backend()
    async with idb_keeper(backend) as keeper:
        await keeper.ensure("spa")
        await keeper.begin_login("spa", SPA_IDB)
        await spa_sign_in(keeper, sites, SPA_IDB)
        record = await keeper.record_login("spa", SPA_IDB, account="alice")
        assert record.cookies == ()
        assert [(i.area, i.key) for i in record.storage] == [
            ("indexeddb", f'auth/tokens/"{SPA_TOKEN_KEY}"')
        ]
        assert backend.current is not None
        await backend.current.close()
        turn = await keeper.ensure("spa")
        assert turn.restarted and turn.revalidate == (SPA_IDB,)
        assert await site_says(keeper, sites, SPA_IDB) == "alice"


async def test_the_idle_sweep_deletes_an_indexeddb_token_from_the_profile(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """The swept profile holds no IndexedDB token either: relaunched, the read finds
    nothing of the origin and the app is served signed out."""
    clock = FakeClock()
    backend = playwright_backend()
    async with idb_keeper(backend, clock) as keeper:
        await keeper.ensure("spa")
        await keeper.begin_login("spa", SPA_IDB)
        await spa_sign_in(keeper, sites, SPA_IDB)
        await keeper.record_login("spa", SPA_IDB, account="alice")
        clock.advance(timedelta(minutes=11))
        assert (await keeper.sweep()).closed_browser is not None
    session = await playwright_backend(backend.profile_dir).launch()
    assert list(await session.storage(sites.url(SPA_IDB).rstrip("/"))) == []
    page = await session.open_page("spa")
    mark = len(sites.served(SPA_IDB))
    await page.goto(sites.url(SPA_IDB, "/app"))
    assert await app_account(page) == "signed out"
    assert [a for p, a in sites.served(SPA_IDB)[mark:] if p == "/api/whoami"] == [None]
