"""What the MCP server remembers of its conversations is bounded and ends with them: one
record per conversation, dropped with the last HTTP session that acted as it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.session import ClientRequestContext

from session_keeper import SessionKeeper
from session_keeper.mcp import KeeperMCP, TokenFile
from session_keeper.mcp._conversations import ConversationBook
from session_keeper.testing import FakeBackend

from .conftest import call, served_door, structured, token_http

pytestmark = pytest.mark.timeout(180)


async def _never_answers(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult:
    return types.ElicitResult(action="cancel")


async def test_opening_and_closing_many_http_sessions_leaves_nothing_behind(
    tmp_path: Path,
) -> None:
    """Sixty MCP sessions over HTTP (three tokens, ten at a time; clients that can be
    asked), each a call or two as its conversation, then closed: the server remembers no
    conversation and no session, and still serves the next client."""
    keeper: SessionKeeper[Any] = SessionKeeper(FakeBackend())
    tokens = TokenFile(tmp_path / "tokens.json")
    minted = [(c, tokens.add([c])[1]) for c in ("docs", "billing", "support")]
    answered = 0
    async with keeper, served_door(keeper, tokens) as (url, app, door):

        async def one_session(conversation: str, token: str, calls: int) -> None:
            nonlocal answered
            async with token_http(
                url, token, mode="legacy", elicitation_callback=_never_answers
            ) as client:
                for _ in range(calls):
                    result = await call(client, "browser_status")
                    assert structured(result)["conversation"] == conversation
                    answered += 1
                record = app.conversation_book.get(conversation)
                assert record is not None and record.sessions and record.askable

        for round_ in range(6):
            await asyncio.gather(
                *(
                    one_session(minted[i % 3][0], minted[i % 3][1], 1 + (round_ + i) % 2)
                    for i in range(10)
                )
            )
            assert len(app.conversation_book) == 0
            assert app.conversation_book.live_sessions == 0
            assert len(door.sessions) == 0
        assert sum(app.calls.values()) == answered == 90
        async with token_http(url, minted[0][1], mode="legacy") as client:
            assert not (await call(client, "browser_status")).is_error
    assert len(app.conversation_book) == 0


async def test_conversations_without_a_session_are_remembered_up_to_the_bound() -> None:
    """In-process (no session ids) the server keeps what a conversation's last call left
    for its next call, but no more than the book's bound: the least recently used go."""
    keeper: SessionKeeper[Any] = SessionKeeper(FakeBackend())
    app = KeeperMCP(keeper)
    app.conversation_book = ConversationBook(bound=5)
    async with keeper, Client(app.server) as client:
        for n in range(40):
            result = await call(client, "browser_status", conversation=f"c{n}")
            assert not result.is_error
            assert len(app.conversation_book) <= 5
        assert [c for c in (f"c{n}" for n in range(40)) if app.conversation_book.get(c)] == [
            f"c{n}" for n in range(35, 40)
        ]
