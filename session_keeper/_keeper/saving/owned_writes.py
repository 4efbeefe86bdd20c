"""Owned writes: one owner for the keeper's durable writes, whose failures reach a caller.

The keeper's synchronous mutators (``decide``, ``grant``, ``revoke``, ``approve_borrow``,
``confirm_login``, ``mark_verified``, ``begin_takeover`` ...) change durable state
without awaiting the store. They tell the :class:`WriteOwner`, which writes the change
(the keeper's document, then the queued audit entries) in one background task on the
running loop. Nothing is dropped on the way:

- A background write that fails is **sticky**: the next awaited keeper call raises it
  (:class:`~session_keeper.UnsavedChanges`, the store's error as its cause). The change
  stays unsaved — in memory, counted — and the next write retries it.
- A change made with no running loop (a worker thread, before the loop starts) is
  written by the next awaited keeper call, before it does anything else.
- :meth:`WriteOwner.unsaved` says whether any change is not in the store yet.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from session_keeper.errors import IntegrityError, UnsavedChanges

log = logging.getLogger("session_keeper")


def as_unsaved(exc: Exception, what: str) -> Exception:
    """The typed error a caller gets for a write that failed (tamper errors stay as they are)."""
    if isinstance(exc, IntegrityError | UnsavedChanges):
        return exc
    return UnsavedChanges(
        f"{what} could not be written ({type(exc).__name__}); the change is kept "
        "and the next persist() writes it"
    )


class WriteOwner:
    """Owns the background writes of one keeper; see the module docstring."""

    def __init__(self, write: Callable[[], Awaitable[None]]) -> None:
        #: Writes everything unsaved (document, then audit queue); raises on failure.
        self._write = write
        self._changes = 0
        self._saved = 0
        self._task: asyncio.Task[None] | None = None
        self._again = False
        self._orphaned = False
        self._failure: Exception | None = None

    # -- change counting ----------------------------------------------------------------
    @property
    def changes(self) -> int:
        """How many changes were announced so far (a save records the count it covers)."""
        return self._changes

    def saved_up_to(self, changes: int) -> None:
        """A save that snapshot the state after ``changes`` changes succeeded."""
        self._saved = max(self._saved, changes)

    def state_unsaved(self) -> bool:
        """Whether a change to the keeper's document is not in the store yet."""
        return self._changes > self._saved

    # -- the owner ------------------------------------------------------------------------
    def changed(self, *, document: bool = True, schedule: bool = True) -> None:
        """A durable change was made (``document=False``: only an audit entry was queued).

        ``schedule=False`` counts it without writing now (a throttled tab URL): it is
        unsaved until the next write, which carries it.
        """
        if document:
            self._changes += 1
        if not schedule:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            # Nobody can write it now: the next awaited keeper call does, first thing.
            self._orphaned = True
            return
        if self._task is not None and not self._task.done():
            self._again = True  # the running write may have snapshot before this change
            return
        self._task = loop.create_task(self._run())

    async def _run(self) -> None:
        while True:
            self._again = False
            try:
                await self._write()
            except Exception as exc:
                # Kept, not dropped: the next awaited call raises it to its caller.
                self._failure = exc
                log.error("writing the keeper's state failed; the change is kept", exc_info=exc)
                return
            if not self._again:
                return

    async def drain(self) -> None:
        """Wait for the background write in flight, if any (its failure stays sticky)."""
        task = self._task
        if task is not None and task is not asyncio.current_task() and not task.done():
            await asyncio.wait([task])

    def raise_failure(self, *, since_written: bool = False) -> None:
        """Raise (once) a background write's failure; the change it carried stays unsaved.

        ``since_written``: the caller has just written everything (``aclose``); the
        failure is still reported, and the message says nothing is left unsaved.
        """
        failure, self._failure = self._failure, None
        if failure is None:
            return
        if isinstance(failure, IntegrityError):
            raise failure
        after = (
            "everything has since been written"
            if since_written
            else "the change is kept unsaved and the next persist() writes it"
        )
        raise UnsavedChanges(
            "a background write of the keeper's state failed "
            f"({type(failure.__cause__ or failure).__name__}); {after}"
        ) from failure

    def clear_orphaned(self) -> None:
        """The caller is about to write everything: orphaned changes are covered."""
        self._orphaned = False

    @property
    def settled(self) -> bool:
        """Whether :meth:`settle` would neither raise nor write (no await needed)."""
        return self._failure is None and not self._orphaned

    async def settle(self) -> None:
        """At the start of an awaited keeper call: report a failure, write orphaned changes.

        Raises :class:`~session_keeper.UnsavedChanges` for a background write that
        failed since the last call, or for orphaned changes that cannot be written now.
        Writes nothing when nothing changed.
        """
        self.raise_failure()
        if self._orphaned:
            await self.drain()
            self._orphaned = False
            try:
                await self._write()
            except BaseException:
                self._orphaned = True  # still nobody's: the next call tries again
                raise

    @property
    def failed(self) -> bool:
        """Whether a background write failed and no caller was told yet."""
        return self._failure is not None
