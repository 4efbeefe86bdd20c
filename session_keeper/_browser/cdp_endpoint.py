"""A CDP endpoint as the keeper takes it: validated at once, shown without its secrets, and
the names of the generation marker a session plants in the browser it reaches."""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections.abc import Awaitable, Callable
from urllib.parse import SplitResult, unquote, urlsplit

from session_keeper._util.redact import (
    REDACTED,
)
from session_keeper.errors import (
    InvalidArgument,
    InvalidArgumentType,
)

__all__ = [
    "MARKER_COOKIE",
    "MARKER_HOST",
    "MAX_ENDPOINT_CHARS",
    "check_endpoint",
    "endpoint_display",
    "endpoint_secrets",
    "marker_cookie_name",
]

#: The keeper-only host that carries the generation marker; ``.invalid`` never resolves.
MARKER_HOST = "session-keeper.invalid"
#: The legacy marker cookie's name, shared by every keeper (still read at re-binding so
#: saved identities keep loading); see :func:`marker_cookie_name` for today's.
MARKER_COOKIE = "session_keeper_generation"


def marker_cookie_name(keeper_id: str) -> str:
    """The marker cookie's name for ``keeper_id``: one per keeper, so two keepers on one
    browser never overwrite each other's marker (its value is random and never logged)."""
    digest = hashlib.sha256(f"session-keeper-id:{keeper_id}".encode()).hexdigest()[:16]
    return f"{MARKER_COOKIE}_{digest}"


Endpoint = str | Callable[[], Awaitable[str]]

#: The longest endpoint URL accepted; hosted endpoints with a token run to a few hundred.
MAX_ENDPOINT_CHARS = 4096
_SCHEMES = frozenset({"ws", "wss", "http", "https"})
_HOST_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9_-]+)*\.?")
#: Control characters and spaces: never part of a URL, and a NUL ends a C string early.
_NOT_IN_URL = re.compile(r"[\x00-\x20\x7f-\x9f]")


def check_endpoint(url: object) -> SplitResult:
    """Parse a CDP endpoint URL, or raise :class:`InvalidArgument` (the message never
    quotes the URL: its path, query or userinfo may carry an API key)."""
    if not isinstance(url, str):
        raise InvalidArgumentType("the endpoint must be a URL string")
    if len(url) > MAX_ENDPOINT_CHARS:
        raise InvalidArgument(f"the endpoint URL is longer than {MAX_ENDPOINT_CHARS} characters")
    if _NOT_IN_URL.search(url):
        raise InvalidArgument("the endpoint URL contains a control character or a space")
    try:
        parts = urlsplit(url)
        port = parts.port  # raises for a port that is not a number in 0..65535
    except ValueError:
        raise InvalidArgument("the endpoint is not a parseable URL (host or port)") from None
    if parts.scheme.lower() not in _SCHEMES:
        raise InvalidArgument("the endpoint must be an http(s):// or ws(s):// URL")
    host = parts.hostname
    if not host:
        raise InvalidArgument("the endpoint URL has no host")
    bracketed = parts.netloc.rpartition("@")[2].startswith("[")
    if bracketed:
        try:
            ipaddress.IPv6Address(host.partition("%")[0])
        except ValueError:
            raise InvalidArgument("the endpoint URL's host is not an IPv6 address") from None
    elif not _HOST_NAME.fullmatch(host):
        raise InvalidArgument("the endpoint URL's host is not a host name or address")
    if port == 0:
        raise InvalidArgument("the endpoint URL's port must be 1..65535")
    return parts


def endpoint_display(parts: SplitResult) -> str:
    """An endpoint as it may be shown: scheme, host and port; its userinfo dropped, its
    path and query (where hosted endpoints carry their API key) shown as redacted."""
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    port = f":{parts.port}" if parts.port is not None else ""
    path = f"/{REDACTED}" if parts.path not in ("", "/") else parts.path
    query = f"?{REDACTED}" if parts.query else ""
    fragment = f"#{REDACTED}" if parts.fragment else ""
    return f"{parts.scheme}://{host}{port}{path}{query}{fragment}"


#: A path segment this long is taken for a token (``/devtools/browser/<id>``); shorter
#: ones are words ("devtools", "browser") that scrubbing would blank everywhere.
_TOKEN_SEGMENT_CHARS = 16


def endpoint_secrets(parts: SplitResult) -> list[str]:
    """The endpoint's parts that may be a credential, raw and percent-decoded."""
    userinfo = parts.netloc.rpartition("@")[0]
    found = [userinfo, parts.password or "", parts.path, parts.query, parts.fragment]
    found += [seg for seg in parts.path.split("/") if len(seg) >= _TOKEN_SEGMENT_CHARS]
    found += [value for _, _, value in (kv.partition("=") for kv in parts.query.split("&"))]
    found = [piece for piece in found if piece and piece != "/"]
    return found + [unquote(piece) for piece in found]
