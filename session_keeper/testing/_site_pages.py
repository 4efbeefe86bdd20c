"""The sites LocalSites serves itself (billing, docs, SSO) and the vocabulary of a page.

A page is a function of the site state and one request that returns a :class:`Reply`.
:class:`RecordedRequest` (what arrived) and :class:`SiteResponse` (what a plain client
or an ``extra_sites`` handler gets or gives) are public through
:mod:`session_keeper.testing`. The server and :class:`~session_keeper.testing.LocalSites`
are in ``_sites.py``.
"""

from __future__ import annotations

import html
import json
import secrets
import struct
import threading
import zlib
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

import attrs

__all__ = [
    "BUILT_IN_SITES",
    "PageRequest",
    "RecordedRequest",
    "Reply",
    "SiteHandler",
    "SiteResponse",
    "SiteState",
    "own_site",
    "page_html",
    "parse_cookie_header",
    "reply_from",
]


@attrs.frozen(kw_only=True)
class RecordedRequest:
    """One request a site received, as it arrived."""

    host: str
    method: str
    #: Path without the query string.
    path: str
    query: str
    headers: tuple[tuple[str, str], ...]
    #: Cookies from the ``Cookie`` header, in order: ``(name, value)``.
    cookies: tuple[tuple[str, str], ...]
    #: ``"https"`` on ``LocalSites(samesite="None")``, else ``"http"``.
    scheme: str = "http"
    body: bytes = b""

    def header(self, name: str) -> str | None:
        """The first header called ``name`` (case-insensitive), or ``None``."""
        lower = name.lower()
        return next((v for k, v in self.headers if k.lower() == lower), None)

    def cookie(self, name: str) -> str | None:
        """The value of the cookie called ``name`` that came with the request, or ``None``."""
        return next((v for k, v in self.cookies if k == name), None)

    @property
    def cookie_names(self) -> tuple[str, ...]:
        """Names of the cookies that came with the request."""
        return tuple(k for k, _ in self.cookies)

    def arg(self, name: str) -> str | None:
        """A form field (of a urlencoded body) or else a query parameter, or ``None``."""
        for source in (_form_fields(self.header("Content-Type"), self.body), parse_qs(self.query)):
            if name in source:
                return source[name][0]
        return None


@attrs.frozen(kw_only=True)
class SiteResponse:
    """A response: from :meth:`LocalSites.request` (a plain HTTP client, not a browser),
    or from an ``extra_sites`` handler (``Content-Type`` defaults to HTML)."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: str

    def header(self, name: str) -> str | None:
        """The first header called ``name`` (case-insensitive), or ``None``."""
        lower = name.lower()
        return next((v for k, v in self.headers if k.lower() == lower), None)

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


#: One site of your own for ``LocalSites(extra_sites=...)``: the response to a request, or
#: ``None`` to leave it to the built-in site of the host.
SiteHandler = Callable[[RecordedRequest], SiteResponse | None]


def _form_fields(content_type: str | None, body: bytes) -> dict[str, list[str]]:
    if not (content_type or "").startswith("application/x-www-form-urlencoded"):
        return {}
    return parse_qs(body.decode("utf-8", "replace"))


def parse_cookie_header(value: str | None) -> tuple[tuple[str, str], ...]:
    if not value:
        return ()
    pairs = []
    for part in value.split(";"):
        name, sep, val = part.strip().partition("=")
        if sep and name:
            pairs.append((name, val))
    return tuple(pairs)


def page_html(title: str, body: str) -> str:
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title></head><body>{body}</body></html>"
    )


def _png_pixel() -> bytes:
    """A 1x1 grey PNG (signature, IHDR, IDAT, IEND), built here."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)  # 1x1, 8-bit greyscale
    pixels = zlib.compress(b"\x00\x80")  # filter byte 0, then one grey pixel
    signature = b"\x89PNG\r\n\x1a\n"
    return signature + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


#: The gallery's raster image (``/pixel.png`` on billing and docs).
PIXEL_PNG: bytes = _png_pixel()


@attrs.define
class Reply:
    """What a page answers: status, body, content type and extra headers."""

    status: int = 200
    #: Text (sent UTF-8 encoded) or bytes (sent as they are: an image).
    body: str | bytes = ""
    content_type: str = "text/html; charset=utf-8"
    headers: list[tuple[str, str]] = attrs.Factory(list)


@attrs.define
class _Refund:
    refund_id: str
    amount: str
    account: str
    status: str = "succeeded"


