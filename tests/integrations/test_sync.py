"""SyncKeeper: the keeper on its own loop thread, driven from plain threads and sync graphs."""

from __future__ import annotations

import asyncio
import operator
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, RetryPolicy

from session_keeper import (
    Durability,
    Grant,
    Guard,
    LoginSettings,
    PlaywrightBackend,
    SessionKeeper,
)
from session_keeper._keeper.logins.keeper_logins import KeeperLogins
from session_keeper.errors import (
    InvalidArgument,
    InvalidArgumentType,
    KeeperClosedError,
    LoginNotObserved,
    NavigationBlocked,
    SessionKeeperError,
    StoreError,
    UsageError,
)
from session_keeper.facts import TurnFacts
from session_keeper.integrations.langgraph import BrowserState, SyncBrowserTurn, sync_browser_node
from session_keeper.integrations.sync import SyncKeeper, SyncTab
from session_keeper.security import AuditLog, Keyring
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock, FakePage, LocalSites

KEY = bytes(range(32))


def fake_keeper(backend: FakeBackend) -> SyncKeeper[FakePage]:
    return SyncKeeper(
        lambda: SessionKeeper(
            backend,
            clock=FakeClock(),
            login_settings=LoginSettings(fingerprint_key=KEY),
            grants=[Grant("billing", "billing.example")],
        )
    )


def test_plain_threads_share_one_keeper_one_relaunch_each_told_once() -> None:
    """Eight threads, one crash: one relaunch, each conversation told restarted exactly once."""
    backend = FakeBackend()
    conversations = [f"chat-{i}" for i in range(8)]
    with fake_keeper(backend) as keeper:
        barrier = threading.Barrier(len(conversations))

        def open_tab(conv: str) -> str:
            barrier.wait()
            keeper.ensure(conv)
            tab = keeper.tab(conv, f"https://docs.example/{conv}")
            return str(tab.url)

        def turn(conv: str) -> TurnFacts:
            barrier.wait()
            return keeper.ensure(conv)

        with ThreadPoolExecutor(len(conversations)) as pool:
            urls = list(pool.map(open_tab, conversations))
            assert urls == [f"https://docs.example/{c}" for c in conversations]
            keeper.call(lambda k: backend.crash())
            told = list(pool.map(turn, conversations))
            again = list(pool.map(turn, conversations))
        assert backend.launches == 2
        assert all(
            f.restarted and [str(x) for x in f.lost] == [f"tab:{f.conversation}"] for f in told
        )
        assert not any(f.restarted for f in again)
    with pytest.raises(KeeperClosedError):
        keeper.ensure("chat-0")


def test_a_sync_call_from_the_keepers_own_loop_is_refused_not_deadlocked() -> None:
    """Calling SyncKeeper from its own loop thread raises UsageError instead of hanging."""
    with fake_keeper(FakeBackend()) as keeper:

        async def inside(k: SessionKeeper[FakePage]) -> None:
            keeper.ensure("billing")

        with pytest.raises(UsageError):
            keeper.call(inside)


def test_close_wakes_a_thread_blocked_in_a_sync_tab_call_with_keeper_closed_error() -> None:
    """A thread inside a SyncTab wait gets KeeperClosedError when another thread closes
    the keeper, instead of blocking forever; later SyncTab calls raise it too."""
    keeper = fake_keeper(FakeBackend())
    keeper.ensure("billing")
    tab = keeper.tab("billing", "https://billing.example/")
    baseline = keeper.call_sync(lambda k: len(asyncio.all_tasks()))
    outcome: list[BaseException | None] = []

    def blocked() -> None:
        try:
            tab.wait_for(seconds=3600)
        except BaseException as exc:  # what the wait ended with is the point of the test
            outcome.append(exc)
        else:
            outcome.append(None)

    waiter = threading.Thread(target=blocked, daemon=True)
    waiter.start()
    # The wait is in flight once its task runs on the keeper's loop.
    for _ in range(1000):
        if keeper.call_sync(lambda k: len(asyncio.all_tasks())) > baseline:
            break
        time.sleep(0.01)
    else:
        raise AssertionError("the wait never started")
    keeper.close()
    waiter.join(timeout=10)  # a hang bound, not a timing
    assert not waiter.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], KeeperClosedError)
    assert "during the call" in str(outcome[0])  # woken in flight, not refused at the door
    with pytest.raises(KeeperClosedError):
        tab.snapshot()


