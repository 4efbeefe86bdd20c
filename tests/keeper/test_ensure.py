"""ensure(): restarts found, reported once to each affected conversation, measured losses."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import attrs
import pytest

from session_keeper import Grant, LoginSettings, SessionKeeper
from session_keeper.errors import BrowserLaunchError, KeeperClosedError
from session_keeper.facts import BrowserLost, Lost
from session_keeper.testing import FakeClock, FakePage, FakeSession

from .conftest import Factory, SpyBackend, sign_in


async def test_first_ensure_launches_browser_1_without_a_restart(make_keeper: Factory) -> None:
    """The first turn starts browser-1 and does not call it a restart."""
    keeper = make_keeper()
    turn = await keeper.ensure("billing")
    assert (turn.browser_id, turn.generation, turn.restarted, turn.lost) == (
        "browser-1",
        1,
        False,
        (),
    )


async def test_alive_path_makes_no_browser_round_trip(
    make_keeper: Factory, backend: SpyBackend, clock: FakeClock
) -> None:
    """Once the browser is up, ensure() reads only local state: no call reaches the browser."""
    keeper = make_keeper()
    await keeper.ensure("billing")
    await sign_in(keeper, backend, "billing", "billing.example")
    before = list(backend.round_trips)
    for minute in range(1, 30):
        clock.set(timedelta(minutes=minute))
        turn = await keeper.ensure("billing" if minute % 2 else "research")
        assert not turn.restarted
    assert backend.round_trips == before


async def test_idle_browser_counts_as_expired_before_any_sweep(
    make_keeper: Factory, backend: SpyBackend, clock: FakeClock
) -> None:
    """A browser idle past the limit is replaced by the next ensure() even if no sweep ran."""
    keeper = make_keeper()
    await keeper.ensure("billing")
    await sign_in(keeper, backend, "billing", "billing.example")
    clock.advance(timedelta(minutes=10))
    assert not (await keeper.ensure("billing")).restarted  # exactly at the limit: still alive
    clock.advance(timedelta(minutes=10, seconds=1))
    turn = await keeper.ensure("billing")
    assert turn.restarted and turn.browser_id == "browser-2"
    assert [str(x) for x in turn.lost] == ["login:billing.example", "tab:billing"]


async def test_concurrent_ensures_during_a_restart_cause_one_relaunch(
    make_keeper: Factory, backend: SpyBackend
) -> None:
    """Twenty conversations arriving at once after a crash make exactly one new browser."""
    keeper = make_keeper()
    await keeper.ensure("c0")
    await backend.crash()
    launches_before = backend.launches
    turns = await asyncio.gather(*(keeper.ensure(f"c{i}") for i in range(20)))
    assert backend.launches == launches_before + 1
    assert {t.generation for t in turns} == {2}


async def test_restart_reported_once_to_every_affected_conversation(
    make_keeper: Factory, backend: SpyBackend
) -> None:
    """Each conversation with a tab or a login hears of the restart once; later turns are quiet."""
    keeper = make_keeper()
    for conv in ("billing", "research", "ops"):
        await keeper.ensure(conv)
    await sign_in(keeper, backend, "billing", "billing.example")
    await keeper.unguarded_page("research", "https://docs.example/")
    await backend.crash()

    first = {c: await keeper.ensure(c) for c in ("research", "billing", "ops")}
    assert first["research"].restarted and first["billing"].restarted
    assert not first["ops"].restarted  # no tab, no login, no grant: not affected
    assert [str(x) for x in first["research"].lost] == ["tab:research"]
    assert [str(x) for x in first["billing"].lost] == ["login:billing.example", "tab:billing"]
    for c in ("research", "billing", "ops"):
        assert not (await keeper.ensure(c)).restarted


async def test_grant_holder_hears_of_the_lost_login_but_never_of_another_tab(
    make_keeper: Factory, backend: SpyBackend
) -> None:
    """A conversation granted a login learns it was lost; it is never told of another's tab."""
    keeper = make_keeper(
        grants=[Grant("billing", "billing.example"), Grant("audit", "billing.example")]
    )
    await keeper.ensure("billing")
    await sign_in(keeper, backend, "billing", "billing.example")
    await backend.crash()
    turn = await keeper.ensure("audit")
    assert turn.restarted
    assert [str(x) for x in turn.lost] == ["login:billing.example"]
    assert turn.lost[0].owner == "billing"


