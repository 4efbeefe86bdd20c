"""Persistence: the keeper's rows (what changed, written in place) and its audit queue.

One owner writes (``_writes.WriteOwner``): the synchronous methods that change durable
state only count a change (:meth:`KeeperPersistence.save_soon`,
:meth:`~KeeperPersistence.audit_soon`), and the owner writes the changed rows, then the
queued audit entries in order, in one background task. A failed write is kept: the
next awaited call raises :class:`~session_keeper.UnsavedChanges`.

A save writes only the rows that changed since the last one (``RowBook``), in one
transaction with the head that seals them; a document saved before rows is read once
and converted by the first save.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Generic, NoReturn

from session_keeper._browser.backend import PageT
from session_keeper._browser.capabilities import identity_of
from session_keeper._keeper.saving.owned_writes import WriteOwner, as_unsaved
from session_keeper._keeper.saving.row_batches import RowBook
from session_keeper._keeper.saving.sealed_rows import state_of
from session_keeper._keeper.state.live import ConversationRecord, Pending, Tab
from session_keeper._keeper.state.saved import KeeperState, from_document

if TYPE_CHECKING:
    from session_keeper._keeper.state.live import KeeperLive
    from session_keeper._security.audit import AuditLog
    from session_keeper._security.keyring import Keyring
    from session_keeper.stores import Store

#: At most this many queued audit entries are written in one transaction: a burst does
#: not hold the store's writer for long.
AUDIT_BATCH = 1000
#: Tab URL changes are saved in the background at most this often.
URL_SAVE_INTERVAL_S = 1.0


class KeeperPersistence(Generic[PageT]):
    """Loads and saves the keeper's rows; queues and writes audit entries."""

    def __init__(
        self,
        live: KeeperLive[PageT],
        *,
        store: Store | None,
        keeper_id: str,
        keyring: Keyring | None,
        audit: AuditLog | None,
    ) -> None:
        self._live = live
        self._store = store
        self._keeper_id = keeper_id
        self._keyring = keyring
        self._audit = audit
        self._audit_verified = False
        # Entries leave this queue only once written: a failed write keeps them, in order.
        self._audit_pending: list[tuple[str, Mapping[str, object], int | None]] = []
        self._audit_lock = asyncio.Lock()
        self._loaded = store is None
        self._save_lock = asyncio.Lock()
        # save() calls made, and how many of them the last stored write covers.
        self._save_calls = 0
        self._saved_calls = 0
        # The one owner of background writes (owned writes).
        self.writes = WriteOwner(self._write_all)
        self._last_url_save = float("-inf")
        self._url_trailer: asyncio.TimerHandle | None = None
        self._rows = RowBook(live, keeper_id, keyring)

    @property
    def keeper_id(self) -> str:
        """The name the keeper's document is saved under."""
        return self._keeper_id

    @property
    def store(self) -> Store | None:
        """The store the keeper persists to, if any."""
        return self._store

    @property
    def loaded(self) -> bool:
        """Whether the saved document was read (always, without a store)."""
        return self._loaded

    @property
    def audit_pending(self) -> int:
        """How many audit entries are queued and not written yet."""
        return len(self._audit_pending)

    async def load(self) -> None:
        """Pick up where a previous process stopped (once; under ``self._live.lock``).

        The previous process's browser died with it, so its generation counts as
        ended; the first ensure() then relaunches and reports, per conversation, what
        that took — measured against the new browser's cookie jar as usual.
        """
        state = None
        verified = None
        from_old_document = False
        if not self._loaded and self._store is not None:
            saved = await self._store.load_keeper_rows(self._keeper_id)
            if saved is not None:
                # Raises before changing anything.
                state, verified = state_of(self._keeper_id, saved, self._keyring)
            else:
                doc = await self._store.load_keeper_state(self._keeper_id)
                if doc is not None:
                    state = from_document(doc, self._keyring)
                    from_old_document = True
        if self._audit is not None and not self._audit_verified:
            # A tampered audit trail, or one cut short of the head our sealed state
            # remembers: refuse to act (AuditTampered), write nothing.
            head = state.audit_head if state is not None else None
            await self._audit.open(expected_head=head)
            self._audit_verified = True
        if self._loaded or self._store is None:
            return
        if state is not None:
            self._apply(state)
        if verified is not None:
            self._rows.adopt(verified)
        self._loaded = True
        if from_old_document:
            # Read once: the first save writes it as rows and drops the document.
            self._rows.replaces_document = True
            self.save_soon()

    def _apply(self, state: KeeperState) -> None:
        # Grants first: the only part that can still refuse, before anything changes.
        self._live.grants.merge_saved((s.grant, s.uses_left) for s in state.grants)
        self._live.generation = state.generation
        self._live.load_generations(state.generations)
        if self._live.generations and self._live.generations[-1].ended_at is None:
            self._live.end_generation("process_exit")
        if self._live.generations and self._live.generations[-1].cause == "process_exit":
            # The browser may have outlived our process (or the one before it, which
            # died before re-binding): its backend may find it again.
            self._live.rebind_to = state.browser_identity
        self._live.ended = self._live.ended or ("process_exit" if state.generation else None)
        self._live.ledger.load(state.logins, state.lost_logins)
        records: dict[str, ConversationRecord[PageT]] = {}

        def record(conversation: str) -> ConversationRecord[PageT]:
            return records.setdefault(conversation, ConversationRecord())

        mono = self._live.clock.monotonic()
        for t in state.tabs:
            record(t.conversation).tab = Tab(
                page=None,
                generation=t.generation,
                last_url=t.last_url,
                verified_at=t.verified_at,
                last_used=mono,
                target_id=t.target_id,
            )
        for conversation, p in state.pending.items():
            record(conversation).pending = Pending(
                since_generation=p.since_generation,
                restarted=p.restarted,
                lost=list(p.lost),
                revalidate=list(p.revalidate),
                restored=list(p.restored),
                renewed=list(p.renewed),
            )
        for conversation, seen in state.seen.items():
            record(conversation).seen = seen
        for conversation, until in state.takeovers.items():
            record(conversation).takeover = until
        for conversation, turn in state.turns.items():
            record(conversation).turn = turn
        self._live.conversations.load(records)
        self._live.borrows.load(state.borrow_requests)

    async def save(self) -> None:
        """Write the keeper's changed rows now (no-op without a store).

        Raises :class:`UnsavedChanges` (the store's error as its cause) when the
        store cannot take it; the change stays unsaved and counted.
        """
        if self._store is None or not self._loaded:
            return
        # Concurrent callers share writes: a write whose snapshot was taken after this
        # call began carries this caller's change, so once it is stored there is
        # nothing left to write for it. (1,000 conversations told of one restart at
        # once would otherwise write the whole document 1,000 times, one after another.)
        self._save_calls += 1
        ticket = self._save_calls
        async with self._save_lock:
            if self._saved_calls >= ticket:
                return
            # Snapshot inside the lock so the last write carries the newest state.
            covers = self._save_calls
            changes = self.writes.changes
            live = self._live
            batch = self._rows.plan(
                audit_head=self._audit.head if self._audit is not None else None,
                browser_identity=(
                    identity_of(live.session) if live.ended is None else live.rebind_to
                ),
            )
            if not batch.empty:  # else: nothing new to write (see RowBook.plan)
                try:
                    await self._store.save_keeper_rows(
                        self._keeper_id,
                        head=batch.head,
                        upserts=batch.upserts,
                        deletes=batch.deletes,
                        replaces_document=batch.replaces_document,
                    )
                except BaseException as exc:
                    self._rows.not_stored(batch)
                    if not isinstance(exc, Exception):
                        raise
                    _raise_unsaved(exc, "the keeper's state")
            self._rows.stored(batch)
            self.writes.saved_up_to(changes)
            self._saved_calls = max(self._saved_calls, covers)

    def save_soon(self) -> None:
        """A synchronous method (decide, grant, ...) changed durable state: its owner writes it."""
        if self._store is None:
            return
        self.writes.changed()

    def save_url_soon(self) -> None:
        """Save a tab's new URL in the background, at most once a second.

        A navigation is not worth an fsync on the agent's path (a page may
        ``pushState`` per keystroke); the change is counted as unsaved, and any save in
        between, persist() and aclose() carry it. A throttled change is written a second
        later at most, by one trailing save: the last URL of a burst reaches the store
        though nothing else is saved after it.
        """
        mono = self._live.clock.monotonic()
        if mono - self._last_url_save >= URL_SAVE_INTERVAL_S:
            self._last_url_save = mono
            self.save_soon()
        elif self._store is not None:
            self.writes.changed(schedule=False)
            if self._url_trailer is None:
                try:
                    loop = asyncio.get_running_loop()
                except RuntimeError:
                    return  # the next awaited call's save carries it
                self._url_trailer = loop.call_later(URL_SAVE_INTERVAL_S, self._trailing_url_save)

    def _trailing_url_save(self) -> None:
        self._url_trailer = None
        if not self._live.closed and self.writes.state_unsaved():
            self._last_url_save = self._live.clock.monotonic()
            self.save_soon()

    async def _write_all(self) -> None:
        """The owner's write: the document when it changed, then every queued audit entry."""
        if self.writes.state_unsaved():
            await self.save()
        await self.flush_audit()

    async def write_through(self) -> None:
        """Write everything unsaved now; raise if it cannot be (for enforcement layers).

        Unlike :meth:`persist`, an earlier background failure stays for the
        application's next call to hear: the Guard must not swallow it.
        """
        await self.writes.drain()
        await self.save()
        await self.flush_audit()

    @property
    def unsaved(self) -> bool:
        """Whether a change (keeper state or an audit entry) is not in the store yet."""
        return self.writes.state_unsaved() or bool(self._audit_pending)

    async def persist(self) -> None:
        """See :meth:`SessionKeeper.persist` (the public contract)."""
        await self.writes.drain()
        self.writes.raise_failure()
        self.writes.clear_orphaned()
        await self.save()
        await self.flush_audit()

    def audit_soon(self, type: str, body: dict[str, object]) -> None:
        """Queue an audit entry; entries are written in the order things happened."""
        if self._audit is None:
            return
        self._audit_pending.append((type, body, self._live.generation or None))
        self.writes.changed(document=False)

    async def flush_audit(self) -> None:
        """Write the queued audit entries, oldest first; one writer, in order.

        An entry leaves the queue only once it is written: a failed write keeps it
        (and everything after it) queued, and the next flush retries from there.
        """
        if self._audit is None:
            return
        async with self._audit_lock:
            while self._audit_pending:
                # One transaction per batch (all or none), not one per entry.
                batch = self._audit_pending[:AUDIT_BATCH]
                try:
                    await self._audit.record_many(batch)
                except Exception as exc:
                    _raise_unsaved(exc, "an audit entry")
                del self._audit_pending[: len(batch)]


def _raise_unsaved(exc: Exception, what: str) -> NoReturn:
    typed = as_unsaved(exc, what)
    if typed is exc:
        raise exc
    raise typed from exc
