"""Sweeping: what one sweep closes, and sweeps on a schedule (APScheduler 3 as an adapter).

A sweep (:class:`Sweeping`) expires grants, borrow requests and takeovers, retires
idle conversations, and closes an idle browser or idle tabs, reading the keeper's
clock.

:meth:`SessionKeeper.start_sweeper` returns a :class:`Sweeper`, never an APScheduler
``Job``: the dependency's types (and major version) stay out of the public API.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Generic

from session_keeper._browser.backend import PageT
from session_keeper._keeper.permissions.granting import grant_body
from session_keeper._model.facts import ClosedBrowser, ClosedTab, SweepReport
from session_keeper._util.log_fields import log_extra
from session_keeper._util.redact import scrubbing_logger
from session_keeper.errors import KeeperClosedError

if TYPE_CHECKING:
    from apscheduler.job import Job
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    from session_keeper._keeper.lifecycle.browser_lifetime import BrowserLifetime
    from session_keeper._keeper.lifecycle.conversations import Conversations
    from session_keeper._keeper.saving.persistence import KeeperPersistence
    from session_keeper._keeper.state.live import KeeperLive
    from session_keeper._keeper.tabs.conversation_pages import Tabs

log = scrubbing_logger("session_keeper")


class Sweeper:
    """A running sweeper: the keeper's :meth:`~session_keeper.SessionKeeper.sweep` every ``every``.

    Stop it with :meth:`stop` (or :meth:`SessionKeeper.stop_sweeper`; the keeper also
    stops it in ``aclose()``). A scheduler the keeper started is shut down with it; an
    application's own scheduler keeps running.
    """

    def __init__(
        self, job: Job, scheduler: AsyncIOScheduler, *, every: timedelta, owns_scheduler: bool
    ) -> None:
        self._job: Job | None = job
        self._scheduler: AsyncIOScheduler | None = scheduler
        self._every = every
        self._owns_scheduler = owns_scheduler

    @property
    def every(self) -> timedelta:
        """How often the sweep runs."""
        return self._every

    @property
    def running(self) -> bool:
        """Whether the sweeper was not stopped."""
        return self._job is not None

    @property
    def job_id(self) -> str | None:
        """The id of the job in the scheduler (``None`` once stopped)."""
        return self._job.id if self._job is not None else None

    @property
    def next_run(self) -> datetime | None:
        """When the scheduler runs the sweep next (``None`` once stopped or paused)."""
        if self._job is None:
            return None
        when: datetime | None = getattr(self._job, "next_run_time", None)
        return when

    def stop(self) -> None:
        """Remove the sweep job (and shut down the scheduler the keeper started). Idempotent."""
        job, self._job = self._job, None
        scheduler, self._scheduler = self._scheduler, None
        if job is not None:
            # The job may already be gone with an application's scheduler.
            with contextlib.suppress(Exception):
                job.remove()
        if scheduler is not None and self._owns_scheduler:
            scheduler.shutdown(wait=False)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<Sweeper every {self._every} {state}>"


def start_sweeper(
    sweep: Callable[[], Awaitable[SweepReport]],
    *,
    every: timedelta,
    scheduler: AsyncIOScheduler | None,
    on_sweep: Callable[[SweepReport], None] | None,
    is_closed: Callable[[], bool],
    job_id: str,
) -> Sweeper:
    """Schedule ``sweep`` every ``every`` on ``scheduler`` (or one started here)."""
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    owns = scheduler is None
    if scheduler is None:
        scheduler = AsyncIOScheduler(event_loop=asyncio.get_running_loop())
        scheduler.start()

    async def run_sweep() -> None:
        if is_closed():
            return
        try:
            report = await sweep()
        except KeeperClosedError:
            return
        if on_sweep is not None:
            on_sweep(report)

    job = scheduler.add_job(
        run_sweep,
        "interval",
        seconds=every.total_seconds(),
        id=job_id,
        max_instances=1,
        coalesce=True,
        replace_existing=True,
    )
    return Sweeper(job, scheduler, every=every, owns_scheduler=owns)


class Sweeping(Generic[PageT]):
    """One sweep over the keeper's live state (see the module)."""

    def __init__(
        self,
        live: KeeperLive[PageT],
        persist: KeeperPersistence[PageT],
        *,
        lifetime: BrowserLifetime[PageT],
        tabs: Tabs[PageT],
        conversations: Conversations[PageT],
        tab_idle_timeout: timedelta | None,
    ) -> None:
        self._live = live
        self._persist = persist
        self._lifetime = lifetime
        self._tabs = tabs
        self._conversations = conversations
        self._tab_idle_timeout = tab_idle_timeout

    async def sweep(self, *, close_browser: bool = False) -> SweepReport:
        """See :meth:`SessionKeeper.sweep` (the public contract)."""
        self._live.check_open()
        await self._persist.writes.settle()
        async with self._live.lock:
            now = self._live.clock.now()
            mono = self._live.clock.monotonic()
            expired = self._live.grants.expire(now)
            for r in self._live.borrows.expire(now):
                self._persist.save_soon()
                self._persist.audit_soon("borrow_request_expired", {"id": r.id})
            if expired:
                self._persist.audit_soon(
                    "grants_expired", {"grants": [grant_body(g) for g in expired]}
                )
            if self._live.conversations.end_takeovers(now):
                self._persist.save_soon()
            closed_browser: ClosedBrowser | None = None
            closed_tabs: list[ClosedTab] = []
            retired = await self._conversations.retire_idle()
            session = self._live.session
            if session is not None and session.alive:
                if close_browser or self._live.idle_expired():
                    closed_browser = ClosedBrowser(
                        browser_id=f"browser-{self._live.generation}",
                        generation=self._live.generation,
                        idle=timedelta(seconds=mono - self._live.last_used),
                    )
                    await self._lifetime.close_idle(session)
                elif self._tab_idle_timeout is not None:
                    closed_tabs = await self._tabs.close_idle_tabs(session, mono)
        report = SweepReport(
            at=now,
            closed_browser=closed_browser,
            closed_tabs=tuple(closed_tabs),
            expired_grants=expired,
            retired_conversations=retired,
        )
        if not report.nothing_done:
            await self._persist.save()
        if not report.nothing_done:
            log.info(
                "sweep",
                extra=log_extra(
                    closed_browser=closed_browser.browser_id if closed_browser else None,
                    closed_tabs=[t.conversation for t in closed_tabs],
                    expired_grants=len(expired),
                    retired_conversations=len(retired),
                ),
            )
        return report
