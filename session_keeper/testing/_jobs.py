"""Testing mode for job loops: hooks a test sets on a loop, never constructor arguments.

Like stamina's testing mode, these switch behaviour production never needs — the
random source of the backoff jitter, how the loop sleeps, and crash points inside
a run — on one :class:`~session_keeper.JobLoop`, from a test, through one function.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from session_keeper.errors import InvalidArgument, InvalidArgumentType
from session_keeper.jobs._loop import JobLoop, testing_hooks
from session_keeper.jobs._settings import FAULT_POINTS, FaultPoint

__all__ = ["JobFaultPoint", "job_loop_testing"]

#: Where a fault hook runs: right after a step's answer was validated
#: (``after_extract``, nothing committed yet) or right after a page's commit
#: (``after_commit``). A hook that raises there models a controller crash.
JobFaultPoint = FaultPoint


def job_loop_testing(
    loop: JobLoop[Any],
    *,
    rng: random.Random | None = None,
    sleep: Callable[[float], Awaitable[None]] | None = None,
    heartbeat_sleep: Callable[[float], Awaitable[None]] | None = None,
    fault_hooks: Mapping[JobFaultPoint, Callable[[], Awaitable[None]]] | None = None,
) -> None:
    """Set ``loop``'s testing hooks; every argument left out gets production behaviour.

    - ``rng``: the random source of the full-jitter backoff (default: a fresh
      :class:`random.Random`).
    - ``sleep``: how backoff and rate-limit waits sleep (default :func:`asyncio.sleep`);
      tests pass one that advances a :class:`FakeClock`.
    - ``heartbeat_sleep``: how the lease heartbeat waits between beats (default
      :func:`asyncio.sleep`); tests pass timers on a fake clock.
    - ``fault_hooks``: an awaitable per :data:`JobFaultPoint`, run at that point of
      every page (a hook that raises models a controller crash there).

    Calling it again replaces all four; ``job_loop_testing(loop)`` restores production
    behaviour. Runs already in flight see the change. Raises
    :class:`InvalidArgumentType` for anything but a JobLoop and
    :class:`InvalidArgument` for an unknown fault point.
    """
    if not isinstance(loop, JobLoop):
        raise InvalidArgumentType(f"expected a JobLoop, not {loop!r}")
    faults = dict(fault_hooks or {})
    unknown = set(faults) - FAULT_POINTS
    if unknown:
        raise InvalidArgument(
            f"unknown fault point(s) {sorted(unknown)}; known: {sorted(FAULT_POINTS)}"
        )
    hooks = testing_hooks(loop)
    hooks.rng = rng if rng is not None else random.Random()
    hooks.sleep = sleep if sleep is not None else asyncio.sleep
    hooks.heartbeat_sleep = heartbeat_sleep if heartbeat_sleep is not None else asyncio.sleep
    hooks.faults = faults
