"""External writes: intent → submit → outcome, reconciled by readback after any doubt.

One :class:`ExternalWrites` per loop; steps reach it only through
:meth:`StepContext.write <session_keeper.jobs._context.StepContext.write>`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Generic

from session_keeper._browser.backend import PageT
from session_keeper._keeper.facade.keeper import SessionKeeper
from session_keeper._model.grants import check_name
from session_keeper._util.redact import scrubbing_logger
from session_keeper.errors import InvalidArgument, WriteOutcomeUnknown
from session_keeper.jobs._context import Readback
from session_keeper.jobs._failures import SUBMIT_FAILURES
from session_keeper.stores import Store
from session_keeper.stores._records import ExternalWrite, Lease

log = scrubbing_logger("session_keeper.jobs")


def write_settled(write: ExternalWrite) -> bool:
    """Whether an external write needs nothing more done."""
    return write.status in ("confirmed", "reconciled")


def unknown(key: str, why: str) -> WriteOutcomeUnknown:
    """The error for a write whose outcome cannot be established."""
    return WriteOutcomeUnknown(f"external write {key!r}: {why}; a person must reconcile it")


class ExternalWrites(Generic[PageT]):
    """Does external writes at most once, as far as the destination can tell."""

    def __init__(self, keeper: SessionKeeper[PageT], store: Store) -> None:
        self.keeper = keeper
        self.store = store
        # (job, key, lease token) of every intent a call of this loop has seen: only an
        # intent the very call created may be submitted without a readback first.
        self.intents_seen: set[tuple[str, str, int]] = set()

    async def write(
        self,
        conversation: str,
        lease: Lease,
        key: str,
        intent: Mapping[str, object],
        submit: Callable[[PageT], Awaitable[Mapping[str, object]]],
        readback: Callable[[PageT], Awaitable[Readback]],
        *,
        idempotent: bool,
        url: str | None,
    ) -> Mapping[str, object]:
        """See :meth:`StepContext.write`; ``lease`` fences every record of the write."""
        start = url if url is not None else self.keeper.current_url(conversation)
        if start is None:
            raise InvalidArgument("ctx.write needs url=: the job's tab shows no page")
        check_name(start, "url")

        async def from_start() -> PageT:
            # Each callable starts on the write's own page, whatever the previous one did.
            return await self.keeper.unguarded_page(conversation, start)

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
            and mine not in self.intents_seen
        )
        self.intents_seen.add(mine)
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
