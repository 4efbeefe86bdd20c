"""The keeper's own state survives our process: generations, ledger, tabs, grants, news."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from session_keeper import Durability, Grant, LoginSettings, SessionKeeper
from session_keeper._keeper.saving.sealed_rows import saved_document
from session_keeper.errors import SchemaVersionError, StoreCorrupt
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock, FakePage
from tests.keeper._saved import as_old_document, stored_rows

KEY = bytes(range(32))


def make(backend: FakeBackend, store: SqliteStore, clock: FakeClock) -> SessionKeeper[FakePage]:
    """A keeper on the shared profile and store, with a stable fingerprint key."""
    return SessionKeeper(
        backend,
        clock=clock,
        durability=Durability(store=store),
        login_settings=LoginSettings(fingerprint_key=KEY),
        grants=[Grant("billing", "billing.example"), Grant("audit", "billing.example")],
    )


async def test_new_process_continues_generations_and_reports_what_our_death_took(
    tmp_path: Path,
) -> None:
    """A second keeper on the same store tells each conversation what the first one's death took."""
    clock, backend = FakeClock(), FakeBackend()
    async with SqliteStore(tmp_path / "k.db", clock=clock) as store:
        first = make(backend, store, clock)
        await first.ensure("billing")
        await first.tab("billing", "https://billing.example/login")
        await backend.sign_in("billing.example")
        await first.record_login("billing", "billing.example")
        await first.tab("billing", "https://billing.example/invoices/7")
        await first.ensure("research")
        await first.tab("research", "https://docs.example/guide")
        await first.persist()
        # Our process dies: its browser dies with it and aclose() never runs.
        await backend.crash()

        second = make(backend, store, clock)
        async with second:
            billing = await second.ensure("billing")
            assert billing.restarted and billing.generation == 2
            assert [str(x) for x in billing.lost] == ["login:billing.example", "tab:billing"]
            assert billing.lost_tab is not None
            assert billing.lost_tab.last_url == "https://billing.example/invoices/7"
            audit = await second.ensure("audit")  # held a grant on the lost login
            assert audit.restarted and [str(x) for x in audit.lost] == ["login:billing.example"]
            research = await second.ensure("research")
            assert research.lost_tab is not None
            assert research.lost_tab.last_url == "https://docs.example/guide"
            assert not (await second.ensure("billing")).restarted
            d = second.decide("billing", "billing.example", "write", assumes_login=True)
            assert d.outcome == "stop"


async def test_clean_shutdown_keeps_a_persistent_login_across_processes(tmp_path: Path) -> None:
    """After aclose(), a persistent login survives into the next process, flagged to re-validate."""
    clock, backend = FakeClock(), FakeBackend()
    async with SqliteStore(tmp_path / "k.db", clock=clock) as store:
        async with make(backend, store, clock) as first:
            await first.ensure("billing")
            await backend.sign_in("billing.example", persistent=True)
            await first.record_login("billing", "billing.example")
        async with make(backend, store, clock) as second:
            turn = await second.ensure("billing")
            assert turn.restarted and turn.lost == () and turn.revalidate == ("billing.example",)
            assert second.decide("billing", "billing.example").needs_revalidation


async def test_spent_grants_stay_spent_across_processes(tmp_path: Path) -> None:
    """A one-time borrow used before a restart of our process is not usable after it."""
    clock, backend = FakeClock(), FakeBackend()
    async with SqliteStore(tmp_path / "k.db", clock=clock) as store:
        async with make(backend, store, clock) as first:
            await first.ensure("billing")
            await backend.sign_in("billing.example", persistent=True)
            await first.record_login("billing", "billing.example")
            first.approve_borrow("research", "billing.example", "read", approved_by="ann")
            assert first.decide("research", "billing.example").outcome == "act"
        async with make(backend, store, clock) as second:
            await second.ensure("research")
            assert second.decide("research", "billing.example").outcome == "block"


