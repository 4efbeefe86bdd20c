"""Who may call the MCP server over HTTP, as whom, from where; and who approves a borrow."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import h11
import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientRequestContext
from playwright.async_api import Page

from session_keeper import Durability, Grant, Guard, SessionKeeper
from session_keeper._model.events import AUDIT_ENTRY_KIND
from session_keeper.mcp import KeeperMCP, TokenFile
from session_keeper.mcp._http import Door
from session_keeper.security import AuditLog, Keyring
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock, LocalSites
from tests._chaos import record

from ..conftest import BackendFactory, shared_driver_backend
from .conftest import (
    call,
    raw_post,
    served_door,
    served_http,
    sign_in_billing,
    structured,
    text,
    token_http,
)

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = [
    pytest.mark.chromium,
    pytest.mark.chaos,
    pytest.mark.timeout(180),
]

KEYS = Keyring([("k1", bytes(range(32)))])


@asynccontextmanager
async def keeper_over_http(
    make: BackendFactory, tmp_path: Path, **door: object
) -> AsyncIterator[tuple[str, int, KeeperMCP, TokenFile]]:
    """billing owns billing.example; the keeper served over HTTP with a tokens file."""
    keeper: SessionKeeper[Page] = SessionKeeper(
        make(), grants=[Grant("billing", "billing.example")]
    )
    Guard(keeper)
    tokens = TokenFile(tmp_path / "tokens.json")
    async with keeper, served_http(keeper, tokens, **door) as (url, app):
        yield url, int(urlsplit(url).port or 0), app, tokens


def host(port: int) -> tuple[bytes, bytes]:
    return b"Host", f"127.0.0.1:{port}".encode()


async def test_http_without_a_valid_token_is_401_and_reaches_no_keeper(
    playwright_backend: BackendFactory, tmp_path: Path
) -> None:
    """No, wrong, huge, NUL, non-ASCII or non-bearer credentials: 401, never echoed."""
    async with keeper_over_http(playwright_backend, tmp_path) as (_, port, app, tokens):
        good = tokens.add(["docs"])[1]
        wrong = "skmcp_" + "A" * 43
        presented: list[bytes] = [
            b"Bearer " + wrong.encode(),
            b"Bearer " + good.encode()[:-1],
            b"Bearer " + b"skmcp_" + b"A" * 10_000,
            b"Bearer " + good.encode() + b"\x00",
            b"Bearer " + good.encode()[:-1] + "é".encode(),
            b"Basic " + good.encode(),
            good.encode(),
        ]
        status, _ = await raw_post(port, [host(port)])
        assert status == 401
        for value in presented:
            status, response = await raw_post(port, [host(port), (b"Authorization", value)])
            assert status in (400, 401), (status, value[:40])
            assert value.split(b" ")[-1][:30] not in response
            if status == 401:
                assert b'www-authenticate: bearer realm="session-keeper"' in response.lower()
        assert app.calls == {}
        assert app.keeper.browser_id is None  # no browser was even started
        record("boundary", path="MCP HTTP: no or malformed token", attempts=len(presented) + 1,
               arrived=sum(app.calls.values()))  # fmt: skip
        status, _ = await raw_post(
            port, [host(port), (b"Authorization", b"Bearer " + good.encode())]
        )
        assert status == 200


async def test_a_docs_token_cannot_act_as_billing_by_header_or_meta(
    playwright_backend: BackendFactory, tmp_path: Path
) -> None:
    """The header is 403 (and a malformed one 400); _meta naming billing is a refused call."""
    async with keeper_over_http(playwright_backend, tmp_path) as (url, port, app, tokens):
        docs = tokens.add(["docs"], name="dora")[1]
        auth = (b"Authorization", b"Bearer " + docs.encode())
        status, response = await raw_post(
            port, [host(port), auth, (b"Session-Keeper-Conversation", b"billing")]
        )
        assert status == 403 and docs.encode() not in response
        for bad in (b"bil\x00ling", b"b" * 10_000, "bïlling".encode()):
            status, _ = await raw_post(
                port, [host(port), auth, (b"Session-Keeper-Conversation", bad)]
            )
            assert status == 400, bad[:20]
        async with token_http(url, docs) as client:
            status_docs = await call(client, "browser_status")
            assert structured(status_docs)["conversation"] == "docs"  # the token's first
            forged = await call(client, "browser_status", conversation="billing")
            assert forged.is_error and "forbidden" in text(forged)
            assert structured(forged)["error"] == "forbidden"
        assert app.calls == {"docs": 1}
        assert app.keeper.current_url("billing") is None
        record("boundary", path="MCP HTTP: acting as another conversation (header, _meta)",
               attempts=5, arrived=app.calls.get("billing", 0))  # fmt: skip


async def test_a_foreign_host_or_origin_is_refused_even_with_a_good_token(
    playwright_backend: BackendFactory, tmp_path: Path
) -> None:
    """Host evil.example (DNS rebinding) is 421; any Origin not allowed is 403; named ones pass."""
    async with keeper_over_http(
        playwright_backend, tmp_path, allowed_hosts=["keeper.internal"]
    ) as (_, port, app, tokens):
        auth = (b"Authorization", b"Bearer " + tokens.add(["docs"])[1].encode())
        status, _ = await raw_post(port, [(b"Host", f"evil.example:{port}".encode()), auth])
        assert status == 421
        status, _ = await raw_post(port, [(b"Host", b"127.0.0.1:1"), auth])
        assert status == 421
        for origin in (b"http://evil.example", f"http://127.0.0.1:{port}".encode(), b"null"):
            status, _ = await raw_post(port, [host(port), auth, (b"Origin", origin)])
            assert status == 403, origin
        assert app.calls == {}
        record("boundary", path="MCP HTTP: foreign Host / Origin (DNS rebinding, pages)",
               attempts=5, arrived=sum(app.calls.values()))  # fmt: skip
        named = (b"Host", f"keeper.internal:{port}".encode())
        assert (await raw_post(port, [named, auth]))[0] == 200
        assert (await raw_post(port, [(b"Host", f"localhost:{port}".encode()), auth]))[0] == 200


async def test_a_revoked_token_is_refused_by_the_running_server(
    playwright_backend: BackendFactory, tmp_path: Path
) -> None:
    """token revoke edits the file; the server refuses that token on its next request."""
    async with keeper_over_http(playwright_backend, tmp_path) as (_, port, _app, tokens):
        client, token = tokens.add(["docs"])
        auth = (b"Authorization", b"Bearer " + token.encode())
        assert (await raw_post(port, [host(port), auth]))[0] == 200
        TokenFile(tokens.path).revoke(client.id)
        assert (await raw_post(port, [host(port), auth]))[0] == 401


async def test_nobody_approves_their_own_borrow_the_owners_client_does_and_is_audited(
    playwright_backend: BackendFactory, sites: LocalSites, tmp_path: Path
) -> None:
    """An auto-accepting requester gets pending; billing's own client approves; audit: owner."""
    owner_asked: list[str] = []
    self_asked: list[str] = []

    async def owner(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        owner_asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    async def approves_itself(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self_asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True, "approver": "billing"})

    clock = FakeClock()
    async with SqliteStore(tmp_path / "k.db", clock=clock) as store:
        keeper: SessionKeeper[Page] = SessionKeeper(
            playwright_backend(),
            clock=clock,
            durability=Durability(store=store, audit=AuditLog(store, KEYS, clock=clock)),
            grants=[Grant("billing", "billing.example")],
        )
        Guard(keeper)
        tokens = TokenFile(tmp_path / "tokens.json")
        billing_token, support_token = tokens.add(["billing"])[1], tokens.add(["support"])[1]
        async with (
            keeper,
            served_http(keeper, tokens) as (url, _app),
            token_http(url, billing_token, mode="legacy", elicitation_callback=owner) as billing,
            token_http(
                url, support_token, mode="legacy", elicitation_callback=approves_itself
            ) as support,
        ):
            await sign_in_billing(billing, sites)
            asked = await call(
                support, "browser_request_access", {"site": "billing.example", "reason": "copy"}
            )
            assert structured(asked)["request"]["status"] == "pending", text(asked)
            assert structured(asked)["owner_asked"] is True
            assert "the owner (billing) or a person must approve" in text(asked)
            deadline = time.monotonic() + 30
            while keeper.borrow_requests():
                assert time.monotonic() < deadline, "the owner was never asked"
                await asyncio.sleep(0.05)
            (answered,) = keeper.borrow_requests(status=None)
            assert (answered.status, answered.decided_by, answered.decided_as) == (
                "approved",
                "billing",
                "owner",
            )
            assert self_asked == [] and len(owner_asked) == 1
            record("boundary", path="self-approval of a borrow (auto-accepting requester)",
                   attempts=1, arrived=len(self_asked))  # fmt: skip
            used = await call(
                support, "browser_navigate", {"url": sites.url("billing.example", "/invoices")}
            )
            assert not used.is_error, text(used)
            await keeper.persist()
        entries = [e.data for e in await store.events(kind=AUDIT_ENTRY_KIND, limit=100)]
        (approval,) = [e for e in entries if e["type"] == "borrow_approved"]
        assert approval["body"]["approver"] == "owner"  # type: ignore[index]
        assert approval["body"]["approved_by"] == "billing"  # type: ignore[index]


