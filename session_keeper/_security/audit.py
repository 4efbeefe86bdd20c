"""A tamper-evident audit trail on the Store's own event log: an HMAC hash chain.

Ledger changes, grant changes, approvals, decisions and the Guard's blocks are
appended as events of kind ``audit``. Each entry's ``data`` carries::

    {"type": ..., "seq": n, "prev": <mac of entry n-1>, "key_id": ..., "body": {...},
     "mac": HMAC(key, canonical(at, generation, type, seq, prev, key_id, body))}

so editing an entry breaks its MAC, deleting or reordering one breaks the next
entry's ``prev`` or the ``seq`` run, and inserting one needs the key. Removing entries
from the *end* leaves a shorter valid chain; :func:`verify_audit` catches that when
given a head the writer reported earlier (:attr:`AuditLog.head`, kept somewhere else,
e.g. in the keeper's document): the chain must reach that entry, unchanged. A chain
*longer* than the head is fine — a crash between appending and saving the head
leaves exactly that.

**The sealed head.** Entries are written in batches, one transaction each
(:meth:`AuditLog.record_many`). Once :data:`HEAD_EVERY` entries have followed the last
one, a batch ends with an event of kind ``audit_head``: the ``(seq, mac, key_id)`` of
its last entry, sealed by an HMAC under a key derived for its own purpose (an entry's
MAC cannot pass for a seal). Opening an :class:`AuditLog` then checks the seal and
only the entries newer than the head (fewer than :data:`HEAD_EVERY`), so an open costs
the same at 100 or 100,000 entries. A head that is edited or forged is refused
(:class:`AuditTampered`); one copied forward past newer entries breaks their ``seq``
run; deleting heads only makes the next open check more. What an open does *not*
re-check is the entries before the head: :func:`verify_audit` (and
:meth:`AuditLog.verify`) walks the whole chain, and every head against it.

**Archiving.** A long-lived chain stays bounded by :meth:`AuditLog.archive`: its
oldest part, up to a sealed head older than a cut-off, is removed in one transaction
that writes an ``audit_archive`` mark: the ``(seq, mac, key_id)`` of the last removed
entry, sealed under a key derived for that purpose alone (a head cannot pass for a
mark). The chain then starts from the newest mark: its first entry must follow it
(``seq`` and ``prev``), so entries removed past the mark, or a mark removed, are found
like any gap. Marks are never removed (the database refuses it).

The chain lives inside event data, on ``Store.append_events``/``Store.events``.
One writer per store (per chain): two processes appending at once would fork the
chain, and verification would say so.
The MAC key is derived from the :class:`~session_keeper.Keyring` (HKDF, purpose
``audit``), so the AES keys never double as MAC keys; rotating the keyring rotates
the chain's key from the next entry on.
"""

from __future__ import annotations

import asyncio
import functools
import json
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final, TypeVar

import attrs

from session_keeper._model.events import (
    AUDIT_ARCHIVE_KIND,
    AUDIT_ENTRY_KIND,
    AUDIT_HEAD_KIND,
    EventKind,
)
from session_keeper._util.clock import Clock, SystemClock
from session_keeper._util.validate import check_age
from session_keeper.errors import AuditTampered, InvalidArgumentType, StoreBusy, UnknownKey

if TYPE_CHECKING:
    from datetime import timedelta

    from session_keeper._security.keyring import Keyring
    from session_keeper.stores import Event, EventStore, Pruned

__all__ = [
    "HEAD_EVERY",
    "AuditEntry",
    "AuditLog",
    "keyring_of",
    "verify_audit",
]

#: A batch ends with a sealed head once this many entries follow the last head.
HEAD_EVERY: Final = 100
_PURPOSE: Final = "audit"
_HEAD_PURPOSE: Final = "audit-head"
_ARCHIVE_PURPOSE: Final = "audit-archive"
_PAGE: Final = 1000
#: How many archive passes a check may meet between its reads before it gives up.
_ARCHIVE_RETRIES: Final = 3

T = TypeVar("T")

#: One entry to append: ``(type, body, generation)``.
AuditEntry = tuple[str, Mapping[str, object], int | None]


def _canonical(at: datetime, generation: int | None, fields: Mapping[str, object]) -> bytes:
    payload = {
        "at": at.astimezone(UTC).isoformat(),
        "generation": generation,
        **{k: fields[k] for k in ("type", "seq", "prev", "key_id", "body")},
    }
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str).encode()


