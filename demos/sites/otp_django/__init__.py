"""otp.example: a Django site whose second factor is django-otp's TOTP device.

A real third-party TOTP check, served by the tests on 127.0.0.1 (waitress, SQLite in a
temporary directory, migrations run at start) in a process of its own. ``/login`` takes
a username and password (Django's ``AuthenticationForm``), ``/login/code`` a TOTP code
that django-otp's ``TOTPDevice.verify_token`` judges; ``/`` is the signed-in page
(``#who``), ``/whoami`` answers ``{"account": ...}``. Each refusal reads differently:

- a wrong code: django-otp's own "Invalid token. ..." (:data:`WRONG_CODE_TEXT`);
- a code the device accepted before (django-otp refuses any time step at or below its
  ``last_t``): :data:`REUSED_TEXT`;
- a device django-otp's throttling has locked: its own "Verification temporarily
  disabled because of N failed attempts, ..." (:data:`LOCKED_TEXT_START`).

:class:`OtpSite` starts and stops it (a context manager) and reads the site's own
request log (:meth:`OtpSite.requests`: which account each request was served as, and
django-otp's verdict on each code with the server's time step). The browser reaches it
as ``http://otp.example/`` through :attr:`OtpSite.host_resolver_rules`. ``OtpSite(step=N)``
gives every device an N-second time step instead of django-otp's 30 s
(:meth:`OtpSite.totp_uri` is then the URI carrying that period).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from datetime import timedelta
from http.cookiejar import CookieJar
from pathlib import Path
from typing import Self

import attrs

from demos.sites._child import ChildSite
from session_keeper import FormField, FormRecipe, FormStep, PageSign

__all__ = [
    "LOCKED_TEXT_START",
    "OTP_ACCOUNTS",
    "OTP_HOST",
    "OTP_PASSWORD",
    "OTP_SECRET",
    "OTP_STEP",
    "OTP_USERNAME",
    "REUSED_TEXT",
    "WRONG_CODE_TEXT",
    "OtpSite",
    "SiteRequest",
    "otp_recipe",
]

OTP_HOST = "otp.example"
OTP_USERNAME = "alice"
#: The accounts, each with a device of its own: a test that uses one leaves the others'
#: django-otp state (the last time step verified, the failure count) as it was.
OTP_ACCOUNTS = ("alice", "bob", "carol", "dave", "erin")
#: Every account's password.
OTP_PASSWORD = "correct horse battery"
#: Every account's TOTP secret (base32, as an authenticator app and the keeper's vault
#: hold it).
OTP_SECRET = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"
#: The devices' default time step, seconds (django-otp's default; a test may start the
#: site with a shorter one, :class:`OtpSite`'s ``step``).
OTP_STEP = 30
#: The site's word on a code accepted before (django-otp itself says only "invalid").
REUSED_TEXT = "This code has already been used. Wait for your authenticator to show a new one."
#: django-otp's word on a wrong code.
WRONG_CODE_TEXT = "Invalid token. Please make sure you have entered it correctly."
#: How django-otp's word on a locked device begins.
LOCKED_TEXT_START = "Verification temporarily disabled because of"

_ROOT = Path(__file__).resolve().parents[3]


@attrs.frozen(kw_only=True)
class SiteRequest:
    """One request as the site logged it: ``account`` it was served as (``None``:
    nobody), and for a code, django-otp's ``code`` verdict (``accepted``, ``wrong``,
    ``reused``, ``locked``), whose code it was (``user``) and the server's time step
    (``window``) when it judged it."""

    method: str
    path: str
    status: int
    account: str | None
    code: str | None
    user: str | None
    window: int | None
    at: float


def otp_recipe(*, timeout: timedelta = timedelta(seconds=10)) -> FormRecipe:
    """The keeper's sign-in recipe for otp.example: password, then the TOTP code."""
    return FormRecipe(
        url=f"http://{OTP_HOST}/login",
        steps=[
            FormStep(
                fields=[
                    FormField(credential="username", label="Username"),
                    FormField(credential="password", label="Password"),
                ]
            ),
            FormStep(fields=[FormField(credential="totp", label="Code", totp=True)]),
        ],
        success=PageSign(selector="#who"),
        failure=PageSign(selector=".error"),
        timeout=timeout,
    )


