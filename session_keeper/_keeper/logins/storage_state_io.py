"""Logins in and out as Playwright ``storageState``: scoped, sealed, never signed out over good.

:meth:`SessionKeeper.export_logins` gives a conversation's own logins — the cookies of
each site it holds a live login of, and the ``localStorage`` of the origins a login was
kept in — as Playwright's ``storageState`` (``{"cookies": [...], "origins": [...]}``),
sealed with the keeper's keyring (purpose ``storage_state``) so it may be written to disk.
:func:`open_storage_state` gives trusted code the plain ``storageState`` back (for
``browser.new_context(storage_state=...)``).

:meth:`SessionKeeper.import_logins` puts such a state back into the browser for the same
conversation, one site at a time, and only where it can only help: a site whose live login
the keeper knows (and its probe, when it has one, still sees) is left alone; an imported
site that the site's probe then sees signed out is rolled back to the cookies it had, so a
failed restore never writes signed-out state over good state. An imported login is
recorded as restored (re-validate before acting), in the audit chain, like the vault's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Generic

import attrs

from session_keeper._browser.backend import BrowserSession, PageT
from session_keeper._browser.capabilities import capabilities_of
from session_keeper._model.cookies import Cookie, normalize_site
from session_keeper._model.facts import LoginRecord
from session_keeper._model.grants import check_name
from session_keeper._model.storage import StorageItem
from session_keeper.errors import InvalidArgument, LoginNotYours, UsageError

if TYPE_CHECKING:
    from session_keeper._keeper.logins.login_records import Logins
    from session_keeper._keeper.saving.persistence import KeeperPersistence
    from session_keeper._keeper.state.live import KeeperLive
    from session_keeper._security.keyring import Keyring

__all__ = ["FORMAT", "PURPOSE", "StorageStates", "open_storage_state"]

#: The sealed document's format and the keyring purpose it is sealed under.
FORMAT: Final = "session_keeper.storage_state/1"
PURPOSE: Final = "storage_state"


def _cookie_state(c: Cookie) -> dict[str, Any]:
    # Playwright's storageState cookie; a cookie whose SameSite the jar read did not report
    # is Lax, Chromium's default (a SameSite=None login keeps working across sites).
    return {
        "name": c.name,
        "value": c.value,
        "domain": c.domain,
        "path": c.path,
        "expires": -1 if c.expires is None else c.expires,
        "httpOnly": c.http_only,
        "secure": c.secure,
        "sameSite": c.same_site or "Lax",
    }


def _cookie(d: Mapping[str, Any]) -> Cookie:
    expires = d.get("expires", -1)
    return Cookie(
        name=str(d["name"]),
        value=str(d["value"]),
        domain=str(d["domain"]),
        path=str(d.get("path", "/")),
        expires=None if expires in (None, -1) else float(expires),
        http_only=bool(d.get("httpOnly", False)),
        secure=bool(d.get("secure", False)),
        same_site=d["sameSite"] if d.get("sameSite") in ("Strict", "Lax", "None") else None,
    )


def open_storage_state(sealed: str, keyring: Keyring) -> dict[str, Any]:
    """The Playwright ``storageState`` inside what :meth:`SessionKeeper.export_logins` gave.

    Raises :class:`~session_keeper.errors.SealBroken` for an altered or foreign seal,
    :class:`~session_keeper.errors.UnknownKey` for a key the keyring does not hold, and
    :class:`InvalidArgument` for a sealed document that is not an exported state.
    """
    state = _parse(keyring.open_text(sealed, purpose=PURPOSE))["storage_state"]
    assert isinstance(state, dict)
    return state


def _parse(text: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
        ok = (
            isinstance(doc, dict)
            and doc.get("format") == FORMAT
            and isinstance(doc.get("sites"), list)
            and isinstance(doc["storage_state"]["cookies"], list)
            and isinstance(doc["storage_state"]["origins"], list)
        )
    except (ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        raise InvalidArgument("not a storage state exported by export_logins(); nothing imported")
    return dict(doc)


class StorageStates(Generic[PageT]):
    """Exports and imports a conversation's logins (see the module)."""

    def __init__(
        self,
        live: KeeperLive[PageT],
        persist: KeeperPersistence[PageT],
        logins: Logins[PageT],
        keyring: Keyring | None,
    ) -> None:
        self._live = live
        self._persist = persist
        self._logins = logins
        self._keyring = keyring

    def _sealing(self) -> Keyring:
        if self._keyring is None:
            raise UsageError(
                "export_logins() and import_logins() seal the state with the keeper's keyring: "
                "give it one (Durability(keyring=...))"
            )
        return self._keyring

    async def export(self, conversation: str, sites: Iterable[str] | None) -> str:
        """See :meth:`SessionKeeper.export_logins`."""
        keyring = self._sealing()
        conversation = check_name(conversation, "conversation")
        owned = {r.site: r for r in self._live.ledger.live() if r.owner == conversation}
        wanted = sorted(owned) if sites is None else [normalize_site(s) for s in sites]
        for site in wanted:
            if site not in owned:
                raise LoginNotYours(f"{conversation} holds no live login of {site} to export")
        session = self._live.session_for(conversation)
        jar = await session.cookies()
        cookies = [c for c in jar if any(c.applies_to(site) for site in wanted)]
        origins: list[dict[str, Any]] = []
        web_storage = capabilities_of(session).web_storage
        if web_storage is not None:  # else its cookies only: no origin's storage can be read
            kept = sorted({i.origin for s in wanted for i in owned[s].storage if i.area == "local"})
            for origin in kept:
                items = [i for i in await web_storage.storage(origin) if i.area == "local"]
                origins.append(
                    {
                        "origin": origin,
                        "localStorage": [{"name": i.key, "value": i.value} for i in items],
                    }
                )
        doc = {
            "format": FORMAT,
            "sites": wanted,
            "storage_state": {"cookies": [_cookie_state(c) for c in cookies], "origins": origins},
        }
        self._persist.audit_soon(
            "logins_exported",
            {
                "conversation": conversation,
                "sites": wanted,
                "cookies": sorted({c.name for c in cookies}),
            },
        )
        return keyring.seal(json.dumps(doc), purpose=PURPOSE)

    async def import_(self, conversation: str, sealed: str) -> tuple[str, ...]:
        """See :meth:`SessionKeeper.import_logins`."""
        keyring = self._sealing()
        conversation = check_name(conversation, "conversation")
        doc = _parse(keyring.open_text(sealed, purpose=PURPOSE))
        session = self._live.session_for(conversation)
        state = doc["storage_state"]
        imported: list[str] = []
        for site in [normalize_site(check_name(s, "site")) for s in doc["sites"]]:
            if await self._signed_in(site):
                continue  # good state is never overwritten
            cookies = [_cookie(c) for c in state["cookies"] if _cookie(c).applies_to(site)]
            local = [
                StorageItem(
                    origin=o["origin"], area="local", key=str(i["name"]), value=str(i["value"])
                )
                for o in state["origins"]
                for i in o.get("localStorage", [])
                if _on_site(str(o["origin"]), site)
            ]
            # Guarded for the importing conversation before its cookies are in the jar:
            # no other page may use them in between (as during a sign-in).
            self._live.ledger.open_sign_in(conversation, site, self._live.clock.now())
            await self._live.ledger.announce_recorded()
            try:
                if await self._put(session, site, cookies, local):
                    imported.append(site)
                    self._record(conversation, site, cookies, local)
            finally:
                self._live.ledger.close_sign_in(conversation, site)
                # The record (or the rollback) now says who may use the site.
                await self._live.ledger.announce_recorded()
        if imported:
            await self._persist.save()
        return tuple(imported)

    async def _signed_in(self, site: str) -> bool:
        if self._live.ledger.get(site) is None:
            return False
        if not self._logins.has_login_probe(site):
            return True  # a live login the keeper knows: kept, whatever the file holds
        return await self._logins.probe_login(site) is not None

    async def _put(
        self,
        session: BrowserSession[PageT],
        site: str,
        cookies: Sequence[Cookie],
        local: Sequence[StorageItem],
    ) -> bool:
        """Write one site's state; roll it back when its probe then sees nobody."""
        web_storage = capabilities_of(session).web_storage
        before = [c for c in await session.cookies() if c.applies_to(site)]
        if cookies:
            await session.add_cookies(cookies)
        if local and web_storage is not None:
            await web_storage.set_storage(local)
        if not self._logins.has_login_probe(site):
            return bool(cookies or local)
        if await self._logins.probe_login(site) is not None:
            return True
        await session.clear_cookies(site)
        if before:
            await session.add_cookies(before)
        if local and web_storage is not None:
            for origin in sorted({i.origin for i in local}):
                await web_storage.clear_storage(origin)
        self._persist.audit_soon("logins_import_refused", {"site": site, "reason": "signed out"})
        return False

    def _record(
        self, conversation: str, site: str, cookies: Sequence[Cookie], local: Sequence[StorageItem]
    ) -> None:
        fp = self._live.fingerprinter
        record = LoginRecord(
            site=site,
            owner=conversation,
            recorded_at=self._live.clock.now(),
            generation=self._live.generation,
            cookies=tuple(fp.fingerprint(c) for c in cookies),
            storage=tuple(fp.storage_fingerprint(i) for i in local),
            needs_revalidation=True,
        )
        self._live.ledger.record(attrs.evolve(record))
        self._persist.audit_soon(
            "login_imported",
            {"site": site, "owner": conversation, "cookies": sorted({c.name for c in cookies})},
        )


def _on_site(origin: str, site: str) -> bool:
    host = origin.split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0].lower()
    return host == site or host.endswith("." + site)
