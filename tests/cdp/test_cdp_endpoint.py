"""CdpBackend endpoints: a malformed URL is refused at construction with InvalidArgument,
and a key carried in the URL (path, query, userinfo) never shows in a repr, an error
message or a log record."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from session_keeper import CdpBackend, LoginSettings, SessionKeeper
from session_keeper.errors import (
    BrowserLaunchError,
    InvalidArgument,
    InvalidArgumentType,
    SessionKeeperError,
)

KEY = bytes(range(32))
CANARY = "CANARYsecret0123456789"


@pytest.mark.parametrize(
    "url",
    [
        "ws://[::1:9222/devtools/browser/x",  # unclosed IPv6 bracket
        "ws://[zz::1]:9222/",  # brackets around something that is not IPv6
        "ws://127.0.0.1:9222/\x00devtools",
        "ws://127.0.0.1:9222/" + "a" * 10_000,
        "ws:///devtools/browser/x",
        "http://:9222/",
        "ws://127.0.0.1:99999/",
        "ws://127.0.0.1:port/",
        "ws://127.0.0.1:0/",
        "ftp://127.0.0.1:9222/",
        "file:///tmp/cdp",
        "127.0.0.1:9222",
        "ws://exa mple:9222/",
        "ws://bad_host!:9222/",
        "",
    ],
)
def test_a_malformed_endpoint_is_refused_at_construction(url: str) -> None:
    """Bad IPv6, NUL, 10 kB, no host, bad port, unknown scheme: InvalidArgument at once."""
    with pytest.raises(InvalidArgument):
        CdpBackend(url)


def test_a_malformed_endpoint_error_never_quotes_its_key() -> None:
    """The refusal of a malformed URL carrying a key does not repeat the key."""
    for url in (
        f"ws://[::1:9222/devtools/browser/{CANARY}",
        f"wss://cloud.example:99999/?apiKey={CANARY}",
        f"wss://user:{CANARY}@/x",
    ):
        with pytest.raises(InvalidArgument) as info:
            CdpBackend(url)
        assert CANARY not in str(info.value)


def test_an_endpoint_that_is_not_a_string_is_a_type_error() -> None:
    """An int or bytes endpoint raises InvalidArgumentType."""
    for bad in (9222, b"ws://127.0.0.1:9222/"):
        with pytest.raises(InvalidArgumentType):
            CdpBackend(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "url",
    [
        f"ws://127.0.0.1:9222/devtools/browser/{CANARY}",
        f"wss://cloud.example/?apiKey={CANARY}",
        f"wss://user:{CANARY}@cloud.example:443/session",
        f"http://[::1]:9222/{CANARY}",
    ],
)
def test_an_endpoints_key_is_redacted_in_its_repr(url: str) -> None:
    """repr() and profile_dir show scheme, host and port, never the key."""
    backend = CdpBackend(url)
    assert CANARY not in repr(backend) and CANARY not in backend.profile_dir
    assert "[redacted]" in repr(backend)


@pytest.fixture
async def echo_404() -> AsyncIterator[int]:
    """A server that answers every request 404, echoing the request line (with its path
    and query) in the body, as many servers do: a key in the URL comes back."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = await reader.readline()
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        body = b"no such endpoint: " + line.strip()
        head = b"HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: %d\r\n\r\n"
        writer.write(head % len(body) + body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]


async def test_a_failed_connect_never_shows_the_endpoints_key(
    echo_404: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Connecting to an endpoint that quotes the URL back: the BrowserLaunchError and
    every log record name the endpoint without its key (path, query or userinfo)."""
    urls = [
        f"ws://127.0.0.1:{echo_404}/devtools/browser/{CANARY}",
        f"http://127.0.0.1:{echo_404}/{CANARY}",
        f"http://127.0.0.1:{echo_404}/?apiKey={CANARY}",
        f"http://user:{CANARY}@127.0.0.1:{echo_404}/",
    ]
    caplog.set_level(logging.DEBUG, logger="session_keeper")
    for url in urls:
        backend = CdpBackend(url, connect_timeout=10)
        async with SessionKeeper(
            backend, login_settings=LoginSettings(fingerprint_key=KEY)
        ) as keeper:
            with pytest.raises(BrowserLaunchError) as info:
                await keeper.ensure("research")
        assert f"127.0.0.1:{echo_404}" in str(info.value)
        assert CANARY not in str(info.value), str(info.value)
    assert not [r for r in caplog.records if CANARY in r.getMessage()]


async def test_a_provider_url_that_is_malformed_is_a_typed_error_without_its_key() -> None:
    """A provider callable returning a malformed URL: a typed error, its key not quoted."""

    async def provider() -> str:
        return f"ws://[::1:9222/devtools/browser/{CANARY}"

    backend = CdpBackend(provider)
    async with SessionKeeper(backend, login_settings=LoginSettings(fingerprint_key=KEY)) as keeper:
        with pytest.raises(SessionKeeperError) as info:
            await keeper.ensure("research")
    assert isinstance(info.value, InvalidArgument | BrowserLaunchError)
    assert CANARY not in str(info.value)
    assert backend.launches == 0
