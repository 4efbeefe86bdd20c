"""ensure() on real Chromium when the browser it starts dies before it is guarded."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from session_keeper import Guard, LoginSettings, SessionKeeper
from session_keeper._browser.backend import DEATH_BOUND_S
from session_keeper.errors import BrowserLaunchError

from ..conftest import BackendFactory, shared_driver_backend, sigkill

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = pytest.mark.chromium

KEY = bytes(range(32))

#: DEATH_BOUND_S plus slack for a loaded 2-core machine: catches a hang, measures nothing.
HANG_LIMIT_S = DEATH_BOUND_S + 4


async def test_a_browser_killed_before_the_guard_is_installed_is_a_launch_error(
    playwright_backend: BackendFactory,
) -> None:
    """Chromium SIGKILLed between launch and the Guard's launch hook: ensure() raises
    BrowserLaunchError at once (no raw Playwright error, no hang); the next one starts."""
    backend = playwright_backend()
    keeper = SessionKeeper(backend, login_settings=LoginSettings(fingerprint_key=KEY))
    kills = iter([True, False])

    async def kill_first(session: Any, generation: int) -> None:
        if next(kills):
            await sigkill(session)  # the death is known before the Guard's hook runs

    keeper.add_launch_hook(kill_first)
    Guard(keeper)  # its hook drives the dead browser's context through Playwright
    async with keeper:
        ensuring = asyncio.ensure_future(keeper.ensure("billing"))
        try:
            await asyncio.wait([ensuring], timeout=HANG_LIMIT_S)
            assert ensuring.done(), "ensure() still waits on a browser that died"
        finally:
            ensuring.cancel()
        with pytest.raises(BrowserLaunchError):
            ensuring.result()
        turn = await keeper.ensure("billing")
        assert turn.generation == 1 and keeper.alive
        assert backend.launches == 2
