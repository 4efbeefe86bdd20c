"""LocalSites: a few small websites on 127.0.0.1, for tests and demos with a real browser.

One :class:`http.server.ThreadingHTTPServer` in a background thread serves every
site, choosing the site by the ``Host`` header. Chromium is pointed at it with
``--host-resolver-rules`` (:attr:`LocalSites.host_resolver_rules`), so the browser
talks to ``http://billing.example/`` and keeps cookies per site exactly as it would
on the internet, while no packet leaves the loopback interface.

Sites:

- ``billing.example`` — sign-in form, invoices (read), card on file (write), refunds
  with idempotency keys and a readback endpoint (a write whose outcome can be
  reconciled). ``/csrf/login`` is the same sign-in as many real sites do it: the form
  page sets a persistent ``billing_csrf`` cookie before anyone signs in, and a failed
  sign-in keeps it.
- ``catalogue.example`` — a paged catalogue behind a sign-in; ``/items`` answers 401
  when signed out, ``/shop/items`` redirects to ``/login`` instead (as most sites do).
- ``docs.example`` — static pages.
- ``sso.example`` — a persistent ``sso_session`` cookie, account switching, ``/whoami``.
- ``todo.example`` — a self-contained TodoMVC (vanilla JS, ``localStorage``), seeded
  with eight rows on first load.

``LocalSites(samesite="None")`` serves the same sites over HTTPS (a throwaway
certificate made at start; the browser needs ``--ignore-certificate-errors``,
:data:`CHROMIUM_TEST_ARGS`) and signs billing in with a ``SameSite=None; Secure``
cookie: the kind an embedded app or SSO widget uses, sent with cross-site requests.

Every request is recorded (:meth:`LocalSites.requests`) with the cookies that came
with it, so a test can prove what the browser did or did not send. These are test
sites: recording cookie values here is the point.
"""

from __future__ import annotations

import datetime
import html
import http.client
import json
import os
import secrets
import socket
import ssl
import tempfile
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal
from urllib.parse import parse_qs, urlencode, urlsplit

import attrs

__all__ = [
    "CHROMIUM_TEST_ARGS",
    "SITES",
    "LocalSites",
    "RecordedRequest",
    "SiteResponse",
    "allow_third_party_cookies",
]

#: The hosts LocalSites serves.
SITES = ("billing.example", "docs.example", "sso.example", "todo.example")

#: Chromium flags a test browser needs for ``LocalSites(samesite="None")``: trust the
#: throwaway certificate. For test browsers only.
CHROMIUM_TEST_ARGS: tuple[str, ...] = ("--ignore-certificate-errors",)


def allow_third_party_cookies(profile_dir: str | os.PathLike[str]) -> None:
    """Let a fresh test profile send cookies with cross-site requests, as Chrome does.

    This Chromium build blocks third-party cookies by default (the cookie's blocked
    reason is ``UserPreferences``); a user's Chrome sends ``SameSite=None`` cookies
    cross-site, which is the case the Guard must hold in. Writes the profile's
    preferences before its first launch; a profile that already has them is left be.
    """
    prefs = os.path.join(profile_dir, "Default", "Preferences")
    if os.path.exists(prefs):
        return
    os.makedirs(os.path.dirname(prefs), exist_ok=True)
    with open(prefs, "w", encoding="utf-8") as f:
        json.dump({"profile": {"cookie_controls_mode": 0, "block_third_party_cookies": False}}, f)


#: The eight rows the TodoMVC page starts with: (text, completed).
TODO_SEED: tuple[tuple[str, bool], ...] = (
    ("Buy milk", False),
    ("Pay electricity bill", True),
    ("Call the plumber", False),
    ("Renew passport", False),
    ("Book dentist appointment", True),
    ("Water the plants", False),
    ("Return library books", False),
    ("Write quarterly report", True),
)


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


@attrs.frozen(kw_only=True)
class SiteResponse:
    """A response from :meth:`LocalSites.request` (a plain HTTP client, not a browser)."""

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


def _parse_cookie_header(value: str | None) -> tuple[tuple[str, str], ...]:
    if not value:
        return ()
    pairs = []
    for part in value.split(";"):
        name, sep, val = part.strip().partition("=")
        if sep and name:
            pairs.append((name, val))
    return tuple(pairs)


