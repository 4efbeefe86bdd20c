"""Renewal: signing a lost or expired login in again from a recipe and sealed credentials.

One renewal at a time per site, however many conversations ask: the others wait and are
told the login the first one recorded. Each attempt is an audit entry naming who asked
and the grant they asked under; the login is recorded on evidence exactly as
``record_login`` records a person's sign-in. What the recipe cannot finish (refused
every attempt, an unknown page, another account) is a :class:`Renewal` whose
``needs_human`` is true: the person's path, as before.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Generic, Literal, Protocol

import attrs

from session_keeper._browser.backend import PageT
from session_keeper._keeper.logins.recipes import (
    FormField,
    FormRecipe,
    PageSign,
    RenewalPolicy,
    SignInAnswer,
    SignInRecipe,
)
from session_keeper._keeper.permissions.granting import grant_body
from session_keeper._model.cookies import normalize_site
from session_keeper._model.grants import check_name
from session_keeper._security.credentials import CredentialSource, Secret, TotpCodes, TotpSecret
from session_keeper._util.keyed_lock import KeyedLock
from session_keeper._util.log_fields import log_extra
from session_keeper._util.redact import REDACTED, describe_error, redact_text, scrubbing_logger
from session_keeper.errors import (
    BrowserGoneError,
    InvalidArgument,
    LoginAccountMismatch,
    LoginNotObserved,
    LoginProbeFailed,
    PolicyRefusal,
    RenewalRefused,
    UsageError,
)

if TYPE_CHECKING:
    from session_keeper._keeper.logins.login_records import Logins
    from session_keeper._keeper.saving.persistence import KeeperPersistence
    from session_keeper._keeper.state.live import KeeperLive
    from session_keeper._keeper.tabs.conversation_tab import ConversationTab, TabLocator
    from session_keeper._model.facts import LoginRecord

__all__ = ["Renewal", "RenewalOutcome", "Renewals", "TabOpener"]

log = scrubbing_logger("session_keeper")

#: ``renewed``: this call signed the site in again; ``renewed_by_another``: another
#: conversation's renewal did while this one waited; ``still_signed_in``: the probe sees
#: the account, nothing was typed; ``refused``: every attempt was refused; ``unknown_page``:
#: the site showed a page the recipe does not know; ``wrong_account``: the probe sees
#: another account than the login's.
RenewalOutcome = Literal[
    "renewed", "renewed_by_another", "still_signed_in", "refused", "unknown_page", "wrong_account"
]

_RENEWED = frozenset({"renewed", "renewed_by_another", "still_signed_in"})


@attrs.frozen(kw_only=True)
class Renewal:
    """What :meth:`SessionKeeper.renew_login` did.

    ``reason``: why it did not renew — a refusal in the site's own words (the recipe's
    failure sign's text, at most 200 characters), an unknown page, another account —
    never holding a value the recipe typed."""

    site: str
    owner: str
    asked_by: str
    outcome: RenewalOutcome
    attempts: int
    account: str | None = None
    reason: str | None = None

    @property
    def renewed(self) -> bool:
        """Whether the site is signed in now (by this call, another, or still)."""
        return self.outcome in _RENEWED

    @property
    def needs_human(self) -> bool:
        """Whether a person must sign in (the recipe could not)."""
        return not self.renewed


class TabOpener(Protocol):
    """How the renewal reaches the owner's guarded tab (the keeper's public ``tab()``)."""

    async def tab(self, conversation: str, url: str | None = None) -> ConversationTab:
        """The conversation's guarded tab."""
        ...

    async def sign_in_tab(self, conversation: str, url: str | None = None) -> ConversationTab:
        """A guarded sign-in page of the conversation that no model reaches."""
        ...


class _Filler:
    """The :class:`~session_keeper.security.Credentials` a recipe gets: values typed, not shown.

    It remembers what it typed (in memory, for this renewal only) so that a page's
    refusal text can be told without any of it (:func:`_scrub`)."""

    def __init__(
        self, values: Mapping[tuple[str, bool], Secret], totp: Callable[[Secret], Awaitable[Secret]]
    ) -> None:
        self._values = values
        self._totp = totp
        self.typed: list[Secret] = []

    async def fill(self, target: TabLocator, field: str, *, totp: bool = False) -> None:
        value = self._values.get((field, totp))
        if value is None:
            raise InvalidArgument(f"the recipe fills {field!r}, which it does not declare")
        self.typed.append(value)
        if totp:
            value = await self._totp(value)
            self.typed.append(value)
        await target.fill(value.reveal())


