"""The workflow side: a :class:`WorkflowBrowser` sends a workflow's browser steps to the
worker that holds its browser, and turns what they report into the workflow's decisions.

Only ``temporalio``, the standard library, the error tree and the shared
:class:`StepResult` are imported here, so a
workflow module can import this under Temporal's sandbox
(``workflow.unsafe.imports_passed_through()``).
"""

import dataclasses
from datetime import timedelta
from typing import Any, Protocol

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError, TimeoutType

from session_keeper.errors import InvalidArgument
from session_keeper.integrations._result import StepResult as StepResult

#: ``ApplicationError.type`` of a step that needs a person to sign in (non-retryable;
#: ``details[0]`` is ``{"conversation", "site", "facts", "checkpoint"}``). A
#: :class:`WorkflowBrowser` turns it into a wait for :data:`SIGN_IN_SIGNAL`, then re-runs
#: the step from ``checkpoint`` (its last heartbeat's).
LOGIN_REQUIRED = "SessionKeeperLoginRequired"
#: ``ApplicationError.type`` of an external write nobody can settle (non-retryable): the
#: readback under its idempotency key could not tell whether it happened.
WRITE_OUTCOME_UNKNOWN = "SessionKeeperWriteOutcomeUnknown"
#: ``ApplicationError.type`` of a site that refused outright (non-retryable).
DENIED = "SessionKeeperDenied"
#: ``ApplicationError.type`` of a step the keeper's own rules refused (non-retryable): the
#: Guard blocked a navigation, or a renewal without a grant. A grant is what would help.
REFUSED = "SessionKeeperRefused"
#: ``ApplicationError.type`` of a profile another worker still leases (retried by the
#: retry policy until its lease is given back or expires).
PROFILE_HELD = "SessionKeeperProfileHeld"
#: The activity, on the shared queue, that answers with the answering worker's own queue.
CLAIM_ACTIVITY = "session_keeper.claim_browser_worker"
#: The signal saying a sign-in was recorded: ``{"conversation": ..., "site": ...}``.
#: A hint only: the next attempt checks the login is live, whatever the signal said.
SIGN_IN_SIGNAL = "session_keeper.sign_in_recorded"
#: The query listing the sign-ins the workflow waits for (``[{"conversation", "site"}]``).
SIGN_IN_QUERY = "session_keeper.waiting_for_sign_in"


# Dataclasses, not attrs: Temporal's default data converter (de)serialises dataclasses.
@dataclasses.dataclass(frozen=True, kw_only=True)
class StepRequest:
    """What a browser step's activity is given (built by :meth:`WorkflowBrowser.step`)."""

    conversation: str
    #: The step's own argument (JSON-serialisable).
    arg: Any = None
    #: How many times the workflow has scheduled this step (1, then 2 after a failover
    #: or a sign-in): a write is submitted unread only on the first attempt of the first.
    dispatch: int = 1
    #: How many times the step has moved to another worker because its worker died: a
    #: step that failed over is a new turn, told what the dead worker's browser took.
    failovers: int = 0
    #: The last heartbeat's checkpoint from an earlier dispatch (a worker that died).
    checkpoint: Any = None
    #: Routing hints for the worker's :class:`~session_keeper.KeeperPool`.
    site: str | None = None
    account: str | None = None


class NamedStep(Protocol):
    """A browser step definition (``BrowserSteps.step`` makes them): its activity name."""

    @property
    def name(self) -> str:
        """The activity name."""
        ...


