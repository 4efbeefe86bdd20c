"""KeyedLock: one asyncio lock per key, alive only while someone holds or awaits it.

The keeper serves the calls of one conversation one at a time (so concurrent
``tab()`` calls open one page, and its navigations never interrupt each other)
without keeping a lock for every conversation it has ever seen.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

__all__ = ["KeyedLock"]


class KeyedLock:
    """Mutual exclusion per key; waiters are served in arrival order (asyncio.Lock is fair)."""

    def __init__(self) -> None:
        # key -> (lock, number of holders and waiters)
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """Hold ``key``'s lock for the ``async with`` block."""
        lock, users = self._locks.get(key, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def busy(self, key: str) -> bool:
        """Whether someone holds or awaits ``key``'s lock now."""
        return key in self._locks

    def __len__(self) -> int:
        """How many keys are held or awaited now."""
        return len(self._locks)
