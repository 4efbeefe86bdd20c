"""The keeper's saved rows: their kinds, their seals, and the head that binds them.

The keeper's state is saved as rows keyed ``(kind, key)`` (``Store.save_keeper_rows``):

- ``conversation`` / conversation id: its tab, pending facts, seen generation, current
  turn and takeover (whatever of those it has);
- ``login`` / site, ``lost_login`` / site, ``grant`` / grant id, ``borrow`` / request
  id, ``generation`` / zero-padded generation number.

Each body is a piece of the version-1 document (:mod:`session_keeper._keeper.state.saved`),
so one codec reads both.
Every row carries ``mac``: with a keyring, an HMAC bound to ``(keeper_id, kind, key,
body)``; without one, a plain SHA-256 of the same. The head holds the generation, the
audit head, the browser identity, the row count and the sum (mod 2^256) of every row's
MAC, sealed with the keyring: changing one row changes the sum by its difference, so a
write updates the head in O(1), and a row removed, added or replayed from an older save
no longer adds up (:class:`SealBroken`; :class:`StoreCorrupt` without a keyring).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from session_keeper._keeper.state.saved import (
    ACCOUNT_SEALING,
    KEEPER_STATE_VERSION,
    MALFORMED,
    GenerationRecord,
    KeeperState,
    SavedGrant,
    SavedPending,
    SavedTab,
    SavedTurn,
    check_seal,
    decode,
    decode_login,
)
from session_keeper._model.borrows import BorrowRequest
from session_keeper._model.facts import LoginRecord, Lost
from session_keeper.errors import KeyringError, SchemaVersionError, SealBroken, StoreCorrupt

if TYPE_CHECKING:
    from session_keeper._security.keyring import Keyring
    from session_keeper.stores import KeeperRows, Store

#: Version of the head's and the rows' shape (the document was version 1).
KEEPER_ROWS_VERSION: Final = 2
CONVERSATION: Final = "conversation"
LOGIN: Final = "login"
LOST_LOGIN: Final = "lost_login"
GRANT: Final = "grant"
BORROW: Final = "borrow"
GENERATION: Final = "generation"
KINDS: Final = (CONVERSATION, LOGIN, LOST_LOGIN, GRANT, BORROW, GENERATION)
#: The parts of a conversation's row, and the document entry each one comes from.
CONVERSATION_PARTS: Final = {
    "tab": "tabs",
    "pending": "pending",
    "seen": "seen",
    "turn": "turns",
    "takeover": "takeovers",
}

_MAC: Final = "mac"
_SEAL: Final = "seal"
_ROW_PURPOSE: Final = "keeper.row"
_HEAD_PURPOSE: Final = "keeper.head"
_PLAIN: Final = "sha256"
_MODULUS: Final = 1 << 256


def canonical(value: object) -> bytes:
    """The bytes a digest is taken over: sorted keys, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def generation_key(generation: int) -> str:
    """A generation row's key: zero-padded, so keys sort as numbers do."""
    return f"{generation:012d}"


def row_mac(keyring: Keyring | None, keeper_id: str, kind: str, key: str, body: object) -> str:
    """``<key id>.<hex>``: the row's MAC (or ``sha256.<hex>`` without a keyring)."""
    data = canonical([keeper_id, kind, key, body])
    if keyring is None:
        return f"{_PLAIN}.{hashlib.sha256(data).hexdigest()}"
    key_id, mac = keyring.mac(data, purpose=_ROW_PURPOSE)
    return f"{key_id}.{mac}"


def mac_value(mac: str) -> int:
    """The number a row's MAC adds to the head's sum."""
    return int(mac.rpartition(".")[2], 16)


def add(total: int, mac: str) -> int:
    """``total`` with one row's MAC added (mod 2^256)."""
    return (total + mac_value(mac)) % _MODULUS


def remove(total: int, mac: str) -> int:
    """``total`` with one row's MAC taken out (mod 2^256)."""
    return (total - mac_value(mac)) % _MODULUS


def make_head(
    keyring: Keyring | None,
    keeper_id: str,
    *,
    generation: int,
    audit_head: tuple[int, str] | None,
    browser_identity: str | None,
    rows: int,
    total: int,
) -> dict[str, object]:
    """The head for rows that number ``rows`` and whose MACs add up to ``total``."""
    head: dict[str, object] = {
        "version": KEEPER_ROWS_VERSION,
        "generation": generation,
        "rows": rows,
        "digest": f"{total:064x}",
    }
    if audit_head is not None:
        head["audit_head"] = list(audit_head)
    if browser_identity is not None:
        head["browser_identity"] = browser_identity
    if keyring is not None:
        head[ACCOUNT_SEALING] = "sk1"
        head[_SEAL] = keyring.seal(_head_digest(keeper_id, head), purpose=_HEAD_PURPOSE)
    return head


