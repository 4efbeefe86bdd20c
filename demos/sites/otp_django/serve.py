"""otp.example's server process: ``python -m demos.sites.otp_django.serve DIR [STEP]``.

Configures Django (SQLite ``DIR/site.db``, request log ``DIR/requests.jsonl``), runs the
migrations, creates the accounts (:data:`~demos.sites.otp_django.OTP_ACCOUNTS`, each
with the password and a django-otp ``TOTPDevice`` of its own holding
:data:`~demos.sites.otp_django.OTP_SECRET`, its time step STEP seconds, default 30),
serves on 127.0.0.1 with waitress on a free port, and prints ``port N`` once it
listens. Its standard input is the test's control line, one command a line, each
answered ``ok`` (or ``error ...``) on stdout:

- ``sign-out``: delete every session, as a server-side sign-out does;
- ``lock-out USER N``: N failed verifications on USER's device through django-otp's own
  ``throttle_increment`` (locked for 2**(N-1) seconds from now);
- ``unlock USER``: django-otp's ``throttle_reset`` on USER's device.

End of input stops the server.
"""

from __future__ import annotations

import base64
import secrets
import sys
import threading
from pathlib import Path
from typing import Any

import django
from django.conf import settings as django_settings

from demos.sites.otp_django import OTP_ACCOUNTS, OTP_PASSWORD, OTP_SECRET, OTP_STEP


def site_settings(directory: Path) -> dict[str, Any]:
    """The Django settings of the site, its files in ``directory``."""
    return {
        "DEBUG": False,
        "SECRET_KEY": secrets.token_urlsafe(32),
        "ALLOWED_HOSTS": ["otp.example", "127.0.0.1"],
        "ROOT_URLCONF": "demos.sites.otp_django.app",
        "INSTALLED_APPS": [
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.sessions",
            "django_otp",
            "django_otp.plugins.otp_totp",
        ],
        "MIDDLEWARE": [
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
            "django_otp.middleware.OTPMiddleware",
            "demos.sites.otp_django.app.RequestLog",
        ],
        "DATABASES": {
            "default": {
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": str(directory / "site.db"),
                "OPTIONS": {"timeout": 20},
            }
        },
        # Django's advice for test sites: a fast hasher (the password check is not what
        # these tests measure).
        "PASSWORD_HASHERS": ["django.contrib.auth.hashers.MD5PasswordHasher"],
        "USE_TZ": True,
        "DEFAULT_AUTO_FIELD": "django.db.models.AutoField",
        "LOGGING_CONFIG": None,
        # A code one step early or late is accepted (the device's tolerance) without
        # moving the device's drift: each code is judged against the server's clock.
        "OTP_TOTP_SYNC": False,
        "REQUEST_LOG": str(directory / "requests.jsonl"),
    }


def _seed(step: int) -> None:
    from django.contrib.auth import get_user_model
    from django_otp.plugins.otp_totp.models import TOTPDevice

    key = base64.b32decode(OTP_SECRET).hex()
    for username in OTP_ACCOUNTS:
        user = get_user_model().objects.create_user(username, password=OTP_PASSWORD)
        TOTPDevice.objects.create(user=user, name="phone", key=key, step=step, confirmed=True)


def _command(line: str) -> str:
    from django.contrib.auth import get_user_model
    from django.contrib.sessions.models import Session
    from django.db import connection
    from django_otp.plugins.otp_totp.models import TOTPDevice

    words = line.split()
    try:
        if words == ["sign-out"]:
            Session.objects.all().delete()
        elif len(words) == 3 and words[0] == "lock-out":
            device = TOTPDevice.objects.get(user=get_user_model().objects.get(username=words[1]))
            for _ in range(int(words[2])):
                device.throttle_increment()
        elif len(words) == 2 and words[0] == "unlock":
            device = TOTPDevice.objects.get(user=get_user_model().objects.get(username=words[1]))
            device.throttle_reset()
        else:
            return f"error unknown command {line!r}"
        return "ok"
    finally:
        connection.close()


def main(directory: Path, step: int = OTP_STEP) -> None:
    """Serve the site until standard input ends (see the module)."""
    from waitress import create_server

    django_settings.configure(**site_settings(directory))
    django.setup()
    from django.core.management import call_command
    from django.core.wsgi import get_wsgi_application

    call_command("migrate", verbosity=0, interactive=False)
    _seed(step)
    server = create_server(get_wsgi_application(), host="127.0.0.1", port=0, threads=4)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    print(f"port {server.effective_port}", flush=True)
    for line in sys.stdin:
        if line.strip():
            print(_command(line.strip()), flush=True)
    server.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else OTP_STEP)
