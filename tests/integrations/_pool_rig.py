"""What both engines' rigs share: one Chromium profile (``p0``) in a :class:`KeeperPool`
leased in a SQLite store, and the person who signs its conversation in to billing there.

``_dbos_rig.py`` and ``_temporal_rig.py`` put their engine around :func:`one_profile_pool`
and extend :class:`PoolRig`; the DBOS application processes (``_dbos_process.py``) sign
in with :func:`sign_in`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from datetime import timedelta
from pathlib import Path
from typing import Any

from demos.sites import DemoSites
from session_keeper import PlaywrightBackend
from session_keeper.errors import ProfileHeld
from session_keeper.pool import KeeperPool
from session_keeper.stores import SqliteStore

CONVERSATION = "billing-agent"
BILLING = "billing.example"


async def sign_in(
    pool: KeeperPool[Any], conversation: str, login_url: str, *, turn: bool = True
) -> None:
    """What a person does in the console's live view, scripted: sign ``conversation`` in
    to billing at ``login_url`` in the pool's browser, and record the login.

    ``turn=False``: without a turn of its own (``ensure()``), so whatever news the
    conversation has stays for the workflow's next step, as a console sign-in does.
    """
    async with pool.hold(conversation) as keeper:
        if turn:
            await keeper.ensure(conversation)
        await keeper.begin_login(conversation, BILLING)
        page = await keeper.unguarded_page(conversation, login_url)
        await page.fill("input[name=username]", "alice")
        await page.fill("input[name=password]", "correct horse")
        await page.click("button[type=submit]")
        await page.wait_for_url("**/invoices")
        await keeper.record_login(conversation, BILLING, account="alice")


@contextlib.asynccontextmanager
async def beside(person: Coroutine[Any, Any, None]) -> AsyncIterator[None]:
    """Run ``person`` (a loop answering a workflow's sign-in waits) beside the block;
    cancelled when the block ends."""
    task = asyncio.create_task(person)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@contextlib.asynccontextmanager
async def one_profile_pool(
    db: Path, backend: PlaywrightBackend, lease_ttl: timedelta
) -> AsyncIterator[KeeperPool[Any]]:
    """Profile ``p0`` on ``backend`` in a pool owned by worker ``w1``, leased in the
    SQLite store ``db`` for ``lease_ttl``."""
    async with (
        SqliteStore(db) as store,
        KeeperPool(
            {"p0": backend}, store=store, owner="w1", max_open=1, lease_ttl=lease_ttl
        ) as pool,
    ):
        yield pool


class PoolRig:
    """An engine's worker ``w1`` in this process, its browser steps served by a
    one-profile pool (:func:`one_profile_pool`)."""

    def __init__(self, pool: KeeperPool[Any], db: Path) -> None:
        self.pool = pool
        #: The SQLite store the pool leases its profile in.
        self.db = db

    async def sign_in(self, sites: DemoSites, *, turn: bool = True) -> None:
        """A person signs the conversation in to billing in the worker's browser
        (:func:`sign_in`)."""
        await sign_in(self.pool, CONVERSATION, sites.url(BILLING, "/login"), turn=turn)

    async def sign_in_once_free(self, sites: DemoSites) -> None:
        """Sign in without a turn (as a person answering a workflow's wait does) once the
        profile is free: a fenced profile's retry may still hold its lease."""
        for _ in range(100):
            try:
                await self.sign_in(sites, turn=False)
                return
            except ProfileHeld:
                await asyncio.sleep(0.2)

    def chromium(self) -> PlaywrightBackend:
        """The profile's backend (its ``current`` session is the running Chromium)."""
        keeper = self.pool.open_keeper("p0")
        assert keeper is not None, "the profile is not open"
        backend = keeper.backend
        assert isinstance(backend, PlaywrightBackend)
        return backend
