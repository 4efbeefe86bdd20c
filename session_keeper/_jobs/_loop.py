"""JobLoop: the coordinator that turns restart facts into safe decisions for long jobs.

One ``run()`` holds the job's lease and repeats, until the job is finished, paused
or stopped:

    check state, deadline and budgets → keeper.ensure(job conversation) → apply the
    restart facts (lost login → awaiting_human; lost tab → reopen the checkpoint's
    target and observe afresh) → one step within the step timeout → validate page
    identity, origin and required fields → fenced atomic commit → events

This loop is the one layer that retries. Steps classify failures by raising a
:class:`~session_keeper.StepFailure`; the policy for each class is here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

import attrs
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from session_keeper._backend import PageT, normalize_site
from session_keeper._errors import (
    BrowserError,
    Denied,
    InvalidArgument,
    LeaseHeldError,
    LoginRequired,
    PageChanged,
    RateLimited,
    StaleLeaseError,
    StepFailure,
    StoreError,
    TransientFailure,
    WriteOutcomeUnknown,
)
from session_keeper._grants import check_name
from session_keeper._jobs._context import Accepted, Readback, StepContext, unknown, write_settled
from session_keeper._keeper import SessionKeeper
from session_keeper._origins import parse_origins, url_allowed
from session_keeper._redact import describe_error, redact_text
from session_keeper._store import Checkpoint, Event, Job, JobContract, JobState, Lease, Store

if TYPE_CHECKING:
    from session_keeper._guard import Guard, GuardPolicy

log = logging.getLogger("session_keeper.jobs")
T = TypeVar("T")

#: A step: one bounded interaction with the page at the checkpoint's cursor.
Step = Callable[[StepContext[PageT]], Awaitable[Accepted]]

#: Points where tests inject a controller crash (see ``fault_hooks``).
FaultPoint = Literal["after_extract", "after_commit"]

TERMINAL: frozenset[str] = frozenset({"done", "failed", "stopped"})
#: The only states :meth:`JobLoop.run` returns (the README's list): never ``running``.
RUN_STATES: frozenset[str] = frozenset({"ready", "awaiting_human", "done", "failed", "stopped"})
#: A step's lease is extended this often, as a fraction of ``lease_ttl``.
HEARTBEAT_FRACTION = 3

#: Timeouts, ours and Playwright's (which is not the builtin ``TimeoutError``).
TIMEOUTS: tuple[type[BaseException], ...] = (TimeoutError, PlaywrightTimeoutError)
#: Failures retried with backoff inside the attempt budget.
TRANSIENT: tuple[type[BaseException], ...] = (TransientFailure, BrowserError, *TIMEOUTS)
#: A submit that raised one of these may or may not have reached the destination.
SUBMIT_FAILURES: tuple[type[BaseException], ...] = (StepFailure, BrowserError, OSError, *TIMEOUTS)

#: How often one run takes back a lease that expired under it before giving up.
MAX_RECLAIMS = 3


@attrs.frozen(kw_only=True)
class RunOutcome:
    """How one :meth:`JobLoop.run` ended. A safe stop is never ``done``."""

    job_id: str
    state: JobState
    #: Why it paused or stopped, in words a person can act on.
    reason: str | None = None
    pages_committed: int = 0
    new_records: int = 0
    repeated_records: int = 0
    attempts_used: int = 0
    revision: int = 0
    next_cursor: str | None = None
    #: Another worker took the lease over; this run stopped touching the job.
    lease_lost: bool = False


@attrs.frozen(kw_only=True)
class HumanPause:
    """What a person needs to take over, persisted with the pause."""

    reason: str
    target_identity: str | None
    last_revision: int
    last_committed_step: str | None
    allowed_next_action: str
    expires_at: datetime


class _Stop(Exception):
    def __init__(self, state: JobState, reason: str) -> None:
        super().__init__(reason)
        self.state = state
        self.reason = reason


def conversation_of(contract: JobContract) -> str:
    """The keeper conversation a job acts as: ``extra["conversation"]`` or ``job:<id>``."""
    conv = contract.extra.get("conversation")
    return conv if isinstance(conv, str) and conv else f"job:{contract.job_id}"


def origin_allowed(url: str, allowed: tuple[str, ...]) -> bool:
    """Whether ``url`` is inside the contract's allowlist (empty list: anything).

    Scheme and host must match an entry; the port only when the entry names one
    (``session_keeper._origins``). ``about:`` pages (a fresh tab) are nowhere.
    """
    if not allowed or url.startswith("about:"):
        return True
    return url_allowed(url, parse_origins(allowed))


class JobLoop(Generic[PageT]):
    """Runs checkpointed, leased, fenced jobs on a :class:`SessionKeeper` and a Store.

    While a step runs, its lease is extended every ``lease_ttl / 3`` (a fenced
    ``Store.extend``); ``heartbeat_sleep`` is how the heartbeat waits between beats
    (tests pass timers on a fake clock). Raises :class:`InvalidArgument` for a
    non-positive ``lease_ttl``/``backoff_base`` or a negative ``max_recoveries``.
    """

    def __init__(
        self,
        keeper: SessionKeeper[PageT],
        store: Store,
        worker_id: str,
        *,
        lease_ttl: timedelta = timedelta(seconds=60),
        backoff_base: timedelta = timedelta(milliseconds=500),
        backoff_cap: timedelta = timedelta(seconds=30),
        max_recoveries: int = 2,
        pause_ttl: timedelta = timedelta(hours=24),
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        fault_hooks: Mapping[FaultPoint, Callable[[], Awaitable[None]]] | None = None,
        guard: Guard | GuardPolicy | None = None,
        heartbeat_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.keeper = keeper
        self.store = store
        self.worker_id = check_name(worker_id, "worker_id")
        if lease_ttl <= timedelta(0) or backoff_base <= timedelta(0) or max_recoveries < 0:
            raise InvalidArgument(
                "lease_ttl and backoff_base must be positive, max_recoveries >= 0"
            )
        self.lease_ttl = lease_ttl
        self.backoff_base = backoff_base.total_seconds()
        self.backoff_cap = backoff_cap.total_seconds()
        self.max_recoveries = max_recoveries
        self.pause_ttl = pause_ttl
        self._rng = rng or random.Random()
        self._sleep = sleep
        self._heartbeat_sleep = heartbeat_sleep
        self._faults = dict(fault_hooks or {})
        self._guard = guard
        self._clock = keeper.clock
        self._intents_created: set[tuple[str, str, int]] = set()

    # -- public -----------------------------------------------------------------------
    async def submit(self, contract: JobContract) -> Job:
        """Store a job contract (idempotent for an equal contract)."""
        return await self.store.submit_job(contract)

    async def run(
        self,
        job_id: str,
        step: Step[PageT],
        *,
        target: Callable[[str | None], str] | None = None,
        expect_identity: Callable[[str | None], str] | None = None,
    ) -> RunOutcome:
        """Work on ``job_id`` until it is done, paused, stopped or deferred.

        ``target(cursor)`` is the URL the step's page must show (opened before each
        step and after a lost tab); ``expect_identity(cursor)`` is the identity the
        step must report for it. Raises :class:`~session_keeper.LeaseHeldError` when
        another worker holds the job.
        """
        lease = await self.store.claim(job_id, self.worker_id, self.lease_ttl)
        if self._guard is not None:
            # The contract's origins become the job conversation's network allowlist.
            contract = (await self.store.load_job(job_id)).contract
            if contract.allowed_origins:
                self._guard.allow_origins(conversation_of(contract), contract.allowed_origins)
        run = _Run(self, lease, step, target, expect_identity)
        try:
            outcome = await run.go()
        except Exception:
            # A bug (ours or the step's): do not leave the job locked until the lease
            # expires. A crash (BaseException, SIGKILL) leaves it to expire, as it must.
            if run.holds_lease:
                with contextlib.suppress(StaleLeaseError):
                    await self.store.release(run.lease)
            raise
        if run.holds_lease:
            # Taken over meanwhile: nothing of ours to release.
            with contextlib.suppress(StaleLeaseError):
                await self.store.release(run.lease)
        return outcome

    async def resume(
        self, job_id: str, *, decided_by: str, cancel: bool = False, note: str | None = None
    ) -> Checkpoint:
        """A person hands a paused job back (or cancels it).

        Re-acquires the lease, re-verifies the job's login through the keeper (a
        login still missing keeps the job paused), then moves it to ``ready`` — the
        next ``run()`` re-opens and re-verifies the target page before any step.
        Waiting time is recorded apart from active time.
        """
        check_name(decided_by, "decided_by")
        lease = await self.store.claim(job_id, self.worker_id, self.lease_ttl)
        try:
            job = await self.store.load_job(job_id)
            cp = job.checkpoint
            if cp.state != "awaiting_human":
                raise InvalidArgument(f"job {job_id!r} is {cp.state}, not awaiting_human")
            pause = await self._last_pause(job_id)
            now = self._clock.now()
            waited = (now - pause.at).total_seconds() if pause is not None else None
            data = {"decided_by": decided_by, "note": note, "human_wait_s": waited}
            if cancel:
                return await self.store.transition(
                    lease,
                    cp.checkpoint_revision,
                    "stopped",
                    pause_reason=f"cancelled by {decided_by}",
                    event=Event(kind="human_cancelled", at=now, job_id=job_id, data=data),
                )
            expires = pause.data.get("expires_at") if pause is not None else None
            if isinstance(expires, str) and datetime.fromisoformat(expires) <= now:
                return await self.store.transition(
                    lease,
                    cp.checkpoint_revision,
                    "stopped",
                    pause_reason="the human pause expired before anyone resumed it",
                    event=Event(kind="human_pause_expired", at=now, job_id=job_id, data=data),
                )
            contract = job.contract
            if contract.site is not None:
                conversation = conversation_of(contract)
                facts = await self.keeper.ensure(conversation)
                decision = self.keeper.permits(conversation, contract.site, "read")
                if decision.outcome != "act":
                    reason = (
                        f"still no usable login to {contract.site} in {facts.browser_id}: "
                        f"{decision.reason}"
                    )
                    return await self.store.transition(
                        lease,
                        cp.checkpoint_revision,
                        "awaiting_human",
                        pause_reason=reason,
                        event=Event(
                            kind="human_resume_refused",
                            at=now,
                            job_id=job_id,
                            generation=facts.generation,
                            data=data,
                        ),
                    )
                if decision.needs_revalidation:
                    # The person who resumes vouches for the account they checked.
                    self.keeper.confirm_login(conversation, contract.site)
            return await self.store.transition(
                lease,
                cp.checkpoint_revision,
                "ready",
                event=Event(kind="human_resumed", at=now, job_id=job_id, data=data),
            )
        finally:
            with contextlib.suppress(StaleLeaseError):
                await self.store.release(lease)

    async def expire_pauses(self) -> list[str]:
        """Stop every paused job whose human pause expired; return their ids.

        Meant for a periodic sweep (next to ``SessionKeeper.sweep``). A job whose
        lease another worker holds is left for a later sweep.
        """
        expired: list[str] = []
        now = self._clock.now()
        for job in await self.store.jobs(states=["awaiting_human"]):
            pause = await self._last_pause(job.job_id)
            until = pause.data.get("expires_at") if pause is not None else None
            if not isinstance(until, str) or datetime.fromisoformat(until) > now:
                continue
            try:
                lease = await self.store.claim(job.job_id, self.worker_id, self.lease_ttl)
            except LeaseHeldError:
                continue
            try:
                current = await self.store.load_job(job.job_id)
                if current.checkpoint.state == "awaiting_human":
                    await self.store.transition(
                        lease,
                        current.checkpoint.checkpoint_revision,
                        "stopped",
                        pause_reason=f"the human pause expired at {until}; resume from "
                        f"{current.checkpoint.next_cursor}",
                        event=Event(kind="human_pause_expired", at=now, job_id=job.job_id),
                    )
                    expired.append(job.job_id)
            finally:
                with contextlib.suppress(StaleLeaseError):
                    await self.store.release(lease)
        return expired

    async def _last_pause(self, job_id: str) -> Event | None:
        events = await self.store.events(
            job_id=job_id, kind="human_pause", limit=1, newest_first=True
        )
        return events[0] if events else None

    # -- external writes (called through StepContext.write) -----------------------------
    async def _external_write(
        self,
        ctx: StepContext[PageT],
        lease: Lease,
        key: str,
        intent: Mapping[str, object],
        submit: Callable[[PageT], Awaitable[Mapping[str, object]]],
        readback: Callable[[PageT], Awaitable[Readback]],
        idempotent: bool,
        url: str | None,
    ) -> Mapping[str, object]:
        start = url if url is not None else self.keeper.current_url(ctx.conversation)
        if start is None:
            raise InvalidArgument("ctx.write needs url=: the job's tab shows no page")
        check_name(start, "url")

        async def from_start() -> PageT:
            # Each callable starts on the write's own page, whatever the previous one did.
            return await self.keeper.tab(ctx.conversation, start)

        async def read() -> Readback:
            return await readback(await from_start())

        # Navigate before the intent is recorded: a navigation that fails leaves no
        # intent behind that a later attempt would have to reconcile.
        page = await from_start()
        record = await self.store.record_write_intent(lease, key, intent)
        if write_settled(record):
            return record.outcome or {}
        mine = (record.job_id, key, lease.token)
        # Only an intent this very call created may be submitted without a readback:
        # any other one may have reached the destination already.
        fresh = (
            record.status == "intent"
            and record.lease_token == lease.token
            and mine not in self._intents_created
        )
        self._intents_created.add(mine)
        if not fresh:
            # An intent from an earlier attempt (a crash, a lost answer): read back first.
            seen = await self._readback(key, read)
            if seen.status == "applied":
                await self.store.resolve_write(lease, key, "reconciled", outcome=seen.outcome)
                return seen.outcome
            if seen.status == "unknown" or not idempotent:
                if record.status == "intent":
                    await self.store.resolve_write(lease, key, "unknown")
                raise unknown(key, f"readback says {seen.status}")
            page = await from_start()
        try:
            outcome = await submit(page)
        except SUBMIT_FAILURES as exc:
            if record.status == "intent":  # an unknown one stays unknown
                await self.store.resolve_write(lease, key, "unknown")
            seen = await self._readback(key, read)
            if seen.status == "applied":
                await self.store.resolve_write(lease, key, "reconciled", outcome=seen.outcome)
                return seen.outcome
            raise unknown(
                key, f"submit failed ({type(exc).__name__}), readback {seen.status}"
            ) from exc
        await self.store.resolve_write(lease, key, "confirmed", outcome=outcome)
        return outcome

    async def _readback(self, key: str, read: Callable[[], Awaitable[Readback]]) -> Readback:
        try:
            seen = await read()
        except Exception as exc:
            # Whatever stopped the readback (its navigation included), it told us nothing.
            log.warning("readback of %s failed: %s", key, type(exc).__name__)
            return Readback(status="unknown")
        if not isinstance(seen, Readback):
            raise InvalidArgument("readback must return a Readback")
        return seen


class _Run(Generic[PageT]):
    """The state of one ``run()``: its lease, counters and monotonic timings."""

    def __init__(
        self,
        loop: JobLoop[PageT],
        lease: Lease,
        step: Step[PageT],
        target: Callable[[str | None], str] | None,
        expect_identity: Callable[[str | None], str] | None,
    ) -> None:
        self.loop = loop
        self.store = loop.store
        self.keeper = loop.keeper
        self.clock = loop._clock
        self.lease = lease
        self.step = step
        self.target = target
        self.expect_identity = expect_identity
        self.started = self.clock.monotonic()
        self.last_progress = self.started
        self.pages = 0
        self.new_records = 0
        self.repeated = 0
        self.generation: int | None = None
        self.recoveries = 0
        self.unclassified = 0
        self.lease_lost = False
        self.holds_lease = True

    # -- helpers ----------------------------------------------------------------------
    def event(self, kind: str, job: Job, **fields: Any) -> Event:
        cp = job.checkpoint
        deadline = cp.deadline_at
        remaining = (deadline - self.clock.now()).total_seconds() if deadline else None
        fields.setdefault("step", cp.next_cursor)
        return Event(
            kind=kind,
            at=self.clock.now(),
            job_id=cp.job_id,
            attempt=cp.attempts_used,
            revision=cp.checkpoint_revision,
            lease_owner=self.loop.worker_id,
            generation=self.generation,
            elapsed_s=self.clock.monotonic() - self.started,
            remaining_budget_s=remaining,
            **fields,
        )

    def outcome(
        self, cp: Checkpoint, *, reason: str | None = None, lost: bool = False
    ) -> RunOutcome:
        return RunOutcome(
            job_id=cp.job_id,
            state=cp.state,
            reason=reason if reason is not None else cp.pause_reason,
            pages_committed=self.pages,
            new_records=self.new_records,
            repeated_records=self.repeated,
            attempts_used=cp.attempts_used,
            revision=cp.checkpoint_revision,
            next_cursor=cp.next_cursor,
            lease_lost=lost or self.lease_lost,
        )

    async def move(
        self,
        job: Job,
        state: JobState,
        reason: str | None,
        *,
        kind: str,
        attempts: int | None = None,
        **fields: Any,
    ) -> Checkpoint:
        cp = job.checkpoint
        return await self.store.transition(
            self.lease,
            cp.checkpoint_revision,
            state,
            pause_reason=reason,
            attempts_used=attempts,
            event=self.event(kind, job, **fields),
        )

    # -- the loop ---------------------------------------------------------------------
    async def go(self) -> RunOutcome:
        for _ in range(MAX_RECLAIMS + 1):
            try:
                return await self._go()
            except StaleLeaseError as exc:
                # Our lease expired (a stall) or was taken over: whatever was in flight
                # is fenced off. Take it back only if nobody else holds it now; the
                # revision check still rejects anything stale.
                self.lease_lost = True
                log.warning("lease lost on %s", self.lease.job_id)
                await self.record_lease_loss(exc)
                try:
                    self.lease = await self.store.claim(
                        self.lease.job_id, self.loop.worker_id, self.loop.lease_ttl
                    )
                except LeaseHeldError:
                    self.holds_lease = False
                    return await self.without_lease("lease taken over by another worker")
        return await self.without_lease("lease kept expiring; giving the job up")

    async def record_lease_loss(self, exc: StaleLeaseError) -> None:
        """An event with the loss and the failure it interrupted (type + scrubbed text)."""
        cause = exc.__context__
        while isinstance(cause, asyncio.CancelledError | StaleLeaseError) or (
            isinstance(cause, _Stop) and cause.__context__ is not None
        ):
            cause = cause.__context__  # past the heartbeat's cancel and our own wrapping
        job = await self.store.load_job(self.lease.job_id)
        data: dict[str, object] = {
            "error": describe_error(exc),
            "cause": describe_error(cause) if cause is not None else None,
        }
        await self.store.append_event(
            self.event("lease_lost", job, failure_class="lease_lost", data=data)
        )

    async def without_lease(self, reason: str) -> RunOutcome:
        """End a run that lost its lease, in a state the README lists (never ``running``)."""
        job = await self.store.load_job(self.lease.job_id)
        cp = job.checkpoint
        if cp.state in RUN_STATES:
            return self.outcome(cp, reason=reason)
        if self.holds_lease:
            # Ours again but unworkable: hand it back as ready for a later run.
            cp = await self.move(job, "ready", None, kind="lease_given_up", data={"why": reason})
            return self.outcome(cp, reason=reason)
        # Another worker runs it now; for this run it is deferred, not in progress.
        return attrs.evolve(self.outcome(cp, reason=reason), state="ready")

    async def resume_budgets(self) -> None:
        """Budgets survive our process: a dead controller's attempt counts, and the
        no-progress clock runs from the last accepted checkpoint, not from this run."""
        job_id = self.lease.job_id
        claims = await self.store.events(
            job_id=job_id, kind="lease_claimed", limit=1, newest_first=True
        )
        job = await self.store.load_job(job_id)
        if claims and "took_over_from" in claims[0].data and job.checkpoint.state == "running":
            # The previous controller never released its lease: it died with a step in
            # flight. That attempt is spent, or a step that kills its controller would
            # be dispatched forever.
            await self.move(
                job,
                "running",
                None,
                kind="step_failed",
                attempts=job.checkpoint.attempts_used + 1,
                failure_class="controller_lost",
                data={"previous_owner": claims[0].data["took_over_from"]},
            )
        marks = [job.submitted_at]
        for kind in ("page_committed", "human_resumed"):
            last = await self.store.events(job_id=job_id, kind=kind, limit=1, newest_first=True)
            marks.extend(e.at for e in last)
        since = (self.clock.now() - max(marks)).total_seconds()
        self.last_progress = self.clock.monotonic() - max(0.0, since)

    async def _go(self) -> RunOutcome:
        await self.resume_budgets()
        while True:
            job = await self.store.load_job(self.lease.job_id)
            cp = job.checkpoint
            if cp.state in TERMINAL:
                return self.outcome(cp)
            if cp.state == "awaiting_human":
                # Control belongs to a person: no browser operation is dispatched.
                return self.outcome(cp)
            try:
                self.check_budgets(job)
            except _Stop as stop:
                cp = await self.move(job, stop.state, stop.reason, kind="budget_exhausted")
                return self.outcome(cp, reason=stop.reason)
            if cp.state != "running":
                cp = await self.move(job, "running", None, kind="job_running")
                job = attrs.evolve(job, checkpoint=cp)
            await self.keep_lease()
            try:
                done = await self.one_page(job)
            except _Stop as stop:
                job = await self.store.load_job(self.lease.job_id)
                kind = {"awaiting_human": "human_pause", "stopped": "job_stopped"}.get(
                    stop.state, f"job_{stop.state}"
                )
                fields: dict[str, Any] = {}
                if stop.state == "awaiting_human":
                    fields["data"] = self.pause_data(job, stop.reason)
                cp = await self.move(job, stop.state, stop.reason, kind=kind, **fields)
                return self.outcome(cp, reason=stop.reason)
            if done is not None:
                return done

    def pause_data(self, job: Job, reason: str) -> dict[str, object]:
        cp = job.checkpoint
        identity = (
            self.expect_identity(cp.next_cursor) if self.expect_identity is not None else None
        )
        pause = HumanPause(
            reason=reason,
            target_identity=identity,
            last_revision=cp.checkpoint_revision,
            last_committed_step=cp.last_committed_step,
            allowed_next_action="sign in as "
            + (cp.account_alias or "the job's account")
            + ", then resume; or cancel",
            expires_at=self.clock.now() + self.loop.pause_ttl,
        )
        doc = attrs.asdict(pause)
        doc["expires_at"] = pause.expires_at.isoformat()
        return doc

    def check_budgets(self, job: Job) -> None:
        cp, contract = job.checkpoint, job.contract
        now = self.clock.now()
        if cp.deadline_at is not None and now >= cp.deadline_at:
            raise _Stop(
                "stopped",
                f"deadline {cp.deadline_at.isoformat()} passed; resume from {cp.next_cursor}",
            )
        if contract.max_attempts is not None and cp.attempts_used >= contract.max_attempts:
            raise _Stop(
                "stopped",
                f"attempt budget of {contract.max_attempts} spent; resume from {cp.next_cursor}",
            )
        limit = contract.no_progress_limit_s
        if limit is not None and self.clock.monotonic() - self.last_progress > limit:
            raise _Stop(
                "stopped", f"no accepted checkpoint for {limit:g}s; resume from {cp.next_cursor}"
            )

    async def apply_restart_facts(self, job: Job) -> PageT:
        """ensure() the job's conversation and act on what it says; return the page."""
        contract = job.contract
        conversation = conversation_of(contract)
        facts = await self.keeper.ensure(conversation)
        self.generation = facts.generation
        if contract.site is not None:
            site = normalize_site(contract.site)
            lost = [x for x in facts.lost_logins if x.name == site]
            if lost:
                raise _Stop(
                    "awaiting_human",
                    f"the login to {site} was lost when browser-{lost[0].generation} ended "
                    f"(now {facts.browser_id}); a human must sign in again",
                )
            action = "write" if "write" in contract.allowed_actions else "read"
            decision = self.keeper.decide(conversation, site, action, assumes_login=True)
            if decision.outcome == "block":
                raise _Stop("stopped", f"forbidden: {decision.reason}")
            if decision.outcome != "act":
                raise _Stop("awaiting_human", f"{decision.outcome}: {decision.reason}")
            if decision.needs_revalidation and action == "write":
                # Same cookies after a restart is not the same account for sure; a job
                # that may write waits for a person (or a LoginProbe) to confirm it.
                raise _Stop(
                    "awaiting_human",
                    f"the login to {site} survived a restart but is not re-validated; "
                    "a person should confirm the account, then resume",
                )
        if facts.restarted:
            lost_url = facts.lost_tab.last_url if facts.lost_tab else None
            await self.store.append_event(
                self.event("browser_restarted", job, data={"lost_tab_url": lost_url})
            )
        cursor = job.checkpoint.next_cursor
        if self.target is not None:
            # Every step starts from the checkpoint's own target, observed afresh: an
            # old page or element reference is never trusted across steps.
            url = self.target(cursor)
            if not origin_allowed(url, contract.allowed_origins):
                raise _Stop("stopped", f"target {url} is outside the contract's origins")
            return await self.keeper.tab(conversation, url)
        if facts.lost_tab is not None and facts.lost_tab.last_url:
            # No target function: reopen the lost tab's last verified URL.
            return await self.keeper.tab(conversation, facts.lost_tab.last_url)
        return await self.keeper.tab(conversation)

    async def one_page(self, job: Job) -> RunOutcome | None:
        cp, contract = job.checkpoint, job.contract
        conversation = conversation_of(contract)
        try:
            page = await self.apply_restart_facts(job)
            ctx = StepContext(
                job_id=cp.job_id,
                conversation=conversation,
                cursor=cp.next_cursor,
                attempt=cp.attempts_used,
                checkpoint=cp,
                page=page,
                generation=self.generation or 0,
                loop=self.loop,
                lease=self.lease,
            )
            timeout = contract.step_timeout_s
            accepted = await self.with_heartbeat(asyncio.wait_for(self.step(ctx), timeout))
            self.validate(job, accepted, conversation)
            self.keeper.mark_verified(conversation)  # identity checked: this URL is verified
        except (_Stop, StaleLeaseError):
            raise  # a lost lease: nothing of this step may be committed or retried here
        except RateLimited as exc:
            return await self.rate_limited(job, exc)
        except TRANSIENT as exc:
            await self.retry(job, "transient", exc)
            return None
        except PageChanged as exc:
            self.recoveries += 1
            if self.recoveries > self.loop.max_recoveries:
                raise _Stop(
                    "stopped",
                    f"page still wrong after {self.loop.max_recoveries} recoveries: "
                    + redact_text(str(exc)),
                ) from None
            await self.retry(job, "changed_page", exc, backoff=False)
            return None
        except LoginRequired as exc:
            raise _Stop("awaiting_human", f"login needed: {redact_text(str(exc))}") from None
        except Denied as exc:
            raise _Stop("stopped", f"denied: {redact_text(str(exc))}") from None
        except Exception as exc:
            if isinstance(exc, WriteOutcomeUnknown):
                return await self.write_unknown(job, exc)
            if isinstance(exc, InvalidArgument):
                raise  # a bug in the step's use of the API: let the caller see it
            # Unclassified: a browser that died mid-step is transient; anything else is
            # retried a bounded number of times, then the job fails (never "done").
            self.unclassified += 1
            if self.keeper.alive and self.unclassified > self.loop.max_recoveries:
                raise _Stop("failed", f"step raised {describe_error(exc)}") from None
            await self.retry(job, "unclassified" if self.keeper.alive else "browser_died", exc)
            return None
        await self.hook("after_extract")
        return await self.commit(job, accepted)

    async def write_unknown(self, job: Job, exc: WriteOutcomeUnknown) -> RunOutcome | None:
        # Park it in reconciling (recorded), then hand it to a person: readback could not tell.
        job = await self.store.load_job(job.checkpoint.job_id)
        await self.move(
            job,
            "reconciling",
            None,
            kind="write_unknown",
            failure_class="write_unknown",
            data={"error": describe_error(exc)},
        )
        raise _Stop("awaiting_human", redact_text(str(exc))) from None

    def validate(self, job: Job, accepted: Accepted, conversation: str) -> None:
        if not isinstance(accepted, Accepted):
            raise InvalidArgument("a step must return ctx.accept(...)")
        cursor = job.checkpoint.next_cursor
        if self.expect_identity is not None:
            expected = self.expect_identity(cursor)
            if accepted.page_identity != expected:
                raise PageChanged(
                    f"expected page {expected!r}, observed {accepted.page_identity!r}"
                )
        url = self.keeper.current_url(conversation)
        if url is not None and not origin_allowed(url, job.contract.allowed_origins):
            raise PageChanged(f"page left the contract's origins: {url}")
        ids = [r.source_record_id for r in accepted.records]
        if len(set(ids)) != len(ids):
            raise PageChanged("the page listed a record id twice")
        for r in accepted.records:
            missing = [f for f in job.contract.required_fields if r.data.get(f) in (None, "")]
            if missing:
                raise PageChanged(f"record {r.source_record_id} lacks {', '.join(missing)}")

    async def commit(self, job: Job, accepted: Accepted) -> RunOutcome | None:
        cp = job.checkpoint
        body = json.dumps(
            [{"id": r.source_record_id, **r.data} for r in accepted.records], sort_keys=True
        ).encode()
        step_name = cp.next_cursor or "start"
        artifact = await self.store.put_artifact(body, name=f"results/{cp.job_id}/{step_name}.json")
        done = accepted.next_cursor is None
        result = await self.store.commit_page(
            self.lease,
            cp.checkpoint_revision,
            accepted.records,
            accepted.next_cursor,
            step_name,
            artifact=artifact,
            state="done" if done else None,
            event=self.event(
                "page_committed",
                job,
                step=step_name,
                page_identity=accepted.page_identity,
                validation="passed",
                artifact=artifact.digest,
            ),
        )
        self.last_progress = self.clock.monotonic()
        self.pages += 1
        self.new_records += result.new_records
        self.repeated += result.already_present
        self.recoveries = 0
        await self.hook("after_commit")
        if done:
            return self.outcome(result.checkpoint)
        return None

    async def retry(
        self, job: Job, failure_class: str, exc: BaseException, *, backoff: bool = True
    ) -> None:
        cp = job.checkpoint
        attempts = cp.attempts_used + 1
        await self.move(
            job,
            "running",
            None,
            kind="step_failed",
            attempts=attempts,
            failure_class=failure_class,
            data={"error": describe_error(exc)},
        )
        if backoff:
            # Full jitter (AWS): spreads retries out, capped, within the time budget.
            ceiling = min(self.loop.backoff_cap, self.loop.backoff_base * 2 ** (attempts - 1))
            await self.wait(job, self.loop._rng.uniform(0, ceiling))

    async def rate_limited(self, job: Job, exc: RateLimited) -> RunOutcome | None:
        cp = job.checkpoint
        delay = max(0.0, exc.retry_after)
        deadline = cp.deadline_at
        if deadline is not None and self.clock.now() + timedelta(seconds=delay) >= deadline:
            # The job cannot wait that long: persist and defer instead of burning the budget.
            reason = f"rate limited for {delay:g}s, past the deadline; deferred"
            new = await self.move(
                job,
                "ready",
                None,
                kind="rate_limited_deferred",
                failure_class="rate_limit",
                data={"retry_after_s": delay},
            )
            return self.outcome(new, reason=reason)
        await self.move(
            job,
            "running",
            None,
            kind="rate_limited",
            failure_class="rate_limit",
            data={"retry_after_s": delay},
        )
        await self.wait(job, delay)
        return None

    async def wait(self, job: Job, seconds: float) -> None:
        """Sleep, keeping the lease alive across a wait longer than it lasts."""
        remaining = seconds
        chunk_max = self.loop.lease_ttl.total_seconds() / 2
        while remaining > 0:
            self.lease = await self.store.extend(self.lease, self.loop.lease_ttl)
            chunk = min(remaining, chunk_max)
            await self.loop._sleep(chunk)
            remaining -= chunk

    async def with_heartbeat(self, work: Awaitable[T]) -> T:
        """Await ``work`` while the lease is extended every ``lease_ttl / 3`` (fenced).

        A healthy worker never loses its lease to a long step. A beat that finds the
        lease gone (expired during a stall, or taken over) cancels ``work`` and raises
        :class:`StaleLeaseError`: the step is abandoned and nothing of it is committed.
        """
        current = asyncio.current_task()
        assert current is not None
        lost: list[StaleLeaseError] = []
        every = self.loop.lease_ttl.total_seconds() / HEARTBEAT_FRACTION

        async def beat() -> None:
            while True:
                await self.loop._heartbeat_sleep(every)
                try:
                    self.lease = await self.store.extend(self.lease, self.loop.lease_ttl)
                except StaleLeaseError as exc:
                    lost.append(exc)
                    current.cancel()
                    return
                except StoreError as exc:
                    # Busy or unreachable for a moment: two more beats before expiry.
                    log.warning("lease heartbeat on %s failed: %s", self.lease.job_id, exc)

        beating = asyncio.ensure_future(beat())
        try:
            result = await work
        except asyncio.CancelledError:
            if lost and current.uncancel() == 0:
                raise lost[0] from None
            raise
        finally:
            beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beating
        if lost:
            current.uncancel()  # the step swallowed our cancel; the lease is gone all the same
            raise lost[0]
        return result

    async def keep_lease(self) -> None:
        """Extend the lease once half of it is used: fencing without a write per page."""
        left = (self.lease.expires_at - self.clock.now()).total_seconds()
        if left < self.loop.lease_ttl.total_seconds() / 2:
            self.lease = await self.store.extend(self.lease, self.loop.lease_ttl)

    async def hook(self, point: FaultPoint) -> None:
        fault = self.loop._faults.get(point)
        if fault is not None:
            await fault()
