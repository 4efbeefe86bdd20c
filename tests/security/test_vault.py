"""The sealed login vault: restores by policy only, reports 'restored', refuses tampering."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from session_keeper._security.vault import LoginVault
from session_keeper.errors import SealBroken, UnknownKey
from session_keeper.security import Keyring
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock

KEYS = Keyring([("k1", bytes(range(32)))])


def read_files(directory: Path, pattern: str) -> bytes:
    """The bytes of every file matching ``pattern`` (a database and its WAL)."""
    return b"".join(p.read_bytes() for p in sorted(directory.glob(pattern)) if p.is_file())


async def signed_in_backend() -> FakeBackend:
    """A fake browser signed in to billing.example and sso.example."""
    backend = FakeBackend()
    await backend.launch()
    await backend.sign_in("billing.example", name="billing_session", value="billing-secret-1")
    await backend.sign_in("sso.example", name="sso_session", value="sso-secret-1")
    return backend


async def test_restore_only_allowed_sites_after_a_crash(tmp_path: Path) -> None:
    """After a crash the vault puts back sso (allowed) and not billing (not allowed)."""
    backend = await signed_in_backend()
    async with SqliteStore(str(tmp_path / "s.db"), clock=FakeClock()) as store:
        vault = LoginVault(store, KEYS, restore_sites=["sso.example"], clock=FakeClock())
        assert backend.current is not None
        await vault.save(backend.current, "billing.example")
        await vault.save(backend.current, "sso.example")
        await backend.crash()
        session = await backend.launch()
        assert list(await session.cookies()) == []  # the crash took every cookie
        restored = await vault.restore(session)
    assert [(r.site, r.cookie_names, r.how) for r in restored] == [
        ("sso.example", ("sso_session",), "restored")
    ]
    jar = {c.name: c.value for c in await session.cookies()}
    assert jar == {"sso_session": "sso-secret-1"}


async def test_vault_file_holds_no_cookie_value(tmp_path: Path) -> None:
    """The store file holds ciphertext and key ids, never the cookie values."""
    backend = await signed_in_backend()
    db = tmp_path / "s.db"
    async with SqliteStore(str(db), clock=FakeClock()) as store:
        assert backend.current is not None
        await LoginVault(store, KEYS).save(backend.current, "billing.example")
    raw = read_files(tmp_path, "s.db*")
    assert b"billing-secret-1" not in raw and b"sk1.k1." in raw


async def test_tampered_vault_adds_no_cookie(tmp_path: Path) -> None:
    """A sealed entry edited in the file raises SealBroken and the jar stays empty."""
    backend = await signed_in_backend()
    db = tmp_path / "s.db"
    async with SqliteStore(str(db), clock=FakeClock()) as store:
        assert backend.current is not None
        vault = LoginVault(store, KEYS, restore_sites=["billing.example", "sso.example"])
        await vault.save(backend.current, "billing.example")
        await vault.save(backend.current, "sso.example")
    conn = sqlite3.connect(db)
    (body,) = conn.execute(
        "SELECT body FROM keeper_state WHERE keeper_id = 'session-keeper-vault:default'"
    ).fetchone()
    doc = json.loads(body)
    # Paste sso's sealed cookies over billing's: a moved value must not open.
    doc["sites"]["billing.example"]["sealed"] = doc["sites"]["sso.example"]["sealed"]
    conn.execute(
        "UPDATE keeper_state SET body = ? WHERE keeper_id = 'session-keeper-vault:default'",
        (json.dumps(doc),),
    )
    conn.commit()
    conn.close()
    await backend.crash()
    session = await backend.launch()
    async with SqliteStore(str(db), clock=FakeClock()) as store:
        vault = LoginVault(store, KEYS, restore_sites=["billing.example", "sso.example"])
        with pytest.raises(SealBroken):
            await vault.restore(session)
    assert list(await session.cookies()) == []


async def test_missing_key_restores_nothing(tmp_path: Path) -> None:
    """A keyring without the sealing key raises UnknownKey and restores nothing."""
    backend = await signed_in_backend()
    async with SqliteStore(str(tmp_path / "s.db"), clock=FakeClock()) as store:
        assert backend.current is not None
        await LoginVault(store, KEYS).save(backend.current, "sso.example")
        await backend.crash()
        session = await backend.launch()
        other = LoginVault(store, Keyring.generate("k2"), restore_sites=["sso.example"])
        with pytest.raises(UnknownKey):
            await other.restore(session)
    assert list(await session.cookies()) == []
