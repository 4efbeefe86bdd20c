"""The job loop's testing mode: hooks set through session_keeper.testing, not the constructor."""

from __future__ import annotations

import inspect
import random
from datetime import timedelta

import pytest
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from session_keeper.errors import (
    BrowserError,
    Denied,
    InvalidArgument,
    InvalidArgumentType,
    LoginRequired,
    PageChanged,
    RateLimited,
    SignedOut,
    StoreError,
    TransientFailure,
    UnsavedChanges,
    WriteOutcomeUnknown,
)
from session_keeper.jobs import JobLoop
from session_keeper.jobs._failures import classify
from session_keeper.testing import job_loop_testing

from .conftest import FakeCatalogue, World, contract, identity, target

TEST_HOOKS = {"rng", "sleep", "heartbeat_sleep", "fault_hooks", "hooks", "faults"}


def test_job_loop_constructor_takes_no_test_hooks() -> None:
    """JobLoop's public signature carries only what a user configures; the random source,
    sleeps and fault points are set through session_keeper.testing.job_loop_testing."""
    params = set(inspect.signature(JobLoop).parameters)
    assert not params & TEST_HOOKS, params & TEST_HOOKS
    assert params == {
        "keeper",
        "store",
        "worker_id",
        "lease_ttl",
        "backoff_base",
        "backoff_cap",
        "max_recoveries",
        "pause_ttl",
        "guard",
        "telemetry",
    }


async def test_loop_durations_are_timedeltas_in_and_out(world: World) -> None:
    """backoff_base, backoff_cap, lease_ttl and pause_ttl read back as the timedelta given."""
    loop = JobLoop(
        world.keeper,
        world.store,
        "w1",
        lease_ttl=timedelta(seconds=45),
        backoff_base=timedelta(milliseconds=250),
        backoff_cap=timedelta(seconds=7),
        pause_ttl=timedelta(hours=2),
    )
    assert loop.backoff_base == timedelta(milliseconds=250)
    assert loop.backoff_cap == timedelta(seconds=7)
    assert loop.lease_ttl == timedelta(seconds=45)
    assert loop.pause_ttl == timedelta(hours=2)
    assert all(
        isinstance(v, timedelta)
        for v in (loop.backoff_base, loop.backoff_cap, loop.lease_ttl, loop.pause_ttl)
    )


async def test_testing_mode_refuses_what_is_not_a_loop_or_a_fault_point(world: World) -> None:
    """job_loop_testing names a wrong argument instead of silently doing nothing."""
    with pytest.raises(InvalidArgumentType):
        job_loop_testing(object())  # type: ignore[arg-type]

    async def crash() -> None:
        raise RuntimeError("crash")

    with pytest.raises(InvalidArgument, match="before_commit"):
        job_loop_testing(world.loop(), fault_hooks={"before_commit": crash})  # type: ignore[dict-item]


class Highest(random.Random):
    """A random source that always picks the top of the range: the jitter's ceiling."""

    def uniform(self, a: float, b: float) -> float:
        return b


async def test_testing_mode_rng_draws_the_backoff_within_its_timedelta_ceiling(
    world: World,
) -> None:
    """The testing-mode rng draws each backoff; its ceiling doubles from backoff_base
    (a timedelta) and stops at backoff_cap."""
    await world.sign_in()
    loop = world.loop(backoff_base=timedelta(seconds=1), backoff_cap=timedelta(seconds=3))
    job_loop_testing(loop, rng=Highest(), sleep=world.sleep, heartbeat_sleep=world.timers.sleep)
    await loop.submit(contract(max_attempts=10))
    failures: list[BaseException] = [TransientFailure("503") for _ in range(4)]
    out = await loop.run(
        "audit", FakeCatalogue(raise_next=failures).step, target=target, expect_identity=identity
    )
    assert out.state == "done"
    assert world.sleeps == [1.0, 2.0, 3.0, 3.0]


async def test_testing_mode_without_arguments_restores_production_behaviour(
    world: World,
) -> None:
    """job_loop_testing(loop) drops the fault hooks set before: the run is not interrupted."""
    await world.sign_in()

    async def crash() -> None:
        raise RuntimeError("controller crash")

    loop = world.loop(fault_hooks={"after_commit": crash})
    await loop.submit(contract())
    with pytest.raises(RuntimeError, match="controller crash"):
        await loop.run("audit", FakeCatalogue().step, target=target, expect_identity=identity)
    job_loop_testing(loop)
    out = await loop.run("audit", FakeCatalogue().step, target=target, expect_identity=identity)
    assert out.state == "done"


@pytest.mark.parametrize(
    ("exc", "failure_class"),
    [
        (RateLimited("slow down", retry_after=1), "rate_limit"),
        (TransientFailure("503"), "transient"),
        (BrowserError("gone"), "transient"),
        (TimeoutError(), "transient"),
        (PlaywrightTimeoutError("Timeout 30000ms exceeded."), "transient"),
        (PageChanged("layout"), "changed_page"),
        (LoginRequired("sign in"), "login"),
        (SignedOut("signed out"), "login"),
        (Denied("403"), "denial"),
        (WriteOutcomeUnknown("refund"), "write_unknown"),
        (InvalidArgument("bad"), "usage"),
        (StoreError("server closed the connection"), "store"),
        (UnsavedChanges("keeper state not written"), "store"),
        (ValueError("parse"), "unclassified"),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_each_step_failure_has_one_class_from_one_table(
    exc: BaseException, failure_class: str
) -> None:
    """The failure table names each exception's class; the first matching row wins."""
    assert classify(exc) == failure_class
