"""sweep(): idle browsers, idle tabs and dead grants are closed, on the keeper's clock."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import attrs
import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from session_keeper import IdleTimeouts, LoginSettings, Sweeper
from session_keeper.errors import InvalidArgumentType
from session_keeper.facts import SweepReport
from session_keeper.testing import FakeClock

from .conftest import Factory, SpyBackend, sign_in


async def test_sweep_closes_a_browser_idle_past_the_limit(
    make_keeper: Factory, backend: SpyBackend, clock: FakeClock
) -> None:
    """The seed's sweep: browser-1 idle 12m is closed, and says so."""
    keeper = make_keeper()
    clock.set(timedelta(minutes=3))
    await keeper.ensure("billing")
    clock.set(timedelta(minutes=15))
    report = await keeper.sweep()
    assert report.closed_browser is not None
    assert (report.closed_browser.browser_id, report.closed_browser.idle_minutes) == (
        "browser-1",
        12,
    )
    assert backend.current is None and not keeper.alive


async def test_sweep_leaves_a_browser_used_within_the_limit(
    make_keeper: Factory, clock: FakeClock
) -> None:
    """Nothing idle, nothing closed."""
    keeper = make_keeper()
    await keeper.ensure("billing")
    clock.advance(timedelta(minutes=10))
    report = await keeper.sweep()
    assert report.nothing_done and keeper.alive


async def test_idle_close_forgets_logins_by_default(
    make_keeper: Factory, backend: SpyBackend, clock: FakeClock
) -> None:
    """A swept profile holds no live credential: even persistent login cookies are deleted."""
    keeper = make_keeper()
    await keeper.ensure("billing")
    await sign_in(keeper, backend, "billing", "billing.example", persistent=True)
    await backend.sign_in("unrelated.example", persistent=True)
    clock.advance(timedelta(minutes=11))
    await keeper.sweep()
    assert [c.domain for c in backend.profile] == ["unrelated.example"]
    turn = await keeper.ensure("billing")
    assert [str(x) for x in turn.lost] == ["login:billing.example", "tab:billing"]


async def test_idle_close_clears_the_cookies_of_logins_a_restart_judged_lost(
    make_keeper: Factory, backend: SpyBackend, clock: FakeClock
) -> None:
    """A login the jar called replaced after a restart may still be signed in: the sweep
    deletes its site's cookies too, so the swept profile holds no credential of it."""
    keeper = make_keeper(login_settings=LoginSettings(fingerprint_key=bytes(range(32))))
    await keeper.ensure("billing")
    await sign_in(keeper, backend, "billing", "billing.example", persistent=True)
    assert backend.current is not None
    await backend.current.close()
    # The site re-issued its login cookie: the next browser holds another value.
    backend.edit_profile(lambda c: attrs.evolve(c, value="re-issued"))
    turn = await keeper.ensure("billing")
    assert [(x.name, x.cause) for x in keeper.lost_logins()] == [("billing.example", "replaced")]
    assert turn.lost_logins
    clock.advance(timedelta(minutes=11))
    await keeper.sweep()
    assert [c.domain for c in backend.profile] == []


async def test_open_takeover_keeps_the_browser_until_it_expires(
    make_keeper: Factory, clock: FakeClock
) -> None:
    """A person driving the browser is not swept out from under them, until the takeover ends."""
    keeper = make_keeper()
    await keeper.ensure("billing")
    keeper.begin_takeover("billing", expires_in=timedelta(minutes=30))
    clock.advance(timedelta(minutes=20))
    assert (await keeper.sweep()).closed_browser is None
    assert not (await keeper.ensure("billing")).restarted
    clock.advance(timedelta(minutes=41))
    assert (await keeper.sweep()).closed_browser is not None


async def test_idle_tabs_are_closed_and_reported_lost_without_a_restart(
    make_keeper: Factory, clock: FakeClock
) -> None:
    """With a tab idle limit, an unused tab closes; its conversation hears tab lost, not restart."""
    keeper = make_keeper(idle_timeouts=IdleTimeouts(tab=timedelta(minutes=5)))
    await keeper.ensure("research")
    await keeper.unguarded_page("research", "https://docs.example/a")
    await keeper.ensure("billing")
    clock.advance(timedelta(minutes=6))
    await keeper.ensure("billing")
    await keeper.unguarded_page("billing")
    report = await keeper.sweep()
    assert [t.conversation for t in report.closed_tabs] == ["research"]
    turn = await keeper.ensure("research")
    assert not turn.restarted
    assert [(str(x), x.cause, x.last_url) for x in turn.lost] == [
        ("tab:research", "idle", "https://docs.example/a")
    ]


