"""The keeper's logins, as its facade offers them: the ledger's views, recording a
sign-in on evidence, probes, a site's sign-out, a person attributing a login.

Part of :class:`~session_keeper.SessionKeeper` (one of its base classes): the methods
live here so that each part of the facade stays readable; the work is the keeper's
login part's, over the shared live state's ledger.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterable
from typing import Generic
from urllib.parse import urlsplit

from session_keeper._browser.backend import PageT
from session_keeper._keeper.logins.login_records import Logins
from session_keeper._keeper.logins.renewal import Renewal, Renewals, TabOpener
from session_keeper._keeper.logins.storage_state_io import StorageStates
from session_keeper._keeper.state.live import KeeperLive
from session_keeper._model.cookies import normalize_site
from session_keeper._model.facts import CookieFingerprint, LoginRecord, Lost
from session_keeper._model.ledger import SignInWindow
from session_keeper._util.log_fields import log_fields

__all__ = ["KeeperLogins"]


class KeeperLogins(Generic[PageT]):
    """The login part of :class:`~session_keeper.SessionKeeper` (see the module)."""

    _live: KeeperLive[PageT]
    _logins: Logins[PageT]
    _renewals: Renewals[PageT]
    _states: StorageStates[PageT]

    # -- the ledger -----------------------------------------------------------------

    def logins(self) -> tuple[LoginRecord, ...]:
        """The logins recorded in the live generation (fingerprints only)."""
        return self._live.ledger.live()

    @property
    def logins_version(self) -> int:
        """A counter that grows whenever :meth:`logins` or :meth:`lost_logins` may have
        changed: a cache over them (an enforcement layer's) is current while it holds."""
        return self._live.ledger.version

    def lost_logins(self) -> tuple[Lost, ...]:
        """Logins a restart took (or found replaced) that nobody has recorded again.

        Some of their cookies may still be in the jar (a persistent one that survived,
        another account's): enforcement layers keep guarding those sites.
        """
        return self._live.ledger.lost_records()

    def unexplained_logins(self) -> dict[str, tuple[CookieFingerprint, ...]]:
        """Sites whose cookies were in the jar at launch with no record of a login there.

        Only sites a grant or ``LoginSettings.session_cookies`` names. The keeper does
        not know whose login it is, so enforcement layers block every conversation's
        requests that would carry those cookies until :meth:`record_login` or
        :meth:`attribute_login`.
        """
        return self._live.ledger.unexplained()

    # -- signing in and out ---------------------------------------------------------

    async def begin_login(self, conversation: str, site: str) -> None:
        """Mark the start of a sign-in: the site's cookies now are never evidence of it.

        From this call until the login is recorded (or :meth:`cancel_login`, the sweep's
        ``LoginSettings.sign_in_timeout``, a new browser), whatever credential appears on
        the site, and on every host the conversation's pages reach meanwhile (an identity
        provider and its redirects), is this conversation's: an enforcement layer guards
        those hosts for it alone, before the credential exists, and
        :meth:`record_login` records the chain's cookies with the login.

        Optional. Without it the sign-in is taken to begin at the conversation's last
        ``tab(url)`` navigation to the site, or else when the browser launched; call it
        when the conversation navigates the site between the sign-in and
        :meth:`record_login`. Raises :class:`BrowserGoneError` when the browser is gone.
        """
        await self._logins.begin_login(conversation, site)

    async def cancel_login(self, conversation: str, site: str) -> tuple[str, ...]:
        """End a sign-in begun with :meth:`begin_login` without recording a login.

        Whatever it set (cookies of the site and of every host its pages reached, such as
        an identity provider) is deleted from the jar, so no credential outlives it without
        an owner; the sweep does the same to a sign-in in progress for longer than
        ``LoginSettings.sign_in_timeout``. Returns the names of the cookies deleted (never
        values); ``()`` when no sign-in of ``conversation`` to ``site`` was in progress.
        Audited (``sign_in_ended``).
        """
        return await self._logins.cancel_login(conversation, site)

    def sign_ins(self) -> tuple[SignInWindow, ...]:
        """The sign-ins in progress (:meth:`begin_login` until recorded or ended), with the
        hosts each has reached: their credentials are their conversation's alone."""
        return self._live.ledger.sign_ins()

    def any_sign_in(self) -> bool:
        """Whether any sign-in is in progress (no allocation: asked on every request)."""
        return self._live.ledger.any_sign_in()

    def signing_in(self, host: str) -> frozenset[str]:
        """The conversations whose sign-in in progress may have set what a request to
        ``host`` carries (no allocation when none is in progress)."""
        return self._live.ledger.signing_in(host)

    def reach_sign_in(self, conversation: str, url: str, *, from_url: str | None = None) -> bool:
        """A document of ``conversation``'s pages is about to go to ``url`` from a page
        showing ``from_url``: while it is signing in, and that page is on the sign-in's
        chain (or blank: a new popup), the host joins the chain (guarded for it alone from
        now). Returns whether a sign-in widened (enforcement then covers the host at once)."""
        ledger = self._live.ledger
        if not ledger.signing_in_conversation(conversation):
            return False  # nearly every document: no parsing
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return False
        source = urlsplit(from_url or "")
        from_host = (
            normalize_site(source.hostname)
            if source.scheme in ("http", "https") and source.hostname
            else None
        )
        return ledger.reach(conversation, normalize_site(parts.hostname), from_host=from_host)

    def lost_login_chain(self, site: str) -> frozenset[str]:
        """The other hosts of a lost login's sign-in chain (an identity provider): guarded
        with the loss, since some of their cookies may still be in the jar."""
        return self._live.ledger.lost_chain(site)

    async def record_login(
        self, conversation: str, site: str, *, account: str | None = None
    ) -> LoginRecord:
        """Record that a human finished signing ``conversation`` in to ``site``, on evidence.

        The evidence: the site's session cookies (only those named in
        ``LoginSettings.session_cookies``, when configured) that appeared or changed
        since the sign-in began (:meth:`begin_login`, else the conversation's last
        ``tab(url)`` navigation to the site, else the browser's launch); and, when the
        site has a ``LoginProbe``, the probe run now must see someone signed in —
        its identity fills ``account`` when none is given. The record keeps keyed
        fingerprints of the evidence cookies only, never their values.

        Raises :class:`LoginNotObserved` (nothing recorded) when no such cookie changed
        and no probe vouches, when no configured session cookie is present, or when
        the probe sees nobody, raises or times out; :class:`LoginAccountMismatch` when
        the probe sees another account than ``account``; :class:`BrowserGoneError`
        when the browser died meanwhile.
        """
        with (
            self._live.instruments.span("session_keeper.record_login") as span,
            log_fields(conversation=conversation, site=site),
        ):
            if span.is_recording():
                span.set_attributes(
                    {"session_keeper.conversation": conversation, "server.address": site}
                )
            record = await self._logins.record_login(conversation, site, account=account)
            if span.is_recording():
                span.set_attribute(
                    "session_keeper.login.cookies", sorted(c.name for c in record.cookies)
                )
            return record

    async def attribute_login(
        self, site: str, *, owner: str, by: str, account: str | None = None
    ) -> LoginRecord:
        """A person says whose an unexplained login (:meth:`unexplained_logins`) is.

        Records it for ``owner`` from the cookies found at launch, audited with ``by``
        (the person). Raises :class:`InvalidArgument` when ``site`` has no unexplained
        login, and for a bad name.
        """
        return await self._logins.attribute_login(site, owner=owner, by=by, account=account)

    def has_login_probe(self, site: str) -> bool:
        """Whether a ``LoginProbe`` is configured for ``site``."""
        return self._logins.has_login_probe(site)

    async def probe_login(self, site: str) -> str | None:
        """Ask the site's ``LoginProbe`` now who is signed in (``None``: nobody).

        A query: it changes nothing (see :meth:`report_signed_out`). Raises
        :class:`InvalidArgument` when no probe is configured for ``site``,
        :class:`BrowserGoneError` when the browser is gone, and
        :class:`LoginProbeFailed` when the probe raised or timed out.
        """
        return await self._logins.probe_login(site)

    async def report_signed_out(
        self, site: str, *, reported_by: str, reason: str | None = None
    ) -> Lost | None:
        """The site signed its login out (server-side expiry, its sign-in form shown).

        For a step, a probe or the application that saw it. The site's live login
        becomes lost with cause ``"signed_out"``: its owner and every conversation
        holding a grant on the site are told once, through :meth:`ensure` (``restarted``
        stays ``False``); ``decide``/``permits``/``admit`` stop answering ``act`` until a
        login is recorded again, and the site stays guarded (:meth:`lost_logins`).
        Saved and audited before it returns. Returns the loss, or ``None`` when the
        site had no live login (nothing changes). Raises :class:`InvalidArgument` /
        :class:`InvalidArgumentType` for a bad site, ``reported_by`` or ``reason``.
        """
        return await self._logins.report_signed_out(site, reported_by=reported_by, reason=reason)

    def confirm_login(self, conversation: str, site: str) -> LoginRecord:
        """Mark a login that survived a restart as re-validated (by a probe or a person)."""
        return self._logins.confirm_login(conversation, site)

    # -- renewal ----------------------------------------------------------------------

    def has_sign_in_recipe(self, site: str) -> bool:
        """Whether ``site`` has a sign-in recipe and a credential source to renew with."""
        return self._renewals.has_recipe(site)

    async def renew_login(self, conversation: str, site: str) -> Renewal:
        """Sign ``site`` in again from its recipe, in the login owner's guarded tab.

        ``conversation`` asks: the login's owner, or a conversation holding a grant on
        the site (it is named in the audit entries, with its grant). The owner is the
        site's live or lost login's owner (the asker when there is none). One renewal
        at a time per site: a call that waited for another's renewal returns
        ``renewed_by_another`` without signing in again. A live login the site's probe
        still sees is ``still_signed_in``; one it does not is reported signed out
        (:meth:`report_signed_out`) first. Each attempt (at most
        ``LoginSettings.renewal.attempts``, a refused one retried after a doubling
        backoff) types the credentials straight into the page and records the login on
        evidence as :meth:`record_login` does. Returns a :class:`~session_keeper.facts.Renewal`;
        one whose ``needs_human`` is true (refused every time, an unknown page, another
        account) leaves the site to a person, as before.

        Raises :class:`~session_keeper.errors.RenewalRefused` when the site has no recipe,
        the asker no grant, or a person has taken over the owner's tab; what the
        credential source raises (:class:`~session_keeper.errors.CredentialMissing`,
        :class:`~session_keeper.errors.SealBroken`) before anything is typed;
        :class:`BrowserGoneError` when the browser died.
        """
        opener: TabOpener = self  # type: ignore[assignment]
        return await self._renewals.renew(opener, conversation, site)

    async def check_logins(self) -> tuple[Renewal, ...]:
        """Probe the live logins whose ``LoginSettings.renewal.health_every`` is due, and
        renew those the site signed out (see :meth:`renew_login`, asked by the owner).

        For sites with a ``LoginProbe``; each site falls due once per interval
        (jittered), counted on the keeper's clock from when it was first seen. A site
        with no recipe (or no credential source) is checked without one: a probe that
        sees nobody, or another account than the login's, marks the login lost as
        :meth:`report_signed_out` does, told to its owner and every grantee at their next
        :meth:`ensure`. :meth:`sweep` runs it after closing what is idle. Returns the
        renewals that did something (a login the probe still sees, and a check without a
        recipe, are not listed); nothing without a live browser. A probe that fails or a
        browser that dies is logged and skipped.
        """
        opener: TabOpener = self  # type: ignore[assignment]
        return await self._renewals.health_check(opener)

    # -- extension point ------------------------------------------------------------

    def add_login_hook(self, hook: Callable[[], Awaitable[None]]) -> None:
        """Run ``await hook()`` after each login is recorded, before ``record_login`` returns.

        Enforcement layers use it to cover the new login's hosts at once.
        """
        self._live.ledger.recorded_hooks.append(hook)

    def remove_login_hook(self, hook: Callable[[], Awaitable[None]]) -> None:
        """Stop running ``hook`` (added by :meth:`add_login_hook`); nothing if it is not there.

        A login recorded while the removal happens may still run it that once.
        """
        with contextlib.suppress(ValueError):
            self._live.ledger.recorded_hooks.remove(hook)

    # -- logins in and out (Playwright storageState, sealed) --------------------------

    async def export_logins(self, conversation: str, sites: Iterable[str] | None = None) -> str:
        """``conversation``'s own live logins (all, or ``sites``) as a sealed Playwright
        ``storageState``: the cookies sent to each site and the ``localStorage`` of the
        origins a login was kept in — for trusted application code to keep, e.g. to sign a
        new profile in without a person. Sealed with the keeper's keyring (AES-GCM), so
        the text may be written to disk; :func:`~session_keeper.security.open_storage_state`
        gives the plain ``storageState`` back. In the audit chain (names, never values).

        Raises :class:`~session_keeper.errors.UsageError` without a keyring
        (``Durability(keyring=)``), :class:`~session_keeper.errors.LoginNotYours` for a site
        the conversation holds no live login of, :class:`BrowserGoneError` as
        :meth:`unguarded_page` does.
        """
        return await self._states.export(conversation, sites)

    async def import_logins(self, conversation: str, sealed: str) -> tuple[str, ...]:
        """Put a state :meth:`export_logins` gave back into the browser, for
        ``conversation``; return the sites imported.

        Never signed-out over good state: a site whose live login the keeper knows (and
        its probe, when it has one, still sees) is left alone, and an imported site the
        probe then sees signed out is rolled back to the cookies it had. An imported login
        is recorded as the conversation's, flagged for re-validation, with an audit entry.

        Raises :class:`~session_keeper.errors.SealBroken` /
        :class:`~session_keeper.errors.UnknownKey` for an altered or foreign seal and
        :class:`~session_keeper.errors.InvalidArgument` for a sealed text that is not an
        exported state (nothing written then); ``UsageError`` without a keyring.
        """
        return await self._states.import_(conversation, sealed)