def _head_digest(keeper_id: str, head: Mapping[str, object]) -> str:
    body = {k: v for k, v in head.items() if k != _SEAL}
    return hashlib.sha256(canonical([keeper_id, body])).hexdigest()


def with_mac(
    keyring: Keyring | None, keeper_id: str, kind: str, key: str, body: Mapping[str, Any]
) -> tuple[dict[str, Any], str]:
    """The body as stored (its MAC added), and that MAC."""
    mac = row_mac(keyring, keeper_id, kind, key, body)
    return {**body, _MAC: mac}, mac


def _check_head(keeper_id: str, head: Mapping[str, object], keyring: Keyring | None) -> None:
    if not head:
        broken = SealBroken if keyring is not None else StoreCorrupt
        raise broken("the keeper's saved rows have lost their head; refusing to trust them")
    version = head.get("version")
    if version != KEEPER_ROWS_VERSION:
        raise SchemaVersionError(
            f"keeper rows have version {version!r}; this code reads {KEEPER_ROWS_VERSION}"
        )
    check_seal(
        head,
        keyring,
        seal_key=_SEAL,
        purpose=_HEAD_PURPOSE,
        digest=_head_digest(keeper_id, head),
    )


def verify(
    keeper_id: str, saved: KeeperRows, keyring: Keyring | None
) -> dict[tuple[str, str], tuple[dict[str, Any], str]]:
    """Every row's body (its MAC taken off) and MAC, once the rows and head agree.

    Raises :class:`SchemaVersionError`, :class:`KeyringError`, :class:`SealBroken` (a
    row changed, removed, added or replayed, with a keyring) or :class:`StoreCorrupt`
    (the same without one, or a malformed row).
    """
    _check_head(keeper_id, saved.head, keyring)
    broken = SealBroken if keyring is not None else StoreCorrupt
    out: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}
    total = 0
    for (kind, key), stored in saved.rows.items():
        body = {k: v for k, v in stored.items() if k != _MAC}
        mac = stored.get(_MAC)
        if kind not in KINDS or not isinstance(mac, str) or "." not in mac:
            raise broken(f"a saved row of the keeper ({kind}) is not one it wrote")
        key_id, _, _ = mac.rpartition(".")
        expected = (
            row_mac(None, keeper_id, kind, key, body)
            if keyring is None
            else _keyed(keyring, keeper_id, kind, key, body, key_id)
        )
        if expected != mac:
            raise broken(f"a saved row of the keeper ({kind}) was changed outside the keeper")
        total = add(total, mac)
        out[(kind, key)] = (body, mac)
    if saved.head.get("rows") != len(out) or saved.head.get("digest") != f"{total:064x}":
        raise broken("the keeper's saved rows were removed, added or replayed from an older save")
    return out


def _keyed(keyring: Keyring, keeper_id: str, kind: str, key: str, body: object, key_id: str) -> str:
    data = canonical([keeper_id, kind, key, body])
    try:
        _, mac = keyring.mac(data, purpose=_ROW_PURPOSE, key_id=key_id)
    except KeyringError:
        raise SealBroken(
            "a saved row of the keeper is sealed by a key not in the keyring"
        ) from None
    return f"{key_id}.{mac}"


def document_of(
    head: Mapping[str, object], rows: Mapping[tuple[str, str], Mapping[str, Any]]
) -> dict[str, Any]:
    """The version-1 document shape the rows describe (accounts as stored).

    What the CLI and the console read, and what :func:`state_of` parses.
    """
    doc: dict[str, Any] = {
        "version": KEEPER_STATE_VERSION,
        "generation": head.get("generation"),
        "generations": [],
        "logins": [],
        "lost_logins": [],
        "tabs": [],
        "grants": [],
        "pending": {},
        "seen": {},
        "takeovers": {},
        "turns": {},
        "borrow_requests": [],
    }
    for field in ("audit_head", "browser_identity", ACCOUNT_SEALING):
        if field in head:
            doc[field] = head[field]
    ordered = sorted(rows.items(), key=lambda item: _order(*item[0]))
    for (kind, key), body in ordered:
        if kind == CONVERSATION:
            for part, entry in CONVERSATION_PARTS.items():
                if part not in body:
                    continue
                if part == "tab":
                    doc["tabs"].append(body[part])
                else:
                    doc[entry][key] = body[part]
        else:
            doc[_LISTS[kind]].append(body)
    doc["borrow_requests"].sort(key=lambda r: (str(r.get("requested_at")), str(r.get("id"))))
    if not doc["turns"]:
        del doc["turns"]
    return doc


