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
from collections.abc import Awaitable, Callable, Iterable
from datetime import timedelta
from typing import Any, Generic

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from session_keeper._browser.backend import PageT
from session_keeper._keeper.facade.keeper import SessionKeeper
from session_keeper._model.facts import TurnFacts
from session_keeper._model.grants import check_name
from session_keeper._util.validate import check_duration
from session_keeper.errors import (
    Denied,
    InvalidArgumentType,
    PolicyRefusal,
    ProfileHeld,
    ProfileLeaseLost,
    RateLimited,
    WriteOutcomeUnknown,
)
from session_keeper.integrations import _steps
from session_keeper.integrations._steps import (
    BrowserStepDef,
    SignInNeeded,
    StepFn,
    StepSet,
    idempotency_key,
    run_turn,
    step_result,
)
from session_keeper.integrations.temporal._workflow import (
    CLAIM_ACTIVITY,
    DENIED,
    LOGIN_REQUIRED,
    PROFILE_HELD,
    REFUSED,
    WRITE_OUTCOME_UNKNOWN,
    StepRequest,
    StepResult,
)
from session_keeper.pool import KeeperPool

__all__ = [
    "BrowserStep",
    "BrowserStepDef",
    "BrowserSteps",
    "BrowserWorker",
    "idempotency_key",
    "login_required",
]


class BrowserSteps(StepSet[BrowserStepDef]):
    """A set of browser steps, declared once and registered by every browser worker.

    ``@steps.step("audit_page", sites=("catalogue.example",))`` above
    ``async def audit_page(step: BrowserStep, arg) -> value`` declares one; the workflow
    runs it by the returned definition or its name (:meth:`WorkflowBrowser.step`).
    """

    reserved = (CLAIM_ACTIVITY,)

    def step(
        self, name: str | None = None, *, sites: Iterable[str] = ()
    ) -> Callable[[StepFn], BrowserStepDef]:
        """Declare a step named ``name`` (default: the function's name) needing ``sites``."""
        return self._declare(
            name,
            sites,
            lambda step_name, fn, needed: BrowserStepDef(name=step_name, fn=fn, sites=needed),
        )


def login_required(exc: SignInNeeded) -> ApplicationError:
    """The non-retryable :data:`LOGIN_REQUIRED` failure asking a person to sign in."""
    return ApplicationError(
        str(exc),
        {
            "conversation": exc.conversation,
            "site": exc.site,
            "facts": exc.facts,
            # The re-run after the sign-in is a new activity, with no heartbeat details:
            # it resumes from this.
            "checkpoint": exc.checkpoint,
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


class BrowserStep(_steps.BrowserStep[PageT]):
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
        confirm_write: Callable[[str], Awaitable[bool]],
    ) -> None:
        super().__init__(
            keeper,
            facts,
            request.conversation,
            worker_id=worker_id,
            workflow_id=workflow_id,
            step_id=activity_id,
            fresh=fresh,
            confirm_write=confirm_write,
        )
        self._progress = progress

    @property
    def checkpoint(self) -> Any:
        """Where to resume: this step's last heartbeat (a retry), else the one a dead
        worker sent before the failover, else ``None`` (start from the beginning)."""
        return self._progress.checkpoint

    def heartbeat(self, checkpoint: Any) -> None:
        """Record progress: Temporal keeps ``checkpoint`` as the heartbeat's details, and the
        next attempt (on this or another worker) starts from it. The tab's URL is marked
        verified, so a lost tab reopens here."""
        self._progress.checkpoint = checkpoint
        if self._keeper.has_tab(self.conversation):
            self._keeper.mark_verified(self.conversation)
        activity.heartbeat(checkpoint)


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
        # The engine's word only: a reset workflow runs the step again as attempt 1, so
        # the write's intent in the Store has the last word (step.write).
        fresh = info.attempt == 1 and request.dispatch == 1

        def make_step(facts: TurnFacts) -> BrowserStep[PageT]:
            return BrowserStep(
                keeper,
                facts,
                request,
                progress,
                worker_id=self.worker_id,
                workflow_id=workflow_id,
                activity_id=info.activity_id,
                fresh=fresh,
                confirm_write=lambda idem: self._pool.confirm_write(request.conversation, idem),
            )

        try:
            value, facts = await run_turn(
                keeper,
                made,
                request.arg,
                conversation=request.conversation,
                turn=turn,
                site_hint=request.site,
                reported_by=f"temporal:{self.worker_id}",
                make_step=make_step,
                checkpoint=lambda: progress.checkpoint,
            )
        except SignInNeeded as exc:
            raise login_required(exc) from exc
        except RateLimited as exc:
            raise ApplicationError(
                str(exc),
                type=type(exc).__name__,
                next_retry_delay=timedelta(seconds=exc.retry_after),
            ) from exc
        except Denied as exc:
            raise ApplicationError(str(exc), type=DENIED, non_retryable=True) from exc
        except PolicyRefusal as exc:
            # An answer of the keeper's rules, not a breakage: a retry asks them again.
            raise ApplicationError(str(exc), type=REFUSED, non_retryable=True) from exc
        except WriteOutcomeUnknown as exc:
            raise ApplicationError(
                str(exc), type=WRITE_OUTCOME_UNKNOWN, non_retryable=True
            ) from exc
        return step_result(value, facts, self.worker_id)

    async def _heartbeats(self, progress: _Progress) -> None:
        # A step that never heartbeats itself still shows it is alive; the details stay
        # the last checkpoint, so a beat never erases progress.
        while True:
            checkpoint = progress.checkpoint
            activity.heartbeat(*(() if checkpoint is None else (checkpoint,)))
            await asyncio.sleep(self._beat)
