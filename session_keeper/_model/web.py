"""Where a conversation's pages may go: the web, and nothing else.

A conversation's page navigates only to ``http:``, ``https:`` and ``about:blank``.
Everything else a browser can show is refused, because none of it is a site a grant can
name and each leads out of the conversation:

- ``file:`` reads the machine's files and directory listings (keys, ``.env``, the
  keeper's own key file, the profile);
- ``chrome:``, ``devtools:``, ``chrome-untrusted:`` are the browser's own pages
  (``chrome://history`` lists every conversation's URLs, ``chrome://settings`` can clear
  every login in the shared jar);
- ``view-source:``, ``javascript:``, ``data:``, ``blob:``, ``filesystem:`` and the rest
  wrap or run content that no grant decides.

A page may still *load* such URLs as subresources where Chromium lets it (a ``data:``
image); only navigations are judged here. The rule is pure (no browser): the keeper
applies it to every navigation it is asked for, and the Guard to every request the
browser pauses.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

from session_keeper._util.urls import SCHEMES

__all__ = [
    "WEB_SCHEMES",
    "block_place",
    "non_web_reason",
    "origin_of",
    "scheme_of",
    "shown_origin",
]

#: The schemes a conversation's page may navigate to (plus ``about:blank``).
WEB_SCHEMES: Final = frozenset({"http", "https"})

#: Schemes whose URL is safe to name in a record (a path, never content or script).
_NAMED_PATH: Final = frozenset({"file", "chrome", "devtools", "chrome-untrusted"})

#: At most this much of a refused local path is kept in a block record.
_PATH_KEPT: Final = 200


def scheme_of(url: str) -> str:
    """The URL's scheme, lower case (``""`` when it has none)."""
    try:
        return urlsplit(url).scheme.lower()
    except ValueError:
        return ""


def _is_blank(url: str) -> bool:
    # about:blank, also with a query or fragment (Chromium shows the same empty page).
    head = url.split("#", 1)[0].split("?", 1)[0]
    return head.strip().lower() == "about:blank"


def non_web_reason(url: str) -> str | None:
    """Why a page may not navigate to ``url``, or ``None`` when it may (a web URL).

    Names the scheme only, never the rest of the URL (a ``data:`` or ``javascript:``
    URL is content, and may hold anything).
    """
    scheme = scheme_of(url)
    if scheme in WEB_SCHEMES or _is_blank(url):
        return None
    named = f"{scheme}:" if scheme else "a URL without a scheme"
    return (
        f"a conversation's page navigates only to http:, https: and about:blank, "
        f"not to {named} (local files and the browser's own pages are not the web)"
    )


def shown_origin(url: str) -> tuple[str, str]:
    """(origin, path) of a refused non-web URL as a block record may keep them.

    ``file:///etc/passwd`` keeps its path (bounded): it says what was reached for.
    Content-bearing schemes (``data:``, ``javascript:``) keep none of it.
    """
    scheme = scheme_of(url) or "none"
    if scheme in _NAMED_PATH:
        try:
            parts = urlsplit(url)
        except ValueError:
            return f"{scheme}://", "/"
        host = (parts.hostname or "").lower()
        return f"{scheme}://{host}", (parts.path or "/")[:_PATH_KEPT]
    return f"{scheme}:", ""


def origin_of(url: str) -> str | None:
    """``scheme://host[:port]`` lower-cased, or ``None`` for a non-network URL."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in SCHEMES or not parts.hostname:
        return None
    host = parts.hostname.lower()
    port = f":{parts.port}" if parts.port is not None else ""
    return f"{parts.scheme.lower()}://{host}{port}"


def block_place(url: str) -> tuple[str, str]:
    """``(origin, path)`` a block record keeps for a refused ``url``.

    A network URL keeps its origin (as :func:`origin_of` spells it) and path; a refused
    local file or browser page keeps its scheme (and, for a file, its bounded path),
    never a ``data:`` or script URL's content (see :func:`shown_origin`). Whoever looks a
    block up by its URL asks this too, so both sides spell the place the same way.
    """
    origin = origin_of(url)
    if origin is None:
        return shown_origin(url)
    return origin, urlsplit(url).path or "/"
