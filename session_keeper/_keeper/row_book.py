"""What the keeper last wrote, row by row, and the batch that brings the store up to date.

:class:`RowBook` keeps, per saved row, the digest of its plain body, its MAC and the
object it was made from. A save (:meth:`RowBook.plan`) looks only at what may have
changed: the conversations the live state marked (``KeeperLive.changed``) and, for
the small kinds whose parts cannot say what changed (logins, lost logins, borrows,
generations, grants), each item compared by identity with what was written. Only rows
whose body differs are encoded, sealed and written; the head's count and sum move by
the difference (see :mod:`.rows`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic

import attrs

from session_keeper._browser.backend import PageT
from session_keeper._keeper import rows as r
from session_keeper._keeper.state import SavedGrant, SavedPending, SavedTab, encode
from session_keeper.stores._records import dump_json

if TYPE_CHECKING:
    from session_keeper._keeper.live import KeeperLive
    from session_keeper._security.keyring import Keyring


@attrs.frozen
class _Written:
    digest: str
    mac: str
    #: What the row was made from (compared by identity), when its kind has no marks.
    source: object = None


@attrs.define
class Batch:
    """One save's changes: what :meth:`Store.save_keeper_rows` is given, and the book's
    entries to record once it is stored."""

    head: dict[str, object]
    upserts: list[tuple[str, str, Mapping[str, object]]]
    deletes: list[tuple[str, str]]
    projections_upsert: dict[str, list[dict[str, object]]]
    projections_delete: dict[str, list[dict[str, object]]]
    replaces_document: bool
    #: The conversations this batch looked at (marked again if it is not stored).
    conversations: set[str]
    staged: dict[tuple[str, str], _Written | None]
    total: int
    count: int
    #: What the head says, unsealed (its seal differs on every sealing).
    head_says: tuple[object, ...] = ()
    #: Nothing to write: no row changed and the stored head already says this.
    empty: bool = False


def _digest(body: object) -> str:
    return hashlib.sha256(r.canonical(body)).hexdigest()


def _same_grant(old: object, new: object) -> bool:
    # A GrantState changes in place (its uses): compare the grant and what is left of it.
    return (
        isinstance(old, tuple) and isinstance(new, tuple) and old[0] is new[0] and old[1] == new[1]
    )


def _same(old: object, new: object) -> bool:
    return old is new


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
        """Take the rows just loaded as what is written."""
        for (kind, key), (body, mac) in verified.items():
            self._written[kind][key] = _Written(_digest(body), mac)
            self._total = r.add(self._total, mac)
        self._count = len(verified)

    def plan(self, *, audit_head: tuple[int, str] | None, browser_identity: str | None) -> Batch:
        """The batch that makes the stored rows match the live state."""
        live = self._live
        conversations = live.changed.take()
        batch = Batch(
            head={},
            upserts=[],
            deletes=[],
            projections_upsert={},
            projections_delete={},
            replaces_document=self.replaces_document,
            conversations=conversations,
            staged={},
            total=self._total,
            count=self._count,
        )
        for conversation in conversations:
            self._stage(batch, r.CONVERSATION, conversation, self._conversation(conversation))
        ledger = live.ledger
        self._diff(batch, r.LOGIN, {x.site: x for x in ledger.live()}, _same, encode)
        self._diff(batch, r.LOST_LOGIN, {x.name: x for x in ledger.lost_records()}, _same, encode)
        self._diff(
            batch,
            r.GRANT,
            {str(s.id): (s.grant, s.uses_left) for s in live.grants.states()},
            _same_grant,
            lambda g: encode(SavedGrant(grant=g[0], uses_left=g[1])),
        )
        self._diff(batch, r.BORROW, {x.id: x for x in live.borrows.requests()}, _same, encode)
        kept = live.generations
        self._diff(
            batch, r.GENERATION, {r.generation_key(g.generation): g for g in kept}, _same, encode
        )
        batch.head_says = (live.generation, audit_head, browser_identity, batch.count, batch.total)
        if (
            batch.head_says == self._head_says
            and not (batch.upserts or batch.deletes or batch.replaces_document)
            and not (batch.projections_upsert or batch.projections_delete)
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
        """``batch`` failed: its conversations are still to be saved."""
        self._live.changed.mark(batch.conversations)

    # ------------------------------------------------------------------ staging

    def _conversation(self, conversation: str) -> dict[str, Any] | None:
        live = self._live
        body: dict[str, Any] = {}
        tab = live.tabs.get(conversation)
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
        pending = live.pending.get(conversation)
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
        seen = live.seen.get(conversation)
        if seen is not None:
            body["seen"] = seen
        turn = live.turns.get(conversation)
        if turn is not None:
            body["turn"] = encode(turn)
        takeover = live.takeovers.get(conversation)
        if takeover is not None:
            body["takeover"] = encode(takeover)
        return body or None

    def _diff(
        self,
        batch: Batch,
        kind: str,
        current: Mapping[str, object],
        same: Callable[[object, object], bool],
        make: Callable[[Any], Any],
    ) -> None:
        written = self._written[kind]
        for key, source in current.items():
            old = written.get(key)
            if old is not None and old.source is not None and same(old.source, source):
                continue
            self._stage(batch, kind, key, make(source), source)
        for key in written.keys() - current.keys():
            self._stage(batch, kind, key, None)

    def _stage(
        self,
        batch: Batch,
        kind: str,
        key: str,
        plain: dict[str, Any] | None,
        source: object = None,
    ) -> None:
        old = self._written[kind].get(key)
        if plain is None:
            if old is not None:
                batch.deletes.append((kind, key))
                batch.staged[(kind, key)] = None
                batch.total = r.remove(batch.total, old.mac)
                batch.count -= 1
                self._unproject(batch, kind, key)
            return
        digest = _digest(plain)
        if old is not None and old.digest == digest:
            if source is not None:
                batch.staged[(kind, key)] = attrs.evolve(old, source=source)
            return
        stored = self._sealed(kind, key, plain)
        body, mac = r.with_mac(self._keyring, self._keeper_id, kind, key, stored)
        batch.upserts.append((kind, key, body))
        batch.staged[(kind, key)] = _Written(digest, mac, source)
        if old is None:
            batch.count += 1
        else:
            batch.total = r.remove(batch.total, old.mac)
        batch.total = r.add(batch.total, mac)
        self._project(batch, kind, key, stored)

    def _sealed(self, kind: str, site: str, plain: dict[str, Any]) -> dict[str, Any]:
        if kind != r.LOGIN or self._keyring is None or plain.get("account") is None:
            return plain
        # Bound to the site, as in the document: a pasted identity fails to open.
        sealed = self._keyring.seal(str(plain["account"]), purpose=f"login.account:{site}")
        return {**plain, "account": sealed}

    def _project(self, batch: Batch, kind: str, key: str, body: Mapping[str, Any]) -> None:
        table, row = _projection(kind, key, body)
        if table is None:
            return
        if row is None:
            batch.projections_delete.setdefault(table, []).append(_projection_key(kind, key))
        else:
            batch.projections_upsert.setdefault(table, []).append(row)

    def _unproject(self, batch: Batch, kind: str, key: str) -> None:
        table, _ = _projection(kind, key, {})
        if table is not None:
            batch.projections_delete.setdefault(table, []).append(_projection_key(kind, key))


_TABLES = {
    r.CONVERSATION: ("keeper_tabs", "conversation"),
    r.LOGIN: ("keeper_logins", "site"),
    r.GRANT: ("keeper_grants", "grant_key"),
    r.GENERATION: ("keeper_generations", "generation"),
}


def _projection_key(kind: str, key: str) -> dict[str, object]:
    _, column = _TABLES[kind]
    return {column: int(key) if kind == r.GENERATION else key}


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _projection(
    kind: str, key: str, body: Mapping[str, Any]
) -> tuple[str | None, dict[str, object] | None]:
    """The inspection table a row of ``kind`` is projected to, and its row there
    (``None``: the row has no projection any more, e.g. a conversation without a tab)."""
    if kind not in _TABLES:
        return None, None
    table, _ = _TABLES[kind]
    if not body:
        return table, None
    if kind == r.CONVERSATION:
        tab = body.get("tab")
        if tab is None:
            return table, None
        return table, {
            "conversation": key,
            "last_verified_url": _text(tab.get("last_url")),
            "body": dump_json(tab, "tab"),
        }
    if kind == r.LOGIN:
        return table, {
            "site": key,
            "owner": _text(body.get("owner")),
            "account": _text(body.get("account")),
            "generation": body.get("generation"),
            "recorded_at": _text(body.get("recorded_at")),
            # Names and fingerprints only.
            "cookies": dump_json(
                [
                    {"name": c.get("name"), "fingerprint": c.get("fingerprint")}
                    for c in body.get("cookies", ())
                ],
                "cookies",
            ),
        }
    if kind == r.GRANT:
        return table, {"grant_key": key, "body": dump_json(body, "grant")}
    return table, {
        "generation": body["generation"],
        "started_at": _text(body.get("started_at")),
        "ended_at": _text(body.get("ended_at")),
        "cause": _text(body.get("cause")),
    }