def _head_canonical(seq: int, mac: str, key_id: str) -> bytes:
    return json.dumps({"seq": seq, "mac": mac, "key_id": key_id}, sort_keys=True).encode()


async def _events(store: EventStore, kind: EventKind, since: int | None = None) -> list[Event]:
    out: list[Event] = []
    while True:
        page = await store.events(kind=kind, since_id=since, limit=_PAGE)
        out.extend(page)
        if len(page) < _PAGE:
            return out
        since = page[-1].id


def _rank(keyring: Keyring, key_id: str) -> int:
    # A key no longer held is older than every key that is (the keyring lists oldest first).
    ids = keyring.ids
    return ids.index(key_id) if key_id in ids else -1


class _CutMoved(Exception):
    """Internal: the store's archive cut fell on another head than the one checked."""


@attrs.frozen(kw_only=True)
class _Checked:
    """What an archive pass's check vouched for: the head at the cut (its row) and the
    entry it names (its row, ``seq`` and ``mac``)."""

    head_id: int | None
    entry_id: int | None
    seq: int
    mac: str


class _Walk:
    """Where a walk along the chain stands: the last entry's ``seq``/``mac`` and key rank."""

    def __init__(self, seq: int = 0, mac: str = "", rank: int = 0) -> None:
        self.seq, self.mac, self.rank = seq, mac, rank


def _check_chain(
    events: list[Event],
    keyring: Keyring,
    expected_head: tuple[int, str] | None,
    walk: _Walk | None = None,
) -> _Walk:
    """Walk ``events`` on from ``walk`` (the chain's start by default); return where it
    ends. Raises :class:`AuditTampered`.

    ``expected_head`` at or after the walk's start must be on the walk; one before it is
    behind a sealed head and only a full walk checks it.
    """
    walk = walk if walk is not None else _Walk()
    start = walk.seq
    at_head: str | None = None
    if expected_head is not None:
        at_head = walk.mac if expected_head[0] == start else None
        if expected_head[0] < start:
            at_head = expected_head[1]
    order = keyring.ids
    for event in events:
        data = event.data
        where = f"audit entry id={event.id}"
        try:
            got_seq = data["seq"]
            got_prev = data["prev"]
            key_id = data["key_id"]
            mac = data["mac"]
            fields = {k: data[k] for k in ("type", "seq", "prev", "key_id", "body")}
        except (KeyError, TypeError):
            raise AuditTampered(f"{where} is not a chain entry") from None
        if not isinstance(key_id, str) or not isinstance(mac, str):
            raise AuditTampered(f"{where} is not a chain entry")
        try:
            ok = keyring.verify_mac(
                _canonical(event.at, event.generation, fields),
                mac,
                purpose=_PURPOSE,
                key_id=key_id,
            )
        except UnknownKey:
            raise UnknownKey(
                f"{where} is signed with key {key_id!r}, which the keyring does not hold"
            ) from None
        if not ok:
            raise AuditTampered(f"{where} was edited (its MAC does not match)")
        if got_seq != walk.seq + 1:
            raise AuditTampered(
                f"{where} has seq {got_seq!r} where {walk.seq + 1} was due: "
                "entries were deleted, inserted or reordered"
            )
        if got_prev != walk.mac:
            raise AuditTampered(f"{where} does not follow the entry before it")
        rank = order.index(key_id)
        if rank < walk.rank:
            # Once a newer key signs, an older one never may again: a leaked retired
            # key that is still held for reading cannot append forged entries.
            raise AuditTampered(f"{where} is signed with a key older than the entry before it")
        walk.seq, walk.mac, walk.rank = walk.seq + 1, mac, rank
        if expected_head is not None and walk.seq == expected_head[0]:
            at_head = mac
    if expected_head is not None:
        if walk.seq < expected_head[0]:
            raise AuditTampered(
                f"the audit chain ends at seq {walk.seq}, but its writer reported seq "
                f"{expected_head[0]}: entries were removed from its end"
            )
        if at_head != expected_head[1]:
            raise AuditTampered(
                f"audit entry seq {expected_head[0]} is not the one its writer reported"
            )
    return walk