def _page(title: str, body: str) -> str:
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title></head><body>{body}</body></html>"
    )


@attrs.define
class _Reply:
    status: int = 200
    body: str = ""
    content_type: str = "text/html; charset=utf-8"
    headers: list[tuple[str, str]] = attrs.Factory(list)


@attrs.define
class _Refund:
    refund_id: str
    amount: str
    account: str
    status: str = "succeeded"


class _State:
    """Everything the sites remember; guarded by one lock (the server is threaded)."""

    def __init__(self, billing_accounts: Mapping[str, str], samesite: str = "Lax") -> None:
        self.samesite = samesite
        self.scheme = "https" if samesite == "None" else "http"
        self.lock = threading.Lock()
        self.billing_accounts = dict(billing_accounts)
        self.billing_sessions: dict[str, str] = {}
        self.cards: dict[str, str] = {}
        self.refunds: dict[str, _Refund] = {}
        self.sso_sessions: dict[str, str] = {}
        self.catalogue_sessions: set[str] = set()
        #: Replies the catalogue gives instead of its pages, oldest first (fault injection).
        self.catalogue_faults: list[tuple[int, dict[str, str]]] = []
        self.log: list[RecordedRequest] = []


class _Request:
    def __init__(
        self, method: str, path: str, query: str, headers: Mapping[str, str], body: bytes
    ) -> None:
        self.method = method
        self.path = path
        self.query = parse_qs(query)
        # Keys lower-cased: HTTP header names are case-insensitive.
        self.headers = {k.lower(): v for k, v in headers.items()}
        self.cookies = dict(_parse_cookie_header(self.headers.get("cookie")))
        ctype = self.headers.get("content-type", "")
        self.form = (
            parse_qs(body.decode("utf-8", "replace"))
            if ctype.startswith("application/x-www-form-urlencoded")
            else {}
        )

    def arg(self, name: str) -> str | None:
        """A form field or query parameter (form wins)."""
        for source in (self.form, self.query):
            if name in source:
                return source[name][0]
        return None


# -- the sites ---------------------------------------------------------------------------


def _billing_csrf_login(state: _State, req: _Request) -> _Reply:
    """A sign-in that sets a CSRF cookie on its form page, before anyone signs in."""
    csrf = req.cookies.get("billing_csrf")
    if req.method == "GET":
        headers = []
        if not csrf:
            csrf = secrets.token_urlsafe(16)
            # Persistent, as real CSRF cookies usually are: it outlives a clean close.
            headers.append(("Set-Cookie", f"billing_csrf={csrf}; Path=/; Max-Age=86400"))
        form = (
            "<h1>Billing sign-in</h1><form method='post' action='/csrf/login'>"
            f"<input type='hidden' name='csrf' value='{html.escape(csrf)}'>"
            "<label>Username <input name='username' autocomplete='username'></label>"
            "<label>Password <input name='password' type='password'></label>"
            "<button type='submit'>Sign in</button></form>"
        )
        return _Reply(body=_page("Billing sign-in", form), headers=headers)
    sent = req.arg("csrf") or ""
    if not csrf or not secrets.compare_digest(sent.encode(), csrf.encode()):
        return _Reply(403, _page("Forbidden", "<p id='error'>CSRF check failed</p>"))
    username = req.arg("username") or ""
    password = req.arg("password") or ""
    with state.lock:
        ok = username in state.billing_accounts and secrets.compare_digest(
            state.billing_accounts[username].encode(), password.encode()
        )
        new_token = secrets.token_urlsafe(16)
        if ok:
            state.billing_sessions[new_token] = username
    if not ok:
        # The CSRF cookie stays: a failed sign-in leaves the jar as it was.
        body = "<h1>Sign-in failed</h1><p id='error'>Wrong username or password.</p>"
        return _Reply(401, _page("Sign-in failed", body))
    cookie = f"billing_session={new_token}; Path=/; HttpOnly; {_samesite(state)}"
    return _Reply(303, headers=[("Set-Cookie", cookie), ("Location", "/invoices")])


def _samesite(state: _State) -> str:
    """The login cookie's SameSite attribute (``None`` requires ``Secure``)."""
    return "SameSite=None; Secure" if state.samesite == "None" else "SameSite=Lax"


