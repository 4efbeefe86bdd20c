"""The keeper's saved document format: a document written by an earlier version still loads."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from session_keeper._keeper.state.saved import from_document
from session_keeper.errors import StoreCorrupt
from session_keeper.security import Keyring
from tests.keeper._documents import to_document

FIXTURES = Path(__file__).parent / "fixtures"
KEYRING = Keyring({"k1": bytes(range(32))})


def _load(name: str) -> dict[str, Any]:
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


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d["lost_logins"][0].pop("cause"),
        lambda d: d["lost_logins"][0].__setitem__("kind", "cookie"),
        lambda d: d["tabs"][0].pop("last_url"),
        lambda d: d.__setitem__("generation", True),
        lambda d: d["tabs"][0].__setitem__("verified_at", "2026-01-01T00:00:00"),
    ],
    ids=["missing-key", "unknown-loss-kind", "missing-url", "bool-as-int", "naive-time"],
)
def test_a_malformed_document_is_refused_as_corrupt_not_half_read(
    damage: Callable[[dict[str, Any]], object],
) -> None:
    """A key every version-1 document writes, missing or of the wrong type, is StoreCorrupt."""
    doc = _load("keeper_state_v1.json")
    damage(doc)
    with pytest.raises(StoreCorrupt):
        from_document(doc)


def test_a_tabs_target_id_and_the_browser_identity_round_trip_and_old_documents_lack_them() -> None:
    """Re-binding data (target ids, browser identity) is saved and read back; v1 loads without."""
    import attrs

    doc = _load("keeper_state_v1.json")
    state = from_document(doc)
    assert state.browser_identity is None
    assert all(t.target_id is None for t in state.tabs)
    assert "browser_identity" not in to_document(state)
    tabs = tuple(attrs.evolve(t, target_id=f"T{i}") for i, t in enumerate(state.tabs))
    rebindable = attrs.evolve(state, tabs=tabs, browser_identity="ab" * 32)
    saved = to_document(rebindable)
    assert saved["browser_identity"] == "ab" * 32
    assert [t["target_id"] for t in saved["tabs"]] == [f"T{i}" for i in range(len(tabs))]  # type: ignore[attr-defined]
    assert from_document(json.loads(json.dumps(saved))) == rebindable


def test_a_fingerprints_host_only_and_secure_survive_a_save_and_older_ones_read_wide() -> None:
    """host_only/secure are saved when set; a record saved before them reads as a domain cookie."""
    import attrs

    doc = _load("keeper_state_v1.json")
    state = from_document(doc)
    old = state.logins[0].cookies[0]
    assert (old.host_only, old.secure) == (False, False)
    narrow = attrs.evolve(old, host_only=True, secure=True)
    login = attrs.evolve(state.logins[0], cookies=(narrow,))
    resaved = to_document(attrs.evolve(state, logins=(login, *state.logins[1:])))
    assert json.dumps(resaved).count('"host_only": true') == 1
    assert from_document(resaved).logins[0].cookies[0] == narrow