class WorkflowBrowser:
    """One conversation's browser steps in a workflow, run on the worker holding its browser.

    Create it inside the workflow (it registers the :data:`SIGN_IN_SIGNAL` handler and
    the :data:`SIGN_IN_QUERY` query). ``queue`` is the shared task queue every browser
    worker polls; the first step asks it which worker answers (:data:`CLAIM_ACTIVITY`)
    and sends every step to that worker's own queue after, with ``activity_id``
    ``browser-<n>`` for the n-th step: the worker derives the step's turn id and
    idempotency keys from the workflow id and this id, so every attempt of a step (a
    retry, a failover, a re-run after a sign-in) is told the same facts, a new step new
    ones.

    Decisions: a transient failure is retried by ``retry_policy`` (nothing retries
    underneath it); a worker that stops polling (it died) is noticed by the heartbeat
    timeout and ``worker_timeout`` (schedule-to-start on its queue), then the step goes
    to another worker with the last heartbeat's checkpoint (at most ``max_failovers``
    times per step); :data:`LOGIN_REQUIRED` waits for :data:`SIGN_IN_SIGNAL` and
    re-runs the step; anything else fails the workflow's call with the activity error.
    """

    def __init__(
        self,
        conversation: str,
        *,
        queue: str,
        site: str | None = None,
        account: str | None = None,
        step_timeout: timedelta = timedelta(minutes=10),
        heartbeat_timeout: timedelta = timedelta(seconds=30),
        worker_timeout: timedelta = timedelta(seconds=30),
        retry_policy: RetryPolicy | None = None,
        max_failovers: int = 3,
    ) -> None:
        if not isinstance(conversation, str) or not conversation.strip():
            raise InvalidArgument("conversation must be a non-empty str")
        if not isinstance(queue, str) or not queue.strip():
            raise InvalidArgument("queue must be a non-empty str")
        if max_failovers < 0:
            raise InvalidArgument("max_failovers must be at least 0")
        self.conversation = conversation
        self._queue = queue
        self._site = site
        self._account = account
        self._step_timeout = step_timeout
        self._heartbeat_timeout = heartbeat_timeout
        self._worker_timeout = worker_timeout
        self._retry = retry_policy or RetryPolicy(
            initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10)
        )
        self._max_failovers = max_failovers
        self._worker_queue: str | None = None
        self._steps = 0
        self._waiting: list[dict[str, str]] = []
        self._signed_in: list[dict[str, str]] = []
        #: Steps sent to another worker because the one holding the browser stopped.
        self.failovers = 0
        #: Every sign-in this session waited for (``{"conversation", "site"}``), in order.
        self.sign_ins: list[dict[str, str]] = []
        #: The facts of every step that reported news (``StepResult.told``), in order.
        self.told: list[dict[str, Any]] = []
        self._register()

    def _register(self) -> None:
        previous = workflow.get_signal_handler(SIGN_IN_SIGNAL)

        def on_sign_in(payload: dict[str, str]) -> None:
            if previous is not None:
                previous(payload)  # another session of this workflow hears it too
            if isinstance(payload, dict) and payload.get("conversation") == self.conversation:
                self._signed_in.append(payload)

        workflow.set_signal_handler(SIGN_IN_SIGNAL, on_sign_in)
        asked = workflow.get_query_handler(SIGN_IN_QUERY)

        def waiting() -> list[dict[str, str]]:
            return [*(asked() if asked is not None else []), *self._waiting]

        workflow.set_query_handler(SIGN_IN_QUERY, waiting)

    @property
    def worker_queue(self) -> str | None:
        """The task queue of the worker holding the browser now (``None`` before a step)."""
        return self._worker_queue

    async def step(self, step: str | NamedStep, arg: Any = None) -> StepResult:
        """Run one browser step (an activity name or a ``BrowserSteps`` step) with ``arg``.

        Returns its :class:`StepResult`. Raises the ``ActivityError`` of a failure the
        session does not decide (retries spent, :data:`WRITE_OUTCOME_UNKNOWN`,
        :data:`DENIED`, :data:`REFUSED`, a failover beyond ``max_failovers``).
        """
        name = step if isinstance(step, str) else step.name
        self._steps += 1
        activity_id = f"browser-{self._steps}"
        dispatch, checkpoint, failovers = 0, None, 0
        while True:
            if self._worker_queue is None:
                self._worker_queue = await workflow.execute_activity(
                    CLAIM_ACTIVITY,
                    task_queue=self._queue,
                    start_to_close_timeout=timedelta(seconds=30),
                    result_type=str,
                )
            dispatch += 1
            request = StepRequest(
                conversation=self.conversation,
                arg=arg,
                dispatch=dispatch,
                failovers=failovers,
                checkpoint=checkpoint,
                site=self._site,
                account=self._account,
            )
            try:
                result: StepResult = await workflow.execute_activity(
                    name,
                    request,
                    task_queue=self._worker_queue,
                    activity_id=activity_id,
                    start_to_close_timeout=self._step_timeout,
                    heartbeat_timeout=self._heartbeat_timeout,
                    schedule_to_start_timeout=self._worker_timeout,
                    retry_policy=self._retry,
                    result_type=StepResult,
                )
            except ActivityError as err:
                cause = err.cause
                if isinstance(cause, TimeoutError) and cause.type == TimeoutType.SCHEDULE_TO_START:
                    # Nobody polls the worker's queue: it died. Another worker takes the
                    # step (and the profile's lease, once the dead holder's expires).
                    if failovers >= self._max_failovers:
                        raise
                    failovers += 1
                    self.failovers += 1
                    if cause.last_heartbeat_details:
                        checkpoint = cause.last_heartbeat_details[0]
                    self._worker_queue = None
                    continue
                if isinstance(cause, ApplicationError) and cause.type == LOGIN_REQUIRED:
                    details = cause.details[0] if cause.details else None
                    if isinstance(details, dict) and details.get("checkpoint") is not None:
                        # The re-run resumes where the step stopped, not from its start.
                        checkpoint = details["checkpoint"]
                    await self._wait_for_sign_in(cause)
                    continue
                raise
            if result.told:
                self.told.append(result.facts)
            return result

    async def _wait_for_sign_in(self, cause: ApplicationError) -> None:
        details = cause.details[0] if cause.details else {}
        site = str(details.get("site", "")) if isinstance(details, dict) else ""
        request = {"conversation": self.conversation, "site": site}
        self.sign_ins.append(request)
        self._waiting.append(request)
        seen = len(self._signed_in)
        # A signal is a hint: the re-run step checks that the login is live.
        await workflow.wait_condition(
            lambda: any(s.get("site") == site for s in self._signed_in[seen:])
        )
        self._waiting.remove(request)
