"""The keeper's saved document seals account identities; bad keys change nothing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from session_keeper import Durability, Grant, LoginSettings, SessionKeeper
from session_keeper.errors import KeyringError, SealBroken, UnknownKey
from session_keeper.security import Keyring
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock, FakePage
from tests.keeper._saved import read_row, stored_rows

KEYS = Keyring([("k1", bytes(range(32)))])
ACCOUNT = "alice-canary-7f3a"


async def save_with_login(db: Path) -> None:
    """A keeper with a keyring records billing's login as ACCOUNT and saves."""
    backend = FakeBackend()
    async with SqliteStore(str(db), clock=FakeClock()) as store:
        keeper = SessionKeeper(
            backend,
            clock=FakeClock(),
            durability=Durability(store=store, keyring=KEYS),
            grants=[Grant("billing", "billing.example"), Grant("billing", "sso.example")],
            login_settings=LoginSettings(fingerprint_key=bytes(32)),
        )
        async with keeper:
            await keeper.ensure("billing")
            await backend.sign_in("billing.example")
            await keeper.record_login("billing", "billing.example", account=ACCOUNT)
            await backend.sign_in("sso.example")
            await keeper.record_login("billing", "sso.example", account="bob")


def read_files(directory: Path, pattern: str) -> bytes:
    """The bytes of every file matching ``pattern`` (a database and its WAL)."""
    return b"".join(p.read_bytes() for p in sorted(directory.glob(pattern)) if p.is_file())


def body(db: Path) -> str:
    """The keeper's saved rows and head, as stored."""
    return json.dumps(stored_rows(db, "default"))


async def reopen(db: Path, keyring: Keyring | None) -> SessionKeeper[FakePage]:
    """Open a new keeper process on the same store and make it load (first ensure)."""
    async with SqliteStore(str(db), clock=FakeClock()) as store:
        keeper: SessionKeeper[FakePage] = SessionKeeper(
            FakeBackend(),
            clock=FakeClock(),
            durability=Durability(store=store, keyring=keyring),
            login_settings=LoginSettings(fingerprint_key=bytes(32)),
        )
        async with keeper:
            await keeper.ensure("billing")
        return keeper


async def test_account_is_sealed_in_the_store_file(tmp_path: Path) -> None:
    """The account identity never appears in the SQLite file; a keyring id does."""
    db = tmp_path / "s.db"
    await save_with_login(db)
    raw = read_files(tmp_path, "s.db*")
    assert ACCOUNT.encode() not in raw
    head = json.loads(json.loads(body(db))[0][0])
    assert head["account_sealing"] == "sk1"
    logins = [read_row(db, "login", site) for site in ("billing.example", "sso.example")]
    assert all(r["account"].startswith("sk1.k1.") for r in logins)


async def test_sealed_account_opens_with_the_keyring(tmp_path: Path) -> None:
    """A new process with the keyring reads the identity back."""
    db = tmp_path / "s.db"
    await save_with_login(db)
    async with SqliteStore(str(db), clock=FakeClock()) as store:
        keeper: SessionKeeper[FakePage] = SessionKeeper(
            FakeBackend(),
            clock=FakeClock(),
            durability=Durability(store=store, keyring=KEYS),
            login_settings=LoginSettings(fingerprint_key=bytes(32)),
        )
        async with keeper:
            accounts = {r.site: r.account for r in keeper.logins()}
    assert accounts == {"billing.example": ACCOUNT, "sso.example": "bob"}


@pytest.mark.parametrize(
    ("keyring", "error"),
    [
        (None, KeyringError),
        (Keyring([("k2", bytes(32))]), UnknownKey),
        (Keyring([("k1", bytes(32))]), SealBroken),
    ],
)
async def test_missing_or_wrong_key_refuses_and_writes_nothing(
    tmp_path: Path, keyring: Keyring | None, error: type[Exception]
) -> None:
    """No keyring, another key id, another key: a typed error and the document is unchanged."""
    db = tmp_path / "s.db"
    await save_with_login(db)
    before = body(db)
    with pytest.raises(error):
        await reopen(db, keyring)
    assert body(db) == before


async def test_account_moved_between_logins_is_refused(tmp_path: Path) -> None:
    """Swapping two sealed accounts in the file is found (the seal is bound to the site)."""
    db = tmp_path / "s.db"
    await save_with_login(db)
    first, second = read_row(db, "login", "billing.example"), read_row(db, "login", "sso.example")
    conn = sqlite3.connect(db)
    for site, row, other in (("billing.example", first, second), ("sso.example", second, first)):
        conn.execute(
            "UPDATE keeper_rows SET body = ? WHERE kind = 'login' AND key = ?",
            (json.dumps({**row, "account": other["account"]}), site),
        )
    conn.commit()
    conn.close()
    tampered = body(db)
    with pytest.raises(SealBroken):
        await reopen(db, KEYS)
    assert body(db) == tampered
