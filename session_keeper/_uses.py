"""What a spent grant use admits on the network: armed acts and page loads.

A counted grant (``uses=n``) is spent one use at a time, by :meth:`SessionKeeper.decide`
or, on the network, by :meth:`SessionKeeper.admit`. Reads and writes are counted the
same way; what *one use* admits on the network is:

- **an armed act**: a use ``decide()`` spent on an ``act`` admits the next request of
  that conversation for that action to that site (from any of its pages), instead of
  spending a second use;
- **a page load**: a use spent by a request that carries a page-load token (the Guard
  gives one per top-level navigation of a page) also admits the further requests
  for the same action to the same site under that token — the subresources the
  loaded page fetches — until the page navigates again or closes
  (:meth:`UseTokens.end_page_load`). The Guard passes a token only for reads: a write
  use admits one request.

Nothing here outlives the grant: a revoke, the grant's expiry or a browser restart
ends every armed act and page load it allowed.
"""

from __future__ import annotations

from collections.abc import Hashable
from datetime import datetime

#: (conversation, site, action)
UseKey = tuple[str, str, str]


class UseTokens:
    """Armed acts and page loads, per (conversation, site, action); see the module."""

    def __init__(self) -> None:
        self._armed: dict[UseKey, list[datetime | None]] = {}
        self._loads: dict[Hashable, dict[UseKey, datetime | None]] = {}

    # -- armed acts ---------------------------------------------------------------------
    def arm(self, key: UseKey, expires_at: datetime | None) -> None:
        """``decide()`` spent a use on an act: it admits one request."""
        self._armed.setdefault(key, []).append(expires_at)

    def take_armed(
        self, key: UseKey, now: datetime, *, consume: bool
    ) -> tuple[bool, datetime | None]:
        """Whether an unexpired armed act is there, and its expiry; ``consume`` takes it."""
        arms = [e for e in self._armed.pop(key, []) if e is None or e > now]
        if not arms:
            return False, None
        first = arms[0]
        if consume:
            arms.pop(0)
        if arms:
            self._armed[key] = arms
        return True, first

    # -- page loads ---------------------------------------------------------------------
    def open_page_load(self, token: Hashable, key: UseKey, expires_at: datetime | None) -> None:
        """A use was spent under ``token``: its page's further requests ride on it."""
        self._loads.setdefault(token, {})[key] = expires_at

    def in_page_load(self, token: Hashable | None, key: UseKey, now: datetime) -> bool:
        """Whether a use spent under ``token`` still admits requests for ``key``."""
        if token is None:
            return False
        loads = self._loads.get(token)
        if not loads or key not in loads:
            return False
        expires_at = loads[key]
        if expires_at is not None and now >= expires_at:
            del loads[key]
            return False
        return True

    def end_page_load(self, token: Hashable) -> None:
        """The page navigated again or closed: its load admits nothing more."""
        self._loads.pop(token, None)

    # -- endings --------------------------------------------------------------------------
    def revoke(self, conversation: str, site: str) -> None:
        """A revoked grant admits nothing more, armed or loading."""
        for key in [k for k in self._armed if k[:2] == (conversation, site)]:
            del self._armed[key]
        for loads in self._loads.values():
            for key in [k for k in loads if k[:2] == (conversation, site)]:
                del loads[key]

    def end_site(self, site: str) -> None:
        """The site's login is gone: no armed act or page load on it admits anything."""
        for key in [k for k in self._armed if k[1] == site]:
            del self._armed[key]
        for loads in self._loads.values():
            for key in [k for k in loads if k[1] == site]:
                del loads[key]

    def forget(self, conversation: str) -> None:
        """A conversation ended: its armed acts and page loads admit nothing more."""
        for key in [k for k in self._armed if k[0] == conversation]:
            del self._armed[key]
        for loads in self._loads.values():
            for key in [k for k in loads if k[0] == conversation]:
                del loads[key]

    def clear(self) -> None:
        """A restart: nothing decided in the old browser carries into the new one."""
        self._armed.clear()
        self._loads.clear()
