"""Pool fixtures: fake browsers, a fake clock, a SQLite store in a temporary file."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock


@pytest.fixture
def clock() -> FakeClock:
    """The clock the store (lease expiry) and the keepers read."""
    return FakeClock()


@pytest.fixture
def backends(clock: FakeClock) -> dict[str, FakeBackend]:
    """Four fake profiles, p0..p3."""
    return {f"p{i}": FakeBackend(clock=clock) for i in range(4)}


@pytest.fixture
async def store(tmp_path: Path, clock: FakeClock) -> AsyncIterator[SqliteStore]:
    """An opened SQLite store on the fake clock."""
    async with SqliteStore(tmp_path / "pool.db", clock=clock) as opened:
        yield opened
