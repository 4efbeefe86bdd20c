"""What a SessionKeeper is configured with, grouped by concern (in the spirit of httpx's
``Client(timeout=Timeout(...), limits=Limits(...))``).

Each group is a frozen value that checks itself when it is made, so a bad setting is
refused before any keeper exists. A fourth group, :class:`~session_keeper.Telemetry`
(``telemetry=``: where spans and metrics go), lives below the keeper because the job loop,
the pool and the stores report through it too.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from session_keeper._keeper.logins.login_records import LoginProbe
from session_keeper._keeper.logins.recipes import (
    FormRecipe,
    RenewalPolicy,
    ScriptRecipe,
    SignInRecipe,
)
from session_keeper._model.cookies import normalize_site
from session_keeper._model.evidence import parse_session_cookies
from session_keeper._model.fingerprint import load_fingerprint_key
from session_keeper._model.grants import check_name
from session_keeper._security.audit import AuditLog
from session_keeper._security.credentials import CredentialSource
from session_keeper._security.keyring import Keyring
from session_keeper._security.vault import LoginVault
from session_keeper._util.validate import check_mapping
from session_keeper.errors import InvalidArgument, InvalidArgumentType

if TYPE_CHECKING:
    from session_keeper.stores import Store

__all__ = [
    "Durability",
    "IdleTimeouts",
    "LoginSettings",
    "settings_group",
]


def _positive(optional: bool) -> Any:
    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is None and optional:
            return
        what = f"{type(instance).__name__}.{attribute.name}"
        if not isinstance(value, timedelta):
            raise InvalidArgumentType(f"{what} must be a timedelta, not {type(value).__name__}")
        if value <= timedelta(0):
            raise InvalidArgument(f"{what} must be positive")

    return check


def _instance_of(kind: type) -> Any:
    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None and not isinstance(value, kind):
            raise InvalidArgumentType(
                f"{type(instance).__name__}.{attribute.name} must be a {kind.__name__} "
                f"or None, not {type(value).__name__}"
            )

    return check


#: How long a conversation may go without a turn before the sweep forgets it (when it
#: holds no live login and no person's takeover): the saved state stays bounded by the
#: conversations in use. One that comes back is told ``TurnFacts.first_turn``.
DEFAULT_CONVERSATION_IDLE = timedelta(days=7)


@attrs.frozen(kw_only=True)
class IdleTimeouts:
    """How long the keeper lets things sit unused before its sweep closes them.

    ``browser``: the browser closes after this long without a turn (default 10 minutes).
    ``tab``: a conversation's tab closes after this long unused (``None``: never).
    ``conversation``: a conversation without a turn for this long is forgotten by the
    sweep unless it owns a live login or a person took it over (see
    :meth:`SessionKeeper.forget`; default 7 days; ``None``: never); when it comes back,
    its :class:`TurnFacts` say ``first_turn``. Each must be a positive
    ``timedelta``: anything else raises :class:`~session_keeper.errors.InvalidArgument`
    (or :class:`~session_keeper.errors.InvalidArgumentType`).

    >>> from datetime import timedelta
    >>> IdleTimeouts(browser=timedelta(minutes=5), tab=timedelta(minutes=2))
    IdleTimeouts(browser=datetime.timedelta(seconds=300), tab=datetime.timedelta(seconds=120), conversation=datetime.timedelta(days=7))
    """  # noqa: E501 -- a doctest line is as long as the repr it shows

    browser: timedelta = attrs.field(default=timedelta(minutes=10), validator=_positive(False))
    tab: timedelta | None = attrs.field(default=None, validator=_positive(True))
    conversation: timedelta | None = attrs.field(
        default=DEFAULT_CONVERSATION_IDLE, validator=_positive(True)
    )


def _check_sign_in_timeout(
    instance: object, attribute: attrs.Attribute[Any], value: object
) -> None:
    if not isinstance(value, timedelta):
        raise InvalidArgumentType("LoginSettings.sign_in_timeout must be a datetime.timedelta")
    if value <= timedelta(0):
        raise InvalidArgument("LoginSettings.sign_in_timeout must be positive")


def _check_keep(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, bool):
        raise InvalidArgumentType("LoginSettings.keep_on_idle_close must be a bool")


def _check_key(instance: object, attribute: attrs.Attribute[Any], value: bytes | None) -> None:
    if value is not None:
        load_fingerprint_key(value)  # the type and length rule of every fingerprint key


def _check_probes(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    for site in check_mapping(value, "LoginSettings.probes"):
        normalize_site(check_name(site, "site"))


def _check_session_cookies(
    instance: object, attribute: attrs.Attribute[Any], value: Mapping[str, Iterable[str]]
) -> None:
    parse_session_cookies(value)


def _check_storage_keys(
    instance: object, attribute: attrs.Attribute[Any], value: Mapping[str, Iterable[str]]
) -> None:
    parse_session_cookies(value, what="storage_keys", item="storage key")


def _check_recipes(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    for site, recipe in check_mapping(value, "LoginSettings.recipes").items():
        normalize_site(check_name(site, "site"))
        if not isinstance(recipe, (FormRecipe, ScriptRecipe)):
            raise InvalidArgumentType(
                f"LoginSettings.recipes[{site!r}] must be a FormRecipe or a ScriptRecipe"
            )


def _check_credentials(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    # The protocol check sees only a ``get`` attribute (a dict has one): it must be async.
    get = getattr(value, "get", None)
    if value is not None and (
        not isinstance(value, CredentialSource) or not inspect.iscoroutinefunction(get)
    ):
        raise InvalidArgumentType("LoginSettings.credentials must be a CredentialSource or None")


def _check_renewal(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, RenewalPolicy):
        raise InvalidArgumentType("LoginSettings.renewal must be a RenewalPolicy")


@attrs.frozen(kw_only=True)
class LoginSettings:
    """How the keeper tells, records and keeps the browser's logins.

    ``probes``: site -> a :data:`~session_keeper.LoginProbe` (``async (page) -> account
    or None``) that says who is signed in there; a probe is the final word when the jar
    is ambiguous. ``session_cookies``: site -> the names of the cookies that carry its
    session (only they count as evidence of a sign-in there). ``storage_keys``: site ->
    the ``localStorage`` / ``sessionStorage`` keys that carry its login, for a site that
    keeps its token in web storage (without them, every item of the site's origins that
    appeared or changed during a :meth:`~session_keeper.SessionKeeper.begin_login`
    window counts, when no cookie did). ``fingerprint_key``: the
    key (at least 16 bytes) of the ledger's cookie fingerprints; without one it is
    ``$SESSION_KEEPER_FINGERPRINT_KEY``, else random for the process (a login then
    cannot be matched after a restart of the process). ``keep_on_idle_close``: keep
    the logins in the jar when the idle sweep closes the browser (by default they are
    deleted first, so a swept profile holds no live credential). ``recipes``: site ->
    a sign-in recipe (:class:`~session_keeper.FormRecipe` or
    :class:`~session_keeper.ScriptRecipe`) that :meth:`SessionKeeper.renew_login` runs,
    fed by ``credentials`` (a :class:`~session_keeper.security.CredentialSource`) and bounded by
    ``renewal`` (a :class:`~session_keeper.RenewalPolicy`). ``sign_in_timeout``: how long
    a sign-in begun with :meth:`~session_keeper.SessionKeeper.begin_login` may stay in
    progress before the sweep ends it (what it set is deleted from the jar, nothing is
    recorded). Bad values raise
    :class:`~session_keeper.errors.InvalidArgument` (or ``InvalidArgumentType``).

    >>> settings = LoginSettings(session_cookies={"billing.example": ["sid"]})
    >>> settings.session_cookies
    {'billing.example': ['sid']}

    The fingerprint key is a secret: it is not in the ``repr``.
    """

    keep_on_idle_close: bool = attrs.field(default=False, validator=_check_keep)
    fingerprint_key: bytes | None = attrs.field(default=None, validator=_check_key, repr=False)
    probes: Mapping[str, LoginProbe[Any]] = attrs.field(factory=dict, validator=_check_probes)
    session_cookies: Mapping[str, Iterable[str]] = attrs.field(
        factory=dict, validator=_check_session_cookies
    )
    storage_keys: Mapping[str, Iterable[str]] = attrs.field(
        factory=dict, validator=_check_storage_keys
    )
    recipes: Mapping[str, SignInRecipe] = attrs.field(factory=dict, validator=_check_recipes)
    credentials: CredentialSource | None = attrs.field(default=None, validator=_check_credentials)
    renewal: RenewalPolicy = attrs.field(factory=RenewalPolicy, validator=_check_renewal)
    sign_in_timeout: timedelta = attrs.field(
        default=timedelta(minutes=15), validator=_check_sign_in_timeout
    )


def _check_keeper_id(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_name(value, "keeper_id")


@attrs.frozen(kw_only=True)
class Durability:
    """Where the keeper keeps what must outlive its process, and under which name.

    ``store``: its state document, events and audit entries (``None``: kept in memory
    only). ``keeper_id``: the name its state is saved under (several keepers may share
    a store). ``keyring``: seals the saved state at rest. ``audit``: the audit chain
    every grant, login and refusal is entered in. ``vault``: sealed logins the keeper
    may restore after a restart. Bad values raise
    :class:`~session_keeper.errors.InvalidArgument` (or ``InvalidArgumentType``).

    >>> Durability(keeper_id="support-desk")
    Durability(store=None, keeper_id='support-desk', keyring=None, audit=None, vault=None)
    """

    store: Store | None = None
    keeper_id: str = attrs.field(default="default", validator=_check_keeper_id)
    keyring: Keyring | None = attrs.field(default=None, validator=_instance_of(Keyring))
    audit: AuditLog | None = attrs.field(default=None, validator=_instance_of(AuditLog))
    vault: LoginVault | None = attrs.field(default=None, validator=_instance_of(LoginVault))


_G = TypeVar("_G", "IdleTimeouts", "LoginSettings", "Durability")


def settings_group(name: str, given: _G | None, kind: type[_G]) -> _G:
    """``given``, checked to be a ``kind``, or the group's defaults when it is ``None``.

    Raises :class:`InvalidArgumentType` for anything else, before the keeper builds anything.
    """
    if given is None:
        return kind()
    if not isinstance(given, kind):
        raise InvalidArgumentType(f"{name} must be a {kind.__name__}, not {type(given).__name__}")
    return given