async def test_lost_items_carry_owner_time_generation_and_last_url(
    make_keeper: Factory, backend: SpyBackend, clock: FakeClock
) -> None:
    """A lost tab reports its last verified URL; a lost login who recorded it and when."""
    keeper = make_keeper()
    await keeper.ensure("billing")
    recorded_at = clock.now()
    await sign_in(keeper, backend, "billing", "billing.example")
    clock.advance(60)
    await keeper.unguarded_page("billing", "https://billing.example/invoices/2026-09")
    await backend.crash()
    turn = await keeper.ensure("billing")
    login, tab = turn.lost
    assert login == Lost(
        kind="login",
        name="billing.example",
        owner="billing",
        when=recorded_at,
        generation=1,
        cause="gone",
    )
    assert tab.kind == "tab" and tab.owner == "billing" and tab.generation == 1
    assert tab.last_url == "https://billing.example/invoices/2026-09"
    assert turn.lost_tab == tab and turn.lost_logins == (login,)
    assert turn.previous_generation == 1


async def test_persistent_login_surviving_a_clean_close_is_flagged_for_revalidation(
    make_keeper: Factory, backend: SpyBackend, clock: FakeClock
) -> None:
    """With logins kept on idle close, a persistent cookie survives: not lost, but re-validate."""
    keeper = make_keeper(login_settings=LoginSettings(keep_on_idle_close=True))
    await keeper.ensure("billing")
    await sign_in(keeper, backend, "billing", "billing.example", persistent=True)
    clock.advance(timedelta(minutes=11))
    report = await keeper.sweep()
    assert report.closed_browser is not None
    turn = await keeper.ensure("billing")
    assert turn.restarted
    assert [str(x) for x in turn.lost] == ["tab:billing"]
    assert turn.revalidate == ("billing.example",)
    decision = keeper.decide("billing", "billing.example", "write", assumes_login=True)
    assert decision.outcome == "act" and decision.needs_revalidation
    keeper.confirm_login("billing", "billing.example")
    assert not keeper.decide("billing", "billing.example").needs_revalidation


async def test_session_cookie_dies_with_a_clean_close(
    make_keeper: Factory, backend: SpyBackend, clock: FakeClock
) -> None:
    """Keeping logins on idle close does not save a session cookie: Chromium drops it."""
    keeper = make_keeper(login_settings=LoginSettings(keep_on_idle_close=True))
    await keeper.ensure("billing")
    await sign_in(keeper, backend, "billing", "billing.example", persistent=False)
    clock.advance(timedelta(minutes=11))
    await keeper.sweep()
    turn = await keeper.ensure("billing")
    assert [str(x) for x in turn.lost] == ["login:billing.example", "tab:billing"]


async def test_replaced_cookie_is_reported_as_a_replaced_login(
    make_keeper: Factory, backend: SpyBackend, clock: FakeClock
) -> None:
    """Same cookie name, another value after a restart: the login is lost, cause 'replaced'."""
    keeper = make_keeper(login_settings=LoginSettings(keep_on_idle_close=True))
    await keeper.ensure("billing")
    await sign_in(keeper, backend, "billing", "billing.example", persistent=True)
    clock.advance(timedelta(minutes=11))
    await keeper.sweep()
    # Someone signs in to another account in the profile between the two browsers.
    backend.edit_profile(
        lambda c: attrs.evolve(c, value="another-account") if c.name == "session" else c
    )
    turn = await keeper.ensure("billing")
    assert turn.lost[0].cause == "replaced" and str(turn.lost[0]) == "login:billing.example"
    assert keeper.decide("billing", "billing.example").outcome == "need_login"


