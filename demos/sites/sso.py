"""SsoSites: a real single sign-on setup on 127.0.0.1, for tests with a real browser.

One Node process (``demos/sites/sso/server.js``) serves four hosts over HTTPS on one port:

- ``idp.example`` — an OpenID Connect provider built on the ``oidc-provider`` package, with
  password accounts (:data:`ACCOUNTS`), a sign-in page with a Cancel button (which ends the
  sign-in with ``access_denied``), consent granted without asking, ``prompt=none``,
  RP-initiated logout, and a test-only endpoint that ends every session of an account
  (:meth:`SsoSites.sign_out_everywhere`);
- ``app.example`` and ``wiki.example`` — relying parties built on ``openid-client``
  (authorization code + PKCE): ``/login`` (``?popup=1``, ``?prompt=none``), ``/callback``
  (a 200 "Sign-in failed" page on error), ``/`` ("Signed in as X", and the session's bearer
  token written to ``localStorage.token``), ``/api/me`` (JSON; a session cookie or
  ``Authorization: Bearer``), ``/popup`` (``window.open`` + ``postMessage``), ``/silent`` (a
  hidden ``prompt=none`` iframe), ``/logout``, and a test-only ``POST /admin/sign-out`` that
  ends an account's sessions at the app alone (:meth:`SsoSites.end_app_sessions`);
- ``news.example`` — a public page that signs nobody in.

Chromium reaches them through :attr:`SsoSites.host_resolver_rules` and needs
``CHROMIUM_TEST_ARGS`` (the certificate is a throwaway one) and a profile that sends
third-party cookies (``allow_third_party_cookies``): every cookie here is
``SameSite=None; Secure``, as an embedded sign-in needs.

Every request a server answers is in its log (:meth:`SsoSites.served`), with the account it
served it as, so a test counts on the server side what the browser achieved. The Node
modules come from ``package-lock.json`` (``scripts/ensure-system-deps.sh`` runs ``npm ci``).
"""

from __future__ import annotations

import datetime
import http.client
import json
import os
import shutil
import ssl
import subprocess
import tempfile
from pathlib import Path
from typing import IO, Literal, Self
from urllib.parse import urlencode

import attrs

from demos.sites._child import ChildSite

__all__ = [
    "ACCOUNTS",
    "HOSTS",
    "SERVER_DIR",
    "Served",
    "ServerName",
    "SsoSites",
    "SsoSitesError",
    "find_node",
    "modules_missing",
    "node_too_old",
]

#: Where the Node program and its ``package.json`` live.
SERVER_DIR = Path(__file__).resolve().parent / "sso"

#: The hosts the Node process serves.
HOSTS = ("idp.example", "app.example", "wiki.example", "news.example")

#: The identity provider's accounts: name -> password.
ACCOUNTS = {"ada": "correct horse battery", "bob": "tr0ub4dor"}

ServerName = Literal["idp", "app", "wiki", "news"]

_READY_TIMEOUT = 30.0


class SsoSitesError(RuntimeError):
    """The single sign-on sites could not be started (no Node, no modules, a crash)."""


@attrs.frozen(kw_only=True)
class Served:
    """One request a server answered, from its own log.

    ``account`` is the account the server served the request as (the session the request
    carried; for a completed sign-in, the account it signed in), ``None`` for nobody.
    ``event`` names what happened where it matters: on the identity provider ``login-form``
    (credentials asked), ``login``, ``login-refused``, ``cancel``, ``code`` (a code issued
    to ``client``), ``interaction`` (the sign-in page is needed), ``error:<code>``,
    ``sign-out-everywhere``; on a relying party ``login-redirect`` / ``login-popup`` /
    ``login-frame``, ``sign-in``, ``sign-in-failed``, ``logout``.
    """

    server: str | None
    host: str
    method: str
    path: str
    status: int | None
    account: str | None
    event: str | None
    client: str | None
    prompt: str | None
    time: float


def find_node() -> str | None:
    """The ``node`` executable to run the sites with (``SSO_NODE`` overrides), or ``None``."""
    return os.environ.get("SSO_NODE") or shutil.which("node")


def modules_missing() -> str | None:
    """Why the Node modules cannot be used (``None`` when installed from the lock file)."""
    lock = SERVER_DIR / "package-lock.json"
    installed = SERVER_DIR / "node_modules" / ".package-lock.json"
    if not installed.exists():
        return f"no node_modules in {SERVER_DIR} (run scripts/ensure-system-deps.sh)"
    if installed.stat().st_mtime < lock.stat().st_mtime:
        return f"node_modules in {SERVER_DIR} is older than package-lock.json (run npm ci)"
    return None


def node_too_old(version: str) -> bool:
    """Whether a ``node --version`` answer ('v20.20.2') is older than 20.19 or unreadable."""
    try:
        major, minor = (int(x) for x in version.lstrip("v").split(".")[:2])
    except ValueError:
        return True
    return (major, minor) < (20, 19)


