"""The keeper's durable document: what survives our own process.

The keeper saves one JSON document per ``keeper_id`` through the Store
(``save_keeper_state``). It holds fingerprints and names only — never a cookie value.
A new process reads it back, so generation numbers continue, the previous browser's
ledger and tab URLs are known, and every conversation is told what our process's
death took from it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, get_args

import attrs

from session_keeper._borrows import BorrowRequest
from session_keeper._errors import KeyringError, SchemaVersionError, SealBroken, StoreCorrupt
from session_keeper._facts import (
    CookieFingerprint,
    LoginRecord,
    LossCause,
    Lost,
    LostKind,
    TurnFacts,
)
from session_keeper._grants import Grant
from session_keeper._redact import redact_url

if TYPE_CHECKING:
    from session_keeper._secrets import Keyring

#: Version of the document's shape; a document with another version is refused.
KEEPER_STATE_VERSION = 1

#: Key of the AES-GCM seal over the document's digest (present with a keyring).
DOCUMENT_SEAL = "seal"
_DOC_PURPOSE = "keeper.state"

#: Set in a document whose ``logins[*].account`` values are sealed (Keyring format
#: ``sk1``); a reader without the keyring refuses it instead of misreading ciphertext.
ACCOUNT_SEALING = "account_sealing"


def _account_purpose(site: str) -> str:
    # Bound to the site: an identity cut from one login and pasted into another fails.
    return f"login.account:{site}"


def _seal_account(keyring: Keyring | None, site: str, account: str | None) -> str | None:
    if keyring is None or account is None:
        return account
    return keyring.seal(account, purpose=_account_purpose(site))


def _open_account(keyring: Keyring | None, sealed: bool, site: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError("account must be a str")
    if not sealed:
        return value  # written without a keyring; the next save seals it
    if keyring is None:
        raise KeyringError(
            "the keeper's saved state holds sealed account identities; "
            "pass the keyring that sealed them (SessionKeeper(keyring=...))"
        )
    return keyring.open_text(value, purpose=_account_purpose(site))


@attrs.frozen(kw_only=True)
class GenerationRecord:
    """One browser the keeper ran."""

    generation: int
    started_at: datetime
    ended_at: datetime | None = None
    cause: str | None = None


@attrs.frozen(kw_only=True)
class SavedTab:
    """A conversation's tab as remembered across processes: its last verified URL."""

    conversation: str
    last_url: str | None
    verified_at: datetime
    generation: int


@attrs.frozen(kw_only=True)
class SavedGrant:
    """A grant and what is left of it."""

    grant: Grant
    uses_left: int | None


@attrs.frozen(kw_only=True)
class SavedPending:
    """What a conversation had not been told yet."""

    since_generation: int | None
    restarted: bool
    lost: tuple[Lost, ...]
    revalidate: tuple[str, ...]
    restored: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class SavedTurn:
    """The facts a conversation's current turn was told (``ensure(..., turn=...)``)."""

    turn: str
    facts: TurnFacts


@attrs.frozen(kw_only=True)
class KeeperState:
    """Everything the keeper needs to pick up where a previous process stopped."""

    generation: int
    generations: tuple[GenerationRecord, ...]
    logins: tuple[LoginRecord, ...]
    lost_logins: tuple[Lost, ...]
    tabs: tuple[SavedTab, ...]
    grants: tuple[SavedGrant, ...]
    pending: Mapping[str, SavedPending]
    seen: Mapping[str, int]
    #: Open human takeovers: conversation -> until when the browser is not swept.
    takeovers: Mapping[str, datetime] = attrs.field(factory=dict)
    #: Borrow requests, pending and recently answered.
    borrow_requests: tuple[BorrowRequest, ...] = ()
    #: The audit chain's head when this was saved, so a cut-off chain is noticed.
    audit_head: tuple[int, str] | None = None
    #: Each conversation's current turn and the facts it was told: a re-executed turn
    #: (a framework's retry or resume, in this process or the next) is told them again.
    turns: Mapping[str, SavedTurn] = attrs.field(factory=dict)


def _dt(value: datetime | None) -> str | None:
    # Every persisted instant is written in UTC: an offset of a local zone cannot tell
    # the two occurrences of a repeated (DST fold) hour apart once read back.
    return value.astimezone(UTC).isoformat() if value is not None else None