class SiteState:
    """Everything the sites remember; guarded by one lock (the server is threaded)."""

    def __init__(
        self,
        billing_accounts: Mapping[str, str],
        samesite: str = "Lax",
        extra_sites: Mapping[str, SiteHandler] | None = None,
    ) -> None:
        self.samesite = samesite
        self.scheme = "https" if samesite == "None" else "http"
        self.lock = threading.Lock()
        self.billing_accounts = dict(billing_accounts)
        self.billing_sessions: dict[str, str] = {}
        self.cards: dict[str, str] = {}
        self.refunds: dict[str, _Refund] = {}
        self.sso_sessions: dict[str, str] = {}
        #: The login-shape sites' sessions (host -> token -> account) and their word
        #: on whom each request was served as: (host, path, account or None).
        self.shape_sessions: dict[str, dict[str, str | None]] = {}
        self.served: list[tuple[str, str, str | None]] = []
        #: totp.example answers a right password with a new-device check page.
        self.totp_challenge = False
        self.extra_sites = {host.lower(): h for host, h in (extra_sites or {}).items()}
        self.log: list[RecordedRequest] = []


class PageRequest:
    """A request as the built-in pages read it: parsed query, form and cookies."""

    def __init__(
        self, method: str, path: str, query: str, headers: Mapping[str, str], body: bytes
    ) -> None:
        self.method = method
        self.path = path
        self.query = parse_qs(query)
        # Keys lower-cased: HTTP header names are case-insensitive.
        self.headers = {k.lower(): v for k, v in headers.items()}
        self.cookies = dict(parse_cookie_header(self.headers.get("cookie")))
        self.form = _form_fields(self.headers.get("content-type"), body)

    def arg(self, name: str) -> str | None:
        """A form field or query parameter (form wins)."""
        for source in (self.form, self.query):
            if name in source:
                return source[name][0]
        return None


# -- the sites ---------------------------------------------------------------------------


def _billing_csrf_login(state: SiteState, req: PageRequest) -> Reply:
    """A sign-in that sets a CSRF cookie on its form page, before anyone signs in."""
    csrf = req.cookies.get("billing_csrf")
    if req.method == "GET":
        headers = []
        if not csrf:
            csrf = secrets.token_urlsafe(16)
            # Persistent, as real CSRF cookies usually are: it outlives a clean close.
            headers.append(("Set-Cookie", f"billing_csrf={csrf}; Path=/; Max-Age=86400"))
        hidden = f"<input type='hidden' name='csrf' value='{html.escape(csrf)}'>"
        return Reply(body=_billing_sign_in_form("/csrf/login", hidden), headers=headers)
    sent = req.arg("csrf") or ""
    if not csrf or not secrets.compare_digest(sent.encode(), csrf.encode()):
        return Reply(403, page_html("Forbidden", "<p id='error'>CSRF check failed</p>"))
    # A failed sign-in sets no cookie: the CSRF cookie stays, the jar as it was.
    return _billing_sign_in(state, req)


def _billing_sign_in_form(action: str, hidden: str = "") -> str:
    """Billing's sign-in page, posting to ``action`` (``hidden``: extra hidden inputs)."""
    form = (
        f"<h1>Billing sign-in</h1><form method='post' action='{action}'>{hidden}"
        "<label>Username <input name='username' autocomplete='username'></label>"
        "<label>Password <input name='password' type='password'></label>"
        "<button type='submit'>Sign in</button></form>"
    )
    return page_html("Billing sign-in", form)


def _billing_sign_in(state: SiteState, req: PageRequest) -> Reply:
    """A posted sign-in form: the right password for a billing account makes a session
    (its cookie set, on to the invoices); a wrong one a 401 page, no cookie."""
    username = req.arg("username") or ""
    password = req.arg("password") or ""
    with state.lock:
        ok = username in state.billing_accounts and secrets.compare_digest(
            state.billing_accounts[username].encode(), password.encode()
        )
        if ok:
            new_token = secrets.token_urlsafe(16)
            state.billing_sessions[new_token] = username
    if not ok:
        body = "<h1>Sign-in failed</h1><p id='error'>Wrong username or password.</p>"
        return Reply(401, page_html("Sign-in failed", body))
    cookie = f"billing_session={new_token}; Path=/; HttpOnly; {_samesite(state)}"
    return Reply(303, headers=[("Set-Cookie", cookie), ("Location", "/invoices")])


def _samesite(state: SiteState) -> str:
    """The login cookie's SameSite attribute (``None`` requires ``Secure``)."""
    return "SameSite=None; Secure" if state.samesite == "None" else "SameSite=Lax"


