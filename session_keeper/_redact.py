"""Redaction at the persistence boundary: URLs and error texts lose what may be a secret.

A magic-link or OAuth callback carries its token in the query string or fragment, and
browser error messages quote such URLs. Whatever goes to the store, an event or a log
keeps the scheme, host and path only.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

_URL_TAIL = re.compile(r"""(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s?#'"<>]*)[?#][^\s'"<>]*""")
_USERINFO = re.compile(r"""(\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^\s/?#'"<>@]*@""")


def redact_url(url: str | None) -> str | None:
    """``url`` without its query string and fragment (``None`` stays ``None``)."""
    if url is None:
        return None
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]  # user:password@ never leaves either
    if not parts.query and not parts.fragment and netloc == parts.netloc:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def redact_text(text: str, limit: int = 300) -> str:
    """``text`` with every URL's query and fragment cut, at most ``limit`` characters."""
    return _USERINFO.sub(r"\1", _URL_TAIL.sub(r"\1?…", text))[:limit]


def describe_error(exc: BaseException) -> str:
    """An exception as it may be stored: its type and its redacted message."""
    return redact_text(f"{type(exc).__name__}: {exc}")
