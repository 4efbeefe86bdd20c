"""Restart accounting: what a new browser kept of the old one's logins and tabs, measured.

After a restart the keeper measures each recorded login against the new browser's
cookie jar (``_ledger.classify``), asks the site's ``LoginProbe`` about the ones whose
cookies survived, puts back from the vault what its policy allows, and queues for
every affected conversation — the login's owner and every grant holder — the news
it will be told once by ``ensure()``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Generic, Literal

import attrs

from session_keeper._browser.backend import BrowserSession, PageT
from session_keeper._browser.capabilities import capabilities_of
from session_keeper._browser.page_activity import ActivityObserving
from session_keeper._keeper.logins.login_probe import ask_probe
from session_keeper._keeper.logins.login_records import (
    PROBE_CONVERSATION,
    PROBE_TIMEOUT_S,
    LoginProbe,
)
from session_keeper._model.cookies import Cookie
from session_keeper._model.evidence import EvidenceTracker, cookie_id
from session_keeper._model.facts import CookieFingerprint, LoginRecord, Lost
from session_keeper._model.ledger import classify
from session_keeper._util.log_fields import log_extra
from session_keeper._util.redact import scrubbing_logger

if TYPE_CHECKING:
    from session_keeper._keeper.logins.reissues import Reissues
    from session_keeper._keeper.logins.web_storage_logins import StorageLogins
    from session_keeper._keeper.saving.persistence import KeeperPersistence
    from session_keeper._keeper.state.live import KeeperLive
    from session_keeper._security.vault import LoginVault

log = scrubbing_logger("session_keeper")

#: What the keeper found of a recorded login after a restart.
Fate = Literal["survived", "confirmed", "replaced", "signed_out", "lost"]


class RestartAccounting(Generic[PageT]):
    """Measures a new browser against the ledger and queues each conversation's news."""

    def __init__(
        self,
        live: KeeperLive[PageT],
        persist: KeeperPersistence[PageT],
        *,
        login_probes: Mapping[str, LoginProbe[PageT]],
        vault: LoginVault | None,
        remember_jar: Callable[[Iterable[Cookie]], None],
        storage: StorageLogins[PageT],
        reissues: Reissues[PageT] | None = None,
    ) -> None:
        self._storage = storage
        self._reissues = reissues
        #: Fingerprints of surviving logins whose jar holds a value the login was seen
        #: re-issued under, for account_logins.
        self._reissued: dict[str, tuple[CookieFingerprint, ...]] = {}
        self._live = live
        self._persist = persist
        self._login_probes = login_probes
        self._vault = vault
        self._remember_jar = remember_jar
        #: Re-fingerprinted cookies of logins a probe confirmed, for account_logins.
        self._refreshed: dict[str, tuple[CookieFingerprint, ...]] = {}

    @property
    def has_vault(self) -> bool:
        """Whether lost logins may be put back from a vault."""
        return self._vault is not None

    async def measure_logins(self, session: BrowserSession[PageT]) -> dict[str, Fate]:
        """Classify every recorded login against a new browser: its jar, then its probe."""
        records = self._live.ledger.live()
        if not records:
            return {}
        jar = await session.cookies()
        self._remember_jar(jar)  # a probe's error may quote them
        self._refreshed.clear()
        self._reissued.clear()
        fates: dict[str, Fate] = {}
        for record in records:
            fate: Fate = classify(record, jar, self._live.fingerprinter)
            if fate == "replaced" and self._reissues is not None:
                # Another value, but one the keeper saw this login re-issued under in its
                # own pages (see _keeper.logins.reissues): the same login, to be re-validated.
                fresh = self._reissues.explains(record, jar)
                if fresh is not None:
                    fate = "survived"
                    if fresh != record.cookies:
                        self._reissued[record.site] = fresh
            kept = await self._storage.fate(session, record)
            if kept == "replaced" or (kept == "lost" and fate == "survived"):
                fate = kept  # a login is what both its cookies and its storage items say
            probe = self._login_probes.get(record.site)
            if probe is not None:
                # The probe is the final word, also when the jar says lost or replaced:
                # a site may re-issue the same account's cookie with a fresh value.
                fate = await self._run_probe(session, record, probe, fate)
                if fate == "confirmed":
                    await self._refingerprint(session, record)
            fates[record.site] = fate
        return fates

    async def _run_probe(
        self,
        session: BrowserSession[PageT],
        record: LoginRecord,
        probe: LoginProbe[PageT],
        jar_says: Fate,
    ) -> Fate:
        """Ask the site who is signed in: the cookies may be there while the login is not,
        or be another value of the same login."""
        try:
            identity = await ask_probe(session, probe, PROBE_CONVERSATION, PROBE_TIMEOUT_S)
        except Exception:
            log.warning("login probe failed", extra=log_extra(site=record.site), exc_info=True)
            return jar_says
        if jar_says != "survived":
            # Only the same account, named by the record, overturns the jar's verdict.
            same = record.account is not None and identity == record.account
            return "confirmed" if same else jar_says
        if identity is None:
            return "signed_out"
        if record.account is not None and identity != record.account:
            return "replaced"
        return "confirmed" if record.account is not None else "survived"

    async def _refingerprint(self, session: BrowserSession[PageT], record: LoginRecord) -> None:
        """Fingerprint the confirmed login's cookies as the jar holds them after the probe
        (the probe's own request may have been answered with a re-issued value)."""
        jar = await session.cookies()
        self._remember_jar(jar)
        wanted = {(f.name, f.domain, f.path) for f in record.cookies}
        cookies = sorted(
            (c for c in jar if c.applies_to(record.site) and cookie_id(c) in wanted),
            key=cookie_id,
        )
        fresh = tuple(self._live.fingerprinter.fingerprint(c) for c in cookies)
        if fresh and fresh != record.cookies:
            self._refreshed[record.site] = fresh

    async def protect_unexplained(self, jar: Iterable[Cookie], evidence: EvidenceTracker) -> None:
        """Protect the launch jar's logins that no record explains (an earlier process's).

        Of the sites a grant or ``session_cookies`` names, one whose cookies are in the
        jar with no record (live or lost) of it is guarded for every conversation until
        a login is recorded or attributed there: the keeper does not know whose it is.
        """
        ledger = self._live.ledger
        sites = {s.grant.site for s in self._live.grants.states()} | evidence.configured_sites
        explained = [r.site for r in ledger.live()] + [x.name for x in ledger.lost_records()]
        found = evidence.unexplained(list(jar), sites, explained)
        if not found and not ledger.unexplained():
            return
        ledger.set_unexplained(found)
        for site, cookies in sorted(found.items()):
            names = sorted({c.name for c in cookies})
            self._persist.audit_soon("login_unexplained", {"site": site, "cookies": names})
            log.warning("unexplained login at launch", extra=log_extra(site=site, cookies=names))
        # Enforcement widens to the new hosts before any page of this browser is used.
        await ledger.announce_recorded()

    async def restore_from_vault(
        self, session: BrowserSession[PageT], gone: Mapping[str, tuple[LoginRecord, set[str]]]
    ) -> None:
        """Put back, from the vault, lost logins whose policy allows it.

        Runs after the jar was measured, so a restored login can never read as
        survived; it stays in ``lost`` and is reported in ``restored``.
        """
        if self._vault is None:
            return
        restored = await self._vault.restore(session, sorted(gone))
        if not restored:
            return
        jar = await session.cookies()
        for r in restored:
            old, recipients = gone[r.site]
            # The restored login is carried by the cookies that were its evidence,
            # not by whatever else of the site (a CSRF cookie) is in the jar.
            wanted = {(f.name, f.domain, f.path) for f in old.cookies}
            cookies = sorted(
                (c for c in jar if c.applies_to(r.site) and cookie_id(c) in wanted),
                key=lambda c: (c.domain, c.path, c.name),
            )
            self._live.ledger.record(
                attrs.evolve(
                    old,
                    recorded_at=self._live.clock.now(),
                    generation=self._live.generation,
                    cookies=tuple(self._live.fingerprinter.fingerprint(c) for c in cookies),
                    needs_revalidation=True,
                )
            )
            for c in sorted(recipients):
                p = self._live.pending_for(c, restarted=True)
                if r.site not in p.restored:
                    p.restored.append(r.site)
            self._persist.audit_soon(
                "login_restored", {"site": r.site, "cookies": list(r.cookie_names)}
            )
            log.info("login restored from the vault", extra=log_extra(site=r.site))

    def account_restart(
        self,
        old_generation: int,
        fates: Mapping[str, Fate],
        old: BrowserSession[PageT] | None = None,
    ) -> dict[str, tuple[LoginRecord, set[str]]]:
        """Tell every affected conversation what the restart took, as measured.

        Returns the logins that are simply gone (not replaced or signed out), with
        who was told: the ones a vault may put back.
        """
        gone = self.account_logins(old_generation, fates, restarted=True)
        for conversation, tab in self._live.tabs.items():
            self._live.pending_for(conversation, restarted=True).add_loss(
                tab.as_lost(conversation, generation=old_generation)
            )
        if self._live.tabs:
            self._live.instruments.add(
                "session_keeper.losses", len(self._live.tabs), {"session_keeper.loss.kind": "tab"}
            )
        self._live.conversations.drop_all_tabs()
        if old is not None:  # one that saw no input or download names none as taken
            self._account_activity(capabilities_of(old).activity, old_generation)
        log.warning(
            "browser restarted",
            extra=log_extra(
                previous_generation=old_generation,
                generation=self._live.generation,
                affected=sorted(c for c, p in self._live.pending.items() if p.restarted),
            ),
        )
        return gone

    def _account_activity(self, old: ActivityObserving, old_generation: int) -> None:
        """Tell each conversation the typed input and the downloads the old browser took."""
        taken = [
            Lost.input(
                i.field, owner=i.conversation, typed_at=i.at, url=i.url, generation=old_generation
            )
            for i in old.unsubmitted_input()
        ] + [
            Lost.download(
                d.filename,
                owner=d.conversation,
                started_at=d.at,
                url=d.url,
                generation=old_generation,
            )
            for d in old.unsaved_downloads()
        ]
        for loss in taken:
            self._live.pending_for(loss.owner, restarted=True).add_loss(loss)
            self._live.instruments.add(
                "session_keeper.losses", 1, {"session_keeper.loss.kind": loss.kind}
            )

    def _carry(self, record: LoginRecord, reissued: tuple[CookieFingerprint, ...] | None) -> None:
        """Carry ``record`` into the new generation, with the cookies the site re-issued
        meanwhile (audited by name), if it did."""
        if reissued is not None:
            record = attrs.evolve(record, cookies=reissued)
            self._persist.audit_soon(
                "login_reissued", {"site": record.site, "cookies": [c.name for c in reissued]}
            )
        self._live.ledger.carry(record, self._live.generation)

    def account_logins(
        self, old_generation: int, fates: Mapping[str, Fate], *, restarted: bool
    ) -> dict[str, tuple[LoginRecord, set[str]]]:
        """Carry or lose each recorded login as measured; queue who must hear of it.

        ``restarted=False`` when the browser is the same one (a new process re-bound to
        it): survivals and losses are told without a restart.
        """
        gone: dict[str, tuple[LoginRecord, set[str]]] = {}
        now = self._live.clock.now()
        for record in self._live.ledger.live():
            recipients = {record.owner} | self._live.grants.holders(record.site, now)
            fate = fates.get(record.site, "lost")
            if fate == "confirmed":
                # The probe vouched for the same account: nothing to re-validate.
                self._carry(record, self._refreshed.pop(record.site, None))
                self._live.ledger.confirm(record.site)
                for c in sorted(recipients):
                    self._live.pending_for(c, restarted=restarted)
                continue
            if fate == "survived":
                self._carry(record, self._reissued.pop(record.site, None))
                for c in sorted(recipients):
                    p = self._live.pending_for(c, restarted=restarted)
                    if record.site not in p.revalidate:
                        p.revalidate.append(record.site)
                continue
            loss = Lost.login(
                record.site,
                owner=record.owner,
                recorded_at=record.recorded_at,
                generation=old_generation,
                cause="replaced"
                if fate == "replaced"
                else "signed_out"
                if fate == "signed_out"
                else "gone",
            )
            self._live.ledger.mark_lost(loss)
            self._storage.lost(record)
            self._live.instruments.add(
                "session_keeper.losses",
                1,
                {"session_keeper.loss.kind": "login", "session_keeper.loss.cause": loss.cause},
            )
            if loss.cause == "gone":
                gone[record.site] = (record, recipients)
            self._persist.audit_soon(
                "login_lost",
                {
                    "site": loss.name,
                    "owner": loss.owner,
                    "cause": loss.cause,
                    "generation": old_generation,
                },
            )
            for c in sorted(recipients):
                self._live.pending_for(c, restarted=restarted).add_loss(loss)
        return gone
