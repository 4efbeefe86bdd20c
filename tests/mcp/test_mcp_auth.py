"""Who may call the MCP server over HTTP, as whom, from where; and who approves a borrow."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import urlsplit

import mcp_types as types
import pytest
from mcp.client.session import ClientRequestContext
from playwright.async_api import Page

from session_keeper import Durability, Grant, Guard, SessionKeeper
from session_keeper._security.audit import AUDIT_EVENT
from session_keeper.mcp import KeeperMCP, TokenFile
from session_keeper.security import AuditLog, Keyring
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeClock, LocalSites
from tests._chaos import record

from ..conftest import BackendFactory
from .conftest import call, raw_post, served_http, sign_in_billing, structured, text, token_http

pytestmark = [pytest.mark.chromium, pytest.mark.chaos, pytest.mark.timeout(180)]

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
        entries = [e.data for e in await store.events(kind=AUDIT_EVENT, limit=100)]
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
