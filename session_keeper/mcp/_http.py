"""The door of the MCP server's HTTP face: Host, Origin, bearer token, conversation.

Every request passes, in this order, before the MCP app (and so the keeper) sees it:

1. ``Host`` is one of the allowed hosts, else **421** (a DNS-rebinding page names our
   port under its own host name, whatever address we are bound to);
2. ``Origin``, when sent, is one of the allowed origins (none by default), else **403**
   (a browser page must not drive the keeper's browser);
3. ``Authorization: Bearer <token>`` names a client in the tokens file, else **401**;
4. a ``Session-Keeper-Conversation`` header is well formed (**400**) and one the token
   may act as (**403**);
5. an ``Mcp-Session-Id`` belongs to the client that opened that session (**403**): a
   session id seen on the wire does not lend its owner's conversation;
6. a request that would open a session comes from a token holding fewer than
   ``sessions_per_token`` live sessions (**429**).

A tokens file that cannot be read refuses every request after the Host and Origin
checks (**503**). Refusals are short plain text and never repeat a header's value. The
client admitted is put in the ASGI scope under :data:`CLIENT_SCOPE_KEY` for the tool
handlers, and as the SDK's authenticated user, so the SDK itself binds each session to
the token that opened it for exactly the session's life.

Which token opened which session is remembered as long as the session lives, and no
longer: the entry goes when the session ends (a DELETE the SDK accepted, a request the
SDK answers "Session not found" to, the SDK's idle timeout, the server's shutdown).
Nothing one client does can push out another's entry: there is no shared capacity to
flush, only a bound on each token's own live sessions.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable, Iterable
from typing import Any

import attrs
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import DEFAULT_SESSION_IDLE_TIMEOUT

from session_keeper._util.redact import scrubbing_logger
from session_keeper.errors import TokenFileUnreadable
from session_keeper.mcp._tokens import McpClient, TokenFile

log = scrubbing_logger("session_keeper.mcp")

#: ASGI scope key of the admitted :class:`McpClient`.
CLIENT_SCOPE_KEY = "session_keeper.mcp.client"

#: The conversation header (lower case, as ASGI carries it).
_CONVERSATION = b"session-keeper-conversation"
_SESSION = b"mcp-session-id"
#: Longest conversation name a header may carry.
MAX_CONVERSATION_HEADER = 200
#: Live MCP sessions one token may hold at once (a client usually holds one).
DEFAULT_SESSIONS_PER_TOKEN = 32
#: How long after the SDK's idle timeout a silent session is taken for ended: its
#: deadline starts when its last request ends inside the SDK, a moment before ours.
_IDLE_GRACE_S = 5.0

Send = Any
Receive = Any
Scope = dict[str, Any]


def loopback_hosts(port: int) -> frozenset[str]:
    """The ``Host`` values a loopback bind answers to."""
    return frozenset(f"{h}:{port}" for h in ("127.0.0.1", "localhost", "[::1]"))


def host_value(host: str, port: int) -> str:
    """``host:port`` as a ``Host`` header carries it (IPv6 in brackets), lower case."""
    try:
        if ipaddress.ip_address(host).version == 6:
            host = f"[{host}]"
    except ValueError:
        pass
    return f"{host.lower()}:{port}"


@attrs.frozen(kw_only=True)
class DoorPolicy:
    """Which ``Host`` and ``Origin`` values the server accepts."""

    allowed_hosts: frozenset[str]
    allowed_origins: frozenset[str] = frozenset()


@attrs.frozen
class _Refusal:
    """The door's answer to a request it does not let through."""

    status: int
    text: str
    #: Whether to send ``WWW-Authenticate`` (a missing or wrong token).
    challenge: bool = attrs.field(default=False, kw_only=True)


@attrs.define
class _Session:
    """One live MCP session: who opened it and whether it is in use."""

    token_id: str
    #: Requests of this session the server is serving (an open GET stream counts).
    busy: int = 0
    #: When its last request ended (monotonic seconds).
    idle_since: float = 0.0


