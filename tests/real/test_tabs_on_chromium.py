"""tab() on real Chromium: one page per conversation, typed errors only, nothing hangs.

A kill is a real SIGKILL of the browser's main process, sent from outside as a crash
would be. Kill points are random; the seed is printed with every failure and can be
replayed with ``SESSION_KEEPER_KILL_SEED=<seed>``.
"""

from __future__ import annotations

import asyncio
import os
import random
import secrets
import signal
import socket
import time
from collections.abc import Awaitable
from typing import Any

import pytest
from playwright.async_api import Page

from session_keeper import LoginSettings, PlaywrightBackend, SessionKeeper
from session_keeper._browser.backend import DEATH_BOUND_S
from session_keeper.errors import BrowserGoneError, NavigationError, SessionKeeperError
from session_keeper.facts import BrowserLost
from session_keeper.testing import LocalSites

from ..conftest import BackendFactory, shared_driver_backend

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = pytest.mark.chromium

KEY = bytes(range(32))

#: DEATH_BOUND_S plus slack for a loaded 2-core machine: catches a hang, measures nothing.
HANG_LIMIT_S = DEATH_BOUND_S + 4

SEED = int(os.environ.get("SESSION_KEEPER_KILL_SEED") or secrets.randbelow(2**32))

#: Every latency from "death known" to a call's end, over all trials of this run.
LATENCIES: list[float] = []


def open_pages(backend: PlaywrightBackend) -> list[Page]:
    """The browser's own list of open pages (not the keeper's view)."""
    assert backend.current is not None
    return [p for p in backend.current.context.pages if not p.is_closed()]


async def test_one_conversation_has_one_page_whatever_the_concurrency(
    playwright_backend: BackendFactory,
) -> None:
    """Eight concurrent tab(conv) calls leave exactly one new page in the browser context."""
    backend = playwright_backend()
    async with SessionKeeper(backend, login_settings=LoginSettings(fingerprint_key=KEY)) as keeper:
        await keeper.ensure("billing")
        before = open_pages(backend)
        pages = await asyncio.gather(*(keeper.unguarded_page("billing") for _ in range(8)))
        after = open_pages(backend)
        assert len(after) == len(before) + 1
        (new,) = [p for p in after if p not in before]
        assert all(p is new for p in pages)