def _sealed_head(
    event: Event, keyring: Keyring, *, purpose: str = _HEAD_PURPOSE
) -> tuple[int, str, str]:
    """The ``(seq, mac, key_id)`` a head event (or, with the archive purpose, an archive
    mark) vouches for. Raises :class:`AuditTampered` for an edited or forged one,
    :class:`UnknownKey` for one sealed under a key not held."""
    data = event.data
    what = "audit head" if purpose == _HEAD_PURPOSE else "audit archive mark"
    where = f"the saved {what} (event id={event.id})"
    seq, mac, key_id = data.get("seq"), data.get("mac"), data.get("key_id")
    seal, seal_key = data.get("seal"), data.get("seal_key_id")
    if (
        not isinstance(seq, int)
        or isinstance(seq, bool)
        or seq < 1
        or not all(isinstance(v, str) for v in (mac, key_id, seal, seal_key))
    ):
        raise AuditTampered(f"{where} is not a {what}")
    assert isinstance(mac, str) and isinstance(key_id, str)
    assert isinstance(seal, str) and isinstance(seal_key, str)
    try:
        ok = keyring.verify_mac(
            _head_canonical(seq, mac, key_id), seal, purpose=purpose, key_id=seal_key
        )
    except UnknownKey:
        raise UnknownKey(
            f"{where} is sealed with key {seal_key!r}, which the keyring does not hold"
        ) from None
    if not ok:
        raise AuditTampered(f"{where} was edited or forged (its seal does not match)")
    return seq, mac, key_id


async def _archived_start(store: EventStore, keyring: Keyring) -> _Walk | None:
    """Where the chain starts after its newest archive pass (``None``: never archived).

    Only the newest mark counts: an older one names entries a later pass removed."""
    newest = await store.events(kind=AUDIT_ARCHIVE_KIND, newest_first=True, limit=1)
    if not newest:
        return None
    seq, mac, key_id = _sealed_head(newest[0], keyring, purpose=_ARCHIVE_PURPOSE)
    return _Walk(seq, mac, _rank(keyring, key_id))


async def _newest_mark_id(store: EventStore) -> int | None:
    newest = await store.events(kind=AUDIT_ARCHIVE_KIND, newest_first=True, limit=1)
    return newest[0].id if newest else None


async def _across_archive_passes(store: EventStore, check: Callable[[], Awaitable[T]]) -> T:
    """Run ``check`` (several reads of the log); run it again when an archive pass (say,
    the CLI's, in another process) committed between its reads and it found the chain
    broken: reads on either side of a pass do not make one chain. A check that fails
    with no new pass, or again after :data:`_ARCHIVE_RETRIES` passes, raises."""
    for _ in range(_ARCHIVE_RETRIES):
        mark = await _newest_mark_id(store)
        try:
            return await check()
        except AuditTampered:
            if await _newest_mark_id(store) == mark:
                raise
    return await check()


async def verify_audit(
    store: EventStore, keyring: Keyring, *, expected_head: tuple[int, str] | None = None
) -> int:
    """Check the whole audit chain in ``store``; return its last entry's ``seq`` (how
    many entries it ever held, archived ones included).

    Every entry is checked, and every saved head against the entry it names; an
    archived chain from its newest archive mark on (whose seal is checked). Raises
    :class:`AuditTampered` naming the first bad entry (edited, deleted, inserted or
    reordered; or, with ``expected_head``, cut off before that entry) or a bad head,
    and :class:`UnknownKey` for an entry signed with a key the keyring lacks.
    """
    return await _across_archive_passes(store, lambda: _verify_once(store, keyring, expected_head))


async def _verify_once(
    store: EventStore, keyring: Keyring, expected_head: tuple[int, str] | None
) -> int:
    heads = [(e, _sealed_head(e, keyring)) for e in await _events(store, AUDIT_HEAD_KIND)]
    start = await _archived_start(store, keyring)
    entries = await _events(store, AUDIT_ENTRY_KIND)
    walk = _check_chain(entries, keyring, expected_head, start)
    _check_heads_follow(heads, entries)
    return walk.seq


def _check_heads_follow(
    heads: Sequence[tuple[Event, tuple[int, str, str]]], entries: Sequence[Event]
) -> None:
    """Each sealed head (with what it vouches for) against ``entries`` (by id).

    A head is written right after the entry it names, in the same transaction: the
    entry just before it (by id) must be that one, so a head moved or replayed is found.
    """
    ids = [e.id or 0 for e in entries]
    for event, (seq, mac, _) in heads:
        before = bisect_left(ids, event.id or 0) - 1
        named = entries[before].data if before >= 0 else {}
        if named.get("seq") != seq or named.get("mac") != mac:
            raise AuditTampered(
                f"the saved audit head (event id={event.id}) names seq {seq}, "
                "which is not the entry before it"
            )


