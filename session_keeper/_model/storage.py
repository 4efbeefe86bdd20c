"""Web storage as the keeper compares it: items of an origin's ``localStorage`` and of a
tab's ``sessionStorage``, and their keyed fingerprints. Pure: no browser.

Single-page apps keep their login there (a bearer token the page sends as
``Authorization``), where no cookie jar read sees it. An item's value is a secret like a
cookie's: it is never shown (``repr`` hides it) and is kept only as a fingerprint.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal
from urllib.parse import urlsplit

import attrs

from session_keeper.errors import InvalidArgument, InvalidArgumentType

__all__ = [
    "StorageArea",
    "StorageFate",
    "StorageFingerprint",
    "StorageId",
    "StorageItem",
    "StorageSnapshot",
    "classify_storage",
    "normalize_origin",
    "origins_on_site",
    "storage_evidence",
    "storage_id",
    "storage_snapshot",
]

#: ``"local"``: the origin's ``localStorage`` (kept in the profile); ``"session"``: a
#: tab's ``sessionStorage`` (kept by the tab, gone with it); ``"indexeddb"``: a record of
#: one of the origin's IndexedDB databases (kept in the profile), keyed
#: ``<database>/<object store>/<record key as JSON>``.
StorageArea = Literal["local", "session", "indexeddb"]


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


#: A storage item's identity: (origin, area, key) — a value change keeps it.
StorageId = tuple[str, str, str]

#: Fingerprints of storage items at one moment, by identity.
StorageSnapshot = dict[StorageId, str]

#: What a restart did to a login's storage items (as :data:`LoginFate` for cookies).
StorageFate = Literal["survived", "replaced", "lost"]


def storage_id(item: StorageFingerprint) -> StorageId:
    """The identity of ``item`` in its origin's storage."""
    return (item.origin, item.area, item.key)


def storage_snapshot(items: Iterable[StorageFingerprint]) -> StorageSnapshot:
    """``items`` by identity."""
    return {storage_id(i): i.fingerprint for i in items}


def origins_on_site(urls: Iterable[str], site: str) -> tuple[str, ...]:
    """The ``http(s)`` origins among ``urls`` whose host is ``site`` or under it, sorted."""
    found: set[str] = set()
    for url in urls:
        try:
            origin = normalize_origin(url)
        except InvalidArgument:
            continue  # about:blank, data:, a URL without a host: no web storage of a site
        host = urlsplit(origin).hostname or ""
        if host == site or host.endswith("." + site):
            found.add(origin)
    return tuple(sorted(found))


def storage_evidence(
    baseline: Mapping[StorageId, str] | None,
    now: Iterable[StorageFingerprint],
    keys: frozenset[str] | None,
) -> tuple[StorageFingerprint, ...]:
    """The items of ``now`` that prove a sign-in: they appeared or changed since
    ``baseline`` (the sign-in's start), of the ``keys`` that carry the site's login
    when they are named.

    Without a baseline (no sign-in window was marked) nothing is known to have
    changed: only named keys present now count, as the configuration's word.
    """
    picked = [i for i in now if keys is None or i.key in keys]
    if baseline is None:
        return tuple(picked) if keys is not None else ()
    return tuple(i for i in picked if baseline.get(storage_id(i)) != i.fingerprint)


def classify_storage(
    recorded: Iterable[StorageFingerprint], present: Mapping[StorageId, str]
) -> StorageFate:
    """Compare a login's recorded storage items with what a browser holds now.

    - Only what a new browser can hold is judged: a ``sessionStorage`` item never
      outlives its tab, so beside a ``localStorage`` or IndexedDB item its absence says
      nothing, and a login kept in ``sessionStorage`` alone is lost by any restart.
    - Of the items judged, one gone is a loss (conservative, as for cookies).
    - All present: one with the value recorded is the login surviving, to be
      re-validated — apps rewrite what they keep beside a token (a last-seen time, a
      refreshed profile), and which item is the token the keeper cannot know; none with
      its value is another sign-in (the site's probe, when configured, has the final
      word).
    """
    items = list(recorded)
    judged = [i for i in items if i.area != "session"] or items
    kept = False
    for item in judged:
        now = present.get(storage_id(item))
        if now is None:
            return "lost"
        kept = kept or now == item.fingerprint
    return "survived" if kept else "replaced"
