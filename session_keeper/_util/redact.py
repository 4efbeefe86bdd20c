"""Redaction at the persistence boundary: no secret in any text we store or log.

Two kinds of secret can hide in an error message. A magic-link or OAuth callback
carries its token in a URL's query string or fragment: whatever goes to the store, an
event or a log keeps the scheme, host and path only. And a page or server may quote a
cookie value (a script error quoting ``document.cookie``, a server echoing its
``Cookie`` header): every value of the live cookie jar, and the keys of a keyring, are
replaced by ``[redacted]`` in every text the library persists or logs.

The values to scrub are held in memory only, per owner (a keeper), and replaced each
time the owner reads its browser's jar (:func:`remember_secrets`); they are never
written anywhere. :func:`redact_text` and :func:`describe_error` (what the job loop
stores) scrub them, and so does a filter on every ``session_keeper`` logger
(:func:`scrubbing_logger`).
"""

from __future__ import annotations

import logging
import re
import weakref
from collections.abc import Callable, Iterable
from typing import TypeVar, cast
from urllib.parse import quote, urlsplit, urlunsplit

from session_keeper._util.log_fields import LogFieldsFilter

_URL_TAIL = re.compile(r"""(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s?#'"<>]*)[?#][^\s'"<>]*""")
_USERINFO = re.compile(r"""(\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^\s/?#'"<>@]*@""")

#: What a scrubbed secret reads as.
REDACTED = "[redacted]"
#: Shorter values are not scrubbed: "1" or "yes" would blank every text, and such a
#: value guards nothing worth stealing.
MIN_SECRET_LEN = 6

T = TypeVar("T")

_secrets: weakref.WeakKeyDictionary[object, frozenset[str]] = weakref.WeakKeyDictionary()
_pattern: re.Pattern[str] | None = None


def remember_secrets(owner: object, values: Iterable[str]) -> None:
    """Make ``values`` (and their URL-encoded forms) the secrets ``owner`` holds now.

    In memory only, dropped with ``owner``; never persisted.
    """
    forms: set[str] = set()
    for v in values:
        if isinstance(v, str) and len(v) >= MIN_SECRET_LEN:
            forms.add(v)
            forms.add(quote(v, safe=""))
    _secrets[owner] = frozenset(forms)
    _recompile()


def forget_secrets(owner: object) -> None:
    """Drop what ``owner`` registered."""
    _secrets.pop(owner, None)
    _recompile()


def _recompile() -> None:
    global _pattern
    every = set().union(*_secrets.values()) if _secrets else set()
    # Longest first, so a value containing another is replaced whole.
    ordered = sorted(every, key=len, reverse=True)
    _pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None


def scrub_secrets(text: str) -> str:
    """``text`` with every secret some owner registered replaced by ``[redacted]``."""
    pattern = _pattern
    return pattern.sub(REDACTED, text) if pattern is not None else text


def scrub_fields(value: T, scrub: Callable[[str], str]) -> T:
    """``value`` with ``scrub`` applied to every string in it (dicts, lists, tuples)."""
    if isinstance(value, str):
        return cast(T, scrub(value))
    if isinstance(value, dict):
        return cast(T, {k: scrub_fields(v, scrub) for k, v in value.items()})
    if isinstance(value, list):
        return cast(T, [scrub_fields(v, scrub) for v in value])
    if isinstance(value, tuple):
        return cast(T, tuple(scrub_fields(v, scrub) for v in value))
    return value


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
    """``text`` without known secrets and URL queries/fragments, at most ``limit`` characters."""
    # Secrets first: cutting to the limit first could leave half a value behind.
    text = scrub_secrets(text)
    return _USERINFO.sub(r"\1", _URL_TAIL.sub(r"\1?…", text))[:limit]


def describe_error(exc: BaseException) -> str:
    """An exception as it may be stored: its type and its redacted message."""
    return redact_text(f"{type(exc).__name__}: {exc}")


class _ScrubFilter(logging.Filter):
    """Scrubs registered secrets from a record's message, traceback and extras."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _pattern is None:
            return True
        message = record.getMessage()
        scrubbed = scrub_secrets(message)
        if scrubbed != message:
            record.msg, record.args = scrubbed, None
        if record.exc_info and record.exc_info[0] is not None:
            text = record.exc_text or logging.Formatter().formatException(record.exc_info)
            # The exception object (and its message) must not travel with the record.
            record.exc_text, record.exc_info = scrub_secrets(text), None
        for key, value in list(record.__dict__.items()):
            if key not in _STANDARD and isinstance(value, str):
                record.__dict__[key] = scrub_secrets(value)
        return True


_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message"}
_FILTER = _ScrubFilter()


_FIELDS_FILTER = LogFieldsFilter()


def scrubbing_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)`` with the structured fields (see :func:`log_fields`) and
    then the secret scrubber on it."""
    logger = logging.getLogger(name)
    if _FIELDS_FILTER not in logger.filters:
        logger.addFilter(_FIELDS_FILTER)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger
