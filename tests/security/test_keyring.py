"""The keyring: AES-GCM sealing, key ids with the ciphertext, rotation, bad keys."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from session_keeper._security.keyring import KEY_FILE_ENV, KEYS_ENV
from session_keeper.errors import (
    IntegrityError,
    InvalidArgumentType,
    KeyringError,
    SealBroken,
    UnknownKey,
)
from session_keeper.security import Keyring

K1 = bytes(range(32))
K2 = bytes(range(32, 64))


def test_seal_opens_and_hides_the_plaintext() -> None:
    """A sealed value opens to the original and does not contain it."""
    ring = Keyring([("k1", K1)])
    sealed = ring.seal("alice@example.com", purpose="login.account")
    assert "alice" not in sealed and sealed.startswith("sk1.k1.")
    assert ring.open_text(sealed, purpose="login.account") == "alice@example.com"


def test_each_seal_is_fresh() -> None:
    """The same plaintext seals differently every time (random nonce)."""
    ring = Keyring([("k1", K1)])
    assert ring.seal("x", purpose="p") != ring.seal("x", purpose="p")


def test_rotation_new_writes_use_the_newest_key_and_old_data_still_opens() -> None:
    """After adding k2, seals name k2; values sealed under k1 still open until k1 is dropped."""
    old = Keyring([("k1", K1)])
    before = old.seal("alice", purpose="p")
    ring = old.rotated("k2", K2)
    after = ring.seal("alice", purpose="p")
    assert ring.current_id == "k2" and Keyring.key_id_of(after) == "k2"
    assert ring.open_text(before, purpose="p") == "alice"
    assert ring.needs_reseal(before) and not ring.needs_reseal(after)
    resealed = ring.seal(ring.open(before, purpose="p"), purpose="p")
    dropped = ring.without("k1")
    assert dropped.open_text(resealed, purpose="p") == "alice"
    with pytest.raises(UnknownKey):
        dropped.open(before, purpose="p")


def test_tampered_ciphertext_is_refused() -> None:
    """Flipping one character of the ciphertext gives SealBroken, not garbage."""
    ring = Keyring([("k1", K1)])
    sealed = ring.seal("alice", purpose="p")
    flipped = sealed[:-3] + ("A" if sealed[-3] != "A" else "B") + sealed[-2:]
    with pytest.raises(SealBroken):
        ring.open(flipped, purpose="p")


def test_value_moved_to_another_purpose_or_key_id_is_refused() -> None:
    """The purpose and key id are authenticated: a pasted or relabelled value does not open."""
    ring = Keyring([("k1", K1), ("k2", K1)])
    sealed = ring.seal("alice", purpose="login.account:billing.example")
    with pytest.raises(SealBroken):
        ring.open(sealed, purpose="login.account:sso.example")
    relabelled = sealed.replace("sk1.k2.", "sk1.k1.", 1)
    with pytest.raises(SealBroken):
        ring.open(relabelled, purpose="login.account:billing.example")


def test_wrong_key_under_the_same_id_is_refused() -> None:
    """A keyring holding a different key under the same id cannot open the value."""
    sealed = Keyring([("k1", K1)]).seal("alice", purpose="p")
    with pytest.raises(SealBroken):
        Keyring([("k1", K2)]).open(sealed, purpose="p")


def test_garbage_is_not_a_sealed_value() -> None:
    """Strings that are not in the sealed format are SealBroken (an IntegrityError)."""
    ring = Keyring([("k1", K1)])
    for bad in ("alice", "sk1.k1.", "sk1.k1.!!!", "sk2.k1.AAAA"):
        with pytest.raises(IntegrityError):
            ring.open(bad, purpose="p")


def test_load_from_env_newest_last() -> None:
    """$SESSION_KEEPER_KEYS holds id=hex entries; the last one seals."""
    ring = Keyring.load({KEYS_ENV: f"k1={K1.hex()}, k2={K2.hex()}"})
    assert ring.ids == ("k1", "k2") and ring.current_id == "k2"


def test_load_from_key_file(tmp_path: Path) -> None:
    """A key file holds one id=hex per line, with comments."""
    path = tmp_path / "keys"
    path.write_text(f"# rotated 2026-11\nk1={K1.hex()}\nk2={K2.hex()}\n")
    path.chmod(0o600)  # a key file others may read is refused (see below)
    ring = Keyring.load({KEY_FILE_ENV: str(path)})
    assert ring.current_id == "k2"


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660, 0o610, 0o601], ids=oct)
def test_key_file_readable_by_group_or_others_is_refused_naming_the_fix(
    tmp_path: Path, mode: int
) -> None:
    """Like ssh: a key file open to group or others is KeyringError naming it and chmod 600."""
    path = tmp_path / "keys"
    path.write_text(f"k1={K1.hex()}\n")
    path.chmod(mode)
    # The check reads the file's mode bits, so it refuses even when run as root.
    with pytest.raises(KeyringError) as info:
        Keyring.load({KEY_FILE_ENV: str(path)})
    message = str(info.value)
    assert str(path) in message and f"chmod 600 {path}" in message
    assert K1.hex() not in message
    path.chmod(0o600)
    assert Keyring.from_file(path).current_id == "k1"


def test_key_file_that_is_not_utf8_is_a_keyring_error_naming_the_file(tmp_path: Path) -> None:
    """A key file of non-UTF-8 bytes is KeyringError naming the file, not a UnicodeDecodeError."""
    path = tmp_path / "keys"
    path.write_bytes(b"k1=\xff\xfe" + bytes(range(128, 160)))
    path.chmod(0o600)
    with pytest.raises(KeyringError, match="not UTF-8") as info:
        Keyring.from_file(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("text", [None, b"k1=00", 42], ids=["None", "bytes", "int"])
def test_key_text_of_the_wrong_type_is_a_typed_error(text: object) -> None:
    """Keyring.from_text() of a non-str is InvalidArgumentType, not a raw TypeError."""
    bad: Any = text
    with pytest.raises(InvalidArgumentType):
        Keyring.from_text(bad)


def test_missing_key_is_a_typed_error() -> None:
    """No env var and no file: KeyringError, never a silently random key."""
    with pytest.raises(KeyringError):
        Keyring.load({})
    with pytest.raises(KeyringError):
        Keyring.load({KEY_FILE_ENV: "/nonexistent/keys"})


@pytest.mark.parametrize(
    "text",
    [
        "k1",  # no '='
        "k1=zz" + "00" * 31,  # not hex
        "k1=" + "00" * 16,  # too short
        f"k1={K1.hex()},k1={K2.hex()}",  # duplicate id
        f"bad id={K1.hex()}",  # id with a space
    ],
)
def test_malformed_keys_are_refused_without_echoing_them(text: str) -> None:
    """A malformed key entry is KeyringError, and the message never contains key material."""
    with pytest.raises(KeyringError) as info:
        Keyring.load({KEYS_ENV: text})
    assert K1.hex() not in str(info.value) and "00" * 16 not in str(info.value)


def test_repr_hides_the_keys() -> None:
    """repr() names the key ids only."""
    ring = Keyring([("k1", K1)])
    assert K1.hex() not in repr(ring) and "k1" in repr(ring)


def test_sealed_value_without_a_blob_is_sealbroken_not_indexerror() -> None:
    """Keyring.open on 'sk1.k1' (no ciphertext part) must raise SealBroken, not IndexError."""
    keys = Keyring([("k1", bytes(range(32)))])
    with pytest.raises(SealBroken):
        keys.open("sk1.k1", purpose="login.account")


def test_key_parse_error_does_not_echo_a_base64_key() -> None:
    """A base64 key pasted without an id must not appear in the KeyringError message."""
    key = base64.b64encode(bytes(range(100, 116))).decode()  # a 16-byte key: ends with '=='
    assert key.endswith("==")
    with pytest.raises(KeyringError) as info:
        Keyring.from_text(key)
    assert key.rstrip("=") not in str(info.value)
