"""What the keeper last wrote, row by row, and the batch that brings the store up to date.

:class:`RowBook` keeps, per saved row, the digest of its plain body, its MAC and the
object it was made from. A save (:meth:`RowBook.plan`) looks only at the keys the
parts marked as they changed them (conversations, logins, grants, borrow requests,
generations: each book's :class:`~session_keeper._model.changes.Changes`), never at the
whole state: a write costs the same at 100 and at 100,000 conversations, whatever they
hold. Only rows whose body differs are encoded, sealed and written; the head's count
and sum move by the difference (see :mod:`.sealed_rows`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Generic

import attrs

from session_keeper._browser.backend import PageT
from session_keeper._keeper.saving import sealed_rows as r
from session_keeper._keeper.state.saved import SavedGrant, SavedPending, SavedTab, encode

if TYPE_CHECKING:
    from session_keeper._keeper.state.live import KeeperLive
    from session_keeper._security.keyring import Keyring


@attrs.frozen
class _Written:
    digest: str
    mac: str


@attrs.define
class Taken:
    """The keys a save took from the books' :class:`Changes` (given back if it fails)."""

    conversations: set[str] = attrs.Factory(set)
    logins: set[str] = attrs.Factory(set)
    grants: set[int] = attrs.Factory(set)
    borrows: set[str] = attrs.Factory(set)
    generations: set[int] = attrs.Factory(set)


@attrs.define
class Batch:
    """One save's changes: what :meth:`Store.save_keeper_rows` is given, and the book's
    entries to record once it is stored."""

    head: dict[str, object]
    upserts: list[tuple[str, str, Mapping[str, object]]]
    deletes: list[tuple[str, str]]
    replaces_document: bool
    #: What this batch took from the books (marked again if it is not stored).
    taken: Taken
    staged: dict[tuple[str, str], _Written | None]
    total: int
    count: int
    #: What the head says, unsealed (its seal differs on every sealing).
    head_says: tuple[object, ...] = ()
    #: Nothing to write: no row changed and the stored head already says this.
    empty: bool = False


def _digest(body: object) -> str:
    return hashlib.sha256(r.canonical(body)).hexdigest()


