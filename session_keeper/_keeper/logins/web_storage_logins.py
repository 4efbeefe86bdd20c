"""Logins kept in web storage: their sign-in evidence, what a restart kept, what a sweep clears.

A single-page app keeps its login as a token in ``localStorage`` or ``sessionStorage``,
where no cookie jar read sees it. For a session that can read web storage (Chromium's),
the keeper treats such items like session cookies:

- :meth:`SessionKeeper.begin_login` fingerprints the items of the site's origins the
  conversation's pages show; ``record_login`` takes as evidence the items that appeared
  or changed since (only the ``LoginSettings.storage_keys`` of the site when named), when
  no cookie did — a cookie login does not become fragile because a page also wrote
  ``localStorage``.
- After a restart, each recorded item is looked up in the new browser: gone is a loss,
  another value another sign-in (the site's probe has the final word). A
  ``sessionStorage`` item never outlives its tab, so such a login is lost by any restart.
- The idle sweep deletes the ``localStorage`` of every origin a login was recorded on.

Values are read in the browser and fingerprinted at once; only fingerprints are kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Generic

from session_keeper._browser.backend import BrowserSession, PageT
from session_keeper._browser.capabilities import capabilities_of
from session_keeper._browser.storage_read import WebStorage
from session_keeper._model.facts import LoginRecord
from session_keeper._model.storage import (
    StorageFate,
    StorageFingerprint,
    StorageSnapshot,
    classify_storage,
    origins_on_site,
    storage_evidence,
    storage_snapshot,
)

if TYPE_CHECKING:
    from session_keeper._keeper.state.live import KeeperLive

#: At most this many open sign-in windows keep a storage baseline.
MAX_BASELINES = 1024


class StorageLogins(Generic[PageT]):
    """Web-storage evidence of the live generation's logins (see the module)."""

    def __init__(self, live: KeeperLive[PageT], keys: Mapping[str, frozenset[str]]) -> None:
        self._live = live
        self._keys = keys
        #: (conversation, site) -> (generation, origins read, their items at the start).
        self._baselines: dict[tuple[str, str], tuple[int, tuple[str, ...], StorageSnapshot]] = {}
        #: Site -> the origins of a login a restart took: the sweep clears them too.
        self._lost_origins: dict[str, tuple[str, ...]] = {}

    def _origins(self, session: BrowserSession[PageT], conversation: str, site: str) -> set[str]:
        urls = (session.page_url(p) for p in session.pages(conversation))
        return set(origins_on_site(urls, site))

    async def _read(
        self, session: WebStorage, origins: Iterable[str], conversation: str | None
    ) -> list[StorageFingerprint]:
        fingerprint = self._live.fingerprinter.storage_fingerprint
        found: list[StorageFingerprint] = []
        for origin in sorted(origins):
            found.extend(fingerprint(i) for i in await session.storage(origin, conversation))
        return found

    async def begin(self, session: BrowserSession[PageT], conversation: str, site: str) -> None:
        """Mark the start of ``conversation``'s sign-in to ``site``: its items now."""
        web_storage = capabilities_of(session).web_storage
        if web_storage is None:
            return
        origins = self._origins(session, conversation, site)
        items = await self._read(web_storage, origins, conversation)
        if len(self._baselines) >= MAX_BASELINES:
            self._baselines.pop(next(iter(self._baselines)))  # the oldest window
        self._baselines[(conversation, site)] = (
            self._live.generation,
            tuple(sorted(origins)),
            storage_snapshot(items),
        )

    async def evidence(
        self,
        session: BrowserSession[PageT],
        conversation: str,
        site: str,
        *,
        cookies_changed: bool,
    ) -> tuple[StorageFingerprint, ...]:
        """The items that prove ``conversation`` signed in to ``site`` (see the module)."""
        keys = self._keys.get(site)
        web_storage = capabilities_of(session).web_storage
        if web_storage is None or (cookies_changed and keys is None):
            return ()
        origins = self._origins(session, conversation, site)
        begun = self._baselines.get((conversation, site))
        baseline: StorageSnapshot | None = None
        if begun is not None and begun[0] == self._live.generation:
            origins.update(begun[1])
            baseline = begun[2]
        items = await self._read(web_storage, origins, conversation)
        return storage_evidence(baseline, items, keys)

    def recorded(self, conversation: str, site: str) -> None:
        """The sign-in window is spent; a lost login recorded again is no longer lost."""
        self._baselines.pop((conversation, site), None)
        self._lost_origins.pop(site, None)

    async def fate(self, session: BrowserSession[PageT], record: LoginRecord) -> StorageFate | None:
        """What a new browser kept of ``record``'s storage items (``None``: it has none)."""
        if not record.storage:
            return None
        web_storage = capabilities_of(session).web_storage
        if web_storage is None:
            return "lost"  # nothing can vouch for them in a browser that cannot read them
        origins = {i.origin for i in record.storage}
        # A new browser's tabs start with an empty sessionStorage: only localStorage is read.
        present = storage_snapshot(await self._read(web_storage, origins, None))
        return classify_storage(record.storage, present)

    def lost(self, record: LoginRecord) -> None:
        """Remember the origins of a storage login a restart took, for the sweep."""
        if record.storage:
            self._lost_origins[record.site] = tuple(sorted({i.origin for i in record.storage}))

    async def clear(self, session: BrowserSession[PageT]) -> None:
        """Delete the ``localStorage`` of every origin a live or lost login was kept in."""
        web_storage = capabilities_of(session).web_storage
        if web_storage is None:
            return
        origins = {i.origin for r in self._live.ledger.live() for i in r.storage}
        for kept in self._lost_origins.values():
            origins.update(kept)
        for origin in sorted(origins):
            await web_storage.clear_storage(origin)
