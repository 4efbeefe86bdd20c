"""SyncKeeper: the keeper for synchronous code (sync tools, a sync LangGraph graph, threads).

The keeper and its browser live on one event loop in a thread of their own; every
call from sync code is marshalled to that loop and waits for its answer. Any number
of threads may call at once: the keeper's own locks (single-flight relaunch, owned
writes) see them as concurrent tasks, as they would async callers.

::

    with SyncKeeper(lambda: SessionKeeper(PlaywrightBackend(profile_dir=...))) as keeper:
        facts = keeper.ensure("billing", turn="t-1")
        tab = keeper.tab("billing", "https://billing.example/invoices")   # a SyncTab
        print(tab.snapshot())

The factory runs on the keeper's loop (Playwright objects must be made there), and
what it builds belongs to the ``SyncKeeper``: the stores the keeper uses (its state
store, its audit log's, its vault's) are opened there before the keeper is entered and
closed after it, so a factory may simply build them::

    SyncKeeper(lambda: SessionKeeper(backend, durability=Durability(store=SqliteStore(db))))
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from concurrent.futures import CancelledError, Future
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

from session_keeper._keeper.facade.keeper import SessionKeeper
from session_keeper._keeper.logins.renewal import Renewal
from session_keeper._keeper.tabs.conversation_tab import ConversationTab, TabLocator
from session_keeper._model.facts import (
    CookieFingerprint,
    Decision,
    LoginRecord,
    Lost,
    SweepReport,
    TurnFacts,
)
from session_keeper._model.grants import Grant
from session_keeper._model.ledger import SignInWindow
from session_keeper.errors import KeeperClosedError, UsageError

__all__ = ["SyncKeeper", "SyncLocator", "SyncTab"]

T = TypeVar("T")
PageT = TypeVar("PageT")

#: How long ``SyncKeeper`` waits for its loop thread to start or stop, in seconds.
THREAD_START_TIMEOUT_S = 60.0


class _Loop:
    """One event loop in a daemon thread; runs coroutines for other threads.

    Every call in flight is tracked, so that closing wakes each waiting thread with
    :class:`KeeperClosedError` instead of leaving it blocked on a loop that stopped.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._calls: set[Future[Any]] = set()
        self._calls_lock = threading.Lock()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="session-keeper-loop", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def check_caller(self) -> None:
        if threading.current_thread() is self._thread:
            raise UsageError("a SyncKeeper call from its own loop thread would deadlock")

    def run(self, make: Callable[[], Awaitable[T]]) -> T:
        self.check_caller()

        async def call() -> T:
            return await make()

        with self._calls_lock:
            # Checked under the lock close() takes: no call slips in after it woke the rest.
            if self._closing:
                raise KeeperClosedError("this SyncKeeper was closed")
            future: Future[T] = asyncio.run_coroutine_threadsafe(call(), self.loop)
            self._calls.add(future)
        try:
            return future.result()
        except CancelledError:
            if self._closing:
                raise KeeperClosedError("this SyncKeeper was closed during the call") from None
            raise
        finally:
            with self._calls_lock:
                self._calls.discard(future)

    def run_sync(self, fn: Callable[[], T]) -> T:
        async def call() -> T:
            return fn()

        return self.run(call)

    def close(self, last: Callable[[], Awaitable[None]]) -> None:
        """Refuse new calls, wake every call in flight with :class:`KeeperClosedError`
        (cancelling its work on the loop), run ``last()`` there, then stop the loop."""
        self.check_caller()
        with self._calls_lock:
            self._closing = True
            pending = list(self._calls)
        try:
            for future in pending:
                # Wakes the waiting thread now and cancels the task on the loop.
                future.cancel()

            async def final() -> None:
                await last()

            asyncio.run_coroutine_threadsafe(final(), self.loop).result()
        finally:
            self.stop()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(THREAD_START_TIMEOUT_S)
        if not self._thread.is_alive():
            self.loop.close()


def _wrap(loop: _Loop, value: Any) -> Any:
    if isinstance(value, ConversationTab):
        return SyncTab(loop, value)
    if isinstance(value, TabLocator):
        return SyncLocator(loop, value)
    if isinstance(value, list):
        return [_wrap(loop, v) for v in value]
    return value


class _SyncProxy:
    """Marshals every public attribute of an async object to the keeper's loop."""

    __slots__ = ("_loop", "_target")

    def __init__(self, loop: _Loop, target: Any) -> None:
        self._loop = loop
        self._target = target

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            # The wrapped handle's private state (its page) is not part of the API.
            raise AttributeError(name)
        loop, target = self._loop, self._target
        value = loop.run_sync(lambda: getattr(target, name))
        if not callable(value):
            return _wrap(loop, value)

        def call(*args: Any, **kwargs: Any) -> Any:
            async def run() -> Any:
                result = value(*args, **kwargs)
                if isinstance(result, Coroutine):
                    result = await result
                return result

            return _wrap(loop, loop.run(run))

        return call

    def __dir__(self) -> list[str]:
        return [n for n in dir(self._target) if not n.startswith("_")]


