"""The Clock seam: every module reads time through one of these, never directly."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Where session_keeper reads time.

    Contract:

    - ``monotonic()`` returns seconds as a float that never decreases; it measures
      elapsed time inside one process (idle limits, step timeouts, budgets).
    - ``now()`` returns a timezone-aware UTC ``datetime``; it is what gets persisted
      (login times, deadlines) and compared across processes.
    - ``await sleep(seconds)`` returns once ``monotonic()`` has moved on by at least
      ``seconds`` (at once, after one pass of the event loop, for zero or less); it is
      cancellable. It is how the keeper waits for a time it measures on this clock (the
      next TOTP window), so a clock a test moves is never waited on in real seconds.
    - None of them raises for a finite number of seconds.
    """

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards."""
        ...

    def now(self) -> datetime:
        """The current time, timezone-aware, in UTC."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait until ``monotonic()`` has moved on by ``seconds``."""
        ...


class SystemClock:
    """The real clock: ``time.monotonic()`` and ``datetime.now(UTC)``."""

    def monotonic(self) -> float:
        """Seconds from ``time.monotonic()``."""
        return time.monotonic()

    def now(self) -> datetime:
        """The current UTC time."""
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        """``asyncio.sleep(seconds)``: the event loop's clock is this one's."""
        await asyncio.sleep(max(0.0, seconds))

    def __repr__(self) -> str:
        return "SystemClock()"
