"""Sites with the session habits real applications have (served by LocalSites).

- ``php.example`` — PHP-style sessions: the login page itself sets a ``PHPSESSID``
  session cookie, and a sign-in keeps it (no regeneration): a correct password binds
  that session to the account, a wrong one answers ``200`` with the form shown again.
- ``reissue.example`` — a persistent ``remember`` login cookie the site re-encrypts
  with a fresh value on the first request of each browser session (it tells a new
  browser session by its ``reissue_seen`` session cookie being gone): the same account,
  another value.

- ``spa.example``, ``spa-session.example`` and ``spa-idb.example`` — single-page apps with
  no cookie at all: the sign-in script posts the credentials to ``/api/login`` and keeps
  the bearer token it gets in ``localStorage`` (``spa.example``), ``sessionStorage``
  (``spa-session.example``) or IndexedDB (``spa-idb.example``: database ``auth``, store
  ``tokens``) under ``spa_token``; ``/app`` sends it as ``Authorization:
  Bearer ...`` to ``/api/whoami``. ``POST /api/logout`` signs the token out server-side.
  ``spa-app.example`` is ``spa.example`` with what apps keep beside the token: every page
  writes a ``sessionStorage`` transaction id and a ``localStorage`` ``last_seen`` time.

- ``totp.example`` — a password then a TOTP second factor (RFC 6238, :data:`TOTP_SECRET`,
  no clock drift allowed): ``POST /login`` with ``alice`` / :data:`TOTP_PASSWORD` leads to
  ``/login/code``, whose ``POST`` with the current code sets a fresh ``totp_sid`` session
  cookie. :meth:`LocalSites.expire_sessions` signs every session out server-side;
  :meth:`LocalSites.challenge_new_device` makes the password lead to a "verify this new
  device" page instead (what a recipe does not know). ``/items?page=N`` (signed in):
  :data:`TOTP_ITEM_PAGES` pages of two items, for jobs.

All answer ``/whoami`` (the SPAs ``/api/whoami``) with ``{"account": ...}`` and keep
the site's own word on which account it served each request as
(:meth:`LocalSites.served`): the truth a test compares the keeper's beliefs with.
Accounts: ``alice`` / ``correct horse``.
"""

from __future__ import annotations

import html
import json
import secrets
from collections.abc import Callable
from datetime import timedelta

import pyotp

from session_keeper._keeper.logins.recipes import FormField, FormRecipe, FormStep, PageSign
from session_keeper._security.credentials import EnvCredentials
from session_keeper.testing._site_pages import (
    PageRequest,
    Reply,
    SiteState,
    page_html,
)

__all__ = [
    "LOGIN_SITES",
    "SHAPE_PASSWORD",
    "SPA_TOKEN_KEY",
    "TOTP_ITEM_PAGES",
    "TOTP_PASSWORD",
    "TOTP_SECRET",
    "totp_credentials",
    "totp_recipe",
]

#: The one account's password on these sites (user ``alice``).
SHAPE_PASSWORD = "correct horse"

_FORM = (
    "<h1>Sign in</h1>{error}<form method='post' action='/login'>"
    "<label>Username <input name='username' autocomplete='username'></label>"
    "<label>Password <input name='password' type='password'></label>"
    "<button type='submit'>Sign in</button></form>"
)


def _credentials_ok(req: PageRequest) -> bool:
    return req.arg("username") == "alice" and secrets.compare_digest(
        (req.arg("password") or "").encode(), SHAPE_PASSWORD.encode()
    )


def _sessions(state: SiteState, host: str) -> dict[str, str | None]:
    return state.shape_sessions.setdefault(host, {})


def _served(state: SiteState, host: str, req: PageRequest, account: str | None) -> None:
    state.served.append((host, req.path, account))


def _whoami(account: str | None, headers: list[tuple[str, str]]) -> Reply:
    status = 200 if account else 401
    return Reply(status, json.dumps({"account": account}), "application/json", headers)


