"""otp.example's Django side: views, the request log and the URL map.

Imported only inside the server process (:mod:`.serve`), once Django is set up. The
second factor is django-otp's own ``TOTPDevice``: its ``verify_token`` decides every
code (the current window, one step either way, and never a time step at or below the
device's ``last_t``: a code used once is refused), and its throttling
(``verify_is_allowed``) locks the device after failures. The views only tell the three
refusals apart, asking django-otp in the order it decides:

- locked: ``verify_is_allowed()`` says no before the code is looked at (django-otp's own
  ``n_failed_attempts`` text);
- reused: ``verify_token`` refused the code, yet it is the device's code at a time step
  at or below its ``last_t`` (the site's own text);
- wrong: any other refusal (django-otp's own ``invalid_token`` text).
"""

from __future__ import annotations

import html
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings as django_settings
from django.contrib.auth import get_user_model, login
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpResponse, JsonResponse
from django.middleware.csrf import get_token
from django.shortcuts import redirect
from django.urls import path
from django_otp import verify_token
from django_otp.forms import OTPAuthenticationFormMixin
from django_otp.oath import TOTP
from django_otp.plugins.otp_totp.models import TOTPDevice

from demos.sites.otp_django import REUSED_TEXT

__all__ = ["RequestLog", "urlpatterns"]


_PAGE = (
    "<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
    "<body><h1>{title}</h1>{body}</body></html>"
)


class RequestLog:
    """Middleware: one JSON line per request, naming the account the site served it as
    (verified by the second factor, else ``null``) and, for a code, django-otp's verdict
    and the server's time step when it judged it."""

    _lock = threading.Lock()

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self._get_response = get_response
        self._path = Path(django_settings.REQUEST_LOG)

    def __call__(self, request: Any) -> Any:
        response = self._get_response(request)
        entry = {
            "method": request.method,
            "path": request.path,
            "status": response.status_code,
            "account": _account(request),
            "code": getattr(request, "otp_verdict", None),
            "user": getattr(request, "otp_user", None),
            "window": getattr(request, "otp_window", None),
            "at": time.time(),
        }
        with self._lock, self._path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
        return response


def _account(request: Any) -> str | None:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return None
    # The request that signs in carries the user django.contrib.auth.login() set, which
    # OTPMiddleware never wrapped: its device says whether it is verified.
    if getattr(user, "otp_device", None) is None:
        return None
    return str(user.get_username())


def _page(title: str, body: str, status: int = 200) -> Any:
    return HttpResponse(_PAGE.format(title=html.escape(title), body=body), status=status)


def _error(text: str | None) -> str:
    return f"<p class='error' role='alert'>{html.escape(text)}</p>" if text else ""


def _csrf(request: Any) -> str:
    return f"<input type='hidden' name='csrfmiddlewaretoken' value='{get_token(request)}'>"


def login_view(request: Any) -> Any:
    """Step one: username and password (Django's ``AuthenticationForm``)."""
    if _account(request) is not None:
        return redirect("/")
    error = None
    if request.method == "POST":
        form = AuthenticationForm(request, data=request.POST)
        if form.is_valid():
            request.session["otp_pending"] = form.get_user().pk
            return redirect("/login/code")
        error = " ".join(str(e) for e in form.non_field_errors()) or "Sign-in refused."
    body = (
        f"{_error(error)}<form method='post' action='/login'>{_csrf(request)}"
        "<label>Username <input name='username' autocomplete='username'></label>"
        "<label>Password <input name='password' type='password'></label>"
        "<button type='submit'>Sign in</button></form>"
    )
    return _page("Sign in", body, 200)


def code_view(request: Any) -> Any:
    """Step two: the TOTP code, judged by django-otp (see the module)."""
    pending = request.session.get("otp_pending")
    if pending is None:
        return redirect("/login")
    user = get_user_model().objects.get(pk=pending)
    error = None
    if request.method == "POST":
        messages = OTPAuthenticationFormMixin.otp_error_messages
        token = str(request.POST.get("code", "")).strip()
        device = TOTPDevice.objects.get(user=user)
        request.otp_window = int(time.time()) // device.step
        request.otp_user = user.get_username()
        allowed, info = device.verify_is_allowed()
        if not allowed:
            request.otp_verdict = "locked"
            error = str(messages["n_failed_attempts"] % {"failure_count": info["failure_count"]})
        elif (accepted := verify_token(user, device.persistent_id, token)) is not None:
            request.otp_verdict = "accepted"
            del request.session["otp_pending"]
            user.otp_device = accepted
            login(request, user)  # django-otp's signal handler marks the session verified
            return redirect("/")
        else:
            device.refresh_from_db()
            request.otp_verdict = "reused" if _used_before(device, token) else "wrong"
            reused = request.otp_verdict == "reused"
            error = REUSED_TEXT if reused else str(messages["invalid_token"])
    body = (
        f"{_error(error)}<form method='post' action='/login/code'>{_csrf(request)}"
        "<label>Code <input name='code' inputmode='numeric' autocomplete='one-time-code'>"
        "</label><button type='submit'>Verify</button></form>"
    )
    return _page("Two-step verification", body, 200)


def _used_before(device: Any, token: str) -> bool:
    """Whether ``token`` is the device's code at a time step it already accepted one at:
    django-otp's own matcher, without the ``last_t`` floor it verifies with."""
    try:
        value = int(token)
    except ValueError:
        return False
    totp = TOTP(device.bin_key, device.step, device.t0, device.digits, device.drift)
    totp.time = time.time()
    return bool(totp.verify(value, device.tolerance)) and totp.t() <= device.last_t


def home_view(request: Any) -> Any:
    """The signed-in page."""
    account = _account(request)
    if account is None:
        return redirect("/login")
    body = f"<p id='who'>Signed in as {html.escape(account)}</p>"
    return _page("Home", body)


def whoami_view(request: Any) -> Any:
    """``{"account": ...}``: the verified account of the request, or ``null``."""
    return JsonResponse({"account": _account(request)})


urlpatterns = [
    path("", home_view),
    path("login", login_view),
    path("login/code", code_view),
    path("whoami", whoami_view),
]
