"""catalogue.example: a paged catalogue behind a sign-in, for the catalogue audit.

``/items`` answers 401 when signed out; ``/shop/items`` redirects to ``/login`` instead
(as most sites do). Faults can be injected into the next ``/items`` replies.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Mapping
from urllib.parse import urlencode

from demos.sites._html import html_response, not_found
from session_keeper.testing import RecordedRequest, SiteResponse

__all__ = [
    "CATALOGUE_PAGES",
    "CATALOGUE_PAGE_SIZE",
    "CATALOGUE_PASSWORD",
    "CATALOGUE_USERNAME",
    "CatalogueSite",
    "catalogue_ground_truth",
]

#: The catalogue: stable record ids, CATALOGUE_PAGES pages of CATALOGUE_PAGE_SIZE rows.
CATALOGUE_PAGES = 24
CATALOGUE_PAGE_SIZE = 10
CATALOGUE_PASSWORD = "catalogue reader"
#: The catalogue's form asks for a username too; when one is sent it must be this.
CATALOGUE_USERNAME = "reader"


def catalogue_ground_truth() -> dict[str, dict[str, str]]:
    """Every catalogue record by id: what an audit must end up with."""
    truth: dict[str, dict[str, str]] = {}
    for n in range(1, CATALOGUE_PAGES * CATALOGUE_PAGE_SIZE + 1):
        truth[f"SKU-{n:04d}"] = {
            "name": f"Item {n:04d}",
            "price": f"{(n * 37) % 1000 / 10:.2f}",
            "page": str((n - 1) // CATALOGUE_PAGE_SIZE + 1),
        }
    return truth


class CatalogueSite:
    """The catalogue's sessions and injected faults; :meth:`serve` is its handler.

    One lock guards both: LocalSites' server is threaded.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: set[str] = set()
        #: Replies the catalogue gives instead of its pages, oldest first (fault injection).
        self._faults: list[tuple[int, dict[str, str]]] = []

    def inject_fault(self, status: int, headers: Mapping[str, str] | None = None) -> None:
        """Make the next ``/items`` request answer ``status`` (e.g. 503, 429)."""
        with self._lock:
            self._faults.append((status, dict(headers or {})))

    def expire_sessions(self) -> None:
        """Forget every session issued, as a server-side expiry would."""
        with self._lock:
            self._sessions.clear()

    def serve(self, req: RecordedRequest) -> SiteResponse:
        """The catalogue's answer to ``req``."""
        token = req.cookie("catalogue_session")
        with self._lock:
            signed_in = token in self._sessions if token else False
        path = req.path
        if path == "/shop/items":
            if not signed_in:
                # Most sites redirect a signed-out visitor to their sign-in page.
                page_arg = urlencode({"page": req.arg("page") or "1"})
                nxt = urlencode({"next": f"/shop/items?{page_arg}"})
                return SiteResponse(status=303, headers=(("Location", f"/login?{nxt}"),), body="")
            path = "/items"
        with self._lock:
            fault = self._faults.pop(0) if self._faults and path == "/items" else None
        if path == "/login" and req.method == "GET":
            form = (
                "<h1>Catalogue sign-in</h1><form method='post' action='/login'>"
                "<p><label>Username <input name='username' autocomplete='username'></label></p>"
                "<p><label>Password <input name='password' type='password'></label></p>"
                "<button type='submit'>Sign in</button></form>"
            )
            return html_response("Catalogue sign-in", form)
        if path == "/login" and req.method == "POST":
            return self._sign_in(req)
        if not signed_in:
            return html_response(
                "Sign in required", "<h1 id='signin'>Sign in required</h1>", status=401
            )
        if fault is not None:
            status, headers = fault
            return html_response(
                f"HTTP {status}",
                f"<h1 id='fault'>HTTP {status}</h1>",
                status=status,
                headers=tuple(headers.items()),
            )
        if path == "/items" and req.method == "GET":
            return _items_page(req.arg("page"))
        return not_found()

    def _sign_in(self, req: RecordedRequest) -> SiteResponse:
        username = req.arg("username")
        wrong_user = username is not None and username != CATALOGUE_USERNAME
        if wrong_user or not secrets.compare_digest(
            (req.arg("password") or "").encode(), CATALOGUE_PASSWORD.encode()
        ):
            return html_response("Sign-in failed", "<p id='error'>wrong password</p>", status=401)
        new_token = secrets.token_urlsafe(16)
        with self._lock:
            self._sessions.add(new_token)
        cookie = f"catalogue_session={new_token}; Path=/; HttpOnly; SameSite=Lax"
        return SiteResponse(
            status=303, headers=(("Set-Cookie", cookie), ("Location", "/items?page=1")), body=""
        )


def _items_page(page_arg: str | None) -> SiteResponse:
    try:
        page = int(page_arg or "1")
    except ValueError:
        page = 0
    if not 1 <= page <= CATALOGUE_PAGES:
        return html_response("Not found", "<h1>No such page</h1>", status=404)
    truth = catalogue_ground_truth()
    first = (page - 1) * CATALOGUE_PAGE_SIZE + 1
    rows = "".join(
        f"<tr data-id='SKU-{n:04d}'><td class='name'>{truth[f'SKU-{n:04d}']['name']}</td>"
        f"<td class='price'>{truth[f'SKU-{n:04d}']['price']}</td></tr>"
        for n in range(first, first + CATALOGUE_PAGE_SIZE)
    )
    nxt = f"<a id='next' href='/items?page={page + 1}'>next</a>" if page < CATALOGUE_PAGES else ""
    body = f"<h1 id='page-id'>catalogue page {page}</h1><table id='items'>{rows}</table>{nxt}"
    return html_response(f"Catalogue page {page}", body)
