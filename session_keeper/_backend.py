"""The BrowserBackend seam: what the keeper needs from a browser, and nothing more.

A backend starts browsers; each started browser is a :class:`BrowserSession`, one
*generation* in the keeper's words. The protocol is shaped after Playwright's
persistent context (``launch_persistent_context``): events tell us the browser is
gone, cookies live in one jar shared by every page, pages belong to conversations.

Real implementation: :class:`session_keeper.PlaywrightBackend`. Fake implementation:
:class:`session_keeper.testing.FakeBackend`. Both run through one contract suite
(``tests/contract/test_backend_contract.py``).
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, Protocol, TypeVar
from urllib.parse import urlsplit

import attrs

from session_keeper._errors import BrowserGoneError, InvalidArgument

#: Why a browser stopped: ``"closed"`` (someone closed it cleanly) or ``"crashed"``
#: (the process died or the connection broke without a clean close).
CloseCause = Literal["closed", "crashed"]

PageT = TypeVar("PageT")
T = TypeVar("T")

#: The most a :class:`BrowserSession` call may go on waiting, in seconds, once the
#: browser's death is known: then it raises :class:`~session_keeper.BrowserGoneError`.
#: Both shipped backends raise at once (the same loop iteration that learns of the
#: death); the bound leaves room for a busy event loop.
DEATH_BOUND_S = 1.0

#: Control characters and whitespace: never part of a host (a NUL breaks PostgreSQL).
_CONTROL = re.compile(r"[\x00-\x20\x7f-\x9f\s]")
_PORT = re.compile(r":[0-9]{1,5}")


def normalize_site(site: str) -> str:
    """A site as the keeper compares it: the bare host, lower case, no leading dot.

    Accepts a host (``billing.example``), a host and port (``billing.example:8000``,
    ``[::1]:8080``) or a URL (``https://billing.example:8443/path`` gives
    ``billing.example``); an IPv6 address comes back without brackets (``::1``), as
    ``urlsplit(url).hostname`` spells it. Raises :class:`InvalidArgument` for what
    is none of these (an empty host, whitespace or control characters, a bad port)
    rather than keep a mangled piece of it.
    """
    text = site.strip().lower()
    if _CONTROL.search(text):
        raise InvalidArgument("a site must not contain whitespace or control characters")
    if "://" in text:
        try:
            parts = urlsplit(text)
            parts.port  # noqa: B018 - raises ValueError for a port that is not one
        except ValueError:
            raise InvalidArgument(f"{site!r} is not a URL with a valid host") from None
        host = parts.hostname or ""
    else:
        # Only a host (and port) is a site: a path, query or fragment is cut off.
        text = re.split(r"[/?#]", text, maxsplit=1)[0]
        if text.startswith("["):
            inside, bracket, rest = text[1:].partition("]")
            if not bracket or (rest and not _PORT.fullmatch(rest)):
                raise InvalidArgument(f"{site!r} is not a valid [IPv6]:port site")
            host = inside
        elif text.count(":") == 1:
            host, _, port = text.partition(":")
            if not _PORT.fullmatch(":" + port):
                raise InvalidArgument(f"{site!r} has a port that is not a number")
        else:
            host = text  # a bare IPv6 address keeps its colons
    host = host.lstrip(".")
    if not host or "[" in host or "]" in host or "@" in host:
        raise InvalidArgument(f"{site!r} does not name a host")
    return host


def cookie_applies_to(domain: str, site: str) -> bool:
    """Whether a cookie set for ``domain`` is sent to ``site`` (RFC 6265 domain match)."""
    d = normalize_site(domain)
    s = normalize_site(site)
    return s == d or s.endswith("." + d)


_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def cookie_domain_matches(domain: str, host: str) -> bool:
    """RFC 6265bis domain-match of a jar cookie: ``.a.example`` is a domain cookie
    (the host and its subdomains), ``a.example`` a host-only cookie (that host only)."""
    h = normalize_site(host)
    if domain.startswith("."):
        return cookie_applies_to(domain, h)
    return normalize_site(domain) == h


def cookie_path_matches(cookie_path: str, request_path: str) -> bool:
    """RFC 6265bis path-match: equal, or a prefix ending at a ``/`` boundary."""
    path = request_path or "/"
    if path == cookie_path:
        return True
    if not path.startswith(cookie_path):
        return False
    return cookie_path.endswith("/") or path[len(cookie_path)] == "/"


def _in_partition(partition_key: str, top_level: str) -> bool:
    """Whether a page whose main frame is ``top_level`` is inside ``partition_key``.

    Chromium keys a partition by the schemeful top-level *site* (``https://a.example``),
    so a main frame on that host or any subdomain of it, over the same scheme, is inside.
    """
    key = urlsplit(partition_key if "://" in partition_key else "https://" + partition_key)
    top = urlsplit(top_level if "://" in top_level else "https://" + top_level)
    if not key.hostname or not top.hostname or key.scheme != top.scheme:
        return False
    return cookie_applies_to(key.hostname, top.hostname)


@attrs.frozen(kw_only=True)
class Cookie:
    """One cookie as the jar holds it. ``value`` never appears in ``repr``."""

    name: str
    value: str = attrs.field(repr=False)
    domain: str
    path: str = "/"
    #: Expiry as a UNIX timestamp; ``None`` for a session cookie.
    expires: float | None = None
    http_only: bool = False
    secure: bool = False
    #: The top-level site a partitioned (CHIPS) cookie is kept for; ``None`` if unpartitioned.
    partition_key: str | None = None

    @property
    def host_only(self) -> bool:
        """True for a host-only cookie (set without ``Domain``: no leading dot in the jar)."""
        return not self.domain.startswith(".")

    @property
    def is_session(self) -> bool:
        """True for a session cookie (no expiry): a clean browser close drops it."""
        return self.expires is None

    def applies_to(self, site: str) -> bool:
        """Whether this cookie is sent to some URL of ``site`` (domain-match only)."""
        return cookie_domain_matches(self.domain, site)

    def sent_with(self, url: str, *, top_level_site: str | None = None) -> bool:
        """Whether a request to ``url`` carries this cookie (RFC 6265bis, as Chromium applies it).

        Domain-match (host-only exact), path-match, ``Secure`` only over ``https`` (or
        to a local host, which Chromium treats as a secure context), and a partitioned
        cookie only under the top-level site it was set in (``top_level_site``, the
        scheme and host of the page's main frame; ``None`` means the request's own site).
        """
        parts = urlsplit(url)
        host = parts.hostname or ""
        if not host or not cookie_domain_matches(self.domain, host):
            return False
        if not cookie_path_matches(self.path, parts.path):
            return False
        if self.secure and parts.scheme not in ("https", "wss") and host not in _LOCAL_HOSTS:
            return False
        if self.partition_key is not None:
            top = top_level_site if top_level_site is not None else url
            return _in_partition(self.partition_key, top)
        return True


class BrowserSession(Protocol[PageT]):
    """One running browser: one generation of the keeper.

    Contract (every implementation, fake or real, passes the same suite):

    - ``alive`` is answered from state kept by the browser's own events: reading it
      never costs a round trip. It turns ``False`` exactly once, after which it
      stays ``False``.
    - Every callback given to ``on_close`` is called exactly once, with the cause,
      when the browser stops being alive (``"closed"`` after :meth:`close`,
      ``"crashed"`` when the process died or disconnected). A callback added after
      that is called soon, from the event loop, with the same cause.
    - Every callback given to ``on_page`` is called for each page that opens after
      it was added, with the owning conversation: pages from :meth:`open_page` and
      popups they open (a popup belongs to its opener's conversation).
    - After the browser is gone, every ``async`` method except :meth:`close` and
      :meth:`kill` raises :class:`~session_keeper.BrowserGoneError`.
    - No call outlives the browser: a call still pending when the browser dies (a
      page being opened, its ``on_page`` callbacks still running, a navigation, a
      cookie read) raises :class:`~session_keeper.BrowserGoneError` within
      :data:`DEATH_BOUND_S` seconds of the death being known (``alive`` turning
      ``False``, ``on_close`` callbacks called); it never waits for the browser to
      answer. A pending :meth:`close` returns in that case.
    - No raw driver exception escapes: a call that fails while the browser lives
      raises from the :class:`~session_keeper.SessionKeeperError` tree, e.g.
      :class:`~session_keeper.NavigationError` from :meth:`goto`, with a message
      that carries no cookie value, token or URL query.
    - :meth:`close` is clean: persistent cookies are flushed to the profile, session
      cookies are dropped. :meth:`kill` is abrupt (SIGKILL for a real browser):
      cookies that were not yet flushed are lost. Both are idempotent.
    """

    @property
    def alive(self) -> bool:
        """Whether the browser is still running (no round trip)."""
        ...

    def on_close(self, callback: Callable[[CloseCause], None]) -> None:
        """Call ``callback(cause)`` once when the browser stops."""
        ...

    def on_page(self, callback: Callable[[str, PageT], Awaitable[None] | None]) -> None:
        """Call ``callback(conversation, page)`` for each page that opens from now on."""
        ...

    async def cookies(self) -> Sequence[Cookie]:
        """Every cookie in the browser's jar."""
        ...

    async def add_cookies(self, cookies: Sequence[Cookie]) -> None:
        """Put cookies into the jar."""
        ...

    async def clear_cookies(self, site: str) -> None:
        """Delete every cookie that is sent to ``site``."""
        ...

    async def open_page(self, conversation: str) -> PageT:
        """Open a new blank page owned by ``conversation``."""
        ...

    def pages(self, conversation: str) -> Sequence[PageT]:
        """The open pages of ``conversation``, oldest first (no round trip)."""
        ...

    def page_url(self, page: PageT) -> str:
        """The page's current URL as last reported by the browser (no round trip)."""
        ...

    def page_is_open(self, page: PageT) -> bool:
        """Whether the page is still open (no round trip)."""
        ...

    async def goto(self, page: PageT, url: str) -> str:
        """Navigate ``page`` to ``url``; return the URL it ended on."""
        ...

    async def close_page(self, page: PageT) -> None:
        """Close one page."""
        ...

    async def close(self) -> None:
        """Close the browser cleanly."""
        ...

    async def kill(self) -> None:
        """Stop the browser at once, without a clean shutdown."""
        ...


async def while_alive(session: BrowserSession[Any], op: Awaitable[T], what: str) -> T:
    """Await ``op`` unless ``session``'s browser stops first: then BrowserGoneError at once.

    For code that drives the browser outside the protocol's calls (a launch hook
    installing routes through Playwright, say): it gets the protocol's promise that no
    call outlives the browser. ``op`` is cancelled when abandoned.
    """
    if not session.alive:
        if inspect.iscoroutine(op):
            op.close()
        raise BrowserGoneError(f"the browser stopped before {what}")
    gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    session.on_close(lambda cause: None if gone.done() else gone.set_result(None))
    task: asyncio.Future[T] = asyncio.ensure_future(op)
    try:
        await asyncio.wait((task, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not task.done():
            task.cancel()
            task.add_done_callback(lambda t: None if t.cancelled() else t.exception())
        gone.cancel()
    if not task.done():
        raise BrowserGoneError(f"the browser stopped during {what}")
    return task.result()


class BrowserBackend(Protocol[PageT]):
    """Starts browsers for the keeper.

    Contract:

    - :meth:`launch` returns a live :class:`BrowserSession`, or raises a
      :class:`~session_keeper.BrowserLaunchError` (:class:`~session_keeper.ChromiumNotFound`,
      :class:`~session_keeper.ProfileInUse`) having started nothing.
    - A backend with a persistent profile gives each new session the cookies the
      previous one flushed (see :meth:`BrowserSession.close` and ``kill``).
    - At most one session of a backend is alive at a time; launching while one is
      alive raises :class:`~session_keeper.ProfileInUse`.
    """

    async def launch(self) -> BrowserSession[PageT]:
        """Start a browser and return it."""
        ...

    async def aclose(self) -> None:
        """Release whatever the backend holds (driver processes); idempotent.

        A live session is closed cleanly first.
        """
        ...
