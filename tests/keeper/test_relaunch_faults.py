"""ensure() when the browser it is starting dies during the start: a typed error, no hang."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from session_keeper._browser.backend import DEATH_BOUND_S
from session_keeper.errors import BrowserLaunchError

from .conftest import Factory, SpyBackend

#: DEATH_BOUND_S plus slack for a loaded machine: catches a hang, measures nothing.
HANG_LIMIT_S = DEATH_BOUND_S + 4


@pytest.mark.parametrize("after_crash", ["hangs", "raises"])
async def test_a_browser_dying_during_its_launch_hooks_is_a_launch_error(
    make_keeper: Factory, backend: SpyBackend, after_crash: str
) -> None:
    """A browser that dies while launch hooks run fails ensure() with BrowserLaunchError at
    once (never a hang, never the hook's raw error); the next ensure() starts a browser."""
    keeper = make_keeper()
    crashes = iter([True, False])  # the first launch's browser dies, the second lives

    async def hook(session: Any, generation: int) -> None:
        if not next(crashes):
            return
        await backend.crash()
        if after_crash == "hangs":
            await asyncio.Event().wait()  # a driver call that never answers
        raise RuntimeError("Target page, context or browser has been closed")  # driver's own

    keeper.add_launch_hook(hook)
    ensuring = asyncio.ensure_future(keeper.ensure("billing"))
    try:
        await asyncio.wait([ensuring], timeout=HANG_LIMIT_S)
        assert ensuring.done(), "ensure() still waits on a browser that died"
    finally:
        ensuring.cancel()
    with pytest.raises(BrowserLaunchError):
        ensuring.result()
    assert keeper.generation == 0
    turn = await keeper.ensure("billing")
    assert turn.generation == 1 and keeper.alive
    assert backend.launches == 2
