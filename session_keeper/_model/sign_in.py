"""What a sign-in's pages showed: the document responses of a conversation, in order.

The browser layer reports each top-level document response of a conversation's pages
(method, status, host, the *names* of the cookies it set — never a value); the keeper
reads them at ``record_login`` to refuse a failed sign-in (an error status, the form
shown again) and to tell the cookies the login page set before any credential was
sent from those the sign-in set. Pure: no browser.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from session_keeper._model.cookies import cookie_applies_to

__all__ = ["DocumentSeen", "login_page_cookies", "sign_in_failure"]


@attrs.frozen(kw_only=True)
class DocumentSeen:
    """One top-level document response of a conversation's page."""

    #: Rises by one per response in the session: orders responses across pages.
    seq: int
    method: str
    status: int
    host: str
    #: Names of the cookies its ``Set-Cookie`` headers set (values are never kept).
    set_cookies: frozenset[str] = frozenset()


def _of_site(seen: Sequence[DocumentSeen], site: str) -> list[DocumentSeen]:
    return [d for d in seen if d.host and cookie_applies_to(site, d.host)]


def sign_in_failure(seen: Sequence[DocumentSeen], site: str, *, password_form: bool) -> str | None:
    """Why the sign-in to ``site`` failed, as its last page says; ``None`` when it may not have.

    ``password_form``: the page that answered last still shows a password input.
    """
    mine = _of_site(seen, site)
    if not mine:
        return None
    last = max(mine, key=lambda d: d.seq)
    if last.status >= 400:
        return f"the sign-in's last response from {site} was HTTP {last.status}"
    if password_form:
        return f"{site} still shows its sign-in form (a password input)"
    return None


def login_page_cookies(seen: Sequence[DocumentSeen], site: str) -> frozenset[str]:
    """Names of cookies the login page set before any credential was sent, never set again.

    ``seen`` is the sign-in window (responses since ``begin_login``). Credentials go
    with the first non-``GET`` document request, or leave the site with the first
    document of another host (a sign-in through an identity provider: the app sets its
    state and PKCE cookies, then redirects). What the site's ``GET`` responses set
    before that, and no response of it re-set after, is the login page's cookie — a
    failed or cancelled sign-in keeps it too, so it proves nothing.
    """
    ordered = sorted(seen, key=lambda d: d.seq)
    mine = [d for d in ordered if d.host and cookie_applies_to(site, d.host)]
    if not mine:
        return frozenset()
    # Another host visited before the site's first page is browsing, not the sign-in.
    left = next(
        (
            d.seq
            for d in ordered
            if (d.host and cookie_applies_to(site, d.host) and d.method not in ("GET", "HEAD"))
            or (d.seq > mine[0].seq and not (d.host and cookie_applies_to(site, d.host)))
        ),
        None,
    )
    if left is None:
        return frozenset()
    before = set().union(*(d.set_cookies for d in mine if d.seq < left))
    after = set().union(*(d.set_cookies for d in mine if d.seq >= left))
    return frozenset(before - after)
