"""FakeClock moves only when told, never backwards, and keeps both readings together."""

from __future__ import annotations

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