class OtpSite(ChildSite):
    """otp.example's server process (see the module); a context manager."""

    def __init__(self, directory: Path | None = None, *, step: int = OTP_STEP) -> None:
        super().__init__()
        if isinstance(step, bool) or not isinstance(step, int) or step <= 0:
            raise ValueError("step must be a whole number of seconds above 0")
        #: The devices' time step (django-otp's ``TOTPDevice.step``), seconds.
        self.step = step
        self._given = directory
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._lock = threading.Lock()
        self.directory = Path()
        self.port = 0

    def start(self) -> Self:
        """Migrate, seed and serve; return once the site listens (at most 60 s)."""
        if self._given is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="otp-site-")
            self.directory = Path(self._tmp.name)
        else:
            self.directory = self._given
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(_ROOT), *sys.path])}
        errors = self.directory / "server.err"
        with errors.open("w") as stderr:
            self._spawn(
                [
                    sys.executable,
                    "-m",
                    "demos.sites.otp_django.serve",
                    str(self.directory),
                    str(self.step),
                ],
                cwd=_ROOT,
                stderr=stderr,
                env=env,
                commands=True,
            )
        first = self._line(60)
        if not first.startswith("port "):
            said = errors.read_text(errors="replace")[-2000:]
            self.stop()
            raise RuntimeError(f"otp.example did not start: {first!r}\n{said}")
        self.port = int(first.split()[1])
        return self

    def stop(self) -> None:
        """End the server process and remove its files."""
        self._end()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    @property
    def host_resolver_rules(self) -> str:
        """The Chromium ``--host-resolver-rules`` rule sending otp.example here."""
        return f"MAP {OTP_HOST} 127.0.0.1:{self.port}"

    def totp_uri(self, account: str = OTP_USERNAME, secret: str = OTP_SECRET) -> str:
        """The ``otpauth://`` URI an authenticator app scans for ``account``: the secret
        with the site's :attr:`step` as its ``period`` (what the keeper's vault holds)."""
        query = urllib.parse.urlencode({"secret": secret, "issuer": OTP_HOST, "period": self.step})
        return f"otpauth://totp/{OTP_HOST}:{urllib.parse.quote(account)}?{query}"

    def url(self, path: str = "/") -> str:
        """The URL a browser using :attr:`host_resolver_rules` opens."""
        return f"http://{OTP_HOST}{path}"

    def _control(self, command: str) -> None:
        with self._lock:
            assert self._proc is not None and self._proc.stdin is not None
            self._proc.stdin.write(command + "\n")
            self._proc.stdin.flush()
            answer = self._line(30)
        if answer != "ok":
            raise RuntimeError(f"otp.example refused {command!r}: {answer!r}")

    def sign_out_everyone(self) -> None:
        """Delete every session server-side (each browser's cookie then serves nobody)."""
        self._control("sign-out")

    def lock_out(self, username: str = OTP_USERNAME, failures: int = 8) -> None:
        """Record ``failures`` failed codes on the account's device through django-otp's
        throttling: it is locked for 2**(failures-1) seconds from now."""
        self._control(f"lock-out {username} {failures}")

    def unlock(self, username: str = OTP_USERNAME) -> None:
        """Reset the device's throttling (django-otp's ``throttle_reset``)."""
        self._control(f"unlock {username}")

    def requests(self) -> list[SiteRequest]:
        """Every request the site served so far, oldest first (its own log)."""
        path = self.directory / "requests.jsonl"
        if not path.exists():
            return []
        lines = path.read_text(encoding="utf-8").splitlines()
        return [SiteRequest(**json.loads(line)) for line in lines if line.strip()]

    def sign_in_directly(
        self, code: str, *, username: str = OTP_USERNAME, password: str = OTP_PASSWORD
    ) -> SiteRequest:
        """Sign ``username`` in from another client (not the browser) with ``code``;
        return the site's log entry of the code it judged."""
        jar = CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        base = f"http://127.0.0.1:{self.port}"

        def post(path: str, form: dict[str, str]) -> None:
            page = opener.open(urllib.request.Request(base + path, headers={"Host": OTP_HOST}))
            page.read()
            token = next(c.value for c in jar if c.name == "csrftoken")
            data = urllib.parse.urlencode({**form, "csrfmiddlewaretoken": token or ""}).encode()
            request = urllib.request.Request(base + path, data=data, headers={"Host": OTP_HOST})
            opener.open(request).read()

        since = len(self.requests())
        post("/login", {"username": username, "password": password})
        post("/login/code", {"code": code})
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            judged = [r for r in self.requests()[since:] if r.code is not None]
            if judged:
                return judged[-1]
            time.sleep(0.05)
        raise RuntimeError("otp.example logged no verdict on the code")
