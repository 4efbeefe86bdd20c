"""The keeper's saved state: told facts survive failed saves, grants load once and whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from session_keeper import Durability, Grant, LoginSettings, SessionKeeper
from session_keeper.errors import StoreCorrupt, StoreError
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock, FakePage
from tests.keeper._saved import rewrite_row

KEY = bytes(range(32))
SITE = "billing.example"


class FailingSaveStore(SqliteStore):
    """A SqliteStore whose next save_keeper_rows fails (a full disk, a dropped connection)."""

    fail_next_save = False

    async def save_keeper_rows(self, keeper_id: str, **batch: Any) -> None:
        if self.fail_next_save:
            self.fail_next_save = False
            raise StoreError("disk full")
        await super().save_keeper_rows(keeper_id, **batch)


async def test_restart_facts_survive_a_failed_save_and_are_told_on_the_next_ensure(
    tmp_path: Path,
) -> None:
    """If ensure() raises because its save failed, the restart must still be reported later."""
    clock, backend = FakeClock(), FakeBackend()
    async with (
        FailingSaveStore(tmp_path / "k.db", clock=clock) as store,
        SessionKeeper(
            backend,
            clock=clock,
            durability=Durability(store=store),
            login_settings=LoginSettings(fingerprint_key=KEY),
        ) as keeper,
    ):
        await keeper.ensure("a")
        await keeper.ensure("b")
        await keeper.unguarded_page("b", "https://docs.example/guide")
        await backend.crash()
        await keeper.ensure("a")  # relaunch; b is owed "restarted, lost tab:b"
        await keeper.persist()  # no background save left to absorb the failure
        store.fail_next_save = True
        with pytest.raises(StoreError):
            await keeper.ensure("b")
        again = await keeper.ensure("b")
        assert again.restarted, "b was never told the browser restarted"
        assert [str(x) for x in again.lost] == ["tab:b"]


async def test_configured_grants_are_not_duplicated_by_each_restart_of_our_process(
    tmp_path: Path,
) -> None:
    """Restoring saved grants next to the configured ones must not multiply them per process."""
    clock, backend = FakeClock(), FakeBackend()
    async with SqliteStore(tmp_path / "k.db", clock=clock) as store:
        for _ in range(3):
            keeper = SessionKeeper(
                backend,
                clock=clock,
                durability=Durability(store=store),
                login_settings=LoginSettings(fingerprint_key=KEY),
                grants=[Grant("billing", SITE)],
            )
            async with keeper:
                await keeper.ensure("billing")
        assert len(keeper.grants()) == 1, keeper.grants()


async def test_a_configured_one_use_grant_spent_before_a_process_restart_stays_spent(
    tmp_path: Path,
) -> None:
    """A uses=1 grant acted on in process 1 must not grant again in process 2."""
    clock, backend = FakeClock(), FakeBackend()

    def make(store: SqliteStore) -> SessionKeeper[FakePage]:
        return SessionKeeper(
            backend,
            clock=clock,
            durability=Durability(store=store),
            login_settings=LoginSettings(fingerprint_key=KEY),
            grants=[Grant("billing", SITE, actions={"write"}, uses=1)],
        )

    async with SqliteStore(tmp_path / "k.db", clock=clock) as store:
        async with make(store) as first:
            await first.ensure("billing")
            await backend.sign_in(SITE, persistent=True)
            await first.record_login("billing", SITE)
            assert first.decide("billing", SITE, "write").outcome == "act"
        async with make(store) as second:
            await second.ensure("billing")
            second.confirm_login("billing", SITE)
            assert second.decide("billing", SITE, "write").outcome != "act"


async def test_a_saved_grant_the_new_config_refuses_changes_nothing(tmp_path: Path) -> None:
    """Loading a document that fails half way (unknown action) must leave the keeper unchanged."""
    clock, backend = FakeClock(), FakeBackend()
    async with SqliteStore(tmp_path / "k.db", clock=clock) as store:
        wide = SessionKeeper(
            backend,
            clock=clock,
            durability=Durability(store=store),
            login_settings=LoginSettings(fingerprint_key=KEY),
            actions={"read", "write", "admin"},
            grants=[
                Grant("billing", SITE, actions={"read"}),
                Grant("ops", SITE, actions={"admin"}),
            ],
        )
        async with wide:
            await wide.ensure("billing")
        narrow = SessionKeeper(
            backend,
            clock=clock,
            durability=Durability(store=store),
            login_settings=LoginSettings(fingerprint_key=KEY),
        )
        for _ in range(2):
            with pytest.raises(ValueError, match="unknown action"):
                await narrow.ensure("billing")
        # Nothing may have been applied: no generation, no half-restored grants.
        assert (narrow.generation, narrow.grants()) == (0, ())
        await narrow.aclose()


async def test_a_tampered_pending_generation_is_refused_as_corrupt(tmp_path: Path) -> None:
    """A non-int since_generation in a saved row (its digest recomputed) must raise
    StoreCorrupt, not load."""
    clock, backend = FakeClock(), FakeBackend()
    db = tmp_path / "k.db"
    async with SqliteStore(db, clock=clock) as store:
        async with SessionKeeper(
            backend,
            clock=clock,
            durability=Durability(store=store),
            login_settings=LoginSettings(fingerprint_key=KEY),
        ) as k:
            await k.ensure("b")
            await k.tab("b", "https://docs.example/")
            await backend.crash()
            await k.ensure("a")  # b is owed a restart

        def tamper(body: dict[str, Any]) -> None:
            body["pending"]["since_generation"] = "two"

        rewrite_row(db, "conversation", "b", tamper)
        fresh = SessionKeeper(
            backend,
            clock=clock,
            durability=Durability(store=store),
            login_settings=LoginSettings(fingerprint_key=KEY),
        )
        try:
            with pytest.raises(StoreCorrupt):
                await fresh.ensure("b")
        finally:
            await fresh.aclose()


class CountingStore(SqliteStore):
    """A SqliteStore that counts the keeper-document writes it is asked for."""

    saves = 0

    async def save_keeper_rows(self, keeper_id: str, **batch: Any) -> None:
        self.saves += 1
        await super().save_keeper_rows(keeper_id, **batch)


async def test_conversations_told_of_one_restart_at_once_share_the_keepers_writes(
    tmp_path: Path,
) -> None:
    """Many ensure() calls meeting one restart save together, and every one is told durably."""
    import asyncio

    clock, backend = FakeClock(), FakeBackend()
    names = [f"agent-{n}" for n in range(40)]
    async with CountingStore(tmp_path / "k.db", clock=clock) as store:
        async with SessionKeeper(
            backend,
            clock=clock,
            durability=Durability(store=store),
            login_settings=LoginSettings(fingerprint_key=KEY),
        ) as keeper:
            for n, name in enumerate(names):
                await keeper.ensure(name)
                await keeper.unguarded_page(name, f"https://docs.example/{n}")
            await keeper.persist()
            await backend.crash()
            store.saves = 0
            told = await asyncio.gather(*(keeper.ensure(name) for name in names))
            # One write per conversation was the cost before: each snapshot of the whole
            # document waited for the previous one. Writes now carry every caller so far:
            # two or three on a quiet machine; how the callers' arrivals spread (a loaded
            # machine made it four) must not fail the test, 40 would.
            assert store.saves <= len(names) // 4, store.saves
            assert all(t.restarted for t in told)
            assert [str(t.lost_tab) for t in told] == [f"tab:{name}" for name in names]
        # Each fact was stored before it was told: a new process owes nobody anything.
        async with SessionKeeper(
            FakeBackend(),
            clock=clock,
            durability=Durability(store=store),
            login_settings=LoginSettings(fingerprint_key=KEY),
        ) as again:
            for name in names:
                facts = await again.ensure(name)
                assert not facts.restarted or facts.previous_generation != 1, facts
