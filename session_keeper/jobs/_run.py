"""One run of one job: the lease held, budgets checked, one page at a time, committed fenced.

Each round: check state, deadline and budgets → keeper.ensure(job conversation) →
apply the restart facts (lost login → awaiting_human; lost tab → reopen the
checkpoint's target and observe afresh) → one step within the step timeout (lease
heartbeat running) → validate page identity, origin and required fields → fenced
atomic commit → events. A step's failure is classified by ``_failures`` and its
class's policy applied here: this is the one layer that retries.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Generic

import attrs

from session_keeper._browser.backend import PageT
from session_keeper._keeper.facade.keeper import SessionKeeper
from session_keeper._model.cookies import normalize_site
from session_keeper._model.events import EventKind
from session_keeper._util.log_fields import log_fields
from session_keeper._util.redact import (
    describe_error,
    redact_text,
    scrub_fields,
    scrub_secrets,
    scrubbing_logger,
)
from session_keeper.errors import (
    LeaseHeldError,
    RateLimited,
    SignedOut,
    StaleLeaseError,
    WriteOutcomeUnknown,
)
from session_keeper.jobs._acceptance import validate
from session_keeper.jobs._budgets import check_budgets, dead_controller, last_progress_at
from session_keeper.jobs._context import Accepted, Step, StepContext
from session_keeper.jobs._failures import classify
from session_keeper.jobs._lease import LeaseKeeper
from session_keeper.jobs._origins import conversation_of, is_login_page, origin_allowed
from session_keeper.jobs._outcome import RUN_STATES, TERMINAL, RunOutcome, Stop, stop_kind
from session_keeper.jobs._pauses import (
    HumanPause,
    found_signed_out,
    pause_document,
    renewed_for_job,
    signed_out,
)
from session_keeper.jobs._settings import LoopSettings
from session_keeper.jobs._writes import ExternalWrites
from session_keeper.stores import Event, Store
from session_keeper.stores._records import Checkpoint, Job, JobState, Lease, PageArtifact

log = scrubbing_logger("session_keeper.jobs")

#: How often one run takes back a lease that expired under it before giving up.
MAX_RECLAIMS = 3


class JobRun(Generic[PageT]):
    """The state of one :meth:`JobLoop.run`: its lease, counters and monotonic timings."""

    def __init__(
        self,
        keeper: SessionKeeper[PageT],
        store: Store,
        settings: LoopSettings,
        writes: ExternalWrites[PageT],
        lease: Lease,
        step: Step[PageT],
        target: Callable[[str | None], str] | None,
        expect_identity: Callable[[str | None], str] | None,
    ) -> None:
        self.keeper = keeper
        self.store = store
        self.settings = settings
        self.writes = writes
        self.clock = keeper.clock
        self.lease = LeaseKeeper(store, self.clock, settings, lease)
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
        # The current step attempt's outcome and failure class (its span says them).
        self.step_outcome: str = "error"
        self.failure_class: str | None = None
        #: The checkpoint the current attempt's page commit wrote (``None``: no commit).
        self.committed: Checkpoint | None = None

    # -- records ----------------------------------------------------------------------
    def event(self, kind: EventKind, job: Job, **fields: Any) -> Event:
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
            lease_owner=self.settings.worker_id,
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
            reason=scrub_secrets(reason) if reason is not None else cp.pause_reason,
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
        kind: EventKind,
        attempts: int | None = None,
        **fields: Any,
    ) -> Checkpoint:
        cp = job.checkpoint
        # Error texts and reasons may quote a cookie value: scrub the live jar's values.
        scrub = await self.keeper.scrubber()
        return await self.store.transition(
            self.lease.lease,
            cp.checkpoint_revision,
            state,
            pause_reason=scrub(reason) if reason is not None else None,
            attempts_used=attempts,
            event=self.event(kind, job, **scrub_fields(fields, scrub)),
        )

    # -- the run, across lease losses ---------------------------------------------------
    async def go(self) -> RunOutcome:
        for _ in range(MAX_RECLAIMS + 1):
            try:
                return await self.work()
            except StaleLeaseError as exc:
                # Our lease expired (a stall) or was taken over: whatever was in flight
                # is fenced off. Take it back only if nobody else holds it now; the
                # revision check still rejects anything stale.
                self.lease_lost = True
                self.settings.instruments.add(
                    "session_keeper.lease_losses", 1, {"session_keeper.lease.kind": "job"}
                )
                log.warning("lease lost on %s", self.lease.job_id)
                await self.record_lease_loss(exc)
                try:
                    await self.lease.reclaim()
                except LeaseHeldError:
                    self.lease.held = False
                    return await self.without_lease("lease taken over by another worker")
        return await self.without_lease("lease kept expiring; giving the job up")

    async def record_lease_loss(self, exc: StaleLeaseError) -> None:
        """An event with the loss and the failure it interrupted (type + scrubbed text)."""
        cause = exc.__context__
        while isinstance(cause, asyncio.CancelledError | StaleLeaseError) or (
            isinstance(cause, Stop) and cause.__context__ is not None
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
        if self.lease.held:
            # Ours again but unworkable: hand it back as ready for a later run.
            cp = await self.move(job, "ready", None, kind="lease_given_up", data={"why": reason})
            return self.outcome(cp, reason=reason)
        # Another worker runs it now; for this run it is deferred, not in progress.
        return attrs.evolve(self.outcome(cp, reason=reason), state="ready")

    # -- budgets ------------------------------------------------------------------------
    async def resume_budgets(self) -> None:
        """Budgets survive our process: a dead controller's attempt counts, and the
        no-progress clock runs from the last accepted checkpoint, not from this run."""
        job = await self.store.load_job(self.lease.job_id)
        previous = await dead_controller(self.store, job)
        if previous is not None:
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
                data={"previous_owner": previous},
            )
        since = (self.clock.now() - await last_progress_at(self.store, job)).total_seconds()
        self.last_progress = self.clock.monotonic() - max(0.0, since)

    # -- one page at a time ---------------------------------------------------------------
    async def work(self) -> RunOutcome:
        await self.resume_budgets()
        job: Job | None = None
        while True:
            if job is None:
                job = await self.store.load_job(self.lease.job_id)
            cp = job.checkpoint
            if cp.state in TERMINAL:
                return self.outcome(cp)
            if cp.state == "awaiting_human":
                # Control belongs to a person: no browser operation is dispatched.
                return self.outcome(cp)
            try:
                check_budgets(job, self.clock.now(), self.clock.monotonic() - self.last_progress)
            except Stop as stop:
                cp = await self.move(job, stop.state, stop.reason, kind="budget_exhausted")
                return self.outcome(cp, reason=stop.reason)
            if cp.state != "running":
                cp = await self.move(job, "running", None, kind="job_running")
                job = attrs.evolve(job, checkpoint=cp)
            await self.lease.keep_fresh()
            self.committed = None
            try:
                done = await self.one_page(job)
            except Stop as stop:
                job = await self.store.load_job(self.lease.job_id)
                kind = stop_kind(stop.state)
                fields: dict[str, Any] = {}
                if stop.state == "awaiting_human":
                    fields["data"] = self.pause_data(job, stop.reason, stop.login_site)
                cp = await self.move(job, stop.state, stop.reason, kind=kind, **fields)
                return self.outcome(cp, reason=stop.reason)
            if done is not None:
                return done
            # A page committed: the checkpoint its commit wrote is the job's now, with no
            # read back. Every change to a job is made under its lease, which is ours
            # with at least half of it left (keep_fresh), so nobody else can have moved
            # it since; a commit of ours that is stale all the same is still refused by
            # its fence. After anything else (a retry's move), the job is read again.
            job = None if self.committed is None else attrs.evolve(job, checkpoint=self.committed)

    def pause_data(self, job: Job, reason: str, login_site: str | None) -> dict[str, object]:
        cp = job.checkpoint
        identity = (
            self.expect_identity(cp.next_cursor) if self.expect_identity is not None else None
        )
        return pause_document(
            HumanPause(
                reason=reason,
                target_identity=identity,
                last_revision=cp.checkpoint_revision,
                last_committed_step=cp.last_committed_step,
                allowed_next_action="sign in as "
                + (cp.account_alias or "the job's account")
                + ", then resume; or cancel",
                expires_at=self.clock.now() + self.settings.pause_ttl,
                login_site=login_site,
            )
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
            if lost and site in facts.renewed:
                lost = []  # lost, then signed in again by the keeper: a fresh login
            if lost and await renewed_for_job(self.keeper, contract):
                lost = []
            if lost:
                why = (
                    f"{site} signed the login out"
                    if lost[0].cause == "signed_out"
                    else f"the login to {site} was lost when browser-{lost[0].generation} ended "
                    f"(now {facts.browser_id})"
                )
                raise Stop("awaiting_human", f"{why}; a human must sign in again", login_site=site)
            action = "write" if "write" in contract.allowed_actions else "read"
            decision = self.keeper.decide(conversation, site, action, assumes_login=True)
            if decision.outcome == "block":
                raise Stop("stopped", f"forbidden: {decision.reason}")
            if decision.outcome != "act":
                raise Stop(
                    "awaiting_human", f"{decision.outcome}: {decision.reason}", login_site=site
                )
            if decision.needs_revalidation and action == "write":
                # Same cookies after a restart is not the same account for sure; a job
                # that may write waits for a person (or a LoginProbe) to confirm it.
                raise Stop(
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
                raise Stop("stopped", f"target {url} is outside the contract's origins")
            page = await self.keeper.unguarded_page(conversation, url)
            if is_login_page(self.keeper.current_url(conversation), contract.login_url):
                stop = await signed_out(
                    self.keeper, job.contract, "the target redirected to the sign-in page"
                )
                if stop is not None:
                    raise stop
                page = await self.keeper.unguarded_page(conversation, url)  # renewed
                if is_login_page(self.keeper.current_url(conversation), contract.login_url):
                    raise Stop(
                        "awaiting_human",
                        "renewed, but the target still shows the sign-in page",
                        login_site=contract.site,
                    )
            return page
        if facts.lost_tab is not None and facts.lost_tab.last_url:
            # No target function: reopen the lost tab where the browser last had it.
            return await self.keeper.unguarded_page(conversation, facts.lost_tab.last_url)
        return await self.keeper.unguarded_page(conversation)

    async def one_page(self, job: Job) -> RunOutcome | None:
        """One step attempt, in the span ``session_keeper.job.step`` (and timed)."""
        cp = job.checkpoint
        instruments = self.settings.instruments
        self.step_outcome, self.failure_class = "error", None
        stopped: Stop | None = None
        started = time.monotonic()
        with (
            instruments.span("session_keeper.job.step") as span,
            log_fields(
                job__id=cp.job_id,
                job__step=cp.next_cursor,
                job__attempt=cp.attempts_used,
                job__revision=cp.checkpoint_revision,
            ),
        ):
            try:
                done = await self.attempt(job)
            except Stop as stop:
                # A pause or a stop is the policy's answer, not an error of the span.
                self.step_outcome, stopped, done = stop.state, stop, None
            except StaleLeaseError:
                self.step_outcome = "lease_lost"
                raise
            finally:
                attributes = self.step_attributes(job) if instruments.metering else None
                if attributes is not None:
                    instruments.record(
                        "session_keeper.job.step.duration", time.monotonic() - started, attributes
                    )
                if span.is_recording():
                    span.set_attributes(
                        attributes if attributes is not None else self.step_attributes(job)
                    )
        if stopped is not None:
            raise stopped
        return done

    def step_attributes(self, job: Job) -> dict[str, Any]:
        """The step's span attributes (and its latency point's): names and numbers."""
        cp = job.checkpoint
        out: dict[str, Any] = {
            "session_keeper.job.id": cp.job_id,
            "session_keeper.job.step": cp.next_cursor or "start",
            "session_keeper.job.attempt": cp.attempts_used,
            "session_keeper.job.revision": cp.checkpoint_revision,
            "session_keeper.job.outcome": self.step_outcome,
        }
        if self.failure_class is not None:
            out["session_keeper.job.failure_class"] = self.failure_class
        if self.generation is not None:
            out["session_keeper.generation"] = self.generation
        return out

    async def attempt(self, job: Job) -> RunOutcome | None:
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
                writes=self.writes,
                lease=self.lease.lease,
            )
            timeout = contract.step_timeout_s
            accepted = await self.lease.heartbeat(asyncio.wait_for(self.step(ctx), timeout))
            validate(
                job, accepted, lambda: self.keeper.current_url(conversation), self.expect_identity
            )
            self.keeper.mark_verified(conversation)  # identity checked: this URL is verified
        except (Stop, StaleLeaseError):
            raise  # a lost lease: nothing of this step may be committed or retried here
        except Exception as exc:
            return await self.failed(job, exc)
        await self.settings.hooks.fault("after_extract")
        return await self.commit(job, accepted)

    # -- failures: the policy of each class (``_failures.classify``) ------------------------
    async def failed(self, job: Job, exc: Exception) -> RunOutcome | None:
        """Apply the policy of ``exc``'s failure class: retry, wait, pause or stop.

        Called while ``exc`` is being handled, so a :class:`Stop` raised here keeps it
        as context (the lease-loss event reports it as the interrupted failure).
        """
        contract = job.contract
        conversation = conversation_of(contract)
        failure = classify(exc)
        self.failure_class = failure
        if failure == "rate_limit" and isinstance(exc, RateLimited):
            return await self.rate_limited(job, exc)
        if failure == "transient":
            await self.retry(job, "transient", exc)
            return None
        if failure == "changed_page":
            if await found_signed_out(self.keeper, contract, conversation):
                stop = await signed_out(self.keeper, contract, "the step found the site signed out")
                if stop is not None:
                    raise stop from None
                await self.retry(job, "renewed", exc, backoff=False)
                return None
            self.recoveries += 1
            if self.recoveries > self.settings.max_recoveries:
                raise Stop(
                    "stopped",
                    f"page still wrong after {self.settings.max_recoveries} recoveries: "
                    + redact_text(str(exc)),
                ) from None
            await self.retry(job, "changed_page", exc, backoff=False)
            return None
        if failure == "login":
            if isinstance(exc, SignedOut) or await found_signed_out(
                self.keeper, contract, conversation
            ):
                stop = await signed_out(self.keeper, contract, redact_text(str(exc)))
                if stop is not None:
                    raise stop from None
                await self.retry(job, "renewed", exc, backoff=False)
                return None
            raise Stop("awaiting_human", f"login needed: {redact_text(str(exc))}") from None
        if failure == "refusal":
            raise Stop("awaiting_human", f"refused: {redact_text(str(exc))}") from None
        if failure == "denial":
            raise Stop("stopped", f"denied: {redact_text(str(exc))}") from None
        if failure == "write_unknown" and isinstance(exc, WriteOutcomeUnknown):
            return await self.write_unknown(job, exc)
        if failure in ("usage", "store"):
            # A bug in the step's use of the API, or a store outage: the caller sees the
            # error; no attempt is spent and the job keeps its state (resumable).
            raise exc
        # Unclassified: a browser that died mid-step is transient; anything else is
        # retried a bounded number of times, then the job fails (never "done").
        self.unclassified += 1
        if self.keeper.alive and self.unclassified > self.settings.max_recoveries:
            raise Stop("failed", f"step raised {describe_error(exc)}") from None
        await self.retry(job, "unclassified" if self.keeper.alive else "browser_died", exc)
        return None

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
        raise Stop("awaiting_human", redact_text(str(exc))) from None

    async def retry(
        self, job: Job, failure_class: str, exc: BaseException, *, backoff: bool = True
    ) -> None:
        cp = job.checkpoint
        attempts = cp.attempts_used + 1
        self.step_outcome, self.failure_class = "retry", failure_class
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
            ceiling = self.settings.backoff_ceiling(attempts)
            await self.lease.wait(self.settings.hooks.rng.uniform(0, ceiling))

    async def rate_limited(self, job: Job, exc: RateLimited) -> RunOutcome | None:
        cp = job.checkpoint
        delay = max(0.0, exc.retry_after)
        deadline = cp.deadline_at
        if deadline is not None and self.clock.now() + timedelta(seconds=delay) >= deadline:
            # The job cannot wait that long: persist and defer instead of burning the budget.
            self.step_outcome = "deferred"
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
        self.step_outcome = "rate_limited"
        await self.lease.wait(delay)
        return None

    # -- acceptance -----------------------------------------------------------------------
    async def commit(self, job: Job, accepted: Accepted) -> RunOutcome | None:
        cp = job.checkpoint
        body = json.dumps(
            [{"id": r.source_record_id, **r.data} for r in accepted.records], sort_keys=True
        ).encode()
        step_name = cp.next_cursor or "start"
        done = accepted.next_cursor is None
        # The page's artifact is written inside the fenced commit: one durable commit
        # per page, and a worker fenced meanwhile (or killed) stores neither the
        # artifact nor the checkpoint. The store fills in the event's artifact digest.
        result = await self.store.commit_page(
            self.lease.lease,
            cp.checkpoint_revision,
            accepted.records,
            accepted.next_cursor,
            step_name,
            artifact=PageArtifact(name=f"results/{cp.job_id}/{step_name}.json", data=body),
            state="done" if done else None,
            event=self.event(
                "page_committed",
                job,
                step=step_name,
                page_identity=accepted.page_identity,
                validation="passed",
            ),
        )
        self.committed = result.checkpoint
        self.last_progress = self.clock.monotonic()
        self.pages += 1
        self.new_records += result.new_records
        self.repeated += result.already_present
        self.recoveries = 0
        self.step_outcome = "committed"
        await self.settings.hooks.fault("after_commit")
        if done:
            return self.outcome(result.checkpoint)
        return None
