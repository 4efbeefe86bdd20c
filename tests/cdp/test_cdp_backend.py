"""CdpBackend on a real Chromium the keeper did not launch, reached through a cuttable proxy."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

import pytest
from playwright._impl.connection import Connection

from session_keeper import CdpBackend, Guard, LoginSettings, SessionKeeper
from session_keeper._browser.cdp_session import CdpSession
from session_keeper.errors import (
    BrowserGoneError,
    InvalidArgument,
    InvalidArgumentType,
    NavigationBlocked,
)
from session_keeper.testing import LocalSites

from ..guard.conftest import billing_keeper, sign_in_billing, with_login
from ._remote import CutProxy, RemoteChromium

pytestmark = pytest.mark.chromium

KEY = bytes(range(32))


async def until(condition: Callable[[], bool], what: str, limit: float = 20.0) -> None:
    """Wait for ``condition`` (a hang guard, not a timing assertion)."""
    for _ in range(int(limit / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"never happened: {what}")


async def cut_and_restore(proxy: CutProxy, session: CdpSession) -> None:
    """Cut the CDP socket, let the drop be noticed, restore it; wait for the first
    reconnect to end (re-adopted, or given up)."""
    proxy.cut()
    await until(lambda: session.reconnecting, "the drop noticed")
    proxy.restore()
    await until(lambda: session.reconnects == 1 or not session.alive, "reconnect ended")


def session_of(backend: CdpBackend) -> CdpSession:
    assert backend.current is not None
    return backend.current


async def test_a_cut_socket_is_not_a_restart_and_the_conversation_keeps_its_tab(
    proxy: CutProxy, sites: LocalSites
) -> None:
    """Cut-and-restore of the CDP connection: ensure() reports no restart, the same tab works."""
    backend = CdpBackend(proxy.url)
    async with SessionKeeper(backend, login_settings=LoginSettings(fingerprint_key=KEY)) as keeper:
        first = await keeper.ensure("research")
        page = await keeper.unguarded_page("research", sites.url("docs.example", "/guide"))
        url = page.url
        session = session_of(backend)
        await cut_and_restore(proxy, session)
        assert session.alive
        facts = await keeper.ensure("research")
        assert not facts.restarted
        assert facts.generation == first.generation
        assert facts.lost == ()
        again = await keeper.unguarded_page("research")
        assert again is page
        assert page.url == url
        other = sites.url("docs.example", "/")
        assert await session.goto(page, other) == other
        assert backend.launches == 1


async def test_a_new_browser_behind_the_same_endpoint_is_exactly_one_restart_with_losses(
    remote: RemoteChromium, proxy: CutProxy, sites: LocalSites
) -> None:
    """Remote browser killed and a new one started on the endpoint: one restart, tab lost."""
    backend = CdpBackend(proxy.url)
    async with SessionKeeper(backend, login_settings=LoginSettings(fingerprint_key=KEY)) as keeper:
        first = await keeper.ensure("research")
        await keeper.unguarded_page("research", sites.url("docs.example", "/guide"))
        session = session_of(backend)
        proxy.upstream_port = await remote.restart_fresh()
        await until(lambda: not session.alive, "the old session declared gone")
        assert session.cause == "crashed"
        facts = await keeper.ensure("research")
        assert facts.restarted
        assert facts.generation == first.generation + 1
        assert [str(x) for x in facts.lost] == ["tab:research"]
        later = await keeper.ensure("research")
        assert not later.restarted
        assert backend.launches == 2


async def test_a_provider_endpoint_minting_a_new_url_per_connection_reconnects_without_restart(
    remote: RemoteChromium, sites: LocalSites
) -> None:
    """An async endpoint callable giving a fresh URL per connection: a cut is still no restart."""
    minted: list[CutProxy] = []

    async def mint() -> str:
        fresh = CutProxy(remote.port)
        await fresh.start()
        minted.append(fresh)
        return fresh.url

    released: list[int] = []

    async def release() -> None:
        released.append(len(minted))

    backend = CdpBackend(mint, release=release)
    try:
        async with SessionKeeper(
            backend, login_settings=LoginSettings(fingerprint_key=KEY)
        ) as keeper:
            await keeper.ensure("research")
            page = await keeper.unguarded_page("research", sites.url("docs.example", "/guide"))
            session = session_of(backend)
            minted[0].cut()
            await until(lambda: session.reconnects == 1 or not session.alive, "reconnect ended")
            facts = await keeper.ensure("research")
            assert not facts.restarted
            assert len({p.url for p in minted}) == len(minted) == 2
            assert await keeper.unguarded_page("research") is page
            assert session.page_is_open(page)
        assert released == [2]
    finally:
        for p in minted:
            await p.stop()


async def test_a_pending_call_raises_browser_gone_when_the_remote_browser_dies(
    remote: RemoteChromium, proxy: CutProxy
) -> None:
    """A navigation waiting on a server that never answers ends BrowserGoneError on death."""
    held: list[asyncio.StreamWriter] = []
    server = await asyncio.start_server(lambda r, w: held.append(w), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    backend = CdpBackend(proxy.url, reconnect_attempts=2)
    try:
        session = await backend.launch()
        page = await session.open_page("research")
        pending = asyncio.ensure_future(session.goto(page, f"http://127.0.0.1:{port}/hang"))
        await asyncio.sleep(0.3)
        assert not pending.done()
        await remote.kill()
        with pytest.raises(BrowserGoneError):
            await asyncio.wait_for(pending, 30)
        await until(lambda: not session.alive, "declared gone")
        with pytest.raises(BrowserGoneError):
            await session.open_page("research")
    finally:
        for writer in held:
            writer.close()
        server.close()
        await backend.aclose()


async def test_the_guard_blocks_a_navigation_without_grant_on_a_cdp_browser(
    proxy: CutProxy, sites: LocalSites
) -> None:
    """The Guard's routes work on a CDP-attached browser: a grant-less site is blocked."""
    keeper = billing_keeper(CdpBackend(proxy.url))
    Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, sites)
        await keeper.ensure("research")
        tab = await keeper.tab("research")
        await tab.goto(sites.url("docs.example", "/"))
        with pytest.raises(NavigationBlocked) as blocked:
            await tab.goto(sites.url("billing.example", "/invoices"))
        assert blocked.value.block.site == "billing.example"


