"""A Guard's lifetime: it ends when it is closed or its keeper is, without the garbage collector.

The keeper holds its one Guard and closes it as it closes; ``aclose()`` ends it earlier.
A closed Guard hears no change of the process's surfaces and its browser pauses nothing
for it. Each test that closes something runs with the garbage collector off: what it
proves cannot come from a collected object.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from session_keeper import Guard, SessionKeeper
from session_keeper._util.surfaces import PROCESS_SURFACES, serve_surface
from session_keeper.errors import GuardAlreadyAttached, GuardUnsupported, NavigationBlocked
from session_keeper.testing import FakeBackend, FakeClock

from ..conftest import BackendFactory
from .conftest import billing_keeper, counting_server


@contextlib.contextmanager
def collector_off() -> Iterator[None]:
    """The garbage collector stays off for the block: nothing is freed by it meanwhile."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class _Counter(BaseHTTPRequestHandler):
    arrivals: list[str]

    def do_GET(self) -> None:
        if self.path != "/favicon.ico":  # Chromium asks for a tab's icon when it likes
            self.arrivals.append(self.path)
        body = b"<title>served</title>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


def _stream_to(port: int, path: str) -> str:
    """JS that opens a WebSocketStream to ``port`` and gives its handshake time to arrive."""
    url = f"ws://127.0.0.1:{port}{path}"
    return f"new Promise(r => {{ new WebSocketStream('{url}'); setTimeout(r, 1500); }})"


@pytest.mark.chromium
async def test_a_closed_guard_hears_no_surface_change_and_its_browser_pauses_nothing(
    playwright_backend: BackendFactory, tmp_path: Path
) -> None:
    """After aclose() on a running browser: the Guard is off the process's surfaces and the
    keeper, and a surface it refused (a navigation, a page's WebSocketStream), or one that
    starts later, is reached."""
    with (
        collector_off(),
        counting_server(_Counter) as (first, at_first),
        counting_server(_Counter) as (later, at_later),
    ):
        keeper = billing_keeper(playwright_backend(tmp_path / "profile"))
        subscribers = PROCESS_SURFACES.subscribers
        guard = Guard(keeper)
        async with keeper:
            await keeper.ensure("research")
            tab = await keeper.tab("research")
            with serve_surface("other", "127.0.0.1", first):
                assert PROCESS_SURFACES.subscribers == subscribers + 1
                await guard.settle()
                # A WebSocketStream no route sees: only the page's socket rules stop it.
                await tab.evaluate(_stream_to(first, "/socket-refused"))
                with pytest.raises(NavigationBlocked):
                    await tab.goto(f"http://127.0.0.1:{first}/refused")
                blocks = len(guard.blocks)
                await guard.aclose()
                assert guard.closed and not guard.enforcing
                assert keeper.navigation_guard is None
                assert PROCESS_SURFACES.subscribers == subscribers
                await tab.goto(f"http://127.0.0.1:{first}/after")
                await tab.evaluate(_stream_to(first, "/socket-after"))
                with serve_surface("other", "127.0.0.1", later):
                    await asyncio.sleep(0.1)  # a Guard still listening would act now
                    await tab.goto(f"http://127.0.0.1:{later}/after")
            assert len(guard.blocks) == blocks
            await guard.aclose()  # idempotent
    assert at_first == ["/after", "/socket-after"]
    assert at_later == ["/after"]


@pytest.mark.chromium
async def test_closing_the_keeper_ends_its_guards_subscriptions_and_link(
    playwright_backend: BackendFactory, tmp_path: Path
) -> None:
    """The keeper's close closes its Guard: off the process's surfaces, detached, inactive."""
    with collector_off():
        keeper = billing_keeper(playwright_backend(tmp_path / "profile"))
        subscribers = PROCESS_SURFACES.subscribers
        guard = Guard(keeper)
        async with keeper:
            await keeper.ensure("research")
            assert guard.enforcing and keeper.navigation_guard is guard
            assert PROCESS_SURFACES.subscribers == subscribers + 1
        assert guard.closed and not guard.enforcing
        assert keeper.navigation_guard is None
        assert PROCESS_SURFACES.subscribers == subscribers


async def test_a_second_guard_on_one_keeper_is_refused_until_the_first_closes() -> None:
    """Guard(keeper) on a keeper with an open Guard raises GuardAlreadyAttached and adds no
    hook; once the first closed (async with), another may attach."""
    backend = FakeBackend()
    keeper = SessionKeeper(backend, clock=FakeClock())
    async with Guard(keeper) as first:
        with pytest.raises(GuardAlreadyAttached):
            Guard(keeper)
        assert keeper.navigation_guard is first
    assert first.closed and keeper.navigation_guard is None
    async with keeper:
        # Neither the closed Guard nor the refused one left a launch hook: FakeBackend's
        # browser (which no Guard can enforce on) starts.
        await keeper.ensure("research")
        second = Guard(keeper)
        assert keeper.navigation_guard is second
        assert backend.current is not None
        await backend.current.close()
        with pytest.raises(GuardUnsupported):  # its launch hook runs at the next launch
            await keeper.ensure("research")
    assert second.closed