def _billing(state: _State, req: _Request) -> _Reply:
    token = req.cookies.get("billing_session")
    with state.lock:
        user = state.billing_sessions.get(token) if token else None

    if req.path == "/csrf/login" and req.method in ("GET", "POST"):
        return _billing_csrf_login(state, req)

    if req.path in ("/", "/login") and req.method == "GET":
        if req.path == "/" and user:
            return _Reply(303, headers=[("Location", "/invoices")])
        form = (
            "<h1>Billing sign-in</h1><form method='post' action='/login'>"
            "<label>Username <input name='username' autocomplete='username'></label>"
            "<label>Password <input name='password' type='password'></label>"
            "<button type='submit'>Sign in</button></form>"
        )
        return _Reply(body=_page("Billing sign-in", form))
    if req.path == "/login" and req.method == "POST":
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
            return _Reply(401, _page("Sign-in failed", body))
        cookie = f"billing_session={new_token}; Path=/; HttpOnly; {_samesite(state)}"
        return _Reply(303, headers=[("Set-Cookie", cookie), ("Location", "/invoices")])
    if req.path == "/logout":
        with state.lock:
            if token:
                state.billing_sessions.pop(token, None)
        expire = f"billing_session=; Path=/; Max-Age=0; HttpOnly; {_samesite(state)}"
        return _Reply(303, headers=[("Set-Cookie", expire), ("Location", "/login")])

    if req.path == "/redirect":
        return _open_redirect(req)  # moved endpoints: a redirect within the site
    if user is None:
        if req.path.startswith("/refunds/") or req.path == "/refund":
            return _Reply(401, json.dumps({"error": "sign in required"}), "application/json")
        body = "<h1>Sign in required</h1><p><a href='/login'>Sign in</a></p>"
        return _Reply(401, _page("Sign in required", body))

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
        return _Reply(body=_page("Invoices", body))
    if req.path == "/statement" and req.method == "GET":
        # A page with subresources of its own site: what one read "page load" brings.
        body = (
            "<link rel='stylesheet' href='/statement.css'>"
            f"<h1>Statement</h1><p id='account'>{html.escape(user)}</p>"
            "<img id='logo' src='/logo.svg' alt='logo'>"
        )
        return _Reply(body=_page("Statement", body))
    if req.path == "/gallery" and req.method == "GET":
        # A signed-in page with many subresources of its own site (the Guard's cost).
        try:
            count = max(0, min(200, int(req.arg("n") or "40")))
        except ValueError:
            count = 40
        # ?from=docs.example: the images come from a site nobody signed in to.
        base = f"{state.scheme}://docs.example" if req.arg("from") == "docs.example" else ""
        images = "".join(f"<img src='{base}/logo.svg?i={i}' alt=''>" for i in range(count))
        return _Reply(body=_page("Gallery", f"<h1 id='gallery'>Gallery</h1>{images}"))
    if req.path == "/statement.css" and req.method == "GET":
        return _Reply(body="h1 { color: #333; }", content_type="text/css")
    if req.path == "/logo.svg" and req.method == "GET":
        svg = "<svg xmlns='http://www.w3.org/2000/svg' width='8' height='8'></svg>"
        return _Reply(body=svg, content_type="image/svg+xml")
    if req.path == "/card" and req.method == "POST":
        last4 = (req.arg("card") or "")[-4:]
        if not last4:
            return _Reply(400, _page("Bad request", "<p>card is required</p>"))
        with state.lock:
            state.cards[user] = f"**** {last4}"
        return _Reply(body=_page("Card updated", f"<p id='card'>Card on file: **** {last4}</p>"))
    if req.path == "/refund" and req.method == "POST":
        key = req.arg("idempotency_key") or req.headers.get("idempotency-key")
        if not key:
            return _Reply(
                400, json.dumps({"error": "idempotency key required"}), "application/json"
            )
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
        return _Reply(200 if existing else 201, json.dumps(payload), "application/json")
    if req.path.startswith("/refunds/") and req.method == "GET":
        key = req.path.removeprefix("/refunds/")
        with state.lock:
            found = state.refunds.get(key)
        if found is None:
            return _Reply(404, json.dumps({"found": False}), "application/json")
        payload = {
            "found": True,
            "refund_id": found.refund_id,
            "status": found.status,
            "amount": found.amount,
        }
        return _Reply(200, json.dumps(payload), "application/json")
    return _Reply(404, _page("Not found", "<h1>Not found</h1>"))


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


