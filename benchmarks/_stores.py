"""The stores the scale benchmarks compare: one per size, on SQLite or on PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

from session_keeper.stores import PostgresStore, SqliteStore, Store
from session_keeper.testing import FakeClock, TemporaryPostgres


@asynccontextmanager
async def stores_per_size(
    kind: str, sizes: list[int], tmp: Path, prefix: str
) -> AsyncIterator[list[Store]]:
    """One open store per size: SQLite files in ``tmp``, or databases on one temporary
    PostgreSQL server (``kind == "postgres"``), each named ``<prefix>_<size>``."""
    async with AsyncExitStack() as stack:
        stores: list[Store] = []
        if kind == "sqlite":
            for n in sizes:
                store = SqliteStore(tmp / f"{prefix}_{n}.db", clock=FakeClock())
                stores.append(await stack.enter_async_context(store))
        else:
            pg = TemporaryPostgres()
            pg.start()
            stack.callback(pg.stop)
            for n in sizes:
                dsn = pg.create_database(f"{prefix}_{n}")
                stores.append(await stack.enter_async_context(PostgresStore(dsn)))
        yield stores