class SyncTab(_SyncProxy):
    """A :class:`~session_keeper.ConversationTab` for sync code: the same methods, blocking.

    ``tab.goto(url)``, ``tab.snapshot()``, ``tab.click(selector)``, ``tab.locator(sel)``
    (a :class:`SyncLocator`), ``tab.popups()`` ... raise what the async handle raises.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<SyncTab {self._target!r}>"


class SyncLocator(_SyncProxy):
    """A :class:`~session_keeper.TabLocator` for sync code."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<SyncLocator {self._target!r}>"


class SyncKeeper(Generic[PageT]):
    """A :class:`~session_keeper.SessionKeeper` driven from synchronous code.

    ``factory`` builds the keeper (and its backend, Guard, stores) on the keeper's own
    loop thread. Everything it built with a lifetime is the ``SyncKeeper``'s: there, it
    opens the keeper's stores (:meth:`SessionKeeper.stores`), then enters the keeper; on
    :meth:`close` it closes the keeper (its browser), then the stores, in reverse. A
    failure while starting closes what was opened and raises. Use it as a context
    manager. Every method blocks the calling thread until the keeper answers and raises
    what the keeper's method raises; :class:`~session_keeper.KeeperClosedError` after
    :meth:`close`.
    """

    def __init__(self, factory: Callable[[], SessionKeeper[PageT]]) -> None:
        self._loop = _Loop()
        self._closed = False
        try:

            async def start() -> tuple[SessionKeeper[PageT], AsyncExitStack]:
                stack = AsyncExitStack()
                try:
                    keeper = factory()
                    for store in keeper.stores():
                        await stack.enter_async_context(store)
                    await stack.enter_async_context(keeper)
                except BaseException:
                    await stack.aclose()
                    raise
                return keeper, stack

            self._keeper, self._owned = self._loop.run(start)
        except BaseException:
            self._loop.stop()
            raise

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the keeper (browser, sweeper, writes), then the stores it was built with,
        and stop its loop thread. Idempotent.

        Every call still in flight in another thread (a ``SyncTab`` wait, a ``goto``)
        is woken with :class:`~session_keeper.KeeperClosedError`, its work cancelled.
        """
        if self._closed:
            return
        self._loop.check_caller()
        self._closed = True
        self._loop.close(self._owned.aclose)

    def _check(self) -> SessionKeeper[PageT]:
        if self._closed:
            raise KeeperClosedError("this SyncKeeper was closed")
        return self._keeper

    # -- the keeper's calls, blocking ---------------------------------------------------
    def call(self, fn: Callable[[SessionKeeper[PageT]], Awaitable[T]]) -> T:
        """Run ``await fn(keeper)`` on the keeper's loop; return its result.

        For anything not wrapped below. Returned Playwright objects are only usable on
        that loop (call them through ``call`` again).
        """
        keeper = self._check()
        return self._loop.run(lambda: fn(keeper))

    def call_sync(self, fn: Callable[[SessionKeeper[PageT]], T]) -> T:
        """Run ``fn(keeper)`` (a plain function) on the keeper's loop; return its result."""
        keeper = self._check()
        return self._loop.run_sync(lambda: fn(keeper))

    def ensure(self, conversation: str, *, turn: str | None = None) -> TurnFacts:
        """:meth:`SessionKeeper.ensure`, blocking."""
        keeper = self._check()
        return self._loop.run(lambda: keeper.ensure(conversation, turn=turn))

    def tab(self, conversation: str, url: str | None = None) -> SyncTab:
        """:meth:`SessionKeeper.tab` as a :class:`SyncTab`, blocking."""
        keeper = self._check()
        handle = self._loop.run(lambda: keeper.tab(conversation, url))
        return SyncTab(self._loop, handle)

    def decide(
        self, conversation: str, site: str, action: str = "read", *, assumes_login: bool = False
    ) -> Decision:
        """:meth:`SessionKeeper.decide`, on the keeper's loop."""
        keeper = self._check()
        return self._loop.run_sync(
            lambda: keeper.decide(conversation, site, action, assumes_login=assumes_login)
        )

    def record_login(
        self, conversation: str, site: str, *, account: str | None = None
    ) -> LoginRecord:
        """:meth:`SessionKeeper.record_login`, blocking."""
        keeper = self._check()
        return self._loop.run(lambda: keeper.record_login(conversation, site, account=account))

    def logins(self) -> tuple[LoginRecord, ...]:
        """:meth:`SessionKeeper.logins`."""
        keeper = self._check()
        return self._loop.run_sync(keeper.logins)

    # -- signing in and out (the keeper's login methods, blocking) ------------------------
    def begin_login(self, conversation: str, site: str) -> None:
        """:meth:`SessionKeeper.begin_login`, blocking: the site's cookies now are never
        evidence of the sign-in that starts."""
        keeper = self._check()
        self._loop.run(lambda: keeper.begin_login(conversation, site))

    def cancel_login(self, conversation: str, site: str) -> tuple[str, ...]:
        """:meth:`SessionKeeper.cancel_login`, blocking: end a sign-in without a login;
        what it set leaves the jar (the cookies' names are returned)."""
        keeper = self._check()
        return self._loop.run(lambda: keeper.cancel_login(conversation, site))

    def sign_ins(self) -> tuple[SignInWindow, ...]:
        """:meth:`SessionKeeper.sign_ins`: the sign-ins in progress and the hosts each reached."""
        keeper = self._check()
        return self._loop.run_sync(keeper.sign_ins)

    def attribute_login(
        self, site: str, *, owner: str, by: str, account: str | None = None
    ) -> LoginRecord:
        """:meth:`SessionKeeper.attribute_login`, blocking: a person says whose an
        unexplained login is."""
        keeper = self._check()
        return self._loop.run(
            lambda: keeper.attribute_login(site, owner=owner, by=by, account=account)
        )

    def confirm_login(self, conversation: str, site: str) -> LoginRecord:
        """:meth:`SessionKeeper.confirm_login`: a login that survived a restart is
        re-validated."""
        keeper = self._check()
        return self._loop.run_sync(lambda: keeper.confirm_login(conversation, site))

    def report_signed_out(
        self, site: str, *, reported_by: str, reason: str | None = None
    ) -> Lost | None:
        """:meth:`SessionKeeper.report_signed_out`, blocking: the site signed its login out."""
        keeper = self._check()
        return self._loop.run(
            lambda: keeper.report_signed_out(site, reported_by=reported_by, reason=reason)
        )

    def lost_logins(self) -> tuple[Lost, ...]:
        """:meth:`SessionKeeper.lost_logins`: logins a restart took that nobody recorded again."""
        keeper = self._check()
        return self._loop.run_sync(keeper.lost_logins)

    def unexplained_logins(self) -> dict[str, tuple[CookieFingerprint, ...]]:
        """:meth:`SessionKeeper.unexplained_logins`: sites signed in at launch, by nobody known."""
        keeper = self._check()
        return self._loop.run_sync(keeper.unexplained_logins)

    @property
    def logins_version(self) -> int:
        """:attr:`SessionKeeper.logins_version`: grows whenever the logins may have changed."""
        keeper = self._check()
        return self._loop.run_sync(lambda: keeper.logins_version)

    def has_login_probe(self, site: str) -> bool:
        """:meth:`SessionKeeper.has_login_probe`."""
        keeper = self._check()
        return self._loop.run_sync(lambda: keeper.has_login_probe(site))

    def probe_login(self, site: str) -> str | None:
        """:meth:`SessionKeeper.probe_login`, blocking: who the site's probe sees signed in."""
        keeper = self._check()
        return self._loop.run(lambda: keeper.probe_login(site))

    def has_sign_in_recipe(self, site: str) -> bool:
        """:meth:`SessionKeeper.has_sign_in_recipe`."""
        keeper = self._check()
        return self._loop.run_sync(lambda: keeper.has_sign_in_recipe(site))

    def renew_login(self, conversation: str, site: str) -> Renewal:
        """:meth:`SessionKeeper.renew_login`, blocking: sign ``site`` in again from its recipe."""
        keeper = self._check()
        return self._loop.run(lambda: keeper.renew_login(conversation, site))

    def check_logins(self) -> tuple[Renewal, ...]:
        """:meth:`SessionKeeper.check_logins`, blocking: probe the logins due, renew the
        signed-out ones."""
        keeper = self._check()
        return self._loop.run(keeper.check_logins)

    def export_logins(self, conversation: str, sites: Iterable[str] | None = None) -> str:
        """:meth:`SessionKeeper.export_logins`, blocking: the conversation's live logins,
        sealed."""
        keeper = self._check()
        return self._loop.run(lambda: keeper.export_logins(conversation, sites))

    def import_logins(self, conversation: str, sealed: str) -> tuple[str, ...]:
        """:meth:`SessionKeeper.import_logins`, blocking: put an exported state back."""
        keeper = self._check()
        return self._loop.run(lambda: keeper.import_logins(conversation, sealed))

    def grant(self, grant: Grant) -> Grant:
        """:meth:`SessionKeeper.grant`."""
        keeper = self._check()
        return self._loop.run_sync(lambda: keeper.grant(grant))

    def sweep(self) -> SweepReport:
        """:meth:`SessionKeeper.sweep`, blocking."""
        keeper = self._check()
        return self._loop.run(keeper.sweep)

    def persist(self) -> None:
        """:meth:`SessionKeeper.persist`, blocking."""
        keeper = self._check()
        self._loop.run(keeper.persist)

    @property
    def generation(self) -> int:
        """The current browser generation."""
        return self._check().generation

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<SyncKeeper {state} {self._keeper!r}>"
