"""A login recorded while the browser dies vouches for nothing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

from session_keeper import Grant, SessionKeeper
from session_keeper._model.cookies import Cookie
from session_keeper.errors import BrowserGoneError
from session_keeper.testing import FakeBackend, FakeClock

SITE = "billing.example"


async def test_record_login_racing_a_restart_cannot_vouch_for_a_missing_login() -> None:
    """A record_login whose cookie read straddles a crash+relaunch must not make decide() act."""
    clock, backend = FakeClock(), FakeBackend()
    async with SessionKeeper(backend, clock=clock, grants=[Grant("billing", SITE)]) as keeper:
        await keeper.ensure("billing")
        await backend.sign_in(SITE)  # a session cookie: a SIGKILL takes it
        session = backend.current
        assert session is not None
        original = session.cookies
        entered, gate = asyncio.Event(), asyncio.Event()

        async def slow_cookies() -> Sequence[Cookie]:
            jar = await original()
            entered.set()
            await gate.wait()  # the CDP answer is in flight
            return jar

        setattr(session, "cookies", slow_cookies)  # noqa: B010
        recording = asyncio.create_task(keeper.record_login("billing", SITE))
        await entered.wait()
        await backend.crash()
        await keeper.ensure("research")  # another conversation relaunches: browser-2
        gate.set()
        with contextlib.suppress(BrowserGoneError):
            await recording
        new = backend.current
        assert new is not None
        assert not [c for c in await new.cookies() if c.applies_to(SITE)]  # nobody signed in
        decision = keeper.decide("billing", SITE, "write")
        assert decision.outcome != "act", decision
