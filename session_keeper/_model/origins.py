"""Origin allowlists: one parser and one matching rule for job contracts and the Guard.

An entry is ``scheme://host[:port]`` (``http``, ``https``, ``ws`` or ``wss``) or a
bare ``host[:port]``. A URL is admitted by an entry when:

- the host matches exactly (case-insensitive; no subdomains, no wildcards);
- the scheme matches, when the entry names one (a bare host admits every scheme);
- the port matches, only when the entry names one; then it must match exactly, a
  URL without a port counting as its scheme's default port (80 for ``http``/``ws``,
  443 for ``https``/``wss``): ``http://catalogue.example:80`` admits
  ``http://catalogue.example/`` and nothing on port 8000.

So ``http://catalogue.example`` admits ``http://catalogue.example:8000/items``, while
``http://catalogue.example:8000`` admits port 8000 only. Anything else in an entry
(a path, query, fragment, user info, another scheme, a bad port) is refused with
:class:`InvalidArgument` when the entry is given, never mangled into something else.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

import attrs

from session_keeper._util.urls import SCHEMES, url_origin
from session_keeper.errors import InvalidArgument, InvalidArgumentType


@attrs.frozen(kw_only=True)
class AllowedOrigin:
    """One parsed allowlist entry; ``scheme``/``port`` are ``None`` when it names none."""

    scheme: str | None
    host: str
    port: int | None

    def admits(self, url: str) -> bool:
        """Whether ``url`` (an absolute http(s)/ws(s) URL) is inside this entry."""
        seen = url_origin(url)
        if seen is None:
            return False
        scheme, host, port = seen
        if host != self.host:
            return False
        if self.scheme is not None and scheme != self.scheme:
            return False
        return self.port is None or port == self.port

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = f":{self.port}" if self.port is not None else ""
        return f"{self.scheme}://{host}{port}" if self.scheme else f"{host}{port}"


def parse_origin(entry: object) -> AllowedOrigin:
    """Parse one allowlist entry; raises :class:`InvalidArgumentType` for a non-str,
    :class:`InvalidArgument` for anything that is not ``[scheme://]host[:port]``."""
    if not isinstance(entry, str):
        raise InvalidArgumentType(f"an allowed origin must be a str, not {type(entry).__name__}")
    text = entry.strip()
    if not text or text != entry or any(c.isspace() or ord(c) < 32 for c in text):
        raise InvalidArgument(f"{entry!r} is not an origin: empty, or spaces/control characters")
    has_scheme = "://" in text
    try:
        parts = urlsplit(text if has_scheme else f"//{text}")
        port = parts.port
    except ValueError:
        raise InvalidArgument(f"{entry!r} is not an origin: bad host or port") from None
    scheme = parts.scheme.lower() if has_scheme else None
    if scheme is not None and scheme not in SCHEMES:
        raise InvalidArgument(f"{entry!r} is not an http(s) or ws(s) origin")
    if not parts.hostname or "@" in parts.netloc or "*" in parts.netloc:
        raise InvalidArgument(f"{entry!r} is not an origin: it needs a plain host")
    if parts.path not in ("", "/") or parts.query or parts.fragment or text.endswith("?"):
        raise InvalidArgument(f"{entry!r} is not an origin: no path, query or fragment")
    if parts.netloc.endswith(":") or port == 0:
        raise InvalidArgument(f"{entry!r} is not an origin: empty or zero port")
    return AllowedOrigin(scheme=scheme, host=parts.hostname.lower(), port=port)


def parse_origins(entries: Iterable[object]) -> tuple[AllowedOrigin, ...]:
    """Parse every entry of an allowlist (errors as :func:`parse_origin`)."""
    if isinstance(entries, str) or not isinstance(entries, Iterable):
        raise InvalidArgumentType("origins must be a collection of str, not a single value")
    return tuple(parse_origin(e) for e in entries)


def url_allowed(url: str, allowed: Iterable[AllowedOrigin]) -> bool:
    """Whether any entry of ``allowed`` admits ``url``."""
    return any(a.admits(url) for a in allowed)
