"""The worker side: browser steps as activities on the worker that holds the browser.

Each worker process owns a :class:`~session_keeper.KeeperPool` (its profiles leased in
the Store) and polls two queues: the shared one, where :data:`CLAIM_ACTIVITY` answers
with the worker's own queue, and its own, where the steps run. A step's activity holds
its conversation's profile for the step, calls ``ensure()`` with a turn id made of the
workflow id and the activity id (never the attempt number: a retry is told the same
facts, a new step new ones), reopens a lost tab at its last verified URL, checks the
logins the step needs are live, and maps what the step raises onto Temporal's failures.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import timedelta
from typing import Any, Generic
from urllib.parse import urlsplit

import attrs
from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from session_keeper._browser.backend import PageT
from session_keeper._keeper.handle import ConversationTab
from session_keeper._keeper.keeper import SessionKeeper
from session_keeper._model.cookies import normalize_site
from session_keeper._model.facts import TurnFacts
from session_keeper._model.grants import check_name
from session_keeper._util.redact import scrubbing_logger
from session_keeper._util.validate import check_duration
from session_keeper.errors import (
    Denied,
    InvalidArgument,
    InvalidArgumentType,
    LoginRequired,
    ProfileHeld,
    ProfileLeaseLost,
    RateLimited,
    SignedOut,
    WriteOutcomeUnknown,
)
from session_keeper.integrations.temporal._workflow import (
    CLAIM_ACTIVITY,
    DENIED,
    LOGIN_REQUIRED,
    PROFILE_HELD,
    WRITE_OUTCOME_UNKNOWN,
    StepRequest,
    StepResult,
)
from session_keeper.jobs import Readback
from session_keeper.jobs._failures import SUBMIT_FAILURES
from session_keeper.pool import KeeperPool

log = scrubbing_logger("session_keeper.integrations.temporal")

#: What a browser step is: ``await fn(step, arg)`` returns a JSON-serialisable value.
StepFn = Callable[["BrowserStep[Any]", Any], Awaitable[Any]]


@attrs.frozen(kw_only=True)
class BrowserStepDef:
    """A browser step: the activity ``name``, the function, the logins it needs live."""

    name: str
    fn: StepFn
    sites: tuple[str, ...] = ()


class BrowserSteps:
    """A set of browser steps, declared once and registered by every browser worker.

    ``@steps.step("audit_page", sites=("catalogue.example",))`` above
    ``async def audit_page(step: BrowserStep, arg) -> value`` declares one; the workflow
    runs it by the returned definition or its name (:meth:`WorkflowBrowser.step`).
    """

    def __init__(self) -> None:
        self._defs: dict[str, BrowserStepDef] = {}

    def step(
        self, name: str | None = None, *, sites: Iterable[str] = ()
    ) -> Callable[[StepFn], BrowserStepDef]:
        """Declare a step named ``name`` (default: the function's name) needing ``sites``."""
        needed = tuple(normalize_site(check_name(s, "site")) for s in sites)

        def declare(fn: StepFn) -> BrowserStepDef:
            if not callable(fn):
                raise InvalidArgumentType("a browser step must be an async function")
            step_name = check_name(name if name is not None else fn.__name__, "step name")
            if step_name in self._defs or step_name == CLAIM_ACTIVITY:
                raise InvalidArgument(f"a browser step named {step_name!r} is declared already")
            made = BrowserStepDef(name=step_name, fn=fn, sites=needed)
            self._defs[step_name] = made
            return made

        return declare

    def __iter__(self) -> Any:
        return iter(tuple(self._defs.values()))


def idempotency_key(workflow_id: str, activity_id: str, key: str) -> str:
    """The idempotency key of write ``key`` of a step: the same on every attempt of it."""
    return f"{workflow_id}:{activity_id}:{key}"


def login_required(
    conversation: str, site: str, facts: TurnFacts, checkpoint: Any = None
) -> ApplicationError:
    """The non-retryable :data:`LOGIN_REQUIRED` failure asking a person to sign in.

    ``checkpoint``: the step's last one, so the re-run after the sign-in resumes there
    (a re-run is a new activity, which starts with no heartbeat details).
    """
    return ApplicationError(
        f"{conversation} needs a live login to {site}; ask a person to sign in",
        {
            "conversation": conversation,
            "site": site,
            "facts": facts.to_dict(),
            "checkpoint": checkpoint,
        },
        type=LOGIN_REQUIRED,
        non_retryable=True,
        # An expected turn of the workflow (it waits for a person), not a fault: the
        # worker logs it at DEBUG, with no traceback on a user's terminal.
        category=ApplicationErrorCategory.BENIGN,
    )


class _Progress:
    """A step's checkpoint, shared by the step and the beat that keeps it alive."""

    def __init__(self, request: StepRequest) -> None:
        details = activity.info().heartbeat_details
        self.checkpoint: Any = details[0] if details else request.checkpoint


class BrowserStep(Generic[PageT]):
    """What a step function gets: the turn's facts, the page, checkpoints and writes."""

    def __init__(
        self,
        keeper: SessionKeeper[PageT],
        facts: TurnFacts,
        request: StepRequest,
        progress: _Progress,
        *,
        worker_id: str,
        workflow_id: str,
        activity_id: str,
        fresh: bool,
        confirm_lease: Callable[[], Awaitable[None]],
    ) -> None:
        self._keeper = keeper
        self._confirm_lease = confirm_lease
        #: This turn's facts: the same on every attempt of the step.
        self.facts = facts
        self.conversation = request.conversation
        #: The worker running this attempt.
        self.worker_id = worker_id
        self._workflow_id = workflow_id
        self._activity_id = activity_id
        self._fresh = fresh
        self._written: set[str] = set()
        self._progress = progress

    @property
    def checkpoint(self) -> Any:
        """Where to resume: this step's last heartbeat (a retry), else the one a dead
        worker sent before the failover, else ``None`` (start from the beginning)."""
        return self._progress.checkpoint

    @property
    def keeper(self) -> SessionKeeper[PageT]:
        """The keeper of the conversation's profile on this worker."""
        return self._keeper

    async def page(self, url: str | None = None) -> PageT:
        """The conversation's raw page (as a ``JobLoop`` step's ``ctx.page``), at ``url``.

        Unguarded: never hand it to LLM-driven code; use :meth:`tab` for that.
        """
        return await self._keeper.unguarded_page(self.conversation, url)

    async def tab(self, url: str | None = None) -> ConversationTab:
        """The conversation's guarded :class:`~session_keeper.ConversationTab`."""
        return await self._keeper.tab(self.conversation, url)

    def heartbeat(self, checkpoint: Any) -> None:
        """Record progress: Temporal keeps ``checkpoint`` as the heartbeat's details, and the
        next attempt (on this or another worker) starts from it. The tab's URL is marked
        verified, so a lost tab reopens here."""
        self._progress.checkpoint = checkpoint
        if self._keeper.has_tab(self.conversation):
            self._keeper.mark_verified(self.conversation)
        activity.heartbeat(checkpoint)

    def idempotency_key(self, key: str) -> str:
        """The idempotency key of write ``key``: workflow id + activity id + ``key``."""
        return idempotency_key(self._workflow_id, self._activity_id, check_name(key, "key"))

    async def write(
        self,
        key: str,
        submit: Callable[[PageT, str], Awaitable[Mapping[str, object]]],
        readback: Callable[[PageT, str], Awaitable[Readback]],
        *,
        url: str | None = None,
        idempotent: bool = True,
    ) -> Mapping[str, object]:
        """An external write, done at most once as far as the destination can tell.

        ``submit(page, idem_key)`` performs it; ``readback(page, idem_key)`` says whether
        it happened (:class:`~session_keeper.jobs.Readback`). Both start on ``url``
        (default: the page the step is on). Only the first attempt of the step's first
        dispatch submits unread; every other attempt (a retry, a failover) reads back
        first and returns what the destination says was applied. A submit that fails is
        read back at once. ``idempotent``: whether the destination deduplicates by the
        key (then an attempt that reads ``absent`` submits again under the same key).

        Raises :class:`WriteOutcomeUnknown` (non-retryable
        :data:`WRITE_OUTCOME_UNKNOWN`) when the readback cannot tell, or a
        non-idempotent write's outcome is in doubt; a retryable failure when a failed
        submit reads back ``absent`` on an idempotent destination.
        """
        idem = self.idempotency_key(key)
        if idem in self._written:
            raise InvalidArgument(f"write {key!r} was done already in this step")
        self._written.add(idem)
        start = url if url is not None else self._keeper.current_url(self.conversation)
        if start is None:
            raise InvalidArgument("write needs url=: the conversation's tab shows no page")

        async def read() -> Readback:
            try:
                seen = await readback(await self.page(start), idem)
            except Exception as exc:
                # Whatever stopped the readback (its navigation included) told us nothing.
                log.warning("readback of %s failed: %s", key, type(exc).__name__)
                return Readback(status="unknown")
            if not isinstance(seen, Readback):
                raise InvalidArgumentType("readback must return a Readback")
            return seen

        page = await self.page(start)
        if not self._fresh:
            # An earlier attempt may have reached the destination: read back first.
            seen = await read()
            if seen.status == "applied":
                log.info("write %s reconciled by readback", key)
                return seen.outcome
            if seen.status == "unknown" or not idempotent:
                raise WriteOutcomeUnknown(
                    f"external write {key!r}: readback says {seen.status}; "
                    "a person must reconcile it"
                )
            page = await self.page(start)
        # Fencing: a worker that was paused past its profile's lease (another may hold
        # it now, and run this very step) must not write. The store says whether the
        # lease is still ours; ProfileLeaseLost fences this worker's browser.
        await self._confirm_lease()
        try:
            return await submit(page, idem)
        except SUBMIT_FAILURES as exc:
            seen = await read()
            if seen.status == "applied":
                log.info("write %s reconciled by readback after %s", key, type(exc).__name__)
                return seen.outcome
            if seen.status == "absent" and idempotent:
                # Not applied: the engine's next attempt reads back again, then submits
                # under the same key.
                raise
            raise WriteOutcomeUnknown(
                f"external write {key!r}: submit failed ({type(exc).__name__}), readback "
                f"{seen.status}; a person must reconcile it"
            ) from exc


class BrowserWorker(Generic[PageT]):
    """A worker process's browser steps: its pool, its own task queue, its activities.

    ``pool``: this worker's :class:`~session_keeper.KeeperPool` (leasing its profiles in
    the Store shared by every worker, so a dead worker's profile goes to another only
    after its lease expired). ``queue``: the shared task queue; this worker's own is
    ``<queue>@<worker_id>`` (:attr:`own_queue`). ``heartbeat_every``: how often a
    running step heartbeats (keep it well under the session's ``heartbeat_timeout``).

    Run :meth:`claim_activities` on a Temporal worker for ``queue`` (with your
    workflows) and :meth:`step_activities` on one for :attr:`own_queue`.
    """

    def __init__(
        self,
        pool: KeeperPool[PageT],
        *,
        worker_id: str,
        queue: str,
        steps: Iterable[BrowserStepDef],
        heartbeat_every: timedelta = timedelta(seconds=1),
    ) -> None:
        if not isinstance(pool, KeeperPool):
            raise InvalidArgumentType("pool must be a KeeperPool")
        self._pool = pool
        self.worker_id = check_name(worker_id, "worker_id")
        self.queue = check_name(queue, "queue")
        self._steps = tuple(steps)
        for made in self._steps:
            if not isinstance(made, BrowserStepDef):
                raise InvalidArgumentType("steps must be BrowserStepDefs (BrowserSteps.step)")
        check_duration(heartbeat_every, "heartbeat_every")
        self._beat = heartbeat_every.total_seconds()

    @property
    def own_queue(self) -> str:
        """This worker's own task queue, where the steps of the browsers it holds run."""
        return f"{self.queue}@{self.worker_id}"

    def claim_activities(self) -> list[Callable[..., Any]]:
        """The activities for the shared queue: :data:`CLAIM_ACTIVITY`."""
        own = self.own_queue

        @activity.defn(name=CLAIM_ACTIVITY)
        async def claim() -> str:
            return own

        return [claim]

    def step_activities(self) -> list[Callable[..., Any]]:
        """One activity per step, for :attr:`own_queue`."""
        return [self._activity(made) for made in self._steps]

    def _activity(self, made: BrowserStepDef) -> Callable[..., Any]:
        async def run(request: StepRequest) -> StepResult:
            return await self._run(made, request)

        return activity.defn(name=made.name)(run)

    async def _run(self, made: BrowserStepDef, request: StepRequest) -> StepResult:
        info = activity.info()
        workflow_id = info.workflow_id or info.activity_id
        conversation = check_name(request.conversation, "conversation")
        # Every attempt of the step is one turn, told the same facts (a retry, a re-run after
        # a sign-in). A step that failed over to another worker is a new turn: the dead
        # worker's browser is news to tell it, which the step's first turn (told in a
        # process now gone) cannot carry. The count comes from the workflow's history.
        turn = f"{workflow_id}/{info.activity_id}"
        if request.failovers:
            turn += f"/failover-{request.failovers}"
        progress = _Progress(request)
        # Beats from the start: taking the profile's lease and launching its browser
        # take a while, and a silent attempt would be timed out and run twice at once.
        beating = asyncio.create_task(self._heartbeats(progress))
        try:
            async with self._pool.hold(
                conversation, site=request.site, account=request.account
            ) as keeper:
                return await self._turn(keeper, made, request, progress, workflow_id, turn)
        except ProfileHeld as exc:
            # Another worker leases the profile (a dead one until its lease expires):
            # the retry policy tries again; nothing was touched.
            raise ApplicationError(str(exc), type=PROFILE_HELD) from exc
        except ProfileLeaseLost as exc:
            # This worker was paused past its lease and is fenced; nothing was written.
            # The retry (here or on the worker that took the profile) reads back first.
            raise ApplicationError(str(exc), type=PROFILE_HELD) from exc
        finally:
            beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beating

    async def _turn(
        self,
        keeper: SessionKeeper[PageT],
        made: BrowserStepDef,
        request: StepRequest,
        progress: _Progress,
        workflow_id: str,
        turn: str,
    ) -> StepResult:
        info = activity.info()
        conversation = request.conversation
        facts = await keeper.ensure(conversation, turn=turn)
        live = {r.site for r in keeper.logins()}
        for site in _needed(facts, made.sites):
            # Checked on every attempt: a sign-in signal is no proof anyone signed in.
            if site not in live:
                raise login_required(conversation, site, facts, progress.checkpoint)
        if facts.lost_tab is not None and facts.lost_tab.last_url:
            await keeper.unguarded_page(conversation, facts.lost_tab.last_url)
        step: BrowserStep[PageT] = BrowserStep(
            keeper,
            facts,
            request,
            progress,
            worker_id=self.worker_id,
            workflow_id=workflow_id,
            activity_id=info.activity_id,
            fresh=info.attempt == 1 and request.dispatch == 1,
            confirm_lease=lambda: self._pool.confirm_lease(conversation),
        )
        try:
            value = await made.fn(step, request.arg)
        except LoginRequired as exc:
            signed_out = _site_of(made, request, keeper.current_url(conversation))
            if signed_out is None:
                raise
            if isinstance(exc, SignedOut):
                # The site showed it is signed out: its login is lost, told once to all.
                await keeper.report_signed_out(signed_out, reported_by=f"temporal:{self.worker_id}")
            raise login_required(conversation, signed_out, facts, progress.checkpoint) from exc
        except RateLimited as exc:
            raise ApplicationError(
                str(exc),
                type=type(exc).__name__,
                next_retry_delay=timedelta(seconds=exc.retry_after),
            ) from exc
        except Denied as exc:
            raise ApplicationError(str(exc), type=DENIED, non_retryable=True) from exc
        except WriteOutcomeUnknown as exc:
            raise ApplicationError(
                str(exc), type=WRITE_OUTCOME_UNKNOWN, non_retryable=True
            ) from exc
        if keeper.has_tab(conversation):
            keeper.mark_verified(conversation)  # a lost tab reopens where the step ended
        return StepResult(
            value=value,
            facts=facts.to_dict(),
            worker=self.worker_id,
            told=bool(facts.restarted or facts.lost or facts.renewed),
        )

    async def _heartbeats(self, progress: _Progress) -> None:
        # A step that never heartbeats itself still shows it is alive; the details stay
        # the last checkpoint, so a beat never erases progress.
        while True:
            checkpoint = progress.checkpoint
            activity.heartbeat(*(() if checkpoint is None else (checkpoint,)))
            await asyncio.sleep(self._beat)


def _needed(facts: TurnFacts, sites: Iterable[str]) -> list[str]:
    wanted = list(sites)
    for x in facts.lost_logins:
        if x.owner == facts.conversation and x.name not in wanted:
            wanted.append(x.name)
    return wanted


def _site_of(made: BrowserStepDef, request: StepRequest, url: str | None) -> str | None:
    """The site a step that met a lost login needs: its first declared one, the routing
    hint, else the one its tab is on (a step declaring none must still not be retried
    against a sign-in page until its retries run out)."""
    if made.sites:
        return made.sites[0]
    if request.site:
        return normalize_site(request.site)
    host = urlsplit(url).hostname if url else None
    return normalize_site(host) if host else None
