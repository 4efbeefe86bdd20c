"""What a spent grant use admits on the network: armed acts and page loads.

A counted grant (``uses=n``) is spent one use at a time, by :meth:`SessionKeeper.decide`
or, on the network, by :meth:`SessionKeeper.admit`. Reads and writes are counted the
same way; what *one use* admits on the network is:

- **an armed act**: a use ``decide()`` spent on an ``act`` admits the next request of
  that conversation for that action to that site, instead of spending a second use —
  only from the page it was armed for (the conversation's main tab unless ``decide``
  named another page) and, when ``decide`` named a URL, only a request for that URL.
  A background request of another page (a beacon, a popup's POST) cannot spend it;
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
from typing import Any

import attrs

from session_keeper.errors import InvalidArgument, InvalidArgumentType

#: (conversation, site, action)
UseKey = tuple[str, str, str]


@attrs.frozen(kw_only=True)
class Requester:
    """Where a request comes from, as far as the enforcement layer knows it."""

    #: The page that makes it; ``None`` when the caller names none (no browser).
    page: Hashable | None = None
    #: Whether ``page`` is the conversation's main tab.
    main_tab: bool = False
    #: The request's URL (without fragment), if known.
    url: str | None = None


@attrs.frozen(kw_only=True, eq=False)
class _Arm:
    expires_at: datetime | None
    #: The page it admits requests of; ``None``: the conversation's main tab.
    page: Hashable | None
    #: The one URL it admits; ``None``: any URL of the site.
    url: str | None

    def admits(self, who: Requester) -> bool:
        if self.url is not None and who.url is not None and self.url != who.url:
            return False
        if who.page is None:
            return True  # a caller without a browser: no page to tell apart
        return who.main_tab if self.page is None else self.page is who.page


def without_fragment(url: str) -> str:
    """``url`` without its ``#fragment``."""
    return url.split("#", 1)[0]


def arm_target(page: Any, url: Any) -> tuple[Hashable | None, str | None]:
    """Check ``decide(page=, url=)``: the raw page and the URL (without fragment) an act admits.

    Raises :class:`InvalidArgument` / :class:`InvalidArgumentType` for what is neither.
    """
    if page is not None and not isinstance(page, Hashable):
        raise InvalidArgumentType("page must be a ConversationTab or a page")
    if url is not None:
        if not isinstance(url, str):
            raise InvalidArgumentType("url must be a str")
        if "://" not in url:
            raise InvalidArgument("url must be an absolute URL")
        url = without_fragment(url)
    return page, url


class UseTokens:
    """Armed acts and page loads, per (conversation, site, action); see the module."""

    def __init__(self) -> None:
        self._armed: dict[UseKey, list[_Arm]] = {}
        self._loads: dict[Hashable, dict[UseKey, datetime | None]] = {}

    # -- armed acts ---------------------------------------------------------------------
    def arm(
        self,
        key: UseKey,
        expires_at: datetime | None,
        *,
        page: Hashable | None = None,
        url: str | None = None,
    ) -> None:
        """``decide()`` spent a use on an act: it admits one request of ``page`` (``None``:
        the main tab), for ``url`` when given."""
        self._armed.setdefault(key, []).append(_Arm(expires_at=expires_at, page=page, url=url))

    def take_armed(
        self, key: UseKey, now: datetime, *, consume: bool, who: Requester = Requester()
    ) -> tuple[bool, datetime | None]:
        """Whether an unexpired act armed for ``who`` is there, and its expiry;
        ``consume`` takes it."""
        arms = [a for a in self._armed.pop(key, []) if a.expires_at is None or a.expires_at > now]
        found = next((a for a in arms if a.admits(who)), None)
        if found is not None and consume:
            arms.remove(found)
        if arms:
            self._armed[key] = arms
        return (True, found.expires_at) if found is not None else (False, None)

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
