"""Re-issued login cookies: the same login under a new value, seen happening in its own pages.

Many sites give a signed-in browser a fresh value of its login cookie for the same account:
DokuWiki on every password re-check, remember-me cookies re-encrypted in each browser
session, rotating session ids. Compared after a restart with the value recorded at sign-in,
such a cookie reads as *another* sign-in (``replaced``: lost). The keeper cannot ask the
cookie whose account it is; it can watch where the new value came from.

**The rule.** A new value of a recorded login's cookie is the *same login, re-issued* when
the keeper saw it set on a document response

- from the login's site,
- to a page of a conversation the login serves (its owner, or a conversation holding a
  grant on the site): pages that act with the login, where no one signs in unseen,
- for a ``GET`` (a page view; a form post may carry credentials, so what it sets is
  treated as a sign-in),
- while no sign-in to the site is open (no ``begin_login`` waiting for its
  ``record_login``).

The keeper then reads the jar once (a round trip only when a login cookie was set) and
fingerprints the new value into the record (audited ``login_reissued``), remembering every
value the login had: after a SIGKILL the profile may hold any of them (Chromium flushes
its cookie store lazily), and each is the same login. A value set any other way — by a
form post, in a sign-in window, in another conversation's page — makes the login
*suspect*: no later value is taken as a re-issue until the login is recorded again, and a
restart calls a changed cookie ``replaced``, as before. A value the keeper never saw set
(by a ``fetch``, or while its browser was not watched) is not one of the login's: a
restart that finds it says ``replaced`` too.

A re-issued login that survives a restart is ``survived`` (re-validate before acting),
never ``confirmed``: the rule cannot tell an account switch made by a page view (an
account chooser's link) from a re-issue, so the keeper says what it knows, not more. A
site's ``LoginProbe``, when configured, decides after that, as it does for every login.

Sessions that report document responses (:class:`DocumentObserving`: Chromium's) see
re-issues; on others a changed cookie stays ``replaced`` unless the probe says otherwise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic

import attrs

from session_keeper._browser.backend import BrowserSession, PageT
from session_keeper._browser.capabilities import capabilities_of
from session_keeper._model.cookies import Cookie, cookie_applies_to
from session_keeper._model.evidence import CookieId, cookie_id
from session_keeper._model.facts import CookieFingerprint, LoginRecord
from session_keeper._util.log_fields import log_extra
from session_keeper._util.redact import scrubbing_logger

if TYPE_CHECKING:
    from datetime import datetime

    from session_keeper._keeper.saving.persistence import KeeperPersistence
    from session_keeper._keeper.state.live import KeeperLive
    from session_keeper._model.evidence import EvidenceTracker
    from session_keeper._model.sign_in import DocumentSeen

log = scrubbing_logger("session_keeper")

#: At most this many values are remembered per login cookie (the newest are kept).
VALUES_KEPT = 16

#: Which record a memory belongs to: a login recorded again starts afresh.
RecordKey = tuple[str, "datetime"]


def _key(record: LoginRecord) -> RecordKey:
    return (record.owner, record.recorded_at)


@attrs.define
class _Values:
    """What the keeper saw of one login: its values, and whether a change went unexplained."""

    key: RecordKey
    #: Per cookie of the login, every fingerprint it had as this login, oldest first.
    seen: dict[CookieId, list[str]] = attrs.field(factory=dict)
    suspect: bool = False


class Reissues(Generic[PageT]):
    """Re-issued login cookies of the live logins (see the module)."""

    def __init__(
        self,
        live: KeeperLive[PageT],
        persist: KeeperPersistence[PageT],
        evidence: EvidenceTracker,
        remember_jar: Callable[[Iterable[Cookie]], None],
    ) -> None:
        self._live = live
        #: Registers the jar's values for scrubbing: a re-issued value is a secret too.
        self._remember_jar = remember_jar
        self._persist = persist
        self._evidence = evidence
        self._values: dict[str, _Values] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    async def observe(self, session: BrowserSession[PageT], generation: int) -> None:
        """A launch hook: hear every document response ``session``'s pages get."""
        del generation
        documents = capabilities_of(session).documents  # a session that tells none: no-ops
        documents.on_document(lambda c, seen: self._document(session, c, seen))
        documents.set_cookies_wanted(self.set_cookies_matter)

    def set_cookies_matter(self, host: str) -> bool:
        """Whether the cookie names a document response from ``host`` sets can matter as
        it arrives: to a re-issue (a live login's cookies go to ``host``) or to an open
        sign-in's window (see :func:`~session_keeper._model.sign_in.login_page_cookies`,
        which reads only the responses after ``begin_login``). Otherwise nothing reads
        them, and the round trip that reads them is not made."""
        if self._evidence.any_signing_in():
            return True
        return any(cookie_applies_to(r.site, host) for r in self._live.ledger.live())

    def _memory(self, record: LoginRecord) -> _Values:
        values = self._values.get(record.site)
        if values is None or values.key != _key(record):
            values = self._values[record.site] = _Values(_key(record))
            for fp in record.cookies:
                values.seen[(fp.name, fp.domain, fp.path)] = [fp.fingerprint]
        return values

    def _document(
        self, session: BrowserSession[PageT], conversation: str, seen: DocumentSeen
    ) -> None:
        if self._live.session is not session or not seen.set_cookies or not seen.host:
            return
        now = self._live.clock.now()
        for record in self._live.ledger.live():
            names = {fp.name for fp in record.cookies}
            if not cookie_applies_to(record.site, seen.host) or not names & seen.set_cookies:
                continue
            values = self._memory(record)
            serves = conversation == record.owner or conversation in self._live.grants.holders(
                record.site, now
            )
            if not serves or seen.method.upper() != "GET" or self._evidence.signing_in(record.site):
                values.suspect = True
                continue
            if not values.suspect:
                self._track(self._reissued(session, record))

    def _track(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reissued(self, session: BrowserSession[PageT], record: LoginRecord) -> None:
        """Fingerprint the login's cookies as the jar holds them after a re-issue."""
        generation = self._live.generation
        try:
            jar = await session.cookies()
        except Exception:
            return  # the browser went away: the restart measures what it left
        self._remember_jar(jar)
        if self._live.session is not session or self._live.generation != generation:
            return
        current = self._live.ledger.get(record.site)
        if current is None or _key(current) != _key(record):
            return  # recorded again (or lost) meanwhile: that record is another's
        values = self._memory(current)
        if values.suspect:
            return
        fresh = self._fingerprints(current, jar)
        if fresh is None or fresh == current.cookies:
            return
        for fp in fresh:
            kept = values.seen.setdefault((fp.name, fp.domain, fp.path), [])
            if fp.fingerprint not in kept:
                kept.append(fp.fingerprint)
                del kept[:-VALUES_KEPT]
        self._live.ledger.record(attrs.evolve(current, cookies=fresh))
        self._persist.audit_soon(
            "login_reissued", {"site": current.site, "cookies": [c.name for c in fresh]}
        )
        self._persist.save_soon()
        log.info("login cookie re-issued", extra=log_extra(site=current.site))

    def explains(
        self, record: LoginRecord, jar: Sequence[Cookie]
    ) -> tuple[CookieFingerprint, ...] | None:
        """The login's cookies in ``jar`` when each holds a value the keeper saw the login
        re-issued under (or recorded with), and it never saw an unexplained change; else
        ``None``. For a restart's jar that differs from the record."""
        values = self._values.get(record.site)
        if values is None or values.key != _key(record) or values.suspect:
            return None
        fresh = self._fingerprints(record, jar)
        if fresh is None:
            return None
        for fp in fresh:
            if fp.fingerprint not in values.seen.get((fp.name, fp.domain, fp.path), ()):
                return None
        return fresh

    def _fingerprints(
        self, record: LoginRecord, jar: Sequence[Cookie]
    ) -> tuple[CookieFingerprint, ...] | None:
        """The record's cookies as ``jar`` holds them, in the record's order; ``None`` when
        one of them is missing."""
        by_id = {cookie_id(c): c for c in jar if c.applies_to(record.site)}
        fresh: list[CookieFingerprint] = []
        for fp in record.cookies:
            cookie = by_id.get((fp.name, fp.domain, fp.path))
            if cookie is None:
                return None
            fresh.append(self._live.fingerprinter.fingerprint(cookie))
        return tuple(fresh)
