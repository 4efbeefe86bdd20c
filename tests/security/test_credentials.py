"""Credential sources and TOTP codes: sealed at rest, typed errors, codes never typed late."""

from __future__ import annotations

import hashlib
import traceback
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyotp
import pytest
from keyring.backend import KeyringBackend

from session_keeper._security.credentials import TotpCodes
from session_keeper.errors import CredentialMissing, InvalidArgument, SealBroken, UnknownKey
from session_keeper.security import (
    CredentialSource,
    EnvCredentials,
    Keyring,
    OsKeyringCredentials,
    SealedCredentials,
    Secret,
    TotpSecret,
    totp_code,
)
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeClock

SECRET = "KRUGKIDTMVRXEZLUEBUXGIDTMVQWYZLE"
CANARY = "canary-pw-0b9e2f71c4"


def read_files(directory: Path) -> bytes:
    """The SQLite file and its WAL, as bytes."""
    return b"".join(p.read_bytes() for p in directory.glob("k.db*"))


class MemoryKeyring(KeyringBackend):
    """A keyring backend in memory: the OS keyring is never touched by the tests."""

    priority = 1

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.values: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.values.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.values[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.values.pop((service, username), None)


async def test_every_source_answers_a_secret_or_credential_missing(tmp_path: Path) -> None:
    """The contract over the three sources: the value as a Secret that hides itself;
    CredentialMissing (a LookupError) naming site and field for what is not held."""
    backend = MemoryKeyring()
    backend.set_password("session-keeper", "totp.example:password", CANARY)
    async with SqliteStore(str(tmp_path / "k.db")) as store:
        vault = SealedCredentials(store, Keyring.generate())
        await vault.set("totp.example", "password", CANARY)
        sources: list[CredentialSource] = [
            vault,
            EnvCredentials(environ={"SESSION_KEEPER_CRED_TOTP_EXAMPLE_PASSWORD": CANARY}),
            OsKeyringCredentials(backend=backend),
        ]
        for source in sources:
            assert isinstance(source, CredentialSource)
            value = await source.get("totp.example", "password")
            assert value.reveal() == CANARY
            assert CANARY not in repr(value) and CANARY not in str(value)
            with pytest.raises(CredentialMissing, match=r"'username'.*totp\.example") as err:
                await source.get("totp.example", "username")
            assert isinstance(err.value, LookupError)
            assert CANARY not in str(err.value)


async def test_the_vault_holds_ciphertext_only_and_survives_a_key_rotation(tmp_path: Path) -> None:
    """The SQLite file never holds the value; a rotated keyring opens old seals, reseal()
    moves them to the new key, after which the old key can go."""
    db = tmp_path / "k.db"
    old = Keyring.generate("k1")
    async with SqliteStore(str(db)) as store:
        await SealedCredentials(store, old).set("totp.example", "password", CANARY)
        rotated = old.rotated("k2")
        vault = SealedCredentials(store, rotated)
        assert (await vault.get("totp.example", "password")).reveal() == CANARY
        assert await vault.reseal() == 1
        assert await vault.reseal() == 0
        only_new = SealedCredentials(store, rotated.without("k1"))
        assert (await only_new.get("totp.example", "password")).reveal() == CANARY
        with pytest.raises(UnknownKey):
            await SealedCredentials(store, old).get("totp.example", "password")
    assert CANARY.encode() not in read_files(tmp_path)


async def test_a_value_moved_to_another_field_or_altered_is_seal_broken(tmp_path: Path) -> None:
    """A seal is bound to its site and field: a copy under another field, or a flipped
    byte, raises SealBroken and yields nothing."""
    async with SqliteStore(str(tmp_path / "k.db")) as store:
        vault = SealedCredentials(store, Keyring.generate())
        await vault.set("totp.example", "password", CANARY)
        await vault.set("totp.example", "username", "alice")
        doc_id = "session-keeper-credentials:default"
        doc = await store.load_keeper_state(doc_id)
        assert doc is not None
        fields = doc["sites"]["totp.example"]  # type: ignore[index]
        fields["username"] = fields["password"]
        await store.save_keeper_state(doc_id, doc)
        with pytest.raises(SealBroken):
            await vault.get("totp.example", "username")
        sealed = fields["password"]
        fields["password"] = sealed[:-3] + ("x" if sealed[-3] != "x" else "y") + sealed[-2:]
        await store.save_keeper_state(doc_id, doc)
        with pytest.raises(SealBroken) as err:
            await vault.get("totp.example", "password")
        assert CANARY not in str(err.value)


async def test_a_totp_code_about_to_expire_is_not_typed_the_next_one_is() -> None:
    """Two seconds before the window ends (margin 5 s): the code waits for the next window
    (FakeClock moved by the wait) and is that window's code, which the site accepts."""
    window_end = datetime(2026, 10, 13, 9, 0, 30, tzinfo=UTC)
    clock = FakeClock(window_end - timedelta(seconds=2))

    code = await totp_code(Secret(SECRET), clock, margin_s=5)
    assert clock.elapsed == timedelta(seconds=2)  # waited on the clock it reads
    assert code.reveal() == pyotp.TOTP(SECRET).at(window_end)
    assert code.reveal() != pyotp.TOTP(SECRET).at(window_end - timedelta(seconds=2))
    assert pyotp.TOTP(SECRET).verify(code.reveal(), for_time=clock.now(), valid_window=0)


async def test_a_totp_code_with_time_left_is_typed_at_once() -> None:
    """Six seconds left (margin 5 s): no wait, the current window's code."""
    now = datetime(2026, 10, 13, 9, 0, 24, tzinfo=UTC)
    clock = FakeClock(now)

    code = await totp_code(Secret(SECRET), clock, margin_s=5)
    assert code.reveal() == pyotp.TOTP(SECRET).at(now)
    assert clock.elapsed == timedelta(0)  # no wait


async def test_a_totp_code_is_the_next_windows_even_when_the_clock_did_not_move() -> None:
    """A clock nobody moves during the wait: still the next window's code, never the
    one that was about to expire."""
    window_end = datetime(2026, 10, 13, 9, 1, 0, tzinfo=UTC)
    clock = FakeClock(window_end - timedelta(seconds=1))

    async def sleep(seconds: float) -> None:
        return None

    code = await totp_code(Secret(SECRET), clock, sleep=sleep)
    assert code.reveal() == pyotp.TOTP(SECRET).at(window_end)


async def test_one_renewal_never_gets_two_codes_of_one_window() -> None:
    """A second code asked in the window of the first waits for the next window and is
    that window's; one asked in a later window comes at once."""
    start = datetime(2026, 10, 13, 9, 0, 10, tzinfo=UTC)  # 20 s left in its window
    clock = FakeClock(start)

    codes = TotpCodes(clock, margin_s=5)
    assert codes.wait_s() == 0
    first = await codes.code(Secret(SECRET))
    assert (first.reveal(), clock.elapsed) == (pyotp.TOTP(SECRET).at(start), timedelta(0))
    assert codes.wait_s() == pytest.approx(20.0)
    clock.advance(3)  # the site refused it; the next attempt asks in the same window
    second = await codes.code(Secret(SECRET))
    assert clock.elapsed == timedelta(seconds=20)  # 17 s waited on the clock
    assert second.reveal() == pyotp.TOTP(SECRET).at(start + timedelta(seconds=20))
    assert second.reveal() != first.reveal()
    clock.advance(31)
    third = await codes.code(Secret(SECRET))
    assert clock.elapsed == timedelta(seconds=51)  # a window not used yet: no wait
    assert third.reveal() == pyotp.TOTP(SECRET).at(clock.now())


#: An authenticator's URI for SECRET on 60 s windows, 8 digits, SHA-256.
URI_60 = (
    f"otpauth://totp/totp.example:alice?secret={SECRET}&issuer=totp.example"
    "&period=60&digits=8&algorithm=SHA256"
)


def authenticator_60() -> pyotp.TOTP:
    """What the authenticator app that scanned URI_60 shows."""
    return pyotp.TOTP(SECRET, interval=60, digits=8, digest=hashlib.sha256)


async def test_a_totp_secret_with_a_non_30_s_period_is_honoured() -> None:
    """An otpauth URI with period=60, digits=8, SHA256: the code is that window's
    (28 s into a 60 s window: no wait, though a 30 s window would be 2 s from its end),
    a code 2 s before the 60 s window's end waits for the next one, and a renewal's second
    code waits for the next 60 s window, not the next 30 s one."""
    into = datetime(2026, 10, 13, 9, 0, 28, tzinfo=UTC)  # 28 s into a 60 s window
    clock = FakeClock(into)

    code = await totp_code(Secret(URI_60), clock)
    assert (code.reveal(), clock.elapsed) == (authenticator_60().at(into), timedelta(0))
    assert len(code.reveal()) == 8
    clock.advance(30)  # 2 s before the 60 s window ends
    code = await totp_code(Secret(URI_60), clock)
    assert clock.elapsed == timedelta(seconds=32)  # 2 s waited
    assert code.reveal() == authenticator_60().at(datetime(2026, 10, 13, 9, 1, 0, tzinfo=UTC))
    # One renewal: the second code of the window waits for the next 60 s window.
    clock = FakeClock(datetime(2026, 10, 13, 9, 0, 10, tzinfo=UTC))
    codes = TotpCodes(clock, margin_s=5)
    first = await codes.code(Secret(URI_60))
    assert codes.wait_s() == pytest.approx(50.0)
    second = await codes.code(Secret(URI_60))
    assert clock.elapsed == timedelta(seconds=50)
    assert second.reveal() == authenticator_60().at(clock.now()) != first.reveal()


async def test_a_bare_secret_given_an_explicit_period_is_coded_on_that_period() -> None:
    """A base32 secret with ``interval_s=60`` (or a TotpSecret with period 60): that
    period's codes and windows; the URI a TotpSecret writes reads back the same."""
    into = datetime(2026, 10, 13, 9, 0, 28, tzinfo=UTC)
    clock = FakeClock(into)

    code = await totp_code(Secret(SECRET), clock, interval_s=60)
    assert code.reveal() == pyotp.TOTP(SECRET, interval=60).at(into)
    spec = TotpSecret(secret=Secret(SECRET), period=60, digits=8, algorithm="SHA256")
    assert (await totp_code(spec, clock)).reveal() == authenticator_60().at(into)
    assert clock.elapsed == timedelta(0)  # 32 s left of a 60 s window: no wait
    assert TotpSecret.parse(spec.uri()) == spec
    assert TotpSecret.parse(Secret(URI_60)) == spec
    assert TotpSecret.parse(Secret(SECRET)) == TotpSecret(secret=Secret(SECRET))  # 30, 6, SHA1
    assert SECRET not in repr(spec)


async def test_the_margin_is_capped_at_half_a_short_period() -> None:
    """A 6 s window, the default 5 s margin: a code with 4 s left is typed at once (the
    margin is 3 s there), one with 2 s left waits for the next window."""
    uri = f"otpauth://totp/x?secret={SECRET}&period=6"
    start = datetime(2026, 10, 13, 9, 0, 2, tzinfo=UTC)  # 4 s left of a 6 s window
    clock = FakeClock(start)

    code = await totp_code(Secret(uri), clock)
    assert code.reveal() == pyotp.TOTP(SECRET, interval=6).at(start)
    assert clock.elapsed == timedelta(0)
    clock.advance(2)  # 2 s left
    code = await totp_code(Secret(uri), clock)
    assert clock.elapsed == timedelta(seconds=4)  # 2 s waited
    assert code.reveal() == pyotp.TOTP(SECRET, interval=6).at(clock.now())


@pytest.mark.parametrize(
    "value",
    [
        f"otpauth://totp/x?secret={SECRET}&period=0",
        f"otpauth://totp/x?secret={SECRET}&period=-30",
        f"otpauth://totp/x?secret={SECRET}&period=thirty",
        f"otpauth://totp/x?secret={SECRET}&period=30&period=60",
        f"otpauth://totp/x?secret={SECRET}&digits=5",
        f"otpauth://totp/x?secret={SECRET}&algorithm=MD5",
        f"otpauth://hotp/x?secret={SECRET}&counter=1",
        f"otpauth://totp/x?{SECRET}",
        "otpauth://totp/x?issuer=totp.example",
        f"otpauth://totp/x?secret={SECRET}-not-base32",
        f"{SECRET}-not-base32",
    ],
)
async def test_a_bad_totp_uri_or_parameter_is_invalid_argument_without_the_secret(
    value: str,
) -> None:
    """Each malformed URI or bad period, digits or algorithm raises InvalidArgument, whose
    message and traceback text hold neither the secret nor the URI, and no code is made."""
    clock = FakeClock(datetime(2026, 10, 13, 9, 0, 10, tzinfo=UTC))

    with pytest.raises(InvalidArgument) as err:
        await totp_code(Secret(value), clock)
    said = "".join(traceback.format_exception(err.value))
    assert SECRET not in said and value not in said
    codes = TotpCodes(clock)
    with pytest.raises(InvalidArgument):
        await codes.code(Secret(value))
    assert codes.wait_s() == 0  # nothing remembered
    assert clock.elapsed == timedelta(0)  # and nothing waited for


@pytest.mark.parametrize(
    "fields",
    [{"period": 0}, {"period": -1}, {"period": 1.5}, {"digits": 4}, {"algorithm": "MD5"}],
)
def test_a_totp_secret_with_a_bad_parameter_is_invalid_argument(fields: dict[str, Any]) -> None:
    """TotpSecret refuses a period at or below 0 (or not whole), digits outside 6-10 and
    an unknown algorithm, with a message that does not hold the secret."""
    with pytest.raises(InvalidArgument) as err:
        TotpSecret(secret=Secret(SECRET), **fields)
    assert SECRET not in str(err.value)


async def test_an_otpauth_uri_in_the_vault_is_ciphertext_only(tmp_path: Path) -> None:
    """The URI form of a TOTP secret is sealed like any value: neither the URI nor the
    secret in it is in the SQLite file, and it reads back whole."""
    async with SqliteStore(str(tmp_path / "k.db")) as store:
        vault = SealedCredentials(store, Keyring.generate())
        await vault.set("totp.example", "totp", URI_60)
        value = await vault.get("totp.example", "totp")
        assert value.reveal() == URI_60 and URI_60 not in repr(value)
    files = read_files(tmp_path)
    assert files  # the scan is not hollow
    assert SECRET.encode() not in files and b"otpauth" not in files
