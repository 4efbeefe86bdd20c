"""Logins: recording a sign-in on evidence, sign-outs, probes and confirmations.

A login is recorded only on evidence (see :mod:`session_keeper._model.evidence`): the
site's session cookies that changed since the sign-in began, or the site's
``LoginProbe`` vouching now. The ledger keeps keyed fingerprints, never values.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Generic

import attrs

from session_keeper._browser.backend import BrowserSession, PageT
from session_keeper._browser.capabilities import capabilities_of
from session_keeper._browser.sign_in_watch import SignInObserving
from session_keeper._keeper.logins.login_probe import ask_probe
from session_keeper._model.cookies import Cookie, normalize_site
from session_keeper._model.evidence import not_observed
from session_keeper._model.facts import PROBE_CONVERSATION as PROBE_CONVERSATION
from session_keeper._model.facts import LoginRecord, Lost
from session_keeper._model.fingerprint import path_without_value
from session_keeper._model.grants import check_name
from session_keeper._model.ledger import SignInWindow
from session_keeper._model.sign_in import login_page_cookies, sign_in_failure
from session_keeper._util.log_fields import log_extra
from session_keeper._util.redact import redact_text, scrubbing_logger
from session_keeper.errors import (
    InvalidArgument,
    InvalidArgumentType,
    LoginAccountMismatch,
    LoginNotObserved,
    LoginNotYours,
    LoginProbeFailed,
)

if TYPE_CHECKING:
    from session_keeper._keeper.logins.web_storage_logins import StorageLogins
    from session_keeper._keeper.saving.persistence import KeeperPersistence
    from session_keeper._keeper.state.live import KeeperLive
    from session_keeper._keeper.tabs.navigation_baselines import NavigationBaselines
    from session_keeper._model.evidence import EvidenceTracker
    from session_keeper._security.vault import LoginVault

log = scrubbing_logger("session_keeper")

#: How long a LoginProbe may take before its login counts as unverified (survived).
PROBE_TIMEOUT_S = 15.0


#: Asks a site "still signed in, and as whom?": given a page of the new browser, return
#: the signed-in account's identity, or ``None`` when nobody is signed in.
LoginProbe = Callable[[PageT], Awaitable[str | None]]


class Logins(Generic[PageT]):
    """Records, probes, signs out and confirms the browser's logins (see the module)."""

    def __init__(
        self,
        live: KeeperLive[PageT],
        persist: KeeperPersistence[PageT],
        evidence: EvidenceTracker,
        *,
        login_probes: Mapping[str, LoginProbe[PageT]],
        session_cookies: Mapping[str, frozenset[str]],
        vault: LoginVault | None,
        storage: StorageLogins[PageT],
        baselines: NavigationBaselines[PageT],
        sign_in_timeout: timedelta = timedelta(minutes=15),
    ) -> None:
        self._sign_in_timeout = sign_in_timeout
        self._baselines = baselines
        self._storage = storage
        self._live = live
        self._persist = persist
        self._evidence = evidence
        self._login_probes = login_probes
        self._session_cookies = session_cookies
        self._vault = vault

    async def begin_login(self, conversation: str, site: str) -> None:
        """See :meth:`SessionKeeper.begin_login` (the public contract)."""
        conversation = check_name(conversation, "conversation")
        site = normalize_site(check_name(site, "site"))
        session = self._live.session_for(conversation)
        generation = self._live.generation
        jar = await session.cookies()
        self._live.still_current(session, generation)
        sign_in = capabilities_of(session).sign_in
        seq = sign_in.document_seq() if sign_in is not None else None
        self._evidence.begin(conversation, site, jar, seq)
        await self._storage.begin(session, conversation, site)
        self._live.still_current(session, generation)
        # From now on whatever the sign-in sets, on the site and on every host its pages
        # reach (an identity provider), is this conversation's: guarded before it exists.
        self._live.ledger.open_sign_in(conversation, site, self._live.clock.now())
        await self._live.ledger.announce_recorded()

    async def cancel_login(self, conversation: str, site: str) -> tuple[str, ...]:
        """See :meth:`SessionKeeper.cancel_login` (the public contract)."""
        conversation = check_name(conversation, "conversation")
        site = normalize_site(check_name(site, "site"))
        return await self._end_sign_in(conversation, site, why="cancelled")

    async def expire_sign_ins(self) -> tuple[SignInWindow, ...]:
        """End every sign-in in progress for longer than ``LoginSettings.sign_in_timeout``
        (nothing recorded): what it set is taken out of the jar. Returns those ended."""
        now = self._live.clock.now()
        ended = []
        for window in self._live.ledger.sign_ins():
            if now - window.opened_at >= self._sign_in_timeout:
                await self._end_sign_in(window.conversation, window.site, why="timed_out")
                ended.append(window)
        return tuple(ended)

    async def _end_sign_in(self, conversation: str, site: str, *, why: str) -> tuple[str, ...]:
        """Close a sign-in that recorded nothing: delete from the jar every cookie it set
        (on the site and on its chain), so no credential outlives it without an owner.
        Returns the names of the cookies deleted (never values)."""
        window = self._live.ledger.close_sign_in(conversation, site)
        if window is None:
            return ()
        session = self._live.session
        discarded: list[Cookie] = []
        jar: Sequence[Cookie] = ()
        if session is not None and session.alive:
            jar = await session.cookies()
            discarded = self._evidence.set_in_window(conversation, site, jar, window.hosts)
            if discarded:
                # An expired cookie deletes its namesake, as a site's own Set-Cookie does.
                await session.add_cookies(
                    [attrs.evolve(c, value="", expires=1.0) for c in discarded]
                )
        self._evidence.abandon(conversation, site)
        await self._live.ledger.announce_recorded()
        names = tuple(sorted({c.name for c in discarded}))
        self._persist.audit_soon(
            "sign_in_ended",
            {
                "site": site,
                "conversation": conversation,
                "why": why,
                "hosts": sorted(window.hosts),
                "discarded": [
                    {
                        "name": c.name,
                        "domain": c.domain.lstrip("."),
                        "path": path_without_value(c, jar),
                    }
                    for c in discarded
                ],
            },
        )
        log.info(
            "sign-in ended without a login",
            extra=log_extra(site=site, owner=conversation, reason=why),
        )
        return names

    async def record_login(
        self, conversation: str, site: str, *, account: str | None = None
    ) -> LoginRecord:
        """See :meth:`SessionKeeper.record_login` (the public contract)."""
        conversation = check_name(conversation, "conversation")
        site = normalize_site(check_name(site, "site"))
        if account is not None:
            check_name(account, "account")
        session = self._live.session_for(conversation)
        await self._persist.writes.settle()
        generation = self._live.generation
        self._live.last_used = self._live.clock.monotonic()
        # The baselines of the navigations before this call, then the jar after them.
        await self._baselines.settle()
        jar = await session.cookies()
        # Cookies read from a browser that died during the await vouch for nothing.
        self._live.still_current(session, generation)
        names = self._session_cookies.get(site)
        changed, candidates, since = self._evidence.select(conversation, site, jar, names)
        probe = self._login_probes.get(site)
        sign_in = capabilities_of(session).sign_in
        if sign_in is not None:
            await self._check_pages(sign_in, conversation, site)
            self._live.still_current(self._live.session_for(conversation), generation)
            page_set = self._login_page_cookies(sign_in, conversation, site, changed)
            changed = [c for c in changed if c.name not in page_set]
        else:
            page_set = set()
        # An SPA's token in web storage is evidence like a session cookie (when no cookie is).
        storage = await self._storage.evidence(
            session, conversation, site, cookies_changed=bool(changed)
        )
        self._live.still_current(self._live.session_for(conversation), generation)
        if page_set and not changed and not storage and probe is None:
            raise LoginNotObserved(
                f"the cookies of {site} that changed since begin_login() "
                f"({', '.join(sorted(page_set))}) were set by its login page before the "
                "credentials were sent, and the sign-in did not set them again: a "
                "failed sign-in keeps them too. Nothing recorded (a LoginProbe for the "
                "site can vouch for such a login)"
            )
        if not changed and not storage and (probe is None or not candidates):
            others = self._evidence.others_changed(conversation, site, jar) if names else ()
            raise not_observed(
                site, since, self._live.browser_id, session_names=names, others=others
            )
        previous = self._other_owner(conversation, site)
        if previous is not None:
            # The jar is shared: what changed may be the owner's own doing (a re-issued
            # session or CSRF cookie). Only this conversation's own sign-in window, on a
            # site its pages may reach, with a cookie it saw change, can replace a login.
            self._check_replacement(conversation, site, previous, since, bool(changed or storage))
        vouched = False
        if probe is not None:
            try:
                identity = await self._probe(session, generation, site, probe)
            except LoginProbeFailed as exc:
                # A probe that fails proves nothing: no login is recorded on it.
                raise LoginNotObserved(f"{exc}; nothing recorded") from exc
            if identity is None:
                raise LoginNotObserved(
                    f"the login probe for {site} sees nobody signed in; nothing recorded"
                )
            if account is not None and identity != account:
                raise LoginAccountMismatch(
                    f"the login probe for {site} sees another account than the one given; "
                    "nothing recorded"
                )
            account = identity
            vouched = True
        # Nothing changed but the probe sees the account: the site's session cookies
        # present now are what carries it (the probe is the evidence). A web-storage
        # token is its own evidence: the site's other cookies are not the login then.
        evidence = changed if changed or storage else candidates
        # What the sign-in set on the other hosts of its chain (an identity provider's
        # session) is part of this login: guarded with it, lost and cleared with it.
        window = next(
            (
                w
                for w in self._live.ledger.sign_ins()
                if (w.conversation, w.site) == (conversation, site)
            ),
            None,
        )
        chain = (
            self._evidence.chain_changed(conversation, site, jar, window.hosts)
            if window is not None
            else []
        )
        record = LoginRecord(
            site=site,
            owner=conversation,
            account=account,
            recorded_at=self._live.clock.now(),
            generation=generation,
            cookies=tuple(
                self._live.fingerprinter.fingerprint(c, jar=jar) for c in (*evidence, *chain)
            ),
            storage=storage,
        )
        self._live.ledger.record(record)
        self._live.ledger.close_sign_in(conversation, site)
        self._evidence.recorded(conversation, site, evidence)
        self._storage.recorded(conversation, site)
        # Enforcement covers the new login before this returns (the Guard's watch).
        await self._live.ledger.announce_recorded()
        if self._vault is not None and self._vault.allows(site):
            # Sealed (AES-GCM) so a policy-approved site can be put back after a crash.
            await self._vault.save(session, site)
        if previous is not None:
            self._persist.audit_soon(
                "login_replaced",
                {"site": site, "previous_owner": previous, "owner": conversation, "since": since},
            )
        self._persist.audit_soon(
            "login_recorded",
            {
                "site": site,
                "owner": conversation,
                "evidence": "probe"
                if vouched and not changed and not storage
                else f"changed since {since}",
                "cookies": [
                    {"name": c.name, "domain": c.domain, "path": c.path, "fp": c.fingerprint}
                    for c in record.cookies
                ],
                "storage": [
                    {"origin": i.origin, "area": i.area, "key": i.key, "fp": i.fingerprint}
                    for i in record.storage
                ],
            },
        )
        await self._persist.save()
        log.info(
            "login recorded",
            extra=log_extra(site=site, owner=conversation, generation=self._live.generation),
        )
        return record

    async def _check_pages(self, session: SignInObserving, conversation: str, site: str) -> None:
        """Raise :class:`LoginNotObserved` for a sign-in its pages show failed: the site's
        last document response was an error status, or its page shows a password input."""
        await session.settle()
        form = await session.shows_password_form(conversation, site)
        failure = sign_in_failure(session.documents(conversation), site, password_form=form)
        if failure is not None:
            raise LoginNotObserved(f"{failure}: a failed sign-in records nothing; nothing recorded")

    def _login_page_cookies(
        self, session: SignInObserving, conversation: str, site: str, changed: list[Cookie]
    ) -> set[str]:
        """Names among ``changed`` that the login page set before the credentials were
        sent and nothing set again (only when :meth:`begin_login` marked the window)."""
        start = self._evidence.begun_at(conversation, site)
        if start is None:
            return set()
        seen = [d for d in session.documents(conversation) if d.seq >= start]
        return {c.name for c in changed} & login_page_cookies(seen, site)

    def _other_owner(self, conversation: str, site: str) -> str | None:
        """Another conversation whose login (live, or lost and not yet signed in again) is
        at ``site``; ``None`` when the site is free or the caller's own."""
        record = self._live.ledger.get(site)
        owner = record.owner if record is not None else None
        if owner is None:
            lost = self._live.ledger.lost(site)
            owner = lost.owner if lost is not None else None
        return owner if owner is not None and owner != conversation else None

    def _check_replacement(
        self, conversation: str, site: str, previous: str, since: str, changed: bool
    ) -> None:
        """Raise :class:`LoginNotYours` unless this is fresh evidence of the caller's own
        sign-in (see the exception); names only, never a value."""
        where = f"the login to {site} belongs to {previous}"
        if since == "launch":
            raise LoginNotYours(
                f"{where}, and {conversation} began no sign-in there (call begin_login() "
                "before the sign-in, or sign in through its own tab): a change since the "
                "browser started may be the owner's; nothing recorded"
            )
        # A sign-in posts credentials: a page that may only read the site cannot have
        # done it, so a read-only grantee's window holds only the owner's changes.
        if self._live.grants.find(conversation, site, "write", self._live.clock.now()) is None:
            raise LoginNotYours(
                f"{where}, and {conversation} holds no grant to write on {site}: its pages "
                "cannot have signed in there; nothing recorded"
            )
        if not changed:
            raise LoginNotYours(
                f"{where}: the probe sees someone signed in, not who signed in, and no "
                f"cookie changed in {conversation}'s sign-in; nothing recorded"
            )

    async def attribute_login(
        self, site: str, *, owner: str, by: str, account: str | None = None
    ) -> LoginRecord:
        """See :meth:`SessionKeeper.attribute_login` (the public contract)."""
        self._live.check_open()
        site = normalize_site(check_name(site, "site"))
        owner = check_name(owner, "owner")
        by = check_name(by, "by")
        if account is not None:
            check_name(account, "account")
        cookies = self._live.ledger.unexplained().get(site)
        if cookies is None:
            raise InvalidArgument(
                f"{site} has no unexplained login to attribute (record_login() records a sign-in)"
            )
        record = LoginRecord(
            site=site,
            owner=owner,
            account=account,
            recorded_at=self._live.clock.now(),
            generation=self._live.generation,
            cookies=cookies,
        )
        self._live.ledger.record(record)
        await self._live.ledger.announce_recorded()
        self._persist.audit_soon(
            "login_attributed",
            {"site": site, "owner": owner, "by": by, "cookies": [c.name for c in cookies]},
        )
        await self._persist.save()
        log.info("login attributed", extra=log_extra(site=site, owner=owner, by=by))
        return record

    def has_login_probe(self, site: str) -> bool:
        """Whether a ``LoginProbe`` is configured for ``site``."""
        return normalize_site(check_name(site, "site")) in self._login_probes

    async def probe_login(self, site: str) -> str | None:
        """See :meth:`SessionKeeper.probe_login` (the public contract)."""
        site = normalize_site(check_name(site, "site"))
        probe = self._login_probes.get(site)
        if probe is None:
            raise InvalidArgument(f"no LoginProbe is configured for {site}")
        session = self._live.session_for(PROBE_CONVERSATION)
        return await self._probe(session, self._live.generation, site, probe)

    async def _probe(
        self,
        session: BrowserSession[PageT],
        generation: int,
        site: str,
        probe: LoginProbe[PageT],
    ) -> str | None:
        try:
            identity = await ask_probe(session, probe, PROBE_CONVERSATION, PROBE_TIMEOUT_S)
        except Exception as exc:
            self._live.still_current(session, generation)  # a dead browser is BrowserGoneError
            raise LoginProbeFailed(
                f"the login probe for {site} failed ({type(exc).__name__})"
            ) from exc
        self._live.still_current(session, generation)
        return identity

    async def check_login(self, site: str) -> Lost | None:
        """Probe ``site``'s live login; when the probe sees nobody, or another account
        than the login's, mark it lost as :meth:`report_signed_out` does (its owner and
        every grantee are told on their next turn) and return the loss.

        A health check that needs no recipe and no credentials: it signs nothing in.
        Raises :class:`LoginProbeFailed` when the probe tells nothing.
        """
        site = normalize_site(check_name(site, "site"))
        record = self._live.ledger.get(site)
        if record is None:
            return None
        identity = await self.probe_login(site)
        if identity is not None and (record.account is None or identity == record.account):
            return None
        current = self._live.ledger.get(site)
        if current != record:
            return None  # recorded again (or lost) while the probe ran: not this login
        reason = (
            "health check: the probe sees nobody signed in"
            if identity is None
            else "health check: the probe sees another account"
        )
        return await self.report_signed_out(site, reported_by=PROBE_CONVERSATION, reason=reason)

    async def report_signed_out(
        self, site: str, *, reported_by: str, reason: str | None = None
    ) -> Lost | None:
        """See :meth:`SessionKeeper.report_signed_out` (the public contract)."""
        self._live.check_open()
        site = normalize_site(check_name(site, "site"))
        reported_by = check_name(reported_by, "reported_by")
        if reason is not None and not isinstance(reason, str):
            raise InvalidArgumentType("reason must be a str or None")
        record = self._live.ledger.get(site)
        if record is None:
            return None
        loss = Lost.login(
            site,
            owner=record.owner,
            recorded_at=record.recorded_at,
            generation=record.generation,
            cause="signed_out",
        )
        recipients = {record.owner} | self._live.grants.holders(site, self._live.clock.now())
        self._live.ledger.mark_lost(loss)
        self._live.uses.end_site(site)  # an act armed on the dead login admits nothing
        for c in sorted(recipients):
            self._live.pending_for(c, restarted=False).add_loss(loss)
        self._persist.audit_soon(
            "login_signed_out",
            {
                "site": site,
                "owner": record.owner,
                "reported_by": reported_by,
                "reason": redact_text(reason) if reason is not None else None,
                "generation": record.generation,
            },
        )
        await self._persist.save()
        log.warning(
            "login signed out",
            extra=log_extra(site=site, owner=record.owner, reported_by=reported_by),
        )
        return loss

    def confirm_login(self, conversation: str, site: str) -> LoginRecord:
        """Mark a login that survived a restart as re-validated (by a probe or a person)."""
        check_name(conversation, "conversation")
        site = normalize_site(check_name(site, "site"))
        rec = self._live.ledger.confirm(site)
        if rec is None:
            raise InvalidArgument(f"no live login for {site} to confirm")
        self._persist.audit_soon("login_confirmed", {"site": site, "by": conversation})
        self._persist.save_soon()
        return rec
