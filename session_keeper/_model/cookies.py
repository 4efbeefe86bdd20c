"""Cookies and sites as the keeper compares them: a :class:`Cookie` as the jar holds it,
the browser's rules for which request carries it, and site normalisation. Pure: no browser.
"""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlsplit

import attrs

from session_keeper.errors import InvalidArgument

__all__ = [
    "Cookie",
    "cookie_applies_to",
    "cookie_domain_matches",
    "cookie_path_matches",
    "normalize_site",
]

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


#: A cookie's ``SameSite`` attribute, as Playwright spells it.
SameSite = Literal["Strict", "Lax", "None"]


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
    #: ``SameSite`` as the browser reports it; ``None`` when it does not say (Chromium then
    #: treats the cookie as ``Lax``).
    same_site: SameSite | None = None

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