async def test_an_mcp_session_is_refused_to_another_clients_token(
    playwright_backend: BackendFactory, tmp_path: Path
) -> None:
    """A session id seen on the wire does not let another token ride that session: 403."""
    async with keeper_over_http(playwright_backend, tmp_path) as (_, port, _app, tokens):
        billing = (b"Authorization", b"Bearer " + tokens.add(["billing"])[1].encode())
        docs = (b"Authorization", b"Bearer " + tokens.add(["docs"])[1].encode())
        status, response = await raw_post(port, [host(port), billing])
        assert status == 200
        (line,) = [h for h in response.split(b"\r\n") if h.lower().startswith(b"mcp-session-id:")]
        session = (b"Mcp-Session-Id", line.split(b":", 1)[1].strip())
        assert (await raw_post(port, [host(port), docs, session]))[0] == 403
        assert (await raw_post(port, [host(port), billing, session]))[0] != 403


INITIALIZE = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
    b'"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}'
)
WIRE = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
#: What a later request of a session carries besides its id.
IN_SESSION = {**WIRE, "Mcp-Protocol-Version": "2025-06-18"}


class KeptAlive:
    """One keep-alive HTTP/1.1 connection to ``url``'s server, h11 speaking the protocol.

    The attacker's client of the 10,001-session test: the server sees the same requests as
    from httpx (the same headers, keep-alive connections), and the test spends about a
    quarter less CPU (47 s instead of 59-64 s, Dec 2026), httpx's layers being most of
    what the client cost.
    """

    def __init__(self, url: str) -> None:
        self._url = urlsplit(url)
        self._h11 = h11.Connection(h11.CLIENT)
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def __aenter__(self) -> KeptAlive:
        self._streams = await asyncio.open_connection(self._url.hostname, self._url.port)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._streams is not None
        self._streams[1].close()
        await self._streams[1].wait_closed()

    async def request(
        self, method: str, headers: dict[str, str], body: bytes = b""
    ) -> tuple[int, dict[str, str], bytes]:
        """Send one request to the URL's path; its status, headers (lower-cased) and body."""
        assert self._streams is not None
        reader, writer = self._streams
        sent = [("Host", self._url.netloc), *headers.items(), ("Content-Length", str(len(body)))]
        out = self._h11.send(h11.Request(method=method, target=self._url.path, headers=sent))
        writer.write(out + (self._h11.send(h11.Data(data=body)) if body else b""))
        writer.write(self._h11.send(h11.EndOfMessage()))
        status, got, chunks = 0, {}, []
        while True:
            event = self._h11.next_event()
            if event is h11.NEED_DATA:
                self._h11.receive_data(await asyncio.wait_for(reader.read(65536), 60))
            elif isinstance(event, h11.Response):
                status = event.status_code
                got = {k.decode().lower(): v.decode() for k, v in event.headers}
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                break
            else:
                raise AssertionError(f"the server ended the exchange: {event!r}")
        self._h11.start_next_cycle()
        return status, got, b"".join(chunks)