#: The most of a site's refusal text a Renewal's reason carries.
REASON_LIMIT = 200
#: How often a wait for the next page asks the site's probe whether the account is in.
PROBE_EVERY_S = 1.0

#: Whether the site's probe sees the account signed in (``None``: the site has no probe).
SignedIn = Callable[[], Awaitable[bool]] | None


def _scrub(text: str, typed: Iterable[Secret]) -> str:
    """``text`` as one line, without any value typed (longest first: a value inside
    another is not left half), bounded; URL queries and known secrets go too."""
    text = " ".join(text.split())
    for value in sorted({t.reveal() for t in typed}, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    return redact_text(text, REASON_LIMIT)


async def _refusal(tab: ConversationTab, sign: PageSign | None, typed: Iterable[Secret]) -> str:
    """Why the site refused, in its own words: the visible text of the failure sign's
    element (a ``url`` sign has none: then the page's title)."""
    text = ""
    try:
        if sign is not None and sign.selector is not None and await _visible(tab, sign.selector):
            text = await tab.locator(sign.selector).first.inner_text(timeout_ms=2000)
        elif sign is not None and sign.text is not None:
            text = await tab.get_by_text(sign.text).first.inner_text(timeout_ms=2000)
        else:
            text = await tab.locator("title").first.text_content(timeout_ms=2000) or ""
    except (BrowserGoneError, PolicyRefusal):
        raise
    except Exception:  # the page moved on while read: the refusal without its words
        text = ""
    text = _scrub(text, typed)
    return f"the site refused: {text}" if text else "the site refused (its page said nothing)"


async def _visible(tab: ConversationTab, selector: str) -> bool:
    return await tab.locator(selector).first.is_visible()


def _locate(tab: ConversationTab, f: FormField) -> TabLocator:
    if f.label is not None:
        return tab.get_by_label(f.label, exact=False).first
    assert f.selector is not None
    return tab.locator(f.selector).first


async def _shows(tab: ConversationTab, sign: PageSign) -> bool:
    if sign.url is not None and re.search(sign.url, tab.url):
        return True
    if sign.selector is not None and await tab.locator(sign.selector).first.is_visible():
        return True
    return sign.text is not None and await tab.get_by_text(sign.text).first.is_visible()


async def _wait(
    tab: ConversationTab,
    signs: Mapping[str, PageSign | FormField | None],
    timeout_s: float,
    signed_in: SignedIn,
) -> str | None:
    """The first of ``signs`` the page shows within ``timeout_s`` (a :class:`FormField`:
    its control is there), or ``"signed_in"`` once the site's probe sees the account:
    asked at once, then every :data:`PROBE_EVERY_S` (``None``: nothing in time)."""
    deadline = time.monotonic() + timeout_s
    next_probe = time.monotonic()
    while True:
        if signed_in is not None and time.monotonic() >= next_probe:
            if await signed_in():
                return "signed_in"
            next_probe = time.monotonic() + PROBE_EVERY_S
        for name, sign in signs.items():
            if isinstance(sign, FormField):
                if await _locate(tab, sign).is_visible():
                    return name
            elif sign is not None and await _shows(tab, sign):
                return name
        if time.monotonic() >= deadline:
            return None
        await asyncio.sleep(0.1)


async def _run_form(
    recipe: FormRecipe, tab: ConversationTab, filler: _Filler, signed_in: SignedIn = None
) -> tuple[SignInAnswer, str | None]:
    """One attempt of a form recipe: the answer, and why when it is not a sign-in.

    Before each step's form is filled, and after the last, the site may show the account
    already signed in (an identity provider's live session signs the app in through
    redirects, with no form at all): its probe, when it has one, or the recipe's success
    sign says so, and nothing more is typed."""
    timeout_s = recipe.timeout.total_seconds()
    await tab.goto(recipe.url)
    total = len(recipe.steps)
    for i, step in enumerate(recipe.steps):
        # A step's form is there once its first field is (looked for first: a form on
        # the page is filled); after a step, the failure sign may show instead (the first
        # step has nothing to refuse yet), or the success sign (signed in without it).
        failure = recipe.failure if i > 0 else None
        signs = {"next": step.fields[0], "failure": failure, "success": recipe.success}
        seen = await _wait(tab, signs, timeout_s, signed_in)
        if seen in ("signed_in", "success"):
            return "signed_in", None
        if seen == "failure":
            return "refused", await _refusal(tab, recipe.failure, filler.typed)
        if seen is None:
            return "unknown_page", (
                f"the form of step {i + 1} of {total} did not show within {timeout_s:g} s"
            )
        for f in step.fields:
            await filler.fill(_locate(tab, f), f.credential, totp=f.totp)
        await tab.click(step.submit)
    seen = await _wait(
        tab, {"success": recipe.success, "failure": recipe.failure}, timeout_s, signed_in
    )
    if seen in ("success", "signed_in"):
        return "signed_in", None
    if seen == "failure":
        return "refused", await _refusal(tab, recipe.failure, filler.typed)
    return "unknown_page", (
        f"after step {total} of {total} the page showed neither the success nor the "
        f"failure sign within {timeout_s:g} s"
    )


class Renewals(Generic[PageT]):
    """Runs sign-in recipes for the keeper (see the module)."""

    def __init__(
        self,
        live: KeeperLive[PageT],
        persist: KeeperPersistence[PageT],
        logins: Logins[PageT],
        *,
        recipes: Mapping[str, SignInRecipe],
        credentials: CredentialSource | None,
        policy: RenewalPolicy,
    ) -> None:
        self._live = live
        self._persist = persist
        self._logins = logins
        self._recipes = recipes
        self._credentials = credentials
        self._policy = policy
        self._locks = KeyedLock()
        self._next_check: dict[str, float] = {}

    async def health_check(self, tabs: TabOpener) -> tuple[Renewal, ...]:
        """See :meth:`SessionKeeper.check_logins` (the public contract)."""
        every = self._policy.health_every
        session = self._live.session
        if every is None or session is None or not session.alive:
            return ()
        now = self._live.clock.monotonic()
        done: list[Renewal] = []
        for record in self._live.ledger.live():
            site = record.site
            if not self._logins.has_login_probe(site):
                continue
            due = self._next_check.get(site)
            # Jittered down by up to a fifth: sites signed in together fall due apart.
            next_due = now + every.total_seconds() * random.uniform(0.8, 1.0)
            if due is None:
                self._next_check[site] = next_due  # first seen: due one interval on
                continue
            if now < due:
                continue
            self._next_check[site] = next_due
            try:
                if site not in self._recipes or self._credentials is None:
                    # Nothing to sign in with: the check alone, its failure told as a loss.
                    await self._logins.check_login(site)
                    continue
                renewal = await self.renew(tabs, record.owner, site)
            except (BrowserGoneError, LoginProbeFailed, PolicyRefusal) as exc:
                log.warning(
                    "login health check failed",
                    extra=log_extra(site=site, error=describe_error(exc)),
                )
                continue
            if renewal.outcome != "still_signed_in":
                done.append(renewal)
        for site in set(self._next_check) - {r.site for r in self._live.ledger.live()}:
            del self._next_check[site]  # bounded by the live logins
        return tuple(done)

    def has_recipe(self, site: str) -> bool:
        """Whether ``site`` has a sign-in recipe (and a credential source to feed it)."""
        site = normalize_site(check_name(site, "site"))
        return site in self._recipes and self._credentials is not None

    def _owner(self, site: str, asked_by: str) -> str:
        record = self._live.ledger.get(site)
        if record is not None:
            return record.owner
        lost = self._live.ledger.lost(site)
        return lost.owner if lost is not None else asked_by

    def _grant(self, asked_by: str, owner: str, site: str) -> dict[str, object] | None:
        """The grant ``asked_by`` asks under (``None`` for the owner of a login the site
        has, live or lost); refused without one. With no login yet, nobody owns the site:
        a renewal would make the asker its owner, so the asker needs a grant like anyone."""
        has_login = (
            self._live.ledger.get(site) is not None or self._live.ledger.lost(site) is not None
        )
        if asked_by == owner and has_login:
            return None
        state = self._live.grants.find(asked_by, site, "write", self._live.clock.now())
        if state is None:
            state = self._live.grants.find(asked_by, site, "read", self._live.clock.now())
        if state is None:
            whose = f"it belongs to {owner}" if has_login else "nobody has signed in there yet"
            raise RenewalRefused(
                f"{asked_by} may not renew the login to {site}: {whose} and "
                f"{asked_by} holds no grant on {site}"
            )
        return {"id": state.id, **grant_body(state.grant)}

    async def renew(self, tabs: TabOpener, conversation: str, site: str) -> Renewal:
        """See :meth:`SessionKeeper.renew_login` (the public contract)."""
        renewal = await self._renew(tabs, conversation, site)
        self._live.instruments.add(
            "session_keeper.login.renewals",
            1,
            {
                "session_keeper.site": renewal.site,
                "session_keeper.renewal.outcome": renewal.outcome,
            },
        )
        return renewal

    async def _renew(self, tabs: TabOpener, conversation: str, site: str) -> Renewal:
        self._live.check_open()
        asked_by = check_name(conversation, "conversation")
        site = normalize_site(check_name(site, "site"))
        recipe = self._recipes.get(site)
        if recipe is None or self._credentials is None:
            raise RenewalRefused(
                f"{site} has no sign-in recipe and credential source to renew with"
            )
        before = self._live.ledger.get(site)
        owner = self._owner(site, asked_by)
        grant = self._grant(asked_by, owner, site)
        async with self._locks.hold(site):
            current = self._live.ledger.get(site)
            if current is not None and current != before:
                return Renewal(
                    site=site, owner=current.owner, asked_by=asked_by,
                    outcome="renewed_by_another", attempts=0, account=current.account,
                )  # fmt: skip
            owner = self._owner(site, asked_by)
            until = self._live.takeovers.get(owner)
            if until is not None and until > self._live.clock.now():
                # A person drives the owner's tab now: typing into it would fight them.
                raise RenewalRefused(
                    f"a person has taken over {owner}'s tab; the renewal of {site} waits "
                    "for the takeover to end"
                )
            if current is not None and self._logins.has_login_probe(site):
                if await self._logins.probe_login(site) is not None:
                    return Renewal(
                        site=site, owner=owner, asked_by=asked_by,
                        outcome="still_signed_in", attempts=0, account=current.account,
                    )  # fmt: skip
                await self._logins.report_signed_out(
                    site, reported_by=asked_by, reason="renewal: the probe sees nobody"
                )
            return await self._attempts(tabs, recipe, site, owner, asked_by, grant, current)

    async def _values(self, recipe: SignInRecipe, site: str) -> dict[tuple[str, bool], Secret]:
        """Every value the recipe may type, fetched and checked before anything is typed."""
        assert self._credentials is not None
        wanted: list[tuple[str, bool]]
        if isinstance(recipe, FormRecipe):
            wanted = [(f.credential, f.totp) for f in recipe.credentials()]
        else:
            wanted = [(name, name == "totp") for name in recipe.fields]
        values = {key: await self._credentials.get(site, key[0]) for key in dict.fromkeys(wanted)}
        for (_, totp), value in values.items():
            if totp:  # a bad secret, URI or period: nothing is typed, not even the password
                TotpSecret.parse(value)
        return values

    async def _attempts(
        self,
        tabs: TabOpener,
        recipe: SignInRecipe,
        site: str,
        owner: str,
        asked_by: str,
        grant: dict[str, object] | None,
        previous: LoginRecord | None,
    ) -> Renewal:
        who = {"site": site, "owner": owner, "asked_by": asked_by, "grant": grant}
        try:
            values = await self._values(recipe, site)
        except Exception as exc:
            self._persist.audit_soon(
                "login_renewal_failed",
                {**who, "attempt": 0, "outcome": "credentials", "error": describe_error(exc)},
            )
            await self._persist.save()
            raise
        # One source of codes for every attempt: no two codes of one window, ever.
        codes = TotpCodes(self._live.clock, margin_s=self._policy.totp_margin.total_seconds())
        account = previous.account if previous is not None else None
        outcome: RenewalOutcome = "refused"
        reason: str | None = None
        attempt = 0
        for attempt in range(1, self._policy.attempts + 1):
            self._persist.audit_soon("login_renewal_attempt", {**who, "attempt": attempt})
            filler = _Filler(values, codes.code)
            answer, reason, page = await self._sign_in(tabs, recipe, owner, site, filler)
            if answer == "signed_in":
                try:
                    record = await self._logins.record_login(owner, site, account=account)
                except LoginAccountMismatch as exc:
                    outcome, reason = "wrong_account", describe_error(exc)
                except LoginNotObserved as exc:
                    outcome, reason = "refused", describe_error(exc)
                else:
                    await _leave_sign_in_page(tabs, owner, page, move=True)
                    self._tell_renewed(site, owner)
                    self._persist.audit_soon("login_renewed", {**who, "attempt": attempt})
                    await self._persist.save()
                    log.info("login renewed", extra=log_extra(site=site, owner=owner))
                    return Renewal(
                        site=site, owner=owner, asked_by=asked_by, outcome="renewed",
                        attempts=attempt, account=record.account,
                    )  # fmt: skip
            else:
                outcome = answer
            await _leave_sign_in_page(tabs, owner, page, move=False)
            self._persist.audit_soon(
                "login_renewal_failed",
                {**who, "attempt": attempt, "outcome": outcome, "reason": reason},
            )
            if outcome in ("unknown_page", "wrong_account"):
                break  # another try meets the same page: a person's turn
            if attempt < self._policy.attempts:
                # A code the site refused (wrong, used, or the account locked) is no
                # better a second time in its window: the next attempt starts in the
                # next one, so its code is fresh as the form asks for it.
                backoff = self._policy.backoff.total_seconds() * 2 ** (attempt - 1)
                # On the keeper's clock, which the windows are measured on.
                await self._live.clock.sleep(max(backoff, codes.wait_s()))
        await self._persist.save()
        log.warning(
            "login renewal failed", extra=log_extra(site=site, owner=owner, outcome=outcome)
        )
        return Renewal(
            site=site, owner=owner, asked_by=asked_by, outcome=outcome,
            attempts=attempt, account=account, reason=reason,
        )  # fmt: skip

    def _tell_renewed(self, site: str, owner: str) -> None:
        """The owner and every grantee on the site hear "renewed" at their next ensure()."""
        holders = self._live.grants.holders(site, self._live.clock.now())
        for c in sorted({owner} | holders):
            pending = self._live.pending_for(c, restarted=False)
            if site not in pending.renewed:
                pending.renewed.append(site)

    def _signed_in(self, site: str) -> Callable[[], Awaitable[bool]]:
        """Whether the site's probe sees an account now (a failed probe: not seen)."""

        async def signed_in() -> bool:
            try:
                return await self._logins.probe_login(site) is not None
            except LoginProbeFailed:
                return False

        return signed_in

    async def _sign_in(
        self, tabs: TabOpener, recipe: SignInRecipe, owner: str, site: str, filler: _Filler
    ) -> tuple[SignInAnswer, str | None, ConversationTab | None]:
        """One attempt of the recipe; the sign-in page it ran on (``None``: the owner's tab,
        on a backend without sign-in pages)."""
        await self._logins.begin_login(owner, site)
        # Typed into a page of its own, never the owner's tab: a page the model drives
        # (or a same-origin popup it opened) holds no reference to it.
        page: ConversationTab | None
        try:
            page = tab = await tabs.sign_in_tab(owner)
        except UsageError:
            page, tab = None, await tabs.tab(owner)  # a backend without sign-in pages
        signed_in = self._signed_in(site) if self._logins.has_login_probe(site) else None
        try:
            if isinstance(recipe, FormRecipe):
                answer, reason = await _run_form(recipe, tab, filler, signed_in)
                return answer, reason, page
            answer = await recipe.sign_in(tab, filler)
            if answer == "unknown_page" and signed_in is not None and await signed_in():
                return "signed_in", None, page  # signed in without the script's form
            why = {
                "refused": "the sign-in script answered refused",
                "unknown_page": "the sign-in script met a page it does not know",
            }
            return answer, why.get(answer), page
        except (BrowserGoneError, InvalidArgument):
            await _leave_sign_in_page(tabs, owner, page, move=False)
            raise
        except PolicyRefusal as exc:
            return "unknown_page", describe_error(exc), page
        except Exception as exc:
            # A selector that matched nothing, a timeout: the page is not the one expected.
            return "unknown_page", f"the recipe stopped: {type(exc).__name__}", page


async def _leave_sign_in_page(
    tabs: TabOpener, owner: str, page: ConversationTab | None, *, move: bool
) -> None:
    """Close the sign-in page; after a recorded login, first move the owner's tab to the
    page the sign-in ended on (the signed-in page), where the conversation goes on."""
    if page is None:
        return
    try:
        url = page.url
        await page.close()
        if move and url.startswith(("http://", "https://")):
            await tabs.tab(owner, url)
    except (BrowserGoneError, PolicyRefusal):
        # The browser died, or the Guard refused the move: the next turn hears of it.
        log.info("the owner's tab was not moved to the signed-in page", exc_info=True)
