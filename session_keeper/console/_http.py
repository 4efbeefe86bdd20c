"""The console's HTTP plumbing: refusals, security headers, uvicorn inside a host process."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope
from starlette.types import Send as ASGISend

__all__ = ["CSP", "EmbeddedServer", "Refused", "SecurityHeaders"]

#: Every page: scripts, styles and connections from the console only; no frames, no forms elsewhere.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


class Refused(Exception):
    """A request the console turns away (status and a message safe to show)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class SecurityHeaders:
    """Pure-ASGI middleware: security headers on every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: ASGISend) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                # A page that set its own (a replayed frame: stricter still) keeps it.
                own = {name.lower() for name, _ in headers}
                headers += [
                    (name, value)
                    for name, value in (
                        (b"content-security-policy", CSP.encode()),
                        (b"x-content-type-options", b"nosniff"),
                        (b"referrer-policy", b"same-origin"),
                        (b"cache-control", b"no-store"),
                        (b"x-frame-options", b"DENY"),
                    )
                    if name not in own
                ]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class EmbeddedServer(uvicorn.Server):
    """uvicorn that leaves the host application's signal handlers alone."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