def test_bad_ids_through_the_sync_facade_are_refused_and_change_nothing() -> None:
    """Conversation ids with NUL, 10 kB, or of the wrong type raise typed errors from
    SyncKeeper and open no tab; an id with '/' is an ordinary id."""
    backend = FakeBackend()
    with fake_keeper(backend) as keeper:
        keeper.ensure("billing")
        before = keeper.call_sync(lambda k: k.tabs())
        for bad in ("a\x00b", "x" * 10_000, "", "line\nbreak"):
            with pytest.raises(InvalidArgument):
                keeper.ensure(bad)
            with pytest.raises(InvalidArgument):
                keeper.tab(bad, "https://billing.example/")
        with pytest.raises(InvalidArgumentType):
            keeper.ensure(3)  # type: ignore[arg-type]
        assert keeper.call_sync(lambda k: k.tabs()) == before
        assert keeper.ensure("team/billing").conversation == "team/billing"


class State(BrowserState, total=False):
    visited: Annotated[list[str], operator.add]


def test_a_sync_graph_interrupts_for_sign_in_resumes_and_retries_with_the_same_facts(
    tmp_path: Path,
) -> None:
    """graph.invoke (sync) over SqliteSaver: interrupt → resume, a retry, facts told once."""
    backend = FakeBackend()
    seen: list[TurnFacts] = []

    def step(state: State, turn: SyncBrowserTurn) -> dict[str, Any]:
        seen.append(turn.facts)
        if turn.facts.restarted and sum(f.restarted for f in seen) == 1:
            raise ConnectionError("flaky")  # retried by the RetryPolicy
        tab: SyncTab = turn.tab("https://billing.example/invoices")
        return {"visited": [tab.url]}

    def sign_in(keeper: SyncKeeper[FakePage]) -> None:
        keeper.ensure("billing")
        keeper.call(lambda k: backend.sign_in("billing.example"))
        keeper.record_login("billing", "billing.example")

    cfg: Any = {"configurable": {"thread_id": "billing"}}
    with (
        fake_keeper(backend) as keeper,
        SqliteSaver.from_conn_string(str(tmp_path / "g.db")) as saver,
    ):
        builder = StateGraph(State)
        retry = RetryPolicy(max_attempts=3, initial_interval=0.001, jitter=False)
        builder.add_node(
            "work", sync_browser_node(keeper, step, sites=["billing.example"]), retry_policy=retry
        )
        builder.add_edge(START, "work")
        builder.add_edge("work", END)
        graph = builder.compile(checkpointer=saver)

        sign_in(keeper)
        assert graph.invoke({}, cfg)["visited"] == ["https://billing.example/invoices"]
        keeper.call(lambda k: backend.crash())
        paused = graph.invoke({}, cfg)
        (ask,) = paused["__interrupt__"]
        assert ask.value["site"] == "billing.example"
        sign_in(keeper)
        done = graph.invoke(Command(resume="ok"), cfg)
        told = [TurnFacts.from_dict(f) for f in done["browser_told"]]
        assert len(told) == 1 and told[0].restarted
        assert "login:billing.example" in map(str, told[0].lost)
        # The failed attempt and its retry saw the same facts as the interrupt.
        assert seen[-2] == seen[-1] == told[0] == TurnFacts.from_dict(ask.value["facts"])
        assert len(graph.invoke({}, cfg)["browser_told"]) == 1


@pytest.mark.chromium
def test_the_sync_tab_is_guarded_and_has_no_path_out_on_real_chromium(
    tmp_path: Path, sites: LocalSites, chromium_path: str
) -> None:
    """From two threads: a blocked navigation raises NavigationBlocked; no .page/.context."""

    def make() -> SessionKeeper[Any]:
        backend = PlaywrightBackend(
            tmp_path / "profile",
            executable_path=chromium_path,
            host_resolver_rules=sites.host_resolver_rules,
        )
        keeper: SessionKeeper[Any] = SessionKeeper(
            backend,
            clock=FakeClock(),
            login_settings=LoginSettings(fingerprint_key=KEY),
            grants=[Grant("billing", "billing.example")],
        )
        Guard(keeper)
        return keeper

    with SyncKeeper(make) as keeper:
        keeper.ensure("billing")
        login = keeper.tab("billing", sites.url("billing.example", "/login"))
        login.fill("input[name=username]", "alice")
        login.fill("input[name=password]", "correct horse")
        login.click("button[type=submit]")
        login.wait_for(selector="#invoices")
        keeper.record_login("billing", "billing.example", account="alice")
        mark = len(sites.requests("billing.example"))

        def research() -> str:
            keeper.ensure("research")
            tab = keeper.tab("research", sites.url("docs.example", "/"))
            for name in ("page", "context", "request", "_page", "_keeper"):
                assert not hasattr(tab, name)
            with pytest.raises(NavigationBlocked) as blocked:
                tab.goto(sites.url("billing.example", "/invoices"))
            assert blocked.value.block.site == "billing.example"
            return str(tab.snapshot())

        def billing() -> str:
            tab = keeper.tab("billing")
            tab.reload()
            return str(tab.locator("#invoices").inner_text())

        with ThreadPoolExecutor(2) as pool:
            snap, invoices = pool.submit(research).result(), pool.submit(billing).result()
        # Refused from a page it showed, the tab keeps that page (the Guard aborts).
        assert '"Docs"' in snap and "Blocked by session_keeper" not in snap
        assert invoices
        # The owner's reload arrived with the login; research's navigation never did.
        arrivals = [
            r
            for r in sites.requests("billing.example")[mark:]
            if r.cookie("billing_session") is not None and r.path == "/invoices"
        ]
        assert len(arrivals) == 1


