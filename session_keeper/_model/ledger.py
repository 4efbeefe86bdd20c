"""The login ledger: who signed in where, and what became of it after a restart."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Literal

import attrs

from session_keeper._model.cookies import Cookie
from session_keeper._model.facts import CookieFingerprint, LoginRecord, Lost
from session_keeper._model.fingerprint import Fingerprinter

#: What a restart did to a recorded login, measured against the new cookie jar.
#: ``survived``: every recorded cookie is there with the same fingerprint.
#: ``replaced``: a recorded cookie is there with another value (another sign-in).
#: ``lost``: a recorded cookie is gone.
LoginFate = Literal["survived", "replaced", "lost"]


def classify(record: LoginRecord, jar: Sequence[Cookie], fingerprinter: Fingerprinter) -> LoginFate:
    """Compare a recorded login with a cookie jar.

    Conservative on purpose: any change counts against the login, because acting on
    a login that is not the one a human granted is worse than asking again.
    """
    present = {
        (c.name, c.domain.lstrip("."), c.path): fingerprinter.digest(c)
        for c in jar
        if c.applies_to(record.site)
    }
    fate: LoginFate = "survived"
    for fp in record.cookies:
        now = present.get((fp.name, fp.domain, fp.path))
        if now is None:
            fate = "lost"
        elif now != fp.fingerprint:
            return "replaced"
    return fate


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
        #: Bumped on every change: lets enforcement layers tell cheaply that it changed.
        self.version = 0
        #: Awaited after a login is recorded, before ``record_login`` returns (the
        #: Guard widens what it intercepts to the new login's hosts).
        self.recorded_hooks: list[Callable[[], Awaitable[None]]] = []

    def record(self, login: LoginRecord) -> None:
        """A fresh sign-in replaces whatever the site had, and its loss is forgotten."""
        self._live[login.site] = login
        self._lost.pop(login.site, None)
        self._unexplained.pop(login.site, None)
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

    def forget(self, site: str) -> LoginRecord | None:
        """Drop a site's login (its cookies were deleted on purpose)."""
        self.version += 1
        return self._live.pop(site, None)

    def carry(self, record: LoginRecord, generation: int) -> LoginRecord:
        """Move a surviving login into a new generation, flagged for re-validation."""
        carried = attrs.evolve(record, generation=generation, needs_revalidation=True)
        self._live[record.site] = carried
        self.version += 1
        return carried

    def mark_lost(self, loss: Lost) -> None:
        """Move a login into the lost set."""
        self._live.pop(loss.name, None)
        self._lost[loss.name] = loss
        self.version += 1

    def confirm(self, site: str) -> LoginRecord | None:
        """Clear a survived login's re-validation flag once it has been checked."""
        rec = self._live.get(site)
        if rec is None:
            return None
        rec = attrs.evolve(rec, needs_revalidation=False)
        self._live[site] = rec
        return rec

    def load(self, live: Iterable[LoginRecord], lost: Iterable[Lost]) -> None:
        """Replace the ledger's contents (restoring from a store)."""
        self._live = {r.site: r for r in live}
        self._lost = {x.name: x for x in lost}
        self.version += 1