async def test_concurrent_navigations_of_one_conversation_end_typed_on_one_page(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """Concurrent tab(conv, url): each call succeeds or raises a typed error; one page in all."""
    backend = playwright_backend()
    async with SessionKeeper(backend, login_settings=LoginSettings(fingerprint_key=KEY)) as keeper:
        await keeper.ensure("billing")
        before = open_pages(backend)
        urls = [sites.url("docs.example", f"/guide?n={i}") for i in range(8)]
        outcomes = await asyncio.gather(
            *(keeper.unguarded_page("billing", u) for u in urls), return_exceptions=True
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                assert isinstance(outcome, SessionKeeperError), repr(outcome)
        after = open_pages(backend)
        assert len(after) == len(before) + 1
        (page,) = [p for p in after if p not in before]
        assert all(o is page for o in outcomes if not isinstance(o, BaseException))
        assert keeper.current_url("billing") == page.url


async def test_a_navigation_replaced_by_another_is_a_navigation_error(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """tab(conv, url) whose navigation another one replaces raises NavigationError, no raw error."""
    backend = playwright_backend()
    async with SessionKeeper(backend, login_settings=LoginSettings(fingerprint_key=KEY)) as keeper:
        await keeper.ensure("billing")
        page = await keeper.unguarded_page("billing")
        reached = asyncio.Event()

        def hold(route: Any) -> None:
            del route  # never answered: the navigation waits until replaced
            reached.set()

        await page.route("**/slow**", hold)
        slow = asyncio.ensure_future(
            keeper.unguarded_page("billing", sites.url("docs.example", "/slow?token=s3cr3t-value"))
        )
        await asyncio.wait_for(reached.wait(), 10)
        await page.goto(sites.url("docs.example", "/guide"))  # the page is driven directly
        with pytest.raises(NavigationError) as info:
            await asyncio.wait_for(slow, 10)
        assert "s3cr3t-value" not in str(info.value)
        assert keeper.current_url("billing") == sites.url("docs.example", "/guide")


async def test_a_failed_navigation_is_a_navigation_error_without_the_query(
    playwright_backend: BackendFactory,
) -> None:
    """A site that refuses the connection gives NavigationError, whose text drops the query."""
    with socket.socket() as probe:  # a port nobody listens on: the connection is refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    backend = playwright_backend()
    async with SessionKeeper(backend, login_settings=LoginSettings(fingerprint_key=KEY)) as keeper:
        await keeper.ensure("billing")
        with pytest.raises(NavigationError) as info:
            await keeper.unguarded_page(
                "billing", f"http://127.0.0.1:{port}/callback?code=s3cr3t-value"
            )
        assert "s3cr3t-value" not in str(info.value)
        assert f"127.0.0.1:{port}/callback" in str(info.value)
        assert keeper.has_tab("billing")  # the browser and the page live on


async def timed(call: Awaitable[Page], ends: list[float], i: int) -> Page:
    """Await ``call``; note when it ended (either way) in ``ends[i]``."""
    try:
        return await call
    finally:
        ends[i] = time.monotonic()


@pytest.mark.parametrize("concurrency", [1, 4, 12, 24])
async def test_no_tab_call_outlives_a_killed_browser(
    playwright_backend: BackendFactory, sites: LocalSites, concurrency: int
) -> None:
    """Browser SIGKILLed while tab()/tab(url) calls run: every call ends (page or
    BrowserGoneError) within the bound after the death is known; ensure() then relaunches
    once and reports each opened tab lost."""
    trials = 3
    rnd = random.Random(SEED * 100 + concurrency)
    backend = playwright_backend()
    deaths: list[float] = []
    died = asyncio.Event()

    def on_lost(_: BrowserLost) -> None:
        deaths.append(time.monotonic())
        died.set()

    # Two calls per conversation (one at level 1), so calls also queue for one page.
    conversations = [f"c{i}" for i in range(max(1, concurrency // 2))]
    in_flight_at_kill = 0
    async with SessionKeeper(
        backend, login_settings=LoginSettings(fingerprint_key=KEY), on_browser_lost=on_lost
    ) as keeper:
        for trial in range(trials):
            where = f"seed={SEED} concurrency={concurrency} trial={trial}"
            for conversation in ("anchor", *conversations):
                await keeper.ensure(conversation)
            await keeper.unguarded_page("anchor", sites.url("docs.example", "/api"))
            launches = backend.launches
            assert backend.current is not None and backend.current.pid is not None
            pid = backend.current.pid
            died.clear()
            plan = [
                (
                    conversations[i % len(conversations)],
                    sites.url("docs.example", f"/guide?t={trial}&i={i}")
                    # The first call always navigates: a call on an open tab without
                    # a URL returns at once, and the kill must find one in flight.
                    if i == 0 or rnd.random() < 0.5
                    else None,
                )
                for i in range(concurrency)
            ]
            ends: list[float] = [0.0] * concurrency
            tasks = [
                asyncio.ensure_future(timed(keeper.unguarded_page(c, u), ends, i))
                for i, (c, u) in enumerate(plan)
            ]
            try:
                await asyncio.sleep(rnd.uniform(0.0, 0.05 + 0.03 * concurrency))
                in_flight_at_kill += sum(not t.done() for t in tasks)
                os.kill(pid, signal.SIGKILL)
                await asyncio.wait_for(died.wait(), 10)
                known = deaths[-1]
                left = known + HANG_LIMIT_S - time.monotonic()
                _, pending = await asyncio.wait(tasks, timeout=max(left, 0.0))
                assert not pending, (
                    f"{len(pending)} of {concurrency} tab() calls still wait "
                    f"{HANG_LIMIT_S} s after the browser's death was known ({where})"
                )
            finally:
                for t in tasks:
                    t.cancel()
            opened: set[str] = set()
            for (conversation, _), task, end in zip(plan, tasks, ends, strict=True):
                error = task.exception()
                if error is None:
                    opened.add(conversation)
                else:
                    assert isinstance(error, BrowserGoneError), f"{error!r} ({where})"
                if end > known:
                    LATENCIES.append(end - known)
            turns = await asyncio.gather(*(keeper.ensure(c) for c in ("anchor", *conversations)))
            assert backend.launches == launches + 1, where
            for turn in turns:
                # A call that failed may still have opened the page before the kill.
                lost_tabs = {x.name for x in turn.lost if x.kind == "tab"}
                assert lost_tabs <= {turn.conversation}, where
                if turn.conversation in opened | {"anchor"}:
                    assert turn.restarted and lost_tabs == {turn.conversation}, where
    assert in_flight_at_kill > 0, f"no kill hit a call in flight (seed={SEED})"
    print(
        f"\nconcurrency={concurrency} seed={SEED}: {in_flight_at_kill} calls in flight at "
        f"{trials} kills; max latency after death known "
        f"{max(LATENCIES, default=0.0) * 1000:.0f} ms over {len(LATENCIES)} calls so far"
    )