def _lost_doc(x: Lost) -> dict[str, Any]:
    return {
        "kind": x.kind,
        "name": x.name,
        "owner": x.owner,
        "when": _dt(x.when),
        "last_url": redact_url(x.last_url),
        "generation": x.generation,
        "cause": x.cause,
    }


def to_document(state: KeeperState, keyring: Keyring | None = None) -> dict[str, object]:
    """The JSON document for ``state`` (fingerprints and names only).

    With ``keyring``, each login's ``account`` is sealed (AES-GCM, bound to its site).
    """
    doc: dict[str, object] = {
        "version": KEEPER_STATE_VERSION,
        "generation": state.generation,
        "generations": [
            {
                "generation": g.generation,
                "started_at": _dt(g.started_at),
                "ended_at": _dt(g.ended_at),
                "cause": g.cause,
            }
            for g in state.generations
        ],
        "logins": [
            {
                "site": r.site,
                "owner": r.owner,
                "account": _seal_account(keyring, r.site, r.account),
                "recorded_at": _dt(r.recorded_at),
                "generation": r.generation,
                "needs_revalidation": r.needs_revalidation,
                "cookies": [
                    {
                        "name": c.name,
                        "domain": c.domain,
                        "path": c.path,
                        "fingerprint": c.fingerprint,
                        "is_session": c.is_session,
                    }
                    for c in r.cookies
                ],
            }
            for r in state.logins
        ],
        "lost_logins": [_lost_doc(x) for x in state.lost_logins],
        "tabs": [
            {
                "conversation": t.conversation,
                "last_url": redact_url(t.last_url),
                "verified_at": _dt(t.verified_at),
                "generation": t.generation,
            }
            for t in state.tabs
        ],
        "grants": [
            {
                "conversation": s.grant.conversation,
                "site": s.grant.site,
                "actions": sorted(s.grant.actions),
                "expires_at": _dt(s.grant.expires_at),
                "uses": s.grant.uses,
                "uses_left": s.uses_left,
                "approved_by": s.grant.approved_by,
            }
            for s in state.grants
        ],
        "pending": {
            conv: {
                "since_generation": p.since_generation,
                "restarted": p.restarted,
                "lost": [_lost_doc(x) for x in p.lost],
                "revalidate": list(p.revalidate),
                "restored": list(p.restored),
            }
            for conv, p in state.pending.items()
        },
        "seen": dict(state.seen),
        "takeovers": {conv: _dt(until) for conv, until in state.takeovers.items()},
        "borrow_requests": [r.to_dict() for r in state.borrow_requests],
    }
    if state.audit_head is not None:
        doc["audit_head"] = list(state.audit_head)
    if state.turns:
        doc["turns"] = {
            conv: {"turn": t.turn, "facts": t.facts.to_dict()} for conv, t in state.turns.items()
        }
    if keyring is not None:
        doc[ACCOUNT_SEALING] = "sk1"
        # Authenticates the whole document: a grant or a ledger row written into the
        # store by anyone without the key is refused on load.
        doc[DOCUMENT_SEAL] = keyring.seal(_digest(doc), purpose=_DOC_PURPOSE)
    return doc


def _digest(doc: Mapping[str, object]) -> str:
    body = {k: v for k, v in doc.items() if k != DOCUMENT_SEAL}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _check_seal(doc: Mapping[str, object], keyring: Keyring | None) -> None:
    seal = doc.get(DOCUMENT_SEAL)
    if keyring is None:
        if seal is not None or doc.get(ACCOUNT_SEALING) is not None:
            raise KeyringError(
                "the keeper's saved state is sealed; pass the keyring that sealed it "
                "(SessionKeeper(keyring=...))"
            )
        return
    if not isinstance(seal, str):
        # With a keyring every saved document is sealed: an unsealed one was written
        # (or stripped) by someone without the key.
        raise SealBroken("the keeper's saved state carries no seal; refusing to trust it")
    if keyring.open_text(seal, purpose=_DOC_PURPOSE) != _digest(doc):
        raise SealBroken("the keeper's saved state was changed outside the keeper")


def from_document(doc: Mapping[str, object], keyring: Keyring | None = None) -> KeeperState:
    """Read a saved document back; refuse an unknown version or a malformed one.

    Raises :class:`SchemaVersionError` or :class:`StoreCorrupt`; never partially applies.
    """
    version = doc.get("version")
    if version != KEEPER_STATE_VERSION:
        raise SchemaVersionError(
            f"keeper state has version {version!r}; this code reads {KEEPER_STATE_VERSION}"
        )
    _check_seal(doc, keyring)
    try:
        return _parse(doc, keyring)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise StoreCorrupt(f"keeper state document is malformed: {type(exc).__name__}") from None


