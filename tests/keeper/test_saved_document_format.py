"""The keeper's saved document format: a document written by an earlier version still loads."""

from __future__ import annotations

import json
from pathlib import Path

from session_keeper import Keyring
from session_keeper._keeper_state import from_document, to_document

FIXTURES = Path(__file__).parent / "fixtures"
KEYRING = Keyring({"k1": bytes(range(32))})


def _load(name: str) -> dict[str, object]:
    doc = json.loads((FIXTURES / name).read_text())
    assert isinstance(doc, dict)
    return doc


def test_a_document_saved_by_the_previous_codec_loads_and_saves_back_identically() -> None:
    """The codec reads a version-1 document written before cattrs and writes the same JSON."""
    doc = _load("keeper_state_v1.json")
    state = from_document(doc)
    assert state.generation == 2
    assert [r.site for r in state.logins] == ["billing.example", "wiki.example"]
    assert state.pending["b"].restored == ("vault.example",)
    assert state.audit_head == (17, "f0" * 32)
    assert to_document(state) == doc


def test_a_sealed_document_saved_by_the_previous_codec_loads_with_its_keyring() -> None:
    """A sealed version-1 document opens with its keyring into the same state as the plain one."""
    sealed = from_document(_load("keeper_state_v1_sealed.json"), KEYRING)
    assert sealed == from_document(_load("keeper_state_v1.json"))
    assert sealed.logins[0].account == "alice@billing.example"
    resaved = to_document(sealed, KEYRING)
    assert from_document(resaved, KEYRING) == sealed
