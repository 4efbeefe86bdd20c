"""Writing a version-1 keeper document, as keepers before saved rows did.

The package only reads such documents (a one-way upgrade into rows); the tests write
them to check that what an earlier version saved still loads.
"""

from __future__ import annotations

from typing import Any

from session_keeper._keeper.state.saved import (
    _DOC_PURPOSE,
    ACCOUNT_SEALING,
    DOCUMENT_SEAL,
    KEEPER_STATE_VERSION,
    KeeperState,
    _digest,
    encode,
)
from session_keeper.security import Keyring


def to_document(state: KeeperState, keyring: Keyring | None = None) -> dict[str, object]:
    """The version-1 JSON document for ``state``, as an earlier keeper wrote it.

    With ``keyring``, each login's ``account`` is sealed (bound to its site) and the
    whole document is sealed.
    """
    body: dict[str, Any] = encode(state)
    for login in body["logins"]:
        if keyring is not None and login["account"] is not None:
            login["account"] = keyring.seal(
                login["account"], purpose=f"login.account:{login['site']}"
            )
    if state.audit_head is None:
        del body["audit_head"]  # absent, as documents before the audit head were
    if not state.turns:
        del body["turns"]  # absent when no conversation is in a named turn
    if state.browser_identity is None:
        del body["browser_identity"]  # absent when no browser can be re-bound to
    doc: dict[str, object] = {"version": KEEPER_STATE_VERSION, **body}
    if keyring is not None:
        doc[ACCOUNT_SEALING] = "sk1"
        doc[DOCUMENT_SEAL] = keyring.seal(_digest(doc), purpose=_DOC_PURPOSE)
    return doc
