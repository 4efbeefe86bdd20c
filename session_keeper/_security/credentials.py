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

A TOTP credential is a bare base32 secret (30 s windows, 6 digits, SHA-1: what most
sites use) or an authenticator's ``otpauth://totp/...?secret=...&period=60&digits=8``
URI, whose period, digits and algorithm every code and every wait then follows
(:class:`TotpSecret` reads both, and writes the URI of a secret with its own period).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, get_args, runtime_checkable

import attrs
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
    "TotpAlgorithm",
    "TotpCodes",
    "TotpSecret",
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


#: The HMAC hash of a TOTP secret (RFC 6238 allows these three).
TotpAlgorithm = Literal["SHA1", "SHA256", "SHA512"]
_DIGESTS: Final[Mapping[str, Any]] = {
    "SHA1": hashlib.sha1,
    "SHA256": hashlib.sha256,
    "SHA512": hashlib.sha512,
}
#: A valid base32 secret of no account: checks a period alone.
_SOME_BASE32: Final = "A" * 32
#: The URI scheme authenticator apps' QR codes carry (Google Authenticator's key URI format).
_OTPAUTH: Final = "otpauth://"


def _check_period(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidArgument("a TOTP period must be a whole number of seconds above 0")


def _check_digits(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 6 <= value <= 10:
        raise InvalidArgument("a TOTP code has 6 to 10 digits")


def _check_algorithm(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value not in _DIGESTS:
        raise InvalidArgument(f"a TOTP algorithm is one of {', '.join(get_args(TotpAlgorithm))}")


def _check_base32(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, Secret):
        raise InvalidArgumentType("a TotpSecret's secret is a Secret")
    try:
        pyotp.TOTP(value.reveal()).byte_secret()
    except (ValueError, TypeError):
        # Never the value in the message: it is the second factor itself.
        raise InvalidArgument("the TOTP secret is not base32") from None


@attrs.frozen(kw_only=True)
class TotpSecret:
    """A TOTP secret with the parameters its codes are made with: ``period`` seconds a
    window (default 30), ``digits`` a code (6), ``algorithm`` (``"SHA1"``).

    :meth:`parse` reads a credential: a bare base32 secret (the defaults) or an
    ``otpauth://totp/...`` URI (its ``period``, ``digits`` and ``algorithm``, each
    defaulted when absent); :meth:`uri` writes one, to store a secret whose site uses
    another period (``vault.set(site, "totp", TotpSecret(secret=s, period=60).uri())``).
    A bad value raises :class:`~session_keeper.errors.InvalidArgument` whose message never
    holds the secret or the URI; ``repr`` shows ``Secret(***)``.
    """

    secret: Secret = attrs.field(validator=_check_base32)
    period: int = attrs.field(default=30, validator=_check_period)
    digits: int = attrs.field(default=6, validator=_check_digits)
    algorithm: TotpAlgorithm = attrs.field(default="SHA1", validator=_check_algorithm)

    @classmethod
    def parse(cls, value: Secret) -> TotpSecret:
        """The TOTP secret a credential holds: a bare base32 secret or an otpauth URI."""
        if not isinstance(value, Secret):
            raise InvalidArgumentType("a TOTP credential is a Secret")
        text = value.reveal().strip()
        if not text.lower().startswith(_OTPAUTH):
            return cls(secret=value)
        return cls(**_uri_fields(text))

    def uri(self) -> Secret:
        """This secret as an ``otpauth://totp/`` URI (a :class:`Secret`: it holds it)."""
        query = urllib.parse.urlencode(
            {
                "secret": self.secret.reveal(),
                "period": self.period,
                "digits": self.digits,
                "algorithm": self.algorithm,
            }
        )
        return Secret(f"otpauth://totp/session-keeper?{query}")

    def totp(self) -> pyotp.TOTP:
        """The ``pyotp.TOTP`` that makes this secret's codes."""
        return pyotp.TOTP(
            self.secret.reveal(),
            digits=self.digits,
            digest=_DIGESTS[self.algorithm],
            interval=self.period,
        )


def _uri_fields(text: str) -> dict[str, Any]:
    """The fields of an ``otpauth://totp/`` URI; every message names a part, never a value
    (a malformed URI may hold the secret anywhere)."""
    parsed: tuple[urllib.parse.SplitResult, dict[str, list[str]]] | None
    try:
        parts = urllib.parse.urlsplit(text)
        parsed = (
            parts,
            urllib.parse.parse_qs(parts.query, keep_blank_values=True, strict_parsing=True),
        )
    except ValueError:
        parsed = None
    if parsed is None:  # raised outside the except: no context holding the URI's text
        raise InvalidArgument("the otpauth URI is malformed")
    parts, query = parsed
    if parts.netloc.lower() != "totp":
        raise InvalidArgument("the otpauth URI is not of type totp (only TOTP codes are typed)")
    for values in query.values():
        if len(values) != 1:
            raise InvalidArgument("the otpauth URI gives a parameter more than once")
    secrets = query.get("secret")
    if not secrets or not secrets[0]:
        raise InvalidArgument("the otpauth URI has no secret")
    fields: dict[str, Any] = {"secret": Secret(secrets[0].replace(" ", ""))}
    for name in ("period", "digits"):
        if name in query:
            raw = query[name][0]
            if not raw.isascii() or not raw.isdigit():
                raise InvalidArgument(f"the otpauth URI's {name} is not a whole number")
            fields[name] = int(raw)
    if "algorithm" in query:
        fields["algorithm"] = query["algorithm"][0].upper()
    return fields


#: How :func:`totp_code` waits for the next window (the clock's own ``sleep`` unless told).
Sleep = Callable[[float], Awaitable[None]]


async def totp_code(
    secret: Secret | TotpSecret,
    clock: Clock,
    *,
    margin_s: float = TOTP_MARGIN_S,
    interval_s: int | None = None,
    digits: int | None = None,
    sleep: Sleep | None = None,
) -> Secret:
    """The RFC 6238 code of ``secret`` at ``clock``'s time, as a :class:`Secret`.

    ``secret``: a base32 secret, an ``otpauth://totp/`` URI or a :class:`TotpSecret`; its
    period, digits and algorithm make the code (``interval_s`` / ``digits``, when given,
    replace the secret's: a bare secret whose site uses another period). When the current
    code expires within the margin — ``margin_s``, at most half the period — waits
    for the next window (on ``clock``: ``clock.sleep`` unless ``sleep`` is given) and
    returns that window's code. A secret that is not base32, or a bad URI or parameter,
    raises :class:`~session_keeper.errors.InvalidArgument` (its value not in the
    message).
    """
    code, _ = await _code_of_window(
        _spec(secret, interval_s, digits),
        clock,
        margin_s=margin_s,
        sleep=sleep if sleep is not None else clock.sleep,
    )
    return code


def _spec(secret: Secret | TotpSecret, interval_s: int | None, digits: int | None) -> TotpSecret:
    """``secret`` read as a :class:`TotpSecret`, with the parameters a caller gave."""
    spec = secret if isinstance(secret, TotpSecret) else TotpSecret.parse(secret)
    if interval_s is not None:
        spec = attrs.evolve(spec, period=interval_s)
    if digits is not None:
        spec = attrs.evolve(spec, digits=digits)
    return spec


def _margin(margin_s: float, period: int) -> float:
    """The margin a code of ``period`` is held to: at most half its window.

    The margin covers typing and submitting a code, which takes as long whatever the
    period; a margin of half the window or more would leave no code typeable at once, so
    on a short period (a 6 s test site) it is capped at half the window."""
    if isinstance(margin_s, bool) or not isinstance(margin_s, int | float) or margin_s < 0:
        raise InvalidArgument("margin_s must be a number of seconds, at least 0")
    return min(float(margin_s), period / 2)


async def _code_of_window(
    spec: TotpSecret,
    clock: Clock,
    *,
    margin_s: float,
    sleep: Sleep,
    after: int | None = None,
) -> tuple[Secret, int]:
    """:func:`totp_code`, and the window (``time // period``) the code is of; with
    ``after``, a code of a later window than that one (waiting for it as needed)."""
    period = spec.period
    margin = _margin(margin_s, period)
    totp = spec.totp()
    now = clock.now().timestamp()
    window = int(now // period)
    target = window + 1 if period - (now % period) < margin else window
    if after is not None:
        target = max(target, after + 1)
    at = now
    if target > window:
        await sleep(target * period - now)
        # The target window's start even when the clock moved less than asked (a clock
        # that only a test moves): never the code that was about to expire, or was used.
        at = max(clock.now().timestamp(), float(target * period))
    return Secret(totp.at(int(at))), int(at // period)


class TotpCodes:
    """The TOTP codes of one renewal: never two of one window for a secret.

    A site refuses a code it accepted once (django-otp compares the code's time step
    with the last one it verified), and a code it refused as wrong is as wrong when
    typed again: so after a code of a window, the next one asked for the same secret is
    the next window's, waited for on the clock (``clock.sleep`` unless ``sleep`` is
    given). Each secret's window is its own period's (an ``otpauth://`` URI's ``period``;
    ``interval_s`` replaces it for bare secrets given one). :meth:`wait_s` says how long
    that wait is now, for a caller that would rather wait before starting the next
    attempt.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        margin_s: float = TOTP_MARGIN_S,
        interval_s: int | None = None,
        sleep: Sleep | None = None,
    ) -> None:
        _margin(margin_s, 1)  # a bad margin or period raises here, before any code
        if interval_s is not None:
            TotpSecret(secret=Secret(_SOME_BASE32), period=interval_s)
        self._clock = clock
        self._margin_s = margin_s
        self._interval_s = interval_s
        # The next window is a time on ``clock``: waited for on it, unless told otherwise.
        self._sleep = sleep if sleep is not None else clock.sleep
        #: Per secret: the window of its last code, and its period.
        self._last: dict[Secret, tuple[int, int]] = {}

    async def code(self, secret: Secret, *, digits: int | None = None) -> Secret:
        """A code of ``secret`` of a window no code of it was given in (see the class)."""
        spec = _spec(secret, self._interval_s, digits)
        last = self._last.get(secret)
        code, window = await _code_of_window(
            spec,
            self._clock,
            margin_s=self._margin_s,
            sleep=self._sleep,
            after=last[0] if last is not None else None,
        )
        self._last[secret] = (window, spec.period)
        return code

    def wait_s(self) -> float:
        """Seconds until every secret given a code has a fresh window (0: now)."""
        if not self._last:
            return 0.0
        now = self._clock.now().timestamp()
        return max(0.0, *((w + 1) * p - now for w, p in self._last.values()))


def describe_source(source: object) -> str:
    """A name of ``source`` for an audit entry or a log line (its class, never a value)."""
    return type(source).__name__