class SessionBook:
    """The live MCP sessions of one server and the token that opened each.

    An entry is made when the SDK answers a request with a new session id and lasts
    until that session ends (:meth:`ended`, :meth:`clear`, or the SDK's idle timeout
    passed with no request in flight). Each token holds at most ``per_token`` live
    sessions; a request that would open another is refused rather than any entry
    being forgotten.
    """

    def __init__(
        self,
        *,
        per_token: int,
        idle_timeout: float | None,
        now: Callable[[], float] = time.monotonic,
        on_ended: Callable[[str], None] | None = None,
    ) -> None:
        self.per_token = per_token
        # Told each session that ends, however it ends (the server forgets what it held).
        self._on_ended = on_ended
        self._idle_timeout = idle_timeout
        self._now = now
        self._sessions: dict[str, _Session] = {}
        #: Per token, its opening requests in flight (a slot each until answered).
        self._opening: dict[str, int] = {}

    def __len__(self) -> int:
        self._expire()
        return len(self._sessions)

    def owner(self, session: str) -> str | None:
        """The token id that opened ``session``, or ``None`` if it is not live."""
        self._expire()
        entry = self._sessions.get(session)
        return None if entry is None else entry.token_id

    def live(self, token_id: str) -> int:
        """How many live sessions ``token_id`` holds."""
        self._expire()
        return sum(1 for e in self._sessions.values() if e.token_id == token_id)

    def reserve(self, token_id: str) -> bool:
        """Take a slot for a session ``token_id`` may open; ``False`` at its bound."""
        if self.live(token_id) + self._opening.get(token_id, 0) >= self.per_token:
            return False
        self._opening[token_id] = self._opening.get(token_id, 0) + 1
        return True

    def release(self, token_id: str) -> None:
        """The opening request a slot was taken for was answered."""
        left = self._opening.get(token_id, 0) - 1
        if left > 0:
            self._opening[token_id] = left
        else:
            self._opening.pop(token_id, None)

    def opened(self, session: str, token_id: str) -> None:
        """The SDK opened ``session`` for ``token_id`` (an existing entry stays as is)."""
        self._sessions.setdefault(session, _Session(token_id=token_id, idle_since=self._now()))

    def begin(self, session: str) -> None:
        """A request of ``session`` is being served."""
        entry = self._sessions.get(session)
        if entry is not None:
            entry.busy += 1

    def end(self, session: str) -> None:
        """A request of ``session`` was served."""
        entry = self._sessions.get(session)
        if entry is not None:
            entry.busy = max(0, entry.busy - 1)
            entry.idle_since = self._now()

    def ended(self, session: str) -> None:
        """``session`` ended (deleted, or unknown to the SDK): forget who opened it."""
        if self._sessions.pop(session, None) is not None:
            self._tell_ended(session)

    def clear(self) -> None:
        """The server stopped: every session ended."""
        gone = list(self._sessions)
        self._sessions.clear()
        self._opening.clear()
        for session in gone:
            self._tell_ended(session)

    def _tell_ended(self, session: str) -> None:
        if self._on_ended is not None:
            self._on_ended(session)

    def _expire(self) -> None:
        if self._idle_timeout is None:
            return
        oldest = self._now() - self._idle_timeout - _IDLE_GRACE_S
        gone = [s for s, e in self._sessions.items() if not e.busy and e.idle_since < oldest]
        for session in gone:
            del self._sessions[session]
            self._tell_ended(session)


