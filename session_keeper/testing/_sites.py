"""LocalSites: a few small websites on 127.0.0.1, for tests with a real browser.

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
- ``docs.example`` — static pages.
- ``sso.example`` — a persistent ``sso_session`` cookie, account switching, ``/whoami``.
- ``php.example`` and ``reissue.example`` — session habits of real applications (a
  session cookie set by the login page and kept; a login cookie re-issued each browser
  session): see :mod:`session_keeper.testing._login_sites`.

Each of them answers ``/redirect?to=<url>`` (an open redirect, as many real sites have).
Your own sites join with ``LocalSites(extra_sites={host: handler})``: a handler takes the
:class:`RecordedRequest` and returns a :class:`SiteResponse`, or ``None`` to leave the
request to the built-in site of that host (a ``/redirect``, or a 404 on a host of yours).

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
import socket
import ssl
import tempfile
import threading
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal, Self
from urllib.parse import urlencode, urlsplit

from session_keeper.testing._login_sites import LOGIN_SITES
from session_keeper.testing._site_pages import (
    BUILT_IN_SITES,
    PageRequest,
    RecordedRequest,
    Reply,
    SiteHandler,
    SiteResponse,
    SiteState,
    own_site,
    page_html,
    parse_cookie_header,
    reply_from,
)

__all__ = [
    "CHROMIUM_TEST_ARGS",
    "SITES",
    "LocalSites",
    "RecordedRequest",
    "SiteHandler",
    "SiteResponse",
    "allow_third_party_cookies",
]

#: The hosts LocalSites serves (besides the ``extra_sites`` it is given).
SITES = ("billing.example", "docs.example", "sso.example", *LOGIN_SITES)

#: Every site LocalSites serves itself.
_ALL_SITES = {**BUILT_IN_SITES, **LOGIN_SITES}

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


def _own_subdomain(origin: str, host: str) -> bool:
    """Whether ``origin`` is a subdomain of ``host`` (``www.billing.example``)."""
    origin_host = urlsplit(origin).hostname or ""
    return bool(host) and origin_host.endswith("." + host)


def _make_handler(state: SiteState) -> type[BaseHTTPRequestHandler]:
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
                cookies=parse_cookie_header(self.headers.get("Cookie")),
                scheme=state.scheme,
                body=body,
            )
            with state.lock:
                state.log.append(record)
            handler = _ALL_SITES.get(host)
            own = state.extra_sites.get(host)
            response = None
            origin = self.headers.get("Origin") or ""
            # Credentialed CORS from the site's own subdomains (a www/api split).
            cors = _own_subdomain(origin, host)
            if handler is None and own is None:
                reply = Reply(421, page_html("Unknown site", f"<p>no site {html.escape(host)}</p>"))
            elif self.command == "OPTIONS":
                # A CORS preflight: allowed for the site's own subdomains only.
                reply = Reply(204 if cors else 403, "", "text/plain")
                if cors:
                    reply.headers += [
                        ("Access-Control-Allow-Methods", "GET, POST"),
                        ("Access-Control-Allow-Headers", "Content-Type"),
                    ]
            elif split.path == "/favicon.ico":
                reply = Reply(404, "", "text/plain")
            elif own is not None and (response := own(record)) is not None:
                reply = reply_from(response)
            else:
                req = PageRequest(self.command, split.path, split.query, dict(headers), body)
                reply = own_site(req) if handler is None else handler(state, req)
            data = reply.body if isinstance(reply.body, bytes) else reply.body.encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            for name, value in reply.headers:
                self.send_header(name, value)
            if cors:
                self.send_header("Access-Control-Allow-Origin", origin)
                self.send_header("Access-Control-Allow-Credentials", "true")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_POST = do_HEAD = do_OPTIONS = _serve  # noqa: N815 - http.server's naming

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


def _throwaway_tls(hosts: Iterable[str]) -> ssl.SSLContext:
    """A TLS context with a fresh self-signed certificate for ``hosts`` and their subdomains."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "LocalSites test certificate")])
    hosts = list(hosts)
    names = [*hosts, *(f"*.{h}" for h in hosts)]
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in names]), False)
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
    ``extra_sites`` maps hosts of your own (or a built-in one, whose pages it answers
    first) to a handler, ``Callable[[RecordedRequest], SiteResponse | None]``; they
    share the port, the scheme and the request log.
    """

    def __init__(
        self,
        *,
        billing_accounts: Mapping[str, str] | None = None,
        samesite: Literal["Lax", "None"] = "Lax",
        extra_sites: Mapping[str, SiteHandler] | None = None,
    ) -> None:
        accounts = {"alice": "correct horse"} if billing_accounts is None else billing_accounts
        self._state = SiteState(accounts, samesite, extra_sites)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifetime --------------------------------------------------------------------------
    def start(self) -> Self:
        """Start serving on 127.0.0.1 on a free port (no-op when already started)."""
        if self._server is None:
            server = _Server(("127.0.0.1", 0), _make_handler(self._state))
            server.daemon_threads = True
            if self._state.scheme == "https":
                server.tls = _throwaway_tls({*_ALL_SITES, *self._state.extra_sites})
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

    def __enter__(self) -> Self:
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

    def expire_sessions(self, host: str) -> None:
        """Forget every session ``host`` issued, as a server-side expiry would.

        The browser keeps its cookies (and an SPA its token); the site no longer honours
        them. ``host``: ``billing.example``, ``sso.example`` or one of the login sites.
        """
        with self._state.lock:
            if host == "billing.example":
                self._state.billing_sessions.clear()
            elif host == "sso.example":
                self._state.sso_sessions.clear()
            elif host in LOGIN_SITES:
                self._state.shape_sessions.pop(host, None)
            else:
                raise ValueError(f"{host} has no sessions to expire")

    def challenge_new_device(self, on: bool = True) -> None:
        """Make ``totp.example`` answer a right password with a "verify this new device"
        page (``on``), or with its code form again (``off``)."""
        with self._state.lock:
            self._state.totp_challenge = on

    def served(self, host: str) -> list[tuple[str, str | None]]:
        """``(path, account)`` of every request ``host`` served, as the site saw it
        (the login sites: ``php.example``, ``reissue.example``, ``spa.example``,
        ``spa-session.example``; ``None``: served signed out)."""
        with self._state.lock:
            return [(path, account) for h, path, account in self._state.served if h == host]

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
