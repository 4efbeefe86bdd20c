"""Owned writes: every durable change is written by one owner, and a failure reaches a caller."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from session_keeper import Durability, Grant, LoginSettings, SessionKeeper
from session_keeper._keeper.saving.sealed_rows import saved_document
from session_keeper._model.events import AUDIT_ENTRY_KIND
from session_keeper.errors import StoreError, UnsavedChanges
from session_keeper.security import AuditLog, Keyring, verify_audit
from session_keeper.stores import SqliteStore
from session_keeper.stores._records import Event
from session_keeper.testing import FakeBackend, FakeClock, FakePage, drain_keeper_writes

KEYS = Keyring([("k1", bytes(range(32)))])
SITE = "billing.example"


class FailNextWritesStore(SqliteStore):
    """Test double: a real SqliteStore whose next ``n`` writes fail (a full disk, a dropped
    connection). Writes are keeper-state saves and event appends (the audit chain)."""

    def __init__(self, path: Path, clock: FakeClock) -> None:
        super().__init__(path, clock=clock)
        self.failures_left = 0
        self.only: str | None = None
        self.failed: list[str] = []

    def fail_next(self, n: int, only: str | None = None) -> None:
        """Make the next ``n`` writes (of method ``only``, when given) raise."""
        self.failures_left = n
        self.only = only

    def _maybe_fail(self, what: str) -> None:
        if self.failures_left > 0 and self.only in (None, what):
            self.failures_left -= 1
            self.failed.append(what)
            raise StoreError("disk full")

    async def save_keeper_rows(self, keeper_id: str, **batch: Any) -> None:
        self._maybe_fail("save_keeper_rows")
        await super().save_keeper_rows(keeper_id, **batch)

    async def append_event(self, event: Event) -> None:
        self._maybe_fail("append_event")
        await super().append_event(event)

    async def append_events(self, events: Sequence[Event]) -> list[Event]:
        self._maybe_fail("append_events")
        return await super().append_events(events)


def make(
    backend: FakeBackend, store: SqliteStore, clock: FakeClock, *, audit: bool = True
) -> SessionKeeper[FakePage]:
    """A keeper on ``store`` with an audit chain: billing owns billing.example."""
    return SessionKeeper(
        backend,
        clock=clock,
        durability=Durability(
            store=store, audit=AuditLog(store, KEYS, clock=clock) if audit else None
        ),
        login_settings=LoginSettings(fingerprint_key=bytes(32)),
        grants=[Grant("billing", SITE)],
    )


async def sign_in(keeper: SessionKeeper[FakePage], backend: FakeBackend) -> None:
    """billing signs in to billing.example with a persistent cookie."""
    await keeper.ensure("billing")
    await keeper.unguarded_page("billing", f"https://{SITE}/login")
    await backend.sign_in(SITE, persistent=True)
    await keeper.record_login("billing", SITE)


async def audit_types(store: SqliteStore) -> list[str]:
    """The audit chain's entry types, oldest first."""
    return [str(e.data["type"]) for e in await store.events(kind=AUDIT_ENTRY_KIND, limit=1000)]


async def test_a_failed_background_write_reaches_the_next_call_and_nothing_is_dropped(
    tmp_path: Path,
) -> None:
    """Two failed writes: the next awaited call raises, every change and audit entry lands later."""
    clock, backend = FakeClock(), FakeBackend()
    async with FailNextWritesStore(tmp_path / "k.db", clock) as store:
        keeper = make(backend, store, clock)
        async with keeper:
            await sign_in(keeper, backend)
            await keeper.persist()
            store.fail_next(2)
            keeper.approve_borrow("research", SITE, "write", approved_by="alice")
            await drain_keeper_writes(keeper)  # the owner's write ran (and failed)
            assert keeper.unsaved
            with pytest.raises(UnsavedChanges) as raised:
                await keeper.ensure("research")
            assert isinstance(raised.value.__cause__, UnsavedChanges | StoreError)
            assert keeper.unsaved  # kept, not dropped
            assert keeper.decide("research", SITE, "write").outcome == "act"
            await drain_keeper_writes(keeper)
            with pytest.raises(UnsavedChanges):
                await keeper.persist()  # told once, before anything is written
            await keeper.persist()  # the store is back: everything is written
            assert not keeper.unsaved
        assert len(store.failed) == 2
        types = await audit_types(store)
        assert types[-2:] == ["borrow_approved", "decision"]
        assert keeper.audit is not None
        assert await verify_audit(store, KEYS, expected_head=keeper.audit.head) == len(types)
        # The next process sees the borrow, spent.
        async with make(backend, store, clock) as second:
            await second.ensure("research")
            assert [g.approved_by for g in second.grants()] == [None, "alice"]
            assert second.decide("research", SITE, "write").outcome == "block"


async def test_an_audit_entry_leaves_its_queue_only_once_written(tmp_path: Path) -> None:
    """A failed append keeps the approval queued, in order; the retry writes the whole chain."""
    clock, backend = FakeClock(), FakeBackend()
    async with FailNextWritesStore(tmp_path / "k.db", clock) as store:
        keeper = make(backend, store, clock)
        async with keeper:
            await sign_in(keeper, backend)
            await keeper.persist()
            before = await audit_types(store)
            store.fail_next(1, only="append_events")
            keeper.approve_borrow("research", SITE, "read", approved_by="alice")
            keeper.revoke("research", SITE)
            await drain_keeper_writes(keeper)
            with pytest.raises(UnsavedChanges):
                await keeper.persist()
            assert store.failed == ["append_events"]
            await keeper.persist()
            assert keeper.audit is not None
            head = keeper.audit.head
        assert await audit_types(store) == [*before, "borrow_approved", "grants_revoked"]
        assert await verify_audit(store, KEYS, expected_head=head) == len(before) + 2


