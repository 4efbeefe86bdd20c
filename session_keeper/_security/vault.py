"""LoginVault: an optional, sealed copy of a site's login cookies, restored only by policy.

A persistent profile loses every cookie when Chromium is SIGKILLed (measured: the
cookie store is flushed lazily). A vault keeps, per site, the cookies that make up
its login — sealed with the :class:`~session_keeper.Keyring` (AES-256-GCM, purpose
``vault:<site>``), so the store holds ciphertext and key ids only. After a restart
:meth:`LoginVault.restore` puts a site's cookies back **only for sites whose policy
allows it** (``restore_sites``); the rest stay lost and need a human.

A restored login is a new fact, not a surviving one: :class:`RestoredLogin` says
``how="restored"``. The keeper must restore *after* it has measured the new
browser's jar (otherwise the restored cookies would match the ledger's fingerprints
and read as "survived"), and must report the site as lost-then-restored, with the
login needing re-validation. See the integration note in the issue report.

Storage needs no schema change: the vault is one sealed JSON document saved through
``Store.save_keeper_state`` under the id ``session-keeper-vault:<vault_id>``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, Literal

import attrs

from session_keeper._browser.backend import BrowserSession
from session_keeper._model.cookies import Cookie, normalize_site
from session_keeper._model.grants import check_name
from session_keeper._util.clock import Clock, SystemClock
from session_keeper.errors import InvalidArgument, SealBroken, StoreCorrupt

if TYPE_CHECKING:
    from session_keeper._security.keyring import Keyring
    from session_keeper.stores import Store

__all__ = ["LoginVault", "RestoredLogin", "keyring_of"]

_VERSION: Final = 1


@attrs.frozen(kw_only=True)
class RestoredLogin:
    """A login put back from the vault after a restart. Never a survival."""

    site: str
    #: Names of the cookies put back (never their values).
    cookie_names: tuple[str, ...]
    saved_at: datetime
    how: Literal["restored"] = "restored"


def _belongs_to(cookie: Cookie, site: str) -> bool:
    domain = normalize_site(cookie.domain)
    return domain == site or domain.endswith("." + site)


def _purpose(site: str) -> str:
    return f"vault:{site}"


class LoginVault:
    """Sealed per-site login cookies in a Store; restores only sites its policy allows.

    ``restore_sites`` is the policy: sites whose login may be put back after a
    restart without a human. Everything read back is authenticated; a tampered or
    foreign vault raises (:class:`~session_keeper.SealBroken`,
    :class:`~session_keeper.UnknownKey`, :class:`~session_keeper.StoreCorrupt`) before
    any cookie is added.
    """

    def __init__(
        self,
        store: Store,
        keyring: Keyring,
        *,
        restore_sites: Iterable[str] = (),
        vault_id: str = "default",
        clock: Clock | None = None,
    ) -> None:
        if isinstance(restore_sites, str):
            raise InvalidArgument("restore_sites must be a collection of sites")
        self._store = store
        self._keyring = keyring
        self._restore = frozenset(normalize_site(check_name(s, "site")) for s in restore_sites)
        self._doc_id = f"session-keeper-vault:{check_name(vault_id, 'vault_id')}"
        self._clock: Clock = clock if clock is not None else SystemClock()

    @property
    def store(self) -> Store:
        """The store the sealed logins are kept in."""
        return self._store

    def allows(self, site: str) -> bool:
        """Whether the policy lets ``site``'s login be restored without a human."""
        return normalize_site(site) in self._restore

    async def _load(self) -> dict[str, Any]:
        doc = await self._store.load_keeper_state(self._doc_id)
        if doc is None:
            return {}
        sites = doc.get("sites")
        if doc.get("version") != _VERSION or not isinstance(sites, dict):
            raise StoreCorrupt("the login vault document is not one this code wrote")
        return {str(k): v for k, v in sites.items()}

    async def save(self, session: BrowserSession[Any], site: str) -> tuple[str, ...]:
        """Seal the site's own cookies (its host and subdomains); return their names.

        Parent-domain cookies are never kept: they would log other sites in too.
        """
        site = normalize_site(check_name(site, "site"))
        # Only the site's own cookies: a parent-domain cookie (".example") also serves
        # other sites, whose logins this site's policy must not bring back.
        cookies = [c for c in await session.cookies() if _belongs_to(c, site)]
        if not cookies:
            # Nothing of its own to keep (only shared parent-domain cookies): keep
            # nothing, and drop an older entry, rather than restore someone else's.
            await self.forget(site)
            return ()
        payload = json.dumps(
            [
                {
                    "name": c.name,
                    "v": c.value,
                    "domain": c.domain,
                    "path": c.path,
                    "expires": c.expires,
                    "http_only": c.http_only,
                    "secure": c.secure,
                }
                for c in cookies
            ]
        )
        sites = await self._load()
        sites[site] = {
            "sealed": self._keyring.seal(payload, purpose=_purpose(site)),
            "saved_at": self._clock.now().isoformat(),
            "names": sorted(c.name for c in cookies),
        }
        await self._store.save_keeper_state(self._doc_id, {"version": _VERSION, "sites": sites})
        return tuple(sorted(c.name for c in cookies))

    async def forget(self, site: str) -> None:
        """Drop ``site``'s sealed cookies (after a sign-out, or a revoked policy)."""
        site = normalize_site(check_name(site, "site"))
        sites = await self._load()
        if sites.pop(site, None) is not None:
            await self._store.save_keeper_state(self._doc_id, {"version": _VERSION, "sites": sites})

    async def sites(self) -> tuple[str, ...]:
        """Sites the vault holds a login for."""
        return tuple(sorted(await self._load()))

    def _open(self, site: str, entry: Any) -> tuple[list[Cookie], datetime]:
        if not isinstance(entry, dict) or not isinstance(entry.get("sealed"), str):
            raise StoreCorrupt(f"the vault entry for {site} is malformed")
        raw = self._keyring.open_text(entry["sealed"], purpose=_purpose(site))
        try:
            cookies = [
                Cookie(
                    name=str(c["name"]),
                    value=str(c["v"]),
                    domain=str(c["domain"]),
                    path=str(c["path"]),
                    expires=c["expires"],
                    http_only=bool(c["http_only"]),
                    secure=bool(c["secure"]),
                )
                for c in json.loads(raw)
            ]
            saved_at = datetime.fromisoformat(str(entry["saved_at"]))
        except (KeyError, TypeError, ValueError):
            raise SealBroken(
                f"the vault entry for {site} opened but is not a cookie list"
            ) from None
        return cookies, saved_at

    async def restore(
        self, session: BrowserSession[Any], sites: Sequence[str] | None = None
    ) -> tuple[RestoredLogin, ...]:
        """Put back the logins of ``sites`` (default: all held) that the policy allows.

        Every entry is opened and checked before the first cookie is added: a bad
        one raises and leaves the jar as it was.
        """
        held = await self._load()
        wanted = held.keys() if sites is None else [normalize_site(s) for s in sites]
        chosen = sorted(s for s in wanted if s in held and s in self._restore)
        opened = [(site, *self._open(site, held[site])) for site in chosen]
        restored: list[RestoredLogin] = []
        for site, cookies, saved_at in opened:
            await session.add_cookies(cookies)
            restored.append(
                RestoredLogin(
                    site=site,
                    cookie_names=tuple(sorted(c.name for c in cookies)),
                    saved_at=saved_at,
                )
            )
        return tuple(restored)

    def __repr__(self) -> str:
        return f"<LoginVault {self._doc_id} restore={sorted(self._restore)}>"


def keyring_of(holder: LoginVault) -> Keyring:
    """The keyring ``holder`` seals with: its keys are secrets a scrubber must hide too."""
    return holder._keyring