#: Where docs.example's attack pages aim: the signed-in site (its scheme is the sites').
_TARGET = "__TARGET__"

#: Attack pages on docs.example (the Guard's suite): each one, once loaded, tries to
#: reach billing.example from whatever conversation opened it.
_GUARD_PAGES = {
    "/attack/fetch": (
        "fetch attack",
        "<script>fetch('" + _TARGET + "/invoices', {credentials: 'include', mode: 'no-cors'})"
        ".then(() => { document.title = 'done'; }, () => { document.title = 'failed'; });"
        "</script>",
    ),
    "/attack/xhr": (
        "xhr attack",
        "<script>var x = new XMLHttpRequest(); x.withCredentials = true;"
        "x.onloadend = () => { document.title = 'done'; };"
        "x.open('GET', '" + _TARGET + "/invoices'); x.send();</script>",
    ),
    "/attack/iframe": (
        "iframe attack",
        "<iframe id='frame' src='" + _TARGET + "/invoices'></iframe>",
    ),
    "/attack/img": ("img attack", "<img id='img' src='" + _TARGET + "/invoices?img=1'>"),
    "/attack/form": (
        "form attack",
        "<form id='form' method='post' action='" + _TARGET + "/card'>"
        "<input name='card' value='4000000000000002'></form>"
        "<script>document.getElementById('form').submit();</script>",
    ),
    "/attack/popup": (
        "popup attack",
        "<button id='open' onclick=\"window.open('" + _TARGET + "/invoices')\">open</button>",
    ),
    "/attack/prefetch": (
        "prefetch attack",
        "<link rel='prefetch' href='" + _TARGET + "/invoices?prefetch=1'>"
        "<link rel='dns-prefetch' href='" + _TARGET + "'>"
        "<link rel='preconnect' href='" + _TARGET + "'>",
    ),
    "/attack/speculation": (
        "speculation rules attack",
        '<script type="speculationrules">{"prerender": [{"source": "list", "urls": ["'
        + _TARGET
        + '/invoices?prerender=1"]}], "prefetch": [{"source": "list", "urls": ["'
        + _TARGET
        + '/invoices?specprefetch=1"]}]}</script>',
    ),
    "/attack/frame": (
        "cross-site frame attack",
        # todo.example is another site: the frame gets its own renderer (and target).
        "<iframe id='frame' src='__SCHEME__://todo.example/attack/img-redirect'></iframe>",
    ),
    "/attack/img-redirect": (
        "img through a redirect",
        "<img id='img' src='__SCHEME__://docs.example/redirect?to="
        + _TARGET
        + "/invoices%3Fframeimg%3D1'>",
    ),
    "/attack/sw": (
        "service worker attack",
        "<script>navigator.serviceWorker ? ServiceWorkerContainer.prototype.register"
        ".call(navigator.serviceWorker, '/attack/sw.js')"
        ".then((r) => { document.title = r ? 'registered' : 'refused'; },"
        " (e) => { document.title = 'refused: ' + e.name; })"
        " : (document.title = 'no serviceWorker');</script>",
    ),
}

#: The service worker /attack/sw registers: it would fetch billing.example itself.
_SW_SCRIPT = (
    "self.addEventListener('install', () => {"
    " fetch('" + _TARGET + "/invoices?sw=1', {credentials: 'include', mode: 'no-cors'}); });"
    "self.addEventListener('fetch', (e) => {"
    " e.respondWith(fetch('" + _TARGET + "/invoices?swfetch=1', {credentials: 'include'})); });"
)


def _guard_pages(state: _State, req: _Request) -> _Reply | None:
    """The Guard's attack pages and an open redirect, or ``None`` for any other path."""
    target = f"{state.scheme}://billing.example"
    if req.path in _GUARD_PAGES:
        title, body = _GUARD_PAGES[req.path]
        body = body.replace(_TARGET, target).replace("__SCHEME__", state.scheme)
        return _Reply(body=_page(title, body))
    if req.path == "/attack/sw.js":
        return _Reply(
            body=_SW_SCRIPT.replace(_TARGET, target), content_type="application/javascript"
        )
    if req.path == "/redirect":
        return _open_redirect(req)
    return None