def _when(value: Any) -> datetime:
    parsed = datetime.fromisoformat(str(value))
    if parsed.tzinfo is None:
        raise ValueError("naive timestamp")
    return parsed.astimezone(UTC)


def _opt_when(value: Any) -> datetime | None:
    return None if value is None else _when(value)


def _opt_str(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise TypeError("expected a str or null")
    return value


def _opt_int(value: Any) -> int | None:
    return None if value is None else _int(value)


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("expected an int")
    return value


def _lost(d: Any) -> Lost:
    if d["kind"] not in get_args(LostKind) or d["cause"] not in get_args(LossCause):
        raise ValueError("unknown loss")
    return Lost(
        kind=d["kind"],
        name=str(d["name"]),
        owner=str(d["owner"]),
        when=_when(d["when"]),
        last_url=_opt_str(d["last_url"]),
        generation=_int(d["generation"]),
        cause=d["cause"],
    )


def _parse(doc: Mapping[str, Any], keyring: Keyring | None) -> KeeperState:
    sealed = doc.get(ACCOUNT_SEALING) is not None
    logins = tuple(
        LoginRecord(
            site=str(r["site"]),
            owner=str(r["owner"]),
            account=_open_account(keyring, sealed, str(r["site"]), r["account"]),
            recorded_at=_when(r["recorded_at"]),
            generation=_int(r["generation"]),
            needs_revalidation=bool(r["needs_revalidation"]),
            cookies=tuple(
                CookieFingerprint(
                    name=str(c["name"]),
                    domain=str(c["domain"]),
                    path=str(c["path"]),
                    fingerprint=str(c["fingerprint"]),
                    is_session=bool(c["is_session"]),
                )
                for c in r["cookies"]
            ),
        )
        for r in doc["logins"]
    )
    grants = tuple(
        SavedGrant(
            grant=Grant(
                g["conversation"],
                g["site"],
                actions=frozenset(g["actions"]),
                expires_at=_opt_when(g["expires_at"]),
                uses=g["uses"],
                approved_by=_opt_str(g["approved_by"]),
            ),
            uses_left=None if g["uses_left"] is None else _int(g["uses_left"]),
        )
        for g in doc["grants"]
    )
    return KeeperState(
        generation=_int(doc["generation"]),
        generations=tuple(
            GenerationRecord(
                generation=_int(g["generation"]),
                started_at=_when(g["started_at"]),
                ended_at=_opt_when(g["ended_at"]),
                cause=_opt_str(g["cause"]),
            )
            for g in doc["generations"]
        ),
        logins=logins,
        lost_logins=tuple(_lost(x) for x in doc["lost_logins"]),
        tabs=tuple(
            SavedTab(
                conversation=str(t["conversation"]),
                last_url=_opt_str(t["last_url"]),
                verified_at=_when(t["verified_at"]),
                generation=_int(t["generation"]),
            )
            for t in doc["tabs"]
        ),
        grants=grants,
        pending={
            str(conv): SavedPending(
                since_generation=_opt_int(p["since_generation"]),
                restarted=bool(p["restarted"]),
                lost=tuple(_lost(x) for x in p["lost"]),
                revalidate=tuple(str(s) for s in p["revalidate"]),
                restored=tuple(str(s) for s in p.get("restored", ())),
            )
            for conv, p in doc["pending"].items()
        },
        seen={str(c): _int(g) for c, g in doc["seen"].items()},
        # Absent in documents written before takeovers were saved.
        takeovers={str(c): _when(t) for c, t in doc.get("takeovers", {}).items()},
        # Absent in documents written before borrow requests existed.
        borrow_requests=tuple(BorrowRequest.from_dict(r) for r in doc.get("borrow_requests", ())),
        audit_head=_audit_head(doc.get("audit_head")),
        # Absent in documents written before turns were saved, and when there are none.
        turns={
            str(conv): SavedTurn(turn=str(t["turn"]), facts=TurnFacts.from_dict(t["facts"]))
            for conv, t in doc.get("turns", {}).items()
        },
    )


def _audit_head(value: Any) -> tuple[int, str] | None:
    if value is None:
        return None
    seq, mac = value
    if not isinstance(mac, str):
        raise TypeError("audit head mac must be a str")
    return _int(seq), mac