def _throwaway_certificate(directory: Path) -> tuple[Path, Path]:
    """A fresh self-signed certificate for :data:`HOSTS`, written to ``directory``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "SsoSites test certificate")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in HOSTS]), False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    return cert_path, key_path


class SsoSites(ChildSite):
    """The single sign-on sites in a Node process; a context manager, or :meth:`start`/:meth:`stop`.

    Raises :class:`SsoSitesError` from :meth:`start` when Node or its modules are missing or
    the process does not come up.
    """

    def __init__(self) -> None:
        super().__init__()
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._stderr: IO[str] | None = None
        self._port: int | None = None
        self._log: Path | None = None

    # -- lifetime --------------------------------------------------------------------------
    def start(self) -> Self:
        """Start the Node process on 127.0.0.1 (a free port) and wait until it answers."""
        if self._proc is not None:
            return self
        node = find_node()
        if node is None:
            raise SsoSitesError("no node executable on PATH (install Debian's nodejs)")
        version = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout.strip()
        if node_too_old(version):
            raise SsoSitesError(f"node {version or '?'} is older than 20.19 (the site needs it)")
        missing = modules_missing()
        if missing is not None:
            raise SsoSitesError(missing)
        self._dir = tempfile.TemporaryDirectory(prefix="sso-sites-")
        root = Path(self._dir.name)
        cert, key = _throwaway_certificate(root)
        self._log = root / "served.jsonl"
        self._log.touch()
        self._stderr = open(root / "stderr.txt", "w+", encoding="utf-8")  # noqa: SIM115 - kept open while the process runs
        args = [str(SERVER_DIR / "server.js"), "--cert", str(cert), "--key", str(key)]
        self._spawn([node, *args, "--log", str(self._log)], cwd=SERVER_DIR, stderr=self._stderr)
        try:
            line = self._line(_READY_TIMEOUT)
            if not line.startswith("ready "):
                raise SsoSitesError(f"the SSO sites did not start: {line!r}; {self._stderr_tail()}")
            self._port = int(line.split()[1])
        except BaseException:
            self.stop()
            raise
        return self

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.flush()
        self._stderr.seek(0)
        return "stderr: " + self._stderr.read()[-2000:]

    def stop(self) -> None:
        """Stop the Node process and remove its files (no-op when not started)."""
        self._end()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None
        self._port = None

    # -- addresses -------------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The port every host is served on (127.0.0.1)."""
        if self._port is None:
            raise SsoSitesError("SsoSites is not started")
        return self._port

    @property
    def host_resolver_rules(self) -> str:
        """The Chromium ``--host-resolver-rules`` value sending ``*.example`` here."""
        return f"MAP *.example 127.0.0.1:{self.port}"

    def url(self, host: str, path: str = "/") -> str:
        """The URL a browser using :attr:`host_resolver_rules` opens for ``host`` + ``path``."""
        if host not in HOSTS:
            raise ValueError(f"SsoSites serves {', '.join(HOSTS)}, not {host!r}")
        if not path.startswith("/"):
            path = "/" + path
        return f"https://{host}{path}"

    # -- what the servers did --------------------------------------------------------------
    def served(self, server: ServerName | None = None, *, since: int = 0) -> list[Served]:
        """The requests answered (by ``server``, or all) from the log's ``since``-th line on.

        ``since`` is a :meth:`mark`: what was served after it.
        """
        if self._log is None:
            raise SsoSitesError("SsoSites is not started")
        with self._log.open(encoding="utf-8") as f:
            lines = f.read().splitlines()[since:]
        entries = [Served(**json.loads(line)) for line in lines if line]
        return [e for e in entries if server is None or e.server == server]

    def mark(self) -> int:
        """A place in the log: :meth:`served` with ``since=`` it lists what came after."""
        if self._log is None:
            raise SsoSitesError("SsoSites is not started")
        with self._log.open(encoding="utf-8") as f:
            return len(f.read().splitlines())

    def accounts_served(self, server: ServerName, *, since: int = 0) -> set[str]:
        """The accounts ``server`` served any request as, since ``since``."""
        return {e.account for e in self.served(server, since=since) if e.account is not None}

    def request(
        self,
        host: str,
        path: str,
        *,
        method: str = "GET",
        body: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        """Send one request to ``host`` from outside the browser (as an attacker holding a
        stolen token would); return the status and body. Logged like any other."""
        if host not in HOSTS:
            raise ValueError(f"SsoSites serves {', '.join(HOSTS)}, not {host!r}")
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # our own throwaway certificate, on loopback
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, timeout=10, context=context)
        try:
            conn.request(method, path, body=body, headers={"Host": host, **(headers or {})})
            answer = conn.getresponse()
            return answer.status, answer.read()
        finally:
            conn.close()

    def sign_out_everywhere(self, account: str) -> int:
        """End every session ``account`` has at the identity provider (a server-side
        sign-out, test-only endpoint); return how many ended."""
        status, body = self.request(
            "idp.example",
            "/admin/sign-out",
            method="POST",
            body=urlencode({"account": account}),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        if status != 200:
            raise SsoSitesError(f"sign-out at the identity provider answered {status}")
        destroyed: int = json.loads(body)["destroyed"]
        return destroyed

    def end_app_sessions(self, host: str, account: str) -> int:
        """End every session ``account`` has at the relying party ``host`` (``app.example``,
        ``wiki.example``; a server-side expiry, test-only endpoint), leaving the identity
        provider's session alive; return how many ended."""
        if host not in ("app.example", "wiki.example"):
            raise ValueError(f"{host!r} is not a relying party")
        status, body = self.request(
            host,
            "/admin/sign-out",
            method="POST",
            body=urlencode({"account": account}),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        if status != 200:
            raise SsoSitesError(f"sign-out at {host} answered {status}")
        destroyed: int = json.loads(body)["destroyed"]
        return destroyed

    def __repr__(self) -> str:
        where = f"127.0.0.1:{self._port}" if self._port is not None else "stopped"
        return f"<SsoSites {where}>"