def _open_redirect(req: _Request) -> _Reply:
    """An open redirect, as many real sites have: ``?to=<url>&code=301|302|303|307|308``.

    Only to ``*.example``, which the test browser resolves to the loopback server, so
    nothing leaves the machine.
    """
    to = req.query.get("to", [""])[0]
    code = req.query.get("code", ["302"])[0]
    host = (urlsplit(to).hostname or "").lower()
    if not (to.startswith(("http://", "https://")) and host.endswith(".example")):
        return _Reply(400, _page("Bad redirect", "<p>only http(s)://*.example</p>"))
    if code not in ("301", "302", "303", "307", "308"):
        return _Reply(400, _page("Bad redirect", "<p>code: 301, 302, 303, 307 or 308</p>"))
    return _Reply(int(code), headers=[("Location", to)])


def _docs(state: _State, req: _Request) -> _Reply:
    guard = _guard_pages(state, req)
    if guard is not None:
        return guard
    if req.path == "/logo.svg" and req.method == "GET":
        svg = "<svg xmlns='http://www.w3.org/2000/svg' width='8' height='8'></svg>"
        return _Reply(body=svg, content_type="image/svg+xml")
    if req.path in _DOCS:
        title, body = _DOCS[req.path]
        return _Reply(body=_page(title, body))
    return _Reply(404, _page("Not found", "<h1>Not found</h1>"))


def _sso_cookie(state: _State, account: str) -> str:
    token = secrets.token_urlsafe(16)
    with state.lock:
        state.sso_sessions[token] = account
    return f"sso_session={token}; Path=/; Max-Age=86400; HttpOnly; SameSite=Lax"


def _sso(state: _State, req: _Request) -> _Reply:
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
        return _Reply(body=_page("SSO sign-in", form))
    if req.path == "/login" and req.method == "POST":
        name = req.arg("account")
        if not name:
            return _Reply(400, _page("Bad request", "<p>account is required</p>"))
        body = _page("Signed in", f"<p id='account'>{html.escape(name)}</p>")
        return _Reply(body=body, headers=[("Set-Cookie", _sso_cookie(state, name))])
    if req.path == "/switch":
        name = req.arg("account")
        if account is None:
            return _Reply(401, _page("Sign in required", "<p>not signed in</p>"))
        if not name:
            return _Reply(400, _page("Bad request", "<p>account is required</p>"))
        with state.lock:
            state.sso_sessions.pop(token or "", None)
        body = _page("Switched", f"<p id='account'>{html.escape(name)}</p>")
        return _Reply(body=body, headers=[("Set-Cookie", _sso_cookie(state, name))])
    if req.path == "/whoami":
        if account is None:
            return _Reply(401, json.dumps({"account": None}), "application/json")
        return _Reply(200, json.dumps({"account": account}), "application/json")
    if req.path == "/":
        return _Reply(body=_page("SSO", "<h1>SSO</h1>"))
    return _Reply(404, _page("Not found", "<h1>Not found</h1>"))


