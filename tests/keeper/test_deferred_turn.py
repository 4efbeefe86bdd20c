"""``ensure(turn=..., defer_quiet_write=True)``: a new turn with nothing to tell rides on
the caller's next write (one write per engine step), a turn with news is written before
it is told, as always."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from session_keeper import Durability, LoginSettings, SessionKeeper
from session_keeper.errors import InvalidArgumentType
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock, FakePage

KEY = bytes(range(32))
CONV = "walker"
URL = "https://docs.example/guide/2"


class RecordingStore(SqliteStore):
    """A SqliteStore that counts the batches of keeper rows it writes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.batches = 0

    async def save_keeper_rows(self, keeper_id: str, **batch: Any) -> None:
        self.batches += 1
        await super().save_keeper_rows(keeper_id, **batch)


def _keeper(backend: FakeBackend, store: SqliteStore, clock: FakeClock) -> SessionKeeper[FakePage]:
    return SessionKeeper(
        backend,
        clock=clock,
        durability=Durability(store=store),
        login_settings=LoginSettings(fingerprint_key=KEY),
    )


async def test_a_quiet_deferred_turn_is_written_once_with_the_steps_verified_url(
    tmp_path: Path,
) -> None:
    """A quiet turn asked to defer writes nothing before it is told; the step's own write
    (mark_verified, persist) stores the turn and the URL in one batch, and a new process
    re-executing that turn is told the same facts and reopens the tab there."""
    clock, backend = FakeClock(), FakeBackend()
    async with RecordingStore(tmp_path / "k.db", clock=clock) as store:
        first = _keeper(backend, store, clock)
        await first.ensure(CONV, turn="t1")
        await first.unguarded_page(CONV, "https://docs.example/guide/1")
        await first.persist()
        before = store.batches
        told = await first.ensure(CONV, turn="t2", defer_quiet_write=True)
        assert not told.restarted and not told.lost and not told.first_turn
        assert store.batches == before  # nothing written before the step
        await first.unguarded_page(CONV, URL)
        first.mark_verified(CONV)
        await first.persist()
        assert store.batches == before + 1  # the turn and the verified URL, together
        await backend.crash()  # the process dies after the step's write
        second = _keeper(backend, store, clock)
        async with second:
            assert await second.ensure(CONV, turn="t2") == told  # the stored turn
            later = await second.ensure(CONV, turn="t3")
            assert later.restarted and later.lost_tab is not None
            assert later.lost_tab.last_url == URL


async def test_a_turn_with_news_is_written_before_it_is_told_though_deferral_was_asked(
    tmp_path: Path,
) -> None:
    """The browser died and another conversation's turn relaunched it: this
    conversation's next turn, asked to defer, is still written before ensure returns (the
    restart must never be told twice)."""
    clock, backend = FakeClock(), FakeBackend()
    async with RecordingStore(tmp_path / "k.db", clock=clock) as store:
        keeper = _keeper(backend, store, clock)
        async with keeper:
            await keeper.ensure(CONV, turn="t1")
            await keeper.unguarded_page(CONV, URL)
            await keeper.persist()
            session = backend.current
            assert session is not None
            await session.kill()
            await keeper.ensure("other", turn="o1")  # relaunches: CONV's news now waits
            before = store.batches
            told = await keeper.ensure(CONV, turn="t2", defer_quiet_write=True)
            assert told.restarted
            assert store.batches > before
            assert not keeper.unsaved
            with pytest.raises(InvalidArgumentType):
                await keeper.ensure(CONV, turn="t3", defer_quiet_write="yes")  # type: ignore[arg-type]
