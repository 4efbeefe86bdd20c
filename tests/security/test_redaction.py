"""Tokens and passwords in URLs never reach the store."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from session_keeper import Durability, LoginSettings, SessionKeeper
from session_keeper.security import Keyring
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock

KEY = bytes(range(32))
KEYS = Keyring([("k1", bytes(range(32)))])
SITE = "billing.example"


async def test_a_token_in_a_tab_url_does_not_reach_the_store(tmp_path: Path) -> None:
    """A magic-link / OAuth callback URL's token must not be persisted as the tab's verified URL."""
    canary = "CANARYtoken7f3a9"
    clock, backend = FakeClock(), FakeBackend()
    async with (
        SqliteStore(tmp_path / "k.db", clock=clock) as store,
        SessionKeeper(
            backend,
            clock=clock,
            durability=Durability(store=store),
            login_settings=LoginSettings(fingerprint_key=KEY),
        ) as k,
    ):
        await k.ensure("billing")
        await k.tab("billing", f"https://{SITE}/auth/callback?code={canary}")
    for path in await asyncio.to_thread(lambda: list(tmp_path.iterdir())):
        assert canary.encode() not in await asyncio.to_thread(path.read_bytes), path


async def test_a_url_password_never_reaches_the_store(tmp_path: Path) -> None:
    """A tab URL with user:password@ is stored without the password."""
    db = tmp_path / "k.db"
    clock = FakeClock()
    async with SqliteStore(db, clock=clock) as store:
        keeper = SessionKeeper(
            FakeBackend(clock=clock),
            clock=clock,
            durability=Durability(store=store, keyring=KEYS),
        )
        async with keeper:
            await keeper.ensure("a")
            await keeper.unguarded_page("a", "https://alice:hunter2-canary@docs.example/guide?x=1")
            await keeper.persist()
    conn = sqlite3.connect(db)
    try:
        rows = [
            str(r)
            for table in ("keeper_state", "keeper_heads", "keeper_rows", "keeper_tabs")
            for r in conn.execute(f"SELECT * FROM {table}").fetchall()
        ]
    finally:
        conn.close()
    assert rows
    assert not any("hunter2-canary" in r for r in rows)