async def open_and_end_sessions(url: str, token: str, times: int, workers: int = 16) -> int:
    """Open ``times`` MCP sessions with ``token``, each ended by DELETE; how many were."""
    ended = 0
    left = iter(range(times))
    auth = {"Authorization": f"Bearer {token}"}

    async def worker() -> None:
        nonlocal ended
        async with KeptAlive(url) as http:
            for _ in left:
                status, headers, body = await http.request("POST", {**WIRE, **auth}, INITIALIZE)
                assert status == 200, body
                session = {**IN_SESSION, **auth, "Mcp-Session-Id": headers["mcp-session-id"]}
                status, _, body = await http.request("DELETE", session)
                assert status == 200, body
                ended += 1

    await asyncio.gather(*(worker() for _ in range(workers)))
    return ended


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_sessions_a_token_opens_and_ends_never_unbind_another_clients_live_session(
    playwright_backend: BackendFactory, sites: LocalSites, tmp_path: Path
) -> None:
    """support opens and deletes 10,001 sessions, then answers billing's approval prompt and
    calls a tool on billing's live session: refused (403), the borrow stays pending."""
    asked, answered = asyncio.Event(), asyncio.Event()
    victim: set[str] = set()

    async def owner_thinks(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.set()
        await answered.wait()  # the person has not answered yet: the prompt is open
        return types.ElicitResult(action="cancel")

    async def on_the_wire(response: httpx2.Response) -> None:
        if "mcp-session-id" in response.headers:
            victim.add(response.headers["mcp-session-id"])

    keeper: SessionKeeper[Page] = SessionKeeper(
        playwright_backend(), grants=[Grant("billing", "billing.example")]
    )
    Guard(keeper)
    tokens = TokenFile(tmp_path / "tokens.json")
    billing_token = tokens.add(["billing"])[1]
    support_client, support_token = tokens.add(["support"])
    async with (
        keeper,
        served_door(keeper, tokens) as (url, app, door),
        token_http(
            url, billing_token, mode="legacy", elicitation_callback=owner_thinks, seen=on_the_wire
        ) as billing,
        token_http(url, support_token, mode="legacy") as support,
    ):
        await sign_in_billing(billing, sites)
        requested = await call(
            support, "browser_request_access", {"site": "billing.example", "reason": "copy"}
        )
        assert structured(requested)["owner_asked"] is True, text(requested)
        await asyncio.wait_for(asked.wait(), 30)
        (session,) = victim
        billing_calls = app.calls.get("billing", 0)

        assert await open_and_end_sessions(url, support_token, 10_001) == 10_001

        statuses = []
        attacker = {**IN_SESSION, "Authorization": f"Bearer {support_token}"}
        async with httpx2.AsyncClient(headers=attacker, timeout=60) as http:
            for request_id in range(1, 11):  # the server numbers its own requests from 1
                yes = {"action": "accept", "content": {"approve": True}}
                approve = {"jsonrpc": "2.0", "id": request_id, "result": yes}
                sent = await http.post(url, json=approve, headers={"Mcp-Session-Id": session})
                statuses.append(sent.status_code)
            tool = {"jsonrpc": "2.0", "id": 99, "method": "tools/call",
                    "params": {"name": "browser_snapshot", "arguments": {}}}  # fmt: skip
            acted = await http.post(url, json=tool, headers={"Mcp-Session-Id": session})
            statuses.append(acted.status_code)
        # What the keeper did: the borrow is still the owner's to answer, nothing ran.
        (request,) = keeper.borrow_requests(status=None)
        assert (request.status, request.decided_by) == ("pending", None)
        assert app.calls.get("billing", 0) == billing_calls
        assert statuses == [403] * 11, statuses
        assert "belongs to another client" in acted.text
        assert door.refused == {403: 11}
        assert door.sessions.owner(session) not in (None, support_client.id)
        assert door.sessions.live(support_client.id) == 1  # its MCP client's own session
        record("boundary", path="MCP HTTP: another client's session after 10,001 ended sessions",
               attempts=len(statuses), arrived=sum(s != 403 for s in statuses))  # fmt: skip
        answered.set()


async def test_a_token_past_its_live_sessions_is_refused_until_it_ends_one(
    playwright_backend: BackendFactory, tmp_path: Path
) -> None:
    """With 3 sessions per token, docs' fourth is 429 (a clear body); billing is unaffected;
    a DELETE frees a slot; the server's end forgets every session."""
    async with keeper_over_http(playwright_backend, tmp_path, sessions_per_token=3) as (
        url, port, _app, tokens,
    ):  # fmt: skip
        docs, billing = tokens.add(["docs"])[1], tokens.add(["billing"])[1]
        auth = (b"Authorization", b"Bearer " + docs.encode())
        headers = {**WIRE, "Authorization": f"Bearer {docs}"}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            opened = [await http.post(url, content=INITIALIZE) for _ in range(3)]
            assert [r.status_code for r in opened] == [200, 200, 200]
            status, response = await raw_post(port, [host(port), auth])
            assert status == 429 and b"already holds 3 live MCP sessions" in response
            other = (b"Authorization", b"Bearer " + billing.encode())
            assert (await raw_post(port, [host(port), other]))[0] == 200
            first = {**IN_SESSION, "Mcp-Session-Id": opened[0].headers["mcp-session-id"]}
            assert (await http.delete(url, headers=first)).status_code == 200
            assert (await raw_post(port, [host(port), auth]))[0] == 200
            assert (await http.post(url, content=INITIALIZE)).status_code == 429


@pytest.mark.parametrize(
    "written",
    [b'\xff\xfe{"version": 1}', b"[" * 100_000 + b"]" * 100_000, b'{"version": 1, "tokens": [7]}'],
    ids=["not-utf8", "nested-too-deep", "wrong-shape"],
)
async def test_a_server_whose_tokens_file_goes_bad_refuses_every_client_with_503(
    playwright_backend: BackendFactory, tmp_path: Path, written: bytes
) -> None:
    """The file turns unreadable under a running server: every token gets 503 with a clear
    body (never a 500), nothing reaches the keeper; a good file again lets them in."""
    async with served_keeper(playwright_backend, tmp_path) as (url, port, app, door, tokens):
        token = tokens.add(["docs"])[1]
        auth = (b"Authorization", b"Bearer " + token.encode())
        good = tokens.path.read_bytes()
        tokens.path.write_bytes(written)
        answers = [await raw_post(port, [host(port), auth]) for _ in range(3)]
        answers.append(await raw_post(port, [host(port)]))
        assert [status for status, _ in answers] == [503] * 4
        assert all(b"cannot read its tokens file" in body for _, body in answers)
        assert token.encode() not in b"".join(body for _, body in answers)
        assert app.calls == {} and door.refused == {503: 4}
        record("boundary", path="MCP HTTP: tokens file unreadable while serving",
               attempts=len(answers), arrived=sum(app.calls.values()))  # fmt: skip
        tokens.path.write_bytes(good)
        assert (await raw_post(port, [host(port), auth]))[0] == 200
        async with token_http(url, token) as client:
            assert not (await call(client, "browser_status")).is_error


@asynccontextmanager
async def served_keeper(
    make: BackendFactory, tmp_path: Path
) -> AsyncIterator[tuple[str, int, KeeperMCP, Door, TokenFile]]:
    """As :func:`keeper_over_http`, also yielding the door."""
    keeper: SessionKeeper[Page] = SessionKeeper(make())
    Guard(keeper)
    tokens = TokenFile(tmp_path / "tokens.json")
    async with keeper, served_door(keeper, tokens) as (url, app, door):
        yield url, int(urlsplit(url).port or 0), app, door, tokens


async def test_the_sdk_keeps_a_session_to_its_token_even_where_the_door_forgot_it(
    tmp_path: Path,
) -> None:
    """Defence in depth: with the door's entry gone, another token on the session gets the
    SDK's own 404 (the door admits its token as the SDK's user); the opener is served."""
    keeper: SessionKeeper[Any] = SessionKeeper(FakeBackend())
    tokens = TokenFile(tmp_path / "tokens.json")
    opener, other = tokens.add(["docs"])[1], tokens.add(["billing"])[1]
    async with (
        keeper,
        served_door(keeper, tokens) as (url, _app, door),
        httpx2.AsyncClient(headers=WIRE, timeout=60) as http,
    ):
        opened = await http.post(
            url, content=INITIALIZE, headers={"Authorization": f"Bearer {opener}"}
        )
        session = opened.headers["mcp-session-id"]
        door.sessions.ended(session)  # as if the door had lost track of it
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        on_it = {**IN_SESSION, "Mcp-Session-Id": session}
        foreign = await http.post(
            url, json=listing, headers={**on_it, "Authorization": f"Bearer {other}"}
        )
        own = await http.post(
            url, json=listing, headers={**on_it, "Authorization": f"Bearer {opener}"}
        )
    assert (foreign.status_code, "Session not found" in foreign.text) == (404, True)
    assert own.status_code == 200