class Door:
    """ASGI middleware enforcing the module's checks in front of ``app``.

    ``idle_timeout`` is the SDK's session idle timeout (the value ``app`` was built
    with), so a session the SDK reaped silently stops counting against its token.
    """

    def __init__(
        self,
        app: Any,
        tokens: TokenFile,
        policy: DoorPolicy,
        *,
        sessions_per_token: int = DEFAULT_SESSIONS_PER_TOKEN,
        idle_timeout: float | None = DEFAULT_SESSION_IDLE_TIMEOUT,
        on_session_ended: Callable[[str], None] | None = None,
    ) -> None:
        self._app = app
        self._tokens = tokens
        self._policy = policy
        self.sessions = SessionBook(
            per_token=sessions_per_token, idle_timeout=idle_timeout, on_ended=on_session_ended
        )
        #: Refusals answered, by status (what the door did, for tests and metrics).
        self.refused: dict[int, int] = {}
        self._unreadable: str | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            try:
                await self._app(scope, receive, send)
            finally:
                self.sessions.clear()  # the server stopped: so did every session
            return
        if scope["type"] != "http":
            return  # no websockets: the connection is closed unanswered
        checked = self._check(scope)
        if isinstance(checked, _Refusal):
            await self._refuse(send, checked)
            return
        client, session = checked
        if session is None:
            if not self.sessions.reserve(client.id):
                await self._refuse(
                    send,
                    _Refusal(
                        429,
                        f"this token already holds {self.sessions.per_token} live MCP "
                        "sessions: end one (HTTP DELETE with its Mcp-Session-Id) before "
                        "opening another",
                    ),
                )
                return
            await self._open(scope, receive, send, client)
        else:
            await self._serve(scope, receive, send, client, session)

    async def _open(self, scope: Scope, receive: Receive, send: Send, client: McpClient) -> None:
        """Forward a request without a session; bind the session its answer opens."""

        held = True

        async def bind_session(message: dict[str, Any]) -> None:
            nonlocal held
            # The answer that opens a session names it; the SDK keeps it only if it is
            # a success. The slot becomes the session (or nothing) as the answer starts,
            # not when the request's task ends a moment after the client read it.
            if message["type"] == "http.response.start" and held:
                if message["status"] < 400:
                    for name, value in message.get("headers", ()):
                        if name.lower() == _SESSION:
                            self.sessions.opened(value.decode("latin-1"), client.id)
                self.sessions.release(client.id)
                held = False
            await send(message)

        try:
            await self._app(_admitted(scope, client), receive, bind_session)
        finally:
            if held:
                self.sessions.release(client.id)

    async def _serve(
        self, scope: Scope, receive: Receive, send: Send, client: McpClient, session: str
    ) -> None:
        """Forward a request of ``session``; forget the session when it is seen to end."""
        deleting = scope.get("method") == "DELETE"

        async def watch(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status = message["status"]
                # 404 is the SDK's "Session not found" (ended, expired or crashed); a
                # DELETE it accepted ended the session. Said as the answer starts: the
                # client may open another session before this request's task ends.
                if status == 404 or (deleting and status < 400):
                    self.sessions.ended(session)
            await send(message)

        self.sessions.begin(session)
        try:
            await self._app(_admitted(scope, client), receive, watch)
        finally:
            self.sessions.end(session)

    def _check(self, scope: Scope) -> tuple[McpClient, str | None] | _Refusal:
        headers: dict[bytes, list[bytes]] = {}
        for name, value in scope.get("headers", ()):
            headers.setdefault(bytes(name).lower(), []).append(bytes(value))
        host = _one(headers, b"host")
        if host is None or host.lower() not in self._policy.allowed_hosts:
            return _Refusal(421, "this server does not answer to that Host")
        origin = headers.get(b"origin")
        if origin is not None and (
            len(origin) != 1 or _text(origin[0]) not in self._policy.allowed_origins
        ):
            return _Refusal(403, "requests from that Origin are refused")
        try:
            self._tokens.clients()
        except TokenFileUnreadable as exc:
            self._say_unreadable(str(exc))
            return _Refusal(
                503,
                "this server cannot read its tokens file, so it refuses every client "
                "until its operator fixes the file",
            )
        self._unreadable = None
        client = self._client(headers)
        if client is None:
            return _Refusal(
                401, "a valid bearer token is required (Authorization: Bearer ...)", challenge=True
            )
        named = headers.get(_CONVERSATION)
        if named is not None:
            conversation = _conversation(named)
            if conversation is None:
                return _Refusal(400, "malformed Session-Keeper-Conversation header")
            if conversation not in client.conversations:
                return _Refusal(403, "this token may not act as that conversation")
        session = _one(headers, _SESSION)
        if session is None and _SESSION in headers:
            return _Refusal(400, "malformed Mcp-Session-Id header")
        if session is not None:
            owner = self.sessions.owner(session)
            if owner is not None and owner != client.id:
                return _Refusal(403, "that MCP session belongs to another client")
        return client, session

    def _client(self, headers: dict[bytes, list[bytes]]) -> McpClient | None:
        values = headers.get(b"authorization")
        if values is None or len(values) != 1:
            return None
        scheme, _, token = values[0].partition(b" ")
        if scheme.lower() != b"bearer":
            return None
        text = _text(token.strip())
        return None if text is None else self._tokens.verify(text)

    def _say_unreadable(self, why: str) -> None:
        # Once per distinct problem, not once per request.
        if why != self._unreadable:
            log.error("MCP tokens file unusable, refusing every client: %s", why)
            self._unreadable = why

    async def _refuse(self, send: Send, refusal: _Refusal) -> None:
        self.refused[refusal.status] = self.refused.get(refusal.status, 0) + 1
        await _refuse(send, refusal.status, refusal.text, refusal.challenge)


def _admitted(scope: Scope, client: McpClient) -> Scope:
    """``scope`` carrying ``client``: for the tool handlers, and as the SDK's
    authenticated user (the SDK then refuses the session to any other token)."""
    # The token itself is never put here: its id names the principal.
    access = AccessToken(token=client.id, client_id=client.id, scopes=[])
    return {**scope, CLIENT_SCOPE_KEY: client, "user": AuthenticatedUser(access)}


def _text(value: bytes) -> str | None:
    """Printable ASCII, or ``None``: a header is never decoded into something else."""
    if not value or len(value) > 4096 or not all(0x20 < b < 0x7F for b in value):
        return None
    return value.decode("ascii")


def _one(headers: dict[bytes, list[bytes]], name: bytes) -> str | None:
    values = headers.get(name)
    if values is None or len(values) != 1:
        return None
    return _text(values[0])


def _conversation(values: Iterable[bytes]) -> str | None:
    values = list(values)
    if len(values) != 1:
        return None
    value = values[0].strip()
    # Spaces are allowed inside a name; control and non-ASCII bytes are not.
    if not value or len(value) > MAX_CONVERSATION_HEADER:
        return None
    if not all(0x20 <= b < 0x7F for b in value):
        return None
    return value.decode("ascii")


async def _refuse(send: Send, status: int, text: str, challenge: bool) -> None:
    body = (text + "\n").encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
    ]
    if challenge:
        headers.append((b"www-authenticate", b'Bearer realm="session-keeper"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
