"""FakeClock moves only when told, never backwards, and keeps both readings together."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from session_keeper.errors import InvalidArgument, InvalidArgumentType
from session_keeper.seams import Clock, SystemClock
from session_keeper.testing import FakeClock


def test_both_readings_move_together() -> None:
    """advance() moves monotonic() and now() by the same amount."""
    clock = FakeClock(datetime(2026, 1, 1, tzinfo=UTC))
    clock.advance(timedelta(minutes=3))
    clock.advance(30)
    assert clock.monotonic() == 210.0
    assert clock.now() == datetime(2026, 1, 1, 0, 3, 30, tzinfo=UTC)


def test_set_jumps_forward_only() -> None:
    """set() accepts an instant or an offset; going back is refused and changes nothing."""
    clock = FakeClock()
    clock.set(timedelta(minutes=15))
    with pytest.raises(InvalidArgument):
        clock.set(timedelta(minutes=3))
    with pytest.raises(InvalidArgument):
        clock.advance(-1)
    assert clock.elapsed == timedelta(minutes=15)


def test_clocks_satisfy_the_protocol() -> None:
    """FakeClock and SystemClock are Clocks; the system clock is UTC-aware."""
    assert isinstance(FakeClock(), Clock) and isinstance(SystemClock(), Clock)
    assert SystemClock().now().tzinfo is not None
    with pytest.raises(InvalidArgument):
        FakeClock(datetime(2026, 1, 1))


@pytest.mark.parametrize(
    ("by", "error"),
    [
        (float("nan"), InvalidArgument),
        (float("inf"), InvalidArgument),
        (-0.5, InvalidArgument),
        ("5", InvalidArgumentType),
        (None, InvalidArgumentType),
        (True, InvalidArgumentType),
    ],
    ids=["nan", "inf", "negative", "str", "None", "bool"],
)
def test_advance_takes_only_a_finite_non_negative_duration(
    by: object, error: type[Exception]
) -> None:
    """advance(nan) and friends are refused (typed) and leave the clock where it was."""
    clock = FakeClock()
    clock.advance(10)
    bad: Any = by
    with pytest.raises(error):
        clock.advance(bad)
    assert clock.monotonic() == 10.0 and clock.now() == clock.start + timedelta(seconds=10)


@pytest.mark.parametrize("make", [SystemClock, FakeClock], ids=["system", "fake"])
async def test_a_clocks_sleep_returns_once_its_monotonic_reading_moved_that_far(
    make: type[SystemClock] | type[FakeClock],
) -> None:
    """The Clock contract's sleep: after ``await sleep(s)`` monotonic() has moved by at
    least s; zero and negative seconds return at once."""
    clock: Clock = make()
    before = clock.monotonic()
    await clock.sleep(0.02)
    assert clock.monotonic() - before >= 0.02
    before = clock.monotonic()
    await clock.sleep(0)
    await clock.sleep(-1)
    assert clock.monotonic() - before < 0.5


async def test_a_fake_clocks_sleep_jumps_to_its_deadline_in_no_real_time() -> None:
    """autojump (the default): a sleep of an hour moves the clock by exactly that hour and
    returns without waiting in real time; both readings move."""
    clock = FakeClock()
    started = time.monotonic()
    await clock.sleep(3600)
    await clock.sleep(2.5)
    assert time.monotonic() - started < 1
    assert clock.elapsed == timedelta(seconds=3602.5)
    assert clock.now() == clock.start + timedelta(seconds=3602.5)


async def test_a_fake_clock_without_autojump_wakes_a_sleeper_only_when_moved_past_it() -> None:
    """autojump=False: a sleeper waits (counted in ``sleepers``) while the clock stands or
    moves short of its deadline, and wakes once advance() or set(), from another thread
    too, moves it past; a cancelled sleeper is no longer counted."""
    clock = FakeClock(autojump=False)
    sleeper = asyncio.create_task(clock.sleep(30))
    await asyncio.sleep(0.05)
    assert (clock.sleepers, sleeper.done()) == (1, False)
    clock.advance(29)
    await asyncio.sleep(0.05)
    assert not sleeper.done()
    await asyncio.to_thread(clock.set, timedelta(seconds=30))
    await asyncio.wait_for(sleeper, timeout=5)
    assert clock.sleepers == 0
    cancelled = asyncio.create_task(clock.sleep(1))
    await asyncio.sleep(0.05)
    assert clock.sleepers == 1
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert clock.sleepers == 0 and clock.elapsed == timedelta(seconds=30)


@pytest.mark.parametrize(
    ("seconds", "error"),
    [(float("nan"), InvalidArgument), (float("inf"), InvalidArgument), ("5", InvalidArgumentType)],
    ids=["nan", "inf", "str"],
)
async def test_a_fake_clock_refuses_a_sleep_no_clock_could_end(
    seconds: object, error: type[Exception]
) -> None:
    """sleep(nan), sleep(inf) and sleep("5") are refused (typed) and move nothing."""
    clock = FakeClock()
    bad: Any = seconds
    with pytest.raises(error):
        await clock.sleep(bad)
    assert clock.elapsed == timedelta(0) and clock.sleepers == 0
