"""The step side: browser steps as DBOS steps, run on the process's :class:`BrowserWorker`.

Every DBOS process runs its workflows itself, so each owns a
:class:`~session_keeper.KeeperPool` (its profiles leased in the Store every process
shares) and serves the steps with it. A step holds its conversation's profile for the
step and calls ``ensure()`` with a turn id made of DBOS's identity of the attempt: the
workflow id, the DBOS step id of the step's first dispatch and, once DBOS recovered the
workflow (its process died), the recovery count. The attempt number is never part of it.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Iterable
from datetime import timedelta
from types import TracebackType
from typing import Any, Generic

from session_keeper._util.extras import needs_extra

with needs_extra("dbos", "session_keeper.integrations.dbos"):
    from dbos import DBOS

from session_keeper._browser.backend import PageT
from session_keeper._model.facts import TurnFacts
from session_keeper._model.grants import check_name
from session_keeper._util.validate import check_duration
from session_keeper.errors import (
    Denied,
    InvalidArgument,
    InvalidArgumentType,
    PolicyRefusal,
    RateLimited,
    UsageError,
    WriteOutcomeUnknown,
)
from session_keeper.integrations import _steps
from session_keeper.integrations._result import StepResult
from session_keeper.integrations._steps import (
    SignInNeeded,
    StepFn,
    StepSet,
    run_turn,
    step_result,
)
from session_keeper.integrations.dbos._workflow import BrowserStepDef, SignInWaits, StepRequest
from session_keeper.pool import KeeperPool

#: Failures no retry mends: a person must act (sign in, reconcile a write), the site
#: refused, the Guard refused, or the program is wrong. DBOS retries anything else.
NOT_RETRIED: tuple[type[BaseException], ...] = (
    SignInNeeded,
    Denied,
    WriteOutcomeUnknown,
    PolicyRefusal,
    UsageError,
)

# The longest a step waits out a site's Retry-After before the next DBOS attempt.
_MAX_RETRY_AFTER = 300.0
# How many workflow executions' recovery counts a worker remembers (the oldest go first).
_COUNTS_KEPT = 4096


def retryable(exc: BaseException) -> bool:
    """Whether DBOS retries a browser step that raised ``exc`` (``should_retry``)."""
    return not isinstance(exc, NOT_RETRIED)


class BrowserSteps(StepSet[BrowserStepDef]):
    """A set of browser steps, each a DBOS step, served by the process's :class:`BrowserWorker`.

    ``@steps.step("audit_page", sites=("catalogue.example",))`` above
    ``async def audit_page(step: BrowserStep, arg) -> value`` declares one (at import, as
    every DBOS step); a workflow runs it with :meth:`WorkflowBrowser.step`. ``max_attempts``,
    ``interval`` and ``backoff_rate`` are its DBOS retries: the only retry layer (a
    profile still leased by a dead process is retried too, until its lease expires).
    """

    def __init__(self) -> None:
        super().__init__()
        self._worker: BrowserWorker[Any] | None = None

    def step(
        self,
        name: str | None = None,
        *,
        sites: Iterable[str] = (),
        max_attempts: int = 10,
        interval: timedelta = timedelta(seconds=1),
        backoff_rate: float = 2.0,
    ) -> Callable[[StepFn], BrowserStepDef]:
        """Declare a step named ``name`` (default: the function's name) needing ``sites``."""
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int):
            raise InvalidArgumentType("max_attempts must be an int")
        if max_attempts < 1:
            raise InvalidArgument("max_attempts must be at least 1")
        check_duration(interval, "interval")
        if not backoff_rate >= 1:
            raise InvalidArgument("backoff_rate must be at least 1")

        def make(step_name: str, fn: StepFn, needed: tuple[str, ...]) -> BrowserStepDef:
            async def run(request: StepRequest) -> StepResult:
                return await self._serving(step_name).run(made, request)

            def sign_in_waits() -> SignInWaits:
                return self._serving(step_name).sign_in_waits

            run.__name__ = run.__qualname__ = step_name
            dbos_step = DBOS.step(
                name=step_name,
                retries_allowed=True,
                max_attempts=max_attempts,
                interval_seconds=interval.total_seconds(),
                backoff_rate=backoff_rate,
                should_retry=retryable,
            )(run)
            made = BrowserStepDef(
                name=step_name,
                fn=fn,
                sites=needed,
                dbos_step=dbos_step,
                sign_in_waits=sign_in_waits,
            )
            return made

        return self._declare(name, sites, make)

    def _serving(self, step_name: str) -> BrowserWorker[Any]:
        """The BrowserWorker serving these steps in this process."""
        worker = self._worker
        if worker is None:
            raise UsageError(f"no BrowserWorker serves browser step {step_name!r} in this process")
        return worker


class BrowserStep(_steps.BrowserStep[PageT]):
    """What a step function gets: the turn's facts, the page, the keeper and writes.

    :meth:`write`'s idempotency key is ``<workflow id>:<step id>:<key>``. A long walk is
    many DBOS steps (each one's output is DBOS's checkpoint), not one step that beats.
    """


