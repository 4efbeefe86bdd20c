"""Where a job may be: its conversation, its contract's origins, its sign-in page."""

from __future__ import annotations

from fnmatch import fnmatchcase
from urllib.parse import urlsplit, urlunsplit

from session_keeper._model.origins import parse_origins, url_allowed
from session_keeper.stores._records import JobContract


def conversation_of(contract: JobContract) -> str:
    """The keeper conversation a job acts as: ``extra["conversation"]`` or ``job:<id>``."""
    conv = contract.extra.get("conversation")
    return conv if isinstance(conv, str) and conv else f"job:{contract.job_id}"


def is_login_page(url: str | None, pattern: str | None) -> bool:
    """Whether ``url`` is the contract's sign-in page (``login_url``, an fnmatch glob).

    Matched against the whole URL and against it without query and fragment, so
    ``"http://site.example/login"`` also catches ``/login?next=...``.
    """
    if url is None or pattern is None:
        return False
    parts = urlsplit(url)
    bare = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    return fnmatchcase(url, pattern) or fnmatchcase(bare, pattern)


def origin_allowed(url: str, allowed: tuple[str, ...]) -> bool:
    """Whether ``url`` is inside the contract's allowlist (empty list: anything).

    Scheme and host must match an entry; the port only when the entry names one
    (``session_keeper._model.origins``). ``about:`` pages (a fresh tab) are nowhere.
    """
    if not allowed or url.startswith("about:"):
        return True
    return url_allowed(url, parse_origins(allowed))