async def test_a_cdp_browsers_pages_cannot_reach_the_endpoint_that_drives_it(
    proxy: CutProxy, sites: LocalSites
) -> None:
    """The CDP endpoint is the keeper's own surface: a tab's navigation to it is refused
    (rule 'self'), and so is a page's own fetch of its /json/version."""
    keeper = billing_keeper(CdpBackend(proxy.url))
    guard = Guard(keeper)
    async with keeper:
        await keeper.ensure("research")
        tab = await keeper.tab("research", sites.url("docs.example", "/"))
        endpoint = proxy.url.rstrip("/")
        with pytest.raises(NavigationBlocked) as blocked:
            await tab.goto(endpoint + "/json/version")
        assert blocked.value.block.rule == "self"
        since = len(guard.blocks)
        answer = await tab.evaluate(
            "url => fetch(url).then(r => r.status, () => 'refused')", endpoint + "/json/list"
        )
        block = await guard.wait_for_block(lambda b: b.path == "/json/list", since=since)
        assert block.rule == "self"
        assert answer in ("refused", 403)


async def test_a_cut_under_the_guard_is_not_a_restart_and_the_guard_still_enforces_per_grant(
    proxy: CutProxy, sites: LocalSites
) -> None:
    """Guard re-installed on re-adoption: no restart; blocked/admitted per grant, on the server."""
    backend = CdpBackend(proxy.url)
    keeper = billing_keeper(backend)
    guard = Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, sites)
        first = await keeper.ensure("research")
        research = await keeper.tab("research")
        await research.goto(sites.url("docs.example", "/"))
        billing = await keeper.tab("billing")
        session = session_of(backend)
        mark = len(sites.requests("billing.example"))
        proxy.cut()
        await until(lambda: session._reconnecting is not None, "the drop noticed")
        # Asked for while the socket is cut: it waits for the re-adoption, then is judged.
        during = asyncio.ensure_future(research.goto(sites.url("billing.example", "/invoices")))
        await asyncio.sleep(0.2)
        assert not during.done()
        proxy.restore()
        await until(lambda: session.reconnects == 1 or not session.alive, "reconnect ended")
        assert session.alive and guard.enforcing
        with pytest.raises(NavigationBlocked):
            await during
        facts = await keeper.ensure("research")
        assert not facts.restarted and facts.generation == first.generation
        with pytest.raises(NavigationBlocked):
            await research.goto(sites.url("billing.example", "/invoices"))
        # A request the page itself makes (not the keeper) meets the re-installed Guard too.
        page = await keeper.unguarded_page("research")
        since = len(guard.blocks)
        await page.evaluate(
            "url => fetch(url, {credentials: 'include', mode: 'no-cors'}).catch(() => null)",
            sites.url("billing.example", "/statement"),
        )
        block = await guard.wait_for_block(
            lambda b: b.path == "/statement" and b.conversation == "research", since=since
        )
        assert block.site == "billing.example"
        assert with_login(sites, mark) == 0
        await billing.goto(sites.url("billing.example", "/invoices"))
        assert with_login(sites, mark) >= 1
        assert backend.launches == 1