class AuditLog:
    """Appends chained entries to a Store's event log, in batches.

    The first :meth:`record` (or :meth:`open`) checks the stored chain from its newest
    sealed head on: on a tampered chain or head it raises :class:`AuditTampered` and
    writes nothing — then, and every time after.
    """

    def __init__(self, store: EventStore, keyring: Keyring, *, clock: Clock | None = None) -> None:
        self._store = store
        self._keyring = keyring
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._walk: _Walk | None = None
        # Entries after the newest saved head: the next open checks these.
        self._unsealed = 0
        self._broken: AuditTampered | None = None
        self._lock = asyncio.Lock()

    @property
    def store(self) -> EventStore:
        """The store the chain is kept in."""
        return self._store

    @property
    def head(self) -> tuple[int, str] | None:
        """``(seq, mac)`` of the last entry this log wrote or verified; ``None`` before."""
        return None if self._walk is None else (self._walk.seq, self._walk.mac)

    async def open(self, *, expected_head: tuple[int, str] | None = None) -> int:
        """Check the stored chain now (also done by the first :meth:`record`).

        Checks the newest sealed head and the entries after it, once. ``expected_head``
        is the head a writer saved elsewhere (the keeper keeps it in its sealed state):
        entries cut from the end of the chain are then caught too.
        """
        async with self._lock:
            await self._load(expected_head)
            assert self._walk is not None
            return self._walk.seq

    async def verify(self) -> int:
        """Check the whole chain and every saved head (see :func:`verify_audit`)."""
        async with self._lock:
            return await verify_audit(self._store, self._keyring, expected_head=self.head)

    async def _load(self, expected_head: tuple[int, str] | None = None) -> None:
        if self._broken is not None:
            raise self._broken
        if self._walk is not None:
            if expected_head is not None:
                _check_chain([], self._keyring, expected_head, _Walk(*self._walk_state()))
            return
        try:
            self._walk = await _across_archive_passes(
                self._store, lambda: self._walk_from_head(expected_head)
            )
        except AuditTampered as exc:
            self._broken = exc
            raise

    def _walk_state(self) -> tuple[int, str, int]:
        assert self._walk is not None
        return self._walk.seq, self._walk.mac, self._walk.rank

    async def _walk_from_head(self, expected_head: tuple[int, str] | None) -> _Walk:
        newest_head = await self._store.events(kind=AUDIT_HEAD_KIND, newest_first=True, limit=1)
        if not newest_head:
            # Never sealed, or every head archived: from the chain's start or its mark.
            start = await _archived_start(self._store, self._keyring)
            events = await _events(self._store, AUDIT_ENTRY_KIND)
            self._unsealed = len(events)
            return _check_chain(events, self._keyring, expected_head, start)
        head_event = newest_head[0]
        seq, mac, key_id = _sealed_head(head_event, self._keyring)
        walk = _Walk(seq, mac, _rank(self._keyring, key_id))
        newer = await _events(self._store, AUDIT_ENTRY_KIND, since=head_event.id)
        if not newer:
            # The head names the newest entry: check that entry too, so neither an
            # edited newest entry nor a head copied forward over newer ones passes.
            last = await self._store.events(kind=AUDIT_ENTRY_KIND, newest_first=True, limit=1)
            if not last or last[0].data.get("seq") != seq or last[0].data.get("mac") != mac:
                raise AuditTampered(
                    f"the saved audit head (event id={head_event.id}) names seq {seq}, "
                    "which is not the newest entry of the chain"
                )
            prev = last[0].data.get("prev")
            before = _Walk(seq - 1, prev if isinstance(prev, str) else "", -1)
            _check_chain(last, self._keyring, None, before)
        self._unsealed = len(newer)
        return _check_chain(newer, self._keyring, expected_head, walk)

    async def record(
        self, type: str, body: Mapping[str, object], *, generation: int | None = None
    ) -> Event:
        """Append one entry (``type`` e.g. ``grant_added``, ``guard_block``); return it."""
        (event,) = await self.record_many([(type, body, generation)])
        return event

    async def record_many(self, entries: Sequence[AuditEntry]) -> list[Event]:
        """Append ``entries`` (``(type, body, generation)``, oldest first) in one
        transaction: all of them or, when it raises, none. Return them as stored."""
        from session_keeper.stores import Event

        async with self._lock:
            await self._load()
            if not entries:
                return []
            walk = _Walk(*self._walk_state())
            key_id = self._keyring.current_id
            batch: list[Event] = []
            for type_, body, generation in entries:
                at = self._clock.now()
                fields: dict[str, object] = {
                    "type": type_,
                    "seq": walk.seq + 1,
                    "prev": walk.mac,
                    "key_id": key_id,
                    "body": json.loads(json.dumps(dict(body), default=str)),
                }
                _, mac = self._keyring.mac(
                    _canonical(at, generation, fields), purpose=_PURPOSE, key_id=key_id
                )
                batch.append(
                    Event(
                        kind=AUDIT_ENTRY_KIND,
                        at=at,
                        generation=generation,
                        data={**fields, "mac": mac},
                    )
                )
                walk.seq, walk.mac = walk.seq + 1, mac
            walk.rank = _rank(self._keyring, key_id)
            sealing = self._unsealed + len(entries) >= HEAD_EVERY
            if sealing:
                batch.append(self._head_event(walk))
            stored = await self._store.append_events(batch)
            self._walk = walk
            self._unsealed = 0 if sealing else self._unsealed + len(entries)
            return stored[: len(entries)]

    async def archive(self, *, older_than: timedelta) -> Pruned:
        """Remove the chain's entries older than ``older_than``, up to its newest sealed
        head before that cut, in one transaction that writes the sealed mark the chain
        goes on from; return how many events went (entries and heads).

        What the pass removes is verified first (every entry and head up to the head at
        the cut, so the keyring needs every key that signed them, and that head no
        younger than its entry); the chain still verifies from
        the mark on after it, as the next open does, and the entries this log writes
        next follow on as before. Nothing is removed when no head is that old (a head is
        written every :data:`HEAD_EVERY` entries). Raises :class:`AuditTampered`
        (changing nothing) when the chain is broken or the head at the cut is forged or
        does not name the entry before it; :class:`UnknownKey` (changing nothing) for an
        entry signed with a key the keyring lacks; :class:`StoreBusy` (changing nothing)
        when the store's cut kept falling on a head the check did not reach (heads
        sealed at the cut meanwhile, or the store's clock ahead of this log's);
        :class:`InvalidArgumentType` when the store keeps no retention or
        ``older_than`` is no timedelta, :class:`InvalidArgument` when it is negative.
        """
        from session_keeper.stores import RetentionStore

        store = self._store
        if not isinstance(store, RetentionStore):
            raise InvalidArgumentType(
                f"{type(store).__name__} cannot archive (it is no RetentionStore)"
            )
        age = check_age(older_than)
        async with self._lock:
            await self._load()
            for _ in range(_ARCHIVE_RETRIES):
                cut = self._clock.now() - age
                # What the pass removes is checked first: an entry edited there would
                # otherwise go unseen, under a mark that vouches for the chain up to it.
                checked = await _across_archive_passes(
                    store, functools.partial(self._check_archivable, cut)
                )
                try:
                    return await store.archive_audit(
                        older_than=older_than,
                        mark=functools.partial(self._archive_mark, checked=checked),
                    )
                except _CutMoved:
                    continue  # the store's cut fell on another head: check again
            raise StoreBusy(
                f"the audit chain's cut moved under {_ARCHIVE_RETRIES} archive attempts "
                "(heads sealed at the cut meanwhile, or the store's clock is ahead of "
                "the log's): nothing was archived; run it again"
            )

    async def _check_archivable(self, cut: datetime) -> _Checked | None:
        """Check everything an archive pass at ``cut`` removes, as :func:`verify_audit`
        would (raising as it does): the chain from its start (or newest mark) through its
        newest sealed head older than ``cut``, and every head up to that one. Return what
        was vouched for (``None``: no head is that old). Page by page, so the event loop
        is not held for long."""
        store, keyring = self._store, self._keyring
        heads = await _events(store, AUDIT_HEAD_KIND)
        old_heads = [e for e in heads if e.at < cut]
        if not old_heads:
            return None
        head = old_heads[-1]
        through, mac, _ = _sealed_head(head, keyring)
        walk = await _archived_start(store, keyring) or _Walk()
        if through <= walk.seq:
            raise AuditTampered(
                f"the saved audit head (event id={head.id}) names seq {through}, which the "
                f"archive mark at seq {walk.seq} already covers: a copy"
            )
        walked: list[Event] = []
        since: int | None = None
        while walk.seq < through:
            page = await store.events(kind=AUDIT_ENTRY_KIND, since_id=since, limit=_PAGE)
            if not page:
                raise AuditTampered(
                    f"the audit chain ends at seq {walk.seq}, before its sealed head at "
                    f"seq {through}: entries were removed"
                )
            # Only what the pass removes: an entry after the cut is not its business.
            taken = page[: through - walk.seq]
            _check_chain(taken, keyring, None, walk)
            walked.extend(taken)
            since = page[-1].id
        entry = walked[-1]
        if walk.mac != mac:
            raise AuditTampered(
                f"the saved audit head (event id={head.id}) names seq {through}, which is "
                "not the chain's entry at that place"
            )
        if not entry.at < cut:
            # An entry's time is under its MAC, a head's is not; a head is written just
            # after its entry, so it is never the older of the two.
            raise AuditTampered(
                f"the saved audit head (event id={head.id}) is dated before the entry it "
                "names: its time was edited"
            )
        # Every head the pass removes is checked too: a forged, moved or replayed one
        # would otherwise go with it, unseen.
        removed = [e for e in heads if (e.id or 0) <= (head.id or 0)]
        _check_heads_follow([(e, _sealed_head(e, keyring)) for e in removed], walked)
        return _Checked(head_id=head.id, entry_id=entry.id, seq=through, mac=mac)

    def _archive_mark(self, head: Event, entry: Event | None, checked: _Checked | None) -> Event:
        """The sealed mark for an archive cut at ``head`` (``entry``: the one before it),
        the cut ``checked`` verified."""
        from session_keeper.stores import Event

        seq, mac, key_id = _sealed_head(head, self._keyring)
        if entry is None or entry.data.get("seq") != seq or entry.data.get("mac") != mac:
            raise AuditTampered(
                f"the saved audit head (event id={head.id}) names seq {seq}, "
                "which is not the entry before it: nothing was archived"
            )
        if checked is None or head.id != checked.head_id:
            # The store's clock put its cut later than this log's (a head sealed at the
            # cut since), or it runs ahead: the rows it would remove were not checked.
            raise _CutMoved
        if entry.id != checked.entry_id or (seq, mac) != (checked.seq, checked.mac):
            # A head and entry copied to the log's end, byte for byte, pass every seal,
            # and rows rewritten since the check do too: the store would remove, and the
            # mark vouch for, what the check did not walk.
            raise AuditTampered(
                f"the saved audit head (event id={head.id}) names seq {seq}, whose entry "
                f"(event id={entry.id}) is not the chain's entry at that place: a copy; "
                "nothing was archived"
            )
        seal_key, seal = self._keyring.mac(
            _head_canonical(seq, mac, key_id), purpose=_ARCHIVE_PURPOSE
        )
        data = {"seq": seq, "mac": mac, "key_id": key_id, "seal_key_id": seal_key, "seal": seal}
        return Event(kind=AUDIT_ARCHIVE_KIND, at=self._clock.now(), data=data)

    def _head_event(self, walk: _Walk) -> Event:
        """The sealed head naming ``walk``'s last entry (no secret: a MAC and key ids)."""
        from session_keeper.stores import Event

        entry_key = self._keyring.current_id
        seal_key, seal = self._keyring.mac(
            _head_canonical(walk.seq, walk.mac, entry_key), purpose=_HEAD_PURPOSE
        )
        data = {
            "seq": walk.seq,
            "mac": walk.mac,
            "key_id": entry_key,
            "seal_key_id": seal_key,
            "seal": seal,
        }
        return Event(kind=AUDIT_HEAD_KIND, at=self._clock.now(), data=data)

    def __repr__(self) -> str:
        return f"<AuditLog head={self._walk.seq if self._walk else None}>"


def keyring_of(holder: AuditLog) -> Keyring:
    """The keyring ``holder`` signs its entries with (its keys are secrets to scrub too)."""
    return holder._keyring
