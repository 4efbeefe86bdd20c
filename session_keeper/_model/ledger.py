"""The login ledger: who signed in where, what became of it after a restart, and the
sign-ins in progress whose credentials already have an owner."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime
from typing import Literal

import attrs

from session_keeper._model.changes import Changes
from session_keeper._model.cookies import Cookie, cookie_applies_to
from session_keeper._model.facts import CookieFingerprint, LoginRecord, Lost
from session_keeper._model.fingerprint import Fingerprinter

#: What a restart did to a recorded login, measured against the new cookie jar.
#: ``survived``: every recorded cookie is there with the same fingerprint.
#: ``replaced``: a recorded cookie is there with another value (another sign-in).
#: ``lost``: a recorded cookie is gone.
LoginFate = Literal["survived", "replaced", "lost"]


def on_site(cookie: CookieFingerprint, site: str) -> bool:
    """Whether a recorded cookie is ``site``'s own (sent to it), not another host's of its
    sign-in chain (an identity provider's session, set during the same sign-in)."""
    return cookie.domain == site if cookie.host_only else cookie_applies_to(cookie.domain, site)


def chain_hosts(record: LoginRecord) -> frozenset[str]:
    """The hosts other than the record's site whose cookies its sign-in set (an identity
    provider's): one login with the site, guarded and cleared with it."""
    return frozenset(c.domain for c in record.cookies if not on_site(c, record.site))


def classify(record: LoginRecord, jar: Sequence[Cookie], fingerprinter: Fingerprinter) -> LoginFate:
    """Compare a recorded login with a cookie jar.

    Conservative on purpose: any change counts against the login, because acting on
    a login that is not the one a human granted is worse than asking again. Only the
    site's own cookies decide: an identity provider's cookie of its sign-in chain comes
    and goes with that provider's own session rules.
    """
    present = {
        (c.name, c.domain.lstrip("."), c.path): fingerprinter.digest(c)
        for c in jar
        if c.applies_to(record.site)
    }
    fate: LoginFate = "survived"
    for fp in record.cookies:
        if not on_site(fp, record.site):
            continue
        now = present.get((fp.name, fp.domain, fp.path))
        if now is None:
            fate = "lost"
        elif now != fp.fingerprint:
            return "replaced"
    return fate


@attrs.frozen(kw_only=True)
class SignInWindow:
    """A sign-in in progress (:meth:`SessionKeeper.begin_login` until it is recorded or
    ends): whatever credential appears on its hosts is its conversation's from that instant.
    """

    conversation: str
    site: str
    opened_at: datetime
    #: The site and every host a document of the conversation's pages reached since
    #: (an identity provider, its redirects): the sign-in's chain.
    hosts: frozenset[str]

    def covers(self, host: str) -> bool:
        """Whether a request to ``host`` may carry a credential this sign-in set."""
        return any(cookie_applies_to(h, host) for h in self.hosts)


class LoginLedger:
    """The logins the keeper knows in the live generation, and those a restart took.

    Evidence about a dead browser is not evidence: on each restart every record is
    either carried into the new generation (measured: it survived) or moved to the
    lost set, which is what lets ``decide()`` tell "never signed in" from "the
    restart took it".
    """

    def __init__(self) -> None:
        self._live: dict[str, LoginRecord] = {}
        self._lost: dict[str, Lost] = {}
        #: Sites whose cookies were in the jar at launch with no record to explain them:
        #: a login of an earlier process, protected until someone attributes it.
        self._unexplained: dict[str, tuple[CookieFingerprint, ...]] = {}
        #: Sign-ins in progress, by (conversation, site): their hosts are guarded for
        #: their conversation alone until the login is recorded or the sign-in ends.
        self._signing_in: dict[tuple[str, str], SignInWindow] = {}
        #: The chain hosts of lost logins (in memory: a new process clears them at launch).
        self._lost_chains: dict[str, frozenset[str]] = {}
        #: Bumped on every change: lets enforcement layers tell cheaply that it changed.
        self.version = 0
        #: Sites whose live or lost login changed since the last save took them.
        self.changes: Changes[str] = Changes()
        #: Awaited after a login is recorded, before ``record_login`` returns (the
        #: Guard widens what it intercepts to the new login's hosts).
        self.recorded_hooks: list[Callable[[], Awaitable[None]]] = []

    def record(self, login: LoginRecord) -> None:
        """A fresh sign-in replaces whatever the site had, and its loss is forgotten."""
        self._live[login.site] = login
        self._lost.pop(login.site, None)
        self._lost_chains.pop(login.site, None)
        self._unexplained.pop(login.site, None)
        self.changes.add(login.site)
        self.version += 1

    async def announce_recorded(self) -> None:
        """Run every ``recorded_hooks`` hook, in order."""
        for hook in list(self.recorded_hooks):
            await hook()

    def get(self, site: str) -> LoginRecord | None:
        """The site's live login record."""
        return self._live.get(site)

    def lost(self, site: str) -> Lost | None:
        """The site's login a restart took, if it has not been signed into since."""
        return self._lost.get(site)

    def live(self) -> tuple[LoginRecord, ...]:
        """Every live login record."""
        return tuple(self._live.values())

    def lost_records(self) -> tuple[Lost, ...]:
        """Every login a restart took and nobody has re-recorded."""
        return tuple(self._lost.values())

    def unexplained(self) -> dict[str, tuple[CookieFingerprint, ...]]:
        """Site → the launch jar's cookies of it that no record explains."""
        return dict(self._unexplained)

    def set_unexplained(self, found: dict[str, tuple[CookieFingerprint, ...]]) -> None:
        """What a launch found: sites with a record (live or lost) are never unexplained."""
        self._unexplained = {
            site: cookies
            for site, cookies in found.items()
            if cookies and site not in self._live and site not in self._lost
        }
        self.version += 1

    # -- sign-ins in progress -------------------------------------------------------

    def open_sign_in(self, conversation: str, site: str, at: datetime) -> None:
        """A sign-in of ``conversation`` on ``site`` begins (again) at ``at``: the site is
        its conversation's from now on, and so is every host its chain reaches
        (:meth:`reach`)."""
        self._signing_in[(conversation, site)] = SignInWindow(
            conversation=conversation, site=site, opened_at=at, hosts=frozenset({site})
        )
        self.version += 1

    def reach(self, conversation: str, host: str, *, from_host: str | None = None) -> bool:
        """A document of ``conversation``'s pages goes to ``host`` from a page showing
        ``from_host`` (``None``: a blank page, a new popup): every sign-in of it in progress
        whose chain that page is on takes the host in. A page browsing elsewhere meanwhile
        (another tab of the conversation) leaves the chain as it is. Returns whether
        anything widened."""
        widened = False
        for key, window in self._signing_in.items():
            if window.conversation != conversation or host in window.hosts:
                continue
            if from_host is None or window.covers(from_host):
                self._signing_in[key] = attrs.evolve(window, hosts=window.hosts | {host})
                widened = True
        if widened:
            self.version += 1
        return widened

    def close_sign_in(self, conversation: str, site: str) -> SignInWindow | None:
        """The sign-in ended (recorded, cancelled, timed out): its window, if it was open."""
        window = self._signing_in.pop((conversation, site), None)
        if window is not None:
            self.version += 1
        return window

    def close_all_sign_ins(self) -> tuple[SignInWindow, ...]:
        """A new browser: no sign-in of the dead one is in progress any more."""
        windows = self.sign_ins()
        if windows:
            self._signing_in.clear()
            self.version += 1
        return windows

    def sign_ins(self) -> tuple[SignInWindow, ...]:
        """Every sign-in in progress, oldest first."""
        return tuple(sorted(self._signing_in.values(), key=lambda w: w.opened_at))

    def signing_in(self, host: str) -> frozenset[str]:
        """The conversations whose sign-in in progress may have set credentials that a
        request to ``host`` carries (empty: none)."""
        if not self._signing_in:
            return frozenset()  # on every request the Guard judges: nothing to build
        return frozenset(w.conversation for w in self._signing_in.values() if w.covers(host))

    def any_sign_in(self) -> bool:
        """Whether any sign-in is in progress."""
        return bool(self._signing_in)

    def signing_in_conversation(self, conversation: str) -> bool:
        """Whether ``conversation`` has a sign-in in progress (no allocation)."""
        return any(w.conversation == conversation for w in self._signing_in.values())

    def forget(self, site: str) -> LoginRecord | None:
        """Drop a site's login (its cookies were deleted on purpose)."""
        self.version += 1
        self.changes.add(site)
        return self._live.pop(site, None)

    def carry(self, record: LoginRecord, generation: int) -> LoginRecord:
        """Move a surviving login into a new generation, flagged for re-validation."""
        carried = attrs.evolve(record, generation=generation, needs_revalidation=True)
        self._live[record.site] = carried
        self.changes.add(record.site)
        self.version += 1
        return carried

    def mark_lost(self, loss: Lost) -> None:
        """Move a login into the lost set (with the chain hosts its record named)."""
        record = self._live.pop(loss.name, None)
        self._lost[loss.name] = loss
        chain = chain_hosts(record) if record is not None else frozenset()
        if chain:
            self._lost_chains[loss.name] = chain
        self.changes.add(loss.name)
        self.version += 1

    def lost_chain(self, site: str) -> frozenset[str]:
        """The other hosts of a lost login's sign-in chain (an identity provider), kept
        while the loss is: some of their cookies may still be in the jar."""
        return self._lost_chains.get(site, frozenset()) if site in self._lost else frozenset()

    def chain_hosts_lost(self) -> frozenset[str]:
        """Every host of a lost login's chain (see :meth:`lost_chain`)."""
        return frozenset().union(*(self.lost_chain(site) for site in self._lost))

    def confirm(self, site: str) -> LoginRecord | None:
        """Clear a survived login's re-validation flag once it has been checked."""
        rec = self._live.get(site)
        if rec is None:
            return None
        rec = attrs.evolve(rec, needs_revalidation=False)
        self._live[site] = rec
        self.changes.add(site)
        return rec

    def load(self, live: Iterable[LoginRecord], lost: Iterable[Lost]) -> None:
        """Replace the ledger's contents (restoring from a store)."""
        self.changes.update(self._live.keys() | self._lost.keys())
        self._live = {r.site: r for r in live}
        self._lost = {x.name: x for x in lost}
        self.changes.update(self._live.keys() | self._lost.keys())
        self.version += 1
