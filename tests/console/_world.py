"""A console over a keeper, a store, a job loop and a signed-in person: what the console
tests talk HTTP to (the ``world`` fixture in conftest.py builds it)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import httpx

from session_keeper import Durability, Grant, LoginSettings, SessionKeeper
from session_keeper.console import Console
from session_keeper.jobs import JobLoop
from session_keeper.security import AuditLog, Keyring
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock, FakePage

KEY = bytes(range(1, 33))
FINGERPRINT_KEY = bytes(range(100, 132))
COOKIE_VALUE = "canary-cookie-value-5f2b9c"


@attrs.define
class World:
    """A console over a keeper, a store, a job loop and a signed-in person."""

    keeper: SessionKeeper[FakePage]
    store: SqliteStore
    loop: JobLoop[FakePage]
    console: Console
    keyring: Keyring
    audit: AuditLog
    client: httpx.AsyncClient
    backend: FakeBackend


@asynccontextmanager
async def world_in(tmp_path: Path) -> AsyncIterator[World]:
    """Console on port 0 with billing signed in (cookie value is a canary)."""
    keyring = Keyring({"k1": KEY})
    backend = FakeBackend()
    async with SqliteStore(tmp_path / "console.db") as store:
        audit = AuditLog(store, keyring)
        keeper = SessionKeeper(
            backend,
            clock=FakeClock(),
            durability=Durability(store=store, keyring=keyring, audit=audit),
            login_settings=LoginSettings(fingerprint_key=FINGERPRINT_KEY),
            grants=[Grant("billing", "billing.example")],
        )
        async with keeper:
            await keeper.ensure("billing")
            await keeper.tab("billing", "https://billing.example/login?next=%2Finvoices")
            await backend.sign_in("billing.example", value=COOKIE_VALUE)
            await keeper.record_login("billing", "billing.example", account="alice")
            loop = JobLoop(keeper, store, "worker-1")
            console = Console(keeper, loop=loop, bind="127.0.0.1:0", user="ops")
            async with console, httpx.AsyncClient(base_url=console.url) as client:
                yield World(
                    keeper=keeper,
                    store=store,
                    loop=loop,
                    console=console,
                    keyring=keyring,
                    audit=audit,
                    client=client,
                    backend=backend,
                )


async def sign_in(world: World, user: str = "dana") -> str:
    """Open a one-time link as ``user``; return the session's CSRF token (from a form)."""
    link = world.console.login_link(user)
    r = await world.client.get(link.removeprefix(world.console.url))
    assert r.status_code == 303
    page = await world.client.get("/borrows")
    assert page.status_code == 200
    m = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert m is not None
    return m.group(1)