_TODO_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>TodoMVC</title>
<style>
body { font: 14px sans-serif; background: #f5f5f5; }
.todoapp { background: #fff; margin: 40px auto; width: 550px; }
.new-todo { width: 100%; font-size: 20px; padding: 12px; box-sizing: border-box; }
.todo-list { list-style: none; margin: 0; padding: 0; }
.todo-list li { border-bottom: 1px solid #ededed; padding: 10px; }
.todo-list li.completed label { text-decoration: line-through; color: #949494; }
</style></head>
<body>
<section class="todoapp">
  <header class="header"><h1>todos</h1>
    <input class="new-todo" placeholder="What needs to be done?" autofocus>
  </header>
  <section class="main"><ul class="todo-list"></ul></section>
  <footer class="footer"><span class="todo-count"></span></footer>
</section>
<script>
(function () {
  "use strict";
  var KEY = "todos-vanillajs";
  var SEED = __SEED__;
  function load() {
    var raw = localStorage.getItem(KEY);
    if (raw === null) {
      var seeded = SEED.map(function (row, i) {
        return { id: i + 1, title: row[0], completed: row[1] };
      });
      localStorage.setItem(KEY, JSON.stringify(seeded));
      return seeded;
    }
    return JSON.parse(raw);
  }
  var todos = load();
  function save() { localStorage.setItem(KEY, JSON.stringify(todos)); }
  var list = document.querySelector(".todo-list");
  function render() {
    list.textContent = "";
    todos.forEach(function (todo) {
      var li = document.createElement("li");
      li.dataset.id = String(todo.id);
      if (todo.completed) { li.className = "completed"; }
      var view = document.createElement("div");
      view.className = "view";
      var toggle = document.createElement("input");
      toggle.className = "toggle";
      toggle.type = "checkbox";
      toggle.checked = todo.completed;
      toggle.addEventListener("change", function () {
        todo.completed = toggle.checked; save(); render();
      });
      var label = document.createElement("label");
      label.textContent = todo.title;
      var destroy = document.createElement("button");
      destroy.className = "destroy";
      destroy.addEventListener("click", function () {
        todos = todos.filter(function (t) { return t !== todo; }); save(); render();
      });
      view.appendChild(toggle); view.appendChild(label); view.appendChild(destroy);
      li.appendChild(view);
      list.appendChild(li);
    });
    var left = todos.filter(function (t) { return !t.completed; }).length;
    var count = document.querySelector(".todo-count");
    count.textContent = left + (left === 1 ? " item left" : " items left");
  }
  document.querySelector(".new-todo").addEventListener("keydown", function (event) {
    if (event.key !== "Enter") { return; }
    var title = event.target.value.trim();
    if (!title) { return; }
    var next = todos.reduce(function (m, t) { return Math.max(m, t.id); }, 0) + 1;
    todos.push({ id: next, title: title, completed: false });
    event.target.value = "";
    save(); render();
  });
  render();
})();
</script>
</body></html>
"""


def _todo(state: _State, req: _Request) -> _Reply:
    guard = _guard_pages(state, req)  # a second site for the Guard's cross-site frames
    if guard is not None:
        return guard
    if req.path in ("/", "/index.html") and req.method == "GET":
        seed = json.dumps([[text, done] for text, done in TODO_SEED])
        return _Reply(body=_TODO_HTML.replace("__SEED__", seed))
    return _Reply(404, _page("Not found", "<h1>Not found</h1>"))


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


def _catalogue(state: _State, req: _Request) -> _Reply:
    token = req.cookies.get("catalogue_session")
    with state.lock:
        signed_in = token in state.catalogue_sessions if token else False
    if req.path == "/shop/items":
        if not signed_in:
            # Most sites redirect a signed-out visitor to their sign-in page.
            page_arg = urlencode({"page": req.arg("page") or "1"})
            nxt = urlencode({"next": f"/shop/items?{page_arg}"})
            return _Reply(303, headers=[("Location", f"/login?{nxt}")])
        req.path = "/items"
    with state.lock:
        fault = (
            state.catalogue_faults.pop(0)
            if state.catalogue_faults and req.path == "/items"
            else None
        )
    if req.path == "/login" and req.method == "GET":
        form = (
            "<h1>Catalogue sign-in</h1><form method='post' action='/login'>"
            "<p><label>Username <input name='username' autocomplete='username'></label></p>"
            "<p><label>Password <input name='password' type='password'></label></p>"
            "<button type='submit'>Sign in</button></form>"
        )
        return _Reply(body=_page("Catalogue sign-in", form))
    if req.path == "/login" and req.method == "POST":
        username = req.arg("username")
        wrong_user = username is not None and username != CATALOGUE_USERNAME
        if wrong_user or not secrets.compare_digest(
            (req.arg("password") or "").encode(), CATALOGUE_PASSWORD.encode()
        ):
            return _Reply(401, _page("Sign-in failed", "<p id='error'>wrong password</p>"))
        new_token = secrets.token_urlsafe(16)
        with state.lock:
            state.catalogue_sessions.add(new_token)
        cookie = f"catalogue_session={new_token}; Path=/; HttpOnly; SameSite=Lax"
        return _Reply(303, headers=[("Set-Cookie", cookie), ("Location", "/items?page=1")])
    if not signed_in:
        return _Reply(401, _page("Sign in required", "<h1 id='signin'>Sign in required</h1>"))
    if fault is not None:
        status, headers = fault
        return _Reply(
            status,
            _page(f"HTTP {status}", f"<h1 id='fault'>HTTP {status}</h1>"),
            headers=list(headers.items()),
        )
    if req.path == "/items" and req.method == "GET":
        try:
            page = int(req.arg("page") or "1")
        except ValueError:
            page = 0
        if not 1 <= page <= CATALOGUE_PAGES:
            return _Reply(404, _page("Not found", "<h1>No such page</h1>"))
        truth = catalogue_ground_truth()
        first = (page - 1) * CATALOGUE_PAGE_SIZE + 1
        rows = "".join(
            f"<tr data-id='SKU-{n:04d}'><td class='name'>{truth[f'SKU-{n:04d}']['name']}</td>"
            f"<td class='price'>{truth[f'SKU-{n:04d}']['price']}</td></tr>"
            for n in range(first, first + CATALOGUE_PAGE_SIZE)
        )
        nxt = (
            f"<a id='next' href='/items?page={page + 1}'>next</a>" if page < CATALOGUE_PAGES else ""
        )
        body = f"<h1 id='page-id'>catalogue page {page}</h1><table id='items'>{rows}</table>{nxt}"
        return _Reply(body=_page(f"Catalogue page {page}", body))
    return _Reply(404, _page("Not found", "<h1>Not found</h1>"))


_HANDLERS = {
    "catalogue.example": _catalogue,
    "billing.example": _billing,
    "docs.example": _docs,
    "sso.example": _sso,
    "todo.example": _todo,
}


def _make_handler(state: _State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "LocalSites/1"

        def _serve(self) -> None:
            host = (self.headers.get("Host") or "").split(":", 1)[0].lower()
            split = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = tuple((k, v) for k, v in self.headers.items())
            record = RecordedRequest(
                host=host,
                method=self.command,
                path=split.path,
                query=split.query,
                headers=headers,
                cookies=_parse_cookie_header(self.headers.get("Cookie")),
            )
            with state.lock:
                state.log.append(record)
            handler = _HANDLERS.get(host)
            if handler is None:
                reply = _Reply(421, _page("Unknown site", f"<p>no site {html.escape(host)}</p>"))
            elif split.path == "/favicon.ico":
                reply = _Reply(404, "", "text/plain")
            else:
                req = _Request(self.command, split.path, split.query, dict(headers), body)
                reply = handler(state, req)
            data = reply.body.encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            for name, value in reply.headers:
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_POST = do_HEAD = _serve  # noqa: N815 - http.server's naming

        def log_message(self, format: str, *args: Any) -> None:
            # Quiet: the request log is the record; stderr noise helps nobody.
            pass

    return Handler


class _Server(ThreadingHTTPServer):
    """Serves HTTP and, when it has a TLS context, HTTPS on the same port.

    Chromium's ``--host-resolver-rules`` send every ``*.example`` host to one port
    whatever the scheme, so the first byte decides: ``0x16`` opens a TLS handshake.
    """

    tls: ssl.SSLContext | None = None

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        try:
            request.settimeout(30)
            first = request.recv(1, socket.MSG_PEEK)
        except OSError:
            return  # a client that went away
        if first != b"\x16":
            super().finish_request(request, client_address)
            return
        try:
            # The TLS socket takes the connection over: it is ours to close.
            secure = self.tls.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError):
            return  # failed the handshake
        try:
            super().finish_request(secure, client_address)
        finally:
            secure.close()


def _throwaway_tls() -> ssl.SSLContext:
    """A TLS context with a fresh self-signed certificate for every ``*.example`` site."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "LocalSites test certificate")])
    hosts = [*_HANDLERS, *(f"*.{h}" for h in _HANDLERS)]
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in hosts]), False)
        .sign(key, hashes.SHA256())
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    # load_cert_chain reads files only: write them briefly, private to this user.
    with tempfile.TemporaryDirectory(prefix="localsites-tls-") as tmp:
        cert_path, key_path = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
        with open(cert_path, "wb") as f:
            f.write(cert.public_bytes(serialization.Encoding.PEM))
        with open(key_path, "wb") as f:
            f.write(
                key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                )
            )
        context.load_cert_chain(cert_path, key_path)
    return context