async def test_scheduled_sweep_runs_on_a_real_apscheduler(
    make_keeper: Factory, clock: FakeClock
) -> None:
    """start_sweeper() runs sweep() from a real AsyncIOScheduler; idleness is the keeper's clock."""
    keeper = make_keeper()
    await keeper.ensure("billing")
    reports: list[SweepReport] = []
    done = asyncio.Event()

    def heard(report: SweepReport) -> None:
        reports.append(report)
        if report.closed_browser is not None:
            done.set()

    keeper.start_sweeper(every=timedelta(milliseconds=20), on_sweep=heard)
    await asyncio.sleep(0.1)
    assert keeper.alive and all(r.nothing_done for r in reports)
    clock.advance(timedelta(minutes=11))
    await asyncio.wait_for(done.wait(), timeout=5)
    assert not keeper.alive
    keeper.stop_sweeper()


async def test_sweeper_uses_the_applications_scheduler(
    make_keeper: Factory, clock: FakeClock
) -> None:
    """An application's own scheduler gets the job and keeps running after the keeper closes."""
    scheduler = AsyncIOScheduler(event_loop=asyncio.get_running_loop())
    scheduler.start()
    try:
        keeper = make_keeper()
        await keeper.ensure("billing")
        closed = asyncio.Event()
        sweeper = keeper.start_sweeper(
            every=timedelta(milliseconds=20),
            scheduler=scheduler,
            on_sweep=lambda r: closed.set() if r.closed_browser else None,
        )
        assert sweeper.job_id is not None and scheduler.get_job(sweeper.job_id) is not None
        assert sweeper.every == timedelta(milliseconds=20) and sweeper.next_run is not None
        job_id = sweeper.job_id
        clock.advance(timedelta(minutes=11))
        await asyncio.wait_for(closed.wait(), timeout=5)
        await keeper.aclose()
        assert scheduler.get_job(job_id) is None and scheduler.running
        assert not sweeper.running and sweeper.next_run is None
    finally:
        scheduler.shutdown(wait=False)


async def test_start_sweeper_returns_our_sweeper_handle_not_a_scheduler_job(
    make_keeper: Factory,
) -> None:
    """start_sweeper() hands back a Sweeper (every, next_run, stop()); no APScheduler type leaks."""
    keeper = make_keeper()
    await keeper.ensure("billing")
    sweeper = keeper.start_sweeper(every=timedelta(minutes=1))
    assert isinstance(sweeper, Sweeper)
    assert not type(sweeper).__module__.startswith("apscheduler")
    assert sweeper.running and sweeper.every == timedelta(minutes=1)
    assert sweeper.next_run is not None
    sweeper.stop()
    sweeper.stop()  # idempotent
    assert not sweeper.running and sweeper.next_run is None
    keeper.stop_sweeper()  # the keeper's handle is stopped already: nothing left to do
    again = keeper.start_sweeper(every=timedelta(minutes=1))
    assert again is not sweeper and again.running
    await keeper.aclose()
    assert not again.running


async def test_sweep_close_browser_closes_a_busy_browser_as_an_idle_close(
    make_keeper: Factory, backend: SpyBackend, clock: FakeClock
) -> None:
    """sweep(close_browser=True) closes a browser used a second ago with the idle policy:
    logins deleted, and its conversations told once on their next ensure()."""
    keeper = make_keeper()
    await keeper.ensure("billing")
    await sign_in(keeper, backend, "billing", "billing.example", persistent=True)
    clock.advance(timedelta(seconds=1))
    report = await keeper.sweep(close_browser=True)
    assert report.closed_browser is not None and report.closed_browser.browser_id == "browser-1"
    assert backend.current is None and not keeper.alive
    assert [c.domain for c in backend.profile] == []
    turn = await keeper.ensure("billing")
    assert turn.restarted and [str(x) for x in turn.lost] == [
        "login:billing.example",
        "tab:billing",
    ]
    assert not (await keeper.ensure("billing")).restarted


async def test_sweep_close_browser_must_be_a_bool(make_keeper: Factory) -> None:
    """A non-bool close_browser is refused with a typed error and closes nothing."""
    keeper = make_keeper()
    await keeper.ensure("billing")
    with pytest.raises(InvalidArgumentType):
        await keeper.sweep(close_browser="yes")  # type: ignore[arg-type]
    assert keeper.alive