class RowBook(Generic[PageT]):
    """The rows last written for one keeper (see the module)."""

    def __init__(self, live: KeeperLive[PageT], keeper_id: str, keyring: Keyring | None) -> None:
        self._live = live
        self._keeper_id = keeper_id
        self._keyring = keyring
        self._written: dict[str, dict[str, _Written]] = {kind: {} for kind in r.KINDS}
        self._total = 0
        self._count = 0
        #: The first save after a document from before rows was read replaces it.
        self.replaces_document = False
        #: What the head this book last stored says (``None``: not stored by this book).
        self._head_says: tuple[object, ...] | None = None

    def adopt(self, verified: Mapping[tuple[str, str], tuple[Mapping[str, Any], str]]) -> None:
        """Take the rows just loaded as what is written.

        The live state was just loaded from them, so the first save looks at every row
        once (loading renumbers grants, and ends the dead process's generation): a row
        no book holds any more is deleted, an unchanged one costs a digest.
        """
        for (kind, key), (body, mac) in verified.items():
            self._written[kind][key] = _Written(_digest(body), mac)
            self._total = r.add(self._total, mac)
        self._count = len(verified)
        self._give_back(
            Taken(
                conversations=set(self._written[r.CONVERSATION]),
                logins=set(self._written[r.LOGIN]) | set(self._written[r.LOST_LOGIN]),
                grants={int(k) for k in self._written[r.GRANT]},
                borrows=set(self._written[r.BORROW]),
                generations={int(k) for k in self._written[r.GENERATION]},
            )
        )

    def _take(self) -> Taken:
        live = self._live
        return Taken(
            conversations=live.changed.take(),
            logins=live.ledger.changes.take(),
            grants=live.grants.changes.take(),
            borrows=live.borrows.changes.take(),
            generations=live.generation_changes.take(),
        )

    def _give_back(self, taken: Taken) -> None:
        live = self._live
        live.changed.update(taken.conversations)
        live.ledger.changes.update(taken.logins)
        live.grants.changes.update(taken.grants)
        live.borrows.changes.update(taken.borrows)
        live.generation_changes.update(taken.generations)

    def plan(self, *, audit_head: tuple[int, str] | None, browser_identity: str | None) -> Batch:
        """The batch that makes the stored rows match the live state.

        It stages only the rows whose keys the books marked since the last save: its
        cost follows the change, whatever the keeper holds.
        """
        live = self._live
        taken = self._take()
        batch = Batch(
            head={},
            upserts=[],
            deletes=[],
            replaces_document=self.replaces_document,
            taken=taken,
            staged={},
            total=self._total,
            count=self._count,
        )
        for conversation in taken.conversations:
            self._stage(batch, r.CONVERSATION, conversation, self._conversation(conversation))
        ledger = live.ledger
        for site in taken.logins:
            login = ledger.get(site)
            self._stage(batch, r.LOGIN, site, None if login is None else encode(login))
            lost = ledger.lost(site)
            self._stage(batch, r.LOST_LOGIN, site, None if lost is None else encode(lost))
        for grant_id in sorted(taken.grants):
            state = live.grants.get(grant_id)
            self._stage(
                batch,
                r.GRANT,
                str(grant_id),
                None
                if state is None
                else encode(SavedGrant(grant=state.grant, uses_left=state.uses_left)),
            )
        for request_id in taken.borrows:
            request = live.borrows.get(request_id)
            self._stage(batch, r.BORROW, request_id, None if request is None else encode(request))
        for generation in taken.generations:
            record = live.generation_record(generation)
            body = None if record is None else encode(record)
            self._stage(batch, r.GENERATION, r.generation_key(generation), body)
        batch.head_says = (live.generation, audit_head, browser_identity, batch.count, batch.total)
        if batch.head_says == self._head_says and not (
            batch.upserts or batch.deletes or batch.replaces_document
        ):
            # A save with nothing new (persist() after the background write took the
            # change) costs no transaction and no fsync.
            batch.empty = True
            return batch
        batch.head = r.make_head(
            self._keyring,
            self._keeper_id,
            generation=live.generation,
            audit_head=audit_head,
            browser_identity=browser_identity,
            rows=batch.count,
            total=batch.total,
        )
        return batch

    def stored(self, batch: Batch) -> None:
        """``batch`` is in the store: record its rows as written."""
        for (kind, key), entry in batch.staged.items():
            if entry is None:
                self._written[kind].pop(key, None)
            else:
                self._written[kind][key] = entry
        self._total = batch.total
        self._count = batch.count
        self._head_says = batch.head_says
        self.replaces_document = False

    def not_stored(self, batch: Batch) -> None:
        """``batch`` failed: every row it looked at is still to be saved."""
        self._give_back(batch.taken)

    # ------------------------------------------------------------------ staging

    def _conversation(self, conversation: str) -> dict[str, Any] | None:
        record = self._live.conversations.get(conversation)
        if record is None:
            return None
        body: dict[str, Any] = {}
        tab = record.tab
        if tab is not None:
            body["tab"] = encode(
                SavedTab(
                    conversation=conversation,
                    last_url=tab.last_url,
                    verified_at=tab.verified_at,
                    generation=tab.generation,
                    target_id=tab.target_id,
                )
            )
        pending = record.pending
        if pending is not None:
            body["pending"] = encode(
                SavedPending(
                    since_generation=pending.since_generation,
                    restarted=pending.restarted,
                    lost=tuple(pending.lost),
                    revalidate=tuple(pending.revalidate),
                    restored=tuple(pending.restored),
                    renewed=tuple(pending.renewed),
                )
            )
        if record.seen is not None:
            body["seen"] = record.seen
        if record.turn is not None:
            body["turn"] = encode(record.turn)
        if record.takeover is not None:
            body["takeover"] = encode(record.takeover)
        return body or None

    def _stage(
        self,
        batch: Batch,
        kind: str,
        key: str,
        plain: dict[str, Any] | None,
    ) -> None:
        old = self._written[kind].get(key)
        if plain is None:
            if old is not None:
                batch.deletes.append((kind, key))
                batch.staged[(kind, key)] = None
                batch.total = r.remove(batch.total, old.mac)
                batch.count -= 1
            return
        digest = _digest(plain)
        if old is not None and old.digest == digest:
            return
        stored = self._sealed(kind, key, plain)
        body, mac = r.with_mac(self._keyring, self._keeper_id, kind, key, stored)
        batch.upserts.append((kind, key, body))
        batch.staged[(kind, key)] = _Written(digest, mac)
        if old is None:
            batch.count += 1
        else:
            batch.total = r.remove(batch.total, old.mac)
        batch.total = r.add(batch.total, mac)

    def _sealed(self, kind: str, site: str, plain: dict[str, Any]) -> dict[str, Any]:
        if kind != r.LOGIN or self._keyring is None or plain.get("account") is None:
            return plain
        # Bound to the site, as in the document: a pasted identity fails to open.
        sealed = self._keyring.seal(str(plain["account"]), purpose=f"login.account:{site}")
        return {**plain, "account": sealed}