async def test_a_cut_whose_guard_cannot_be_reinstalled_fails_closed_as_a_restart(
    proxy: CutProxy, sites: LocalSites
) -> None:
    """A re-adoption callback that fails: the generation ends, the tab is lost, still guarded."""
    backend = CdpBackend(proxy.url)
    keeper = billing_keeper(backend)
    Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, sites)
        first = await keeper.ensure("research")
        tab = await keeper.tab("research")
        await tab.goto(sites.url("docs.example", "/"))
        session = session_of(backend)

        async def broken(_session: CdpSession) -> None:
            raise RuntimeError("cannot re-install")

        session.on_readopt(broken)
        proxy.cut()
        await until(lambda: session.reconnecting, "the drop noticed")
        proxy.restore()
        await until(lambda: not session.alive, "the guarded generation ended")
        facts = await keeper.ensure("research")
        assert facts.restarted and facts.generation == first.generation + 1
        assert [str(x) for x in facts.lost] == ["tab:research"]
        tab = await keeper.tab("research")
        with pytest.raises(NavigationBlocked):
            await tab.goto(sites.url("billing.example", "/invoices"))


async def test_a_cut_with_routes_nobody_reinstalls_fails_closed_as_a_restart(
    proxy: CutProxy, sites: LocalSites
) -> None:
    """Routes of the application's own (no re-adoption callback) die with the socket: restart."""
    backend = CdpBackend(proxy.url)
    keeper = SessionKeeper(backend, login_settings=LoginSettings(fingerprint_key=KEY))

    async def route_everything(session: object, _generation: int) -> None:
        assert isinstance(session, CdpSession)
        await session.context.route("**/*", lambda route: route.continue_())

    keeper.add_launch_hook(route_everything)
    async with keeper:
        first = await keeper.ensure("research")
        await keeper.unguarded_page("research", sites.url("docs.example", "/guide"))
        session = session_of(backend)
        proxy.cut()
        await until(lambda: session._reconnecting is not None, "the drop noticed")
        proxy.restore()
        await until(lambda: not session.alive, "the routed generation ended")
        facts = await keeper.ensure("research")
        assert facts.restarted and facts.generation == first.generation + 1
        assert [str(x) for x in facts.lost] == ["tab:research"]


async def test_a_page_that_left_for_a_forbidden_site_during_a_cut_fails_closed_as_a_restart(
    proxy: CutProxy, sites: LocalSites
) -> None:
    """Nothing watched the page during the cut: if it now shows a forbidden site, restart."""
    backend = CdpBackend(proxy.url, reconnect_attempts=10)
    keeper = billing_keeper(backend)
    guard = Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, sites)
        first = await keeper.ensure("research")
        tab = await keeper.tab("research")
        await tab.goto(sites.url("docs.example", "/"))
        page = await keeper.unguarded_page("research")
        session = session_of(backend)
        since = len(guard.blocks)
        # The page itself leaves for billing a moment after the socket is cut.
        await page.evaluate(
            "url => setTimeout(() => { location.href = url }, 300)",
            sites.url("billing.example", "/invoices"),
        )
        proxy.cut()
        await until(lambda: session._reconnecting is not None, "the drop noticed")
        await asyncio.sleep(1.0)
        proxy.restore()
        await until(lambda: not session.alive, "the generation ended")
        block = await guard.wait_for_block(
            lambda b: b.conversation == "research" and b.path == "/invoices", since=since
        )
        assert block.site == "billing.example"
        facts = await keeper.ensure("research")
        assert facts.restarted and facts.generation == first.generation + 1
        assert [str(x) for x in facts.lost] == ["tab:research"]


async def test_a_two_second_cut_with_the_default_reconnect_budget_is_not_a_restart(
    proxy: CutProxy, sites: LocalSites
) -> None:
    """Default reconnect settings ride out a 2 s socket cut: no restart, the tab is kept."""
    backend = CdpBackend(proxy.url)
    async with SessionKeeper(backend, login_settings=LoginSettings(fingerprint_key=KEY)) as keeper:
        first = await keeper.ensure("research")
        page = await keeper.unguarded_page("research", sites.url("docs.example", "/guide"))
        session = session_of(backend)
        proxy.cut()
        await until(lambda: session.reconnecting, "the drop noticed")
        await asyncio.sleep(2.0)
        proxy.restore()
        await until(lambda: session.reconnects == 1 or not session.alive, "reconnect ended")
        facts = await keeper.ensure("research")
        assert not facts.restarted and facts.generation == first.generation
        assert await keeper.unguarded_page("research") is page
        assert backend.launches == 1


