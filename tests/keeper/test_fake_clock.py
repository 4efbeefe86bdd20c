"""FakeClock moves only when told, never backwards, and keeps both readings together."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from session_keeper import Clock, InvalidArgument, SystemClock
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
