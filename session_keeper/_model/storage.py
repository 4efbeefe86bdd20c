"""Web storage as the keeper compares it: items of an origin's ``localStorage`` and of a
tab's ``sessionStorage``, and their keyed fingerprints. Pure: no browser.

Single-page apps keep their login there (a bearer token the page sends as
``Authorization``), where no cookie jar read sees it. An item's value is a secret like a
cookie's: it is never shown (``repr`` hides it) and is kept only as a fingerprint.
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

import attrs

from session_keeper.errors import InvalidArgument, InvalidArgumentType

__all__ = ["StorageArea", "StorageFingerprint", "StorageItem", "normalize_origin"]

#: ``"local"``: the origin's ``localStorage`` (kept in the profile); ``"session"``: a
#: tab's ``sessionStorage`` (kept by the tab, gone with it).
StorageArea = Literal["local", "session"]


def normalize_origin(origin: object) -> str:
    """``scheme://host[:port]`` of an ``http(s)`` URL or origin, lower case, no path.

    Raises :class:`InvalidArgumentType` for a non-string and :class:`InvalidArgument`
    for anything without an ``http``/``https`` scheme and a host.
    """
    if not isinstance(origin, str):
        raise InvalidArgumentType(f"origin must be a str, not {type(origin).__name__}")
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        raise InvalidArgument("origin is not a URL with a valid host and port") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise InvalidArgument("origin must be an http(s) URL with a host, e.g. https://a.example")
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme.lower()}://{host}" + (f":{port}" if port is not None else "")


@attrs.frozen(kw_only=True)
class StorageItem:
    """One item of web storage as the browser holds it (the value is never shown)."""

    origin: str
    area: StorageArea
    key: str
    value: str = attrs.field(repr=False)


@attrs.frozen(kw_only=True)
class StorageFingerprint:
    """The keeper's memory of a storage item: where it lives, its key, a keyed digest."""

    origin: str
    area: StorageArea
    key: str
    fingerprint: str = attrs.field(repr=False)