def _billing(state: SiteState, req: PageRequest) -> Reply:
    token = req.cookies.get("billing_session")
    with state.lock:
        user = state.billing_sessions.get(token) if token else None

    if req.path == "/csrf/login" and req.method in ("GET", "POST"):
        return _billing_csrf_login(state, req)

    if req.path in ("/", "/login") and req.method == "GET":
        if req.path == "/" and user:
            return Reply(303, headers=[("Location", "/invoices")])
        return Reply(body=_billing_sign_in_form("/login"))
    if req.path == "/login" and req.method == "POST":
        return _billing_sign_in(state, req)
    if req.path == "/logout":
        with state.lock:
            if token:
                state.billing_sessions.pop(token, None)
        expire = f"billing_session=; Path=/; Max-Age=0; HttpOnly; {_samesite(state)}"
        return Reply(303, headers=[("Set-Cookie", expire), ("Location", "/login")])

    if req.path == "/redirect":
        return _open_redirect(req)  # moved endpoints: a redirect within the site
    if user is None:
        if req.path.startswith("/refunds/") or req.path == "/refund":
            return Reply(401, json.dumps({"error": "sign in required"}), "application/json")
        body = "<h1>Sign in required</h1><p><a href='/login'>Sign in</a></p>"
        return Reply(401, page_html("Sign in required", body))

    if req.path == "/invoices" and req.method == "GET":
        with state.lock:
            card = state.cards.get(user, "none")
        rows = "".join(
            f"<tr><td>INV-{n:04d}</td><td>{amount}</td></tr>"
            for n, amount in ((1001, "12.00"), (1002, "40.50"), (1003, "7.25"))
        )
        body = (
            f"<h1>Invoices</h1><p id='account'>{html.escape(user)}</p>"
            f"<p id='card'>Card on file: {html.escape(card)}</p>"
            f"<table id='invoices'>{rows}</table>"
        )
        return Reply(body=page_html("Invoices", body))
    if req.path == "/statement" and req.method == "GET":
        # A page with subresources of its own site: what one read "page load" brings.
        body = (
            "<link rel='stylesheet' href='/statement.css'>"
            f"<h1>Statement</h1><p id='account'>{html.escape(user)}</p>"
            "<img id='logo' src='/logo.svg' alt='logo'>"
        )
        return Reply(body=page_html("Statement", body))
    if req.path == "/gallery" and req.method == "GET":
        # A signed-in page with many subresources of its own site (the Guard's cost).
        try:
            count = max(0, min(200, int(req.arg("n") or "40")))
        except ValueError:
            count = 40
        # ?from=docs.example: the images come from a site nobody signed in to.
        base = f"{state.scheme}://docs.example" if req.arg("from") == "docs.example" else ""
        # ?img=png: raster images. Each SVG <img> is a document of its own to the
        # renderer, whose work then outweighs the requests' (and varies with the load).
        image = "/pixel.png" if req.arg("img") == "png" else "/logo.svg"
        images = "".join(f"<img src='{base}{image}?i={i}' alt=''>" for i in range(count))
        return Reply(body=page_html("Gallery", f"<h1 id='gallery'>Gallery</h1>{images}"))
    if req.path == "/statement.css" and req.method == "GET":
        return Reply(body="h1 { color: #333; }", content_type="text/css")
    if req.path == "/logo.svg" and req.method == "GET":
        svg = "<svg xmlns='http://www.w3.org/2000/svg' width='8' height='8'></svg>"
        return Reply(body=svg, content_type="image/svg+xml")
    if req.path == "/pixel.png" and req.method == "GET":
        return Reply(body=PIXEL_PNG, content_type="image/png")
    if req.path == "/card" and req.method == "POST":
        last4 = (req.arg("card") or "")[-4:]
        if not last4:
            return Reply(400, page_html("Bad request", "<p>card is required</p>"))
        with state.lock:
            state.cards[user] = f"**** {last4}"
        return Reply(body=page_html("Card updated", f"<p id='card'>Card on file: **** {last4}</p>"))
    if req.path == "/refund" and req.method == "POST":
        key = req.arg("idempotency_key") or req.headers.get("idempotency-key")
        if not key:
            return Reply(400, json.dumps({"error": "idempotency key required"}), "application/json")
        amount = req.arg("amount") or "0.00"
        with state.lock:
            existing = state.refunds.get(key)
            if existing is None:
                refund = _Refund(f"rf_{secrets.token_hex(6)}", amount, user)
                state.refunds[key] = refund
            else:
                refund = existing
        payload = {
            "refund_id": refund.refund_id,
            "status": refund.status,
            "amount": refund.amount,
            "replayed": existing is not None,
        }
        return Reply(200 if existing else 201, json.dumps(payload), "application/json")
    if req.path.startswith("/refunds/") and req.method == "GET":
        key = req.path.removeprefix("/refunds/")
        with state.lock:
            found = state.refunds.get(key)
        if found is None:
            return Reply(404, json.dumps({"found": False}), "application/json")
        payload = {
            "found": True,
            "refund_id": found.refund_id,
            "status": found.status,
            "amount": found.amount,
        }
        return Reply(200, json.dumps(payload), "application/json")
    return Reply(404, page_html("Not found", "<h1>Not found</h1>"))