def _php(state: SiteState, req: PageRequest) -> Reply:
    host = "php.example"
    sid = req.cookies.get("PHPSESSID")
    headers: list[tuple[str, str]] = []
    with state.lock:
        sessions = _sessions(state, host)
        if sid is None or sid not in sessions:
            # session_start(): a new anonymous session, set on whatever page is first.
            sid = secrets.token_urlsafe(16)
            sessions[sid] = None
            headers.append(("Set-Cookie", f"PHPSESSID={sid}; Path=/; HttpOnly; SameSite=Lax"))
        account = sessions[sid]
        if req.path == "/login" and req.method == "POST" and _credentials_ok(req):
            sessions[sid] = account = "alice"  # the same session id: never regenerated
        _served(state, host, req, account)
    if req.path == "/login" and req.method == "POST":
        if account is None:
            error = "<p id='error'>Wrong username or password.</p>"
            # As many PHP apps do: 200 and the form again, not an error status.
            return Reply(body=page_html("Sign in", _FORM.format(error=error)), headers=headers)
        return Reply(303, headers=[*headers, ("Location", "/account")])
    if req.path == "/login":
        return Reply(body=page_html("Sign in", _FORM.format(error="")), headers=headers)
    if req.path == "/whoami":
        return _whoami(account, headers)
    if req.path == "/account":
        if account is None:
            return Reply(302, headers=[*headers, ("Location", "/login")])
        body = f"<h1>Account</h1><p id='account'>{html.escape(account)}</p>"
        return Reply(body=page_html("Account", body), headers=headers)
    return Reply(404, page_html("Not found", "<h1>Not found</h1>"), headers=headers)


def _remember(state: SiteState, account: str) -> str:
    token = secrets.token_urlsafe(16)
    _sessions(state, "reissue.example")[token] = account
    return f"remember={token}; Path=/; Max-Age=86400; HttpOnly; SameSite=Lax"


_SEEN = "reissue_seen=1; Path=/; SameSite=Lax"


def _reissue(state: SiteState, req: PageRequest) -> Reply:
    host = "reissue.example"
    token = req.cookies.get("remember")
    headers: list[tuple[str, str]] = []
    with state.lock:
        account = _sessions(state, host).get(token) if token else None
        if account is not None and "reissue_seen" not in req.cookies:
            # A new browser session: the login cookie comes back re-encrypted.
            headers += [("Set-Cookie", _remember(state, account)), ("Set-Cookie", _SEEN)]
        if req.path == "/login" and req.method == "POST" and _credentials_ok(req):
            account = "alice"
            headers = [("Set-Cookie", _remember(state, account)), ("Set-Cookie", _SEEN)]
        _served(state, host, req, account)
    if req.path == "/login" and req.method == "POST":
        if account is None:
            error = "<p id='error'>Wrong username or password.</p>"
            return Reply(401, page_html("Sign in", _FORM.format(error=error)))
        return Reply(303, headers=[*headers, ("Location", "/account")])
    if req.path == "/login":
        return Reply(body=page_html("Sign in", _FORM.format(error="")), headers=headers)
    if req.path == "/whoami":
        return _whoami(account, headers)
    if req.path == "/account" and account is not None:
        body = f"<h1>Account</h1><p id='account'>{html.escape(account)}</p>"
        return Reply(body=page_html("Account", body), headers=headers)
    return Reply(401, page_html("Sign in required", "<p>not signed in</p>"), headers=headers)


#: The key under which the SPA sites keep their bearer token.
SPA_TOKEN_KEY = "spa_token"

_SPA_LOGIN = """<h1>Sign in</h1><p id='error'></p><form id='f'>
<label>Username <input name='username' autocomplete='username'></label>
<label>Password <input name='password' type='password'></label>
<button type='submit'>Sign in</button></form>
<script>
%(shim)s
document.getElementById('f').addEventListener('submit', async (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  const answer = await fetch('/api/login', {method: 'POST', body: new URLSearchParams(form)});
  if (!answer.ok) { document.getElementById('error').textContent = 'Wrong password.'; return; }
  await %(storage)s.setItem('%(key)s', (await answer.json()).token);
  location.href = '/app';
});
</script>"""

_SPA_APP = """<h1>App</h1><p id='account'>...</p>
<script>
%(shim)s
(async () => {
  const token = await %(storage)s.getItem('%(key)s');
  const headers = token ? {Authorization: 'Bearer ' + token} : {};
  const answer = await fetch('/api/whoami', {headers});
  const who = (await answer.json()).account;
  document.getElementById('account').textContent = who || 'signed out';
})();
</script>"""