async def test_two_restarts_before_a_turn_are_reported_once_together(
    make_keeper: Factory, backend: SpyBackend
) -> None:
    """A conversation that slept through two restarts hears once, with what it lost."""
    keeper = make_keeper()
    await keeper.ensure("research")
    await keeper.unguarded_page("research", "https://docs.example/a")
    await backend.crash()
    await keeper.ensure("other")
    await backend.crash()
    await keeper.ensure("other")
    turn = await keeper.ensure("research")
    assert turn.restarted and turn.generation == 3 and turn.previous_generation == 1
    assert [str(x) for x in turn.lost] == ["tab:research"]
    assert not (await keeper.ensure("research")).restarted


async def test_failed_launch_changes_nothing_and_the_next_ensure_retries(
    signed_in: SessionKeeper[FakePage], backend: SpyBackend
) -> None:
    """A launch error reaches the caller; the restart facts are still delivered later."""
    keeper = signed_in
    await backend.crash()
    backend.fail_next_launch = BrowserLaunchError("no browser today")
    with pytest.raises(BrowserLaunchError):
        await keeper.ensure("billing")
    assert keeper.generation == 1
    turn = await keeper.ensure("billing")
    assert turn.restarted and turn.generation == 2
    assert [str(x) for x in turn.lost] == ["login:billing.example", "tab:billing"]


async def test_browser_lost_callback_fires_from_the_crash_event(
    make_keeper: Factory, backend: SpyBackend
) -> None:
    """on_browser_lost hears of a crash from the browser's event, before any ensure()."""
    heard: list[BrowserLost] = []
    keeper = make_keeper(on_browser_lost=heard.append)
    await keeper.ensure("billing")
    await backend.crash()
    assert [(x.browser_id, x.cause) for x in heard] == [("browser-1", "crashed")]
    assert not keeper.alive


async def test_ensure_after_close_raises_keeper_closed(make_keeper: Factory) -> None:
    """Using a keeper you closed is your bug: KeeperClosedError, not a browser error."""
    keeper = make_keeper()
    await keeper.ensure("billing")
    await keeper.aclose()
    with pytest.raises(KeeperClosedError):
        await keeper.ensure("billing")
    await keeper.aclose()  # idempotent


async def test_tab_after_a_restart_requires_ensure_first(
    make_keeper: Factory, backend: SpyBackend
) -> None:
    """A conversation cannot reach for its tab after a restart it has not been told about."""
    from session_keeper.errors import BrowserGoneError

    keeper = make_keeper()
    await keeper.ensure("billing")
    await keeper.unguarded_page("billing", "https://billing.example/")
    await backend.crash()
    with pytest.raises(BrowserGoneError):
        await keeper.unguarded_page("billing")
    await keeper.ensure("research")  # relaunches; billing still not told
    with pytest.raises(BrowserGoneError, match="call ensure"):
        await keeper.unguarded_page("billing")
    assert (await keeper.ensure("billing")).restarted
    page = await keeper.unguarded_page("billing")
    assert page.url == "about:blank"


async def test_tab_is_kept_until_navigated(make_keeper: Factory) -> None:
    """tab() returns the same page each time; url= navigates it and records the verified URL."""
    keeper = make_keeper()
    await keeper.ensure("billing")
    page = await keeper.unguarded_page("billing", "https://billing.example/")
    assert await keeper.unguarded_page("billing") is page
    assert (await keeper.unguarded_page("billing", "https://billing.example/invoices")) is page
    assert keeper.last_verified_url("billing") == "https://billing.example/invoices"
    await page.goto("https://billing.example/card")
    assert keeper.mark_verified("billing") == "https://billing.example/card"
    assert keeper.has_tab("billing") and not keeper.has_tab("research")


async def test_launch_hooks_see_every_new_browser_before_any_page(
    make_keeper: Factory, backend: SpyBackend
) -> None:
    """add_launch_hook() runs for each generation, before the keeper opens a page in it."""
    keeper = make_keeper()
    seen: list[tuple[int, int]] = []

    async def hook(session: object, generation: int) -> None:
        assert isinstance(session, FakeSession)
        seen.append((generation, len(session.pages("billing"))))

    keeper.add_launch_hook(hook)
    await keeper.ensure("billing")
    await keeper.unguarded_page("billing", "https://billing.example/")
    await backend.crash()
    await keeper.ensure("billing")
    assert seen == [(1, 0), (2, 0)]