_LISTS: Final = {
    LOGIN: "logins",
    LOST_LOGIN: "lost_logins",
    GRANT: "grants",
    BORROW: "borrow_requests",
    GENERATION: "generations",
}


def _order(kind: str, key: str) -> tuple[str, int, str]:
    # Grants in the order they were added (their ids count up), the rest by key.
    return (kind, int(key) if kind == GRANT and key.isdigit() else 0, key)


def state_of(
    keeper_id: str, saved: KeeperRows, keyring: Keyring | None
) -> tuple[KeeperState, dict[tuple[str, str], tuple[dict[str, Any], str]]]:
    """The state saved rows describe, each row read straight into its value, and the
    verified rows (see :func:`verify`). Raises :class:`StoreCorrupt` for a malformed
    row; nothing is applied anywhere."""
    verified = verify(keeper_id, saved, keyring)
    try:
        state = _decode(saved.head, verified, keyring)
    except MALFORMED as exc:
        raise StoreCorrupt(
            f"a saved row of the keeper is malformed: {type(exc).__name__}"
        ) from None
    return state, verified


def _decode(
    head: Mapping[str, object],
    verified: Mapping[tuple[str, str], tuple[Mapping[str, Any], str]],
    keyring: Keyring | None,
) -> KeeperState:
    sealed = head.get(ACCOUNT_SEALING) is not None
    tabs: list[SavedTab] = []
    pending: dict[str, SavedPending] = {}
    seen: dict[str, int] = {}
    turns: dict[str, SavedTurn] = {}
    takeovers: dict[str, datetime] = {}
    logins: list[LoginRecord] = []
    lost: list[Lost] = []
    grants: list[tuple[int, SavedGrant]] = []
    borrows: list[BorrowRequest] = []
    generations: list[GenerationRecord] = []
    for (kind, key), (body, _) in sorted(verified.items()):
        if kind == CONVERSATION:
            if "tab" in body:
                tabs.append(decode(body["tab"], SavedTab))
            if "pending" in body:
                pending[key] = decode(body["pending"], SavedPending)
            if "seen" in body:
                seen[key] = decode(body["seen"], int)
            if "turn" in body:
                turns[key] = decode(body["turn"], SavedTurn)
            if "takeover" in body:
                takeovers[key] = decode(body["takeover"], datetime)
        elif kind == LOGIN:
            logins.append(decode_login(body, keyring, sealed))
        elif kind == LOST_LOGIN:
            lost.append(decode(body, Lost))
        elif kind == GRANT:
            grants.append((int(key), decode(body, SavedGrant)))
        elif kind == BORROW:
            borrows.append(decode(body, BorrowRequest))
        else:
            generations.append(decode(body, GenerationRecord))
    audit_head = head.get("audit_head")
    identity = head.get("browser_identity")
    return KeeperState(
        generation=decode(head["generation"], int),
        generations=tuple(generations),
        logins=tuple(logins),
        lost_logins=tuple(lost),
        tabs=tuple(tabs),
        # In the order they were added (their ids count up).
        grants=tuple(g for _, g in sorted(grants, key=lambda item: item[0])),
        pending=pending,
        seen=seen,
        takeovers=takeovers,
        borrow_requests=tuple(sorted(borrows, key=lambda b: (b.requested_at, b.id))),
        audit_head=None if audit_head is None else decode(audit_head, tuple[int, str]),
        turns=turns,
        browser_identity=None if identity is None else decode(identity, str),
    )


async def saved_document(store: Store, keeper_id: str) -> dict[str, Any] | None:
    """What ``keeper_id`` saved, in the document shape (rows, or a document from before
    rows), unverified: for readers that show it (the CLI, the console)."""
    saved = await store.load_keeper_rows(keeper_id)
    if saved is not None:
        return document_of(
            saved.head,
            {k: {f: v for f, v in body.items() if f != _MAC} for k, body in saved.rows.items()},
        )
    return await store.load_keeper_state(keeper_id)
