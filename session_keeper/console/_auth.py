"""Who may use the console: loopback binds, one-time links, sessions, CSRF, signed live links.

- The console listens on loopback unless the caller explicitly allows another address.
- A person gets in through a one-time link (printed at start, or made by the application
  with :meth:`Console.login_link`); opening it sets a session cookie (HttpOnly,
  SameSite=Strict) and the code is spent. The cookie's name is the console's own
  (``sk_console_<random>``): cookies ignore ports, so two consoles on one host would
  otherwise overwrite each other's and sign each other out. Programs use the bearer token instead.
- Every form carries the session's CSRF token; state changes only on POST.
- The live view of a conversation needs a link signed for that conversation (HMAC under
  a per-console secret, with an expiry): a person sees only a tab they were sent to.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

import attrs

from session_keeper._util.binds import is_loopback, parse_bind
from session_keeper.errors import InvalidArgument

__all__ = ["Auth", "Session", "check_bind", "is_loopback", "parse_bind"]

#: How long a one-time login link stays valid.
LINK_TTL_S = 15 * 60
#: How long a cookie session lasts.
SESSION_TTL_S = 12 * 3600


def check_bind(host: str, *, allow_remote: bool) -> None:
    """Refuse a non-loopback ``host`` unless ``allow_remote`` (raises :class:`InvalidArgument`)."""
    if not is_loopback(host) and not allow_remote:
        raise InvalidArgument(
            f"the console binds to loopback only; {host!r} would expose the browser to the "
            "network. Put it behind your own authenticating proxy and pass "
            "allow_remote=True (--allow-remote) if you really mean it"
        )


@attrs.frozen(kw_only=True)
class Session:
    """A signed-in person (or the bearer-token client)."""

    user: str
    #: The session's CSRF token (``None`` for the bearer client: no cookie, no CSRF).
    csrf: str | None
    expires_at: float
    #: A sign-in hand-off's session sees one conversation's live view and nothing else
    #: (no approvals, no jobs, no other conversation): ``None`` for a full session.
    only_live: str | None = None


class Auth:
    """The console's secrets and sessions; all in memory, gone when the console stops."""

    def __init__(self, *, bearer_user: str) -> None:
        self._secret = secrets.token_bytes(32)
        #: This console's session cookie name: one per console, never shared with another
        #: console on the same host (a browser sends a host's cookies to every port).
        self.cookie_name = f"sk_console_{secrets.token_hex(6)}"
        #: The bearer token for programs (``Authorization: Bearer <token>``).
        self.token = secrets.token_urlsafe(32)
        self._bearer_user = bearer_user
        self._links: dict[str, tuple[str, float, str | None]] = {}
        self._sessions: dict[str, Session] = {}

    # -- one-time links and sessions ---------------------------------------------------
    def issue_link_code(self, user: str, *, only_live: str | None = None) -> str:
        """A code for one sign-in as ``user``; spent on first use, void after 15 minutes.

        ``only_live``: the session it opens sees only that conversation's live view.
        """
        code = secrets.token_urlsafe(24)
        self._links[code] = (user, time.time() + LINK_TTL_S, only_live)
        return code

    def redeem(self, code: str) -> tuple[str, Session] | None:
        """Spend a link code; return ``(session id, session)`` or ``None`` if invalid."""
        entry = self._links.pop(code, None)
        if entry is None or entry[1] < time.time():
            return None
        sid = secrets.token_urlsafe(32)
        session = Session(
            user=entry[0],
            csrf=secrets.token_urlsafe(32),
            expires_at=time.time() + SESSION_TTL_S,
            only_live=entry[2],
        )
        self._sessions[sid] = session
        return sid, session

    def session(self, sid: str | None) -> Session | None:
        """The live session a cookie names, if any."""
        if not sid:
            return None
        session = self._sessions.get(sid)
        if session is None or session.expires_at < time.time():
            self._sessions.pop(sid, None)
            return None
        return session

    def end(self, sid: str | None) -> None:
        """Sign a session out."""
        if sid:
            self._sessions.pop(sid, None)

    def bearer(self, header: str | None) -> Session | None:
        """The bearer client, when ``header`` is ``Bearer <token>`` with the right token."""
        if not header or not header.startswith("Bearer "):
            return None
        if not hmac.compare_digest(header[7:].encode(), self.token.encode()):
            return None
        return Session(user=self._bearer_user, csrf=None, expires_at=float("inf"))

    @staticmethod
    def csrf_ok(session: Session, presented: str | None) -> bool:
        """Whether a form's CSRF token is the session's (the bearer client needs none)."""
        if session.csrf is None:
            return True
        return presented is not None and hmac.compare_digest(
            presented.encode(), session.csrf.encode()
        )

    # -- live-view links ----------------------------------------------------------------
    def sign_live(self, conversation: str, expires_at: int) -> str:
        """The signature of a live-view link for ``conversation`` valid until ``expires_at``."""
        msg = f"live\0{conversation}\0{expires_at}".encode()
        return hmac.new(self._secret, msg, hashlib.sha256).hexdigest()

    def live_ok(self, conversation: str, expires_at: str | None, sig: str | None) -> bool:
        """Whether ``sig`` signs a live view of ``conversation`` that has not expired."""
        if not expires_at or not sig or not expires_at.isdigit():
            return False
        if int(expires_at) < time.time():
            return False
        good = self.sign_live(conversation, int(expires_at))
        return hmac.compare_digest(good.encode(), sig.encode())
