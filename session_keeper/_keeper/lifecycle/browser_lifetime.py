"""Browser lifetime: launch and restart (one at a time), generations, close events, idle close.

The keeper's lock (``KeeperLive.lock``) makes a restart single flight: however many
callers find the browser dead, one launches. Each launch is a new *generation*; the
browser's own close/disconnect event ends it (this is how a crash is noticed without
a round trip). What a restart took is accounted by
:mod:`session_keeper._keeper.lifecycle.restart_accounting`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Generic

from session_keeper._browser.backend import (
    BrowserBackend,
    BrowserSession,
    CloseCause,
    PageT,
    while_alive,
)
from session_keeper._keeper.lifecycle.rebinding import Rebinding
from session_keeper._keeper.state.saved import GenerationRecord
from session_keeper._model.facts import BrowserLost
from session_keeper._model.ledger import chain_hosts
from session_keeper._util.log_fields import log_extra
from session_keeper._util.redact import scrubbing_logger
from session_keeper.errors import BrowserLaunchError, ProfileInUse

if TYPE_CHECKING:
    from session_keeper._keeper.lifecycle.restart_accounting import RestartAccounting
    from session_keeper._keeper.logins.web_storage_logins import StorageLogins
    from session_keeper._keeper.saving.persistence import KeeperPersistence
    from session_keeper._keeper.state.live import KeeperLive
    from session_keeper._model.evidence import EvidenceTracker

log = scrubbing_logger("session_keeper")

#: How long (attempts x poll) a new process waits for its predecessor's orphaned
#: browser to release the profile.
ORPHAN_EXIT_ATTEMPTS = 100
ORPHAN_EXIT_POLL_S = 0.1

#: Runs after each launch, before any page opens: ``await hook(session, generation)``.
LaunchHook = Callable[[BrowserSession[PageT], int], Awaitable[None]]


class BrowserLifetime(Generic[PageT]):
    """Starts, restarts and closes the keeper's browser (see the module)."""

    def __init__(
        self,
        live: KeeperLive[PageT],
        persist: KeeperPersistence[PageT],
        backend: BrowserBackend[PageT],
        restarts: RestartAccounting[PageT],
        evidence: EvidenceTracker,
        *,
        on_browser_lost: Callable[[BrowserLost], None] | None,
        keep_logins_on_idle_close: bool,
        storage: StorageLogins[PageT],
    ) -> None:
        self._storage = storage
        self._live = live
        self._persist = persist
        self._backend = backend
        self._restarts = restarts
        self._evidence = evidence
        self._on_browser_lost = on_browser_lost
        self._keep_logins_on_idle_close = keep_logins_on_idle_close
        self._launch_hooks: list[LaunchHook[PageT]] = []
        self._rebinding = Rebinding(live, persist, backend, restarts, evidence)

    def add_launch_hook(self, hook: LaunchHook[PageT]) -> None:
        """Run ``hook`` after each launch; a hook that raises fails the launch."""
        self._launch_hooks.append(hook)

    def remove_launch_hook(self, hook: LaunchHook[PageT]) -> None:
        """Stop running ``hook`` at launches; nothing if it is not there."""
        with contextlib.suppress(ValueError):
            self._launch_hooks.remove(hook)

    async def aclose(self) -> None:
        """Close the running browser cleanly and release the backend (under ``live.lock``)."""
        session = self._live.session
        if session is not None and session.alive:
            self._live.end_generation("closed")
            await session.close()
        await self._backend.aclose()

    async def restart(self) -> None:
        """Replace the browser (single flight: the caller holds ``live.lock``); account for it."""
        old = self._live.session
        if old is not None and old.alive:
            # Alive but idle past the limit: it has expired even if no sweep ran yet,
            # so its logins go as an idle close's would.
            await self.close_idle(old)
        # Our process died, the browser may not have: take it back if it is the same.
        if await self._rebinding.attempt(tuple(self._launch_hooks), self._session_closed):
            return
        new = await self._launch()
        try:
            for hook in tuple(self._launch_hooks):
                await while_alive(new, hook(new, self._live.generation + 1), "a launch hook")
            fates = await self._restarts.measure_logins(new)
        except BaseException as exc:
            died = not new.alive
            await new.kill()
            if died and not isinstance(exc, asyncio.CancelledError):
                # Whatever a hook's driver said about it, the fact is a failed start.
                raise BrowserLaunchError("the new browser died while starting") from None
            raise
        old_generation = self._live.generation
        # An act decided in the old browser carries nothing into the new one.
        self._live.uses.clear()
        self._live.generation += 1
        self._live.session = new
        self._live.ended = None
        generation = self._live.generation
        self._live.start_generation(
            GenerationRecord(generation=generation, started_at=self._live.clock.now())
        )
        new.on_close(lambda cause: self._session_closed(generation, cause))
        if old_generation:
            self._live.instruments.add("session_keeper.browser.restarts")
            gone = self._restarts.account_restart(old_generation, fates, old)
            if self._restarts.has_vault and gone:
                await self._restarts.restore_from_vault(new, gone)
        # The jar as this browser starts: a cookie already in it is never sign-in evidence.
        jar = await new.cookies()
        self._evidence.reset(jar)
        # A sign-in of the dead browser is over: nothing of it is in progress here.
        self._live.ledger.close_all_sign_ins()
        await self._restarts.protect_unexplained(jar, self._evidence)
        log.info("browser started", extra=log_extra(generation=generation))

    async def _launch(self) -> BrowserSession[PageT]:
        """Launch; after our own process died, give its orphaned browser time to exit.

        Measured here: a browser whose keeper process was SIGKILLed exits about half
        a second later, when Playwright's driver is gone. Until then its profile is
        locked, so ProfileInUse is retried for a bounded time in that case only.
        """
        attempts = ORPHAN_EXIT_ATTEMPTS if self._live.ended == "process_exit" else 1
        for attempt in range(attempts):
            try:
                return await self._backend.launch()
            except ProfileInUse:
                if attempt == attempts - 1:
                    raise
                await asyncio.sleep(ORPHAN_EXIT_POLL_S)
        raise AssertionError("unreachable")

    def _session_closed(self, generation: int, cause: CloseCause) -> None:
        # Runs from the browser's own close/disconnect event: this is how a crash is
        # noticed without a round trip on the alive path.
        if generation != self._live.generation or self._live.ended is not None:
            return
        self._live.end_generation(cause)
        self._persist.save_soon()
        log.warning("browser gone", extra=log_extra(generation=generation, cause=cause))
        if self._on_browser_lost is not None:
            self._on_browser_lost(
                BrowserLost(
                    browser_id=f"browser-{generation}",
                    generation=generation,
                    cause=cause,
                    at=self._live.clock.now(),
                )
            )

    async def close_idle(self, session: BrowserSession[PageT]) -> None:
        """Close an idle browser; by default first delete from its jar the cookies of every
        site the ledger holds a login of, live or lost."""
        self._live.end_generation("idle")
        if not self._keep_logins_on_idle_close:
            # A swept browser must not leave a live credential in the profile: a login
            # a restart judged lost or replaced may still be signed in at the site.
            sites = {r.site for r in self._live.ledger.live()}
            sites.update(x.name for x in self._live.ledger.lost_records() if x.kind == "login")
            # A login through an identity provider is one login over its chain: the
            # provider's session goes with it, or the next browser is signed in still.
            for record in self._live.ledger.live():
                sites.update(chain_hosts(record))
            sites.update(self._live.ledger.chain_hosts_lost())
            # A sign-in left in progress: whatever it set has no recorded owner.
            for window in self._live.ledger.close_all_sign_ins():
                sites.update(window.hosts)
            for site in sorted(sites):
                await session.clear_cookies(site)
            # An SPA's token outlives the jar in the profile's localStorage.
            await self._storage.clear(session)
        await session.close()
