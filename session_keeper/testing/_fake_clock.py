"""FakeClock: a clock that moves only when told to (like trio's MockClock)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from session_keeper.errors import InvalidArgument, InvalidArgumentType

#: Where a FakeClock starts unless told otherwise: a fixed, recognisable instant.
DEFAULT_START = datetime(2026, 10, 13, 9, 0, tzinfo=UTC)


class FakeClock:
    """A :class:`~session_keeper.Clock` for tests and demos.

    Both readings move together and only through :meth:`advance` or :meth:`set`;
    neither can go backwards, because the real monotonic clock cannot.
    """

    def __init__(self, start: datetime = DEFAULT_START) -> None:
        if not isinstance(start, datetime):
            raise InvalidArgumentType(f"start must be a datetime, not {type(start).__name__}")
        if start.tzinfo is None:
            raise InvalidArgument("start must be timezone-aware")
        self._start = start.astimezone(UTC)
        self._elapsed = 0.0

    @property
    def start(self) -> datetime:
        """The instant this clock started at."""
        return self._start

    @property
    def elapsed(self) -> timedelta:
        """How far the clock has been moved since it started."""
        return timedelta(seconds=self._elapsed)

    def monotonic(self) -> float:
        """Seconds elapsed since the clock started."""
        return self._elapsed

    def now(self) -> datetime:
        """The start instant plus the elapsed time, in UTC."""
        return self._start + timedelta(seconds=self._elapsed)

    def advance(self, by: timedelta | float) -> None:
        """Move forward by ``by`` (a timedelta or seconds); negative values are refused."""
        if isinstance(by, timedelta):
            seconds = by.total_seconds()
        elif isinstance(by, (int, float)) and not isinstance(by, bool):
            seconds = float(by)
        else:
            raise InvalidArgumentType(f"by must be a timedelta or seconds, not {type(by).__name__}")
        if not math.isfinite(seconds):
            # NaN would compare false with every limit: nothing would ever expire.
            raise InvalidArgument("by must be a finite number of seconds")
        if seconds < 0:
            raise InvalidArgument("a clock cannot go backwards")
        self._elapsed += seconds

    def set(self, when: datetime | timedelta) -> None:
        """Jump to ``when``: an absolute UTC instant, or a time since the start."""
        if isinstance(when, timedelta):
            target = when.total_seconds()
        elif isinstance(when, datetime):
            if when.tzinfo is None:
                raise InvalidArgument("when must be timezone-aware")
            target = (when - self._start).total_seconds()
        else:
            raise InvalidArgumentType(
                f"when must be datetime or timedelta, not {type(when).__name__}"
            )
        if target < self._elapsed:
            raise InvalidArgument("a clock cannot go backwards")
        self._elapsed = target

    def __repr__(self) -> str:
        return f"FakeClock(now={self.now().isoformat()})"