def test_a_store_the_factory_builds_is_opened_for_the_first_call_and_closed_at_exit(
    tmp_path: Path,
) -> None:
    """SyncKeeper opens the stores its factory built (state and audit) before the keeper's
    first call and closes them after the keeper at exit; the state is in the file."""
    built: list[SqliteStore] = []

    def make() -> SessionKeeper[FakePage]:
        state, chain = SqliteStore(tmp_path / "k.db"), SqliteStore(tmp_path / "audit.db")
        keyring = Keyring({"k1": KEY})
        built.extend((state, chain))
        return SessionKeeper(
            FakeBackend(),
            clock=FakeClock(),
            login_settings=LoginSettings(fingerprint_key=KEY),
            grants=[Grant("billing", "billing.example")],
            durability=Durability(store=state, keyring=keyring, audit=AuditLog(chain, keyring)),
        )

    with SyncKeeper(make) as keeper:
        assert keeper.ensure("billing", turn="t-1").first_turn
        keeper.grant(Grant("research", "docs.example"))
    for store in built:
        with pytest.raises(StoreError, match="was closed"):
            asyncio.run(store.open())  # closed by the SyncKeeper, not merely never opened

    with SyncKeeper(make) as again:  # the state and the audit chain were written
        assert Grant("research", "docs.example") in again.call_sync(lambda k: k.grants())
        assert not again.ensure("billing").first_turn

    async def entries() -> int:
        async with SqliteStore(tmp_path / "audit.db") as chain:
            return len(await chain.events())

    assert asyncio.run(entries()) > 0


def test_a_sync_keeper_that_fails_to_start_closes_the_stores_it_opened(tmp_path: Path) -> None:
    """A keeper whose entry fails (a state sealed under another key) leaves no store open."""
    built: list[SqliteStore] = []

    def make(key: bytes) -> SessionKeeper[FakePage]:
        store = SqliteStore(tmp_path / "k.db")
        built.append(store)
        return SessionKeeper(
            FakeBackend(),
            clock=FakeClock(),
            login_settings=LoginSettings(fingerprint_key=KEY),
            durability=Durability(store=store, keyring=Keyring({"k1": key})),
        )

    with SyncKeeper(lambda: make(KEY)) as keeper:
        keeper.ensure("billing")
    with pytest.raises(SessionKeeperError):
        SyncKeeper(lambda: make(bytes(range(1, 33))))
    with pytest.raises(StoreError, match="was closed"):
        asyncio.run(built[-1].open())


#: The keeper's login methods for enforcement layers (a hook, the questions a Guard asks
#: on every request), not calls an application blocks on (``call_sync`` reaches them).
NOT_BLOCKING = {
    "add_login_hook",
    "remove_login_hook",
    "any_sign_in",
    "signing_in",
    "reach_sign_in",
    "lost_login_chain",
}


def test_the_sync_keeper_offers_every_sign_in_method_of_the_keeper() -> None:
    """Each public login method of SessionKeeper (begin_login included) is a SyncKeeper
    method; begin_login, record_login and report_signed_out work through it."""
    wanted = {n for n in vars(KeeperLogins) if not n.startswith("_")} - NOT_BLOCKING
    assert wanted - set(dir(SyncKeeper)) == set()
    backend = FakeBackend()
    with fake_keeper(backend) as keeper:
        keeper.ensure("billing")
        keeper.call(lambda k: backend.sign_in("billing.example"))
        keeper.begin_login("billing", "billing.example")  # what is there now is no evidence
        assert [w.conversation for w in keeper.sign_ins()] == ["billing"]
        with pytest.raises(LoginNotObserved):
            keeper.record_login("billing", "billing.example")
        keeper.call(lambda k: backend.sign_in("billing.example", value="fresh"))
        assert keeper.record_login("billing", "billing.example").owner == "billing"
        version = keeper.logins_version
        lost = keeper.report_signed_out("billing.example", reported_by="billing")
        assert lost is not None and keeper.lost_logins() == (lost,)
        assert keeper.logins_version > version
        assert keeper.unexplained_logins() == {}
        keeper.begin_login("billing", "billing.example")
        assert keeper.cancel_login("billing", "billing.example") == ()  # it set nothing
        assert keeper.sign_ins() == ()
        assert not keeper.has_login_probe("billing.example")
        assert not keeper.has_sign_in_recipe("billing.example")
        with pytest.raises(InvalidArgument):
            keeper.probe_login("billing.example")