async def test_a_spent_grant_expiring_in_a_repeated_dst_hour_stays_spent_across_processes(
    tmp_path: Path,
) -> None:
    """A grant whose expiry is the second 01:30 of a DST fall-back is one grant, in UTC, forever."""
    # 2026-11-01 01:30 happens twice in New York; fold=1 is the second time (EST, UTC-5).
    fold = datetime(2026, 11, 1, 1, 30, fold=1, tzinfo=ZoneInfo("America/New_York"))
    configured = Grant("research", "billing.example", actions={"read"}, uses=1, expires_at=fold)
    assert configured.expires_at == datetime(2026, 11, 1, 6, 30, tzinfo=UTC)
    assert configured.expires_at is not None and configured.expires_at.tzinfo is UTC

    def keeper(store: SqliteStore) -> SessionKeeper[FakePage]:
        return SessionKeeper(
            backend,
            clock=clock,
            durability=Durability(store=store),
            login_settings=LoginSettings(fingerprint_key=KEY),
            grants=[Grant("billing", "billing.example"), configured],
        )

    clock, backend = FakeClock(), FakeBackend()
    async with SqliteStore(tmp_path / "k.db", clock=clock) as store:
        async with keeper(store) as first:
            await first.ensure("billing")
            await backend.sign_in("billing.example", persistent=True)
            await first.record_login("billing", "billing.example")
            await first.ensure("research")
            assert first.decide("research", "billing.example").outcome == "act"
        saved = await saved_document(store, "default")
        assert saved is not None
        expiries = [g["expires_at"] for g in saved["grants"]]
        assert expiries == [None, "2026-11-01T06:30:00+00:00"]
        async with keeper(store) as second:
            await second.ensure("research")
            assert [g.conversation for g in second.grants()] == ["billing", "research"]
            assert second.decide("research", "billing.example").outcome == "block"


async def test_no_cookie_value_reaches_the_store(tmp_path: Path) -> None:
    """The saved document and every table hold fingerprints, never the canary cookie value."""
    canary = "CANARY-cookie-value-5f1e2d"
    clock, backend = FakeClock(), FakeBackend()
    db = tmp_path / "k.db"
    async with SqliteStore(db, clock=clock) as store, make(backend, store, clock) as keeper:
        await keeper.ensure("billing")
        await backend.sign_in("billing.example", value=canary, persistent=True)
        await keeper.record_login("billing", "billing.example")
        await keeper.unguarded_page("billing", "https://billing.example/")
        clock.advance(timedelta(minutes=11))
        await keeper.sweep()
        await keeper.ensure("billing")
    assert_no_canary(tmp_path, canary)


def assert_no_canary(folder: Path, canary: str) -> None:
    """No file in ``folder`` (database, WAL, journal) contains ``canary``."""
    for path in folder.iterdir():
        assert canary.encode() not in path.read_bytes(), path


@pytest.mark.parametrize(
    ("mutate", "error"),
    [
        (lambda doc: doc.update(version=99), SchemaVersionError),
        (lambda doc: doc.update(logins=[{"site": "x"}]), StoreCorrupt),
        (lambda doc: doc.update(generation="two"), StoreCorrupt),
    ],
)
async def test_bad_keeper_document_is_refused_and_nothing_is_written(
    tmp_path: Path, mutate: object, error: type[Exception]
) -> None:
    """An unknown version or malformed document (saved before rows): a typed error, and
    the store is unchanged (not converted)."""
    clock, backend = FakeClock(), FakeBackend()
    db = tmp_path / "k.db"
    async with SqliteStore(db, clock=clock) as store, make(backend, store, clock) as keeper:
        await keeper.ensure("billing")
        await keeper.persist()
        doc = await saved_document(store, "default")
    assert doc is not None
    mutate(doc)  # type: ignore[operator]
    as_old_document(db, doc)
    con = sqlite3.connect(db)
    before = con.execute("SELECT body FROM keeper_state").fetchone()
    con.close()
    async with SqliteStore(db, clock=clock) as store:
        keeper = make(backend, store, clock)
        with pytest.raises(error):
            await keeper.ensure("billing")
        assert backend.launches == 1  # refused before any browser was started
        await keeper.aclose()
    con = sqlite3.connect(db)
    assert con.execute("SELECT body FROM keeper_state").fetchone() == before
    con.close()
    assert stored_rows(db) == []  # nothing converted


async def test_a_new_keeper_reads_back_the_generations_logins_tabs_and_grants_saved(
    tmp_path: Path,
) -> None:
    """What a keeper saved (its generations, logins by fingerprint, tabs, grants) is what
    the next keeper on the store reports, read straight from its rows."""
    clock, backend = FakeClock(), FakeBackend()
    db = tmp_path / "k.db"
    async with SqliteStore(db, clock=clock) as store, make(backend, store, clock) as keeper:
        await keeper.ensure("billing")
        await keeper.unguarded_page("billing", "https://billing.example/login")
        await backend.sign_in("billing.example")
        await keeper.record_login("billing", "billing.example")
        await keeper.persist()
    async with SqliteStore(db, clock=clock) as store, make(backend, store, clock) as keeper:
        # Opened: the saved rows are read, no browser launched yet.
        generations = [g.generation for g in keeper.generations()]
        logins = keeper.logins()
        tabs = [(t.conversation, t.last_verified_url) for t in keeper.tabs()]
        grants = keeper.grants()
    assert generations == [1]
    assert [(r.site, r.owner) for r in logins] == [("billing.example", "billing")]
    assert logins[0].cookies and all(c.name and c.fingerprint for c in logins[0].cookies)
    assert tabs == [("billing", "https://billing.example/login")]
    assert len(grants) == 2
