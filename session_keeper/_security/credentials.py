"""Credentials the model never sees: where a sign-in recipe's passwords and TOTP secrets
come from, and the one-time codes made from them.

A :class:`CredentialSource` answers ``get(site, field)`` with a :class:`Secret`: a value
whose ``repr`` and ``str`` hide it, so a log line, an exception or a tool result that
holds one by mistake shows ``Secret(***)``. Three sources ship: :class:`SealedCredentials`
(sealed with the :class:`~session_keeper.Keyring`, AES-256-GCM, in the Store),
:class:`EnvCredentials` (environment variables) and :class:`OsKeyringCredentials` (the
operating system's keyring, through the ``keyring`` package: the ``keyring`` extra).

:func:`totp_code` makes an RFC 6238 code (``pyotp``) from a TOTP secret at the keeper's
clock, and waits for the next code when the current one expires within a margin: a code
typed a second before its window closes is refused by the site. :class:`TotpCodes` gives
one renewal its codes, never two of one window (a site refuses a code used once).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

import pyotp

from session_keeper._model.cookies import normalize_site
from session_keeper._model.grants import check_name
from session_keeper._util.clock import Clock
from session_keeper._util.extras import needs_extra
from session_keeper._util.redact import remember_secrets
from session_keeper.errors import (
    CredentialMissing,
    InvalidArgument,
    InvalidArgumentType,
    SealBroken,
    StoreCorrupt,
)

if TYPE_CHECKING:
    from session_keeper._security.keyring import Keyring
    from session_keeper.stores import Store

__all__ = [
    "CredentialSource",
    "EnvCredentials",
    "OsKeyringCredentials",
    "SealedCredentials",
    "Secret",
    "TotpCodes",
    "totp_code",
]

_VERSION: Final = 1
#: The default margin: a code with fewer seconds left than this is not typed.
TOTP_MARGIN_S: Final = 5.0


class Secret:
    """A credential value that does not show itself: ``repr`` and ``str`` say ``***``.

    :meth:`reveal` gives the value, for the one call that types it into a page.
    Each value made is also remembered by the keeper's log scrubber, so a log line
    that quotes it anyway shows ``[redacted]``.
    """

    __slots__ = ("__weakref__", "_value")

    def __init__(self, value: str) -> None:
        if not isinstance(value, str):
            raise InvalidArgumentType("a Secret holds a str")
        if not value:
            raise InvalidArgument("a Secret must not be empty")
        self._value = value
        remember_secrets(self, [value])

    def reveal(self) -> str:
        """The value itself: type it into a page, never log or return it."""
        return self._value

    def __repr__(self) -> str:
        return "Secret(***)"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))

    def __reduce__(self) -> Any:
        # A Secret is not pickled into a checkpoint or a replay by accident.
        raise TypeError("a Secret cannot be pickled")


@runtime_checkable
class CredentialSource(Protocol):
    """Where a site's sign-in credentials come from (application code's, never the model's).

    Contract: ``await get(site, field)`` returns the value of ``field`` (``"username"``,
    ``"password"``, ``"totp"`` — a TOTP secret in base32 — or any name a recipe uses)
    for ``site`` as a :class:`Secret`; it raises
    :class:`~session_keeper.errors.CredentialMissing` when it holds no such value, and
    an :class:`~session_keeper.errors.IntegrityError` (``SealBroken``, ``UnknownKey``)
    when the value it holds does not check out — never a partial or guessed value. No
    message it raises carries a value.
    """

    async def get(self, site: str, field: str) -> Secret:
        """The value of ``field`` for ``site`` (see the class)."""
        ...


def _names(site: str, field: str) -> tuple[str, str]:
    return normalize_site(check_name(site, "site")), check_name(field, "field")


def _purpose(site: str, field: str) -> str:
    # Bound into the seal: a value moved to another site or field fails to open.
    return f"credential:{site}:{field}"


class SealedCredentials:
    """A credential vault in the Store, each value sealed with the keyring.

    Values are kept in one document (``Store.save_keeper_state`` under
    ``session-keeper-credentials:<vault_id>``) as AES-256-GCM seals bound to their site
    and field, so the store holds ciphertext and key ids only. A rotated keyring still
    opens older values; :meth:`reseal` seals them all under the newest key, after which
    the old key may be dropped. A value altered, moved or sealed under another key
    raises :class:`~session_keeper.errors.SealBroken` (or ``UnknownKey``): nothing of it
    is used.
    """

    def __init__(self, store: Store, keyring: Keyring, *, vault_id: str = "default") -> None:
        self._store = store
        self._keyring = keyring
        self._doc_id = f"session-keeper-credentials:{check_name(vault_id, 'vault_id')}"

    async def _load(self) -> dict[str, dict[str, str]]:
        doc = await self._store.load_keeper_state(self._doc_id)
        if doc is None:
            return {}
        sites = doc.get("sites")
        if doc.get("version") != _VERSION or not isinstance(sites, dict):
            raise StoreCorrupt("the credential vault document is not one this code wrote")
        return {str(k): dict(v) for k, v in sites.items() if isinstance(v, dict)}

    async def _save(self, sites: dict[str, dict[str, str]]) -> None:
        await self._store.save_keeper_state(self._doc_id, {"version": _VERSION, "sites": sites})

    async def set(self, site: str, field: str, value: str | Secret) -> None:
        """Seal ``value`` as ``field`` of ``site`` (replacing any older value)."""
        site, field = _names(site, field)
        plain = value.reveal() if isinstance(value, Secret) else Secret(value).reveal()
        sites = await self._load()
        sites.setdefault(site, {})[field] = self._keyring.seal(plain, purpose=_purpose(site, field))
        await self._save(sites)

    async def forget(self, site: str, field: str | None = None) -> None:
        """Drop one field of ``site``, or all of them."""
        site = normalize_site(check_name(site, "site"))
        sites = await self._load()
        if field is None:
            sites.pop(site, None)
        else:
            sites.get(site, {}).pop(check_name(field, "field"), None)
        await self._save(sites)

    async def fields(self, site: str) -> tuple[str, ...]:
        """The field names held for ``site`` (never their values)."""
        site = normalize_site(check_name(site, "site"))
        return tuple(sorted((await self._load()).get(site, {})))

    async def get(self, site: str, field: str) -> Secret:
        """See :class:`CredentialSource`."""
        site, field = _names(site, field)
        sealed = (await self._load()).get(site, {}).get(field)
        if sealed is None:
            raise CredentialMissing(f"the credential vault holds no {field!r} for {site}")
        if not isinstance(sealed, str):
            raise SealBroken(f"the vault's {field!r} for {site} is not a sealed value")
        return Secret(self._keyring.open_text(sealed, purpose=_purpose(site, field)))

    async def reseal(self) -> int:
        """Seal every value under the keyring's newest key; return how many moved.

        Every value is opened and checked before anything is written: one that does
        not open raises and the vault stays as it was.
        """
        sites = await self._load()
        moved = 0
        for site, fields in sites.items():
            for field, sealed in fields.items():
                if self._keyring.needs_reseal(sealed):
                    plain = self._keyring.open(sealed, purpose=_purpose(site, field))
                    fields[field] = self._keyring.seal(plain, purpose=_purpose(site, field))
                    moved += 1
        if moved:
            await self._save(sites)
        return moved

    def __repr__(self) -> str:
        return f"<SealedCredentials {self._doc_id}>"


_NOT_WORD = re.compile(r"[^A-Z0-9]+")


class EnvCredentials:
    """Credentials from environment variables: ``<prefix><SITE>_<FIELD>``, upper-cased,
    every run of other characters made ``_`` (``SESSION_KEEPER_CRED_TOTP_EXAMPLE_PASSWORD``
    for ``totp.example``'s ``password``). ``environ``: the mapping to read (default
    ``os.environ``, read at each ``get``)."""

    def __init__(
        self, *, prefix: str = "SESSION_KEEPER_CRED_", environ: Mapping[str, str] | None = None
    ) -> None:
        if not isinstance(prefix, str):
            raise InvalidArgumentType("prefix must be a str")
        self._prefix = prefix
        self._environ = environ

    def variable(self, site: str, field: str) -> str:
        """The name of the variable that holds ``field`` of ``site``."""
        site, field = _names(site, field)
        return self._prefix + _NOT_WORD.sub("_", f"{site}_{field}".upper())

    async def get(self, site: str, field: str) -> Secret:
        """See :class:`CredentialSource`."""
        name = self.variable(site, field)
        environ = self._environ if self._environ is not None else os.environ
        value = environ.get(name)
        if not value:
            raise CredentialMissing(f"no {field!r} for {site}: ${name} is not set")
        return Secret(value)

    def __repr__(self) -> str:
        return f"<EnvCredentials {self._prefix}*>"


class OsKeyringCredentials:
    """Credentials from the operating system's keyring, through the ``keyring`` package.

    Each value is the keyring's password for service ``service`` and user name
    ``<site>:<field>``. ``backend``: a ``keyring.backend.KeyringBackend`` to ask
    (default: the one ``keyring.get_keyring()`` chooses). The lookups block, so they run
    in a worker thread. Needs the ``keyring`` extra: without it, building one raises
    :class:`~session_keeper.errors.MissingExtra` (``pip install 'session-keeper[keyring]'``).
    """

    def __init__(self, *, service: str = "session-keeper", backend: Any | None = None) -> None:
        self._service = check_name(service, "service")
        if backend is None:
            with needs_extra("keyring", "OsKeyringCredentials"):
                import keyring
            backend = keyring.get_keyring()
        self._backend = backend

    async def get(self, site: str, field: str) -> Secret:
        """See :class:`CredentialSource`."""
        site, field = _names(site, field)
        value = await asyncio.to_thread(
            self._backend.get_password, self._service, f"{site}:{field}"
        )
        if not value:
            raise CredentialMissing(
                f"the OS keyring holds no {field!r} for {site} (service {self._service!r})"
            )
        return Secret(str(value))

    def __repr__(self) -> str:
        return f"<OsKeyringCredentials service={self._service!r}>"


#: How :func:`totp_code` waits for the next window (``asyncio.sleep`` unless told).
Sleep = Callable[[float], Awaitable[None]]


async def totp_code(
    secret: Secret,
    clock: Clock,
    *,
    margin_s: float = TOTP_MARGIN_S,
    interval_s: int = 30,
    digits: int = 6,
    sleep: Sleep = asyncio.sleep,
) -> Secret:
    """The RFC 6238 code of ``secret`` (base32) at ``clock``'s time, as a :class:`Secret`.

    When the current code expires within ``margin_s`` seconds, waits (``sleep``) for
    the next window and returns that window's code: the site then gets a code with at
    least ``interval_s - margin_s`` seconds to live. A secret that is not base32 raises
    :class:`~session_keeper.errors.InvalidArgument` (its value not in the message).
    """
    code, _ = await _code_of_window(
        secret, clock, margin_s=margin_s, interval_s=interval_s, digits=digits, sleep=sleep
    )
    return code


async def _code_of_window(
    secret: Secret,
    clock: Clock,
    *,
    margin_s: float,
    interval_s: int,
    digits: int,
    sleep: Sleep,
    after: int | None = None,
) -> tuple[Secret, int]:
    """:func:`totp_code`, and the window (``time // interval_s``) the code is of; with
    ``after``, a code of a later window than that one (waiting for it as needed)."""
    if not 0 <= margin_s < interval_s:
        raise InvalidArgument("margin_s must be at least 0 and below interval_s")
    try:
        totp = pyotp.TOTP(secret.reveal(), digits=digits, interval=interval_s)
        totp.byte_secret()
    except (ValueError, TypeError):
        raise InvalidArgument("the TOTP secret is not base32") from None
    now = clock.now().timestamp()
    window = int(now // interval_s)
    target = window + 1 if interval_s - (now % interval_s) < margin_s else window
    if after is not None:
        target = max(target, after + 1)
    at = now
    if target > window:
        await sleep(target * interval_s - now)
        # The target window's start even when the clock moved less than asked (a clock
        # that only a test moves): never the code that was about to expire, or was used.
        at = max(clock.now().timestamp(), float(target * interval_s))
    return Secret(totp.at(int(at))), int(at // interval_s)


class TotpCodes:
    """The TOTP codes of one renewal: never two of one window for a secret.

    A site refuses a code it accepted once (django-otp compares the code's time step
    with the last one it verified), and a code it refused as wrong is as wrong when
    typed again: so after a code of a window, the next one asked for the same secret is
    the next window's, waited for (``sleep``). :meth:`wait_s` says how long that wait
    is now, for a caller that would rather wait before starting the next attempt.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        margin_s: float = TOTP_MARGIN_S,
        interval_s: int = 30,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._clock = clock
        self._margin_s = margin_s
        self._interval_s = interval_s
        self._sleep = sleep
        self._last: dict[Secret, int] = {}

    async def code(self, secret: Secret, *, digits: int = 6) -> Secret:
        """A code of ``secret`` of a window no code of it was given in (see the class)."""
        code, window = await _code_of_window(
            secret,
            self._clock,
            margin_s=self._margin_s,
            interval_s=self._interval_s,
            digits=digits,
            sleep=self._sleep,
            after=self._last.get(secret),
        )
        self._last[secret] = window
        return code

    def wait_s(self) -> float:
        """Seconds until every secret given a code has a fresh window (0: now)."""
        if not self._last:
            return 0.0
        now = self._clock.now().timestamp()
        return max(0.0, (max(self._last.values()) + 1) * self._interval_s - now)


def describe_source(source: object) -> str:
    """A name of ``source`` for an audit entry or a log line (its class, never a value)."""
    return type(source).__name__