_DOCS = {
    "/": (
        "Docs",
        "<h1>Docs</h1><ul><li><a href='/guide'>Guide</a></li>"
        "<li><a href='/api'>API</a></li><li><a href='/popup'>Popup</a></li></ul>",
    ),
    "/guide": ("Guide", "<h1>Guide</h1><p id='text'>Start with ensure().</p>"),
    "/api": ("API", "<h1>API</h1><p id='text'>ensure, tab, decide.</p>"),
    "/popup": (
        "Popup opener",
        "<h1>Popup opener</h1>"
        "<a id='open' href='/guide' target='_blank' rel='opener'>Open the guide</a>",
    ),
}


def _open_redirect(req: PageRequest) -> Reply:
    """An open redirect, as many real sites have: ``?to=<url>&code=301|302|303|307|308``.

    Only to ``*.example``, which the test browser resolves to the loopback server, so
    nothing leaves the machine.
    """
    to = req.query.get("to", [""])[0]
    code = req.query.get("code", ["302"])[0]
    host = (urlsplit(to).hostname or "").lower()
    if not (to.startswith(("http://", "https://")) and host.endswith(".example")):
        return Reply(400, page_html("Bad redirect", "<p>only http(s)://*.example</p>"))
    if code not in ("301", "302", "303", "307", "308"):
        return Reply(400, page_html("Bad redirect", "<p>code: 301, 302, 303, 307 or 308</p>"))
    return Reply(int(code), headers=[("Location", to)])


def _docs(state: SiteState, req: PageRequest) -> Reply:
    if req.path == "/redirect":
        return _open_redirect(req)
    if req.path == "/logo.svg" and req.method == "GET":
        svg = "<svg xmlns='http://www.w3.org/2000/svg' width='8' height='8'></svg>"
        return Reply(body=svg, content_type="image/svg+xml")
    if req.path == "/pixel.png" and req.method == "GET":
        return Reply(body=PIXEL_PNG, content_type="image/png")
    if req.path in _DOCS:
        title, body = _DOCS[req.path]
        return Reply(body=page_html(title, body))
    return Reply(404, page_html("Not found", "<h1>Not found</h1>"))


def _sso_cookie(state: SiteState, account: str) -> str:
    token = secrets.token_urlsafe(16)
    with state.lock:
        state.sso_sessions[token] = account
    return f"sso_session={token}; Path=/; Max-Age=86400; HttpOnly; SameSite=Lax"


def _sso(state: SiteState, req: PageRequest) -> Reply:
    if req.path == "/redirect":
        return _open_redirect(req)  # a third site in the Guard's redirect chains
    token = req.cookies.get("sso_session")
    with state.lock:
        account = state.sso_sessions.get(token) if token else None
    if req.path == "/login" and req.method == "GET":
        form = (
            "<h1>SSO</h1><form method='post' action='/login'>"
            "<input name='account'><button type='submit'>Sign in</button></form>"
        )
        return Reply(body=page_html("SSO sign-in", form))
    if req.path == "/login" and req.method == "POST":
        name = req.arg("account")
        if not name:
            return Reply(400, page_html("Bad request", "<p>account is required</p>"))
        body = page_html("Signed in", f"<p id='account'>{html.escape(name)}</p>")
        return Reply(body=body, headers=[("Set-Cookie", _sso_cookie(state, name))])
    if req.path == "/switch":
        name = req.arg("account")
        if account is None:
            return Reply(401, page_html("Sign in required", "<p>not signed in</p>"))
        if not name:
            return Reply(400, page_html("Bad request", "<p>account is required</p>"))
        with state.lock:
            state.sso_sessions.pop(token or "", None)
        body = page_html("Switched", f"<p id='account'>{html.escape(name)}</p>")
        return Reply(body=body, headers=[("Set-Cookie", _sso_cookie(state, name))])
    if req.path == "/whoami":
        if account is None:
            return Reply(401, json.dumps({"account": None}), "application/json")
        return Reply(200, json.dumps({"account": account}), "application/json")
    if req.path == "/":
        return Reply(body=page_html("SSO", "<h1>SSO</h1>"))
    return Reply(404, page_html("Not found", "<h1>Not found</h1>"))


BUILT_IN_SITES = {
    "billing.example": _billing,
    "docs.example": _docs,
    "sso.example": _sso,
}


def own_site(req: PageRequest) -> Reply:
    """What a host of ``extra_sites`` answers when its handler leaves a request to us."""
    if req.path == "/redirect":
        return _open_redirect(req)
    return Reply(404, page_html("Not found", "<h1>Not found</h1>"))


def reply_from(response: SiteResponse) -> Reply:
    content_type = response.header("Content-Type") or "text/html; charset=utf-8"
    headers = [(k, v) for k, v in response.headers if k.lower() != "content-type"]
    return Reply(response.status, response.body, content_type, headers)
