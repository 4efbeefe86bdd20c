"""Fixtures for keeper tests: a fake world whose browser calls can be counted."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

import pytest

from session_keeper import Grant, IdleTimeouts, SessionKeeper
from session_keeper.testing import FakeBackend, FakeClock, FakePage, FakeSession


class SpyBackend(FakeBackend):
    """A FakeBackend that counts every call that would be a browser round trip."""

    def __init__(self) -> None:
        super().__init__()
        self.round_trips: list[str] = []
        self.fail_next_launch: BaseException | None = None

    async def launch(self) -> FakeSession:
        self.round_trips.append("launch")
        if self.fail_next_launch is not None:
            exc, self.fail_next_launch = self.fail_next_launch, None
            raise exc
        session = await super().launch()
        spy = self

        for name in ("cookies", "add_cookies", "clear_cookies", "open_page", "goto", "close_page"):
            original = getattr(session, name)

            def counted(*args: Any, _original: Any = original, _name: str = name) -> Any:
                spy.round_trips.append(_name)
                return _original(*args)

            setattr(session, name, counted)
        return session


Factory = Callable[..., SessionKeeper[FakePage]]


@pytest.fixture
def clock() -> FakeClock:
    """A fake clock at the default start."""
    return FakeClock()


@pytest.fixture
def backend() -> SpyBackend:
    """A fake backend that counts round trips."""
    return SpyBackend()


@pytest.fixture
async def make_keeper(clock: FakeClock, backend: SpyBackend) -> AsyncIterator[Factory]:
    """Build keepers on the shared fake clock and backend; close them afterwards."""
    made: list[SessionKeeper[FakePage]] = []

    def factory(**kw: Any) -> SessionKeeper[FakePage]:
        kw.setdefault("clock", clock)
        kw.setdefault("grants", [Grant("billing", "billing.example")])
        kw.setdefault("idle_timeouts", IdleTimeouts(browser=timedelta(minutes=10)))
        keeper = SessionKeeper(kw.pop("backend", backend), **kw)
        made.append(keeper)
        return keeper

    yield factory
    for k in made:
        await k.aclose()


@pytest.fixture
def keeper(make_keeper: Factory) -> SessionKeeper[FakePage]:
    """A keeper with the seed's grant (billing may use billing.example)."""
    return make_keeper()


async def sign_in(
    keeper: SessionKeeper[FakePage],
    backend: FakeBackend,
    conversation: str,
    site: str,
    *,
    persistent: bool = False,
) -> None:
    """Play a human finishing a sign-in for ``conversation`` on ``site``."""
    await keeper.unguarded_page(conversation, f"https://{site}/login")
    await backend.sign_in(site, persistent=persistent)
    await keeper.record_login(conversation, site)


@pytest.fixture
async def signed_in(make_keeper: Factory, backend: SpyBackend) -> SessionKeeper[FakePage]:
    """A keeper whose billing conversation signed in to billing.example (a session cookie)."""
    keeper = make_keeper()
    await keeper.ensure("billing")
    await sign_in(keeper, backend, "billing", "billing.example")
    return keeper
