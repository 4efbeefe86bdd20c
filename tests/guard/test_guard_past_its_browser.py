"""A Guard kept after its keeper closed, on real Chromium: it asks the closed driver nothing.

Every Guard in a process hears each change of the process's surfaces (an MCP server, a
console, a CDP endpoint starting or stopping). One whose browser and driver are gone used to
ask Chromium to pause new patterns on a session that could not answer, at every change: the
driver's closed-connection error, raised again each time with a longer traceback, was logged
with it (3,000 frames a record after a test file's worth of changes; a process attached
over CDP ended up spending seconds per connect on it).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from session_keeper import Guard, LoginSettings, SessionKeeper
from session_keeper._util.surfaces import serve_surface
from session_keeper.testing import FakeClock

from ..conftest import BackendFactory, sigkill

pytestmark = pytest.mark.chromium

CHANGES = 40


async def test_a_guard_past_its_browser_asks_the_closed_driver_nothing_at_surface_changes(
    playwright_backend: BackendFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """After the keeper (browser and driver) closed, forty surface changes log nothing at
    all: closing the keeper closed its Guard, which no longer hears the surfaces."""
    keeper, guard = guarded_keeper(playwright_backend, tmp_path)
    async with keeper:
        await keeper.ensure("research")
    caplog.set_level(logging.DEBUG, logger="session_keeper")
    # Every earlier test's Guard closed with its keeper: none may speak either.
    await surface_changes(guard, range(CHANGES))
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert [r for r in caplog.records if r.exc_info] == []
    assert [r.getMessage() for r in caplog.records if r.name == "session_keeper.guard"] == []


async def test_a_guard_whose_browser_was_killed_asks_the_dead_session_nothing(
    playwright_backend: BackendFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The keeper open, its browser SIGKILLed: forty surface changes make the Guard log no
    warning and no traceback, and after the first twenty nothing at all (it forgot the
    session once it was gone, and asks the dead one nothing). The keeper's own "browser
    gone" is the crash told, not the Guard's."""
    keeper, guard = guarded_keeper(playwright_backend, tmp_path)
    async with keeper:
        await keeper.ensure("research")
        await sigkill(keeper.backend.current)  # type: ignore[attr-defined]
        caplog.set_level(logging.DEBUG, logger="session_keeper")
        await surface_changes(guard, range(CHANGES // 2))
        said = len(caplog.records)
        await surface_changes(guard, range(CHANGES // 2, CHANGES))
    guard_records = [r for r in caplog.records if r.name == "session_keeper.guard"]
    assert [r for r in guard_records if r.levelno >= logging.WARNING or r.exc_info] == []
    assert [r.getMessage() for r in caplog.records[said:] if r.name == "session_keeper.guard"] == []


def guarded_keeper(
    playwright_backend: BackendFactory, tmp_path: Path
) -> tuple[SessionKeeper[Any], Guard]:
    """A keeper on real Chromium (not yet open) and the Guard attached to it."""
    keeper: SessionKeeper[Any] = SessionKeeper(
        playwright_backend(tmp_path / "profile"),
        clock=FakeClock(),
        login_settings=LoginSettings(fingerprint_key=bytes(32)),
    )
    return keeper, Guard(keeper)


async def surface_changes(guard: Guard, ports: range) -> None:
    """A surface starts and stops on each of ``ports`` (offset), and the Guard settles."""
    for port in ports:
        with serve_surface("other", "127.0.0.1", 20000 + port):
            await asyncio.sleep(0)
        await guard.settle()
    await asyncio.sleep(0.2)  # the updates the changes started have run
