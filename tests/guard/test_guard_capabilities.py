"""The Guard asks a browser session for what it can do (a capability protocol), never for
its class: a session of another class that offers an interceptable context is guarded."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import Page

from session_keeper import Guard, PlaywrightBackend
from session_keeper.seams import BrowserSession
from session_keeper.testing import LocalSites

from ..conftest import BackendFactory, shared_driver_backend
from .conftest import billing_keeper, sign_in_billing, with_login

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = pytest.mark.chromium


class _Wrapped:
    """A session of its own class (not a PlaywrightSession subclass) over a real one."""

    def __init__(self, inner: BrowserSession[Page]) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _WrappingBackend:
    """A backend whose sessions are :class:`_Wrapped`."""

    def __init__(self, inner: PlaywrightBackend) -> None:
        self.inner = inner

    async def launch(self) -> Any:
        return _Wrapped(await self.inner.launch())

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_a_session_of_another_class_with_an_interceptable_context_is_guarded(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """A backend's own session class is enforced on when it offers the capability: a
    stray page of it cannot carry the login."""
    backend = _WrappingBackend(playwright_backend())
    keeper = billing_keeper(backend)
    guard = Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, sites)
        assert guard.enforcing
        session = backend.inner.current
        assert session is not None
        mark = len(sites.requests("billing.example"))
        stray = await session.context.new_page()  # not opened through the keeper
        await stray.goto(sites.url("billing.example", "/invoices"))
        await stray.wait_for_selector("#session-keeper-blocked", state="attached")
        assert with_login(sites, mark) == 0
    assert any(b.rule == "unowned" for b in guard.blocks)