#: The key-value face of IndexedDB the IndexedDB app keeps its token behind (database
#: ``auth``, object store ``tokens``); each call closes its connection, as apps do.
_IDB_SHIM = """const idb = {
  open: () => new Promise((ok, fail) => {
    const r = indexedDB.open('auth', 1);
    r.onupgradeneeded = () => r.result.createObjectStore('tokens');
    r.onsuccess = () => ok(r.result);
    r.onerror = () => fail(r.error);
  }),
  async setItem(key, value) {
    const db = await idb.open();
    await new Promise((ok, fail) => {
      const tx = db.transaction('tokens', 'readwrite');
      tx.objectStore('tokens').put(value, key);
      tx.oncomplete = ok;
      tx.onerror = () => fail(tx.error);
    });
    db.close();
  },
  async getItem(key) {
    const db = await idb.open();
    const value = await new Promise((ok) => {
      const r = db.transaction('tokens').objectStore('tokens').get(key);
      r.onsuccess = () => ok(r.result ?? null);
      r.onerror = () => ok(null);
    });
    db.close();
    return value;
  },
};"""

_Handler = Callable[[SiteState, PageRequest], Reply]


def _bearer(req: PageRequest) -> str | None:
    scheme, _, token = (req.headers.get("authorization") or "").partition(" ")
    return token if scheme.lower() == "bearer" and token else None


def _spa(host: str, storage: str, app_state: str = "") -> _Handler:
    """An SPA whose login is a bearer token the page keeps in ``storage`` (every page of
    it runs ``app_state`` first: what an app keeps beside its token)."""
    script = {
        "storage": storage,
        "key": SPA_TOKEN_KEY,
        "shim": (_IDB_SHIM if storage == "idb" else "") + app_state,
    }

    def handler(state: SiteState, req: PageRequest) -> Reply:
        token = _bearer(req)
        with state.lock:
            tokens = _sessions(state, host)
            account = tokens.get(token) if token else None
            issued = None
            if req.path == "/api/login" and req.method == "POST" and _credentials_ok(req):
                issued = secrets.token_urlsafe(24)
                tokens[issued] = account = "alice"
            if req.path == "/api/logout" and req.method == "POST" and token:
                tokens.pop(token, None)
            _served(state, host, req, account)
        if req.path == "/api/login" and req.method == "POST":
            if issued is None:
                return Reply(401, json.dumps({"error": "wrong password"}), "application/json")
            return Reply(200, json.dumps({"token": issued}), "application/json")
        if req.path == "/api/logout":
            return Reply(204)
        if req.path == "/api/whoami":
            return _whoami(account, [])
        if req.path == "/login":
            return Reply(body=page_html("Sign in", _SPA_LOGIN % script))
        if req.path == "/app":
            return Reply(body=page_html("App", _SPA_APP % script))
        return Reply(404, page_html("Not found", "<h1>Not found</h1>"))

    return handler


#: What ``spa-app.example`` keeps beside its token, as apps built on sign-in libraries do:
#: a transaction id in ``sessionStorage`` and a ``last_seen`` time in ``localStorage``, both
#: written again on every page load.
_APP_STATE = """sessionStorage.setItem('auth_txn', Math.random().toString(36).slice(2));
localStorage.setItem('last_seen', String(Date.now()));
"""

#: ``totp.example``'s password for ``alice`` (distinct, so a test can search for it).
TOTP_PASSWORD = "pw-canary-7f3a9c1e5d"
#: ``totp.example``'s TOTP secret for ``alice`` (base32).
TOTP_SECRET = "KRUGKIDTMVRXEZLUEBUXGIDTMVQWYZLE"

_CODE_FORM = (
    "<h1>Two-step verification</h1>{error}<form method='post' action='/login/code'>"
    "<label>Code <input name='code' inputmode='numeric' autocomplete='one-time-code'></label>"
    "<button type='submit'>Verify</button></form>"
)
_DEVICE = "<h1>Verify this new device</h1><p>We sent a link to your phone.</p>"


