"""Keyed fingerprints of cookie and web-storage values: a login known without its secret."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable

from cryptography.hazmat.primitives import hashes, hmac

from session_keeper._model.cookies import Cookie
from session_keeper._model.facts import CookieFingerprint
from session_keeper._model.storage import StorageFingerprint, StorageItem
from session_keeper.errors import InvalidArgument, InvalidArgumentType

#: Environment variable holding the fingerprint key as hex (at least 32 hex digits).
KEY_ENV = "SESSION_KEEPER_FINGERPRINT_KEY"


def load_fingerprint_key(key: bytes | None = None) -> bytes:
    """The key to fingerprint with: ``key``, else ``$SESSION_KEEPER_FINGERPRINT_KEY``, else random.

    A random key lives as long as the process. Fingerprints made under it cannot be
    matched after our own process restarts, so a surviving login then reads as
    *replaced* (treated as lost): safe, but pass a stable key to keep logins.
    """
    if key is not None:
        if not isinstance(key, bytes):
            raise InvalidArgumentType("fingerprint key must be bytes")
        if len(key) < 16:
            raise InvalidArgument("fingerprint key must be at least 16 bytes")
        return key
    env = os.environ.get(KEY_ENV)
    if env:
        try:
            raw = bytes.fromhex(env.strip())
        except ValueError:
            raise InvalidArgument(f"${KEY_ENV} is not hex") from None
        if len(raw) < 16:
            raise InvalidArgument(f"${KEY_ENV} must hold at least 16 bytes (32 hex digits)")
        return raw
    return secrets.token_bytes(32)


class Fingerprinter:
    """HMAC-SHA256 over a cookie's identity and value, under the keeper's key."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    def _digest(self, *parts: str) -> str:
        h = hmac.HMAC(self._key, hashes.SHA256())
        for part in parts:
            data = part.encode()
            # Length-prefix each part so ("ab","c") and ("a","bc") differ.
            h.update(len(data).to_bytes(4, "big") + data)
        return h.finalize().hex()

    def digest(self, cookie: Cookie) -> str:
        """The hex fingerprint of ``cookie``; equal only for the same name, place and value."""
        return self._digest(cookie.domain.lstrip("."), cookie.path, cookie.name, cookie.value)

    def fingerprint(self, cookie: Cookie, *, jar: Iterable[Cookie] = ()) -> CookieFingerprint:
        """The ledger's memory of ``cookie``: identity plus keyed digest, no value.

        ``jar``: the cookies around it, whose values its path must not keep either (see
        :func:`path_without_value`)."""
        return CookieFingerprint(
            name=cookie.name,
            domain=cookie.domain.lstrip("."),
            path=path_without_value(cookie, jar),
            fingerprint=self.digest(cookie),
            is_session=cookie.is_session,
            host_only=cookie.host_only,
            secure=cookie.secure,
        )

    def storage_digest(self, item: StorageItem) -> str:
        """The hex fingerprint of a storage item; equal only for the same place, key, value."""
        # Five parts where a cookie has four: a storage item never matches a cookie's digest.
        return self._digest("storage", item.origin, item.area, item.key, item.value)

    def storage_fingerprint(self, item: StorageItem) -> StorageFingerprint:
        """The ledger's memory of a storage item: origin, area, key and digest, no value."""
        return StorageFingerprint(
            origin=item.origin, area=item.area, key=item.key, fingerprint=self.storage_digest(item)
        )

    def __repr__(self) -> str:
        return "Fingerprinter(key=<hidden>)"


#: What stands for a cookie's own value inside its path, in what the ledger keeps.
VALUE_IN_PATH = "{value}"


def path_without_value(cookie: Cookie, jar: Iterable[Cookie] = ()) -> str:
    """``cookie``'s path with its own value, and every value of ``jar``, taken out.

    Some sites scope a cookie to a path that holds a secret (an OpenID Connect provider's
    ``_interaction`` cookie and its ``.sig`` lives at ``/interaction/<the interaction
    cookie's value>``): kept as it is, the path would carry the secret into the ledger,
    the store and the audit chain.
    """
    path = cookie.path
    for value in {cookie.value, *(c.value for c in jar)}:
        if len(value) >= 8 and value in path:
            path = path.replace(value, VALUE_IN_PATH)
    return path