#: How late the held-back disconnect is heard: well past any "wait and see" delay.
LATE_S = 1.0


def hear_disconnects_late(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deliver each browser's and context's close event ``LATE_S`` late, pages' at once.

    Playwright tells a dropped socket as the pages' close events, then the context's,
    then the browser's. On a loaded machine the session can run between them; this
    widens that gap so a decision taken inside it is taken every time.
    """
    original = Connection.dispatch
    held: set[str] = set()
    queue: deque[tuple[Connection, dict[str, Any]]] = deque()

    def release() -> None:
        original(*queue.popleft())  # In arrival order, whichever timer fires first.

    def dispatch(self: Connection, message: dict[str, Any]) -> None:
        guid = message.get("guid") or ""
        owner = self._objects.get(guid)
        if guid in held or (
            message.get("method") == "close"
            and getattr(owner, "_type", "") in ("Browser", "BrowserContext")
        ):
            held.add(guid)  # Its later messages (its disposal) wait behind it.
            queue.append((self, message))
            asyncio.get_running_loop().call_later(LATE_S, release)
            return
        original(self, message)

    monkeypatch.setattr(Connection, "dispatch", dispatch)


async def test_a_cut_heard_after_its_pages_closed_is_not_a_lost_tab(
    proxy: CutProxy, sites: LocalSites, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cut whose disconnect arrives long after its pages' close events keeps the same tab."""
    backend = CdpBackend(proxy.url)
    async with SessionKeeper(backend, login_settings=LoginSettings(fingerprint_key=KEY)) as keeper:
        first = await keeper.ensure("research")
        page = await keeper.unguarded_page("research", sites.url("docs.example", "/guide"))
        session = session_of(backend)
        hear_disconnects_late(monkeypatch)
        proxy.cut()
        proxy.restore()
        await until(lambda: session.reconnects == 1 or not session.alive, "reconnect ended")
        facts = await keeper.ensure("research")
        assert not facts.restarted and facts.generation == first.generation
        assert facts.lost == ()
        assert session.owner_of(page) == "research"
        assert await keeper.unguarded_page("research") is page
        assert backend.launches == 1


async def test_a_page_closed_in_the_browser_is_forgotten_and_the_next_tab_is_new(
    proxy: CutProxy, sites: LocalSites
) -> None:
    """A page really closed (its target gone, the socket fine) stops being owned; no restart."""
    backend = CdpBackend(proxy.url)
    async with SessionKeeper(backend, login_settings=LoginSettings(fingerprint_key=KEY)) as keeper:
        first = await keeper.ensure("research")
        page = await keeper.unguarded_page("research", sites.url("billing.example", "/login"))
        session = session_of(backend)
        await page.fill("input[name=username]", "someone")
        await until(lambda: bool(session.unsubmitted_input("research")), "the input counted")
        await page.close()  # Trusted code closing the raw page: only its close event tells.
        await until(lambda: session.owner_of(page) is None, "the closed page forgotten")
        # The browser answered since: what was typed into the page went with it, on purpose.
        await until(lambda: not session.unsubmitted_input("research"), "its input forgotten")
        assert session.alive and session.reconnects == 0
        again = await keeper.unguarded_page("research")
        assert again is not page and not again.is_closed()
        assert not (await keeper.ensure("research")).restarted
        assert keeper.generation == first.generation


async def test_input_typed_into_a_tab_a_reconnect_readopted_is_not_taken_by_the_cut(
    remote: RemoteChromium, proxy: CutProxy, sites: LocalSites
) -> None:
    """A cut closes every page in Playwright's view: once the same browser is re-adopted,
    input typed into the tab is kept, however soon after the cut, and a later death
    names it lost."""
    backend = CdpBackend(proxy.url)
    async with SessionKeeper(backend, login_settings=LoginSettings(fingerprint_key=KEY)) as keeper:
        await keeper.ensure("billing")
        billing = await keeper.tab("billing", sites.url("billing.example", "/login"))
        session = session_of(backend)
        await cut_and_restore(proxy, session)
        assert session.alive
        await billing.fill("input[name=username]", "someone")
        # What the cut's close of the page set off has run its course by now (it once
        # dropped the page's input a second after the cut, whatever was typed since).
        await asyncio.sleep(1.5)
        assert [s.field for s in session.unsubmitted_input("billing")] == ["username"]
        proxy.upstream_port = await remote.restart_fresh()
        await until(lambda: not session.alive, "the old browser declared gone")
        told = await keeper.ensure("billing")
    assert [str(x) for x in told.lost_input] == ["input:username"]


async def test_input_typed_into_every_tab_is_named_lost_by_a_kill(
    proxy: CutProxy, sites: LocalSites
) -> None:
    """A kill closes our tabs one at a time over a live connection before it ends it: the
    input typed into each of them is named lost, not only the last one's."""
    backend = CdpBackend(proxy.url)
    conversations = ("c0", "c1", "c2")
    async with SessionKeeper(backend, login_settings=LoginSettings(fingerprint_key=KEY)) as keeper:
        for conversation in conversations:
            await keeper.ensure(conversation)
            page = await keeper.tab(conversation, sites.url("billing.example", "/login"))
            await page.fill("input[name=username]", "someone")
        await session_of(backend).kill()
        told = {c: await keeper.ensure(c) for c in conversations}
    assert {c: [str(x) for x in f.lost_input] for c, f in told.items()} == {
        c: ["input:username"] for c in conversations
    }


async def test_a_reconnect_that_fails_closed_on_interception_logs_that_not_a_different_browser(
    proxy: CutProxy, sites: LocalSites, caplog: pytest.LogCaptureFixture
) -> None:
    """The fail-closed interception path logs what happened, never "a different browser"."""
    backend = CdpBackend(proxy.url)
    keeper = SessionKeeper(backend, login_settings=LoginSettings(fingerprint_key=KEY))

    async def route_everything(session: object, _generation: int) -> None:
        assert isinstance(session, CdpSession)
        await session.context.route("**/*", lambda route: route.continue_())

    keeper.add_launch_hook(route_everything)
    caplog.set_level(logging.INFO, logger="session_keeper.cdp")
    async with keeper:
        await keeper.ensure("research")
        session = session_of(backend)
        proxy.cut()
        await until(lambda: session.reconnecting, "the drop noticed")
        proxy.restore()
        await until(lambda: not session.alive, "the routed generation ended")
    messages = [r.getMessage() for r in caplog.records if r.name == "session_keeper.cdp"]
    assert not any("different browser" in m for m in messages), messages
    assert any("interception cannot be carried over (fail closed)" in m for m in messages)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"reconnect_window": 0}, InvalidArgument),
        ({"reconnect_window": float("inf")}, InvalidArgument),
        ({"reconnect_window": "12"}, InvalidArgumentType),
        ({"reconnect_backoff": -1.0}, InvalidArgument),
        ({"reconnect_backoff": 2.0, "reconnect_backoff_max": 1.0}, InvalidArgument),
        ({"reconnect_attempts": 0}, InvalidArgument),
        ({"reconnect_attempts": True}, InvalidArgumentType),
        ({"connect_timeout": float("nan")}, InvalidArgument),
    ],
)
def test_bad_reconnect_settings_raise_invalid_argument(
    kwargs: dict[str, object], error: type
) -> None:
    """Reconnect settings are typed and validated: a bad one raises before anything exists."""
    with pytest.raises(error):
        CdpBackend("http://127.0.0.1:9", **kwargs)  # type: ignore[arg-type]


