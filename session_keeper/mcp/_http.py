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
   session id seen on the wire does not lend its owner's conversation.

Refusals are short plain text and never repeat a header's value. The client admitted
is put in the ASGI scope under :data:`CLIENT_SCOPE_KEY` for the tool handlers.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

import attrs

from session_keeper.mcp._tokens import McpClient, TokenFile

#: ASGI scope key of the admitted :class:`McpClient`.
CLIENT_SCOPE_KEY = "session_keeper.mcp.client"

#: The conversation header (lower case, as ASGI carries it).
_CONVERSATION = b"session-keeper-conversation"
_SESSION = b"mcp-session-id"
#: Longest conversation name a header may carry.
MAX_CONVERSATION_HEADER = 200
#: Sessions remembered per server (oldest forgotten first; the SDK bounds sessions too).
_MAX_SESSIONS = 10_000

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


class Door:
    """ASGI middleware enforcing the module's checks in front of ``app``."""

    def __init__(self, app: Any, tokens: TokenFile, policy: DoorPolicy) -> None:
        self._app = app
        self._tokens = tokens
        self._policy = policy
        #: Mcp-Session-Id -> the token id that opened it.
        self._sessions: dict[str, str] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._app(scope, receive, send)
            return
        if scope["type"] != "http":
            return  # no websockets: the connection is closed unanswered
        refused = self._check(scope)
        if isinstance(refused, tuple):
            await _refuse(send, *refused)
            return
        client = refused
        token_id = client.id

        async def bind_session(message: dict[str, Any]) -> None:
            # The response that creates a session names it: bind it to this client.
            if message["type"] == "http.response.start":
                for name, value in message.get("headers", ()):
                    if name.lower() == _SESSION:
                        self._remember(value.decode("latin-1"), token_id)
            await send(message)

        await self._app({**scope, CLIENT_SCOPE_KEY: client}, receive, bind_session)

    def _check(self, scope: Scope) -> McpClient | tuple[int, str, bool]:
        headers: dict[bytes, list[bytes]] = {}
        for name, value in scope.get("headers", ()):
            headers.setdefault(bytes(name).lower(), []).append(bytes(value))
        host = _one(headers, b"host")
        if host is None or host.lower() not in self._policy.allowed_hosts:
            return 421, "this server does not answer to that Host", False
        origin = headers.get(b"origin")
        if origin is not None and (
            len(origin) != 1 or _text(origin[0]) not in self._policy.allowed_origins
        ):
            return 403, "requests from that Origin are refused", False
        client = self._client(headers)
        if client is None:
            return 401, "a valid bearer token is required (Authorization: Bearer ...)", True
        named = headers.get(_CONVERSATION)
        if named is not None:
            conversation = _conversation(named)
            if conversation is None:
                return 400, "malformed Session-Keeper-Conversation header", False
            if conversation not in client.conversations:
                return 403, "this token may not act as that conversation", False
        session = _one(headers, _SESSION)
        if session is not None:
            owner = self._sessions.get(session)
            if owner is not None and owner != client.id:
                return 403, "that MCP session belongs to another client", False
        return client

    def _client(self, headers: dict[bytes, list[bytes]]) -> McpClient | None:
        values = headers.get(b"authorization")
        if values is None or len(values) != 1:
            return None
        scheme, _, token = values[0].partition(b" ")
        if scheme.lower() != b"bearer":
            return None
        text = _text(token.strip())
        return None if text is None else self._tokens.verify(text)

    def _remember(self, session: str, token_id: str) -> None:
        if session in self._sessions:
            return
        if len(self._sessions) >= _MAX_SESSIONS:
            del self._sessions[next(iter(self._sessions))]
        self._sessions[session] = token_id


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
