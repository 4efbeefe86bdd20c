"""Sign-in recipes: how the keeper signs a site in again, without a person or the model.

A recipe is either declarative (:class:`FormRecipe`: a URL, form steps whose fields are
found by label or selector and filled from a :class:`~session_keeper.security.CredentialSource`,
and what a success and a failure look like) or a trusted async callable
(:class:`ScriptRecipe`) given the owner's guarded tab and a :class:`Credentials`
accessor that types values into the page without handing them out. Either way the
site's ``LoginProbe`` (when it has one) and the keeper's evidence rule confirm the
login afterwards. :class:`RenewalPolicy` bounds the attempts.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol

import attrs

from session_keeper.errors import InvalidArgument, InvalidArgumentType

if TYPE_CHECKING:
    from session_keeper._keeper.tabs.conversation_tab import ConversationTab, TabLocator

__all__ = [
    "Credentials",
    "FormField",
    "FormRecipe",
    "FormStep",
    "PageSign",
    "RenewalPolicy",
    "ScriptRecipe",
    "SignInAnswer",
    "SignInRecipe",
]

#: What a script recipe says of its sign-in: the site accepted it, refused it (a wrong
#: password, a wrong code: worth another attempt), or showed a page it does not know
#: (a CAPTCHA, a new-device check: a person's turn).
SignInAnswer = Literal["signed_in", "refused", "unknown_page"]


def _one_of(instance: Any, names: tuple[str, ...]) -> None:
    given = [n for n in names if getattr(instance, n) is not None]
    if len(given) != 1:
        raise InvalidArgument(f"{type(instance).__name__} needs exactly one of {', '.join(names)}")


def _check_pattern(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        raise InvalidArgumentType(f"PageSign.{attribute.name} must be a str")
    try:
        re.compile(value)
    except re.error as exc:
        raise InvalidArgument(f"PageSign.url is not a regular expression: {exc}") from None


def _fields(value: Iterable[FormField]) -> tuple[FormField, ...]:
    return tuple(value)


def _steps(value: Iterable[FormStep]) -> tuple[FormStep, ...]:
    return tuple(value)


def _names(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        raise InvalidArgumentType("ScriptRecipe.fields is a collection of field names")
    return tuple(value)


@attrs.frozen(kw_only=True)
class PageSign:
    """What a page shows when it is the one looked for; any one of the parts given matches.

    ``url``: a regular expression searched in the page's URL; ``selector``: an element
    that is visible; ``text``: text that is visible.
    """

    url: str | None = attrs.field(default=None, validator=_check_pattern)
    selector: str | None = None
    text: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.url is None and self.selector is None and self.text is None:
            raise InvalidArgument("a PageSign needs a url, a selector or a text")


@attrs.frozen(kw_only=True)
class FormField:
    """One input of a form step: ``credential`` (the field name asked of the
    :class:`~session_keeper.security.CredentialSource`), found by ``label`` or ``selector``
    (exactly one). ``totp``: the credential is a TOTP secret; the current code is typed."""

    credential: str
    label: str | None = None
    selector: str | None = None
    totp: bool = False

    def __attrs_post_init__(self) -> None:
        _one_of(self, ("label", "selector"))


@attrs.frozen(kw_only=True)
class FormStep:
    """One page of a sign-in: fill ``fields``, then click ``submit`` (a selector)."""

    fields: tuple[FormField, ...] = attrs.field(converter=_fields)
    submit: str = "button[type=submit]"

    def __attrs_post_init__(self) -> None:
        if not self.fields:
            raise InvalidArgument("a FormStep needs at least one field")


@attrs.frozen(kw_only=True)
class FormRecipe:
    """A declarative sign-in: open ``url``, run ``steps`` in order, then wait for
    ``success`` or ``failure`` (at most ``timeout``). A step after the first waits for
    its first field (or the failure sign). Neither sign in time: an unknown page."""

    url: str
    steps: tuple[FormStep, ...] = attrs.field(converter=_steps)
    success: PageSign
    failure: PageSign | None = None
    timeout: timedelta = timedelta(seconds=10)

    def __attrs_post_init__(self) -> None:
        if not self.steps:
            raise InvalidArgument("a FormRecipe needs at least one step")
        if not self.url.startswith(("http://", "https://")):
            raise InvalidArgument("a FormRecipe's url must be http(s)")
        if self.timeout <= timedelta(0):
            raise InvalidArgument("FormRecipe.timeout must be positive")

    def credentials(self) -> tuple[FormField, ...]:
        """Every field the recipe types, in order."""
        return tuple(f for step in self.steps for f in step.fields)


class Credentials(Protocol):
    """What a :class:`ScriptRecipe` is given instead of credential values.

    ``await fill(target, field)`` types ``field``'s value (``totp=True``: the current
    TOTP code of that secret) into ``target``, a locator of the recipe's tab; the value
    never reaches the recipe. Raises what the source raises
    (:class:`~session_keeper.errors.CredentialMissing`, ``SealBroken``).
    """

    async def fill(self, target: TabLocator, field: str, *, totp: bool = False) -> None:
        """Type ``field`` into ``target`` (see the class)."""
        ...


#: A trusted sign-in: ``await sign_in(tab, credentials)`` on the owner's guarded tab.
SignInScript = Callable[["ConversationTab", Credentials], Awaitable[SignInAnswer]]


@attrs.frozen(kw_only=True)
class ScriptRecipe:
    """A sign-in written as code: ``sign_in(tab, credentials)`` returns a
    :data:`SignInAnswer`. It is application code, trusted with the tab; the values
    stay behind ``credentials``. ``fields``: the credential fields it fills, fetched and
    checked before it runs (a field named ``totp`` is a TOTP secret, filled as a code)."""

    sign_in: SignInScript
    fields: tuple[str, ...] = attrs.field(default=(), converter=_names)


#: A site's sign-in recipe.
SignInRecipe = FormRecipe | ScriptRecipe


def _check_attempts(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 10:
        raise InvalidArgument("RenewalPolicy.attempts must be an int from 1 to 10")


def _check_delay(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, timedelta) or value < timedelta(0):
        raise InvalidArgument(f"RenewalPolicy.{attribute.name} must be a timedelta >= 0")


def _check_every(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (not isinstance(value, timedelta) or value <= timedelta(0)):
        raise InvalidArgument("RenewalPolicy.health_every must be a positive timedelta or None")


@attrs.frozen(kw_only=True)
class RenewalPolicy:
    """How hard the keeper tries: ``attempts`` sign-ins at most (a refused one is tried
    again after ``backoff``, doubled each time, and after a refused TOTP code not before
    the next window of the secret's period — 30 s, or an ``otpauth://`` URI's ``period`` —
    so one renewal never types two codes of one window; an unknown page is not tried
    again), and ``totp_margin`` — a TOTP code with less time left is not typed; the next
    one is (capped at half the period: typing takes as long on a 6 s window).
    ``health_every``: how often :meth:`SessionKeeper.check_logins` (and so each sweep)
    probes a live login of a site with a probe (a recipe is not needed), jittered down by
    up to a fifth so sites do not fall due together (``None``: never)."""

    attempts: int = attrs.field(default=3, validator=_check_attempts)
    backoff: timedelta = attrs.field(default=timedelta(seconds=1), validator=_check_delay)
    totp_margin: timedelta = attrs.field(default=timedelta(seconds=5), validator=_check_delay)
    health_every: timedelta | None = attrs.field(default=None, validator=_check_every)