async def test_input_typed_after_a_cut_is_named_lost_by_the_browsers_death(
    remote: RemoteChromium, proxy: CutProxy, sites: LocalSites
) -> None:
    """After a cut and reconnect, the input watch is back: a field typed into a page
    loaded since (a new document, and a new conversation's tab) is named lost when the
    browser then dies."""
    backend = CdpBackend(proxy.url)
    async with SessionKeeper(backend, login_settings=LoginSettings(fingerprint_key=KEY)) as keeper:
        await keeper.ensure("research")
        await keeper.tab("research", sites.url("docs.example", "/guide"))
        session = session_of(backend)
        await cut_and_restore(proxy, session)
        assert session.alive
        assert not (await keeper.ensure("research")).restarted
        research = await keeper.tab("research", sites.url("billing.example", "/login"))
        await research.fill("input[name=username]", "someone")
        await keeper.ensure("billing")
        billing = await keeper.tab("billing", sites.url("billing.example", "/login"))
        await billing.fill("input[name=password]", "something")
        proxy.upstream_port = await remote.restart_fresh()
        await until(lambda: not session.alive, "the old browser declared gone")
        told = {c: await keeper.ensure(c) for c in ("research", "billing")}
    assert [str(x) for x in told["research"].lost_input] == ["input:username"]
    assert [str(x) for x in told["billing"].lost_input] == ["input:password"]
