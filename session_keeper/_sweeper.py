"""Sweeping on a schedule: APScheduler 3 as an adapter, behind our own handle.

:meth:`SessionKeeper.start_sweeper` returns a :class:`Sweeper`, never an APScheduler
``Job``: the dependency's types (and major version) stay out of the public API.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from session_keeper._errors import KeeperClosedError

if TYPE_CHECKING:
    from apscheduler.job import Job
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    from session_keeper._facts import SweepReport


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