async def test_persist_raises_while_anything_is_unsaved(tmp_path: Path) -> None:
    """A store that keeps failing: persist() raises every time, and the change is still there."""
    clock, backend = FakeClock(), FakeBackend()
    async with (
        FailNextWritesStore(tmp_path / "k.db", clock) as store,
        make(backend, store, clock, audit=False) as keeper,
    ):
        await keeper.ensure("billing")
        await keeper.persist()
        store.fail_next(100)
        keeper.grant(Grant("research", SITE, actions={"read"}))
        for _ in range(3):
            with pytest.raises(UnsavedChanges):
                await keeper.persist()
            assert keeper.unsaved
        store.fail_next(0)
        await keeper.persist()
        assert not keeper.unsaved
        saved = await saved_document(store, "default")
        assert saved is not None
        assert [g["conversation"] for g in saved["grants"]] == ["billing", "research"]


async def test_a_background_failure_is_reported_by_aclose(tmp_path: Path) -> None:
    """Closing still closes and writes everything; a failure nobody heard of is raised there."""
    clock, backend = FakeClock(), FakeBackend()
    async with FailNextWritesStore(tmp_path / "k.db", clock) as store:
        keeper = make(backend, store, clock, audit=False)
        await keeper.__aenter__()
        await keeper.ensure("billing")
        store.fail_next(1)
        keeper.grant(Grant("research", SITE, actions={"read"}))
        await drain_keeper_writes(keeper)
        with pytest.raises(UnsavedChanges, match="since been written"):
            await keeper.aclose()
        assert keeper.closed and not keeper.unsaved
        saved = await saved_document(store, "default")
        assert saved is not None
        assert len(saved["grants"]) == 2


async def test_a_change_made_with_no_running_loop_is_written_by_the_next_awaited_call(
    tmp_path: Path,
) -> None:
    """grant() from a thread with no event loop: the next ensure() writes it before answering."""
    clock, backend = FakeClock(), FakeBackend()
    async with (
        FailNextWritesStore(tmp_path / "k.db", clock) as store,
        make(backend, store, clock, audit=False) as keeper,
    ):
        await keeper.ensure("billing")
        await asyncio.to_thread(keeper.grant, Grant("research", SITE, actions={"read"}))
        assert keeper.unsaved
        await keeper.ensure("billing")  # the alive path
        assert not keeper.unsaved
        saved = await saved_document(store, "default")
        assert saved is not None
        assert len(saved["grants"]) == 2


async def test_a_human_takeover_is_saved_and_survives_a_restart_of_our_process(
    tmp_path: Path,
) -> None:
    """begin_takeover() and end_takeover() are durable: a new process does not sweep a takeover."""
    clock, backend = FakeClock(), FakeBackend()
    async with FailNextWritesStore(tmp_path / "k.db", clock) as store:
        async with make(backend, store, clock, audit=False) as first:
            await first.ensure("billing")
            first.begin_takeover("billing", expires_in=timedelta(hours=1))
            await drain_keeper_writes(first)
            assert not first.unsaved
        async with make(backend, store, clock, audit=False) as second:
            await second.ensure("billing")
            clock.advance(timedelta(minutes=11))
            assert (await second.sweep()).closed_browser is None  # the person still drives
            second.end_takeover("billing")
            await drain_keeper_writes(second)
            assert not second.unsaved
        async with make(backend, store, clock, audit=False) as third:
            await third.ensure("billing")
            clock.advance(timedelta(minutes=11))
            assert (await third.sweep()).closed_browser is not None


async def test_ensure_alive_path_writes_nothing_when_nothing_changed(tmp_path: Path) -> None:
    """After everything is saved, turns on a live browser cost no store write."""
    clock, backend = FakeClock(), FakeBackend()
    async with (
        FailNextWritesStore(tmp_path / "k.db", clock) as store,
        make(backend, store, clock) as keeper,
    ):
        await keeper.ensure("billing")
        await keeper.persist()
        store.fail_next(1)  # any write now would fail the turn
        for _ in range(3):
            await keeper.ensure("billing")
        assert store.failed == []
        store.fail_next(0)


async def test_a_failed_background_write_reaches_a_tab_call_on_an_open_tab(
    tmp_path: Path,
) -> None:
    """The turn's quick path (an open tab, nobody queued) still reports a failed write first."""
    clock, backend = FakeClock(), FakeBackend()
    async with FailNextWritesStore(tmp_path / "k.db", clock) as store:
        keeper = make(backend, store, clock)
        async with keeper:
            await sign_in(keeper, backend)
            page = await keeper.unguarded_page("billing")
            await keeper.persist()
            store.fail_next(1)
            keeper.approve_borrow("research", SITE, "write", approved_by="alice")
            await drain_keeper_writes(keeper)  # the owner's write ran (and failed)
            with pytest.raises(UnsavedChanges):
                await keeper.unguarded_page("billing")
            assert await keeper.unguarded_page("billing") is page  # told once; same tab
