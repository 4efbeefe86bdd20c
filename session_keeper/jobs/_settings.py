"""What a JobLoop is configured with, fixed at construction, and its testing mode.

The testing-mode hooks (random source, sleeps, fault points) are never constructor
arguments: :func:`session_keeper.testing.job_loop_testing` sets them on a loop.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Literal, get_args

import attrs

from session_keeper._telemetry import DEFAULT_INSTRUMENTS, Instruments

#: Points where a test injects a controller crash (``job_loop_testing(fault_hooks=)``).
FaultPoint = Literal["after_extract", "after_commit"]
FAULT_POINTS: frozenset[str] = frozenset(get_args(FaultPoint))

#: How the loop waits: for backoff and rate limits, and between lease heartbeats.
Sleep = Callable[[float], Awaitable[None]]
Fault = Callable[[], Awaitable[None]]


@attrs.define
class TestingHooks:
    """The behaviour production never changes and tests do (stamina-style testing mode).

    Mutable and shared by reference: a change reaches runs already in flight.
    """

    __test__ = False  # not a pytest test class, whatever its name

    rng: random.Random = attrs.field(factory=random.Random)
    sleep: Sleep = asyncio.sleep
    heartbeat_sleep: Sleep = asyncio.sleep
    faults: dict[FaultPoint, Fault] = attrs.field(factory=dict)

    async def fault(self, point: FaultPoint) -> None:
        """Run the fault a test set at ``point``, if any."""
        hook = self.faults.get(point)
        if hook is not None:
            await hook()


@attrs.frozen(kw_only=True)
class LoopSettings:
    """The loop's policy, handed to each run and collaborator explicitly."""

    worker_id: str
    lease_ttl: timedelta
    backoff_base: timedelta
    backoff_cap: timedelta
    max_recoveries: int
    pause_ttl: timedelta
    hooks: TestingHooks = attrs.field(factory=TestingHooks)
    #: Where the loop's spans and metrics go (its :class:`~session_keeper.Telemetry`).
    instruments: Instruments = DEFAULT_INSTRUMENTS

    def backoff_ceiling(self, attempts: int) -> float:
        """Seconds of the largest full-jitter delay after ``attempts`` failed attempts."""
        base = self.backoff_base.total_seconds()
        return min(self.backoff_cap.total_seconds(), base * float(2 ** (attempts - 1)))
