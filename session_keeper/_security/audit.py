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

It needs no schema change: the chain lives inside event data, on
``Store.append_event``/``Store.events``. One writer per store (per chain): two
processes appending at once would fork the chain, and verification would say so.
The MAC key is derived from the :class:`~session_keeper.Keyring` (HKDF, purpose
``audit``), so the AES keys never double as MAC keys; rotating the keyring rotates
the chain's key from the next entry on.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from session_keeper._util.clock import Clock, SystemClock
from session_keeper.errors import AuditTampered, UnknownKey

if TYPE_CHECKING:
    from session_keeper._security.keyring import Keyring
    from session_keeper.stores._protocol import Store
    from session_keeper.stores._records import Event

__all__ = ["AUDIT_EVENT", "AuditLog", "keyring_of", "verify_audit"]

#: The event kind every audit entry is stored under.
AUDIT_EVENT: Final = "audit"
_PURPOSE: Final = "audit"
_PAGE: Final = 1000


def _canonical(at: datetime, generation: int | None, fields: Mapping[str, object]) -> bytes:
    payload = {
        "at": at.astimezone(UTC).isoformat(),
        "generation": generation,
        **{k: fields[k] for k in ("type", "seq", "prev", "key_id", "body")},
    }
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str).encode()


async def _audit_events(store: Store) -> list[Event]:
    out: list[Event] = []
    since: int | None = None
    while True:
        page = await store.events(kind=AUDIT_EVENT, since_id=since, limit=_PAGE)
        out.extend(page)
        if len(page) < _PAGE:
            return out
        since = page[-1].id


def _check_chain(
    events: list[Event], keyring: Keyring, expected_head: tuple[int, str] | None
) -> tuple[int, str]:
    """Walk the chain; return its head ``(seq, mac)``. Raises :class:`AuditTampered`."""
    prev = ""
    seq = 0
    # The empty chain's head is (0, ""): nothing before the first entry.
    at_head: str | None = "" if expected_head is not None and expected_head[0] == 0 else None
    order = keyring.ids
    newest_rank = 0
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
        if got_seq != seq + 1:
            raise AuditTampered(
                f"{where} has seq {got_seq!r} where {seq + 1} was due: "
                "entries were deleted, inserted or reordered"
            )
        if got_prev != prev:
            raise AuditTampered(f"{where} does not follow the entry before it")
        rank = order.index(key_id)
        if rank < newest_rank:
            # Once a newer key signs, an older one never may again: a leaked retired
            # key that is still held for reading cannot append forged entries.
            raise AuditTampered(f"{where} is signed with a key older than the entry before it")
        newest_rank = rank
        seq, prev = seq + 1, mac
        if expected_head is not None and seq == expected_head[0]:
            at_head = mac
    if expected_head is not None:
        if seq < expected_head[0]:
            raise AuditTampered(
                f"the audit chain ends at seq {seq}, but its writer reported seq "
                f"{expected_head[0]}: entries were removed from its end"
            )
        if at_head != expected_head[1]:
            raise AuditTampered(
                f"audit entry seq {expected_head[0]} is not the one its writer reported"
            )
    return seq, prev


async def verify_audit(
    store: Store, keyring: Keyring, *, expected_head: tuple[int, str] | None = None
) -> int:
    """Check the whole audit chain in ``store``; return how many entries it holds.

    Raises :class:`AuditTampered` naming the first bad entry (edited, deleted,
    inserted or reordered; or, with ``expected_head``, cut off before that entry), and
    :class:`UnknownKey` for an entry signed with a key the keyring lacks.
    """
    seq, _ = _check_chain(await _audit_events(store), keyring, expected_head)
    return seq


class AuditLog:
    """Appends chained entries to a Store's event log.

    The first :meth:`record` verifies the existing chain: on a tampered chain it
    raises :class:`AuditTampered` and writes nothing — then, and every time after.
    """

    def __init__(self, store: Store, keyring: Keyring, *, clock: Clock | None = None) -> None:
        self._store = store
        self._keyring = keyring
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._head: tuple[int, str] | None = None
        self._broken: AuditTampered | None = None
        self._lock = asyncio.Lock()

    @property
    def head(self) -> tuple[int, str] | None:
        """``(seq, mac)`` of the last entry this log wrote or verified; ``None`` before."""
        return self._head

    async def open(self, *, expected_head: tuple[int, str] | None = None) -> int:
        """Verify the stored chain now (also done by the first :meth:`record`).

        ``expected_head`` is the head a writer saved elsewhere (the keeper keeps it in
        its sealed state): entries cut from the end of the chain are then caught too.
        """
        async with self._lock:
            if expected_head is not None and self._head is None:
                try:
                    _check_chain(await _audit_events(self._store), self._keyring, expected_head)
                except AuditTampered as exc:
                    self._broken = exc
                    raise
            await self._load()
            assert self._head is not None
            return self._head[0]

    async def _load(self) -> None:
        if self._broken is not None:
            raise self._broken
        if self._head is not None:
            return
        try:
            self._head = _check_chain(await _audit_events(self._store), self._keyring, None)
        except AuditTampered as exc:
            self._broken = exc
            raise

    async def record(
        self, type: str, body: Mapping[str, object], *, generation: int | None = None
    ) -> Event:
        """Append one entry (``type`` e.g. ``grant_added``, ``guard_block``); return it."""
        from session_keeper.stores._records import Event

        async with self._lock:
            await self._load()
            assert self._head is not None
            seq, prev = self._head
            at = self._clock.now()
            key_id = self._keyring.current_id
            fields: dict[str, object] = {
                "type": type,
                "seq": seq + 1,
                "prev": prev,
                "key_id": key_id,
                "body": json.loads(json.dumps(dict(body), default=str)),
            }
            _, mac = self._keyring.mac(
                _canonical(at, generation, fields), purpose=_PURPOSE, key_id=key_id
            )
            event = Event(
                kind=AUDIT_EVENT, at=at, generation=generation, data={**fields, "mac": mac}
            )
            await self._store.append_event(event)
            self._head = (seq + 1, mac)
            return event

    def __repr__(self) -> str:
        return f"<AuditLog head={self._head[0] if self._head else None}>"


def keyring_of(holder: AuditLog) -> Keyring:
    """The keyring ``holder`` signs its entries with (its keys are secrets to scrub too)."""
    return holder._keyring
