"""Cookies between Playwright's dictionaries and our :class:`~session_keeper.Cookie`."""

from __future__ import annotations

from typing import Any

from session_keeper._model.cookies import Cookie

__all__ = ["from_cookie", "to_cookie"]


def to_cookie(raw: Any) -> Cookie:
    """Our :class:`Cookie` from one of Playwright's ``context.cookies()`` entries."""
    expires = float(raw.get("expires", -1))
    return Cookie(
        name=raw["name"],
        value=raw["value"],
        domain=raw["domain"],
        path=raw.get("path", "/"),
        # Playwright reports a session cookie as expires == -1.
        expires=None if expires < 0 else expires,
        http_only=bool(raw.get("httpOnly", False)),
        secure=bool(raw.get("secure", False)),
        partition_key=raw.get("partitionKey") or None,
        same_site=raw.get("sameSite") if raw.get("sameSite") in ("Strict", "Lax", "None") else None,
    )


def from_cookie(cookie: Cookie) -> Any:
    """The ``context.add_cookies()`` entry for ``cookie``."""
    raw: dict[str, Any] = {
        "name": cookie.name,
        "value": cookie.value,
        "domain": cookie.domain,
        "path": cookie.path,
        "expires": -1 if cookie.expires is None else cookie.expires,
        "httpOnly": cookie.http_only,
        "secure": cookie.secure,
    }
    if cookie.partition_key is not None:
        raw["partitionKey"] = cookie.partition_key
    if cookie.same_site is not None:
        raw["sameSite"] = cookie.same_site
    return raw
