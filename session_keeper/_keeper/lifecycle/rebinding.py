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
from typing import TYPE_CHECKING, Generic

from session_keeper._browser.backend import (
    BrowserBackend,
    BrowserSession,
    CloseCause,
    PageT,
    while_alive,
)
from session_keeper._browser.capabilities import capabilities_of
from session_keeper._browser.rebind import RebindableBackend, Rebound
from session_keeper._model.web import WEB_SCHEMES, scheme_of
from session_keeper._util.log_fields import log_extra
from session_keeper._util.redact import scrubbing_logger
from session_keeper.errors import BrowserError, BrowserGoneError

if TYPE_CHECKING:
    from session_keeper._keeper.lifecycle.restart_accounting import RestartAccounting
    from session_keeper._keeper.saving.persistence import KeeperPersistence
    from session_keeper._keeper.state.live import KeeperLive
    from session_keeper._model.evidence import EvidenceTracker

log = scrubbing_logger("session_keeper")


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
            if (rebindable := capabilities_of(session).rebindable) is not None:
                await rebindable.detach()
            raise
        live.rebind_to = None
        live.session = session
        live.ended = None
        # Our process ended, the browser did not: its generation goes on.
        live.resume_generation()
        session.on_close(lambda cause: on_close(generation, cause))
        self._adopt_tabs(rebound.pages)
        self._restarts.account_logins(generation, fates, restarted=False)
        # The jar as we found it: a cookie already in it is never sign-in evidence.
        self._evidence.reset(jar)
        await self._restarts.protect_unexplained(jar, self._evidence)
        self._persist.save_soon()
        log.info(
            "re-bound to the running browser",
            extra=log_extra(generation=generation, tabs=sorted(rebound.pages)),
        )
        if (rebindable := capabilities_of(session).rebindable) is not None:
            # Watchers (the Guard) see the found pages once the keeper owns them again.
            try:
                await while_alive(session, rebindable.announce_adopted(), "adopting pages")
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
                # Where the browser says the page is: it may have moved on while no
                # process of ours listened (only a web URL counts, as for any commit).
                session = self._live.session
                url = session.page_url(page) if session is not None else ""
                if scheme_of(url) in WEB_SCHEMES and url != tab.last_url:
                    tab.last_url = url
                    tab.verified_at = self._live.clock.now()
                continue
            # Measured: the browser has no page with the saved target id (or none was
            # known); the tab is gone, the browser is not.
            self._live.conversations.set_tab(conversation, None)
            self._live.pending_for(conversation, restarted=False).add_loss(
                tab.as_lost(conversation, "closed" if tab.target_id is not None else "gone")
            )
