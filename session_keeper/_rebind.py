"""Re-binding: a new keeper process picks up the browser its predecessor left running.

A browser the keeper did not launch (a CDP endpoint) outlives our process. The
keeper's document then names it (``browser_identity``, a digest of the generation
marker the backend planted; never a cookie value) and each tab's page (``target_id``).
On the first ``ensure()`` after loading such a document the keeper asks the backend to
re-bind (:class:`RebindableBackend`) before it launches anything:

- the same browser (its marker is still in the jar): **no restart**. The generation
  goes on, each conversation gets back its still-open page by target id, a tab whose
  page is gone is lost with cause ``"closed"`` (measured: the browser no longer has
  it), logins are measured against the jar as after a restart — still there means
  *survived*, re-validated before a side effect — and nothing else is reported lost;
- another browser, or none: the backend says so and the keeper restarts exactly as
  it does today, measuring what the new browser lacks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

import attrs

from session_keeper._backend import BrowserBackend, BrowserSession, CloseCause, PageT, while_alive
from session_keeper._errors import BrowserError, BrowserGoneError
from session_keeper._facts import Lost
from session_keeper._redact import scrubbing_logger

if TYPE_CHECKING:
    from session_keeper._keeper_live import KeeperLive
    from session_keeper._keeper_persistence import KeeperPersistence
    from session_keeper._login_evidence import EvidenceTracker
    from session_keeper._restarts import RestartAccounting

log = scrubbing_logger("session_keeper")

PageT_contra = TypeVar("PageT_contra", contravariant=True)


@attrs.frozen(kw_only=True)
class Rebound(Generic[PageT]):
    """A browser found again by :meth:`RebindableBackend.rebind`, and the pages adopted."""

    session: BrowserSession[PageT]
    #: conversation -> its page, for every asked-for target that is still open.
    pages: Mapping[str, PageT]


@runtime_checkable
class RebindableSession(Protocol[PageT_contra]):
    """A session whose browser and pages have names that outlive our process."""

    @property
    def identity(self) -> str:
        """A digest naming this browser process (not a secret; no cookie value)."""
        ...

    def target_id(self, page: PageT_contra) -> str | None:
        """The browser's id for ``page`` (no round trip), if known."""
        ...

    async def announce_adopted(self) -> None:
        """Run ``on_page`` callbacks for the pages adopted at re-binding.

        A callback's :class:`~session_keeper.BrowserError` propagates: the keeper then
        fails closed (closes our pages, restarts)."""
        ...

    async def detach(self) -> None:
        """Disconnect without closing any page: the browser and its pages live on."""
        ...


@runtime_checkable
class RebindableBackend(Protocol[PageT]):
    """A backend that can attach to a browser a previous process used."""

    async def rebind(self, identity: str, targets: Mapping[str, str]) -> Rebound[PageT] | None:
        """Attach to the browser named ``identity`` and adopt ``targets`` (conversation ->
        target id) that are still open; ``None`` (nothing attached) if the browser
        there is another one. Raises :class:`~session_keeper.BrowserLaunchError` when
        it cannot connect at all."""
        ...


@runtime_checkable
class KeeperNamedBackend(Protocol):
    """A backend whose marks in a shared browser are named per keeper (the keeper tells it)."""

    def serve_keeper(self, keeper_id: str) -> None:
        """Use ``keeper_id``'s names from now on."""
        ...


def identity_of(session: BrowserSession[Any] | None) -> str | None:
    """The live browser's saved name, if its backend gives one."""
    if session is None or not session.alive or not isinstance(session, RebindableSession):
        return None
    return session.identity


def target_of(session: BrowserSession[PageT], page: PageT) -> str | None:
    """The browser's id for ``page``, if its backend names pages."""
    if isinstance(session, RebindableSession):
        target: str | None = session.target_id(page)
        return target
    return None


