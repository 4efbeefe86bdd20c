"""The keeper's durable state and its codec: what survives our own process.

The keeper saves its state as rows (:mod:`session_keeper._keeper.saving.sealed_rows`) and
reads each row straight back into its value with this module's codec (:func:`encode`,
:func:`decode`). A version-1 document, saved before rows, is only read
(:func:`from_document`): the first save converts it to rows, a one-way upgrade.
It holds fingerprints and names only — never a cookie value. A new process reads it back,
so generation numbers continue, the previous browser's ledger and tab URLs are known, and
every conversation is told what our process's death took from it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
from cattrs import Converter
from cattrs.errors import CattrsError
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from session_keeper._model.borrows import BorrowRequest
from session_keeper._model.facts import CookieFingerprint, LoginRecord, Lost, TurnFacts
from session_keeper._model.grants import Grant
from session_keeper._model.storage import StorageFingerprint
from session_keeper._util.redact import redact_url
from session_keeper.errors import KeyringError, SchemaVersionError, SealBroken, StoreCorrupt

if TYPE_CHECKING:
    from session_keeper._security.keyring import Keyring

T = TypeVar("T")

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
    #: The browser's id for the tab's page (a CDP target id), when the backend has one:
    #: a new process re-adopts the still-open page by it (re-binding).
    target_id: str | None = None


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
    renewed: tuple[str, ...] = ()


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
    #: A digest naming the live browser (never a cookie value), saved while it runs
    #: and its backend can name it: a new process re-binds to it if it is still there.
    browser_identity: str | None = None


def _dt(value: datetime) -> str:
    # Every persisted instant is written in UTC: an offset of a local zone cannot tell
    # the two occurrences of a repeated (DST fold) hour apart once read back.
    return value.astimezone(UTC).isoformat()


def _when(value: Any, _: object = None) -> datetime:
    parsed = datetime.fromisoformat(str(value))
    if parsed.tzinfo is None:
        raise ValueError("naive timestamp")
    return parsed.astimezone(UTC)


def _int(value: Any, _: object = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("expected an int")
    return value


def _str(value: Any, _: object = None) -> str:
    if not isinstance(value, str):
        raise TypeError("expected a str")
    return value


def _saved_grant_doc(s: SavedGrant) -> dict[str, Any]:
    # Flat in the document: the grant's fields beside what is left of its uses.
    return {
        "conversation": s.grant.conversation,
        "site": s.grant.site,
        "actions": sorted(s.grant.actions),
        "expires_at": _dt(s.grant.expires_at) if s.grant.expires_at is not None else None,
        "uses": s.grant.uses,
        "uses_left": s.uses_left,
        "approved_by": s.grant.approved_by,
    }


def _saved_grant(g: Any, _: object) -> SavedGrant:
    expires_at = g["expires_at"]
    approved_by = g["approved_by"]
    return SavedGrant(
        grant=Grant(
            g["conversation"],
            g["site"],
            actions=frozenset(g["actions"]),
            expires_at=None if expires_at is None else _when(expires_at),
            uses=g["uses"],
            approved_by=None if approved_by is None else _str(approved_by),
        ),
        uses_left=None if g["uses_left"] is None else _int(g["uses_left"]),
    )


def _require_every_key(conv: Converter, cls: type[Any], optional: tuple[str, ...] = ()) -> None:
    """Structure ``cls`` only from a dict carrying every field (a field's default is no excuse).

    Version-1 documents always wrote every key but the ``optional`` ones, added later.
    """
    build = make_dict_structure_fn(cls, conv)
    required = [f.name for f in attrs.fields(cls) if f.name not in optional]

    def structure(value: Any, type_: Any) -> Any:
        for name in required:
            value[name]
        return build(value, type_)

    conv.register_structure_hook(cls, structure)


def _make_converter() -> Converter:
    """The one codec between :class:`KeeperState` and its JSON document (see the module)."""
    conv = Converter(
        detailed_validation=False,
        # JSON has lists: tuples are written as lists, so a document re-saves identically.
        unstruct_collection_overrides={Sequence: list, tuple: list},
    )
    conv.register_unstructure_hook(datetime, _dt)
    conv.register_structure_hook(datetime, _when)
    conv.register_structure_hook(int, _int)
    # bool is an int subclass: without its own hook it would meet _int's refusal.
    conv.register_structure_hook(bool, lambda value, _: bool(value))
    conv.register_structure_hook(str, _str)
    # A URL may carry a token: it is redacted before it is stored.
    conv.register_unstructure_hook(
        Lost, make_dict_unstructure_fn(Lost, conv, last_url=override(unstruct_hook=redact_url))
    )
    conv.register_unstructure_hook(
        SavedTab,
        make_dict_unstructure_fn(
            SavedTab,
            conv,
            last_url=override(unstruct_hook=redact_url),
            # Absent without one, as documents before re-binding were written.
            target_id=override(omit_if_default=True),
        ),
    )
    for cls in (Lost, GenerationRecord, StorageFingerprint):
        _require_every_key(conv, cls)
    # Storage evidence came later: a login without it is written as before.
    _require_every_key(conv, LoginRecord, optional=("storage",))
    _require_every_key(conv, SavedTab, optional=("target_id",))
    # host_only and secure came later: an older document lacks them (the wider reach),
    # and a document without them is written back without them.
    _require_every_key(conv, CookieFingerprint, optional=("host_only", "secure"))
    conv.register_unstructure_hook(
        CookieFingerprint,
        make_dict_unstructure_fn(
            CookieFingerprint,
            conv,
            host_only=override(omit_if_default=True),
            secure=override(omit_if_default=True),
        ),
    )
    # After CookieFingerprint's hook: the generated function uses the hooks known now.
    conv.register_unstructure_hook(
        LoginRecord,
        make_dict_unstructure_fn(LoginRecord, conv, storage=override(omit_if_default=True)),
    )
    _require_every_key(conv, SavedPending, optional=("restored", "renewed"))
    # Written only when there is one: a document without renewals re-saves identically.
    conv.register_unstructure_hook(
        SavedPending,
        make_dict_unstructure_fn(SavedPending, conv, renewed=override(omit_if_default=True)),
    )
    conv.register_unstructure_hook(SavedGrant, _saved_grant_doc)
    conv.register_structure_hook(SavedGrant, _saved_grant)
    conv.register_unstructure_hook(
        SavedTurn, lambda t: {"turn": t.turn, "facts": t.facts.to_dict()}
    )
    conv.register_structure_hook(
        SavedTurn,
        lambda d, _: SavedTurn(turn=_str(d["turn"]), facts=TurnFacts.from_dict(d["facts"])),
    )
    conv.register_unstructure_hook(BorrowRequest, BorrowRequest.to_dict)
    conv.register_structure_hook(BorrowRequest, lambda d, _: BorrowRequest.from_dict(d))
    return conv


_CODEC = _make_converter()


def _digest(doc: Mapping[str, object]) -> str:
    body = {k: v for k, v in doc.items() if k != DOCUMENT_SEAL}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _check_seal(doc: Mapping[str, object], keyring: Keyring | None) -> None:
    check_seal(doc, keyring, seal_key=DOCUMENT_SEAL, purpose=_DOC_PURPOSE, digest=_digest(doc))


def check_seal(
    sealed: Mapping[str, object],
    keyring: Keyring | None,
    *,
    seal_key: str,
    purpose: str,
    digest: str,
) -> None:
    """Refuse saved state whose seal (at ``seal_key``) does not open to ``digest``.

    Without a keyring, sealed state raises :class:`KeyringError`; with one, unsealed or
    changed state raises :class:`SealBroken`. Used for the document and for the rows' head.
    """
    seal = sealed.get(seal_key)
    if keyring is None:
        if seal is not None or sealed.get(ACCOUNT_SEALING) is not None:
            raise KeyringError(
                "the keeper's saved state is sealed; pass the keyring that sealed it "
                "(SessionKeeper(keyring=...))"
            )
        return
    if not isinstance(seal, str):
        # With a keyring all saved state is sealed: unsealed state was written (or
        # stripped) by someone without the key.
        raise SealBroken("the keeper's saved state carries no seal; refusing to trust it")
    if keyring.open_text(seal, purpose=purpose) != digest:
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
    return parse_document(doc, keyring)


def encode(value: object) -> Any:
    """One saved value (a tab, a login, a grant...) as the document writes it (JSON)."""
    return _CODEC.unstructure(value)


def decode(value: Any, cls: type[T]) -> T:
    """One saved value of ``cls`` read back from its JSON (what :func:`encode` wrote).

    Raises what the codec raises on a malformed value (``KeyError``, ``TypeError``,
    ``ValueError``, ``CattrsError``); the caller turns it into :class:`StoreCorrupt`.
    """
    return _CODEC.structure(value, cls)


def decode_login(body: Mapping[str, Any], keyring: Keyring | None, sealed: bool) -> LoginRecord:
    """A login row read back, its account opened (sealed when the head says so)."""
    account = _open_account(keyring, sealed, str(body["site"]), body["account"])
    return decode({**body, "account": account}, LoginRecord)


#: What reading saved state raises on a malformed value (turned into StoreCorrupt).
MALFORMED: tuple[type[Exception], ...] = (
    KeyError,
    TypeError,
    ValueError,
    AttributeError,
    CattrsError,  # a value outside a Literal
)


def parse_document(doc: Mapping[str, object], keyring: Keyring | None) -> KeeperState:
    """The state a document shape describes, its seal already checked (rows compose one).

    Raises :class:`StoreCorrupt` when it is malformed.
    """
    try:
        return _parse(doc, keyring)
    except MALFORMED as exc:
        raise StoreCorrupt(f"keeper state document is malformed: {type(exc).__name__}") from None


def _parse(doc: Mapping[str, Any], keyring: Keyring | None) -> KeeperState:
    sealed = doc.get(ACCOUNT_SEALING) is not None
    body = {k: v for k, v in doc.items() if k not in ("version", DOCUMENT_SEAL, ACCOUNT_SEALING)}
    body["logins"] = [
        {**r, "account": _open_account(keyring, sealed, str(r["site"]), r["account"])}
        for r in doc["logins"]
    ]
    for key in ("generation", "generations", "lost_logins", "tabs", "grants", "pending", "seen"):
        body[key]
    state: KeeperState = _CODEC.structure(body, KeeperState)
    return state
