"""The keeper's MCP server: one keeper and one profile, every client a conversation.

Which conversation a call belongs to, first match wins:

1. ``_meta["session-keeper/conversation"]`` on the request (the client names it; works
   in every protocol era and transport);
2. the HTTP header ``Session-Keeper-Conversation`` (set in an HTTP client's config);
3. the MCP session (``Mcp-Session-Id`` of a handshake-era HTTP session, hashed);
4. on stdio, the server's ``default_conversation`` (one client per process).

A 2026-07-28 (session-less) HTTP call that names none is refused with a tool error
saying how to name one. Calls of one conversation run one at a time; calls of
different conversations run concurrently on their own tabs.

Every tool result starts with the conversation's restart facts when there are any: a
text banner first, and ``structuredContent["restart"]``. A call may carry
``_meta["session-keeper/turn"]``: a retry with the same turn id is told the same facts
again (a client that retries a call whose answer it lost loses nothing); a call with
another or no turn id starts a new turn, which does not repeat them.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import uuid
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page

from session_keeper._errors import NavigationBlocked, SessionKeeperError
from session_keeper._facts import TurnFacts
from session_keeper._keeper import SessionKeeper
from session_keeper.mcp._banner import banner, worth_telling
from session_keeper.mcp._catalog import TOOLS
from session_keeper.mcp._page import ConversationPage, ToolFailure
from session_keeper.mcp._tools import Answer, ToolContext, ToolOutput

log = logging.getLogger("session_keeper.mcp")

#: ``_meta`` key naming the conversation of a call.
CONVERSATION_META = "session-keeper/conversation"
#: ``_meta`` key naming the turn of a call (retries of one turn share it).
TURN_META = "session-keeper/turn"
#: HTTP header naming the conversation of every call on that connection.
CONVERSATION_HEADER = "session-keeper-conversation"

_ELICIT_KEY = "session-keeper/access"
_ELICIT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {"type": "boolean", "title": "Allow it once?"},
        "approver": {"type": "string", "title": "Your name (kept in the audit trail)"},
    },
    "required": ["approve"],
}


class _NeedInput(Exception):
    """A 2026-07-28 client must answer an elicitation; the call is retried with it."""

    def __init__(self, requests: dict[str, types.InputRequest]) -> None:
        super().__init__("input required")
        self.requests = requests


class KeeperMCP:
    """An MCP server over ``keeper`` (make its :class:`~session_keeper.Guard` first).

    See the module docstring for conversations, turns and restart facts.

    ``server`` is the official SDK's low-level :class:`mcp.server.Server`; run it with
    :func:`~session_keeper.mcp.serve_stdio` or :func:`~session_keeper.mcp.http_app`.
    """

    def __init__(
        self,
        keeper: SessionKeeper[Page],
        *,
        default_conversation: str = "mcp",
        name: str = "session-keeper",
    ) -> None:
        self.keeper = keeper
        # Each conversation's current tab index (browser_tabs select).
        self._current: dict[str, int] = {}
        self.default_conversation = default_conversation
        self._tools = {t.name: t for t in TOOLS}
        self._locks: dict[str, asyncio.Lock] = {}
        #: Tool calls answered, per conversation (for demos and metrics).
        self.calls: dict[str, int] = {}
        self.server: Server[Any] = Server(
            name,
            instructions=(
                "A browser shared by many conversations. Each result starts with restart "
                "facts when the browser was replaced: read them before acting."
            ),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        # The client echoes requestState: sealed, so it cannot name another turn.
        self.server.middleware.append(
            RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience=name)
        )

    # -- MCP handlers -------------------------------------------------------------------
    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=t.name,
                    title=t.title,
                    description=t.description,
                    input_schema=t.schema,
                    annotations=types.ToolAnnotations(title=t.title, read_only_hint=t.read_only),
                )
                for t in TOOLS
            ]
        )

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        spec = self._tools.get(params.name)
        if spec is None:
            return _result(None, ToolOutput(text=f"unknown tool {params.name!r}", is_error=True))
        meta: Mapping[str, Any] = dict(ctx.meta) if ctx.meta else {}
        try:
            conversation = self._conversation(ctx, meta)
        except ToolFailure as exc:
            return _result(None, ToolOutput(text=str(exc), is_error=True))
        named_turn = meta.get(TURN_META)
        # A turn per call unless the client names one; an input round (2026-07-28
        # elicitation) continues the turn its first round began, via the sealed state.
        turn = (
            named_turn
            if isinstance(named_turn, str) and named_turn
            else params.request_state or f"call-{uuid.uuid4().hex}"
        )
        lock = self._locks.setdefault(conversation, asyncio.Lock())
        async with lock:
            try:
                turn_facts = await self.keeper.ensure(conversation, turn=turn)
            except SessionKeeperError as exc:
                return _result(None, ToolOutput(text=f"{type(exc).__name__}: {exc}", is_error=True))
            page = ConversationPage(
                self.keeper, conversation, current=self._current.get(conversation, 0)
            )

            async def ask(message: str) -> Answer | None:
                return await self._ask(ctx, params, message)

            tool_ctx = ToolContext(
                conversation=conversation, page=page, keeper=self.keeper, ask=ask
            )
            try:
                output = await spec.run(tool_ctx, params.arguments or {})
            except _NeedInput as need:
                # Not told yet: the retry carries this turn back and is told then.
                return types.InputRequiredResult(input_requests=need.requests, request_state=turn)
            except NavigationBlocked as blocked:
                output = self._blocked(conversation, blocked)
            except ToolFailure as exc:
                output = ToolOutput(text=str(exc), data=exc.data, is_error=True)
            except SessionKeeperError as exc:
                output = ToolOutput(
                    text=f"{type(exc).__name__}: {exc}",
                    data={"error": type(exc).__name__},
                    is_error=True,
                )
            except PlaywrightError as exc:
                # The first line is the error; the rest is Playwright's call log.
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else "browser error"
                output = ToolOutput(text=first, data={"error": "browser"}, is_error=True)
            self._current[conversation] = page.current
            self.calls[conversation] = self.calls.get(conversation, 0) + 1
            return _result(turn_facts if worth_telling(turn_facts) else None, output)

    # -- conversation and turn -----------------------------------------------------------
    def _conversation(self, ctx: ServerRequestContext[Any], meta: Mapping[str, Any]) -> str:
        named = meta.get(CONVERSATION_META)
        if named is not None:
            if not isinstance(named, str) or not named:
                raise ToolFailure(f"_meta {CONVERSATION_META!r} must be a non-empty string")
            return named
        headers = getattr(ctx.request, "headers", None)
        if headers is not None:
            header = headers.get(CONVERSATION_HEADER)
            if header:
                return str(header)
            session_id = headers.get("mcp-session-id")
            if session_id:
                # The session id admits its holder to the session: never show it.
                return "mcp-" + hashlib.sha256(session_id.encode()).hexdigest()[:12]
            raise ToolFailure(
                "this call names no conversation: set _meta "
                f"{CONVERSATION_META!r} or the {CONVERSATION_HEADER!r} HTTP header"
            )
        return self.default_conversation

    # -- the Guard said no -----------------------------------------------------------------
    def _blocked(self, conversation: str, blocked: NavigationBlocked) -> ToolOutput:
        record = blocked.block
        site = record.site
        action = record.action or "read"
        owner = next((r.owner for r in self.keeper.logins() if r.site == site), None)
        what = f"the {site} login" if site else record.origin
        owner_text = f" (signed in by {owner})" if owner else ""
        ask = (
            f" To use it, ask: browser_request_access(site={site!r}, action={action!r})."
            if site
            else ""
        )
        text = (
            f"Blocked: this conversation may not {action} {what}{owner_text}. {record.reason}.{ask}"
        )
        data = {"error": "blocked", "block": record.to_data(), "owner": owner}
        return ToolOutput(text=text, data=data, is_error=True)

    # -- asking the person (elicitation) ---------------------------------------------------
    async def _ask(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams, message: str
    ) -> Answer | None:
        caps = ctx.session.client_capabilities
        if caps is None or caps.elicitation is None:
            return None
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            responses = params.input_responses or {}
            response = responses.get(_ELICIT_KEY)
            if response is None:
                request = types.ElicitRequest(
                    params=types.ElicitRequestFormParams(
                        message=message, requested_schema=_ELICIT_SCHEMA
                    )
                )
                raise _NeedInput({_ELICIT_KEY: request})
            if not isinstance(response, types.ElicitResult):
                return None
            return _answer(response)
        result = await ctx.session.elicit_form(
            message=message, requested_schema=_ELICIT_SCHEMA, related_request_id=ctx.request_id
        )
        return _answer(result)


def _answer(result: types.ElicitResult) -> Answer:
    content = result.content or {}
    approve = content.get("approve") is True
    approver = content.get("approver")
    return Answer(
        action=result.action,
        approve=approve,
        approver=approver if isinstance(approver, str) and approver.strip() else None,
    )


def _result(facts: TurnFacts | None, output: ToolOutput) -> types.CallToolResult:
    content: list[types.ContentBlock] = []
    if facts is not None:
        content.append(types.TextContent(type="text", text=banner(facts)))
    content.append(types.TextContent(type="text", text=output.text))
    if output.image is not None:
        data, mime = output.image
        content.append(
            types.ImageContent(type="image", data=base64.b64encode(data).decode(), mime_type=mime)
        )
    structured = {
        "restart": facts.to_dict() if facts is not None else None,
        **output.data,
    }
    return types.CallToolResult(
        content=content, structured_content=structured, is_error=output.is_error
    )