def _totp(state: SiteState, req: PageRequest) -> Reply:
    host = "totp.example"
    pending_host = host + "#pending"
    sid = req.cookies.get("totp_sid")
    headers: list[tuple[str, str]] = []
    with state.lock:
        account = _sessions(state, host).get(sid) if sid else None
        pending = _sessions(state, pending_host).get(req.cookies.get("totp_pending") or "")
        challenge = state.totp_challenge
        _served(state, host, req, account)
        if req.path == "/login" and req.method == "POST":
            ok = req.arg("username") == "alice" and secrets.compare_digest(
                (req.arg("password") or "").encode(), TOTP_PASSWORD.encode()
            )
            if not ok:
                error = "<p id='error'>Wrong username or password.</p>"
                return Reply(body=page_html("Sign in", _FORM.format(error=error)))
            if challenge:
                return Reply(303, headers=[("Location", "/login/device")])
            token = secrets.token_urlsafe(16)
            _sessions(state, pending_host)[token] = "alice"
            cookie = f"totp_pending={token}; Path=/login; HttpOnly; SameSite=Lax"
            return Reply(303, headers=[("Set-Cookie", cookie), ("Location", "/login/code")])
        if req.path == "/login/code" and req.method == "POST":
            code = req.arg("code") or ""
            if pending is None or not pyotp.TOTP(TOTP_SECRET).verify(code, valid_window=0):
                error = "<p id='error'>Wrong code.</p>"
                return Reply(body=page_html("Verify", _CODE_FORM.format(error=error)))
            sid = secrets.token_urlsafe(16)
            _sessions(state, host)[sid] = pending
            headers = [
                ("Set-Cookie", f"totp_sid={sid}; Path=/; HttpOnly; SameSite=Lax"),
                ("Set-Cookie", "totp_pending=; Path=/login; Max-Age=0"),
                ("Location", "/account"),
            ]
            return Reply(303, headers=headers)
    if req.path == "/login":
        return Reply(body=page_html("Sign in", _FORM.format(error="")))
    if req.path == "/login/code":
        return Reply(body=page_html("Verify", _CODE_FORM.format(error="")))
    if req.path == "/login/device":
        return Reply(body=page_html("New device", _DEVICE))
    if req.path == "/whoami":
        return _whoami(account, [])
    if req.path == "/account":
        if account is None:
            return Reply(302, headers=[("Location", "/login")])
        body = f"<h1>Account</h1><p id='account'>{html.escape(account)}</p>"
        return Reply(body=page_html("Account", body))
    if req.path == "/items":
        if account is None:
            return Reply(302, headers=[("Location", "/login")])
        return Reply(body=page_html("Items", _items(req.arg("page") or "1")))
    return Reply(404, page_html("Not found", "<h1>Not found</h1>"))


#: How many pages ``totp.example/items`` has (two items each).
TOTP_ITEM_PAGES = 4


def _items(page: str) -> str:
    n = max(1, min(TOTP_ITEM_PAGES, int(page) if page.isdigit() else 1))
    rows = "".join(
        f"<tr data-id='item-{n}-{i}'><td class='name'>item {n}.{i}</td></tr>" for i in (1, 2)
    )
    more = f"<a id='next' href='?page={n + 1}'>next</a>" if n < TOTP_ITEM_PAGES else ""
    return f"<h1 id='page-id'>items page {n}</h1><table id='items'>{rows}</table>{more}"


LOGIN_SITES: dict[str, _Handler] = {
    "php.example": _php,
    "reissue.example": _reissue,
    "spa.example": _spa("spa.example", "localStorage"),
    "spa-session.example": _spa("spa-session.example", "sessionStorage"),
    "spa-idb.example": _spa("spa-idb.example", "idb"),
    "spa-app.example": _spa("spa-app.example", "localStorage", _APP_STATE),
    "totp.example": _totp,
}


def totp_recipe(*, timeout: timedelta = timedelta(seconds=10)) -> FormRecipe:
    """totp.example's sign-in as the keeper renews it: username and password, then the
    TOTP code; signed in at ``/account`` (``#account``), refused with ``#error``."""
    return FormRecipe(
        url="http://totp.example/login",
        steps=[
            FormStep(
                fields=[
                    FormField(credential="username", label="Username"),
                    FormField(credential="password", label="Password"),
                ]
            ),
            FormStep(fields=[FormField(credential="totp", label="Code", totp=True)]),
        ],
        success=PageSign(url=r"/account$", selector="#account"),
        failure=PageSign(selector="#error"),
        timeout=timeout,
    )


def totp_credentials() -> EnvCredentials:
    """alice's credentials for totp.example (password and TOTP secret), from a private
    environment mapping (nothing is read from or written to ``os.environ``)."""
    return EnvCredentials(
        environ={
            "SESSION_KEEPER_CRED_TOTP_EXAMPLE_USERNAME": "alice",
            "SESSION_KEEPER_CRED_TOTP_EXAMPLE_PASSWORD": TOTP_PASSWORD,
            "SESSION_KEEPER_CRED_TOTP_EXAMPLE_TOTP": TOTP_SECRET,
        }
    )
