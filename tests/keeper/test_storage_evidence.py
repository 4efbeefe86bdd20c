"""Web-storage login evidence as pure rules: what counts, what a restart kept, how it is saved."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import pytest

from session_keeper import LoginSettings
from session_keeper._keeper.state.saved import from_document
from session_keeper._model.facts import LoginRecord
from session_keeper._model.fingerprint import Fingerprinter
from session_keeper._model.storage import (
    StorageItem,
    classify_storage,
    origins_on_site,
    storage_evidence,
    storage_snapshot,
)
from session_keeper.errors import InvalidArgument, InvalidArgumentType, StoreCorrupt
from tests.keeper._documents import to_document

FP = Fingerprinter(bytes(range(32)))
ORIGIN = "https://spa.example"
FIXTURES = Path(__file__).parent / "fixtures"


def item(key: str, value: str, area: Any = "local", origin: str = ORIGIN) -> Any:
    """The fingerprint of one storage item."""
    return FP.storage_fingerprint(StorageItem(origin=origin, area=area, key=key, value=value))


def test_only_items_that_appeared_or_changed_in_the_window_are_evidence() -> None:
    """An item there before the sign-in and unchanged proves nothing; a new or changed one does."""
    before = storage_snapshot([item("theme", "dark"), item("token", "old")])
    now = [item("theme", "dark"), item("token", "new"), item("user", "alice")]
    assert [i.key for i in storage_evidence(before, now, None)] == ["token", "user"]


def test_named_storage_keys_are_the_only_evidence() -> None:
    """With the site's keys named, an analytics item that appeared is not the login."""
    now = [item("analytics_id", "x1"), item("token", "t1")]
    assert [i.key for i in storage_evidence({}, now, frozenset({"token"}))] == ["token"]


def test_without_a_sign_in_window_only_named_keys_count() -> None:
    """No baseline: nothing is known to have changed, so only configured keys are evidence."""
    now = [item("token", "t1"), item("theme", "dark")]
    assert storage_evidence(None, now, None) == ()
    assert [i.key for i in storage_evidence(None, now, frozenset({"token"}))] == ["token"]


def test_a_restart_that_kept_the_token_is_survival_and_one_that_changed_it_a_replacement() -> None:
    """Same digest: survived; gone: lost; another value: replaced (the probe may overturn it)."""
    recorded = [item("token", "t1")]
    assert classify_storage(recorded, storage_snapshot([item("token", "t1")])) == "survived"
    assert classify_storage(recorded, {}) == "lost"
    assert classify_storage(recorded, storage_snapshot([item("token", "t2")])) == "replaced"
    # sessionStorage is never read after a restart: a token there is lost.
    assert classify_storage([item("token", "t1", "session")], {}) == "lost"


def test_a_token_kept_beside_app_state_that_moved_on_is_survival() -> None:
    """A sessionStorage item beside a localStorage one is not judged after a restart, and an
    item rewritten beside one kept is app churn: survived. Every durable item with another
    value is still a replacement, and one gone a loss."""
    recorded = [item("token", "t1"), item("last_seen", "1"), item("txn", "a", "session")]
    churned = storage_snapshot([item("token", "t1"), item("last_seen", "2")])
    assert classify_storage(recorded, churned) == "survived"
    switched = storage_snapshot([item("token", "t2"), item("last_seen", "2")])
    assert classify_storage(recorded, switched) == "replaced"
    assert classify_storage(recorded, storage_snapshot([item("last_seen", "1")])) == "lost"


def test_origins_on_a_site_are_its_own_and_its_subdomains_web_origins() -> None:
    """about:blank, data: and other sites' pages have no storage of the site."""
    urls = [
        "about:blank",
        "data:text/html,x",
        "http://spa.example:8080/app?token=x",
        "https://api.spa.example/v1",
        "https://notspa.example/",
    ]
    assert origins_on_site(urls, "spa.example") == (
        "http://spa.example:8080",
        "https://api.spa.example",
    )


def test_storage_keys_are_validated_like_session_cookies() -> None:
    """A bare string or an empty list is refused with a typed error naming storage_keys."""
    with pytest.raises(InvalidArgumentType, match="storage_keys"):
        LoginSettings(storage_keys={"spa.example": "token"})
    with pytest.raises(InvalidArgument, match="storage key"):
        LoginSettings(storage_keys={"spa.example": []})
    assert LoginSettings(storage_keys={"spa.example": ["token"]}).storage_keys


def _document() -> dict[str, Any]:
    doc = json.loads((FIXTURES / "keeper_state_v1.json").read_text())
    assert isinstance(doc, dict)
    return doc


def test_a_storage_login_is_saved_and_loaded_with_fingerprints_only() -> None:
    """The record's storage items round-trip through the saved document; no value is in it,
    and a document of a login without storage items is written exactly as before."""
    state = from_document(_document())
    token = item("spa_token", "canary-token-value-0123456789")
    record = LoginRecord(
        site="spa.example",
        owner="a",
        recorded_at=datetime(2026, 3, 29, tzinfo=UTC),
        generation=2,
        cookies=(),
        storage=(token,),
    )
    saved = to_document(attrs.evolve(state, logins=(*state.logins, record)))
    assert "canary-token-value" not in json.dumps(saved)
    assert from_document(saved).logins[-1] == record
    assert to_document(state) == _document()


def test_a_storage_item_of_an_unknown_area_is_a_corrupt_store() -> None:
    """A saved item naming another area than local or session is refused, not trusted."""
    state = from_document(_document())
    record = LoginRecord(
        site="spa.example",
        owner="a",
        recorded_at=datetime(2026, 3, 29, tzinfo=UTC),
        generation=2,
        cookies=(),
        storage=(item("spa_token", "v"),),
    )
    saved = to_document(attrs.evolve(state, logins=(record,)))
    bad = copy.deepcopy(saved)
    logins = bad["logins"]
    assert isinstance(logins, list)
    logins[0]["storage"][0]["area"] = "indexeddb-ish"
    with pytest.raises(StoreCorrupt):
        from_document(bad)
