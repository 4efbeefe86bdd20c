"""A keeper process SIGKILLed at every statement boundary of a batched save loses and
duplicates nothing, on SQLite and PostgreSQL.

The saved state (40 conversations with tabs) is reopened by a forked child whose first
``ensure(turn=...)`` writes one batch: every conversation told of the previous process's
death, the turn, the generations, the projections. The child is killed (SIGKILL) just
before each statement of that batch, before its ``COMMIT`` and after it. The parent then
reopens the store: the rows verify against their head (none lost, none extra), and the
saved state is exactly the one before the batch (killed before ``COMMIT`` returned) or
exactly the one after it (killed after).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from session_keeper import Durability, SessionKeeper
from session_keeper._keeper.saving.sealed_rows import saved_document, state_of
from session_keeper.stores import PostgresStore, SqliteStore, Store
from session_keeper.testing import (
    FakeBackend,
    FakeClock,
    FakePage,
    TemporaryPostgres,
    watch_store_statements,
)

CONVERSATIONS = 40
_FORK = multiprocessing.get_context("fork")


def _store(kind: str, location: str) -> Store:
    if kind == "sqlite":
        return SqliteStore(location, clock=FakeClock())
    return PostgresStore(location, clock=FakeClock())


async def _prepare(kind: str, location: str) -> None:
    clock = FakeClock()
    async with _store(kind, location) as store:
        keeper: SessionKeeper[FakePage] = SessionKeeper(
            FakeBackend(clock=clock), clock=clock, durability=Durability(store=store)
        )
        async with keeper:
            for i in range(CONVERSATIONS):
                await keeper.ensure(f"c{i}", turn="t0")
                await keeper.unguarded_page(f"c{i}", f"https://docs.example/{i}")
            await keeper.persist()


async def _the_batch(
    kind: str, location: str, crash_at: int | None, seen: list[str]
) -> dict[str, Any] | None:
    """Reopen the keeper and write the batch (killed at point ``crash_at``); the saved
    state once it committed."""
    clock = FakeClock()
    calls = 0

    def hook(label: str) -> None:
        nonlocal calls
        seen.append(label)
        if crash_at is not None and calls == crash_at:
            os.kill(os.getpid(), signal.SIGKILL)
        calls += 1

    async with _store(kind, location) as store:
        keeper: SessionKeeper[FakePage] = SessionKeeper(
            FakeBackend(clock=clock), clock=clock, durability=Durability(store=store)
        )
        async with keeper:  # loading reads only
            watch_store_statements(store, hook)
            await keeper.ensure("c1", turn="t1")
            watch_store_statements(store, None)
            return await _saved(store)


def _child(kind: str, location: str, crash_at: int) -> None:
    asyncio.run(_the_batch(kind, location, crash_at, []))
    os._exit(3)  # crash_at was past the last point


async def _saved(store: Store) -> dict[str, Any] | None:
    """The saved state, once its rows verified against their head (none lost, none extra,
    none torn: else SealBroken / StoreCorrupt)."""
    saved = await store.load_keeper_rows("default")
    if saved is not None:
        state_of("default", saved, None)
    return await saved_document(store, "default")


async def _saved_at(kind: str, location: str) -> dict[str, Any] | None:
    async with _store(kind, location) as store:
        return await _saved(store)


def _kill_at_every_point(kind: str, fresh: Any) -> None:
    before_location = fresh("before")
    asyncio.run(_prepare(kind, before_location))
    before = asyncio.run(_saved_at(kind, before_location))
    after_location = fresh("after")
    asyncio.run(_prepare(kind, after_location))
    labels: list[str] = []
    after = asyncio.run(_the_batch(kind, after_location, None, labels))
    assert labels[:2] == ["upsert_keeper_head", "upsert_keeper_rows"]
    assert labels[-2:] == ["COMMIT", "COMMITTED"]
    assert before != after
    for index, label in enumerate(labels):
        location = fresh(f"kill-{index}")
        asyncio.run(_prepare(kind, location))
        child = _FORK.Process(target=_child, args=(kind, location, index))
        child.start()
        child.join(120)
        assert child.exitcode == -signal.SIGKILL, f"{label}: exit {child.exitcode}"
        expected = after if label == "COMMITTED" else before
        assert asyncio.run(_saved_at(kind, location)) == expected, label


def test_sqlite_keeper_batch_survives_sigkill_at_every_statement(tmp_path: Path) -> None:
    """SQLite: before COMMIT returned the old rows are whole; after it, the new ones."""
    _kill_at_every_point("sqlite", lambda name: str(tmp_path / f"{name}.db"))


@pytest.mark.postgres
def test_postgres_keeper_batch_survives_sigkill_at_every_statement(
    pg_server: TemporaryPostgres,
) -> None:
    """PostgreSQL: the same, with the batch's rows written by executemany."""
    _kill_at_every_point("postgres", lambda name: pg_server.create_database())