class LocalSites:
    """The local fixture sites; a context manager, or :meth:`start`/:meth:`stop`.

    ``billing_accounts`` maps accepted usernames to passwords for
    ``billing.example``'s sign-in (default: ``alice`` / ``correct horse``).
    ``samesite="None"`` serves every site over HTTPS (:attr:`scheme`) and gives billing's
    login cookie ``SameSite=None; Secure`` (default ``"Lax"``, plain HTTP).
    """

    def __init__(
        self,
        *,
        billing_accounts: Mapping[str, str] | None = None,
        samesite: Literal["Lax", "None"] = "Lax",
    ) -> None:
        accounts = {"alice": "correct horse"} if billing_accounts is None else billing_accounts
        self._state = _State(accounts, samesite)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifetime --------------------------------------------------------------------------
    def start(self) -> LocalSites:
        """Start serving on 127.0.0.1 on a free port (no-op when already started)."""
        if self._server is None:
            server = _Server(("127.0.0.1", 0), _make_handler(self._state))
            server.daemon_threads = True
            if self._state.scheme == "https":
                server.tls = _throwaway_tls()
            thread = threading.Thread(
                target=server.serve_forever, name="LocalSites", kwargs={"poll_interval": 0.1}
            )
            thread.daemon = True
            thread.start()
            self._server, self._thread = server, thread
        return self

    def stop(self) -> None:
        """Stop serving (no-op when not started)."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> LocalSites:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addresses -------------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The port the sites listen on (127.0.0.1)."""
        if self._server is None:
            raise RuntimeError("LocalSites is not started")
        return int(self._server.server_address[1])

    @property
    def host_resolver_rules(self) -> str:
        """The Chromium ``--host-resolver-rules`` value sending ``*.example`` here."""
        return f"MAP *.example 127.0.0.1:{self.port}"

    @property
    def scheme(self) -> str:
        """``"https"`` for ``samesite="None"`` sites, else ``"http"``."""
        return self._state.scheme

    @property
    def samesite(self) -> str:
        """The SameSite attribute of billing's login cookie: ``"Lax"`` or ``"None"``."""
        return self._state.samesite

    def url(self, host: str, path: str = "/") -> str:
        """The URL a browser using :attr:`host_resolver_rules` opens for ``host`` + ``path``."""
        if not path.startswith("/"):
            path = "/" + path
        return f"{self._state.scheme}://{host}{path}"

    # -- what the sites saw ----------------------------------------------------------------
    def requests(self, host: str | None = None) -> list[RecordedRequest]:
        """Every request received so far (only ``host``'s when given), oldest first."""
        with self._state.lock:
            log = list(self._state.log)
        return log if host is None else [r for r in log if r.host == host]

    def clear_requests(self) -> None:
        """Forget the recorded requests."""
        with self._state.lock:
            self._state.log.clear()

    def inject_catalogue_fault(self, status: int, headers: Mapping[str, str] | None = None) -> None:
        """Make the catalogue's next ``/items`` request answer ``status`` (e.g. 503, 429)."""
        with self._state.lock:
            self._state.catalogue_faults.append((status, dict(headers or {})))

    def expire_sessions(self, host: str) -> None:
        """Forget every session ``host`` issued, as a server-side expiry would.

        The browser keeps its cookies; the site no longer honours them.
        """
        with self._state.lock:
            if host == "billing.example":
                self._state.billing_sessions.clear()
            elif host == "sso.example":
                self._state.sso_sessions.clear()
            elif host == "catalogue.example":
                self._state.catalogue_sessions.clear()
            else:
                raise ValueError(f"{host} has no sessions to expire")

    def refund_count(self) -> int:
        """How many distinct refunds ``billing.example`` has created."""
        with self._state.lock:
            return len(self._state.refunds)

    # -- a plain client (no browser) -------------------------------------------------------
    def request(
        self,
        host: str,
        path: str = "/",
        *,
        method: str = "GET",
        form: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        cookies: Mapping[str, str] | None = None,
    ) -> SiteResponse:
        """Send one request straight to the server (for tests that need no browser)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            all_headers = {"Host": host, **(headers or {})}
            body: bytes | None = None
            if form is not None:
                body = urlencode(form).encode()
                all_headers["Content-Type"] = "application/x-www-form-urlencoded"
            if cookies:
                all_headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
            conn.request(method, path, body=body, headers=all_headers)
            resp = conn.getresponse()
            text = resp.read().decode("utf-8", "replace")
            return SiteResponse(status=resp.status, headers=tuple(resp.getheaders()), body=text)
        finally:
            conn.close()

    def __repr__(self) -> str:
        where = f"127.0.0.1:{self.port}" if self._server is not None else "stopped"
        return f"<LocalSites {where}>"
