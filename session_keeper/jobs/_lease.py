"""The lease one run holds: extended while it works, waits and stalls, fenced throughout."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

from session_keeper._util.clock import Clock
from session_keeper._util.redact import scrubbing_logger
from session_keeper.errors import StaleLeaseError, StoreError
from session_keeper.jobs._settings import LoopSettings
from session_keeper.stores import Store
from session_keeper.stores._records import Lease

log = scrubbing_logger("session_keeper.jobs")
T = TypeVar("T")

#: A step's lease is extended this often, as a fraction of ``lease_ttl``.
HEARTBEAT_FRACTION = 3


@contextlib.asynccontextmanager
async def held_lease(store: Store, job_id: str, settings: LoopSettings) -> AsyncIterator[Lease]:
    """Claim ``job_id`` for the block and release it after (unless taken over meanwhile).

    Raises :class:`LeaseHeldError` when another worker holds it.
    """
    lease = await store.claim(job_id, settings.worker_id, settings.lease_ttl)
    try:
        yield lease
    finally:
        await release_quietly(store, lease)


async def release_quietly(store: Store, lease: Lease) -> None:
    """Release ``lease``; one taken over meanwhile is not ours to release, not an error."""
    with contextlib.suppress(StaleLeaseError):
        await store.release(lease)


class LeaseKeeper:
    """Holds a run's current lease and keeps it alive; every extension is fenced."""

    def __init__(self, store: Store, clock: Clock, settings: LoopSettings, lease: Lease) -> None:
        self.store = store
        self.clock = clock
        self.settings = settings
        self.lease = lease
        #: False once another worker took the job over: nothing of ours to release.
        self.held = True

    @property
    def job_id(self) -> str:
        return self.lease.job_id

    async def extend(self) -> None:
        """Extend by a full ``lease_ttl`` (raises :class:`StaleLeaseError` if lost)."""
        self.lease = await self.store.extend(self.lease, self.settings.lease_ttl)

    async def keep_fresh(self) -> None:
        """Extend the lease once half of it is used: fencing without a write per page."""
        left = (self.lease.expires_at - self.clock.now()).total_seconds()
        if left < self.settings.lease_ttl.total_seconds() / 2:
            await self.extend()

    async def reclaim(self) -> None:
        """Take the job back after a loss (raises :class:`LeaseHeldError` if someone has it)."""
        s = self.settings
        self.lease = await self.store.claim(self.lease.job_id, s.worker_id, s.lease_ttl)

    async def release(self) -> None:
        """Give the lease back if we still hold it; a takeover meanwhile is not an error."""
        if self.held:
            await release_quietly(self.store, self.lease)

    async def wait(self, seconds: float) -> None:
        """Sleep, keeping the lease alive across a wait longer than it lasts."""
        remaining = seconds
        chunk_max = self.settings.lease_ttl.total_seconds() / 2
        while remaining > 0:
            await self.extend()
            chunk = min(remaining, chunk_max)
            await self.settings.hooks.sleep(chunk)
            remaining -= chunk

    async def heartbeat(self, work: Awaitable[T]) -> T:
        """Await ``work`` while the lease is extended every ``lease_ttl / 3`` (fenced).

        A healthy worker never loses its lease to a long step. A beat that finds the
        lease gone (expired during a stall, or taken over) cancels ``work`` and raises
        :class:`StaleLeaseError`: the step is abandoned and nothing of it is committed.
        """
        current = asyncio.current_task()
        assert current is not None
        lost: list[StaleLeaseError] = []
        every = self.settings.lease_ttl.total_seconds() / HEARTBEAT_FRACTION
        hooks = self.settings.hooks

        async def beat() -> None:
            while True:
                await hooks.heartbeat_sleep(every)
                try:
                    await self.extend()
                except StaleLeaseError as exc:
                    lost.append(exc)
                    current.cancel()
                    return
                except StoreError as exc:
                    # Busy or unreachable for a moment: two more beats before expiry.
                    log.warning("lease heartbeat on %s failed: %s", self.lease.job_id, exc)

        beating = asyncio.ensure_future(beat())
        try:
            result = await work
        except asyncio.CancelledError:
            if lost and current.uncancel() == 0:
                raise lost[0] from None
            raise
        finally:
            beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beating
        if lost:
            current.uncancel()  # the step swallowed our cancel; the lease is gone all the same
            raise lost[0]
        return result
