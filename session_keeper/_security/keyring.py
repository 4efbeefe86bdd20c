"""Keyring: AES-GCM keys that seal whatever sensitive field the store keeps.

Cookie values are never stored, only fingerprinted (:mod:`session_keeper._model.fingerprint`).
What must be stored but not read by whoever reads the database — an account
identity, a storage-state vault entry — is *sealed*: AES-256-GCM under the newest
key of a :class:`Keyring`, with the key's id written next to the ciphertext so that
older data still opens after a rotation.

Sealed format (one ASCII string, safe in JSON)::

    sk1.<key id>.<base64url(12-byte nonce || ciphertext || 16-byte tag)>

The *purpose* (``"login.account"``, ``"vault:billing.example"``) and the key id are
authenticated as associated data: a value cut from one field and pasted into
another, or relabelled with another key id, does not open.

Where keys come from (:meth:`Keyring.load`): ``$SESSION_KEEPER_KEYS`` or the file
named by ``$SESSION_KEEPER_KEY_FILE``; both hold ``<id>=<64 hex digits>`` entries
(comma- or newline-separated, ``#`` comments in the file), oldest first: **the last
entry is the newest** and seals new writes. To rotate, append a new key, re-seal at
leisure (:meth:`Keyring.needs_reseal`), then drop the old one.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import secrets
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, hmac
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from session_keeper.errors import InvalidArgumentType, KeyringError, SealBroken, UnknownKey

__all__ = ["KEYS_ENV", "KEY_FILE_ENV", "Keyring", "secret_forms"]

#: Environment variable holding ``id=hex,id=hex`` keys, newest last.
KEYS_ENV: Final = "SESSION_KEEPER_KEYS"
#: Environment variable naming a key file (same entries, one per line).
KEY_FILE_ENV: Final = "SESSION_KEEPER_KEY_FILE"

_PREFIX: Final = "sk1"
_KEY_ID = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
_KEY_BYTES: Final = 32
_NONCE_BYTES: Final = 12


def _check_id(key_id: object) -> str:
    if not isinstance(key_id, str) or not _KEY_ID.match(key_id):
        raise KeyringError("a key id is 1-32 letters, digits, '-' or '_'")
    return key_id


def _parse_entries(text: str, where: str) -> list[tuple[str, bytes]]:
    entries: list[tuple[str, bytes]] = []
    for raw in re.split(r"[,\n]", text):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        key_id, sep, hex_key = line.partition("=")
        key_id = key_id.strip()
        if not sep or not _KEY_ID.match(key_id):
            # Never echo the line or its id: a key pasted without an id (base64 ends
            # in '=') would otherwise show up here.
            raise KeyringError(f"{where}: an entry is not '<id>=<64 hex digits>'")
        try:
            key = bytes.fromhex(hex_key.strip())
        except ValueError:
            # Not even the id: a bare base64 key splits at its '=' padding into an "id".
            raise KeyringError(f"{where}: an entry's key is not 64 hex digits") from None
        entries.append((key_id, key))
    if not entries:
        raise KeyringError(f"{where} holds no key")
    return entries


class Keyring:
    """AES-256-GCM keys by id; the newest seals, every one held still opens.

    ``keys`` is ``[(id, 32-byte key), ...]`` oldest first (or a mapping in that
    order). Raises :class:`KeyringError` for no key, a bad id, a duplicate id or a
    key that is not 32 bytes. ``repr`` never shows a key.
    """

    def __init__(self, keys: Iterable[tuple[str, bytes]] | Mapping[str, bytes]) -> None:
        items = list(keys.items()) if isinstance(keys, Mapping) else list(keys)
        if not items:
            raise KeyringError("a keyring needs at least one key")
        self._keys: dict[str, bytes] = {}
        for key_id, key in items:
            _check_id(key_id)
            if key_id in self._keys:
                raise KeyringError(f"key id {key_id!r} appears twice")
            if not isinstance(key, bytes) or len(key) != _KEY_BYTES:
                raise KeyringError(f"key {key_id!r} must be {_KEY_BYTES} bytes")
            self._keys[key_id] = key
        self._current = items[-1][0]
        # HKDF per MAC would dominate verifying a long audit chain; a keyring never
        # changes its keys (rotation makes a new one), so a derived key stays valid.
        self._derived_keys: dict[tuple[str, str], bytes] = {}

    # -- construction --------------------------------------------------------------------
    @classmethod
    def generate(cls, key_id: str = "k1") -> Keyring:
        """A keyring with one fresh random key (tests, demos, first set-up)."""
        return cls([(key_id, secrets.token_bytes(_KEY_BYTES))])

    @classmethod
    def from_text(cls, text: str, *, where: str = "key text") -> Keyring:
        """Parse ``id=hex`` entries (comma or newline separated, newest last).

        Raises :class:`InvalidArgumentType` when ``text`` is not a ``str`` and
        :class:`KeyringError` when it holds no well-formed key.
        """
        if not isinstance(text, str):
            raise InvalidArgumentType(f"key text must be a str, not {type(text).__name__}")
        return cls(_parse_entries(text, where))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Keyring:
        """Read a key file (one ``id=hex`` per line, newest last, ``#`` comments).

        Like ssh with a private key, a file that its group or others may read is
        refused (:class:`KeyringError` naming the file and the fix, ``chmod 600``):
        whoever reads it can open every sealed value. A file that cannot be read or
        is not UTF-8 text is a :class:`KeyringError` too.
        """
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidArgumentType(f"path must be a str or path, not {type(path).__name__}")
        name = os.fspath(path)
        try:
            with Path(path).open("rb") as f:
                # The mode of the file we opened, not of whatever the name points to later.
                mode = os.fstat(f.fileno()).st_mode
                if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
                    raise KeyringError(
                        f"key file {name} is accessible by group or others "
                        f"(mode {stat.S_IMODE(mode):o}); run: chmod 600 {name}"
                    )
                raw = f.read()
        except OSError as exc:
            raise KeyringError(f"cannot read key file {name}: {exc.strerror}") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise KeyringError(f"key file {name} is not UTF-8 text") from None
        return cls.from_text(text, where=f"key file {name}")

    @classmethod
    def load(cls, environ: Mapping[str, str] | None = None) -> Keyring:
        """From ``$SESSION_KEEPER_KEYS``, else the file in ``$SESSION_KEEPER_KEY_FILE``.

        Raises :class:`KeyringError` when neither is set: sealed data must never be
        written under a key nobody kept.
        """
        env = os.environ if environ is None else environ
        if env.get(KEYS_ENV):
            return cls.from_text(env[KEYS_ENV], where=f"${KEYS_ENV}")
        if env.get(KEY_FILE_ENV):
            return cls.from_file(env[KEY_FILE_ENV])
        raise KeyringError(f"no sealing key: set ${KEYS_ENV} or ${KEY_FILE_ENV}")

    def rotated(self, key_id: str, key: bytes | None = None) -> Keyring:
        """A keyring with ``key_id`` (random unless given) added as the newest key."""
        new = key if key is not None else secrets.token_bytes(_KEY_BYTES)
        return Keyring([*self._keys.items(), (key_id, new)])

    def without(self, key_id: str) -> Keyring:
        """A keyring without ``key_id`` (after everything was re-sealed)."""
        return Keyring([(k, v) for k, v in self._keys.items() if k != key_id])

    # -- views -----------------------------------------------------------------------------
    @property
    def current_id(self) -> str:
        """The id of the newest key: new seals use it."""
        return self._current

    @property
    def ids(self) -> tuple[str, ...]:
        """Every key id held, oldest first."""
        return tuple(self._keys)

    # -- sealing ---------------------------------------------------------------------------
    def _aad(self, purpose: str, key_id: str) -> bytes:
        return f"session_keeper/{_PREFIX}/{key_id}/{purpose}".encode()

    def seal(self, plaintext: str | bytes, *, purpose: str) -> str:
        """Encrypt ``plaintext`` under the newest key, bound to ``purpose``."""
        data = plaintext.encode() if isinstance(plaintext, str) else plaintext
        key_id = self._current
        nonce = secrets.token_bytes(_NONCE_BYTES)
        sealed = AESGCM(self._keys[key_id]).encrypt(nonce, data, self._aad(purpose, key_id))
        blob = base64.urlsafe_b64encode(nonce + sealed).decode().rstrip("=")
        return f"{_PREFIX}.{key_id}.{blob}"

    @staticmethod
    def key_id_of(sealed: str) -> str:
        """The key id a sealed value names. Raises :class:`SealBroken` if it is not one."""
        if not isinstance(sealed, str):
            raise SealBroken("a sealed value is a str")
        prefix, _, rest = sealed.partition(".")
        key_id, _, _blob = rest.partition(".")
        if prefix != _PREFIX or not _KEY_ID.match(key_id):
            raise SealBroken("not a sealed value of this format")
        return key_id

    def open(self, sealed: str, *, purpose: str) -> bytes:
        """Decrypt. :class:`UnknownKey` for a key id not held, :class:`SealBroken` if altered."""
        key_id = self.key_id_of(sealed)
        key = self._keys.get(key_id)
        if key is None:
            raise UnknownKey(f"sealed under key {key_id!r}, which this keyring does not hold")
        parts = sealed.split(".", 2)
        if len(parts) != 3 or not parts[2]:
            raise SealBroken(f"a value sealed under {key_id!r} has no ciphertext")
        blob = parts[2]
        try:
            raw = base64.urlsafe_b64decode(blob + "=" * (-len(blob) % 4))
        except (binascii.Error, ValueError):
            raise SealBroken(f"a value sealed under {key_id!r} is not base64") from None
        if len(raw) < _NONCE_BYTES + 16:
            raise SealBroken(f"a value sealed under {key_id!r} is truncated")
        try:
            return AESGCM(key).decrypt(
                raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], self._aad(purpose, key_id)
            )
        except InvalidTag:
            raise SealBroken(
                f"a value sealed under {key_id!r} for {purpose!r} failed authentication "
                "(altered, moved from another field, or a different key under that id)"
            ) from None

    def open_text(self, sealed: str, *, purpose: str) -> str:
        """:meth:`open`, decoded as UTF-8."""
        return self.open(sealed, purpose=purpose).decode()

    def needs_reseal(self, sealed: str) -> bool:
        """Whether ``sealed`` is under an older key than the newest (re-seal it)."""
        return self.key_id_of(sealed) != self._current

    # -- keyed MACs (the audit chain) ------------------------------------------------------
    def _derived(self, key_id: str, purpose: str) -> bytes:
        cached = self._derived_keys.get((key_id, purpose))
        if cached is not None:
            return cached
        key = self._keys.get(key_id)
        if key is None:
            raise UnknownKey(f"key {key_id!r} is not in this keyring")
        # A separate key per purpose: the AES key never doubles as an HMAC key.
        derived = HKDF(
            algorithm=hashes.SHA256(),
            length=32,
            salt=None,
            info=f"session_keeper/mac/{purpose}".encode(),
        ).derive(key)
        self._derived_keys[(key_id, purpose)] = derived
        return derived

    def mac(self, data: bytes, *, purpose: str, key_id: str | None = None) -> tuple[str, str]:
        """``(key id, hex HMAC-SHA256)`` of ``data`` under a key derived for ``purpose``."""
        kid = key_id or self._current
        h = hmac.HMAC(self._derived(kid, purpose), hashes.SHA256())
        h.update(data)
        return kid, h.finalize().hex()

    def verify_mac(self, data: bytes, mac_hex: str, *, purpose: str, key_id: str) -> bool:
        """Whether ``mac_hex`` is the MAC of ``data`` under ``key_id`` (constant time)."""
        h = hmac.HMAC(self._derived(key_id, purpose), hashes.SHA256())
        h.update(data)
        try:
            h.verify(bytes.fromhex(mac_hex))
        except (ValueError, Exception):
            return False
        return True

    def _secret_forms(self) -> tuple[str, ...]:
        """Each key as it could appear in a text (hex, base64), for scrubbing only.

        Never log, store or show these: they are what a scrubber must find and hide.
        """
        forms: list[str] = []
        for key in self._keys.values():
            forms += [
                key.hex(),
                base64.b64encode(key).decode(),
                base64.urlsafe_b64encode(key).decode(),
            ]
        return tuple(forms)

    def __repr__(self) -> str:
        return f"Keyring(ids={list(self._keys)!r}, current={self._current!r}, keys=<hidden>)"


def secret_forms(keyring: Keyring) -> tuple[str, ...]:
    """Each of ``keyring``'s keys as it could appear in a text, for a scrubber only.

    A function of this module rather than a public method: the keyring's public API
    never hands out key material; the keeper's scrubber is the one caller.
    """
    return keyring._secret_forms()
