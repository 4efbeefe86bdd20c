"""tab() under concurrency and under a dying browser, on the fake backend.

The same guarantees on real Chromium: ``tests/real/test_tabs_on_chromium.py``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from session_keeper import Durability, SessionKeeper
from session_keeper._browser.backend import DEATH_BOUND_S
from session_keeper.errors import BrowserGoneError, NavigationBlocked
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakePage, held_tab_locks

from .conftest import Factory, SpyBackend

#: DEATH_BOUND_S plus slack for a loaded machine: catches a hang, measures nothing.
HANG_LIMIT_S = DEATH_BOUND_S + 4


async def test_concurrent_tab_calls_of_one_conversation_share_one_page(
    keeper: SessionKeeper[FakePage], backend: SpyBackend
) -> None:
    """Eight concurrent tab(conv) calls open one page in the browser and all return it."""
    await keeper.ensure("billing")
    pages = await asyncio.gather(*(keeper.unguarded_page("billing") for _ in range(8)))
    assert backend.current is not None
    assert len(backend.current.pages("billing")) == 1
    assert {id(p) for p in pages} == {id(backend.current.pages("billing")[0])}
    assert backend.round_trips.count("open_page") == 1


async def test_concurrent_navigations_of_one_conversation_run_in_order_on_one_page(
    keeper: SessionKeeper[FakePage], backend: SpyBackend
) -> None:
    """Concurrent tab(conv, url) calls are served one at a time; the last one decides the URL."""
    await keeper.ensure("billing")
    urls = [f"https://billing.example/invoices?page={i}" for i in range(6)]
    pages = await asyncio.gather(*(keeper.unguarded_page("billing", u) for u in urls))
    assert backend.current is not None
    (page,) = backend.current.pages("billing")
    assert all(p is page for p in pages)
    assert page.url == urls[-1]
    assert keeper.last_verified_url("billing") == urls[-1]


async def test_tab_calls_of_other_conversations_do_not_wait_for_a_stalled_one(
    keeper: SessionKeeper[FakePage], backend: SpyBackend
) -> None:
    """A navigation to a site that never answers holds up only its own conversation."""
    await keeper.ensure("billing")
    await keeper.ensure("research")
    backend.stall("slow.example")
    stuck = asyncio.ensure_future(keeper.unguarded_page("billing", "https://slow.example/"))
    await asyncio.sleep(0.01)
    page = await asyncio.wait_for(
        keeper.unguarded_page("research", "https://docs.example/"), HANG_LIMIT_S
    )
    assert page.url == "https://docs.example/"
    assert not stuck.done()
    backend.unstall("slow.example")
    assert (await stuck).url == "https://slow.example/"


async def test_tab_calls_waiting_when_the_browser_dies_raise_browser_gone(
    make_keeper: Factory, backend: SpyBackend
) -> None:
    """A crash during tab(): the navigating call and the calls queued behind it all raise
    BrowserGoneError; ensure() then relaunches once and reports the tab lost."""
    deaths: list[object] = []
    keeper = make_keeper(on_browser_lost=deaths.append)
    await keeper.ensure("billing")
    await keeper.unguarded_page("billing", "https://billing.example/invoices")
    backend.stall("slow.example")
    calls = [asyncio.ensure_future(keeper.unguarded_page("billing", "https://slow.example/"))]
    calls += [asyncio.ensure_future(keeper.unguarded_page("billing")) for _ in range(3)]
    await asyncio.sleep(0.01)
    assert backend.waiting("slow.example") == 1
    await backend.crash()
    assert len(deaths) == 1
    _, pending = await asyncio.wait(calls, timeout=HANG_LIMIT_S)
    assert not pending, f"{len(pending)} tab() calls still wait after the crash"
    for call in calls:
        with pytest.raises(BrowserGoneError):
            call.result()
    launches = backend.launches
    turn = await keeper.ensure("billing")
    assert backend.launches == launches + 1
    assert turn.restarted
    assert [str(x) for x in turn.lost] == ["tab:billing"]
    assert turn.lost_tab is not None
    assert turn.lost_tab.last_url == "https://billing.example/invoices"


async def test_tab_keeps_no_lock_for_conversations_not_in_a_call(
    keeper: SessionKeeper[FakePage],
) -> None:
    """The per-conversation serialisation holds state only while a conversation has a call."""
    conversations = [f"c{i}" for i in range(50)]
    for c in conversations:
        await keeper.ensure(c)
    await asyncio.gather(
        *(keeper.unguarded_page(c, f"https://docs.example/{c}") for c in conversations)
    )
    assert held_tab_locks(keeper) == 0


async def test_a_tab_navigates_to_about_blank_but_never_off_the_web(
    make_keeper: Factory, tmp_path: Path
) -> None:
    """about:blank is a page like any other; data:, file: and chrome: are refused with
    NavigationBlocked (rule 'scheme') and stored as a block, without a Guard too."""
    async with SqliteStore(tmp_path / "k.db") as store:
        keeper = make_keeper(durability=Durability(store=store))
        async with keeper:
            await keeper.ensure("billing")
            await keeper.unguarded_page("billing", "about:blank")
            assert keeper.last_verified_url("billing") == "about:blank"
            for url in ("data:text/html,<p>hi</p>", "file:///etc/passwd", "chrome://settings"):
                with pytest.raises(NavigationBlocked) as caught:
                    await keeper.tab("billing", url)
                assert caught.value.block.rule == "scheme"
                assert keeper.last_verified_url("billing") == "about:blank"
        kinds = [e.kind for e in await store.events()]
    assert kinds.count("guard_block") == 3