class Rebinding(Generic[PageT]):
    """Tries to re-bind to the browser a previous process left running (see the module)."""

    def __init__(
        self,
        live: KeeperLive[PageT],
        persist: KeeperPersistence[PageT],
        backend: BrowserBackend[PageT],
        restarts: RestartAccounting[PageT],
        evidence: EvidenceTracker,
    ) -> None:
        self._live = live
        self._persist = persist
        self._backend = backend
        self._restarts = restarts
        self._evidence = evidence

    async def attempt(
        self,
        hooks: Sequence[Callable[[BrowserSession[PageT], int], Awaitable[None]]],
        on_close: Callable[[int, CloseCause], None],
    ) -> bool:
        """Re-bind if the saved browser is still there; ``False``: launch as usual.

        ``False`` also when the re-bound browser was given up at once (a watcher
        refused a found page, or it died): its generation has ended then, so the
        launch that follows is a restart with measured losses.

        Raises :class:`~session_keeper.BrowserLaunchError` when the endpoint cannot
        be reached; nothing changed then (the next ``ensure()`` tries again).
        """
        live = self._live
        identity = live.rebind_to
        if (
            identity is None
            or live.ended != "process_exit"
            or not isinstance(self._backend, RebindableBackend)
        ):
            return False
        targets = {c: t.target_id for c, t in live.tabs.items() if t.target_id is not None}
        rebound: Rebound[PageT] | None = await self._backend.rebind(identity, targets)
        if rebound is None:
            live.rebind_to = None
            log.info("the saved browser is gone: a restart")
            return False
        session = rebound.session
        generation = live.generation
        try:
            for hook in hooks:
                await while_alive(session, hook(session, generation), "a launch hook")
            fates = await self._restarts.measure_logins(session)
            jar = await session.cookies()
        except BaseException:
            # Leave the browser and its pages as they were: the next try finds them.
            if isinstance(session, RebindableSession):
                await session.detach()
            raise
        live.rebind_to = None
        live.session = session
        live.ended = None
        if live.generations and live.generations[-1].cause == "process_exit":
            # Our process ended, the browser did not: its generation goes on.
            live.generations[-1] = attrs.evolve(live.generations[-1], ended_at=None, cause=None)
        session.on_close(lambda cause: on_close(generation, cause))
        self._adopt_tabs(rebound.pages)
        self._restarts.account_logins(generation, fates, restarted=False)
        # The jar as we found it: a cookie already in it is never sign-in evidence.
        self._evidence.reset(jar)
        self._persist.save_soon()
        log.info(
            "re-bound to the running browser",
            extra={"generation": generation, "tabs": sorted(rebound.pages)},
        )
        if isinstance(session, RebindableSession):
            # Watchers (the Guard) see the found pages once the keeper owns them again.
            try:
                await while_alive(session, session.announce_adopted(), "adopting pages")
            except BrowserGoneError:
                return False  # its close event ended the generation: relaunch
            except BrowserError as exc:
                # A watcher refused what a found page shows now: fail closed. Our pages
                # close, the generation ends ("crashed"), and the caller relaunches.
                log.warning("re-adopted pages refused (%s): a restart", exc)
                await session.kill()
                return False
        return True

    def _adopt_tabs(self, pages: Mapping[str, PageT]) -> None:
        mono = self._live.clock.monotonic()
        for conversation, tab in list(self._live.tabs.items()):
            page = pages.get(conversation)
            if page is not None:
                tab.page = page
                tab.last_used = mono
                continue
            # Measured: the browser has no page with the saved target id (or none was
            # known); the tab is gone, the browser is not.
            del self._live.tabs[conversation]
            self._live.pending_for(conversation, restarted=False).add_loss(
                Lost(
                    kind="tab",
                    name=conversation,
                    owner=conversation,
                    when=tab.verified_at,
                    last_url=tab.last_url,
                    generation=tab.generation,
                    cause="closed" if tab.target_id is not None else "gone",
                )
            )
