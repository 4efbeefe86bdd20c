"""FakeClock: a clock that moves only when told to (like trio's MockClock)."""

from __future__ import annotations

import asyncio
import math
import threading
from datetime import UTC, datetime, timedelta

from session_keeper.errors import InvalidArgument, InvalidArgumentType

#: Where a FakeClock starts unless told otherwise: a fixed, recognisable instant.
DEFAULT_START = datetime(2026, 10, 13, 9, 0, tzinfo=UTC)


class FakeClock:
    """A :class:`~session_keeper.Clock` for tests and demos.

    Both readings move together, only forwards (the real monotonic clock cannot go
    back), and only when told: :meth:`advance`, :meth:`set`, or a :meth:`sleep` on it.

    A sleep waits on this clock, never in real seconds. By default (``autojump=True``) a
    sleeper moves the clock to its own deadline at once (much like trio's ``MockClock``
    with an autojump threshold of zero, which jumps once every task is blocked; this one
    jumps as the sleep starts): a renewal waiting for the next TOTP window goes on at
    once, the clock showing the wait. With ``autojump=False`` a sleeper waits
    until the clock is moved past its deadline by :meth:`advance` or :meth:`set` (from
    any thread); :attr:`sleepers` says how many wait, for a test that steps time by hand.
    """

    def __init__(self, start: datetime = DEFAULT_START, *, autojump: bool = True) -> None:
        if not isinstance(start, datetime):
            raise InvalidArgumentType(f"start must be a datetime, not {type(start).__name__}")
        if start.tzinfo is None:
            raise InvalidArgument("start must be timezone-aware")
        if not isinstance(autojump, bool):
            raise InvalidArgumentType(f"autojump must be a bool, not {type(autojump).__name__}")
        self._start = start.astimezone(UTC)
        self._elapsed = 0.0
        self._autojump = autojump
        # Each sleeper's deadline, its loop and the future that wakes it: advance() may be
        # called from another thread than the sleeper's loop.
        self._sleepers: list[tuple[float, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._sleepers_lock = threading.Lock()

    @property
    def start(self) -> datetime:
        """The instant this clock started at."""
        return self._start

    @property
    def elapsed(self) -> timedelta:
        """How far the clock has been moved since it started."""
        return timedelta(seconds=self._elapsed)

    @property
    def autojump(self) -> bool:
        """Whether a sleeper moves the clock to its deadline itself."""
        return self._autojump

    @property
    def sleepers(self) -> int:
        """How many :meth:`sleep` calls are waiting for the clock to be moved."""
        return len(self._sleepers)

    def monotonic(self) -> float:
        """Seconds elapsed since the clock started."""
        return self._elapsed

    def now(self) -> datetime:
        """The start instant plus the elapsed time, in UTC."""
        return self._start + timedelta(seconds=self._elapsed)

    def advance(self, by: timedelta | float) -> None:
        """Move forward by ``by`` (a timedelta or seconds); negative values are refused."""
        seconds = _finite_seconds(
            by.total_seconds() if isinstance(by, timedelta) else by, "by", "a timedelta or seconds"
        )
        if seconds < 0:
            raise InvalidArgument("a clock cannot go backwards")
        self._elapsed += seconds
        self._wake()

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
        self._wake()

    async def sleep(self, seconds: float) -> None:
        """Wait until the clock has been moved on by ``seconds`` (see the class docstring).

        Zero or less returns after one pass of the event loop, as ``asyncio.sleep(0)``
        does; a non-number or a non-finite number is refused (typed) before waiting."""
        seconds = _finite_seconds(seconds, "seconds")
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        deadline = self._elapsed + seconds
        if self._autojump:
            self._elapsed = max(self._elapsed, deadline)
            self._wake()
            await asyncio.sleep(0)
            return
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()
        sleeper = (deadline, loop, woken)
        with self._sleepers_lock:
            self._sleepers.append(sleeper)
        self._wake()  # moved past the deadline by another thread meanwhile
        try:
            await woken
        finally:
            with self._sleepers_lock:
                if sleeper in self._sleepers:
                    self._sleepers.remove(sleeper)

    def _wake(self) -> None:
        """Wake every sleeper whose deadline the clock has reached."""
        with self._sleepers_lock:
            due = [sleeper for sleeper in self._sleepers if sleeper[0] <= self._elapsed]
            for sleeper in due:
                self._sleepers.remove(sleeper)
        for _, loop, woken in due:
            if not loop.is_closed():
                loop.call_soon_threadsafe(_resolve, woken)

    def __repr__(self) -> str:
        return f"FakeClock(now={self.now().isoformat()})"


def _finite_seconds(value: object, name: str, accepts: str = "a number of seconds") -> float:
    """``value`` as seconds: a number (not a bool) and finite, else a typed error.

    NaN compares false with every limit (nothing would ever expire, and no advance()
    would wake a sleeper on it); infinity would never be reached."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgumentType(f"{name} must be {accepts}, not {type(value).__name__}")
    if not math.isfinite(value):
        raise InvalidArgument(f"{name} must be a finite number of seconds")
    return float(value)


def _resolve(woken: asyncio.Future[None]) -> None:
    """Wake a sleeper, unless it was cancelled meanwhile."""
    if not woken.done():
        woken.set_result(None)