class BrowserWorker(Generic[PageT]):
    """A process's browser steps: its pool serves the :class:`BrowserSteps` DBOS runs here.

    ``pool``: this process's :class:`~session_keeper.KeeperPool`, leasing its profiles
    in the Store every process shares (a dead process's profile goes to another, or to
    its restart, only once its lease expired; a keeper that lost its lease writes
    nothing). Give each process its own pool ``owner``.

    ``with BrowserWorker(pool, worker_id=..., steps=STEPS):`` serves the steps for the
    block; enter it before ``DBOS.launch()``, which recovers the workflows a dead
    process left and runs their steps at once.
    """

    def __init__(self, pool: KeeperPool[PageT], *, worker_id: str, steps: BrowserSteps) -> None:
        if not isinstance(pool, KeeperPool):
            raise InvalidArgumentType("pool must be a KeeperPool")
        if not isinstance(steps, BrowserSteps):
            raise InvalidArgumentType("steps must be the dbos integration's BrowserSteps")
        self._pool = pool
        self.worker_id = check_name(worker_id, "worker_id")
        self._steps = steps
        self._sign_in_waits = SignInWaits()
        #: Each workflow execution's recovery count, by (workflow id, execution), newest
        #: last (see :meth:`_executions`).
        self._counts: OrderedDict[tuple[str, str], int] = OrderedDict()

    @property
    def sign_in_waits(self) -> SignInWaits:
        """The sign-ins each workflow running in this process waits for: one list per
        workflow, shared by all its :class:`WorkflowBrowser` objects (its one
        :data:`SIGN_IN_EVENT` lists them all)."""
        return self._sign_in_waits

    def __enter__(self) -> BrowserWorker[PageT]:
        if self._steps._worker is not None:
            raise UsageError("another BrowserWorker serves these steps in this process")
        self._steps._worker = self
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._steps._worker is self:
            self._steps._worker = None

    async def run(self, made: BrowserStepDef, request: StepRequest) -> StepResult:
        """One attempt of browser step ``made`` (called by its DBOS step)."""
        workflow_id, step_id, status = DBOS.workflow_id, DBOS.step_id, DBOS.step_status
        if workflow_id is None or step_id is None:
            raise UsageError(f"browser step {made.name!r} runs inside a DBOS workflow")
        if not isinstance(request, StepRequest):
            raise InvalidArgumentType("a browser step is run by WorkflowBrowser.step")
        conversation = check_name(request.conversation, "conversation")
        first = request.turn_step if request.turn_step is not None else step_id
        # DBOS counts each execution of the workflow (1, then one more per recovery),
        # read from DBOS, not recorded: a recovered step runs in a process that did not
        # tell its first turn, and the death is news only a new turn can carry.
        executions = await self._executions(workflow_id, request.execution)
        turn = f"{workflow_id}/{first}"
        if executions > 1:
            turn += f"/recovery-{executions - 1}"
        attempt = status.current_attempt if status is not None else 0
        # The engine's word only: a workflow resumed after a cancel counts its executions
        # from 1 again, so the write's intent in the Store has the last word (step.write).
        fresh = not attempt and request.dispatch == 1 and executions == 1

        def make_step(facts: TurnFacts) -> BrowserStep[PageT]:
            return BrowserStep(
                keeper,
                facts,
                conversation,
                worker_id=self.worker_id,
                workflow_id=workflow_id,
                step_id=str(first),
                fresh=fresh,
                confirm_write=lambda idem: self._pool.confirm_write(conversation, idem),
            )

        async with self._pool.hold(
            conversation, site=request.site, account=request.account
        ) as keeper:
            try:
                value, facts = await run_turn(
                    keeper,
                    made,
                    request.arg,
                    conversation=conversation,
                    turn=turn,
                    site_hint=request.site,
                    reported_by=f"dbos:{self.worker_id}",
                    make_step=make_step,
                    # A recovered workflow's step is a new turn (below), so no turn id
                    # runs in two processes: a quiet turn is written once, after it.
                    one_write=True,
                )
            except SignInNeeded as exc:
                # The re-run after the sign-in keeps this step's turn.
                raise SignInNeeded(exc.conversation, exc.site, exc.facts, step=str(first)) from exc
            except RateLimited as exc:
                # DBOS's interval knows no Retry-After: the attempt waits it out, then fails.
                await asyncio.sleep(min(exc.retry_after, _MAX_RETRY_AFTER))
                raise
        return step_result(value, facts, self.worker_id)

    async def _executions(self, workflow_id: str, execution: str | None) -> int:
        """How many times DBOS has run the workflow (1, then one more per recovery).

        Read from DBOS once per execution of the workflow in this process (the first of
        its steps here), then remembered: the count changes only when DBOS runs the
        workflow again (a recovery, in a new process or in this one), which calls the
        workflow function again, whose new :class:`WorkflowBrowser` names a new
        ``execution``. A request naming none is read every time.
        """
        key = (workflow_id, execution) if execution is not None else None
        if key is not None:
            known = self._counts.get(key)
            if known is not None:
                self._counts.move_to_end(key)
                return known
        status = await DBOS.get_workflow_status_async(workflow_id)
        count = int(status.recovery_attempts) if status and status.recovery_attempts else 1
        if key is not None:
            self._counts[key] = count
            if len(self._counts) > _COUNTS_KEPT:
                self._counts.popitem(last=False)  # read again if its workflow still runs
        return count
