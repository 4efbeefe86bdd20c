"""The Clock seam: every module reads time through one of these, never directly."""

from __future__ import annotations

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
    - Neither raises.
    """

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards."""
        ...

    def now(self) -> datetime:
        """The current time, timezone-aware, in UTC."""
        ...


class SystemClock:
    """The real clock: ``time.monotonic()`` and ``datetime.now(UTC)``."""

    def monotonic(self) -> float:
        """Seconds from ``time.monotonic()``."""
        return time.monotonic()

    def now(self) -> datetime:
        """The current UTC time."""
        return datetime.now(UTC)

    def __repr__(self) -> str:
        return "SystemClock()"
