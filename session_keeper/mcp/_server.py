"""The keeper's MCP server: one keeper and one profile, every client a conversation.

Which conversation a call belongs to:

- over HTTP, the client's bearer token names the conversations it may act as (see
  ``session-keeper mcp token``); ``_meta["session-keeper/conversation"]`` or the
  ``Session-Keeper-Conversation`` header picks one of them, the token's first by
  default. Any other is refused before the keeper is called. An HTTP request that
  did not come through :func:`~session_keeper.mcp.http_app`'s door is refused.
- on stdio (and in-process), the one client is the application's own:
  ``default_conversation`` unless ``_meta`` names another.

Calls of one conversation run one at a time; calls of different conversations run
concurrently on their own tabs.

A borrow (``browser_request_access``) is never approved by the requester's client.
The request is filed pending; when the login's owner conversation has a live
handshake-era MCP session whose client supports elicitation, that client is asked,
and its answer is recorded as the owner's. Otherwise a person answers in the console
or the application calls :meth:`~session_keeper.SessionKeeper.answer_borrow`.

Every tool result starts with the conversation's restart facts when there are any: a
``### Browser restart`` section first, and ``structuredContent["restart"]``. A result
is one text block of ``### `` sections, as Playwright MCP's are; an error's words are
under ``### Error`` (and in ``structuredContent["message"]``). A call may carry
``_meta["session-keeper/turn"]``: a retry with the same turn id is told the same facts
again (a client that retries a call whose answer it lost loses nothing); a call with
another or no turn id starts a new turn, which does not repeat them.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.session import ServerSession
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page

from session_keeper._keeper.facade.keeper import SessionKeeper
from session_keeper._keeper.facade.person_sign_ins import PersonSignIns
from session_keeper._keeper.tabs.page_watch import PageWatches
from session_keeper._model.borrows import BorrowRequest
from session_keeper._model.facts import TurnFacts
from session_keeper._security.credentials import Secret
from session_keeper._util.redact import scrubbing_logger
from session_keeper._util.version import package_version
from session_keeper.errors import (
    BrowserGoneError,
    InvalidArgument,
    InvalidArgumentType,
    NavigationBlocked,
    ProfileInUse,
    SessionKeeperError,
    UsageError,
)
from session_keeper.mcp._banner import worth_telling
from session_keeper.mcp._catalog import TOOLS
from session_keeper.mcp._console_log import ConsoleLogs
from session_keeper.mcp._conversations import ConversationBook, ConversationState
from session_keeper.mcp._http import CLIENT_SCOPE_KEY
from session_keeper.mcp._modal import run_tool
from session_keeper.mcp._outputs import OutputDir
from session_keeper.mcp._page import ACTION_TIMEOUT_MS, SETTLE_MS, ConversationPage, ToolFailure
from session_keeper.mcp._results import result as _result
from session_keeper.mcp._results import with_code as _with_code
from session_keeper.mcp._secrets import checked_secrets as _checked_secrets
from session_keeper.mcp._secrets import redact
from session_keeper.mcp._tokens import McpClient
from session_keeper.mcp._tools import SignInLinks, ToolContext, ToolOutput, ToolSpec, UrlShower
from session_keeper.mcp._uploads import UploadDirs

log = scrubbing_logger("session_keeper.mcp")

#: ``_meta`` key naming the conversation of a call.
CONVERSATION_META = "session-keeper/conversation"
#: ``_meta`` key naming the turn of a call (retries of one turn share it).
TURN_META = "session-keeper/turn"
#: HTTP header naming the conversation of every call on that connection.
CONVERSATION_HEADER = "session-keeper-conversation"

_OWNER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Allow it once?"}},
    "required": ["approve"],
}

#: How long a call that failed on a closed page waits for the keeper to hear the
#: browser's death (a SIGKILL reaches the call before the disconnect event).
BROWSER_DEATH_WAIT_S = 2.0

#: How many conversations ``KeeperMCP.calls`` counts at most.
MAX_COUNTED = 1024

#: How long the owner's client may take to answer before the request stays pending.
OWNER_ASK_TIMEOUT_S = 600.0

#: How an action's result may carry the page's snapshot (see :class:`KeeperMCP`).
ACTION_SNAPSHOTS = ("inline", "file", "none")


class KeeperMCP:
    """An MCP server over ``keeper`` (make its :class:`~session_keeper.Guard` first).

    See the module docstring for conversations, turns and restart facts.

    ``server`` is the official SDK's low-level :class:`mcp.server.Server`; run it with
    :func:`~session_keeper.mcp.serve_stdio` or :func:`~session_keeper.mcp.http_app`.

    ``upload_dirs``: the only directories ``browser_file_upload`` and ``browser_drop`` may
    read files from (resolved, symlinks and ``..`` included, before each check); none by
    default, and then every upload is refused with
    :class:`~session_keeper.errors.UploadRefused`.

    ``secrets`` (Playwright MCP's ``--secrets``): a ``browser_type`` or
    ``browser_fill_form`` value that is exactly one of these names types that secret's
    value instead, and every result shows ``<secret>NAME</secret>`` where a value would
    appear, so the model names a credential without ever seeing it.
    ``action_timeout_ms``: how long an element action waits for its element.
    ``output_dir``: where ``browser_snapshot`` / ``browser_take_screenshot`` save a
    ``filename`` (created if missing; a plain file name only, never through a link);
    with none, ``filename`` is refused and results stay inline.
    ``codegen``: the ``### Ran Playwright code`` section of each page tool's result, in
    ``"typescript"`` (the default, as Playwright MCP writes it) or ``"python"`` (sync
    API, as its ``--codegen python``); ``"none"`` leaves it out.
    ``action_snapshots``: how the result of a tool that acts on the page (navigate, click,
    type, ...) carries the page's snapshot: ``"inline"`` (the default: every client's
    model gets the refs at once, whether or not it can read the server's files),
    ``"file"`` (saved as ``page-<time>.yml`` in ``output_dir``, which is then
    ``./.playwright-mcp`` if not given, and linked, as Playwright MCP does: fewer tokens
    for clients that read local files; screenshots are saved there too)
    or ``"none"`` (no snapshot; the model calls ``browser_snapshot`` when it needs one).
    ``browser_snapshot`` itself always answers inline unless given a ``filename``.
    ``snapshot_boxes`` (Playwright MCP's ``--snapshot-boxes``): every snapshot carries each
    element's ``[box=x,y,w,h]`` unless a ``browser_snapshot`` call says ``boxes``.
    ``image_responses`` (Playwright MCP's ``--image-responses``): ``"allow"`` (the
    default) attaches a screenshot to its result; ``"omit"`` never does (for clients
    that cannot take images: the result links the saved file or describes the shot).
    ``settle_ms`` (Playwright MCP's ``--timeout-settle``, default 500): how long the
    result of an act (click, type, key press, drag, evaluate, a dialog's answer, an
    upload) waits for what the act set off before reading the page, as Playwright MCP
    waits; then for a document it started to load, or the requests it made.
    ``console_level`` (Playwright MCP's ``--console-level``): the least severe console
    message a result's ``### Events`` tells of (``"error"``, ``"warning"``, ``"info"``,
    the default, or ``"debug"``); with an output directory they are logged to
    ``console-<time>.log`` there and the result names the new lines (see
    :mod:`session_keeper.mcp._console_log`).
    """

    def __init__(
        self,
        keeper: SessionKeeper[Page],
        *,
        default_conversation: str = "mcp",
        conversations: Sequence[str] | None = None,
        sign_in: SignInLinks | None = None,
        window_sign_in: bool = False,
        name: str = "session-keeper",
        upload_dirs: Sequence[str | os.PathLike[str]] = (),
        secrets: Mapping[str, Secret] | None = None,
        action_timeout_ms: float | None = None,
        codegen: str = "typescript",
        output_dir: str | os.PathLike[str] | None = None,
        action_snapshots: str = "inline",
        snapshot_boxes: bool = False,
        image_responses: str = "allow",
        console_level: str = "info",
        settle_ms: float | None = None,
    ) -> None:
        if action_snapshots not in ACTION_SNAPSHOTS:
            raise InvalidArgument("action_snapshots is 'inline', 'file' or 'none'")
        self.action_snapshots = action_snapshots
        if not isinstance(snapshot_boxes, bool):
            raise InvalidArgumentType("snapshot_boxes is True or False")
        self.snapshot_boxes = snapshot_boxes
        if image_responses not in ("allow", "omit"):
            raise InvalidArgument("image_responses is 'allow' or 'omit'")
        self.image_responses = image_responses
        if output_dir is None and action_snapshots == "file":
            output_dir = Path.cwd() / ".playwright-mcp"  # Playwright MCP's default place
        #: Where files are saved: ``filename`` arguments, screenshots, ``"file"`` action
        #: snapshots (none: a ``filename`` is refused and results stay inline).
        self.outputs = OutputDir(output_dir)
        if codegen not in ("typescript", "python", "none"):
            raise InvalidArgument("codegen is 'typescript', 'python' or 'none'")
        self.codegen = codegen
        self.keeper = keeper
        self.secrets = _checked_secrets(secrets)
        #: Each tab's console since the model last looked (``### Events``).
        self.console_logs = ConsoleLogs(
            self.outputs,
            level=console_level,
            secrets=self.secrets,
            inline=action_snapshots == "inline",
        )
        if action_timeout_ms is not None and (
            isinstance(action_timeout_ms, bool)
            or not isinstance(action_timeout_ms, int | float)
            or not 0 < action_timeout_ms <= 600_000
        ):
            raise InvalidArgument("action_timeout_ms is 1 to 600000 milliseconds")
        self.action_timeout_ms = (
            ACTION_TIMEOUT_MS if action_timeout_ms is None else float(action_timeout_ms)
        )
        if settle_ms is not None and (
            isinstance(settle_ms, bool)
            or not isinstance(settle_ms, int | float)
            or not 0 <= settle_ms <= 60_000
        ):
            raise InvalidArgument("settle_ms is 0 to 60000 milliseconds")
        self.settle_ms = SETTLE_MS if settle_ms is None else float(settle_ms)
        #: Where a person signs in for ``browser_request_sign_in`` (e.g. a
        #: :class:`~session_keeper.console.Console` over the same keeper).
        self.sign_in = sign_in
        if not isinstance(window_sign_in, bool):
            raise InvalidArgumentType("window_sign_in is True or False")
        #: With no ``sign_in``: a person at the browser's window (a headed server) signs
        #: in on a sign-in page the server opens there, never the model's tab. A console
        #: owns its own sign-in pages: the model's record_login never closes those.
        self.window_sign_ins = PersonSignIns() if window_sign_in and sign_in is None else None
        #: On stdio / in-process: the conversations ``_meta`` may pick (``None``: any,
        #: the embedding application's own choice). HTTP clients' tokens decide there.
        self.conversations = None if conversations is None else tuple(conversations)
        if self.conversations is not None and default_conversation not in self.conversations:
            raise InvalidArgument(
                f"the default conversation {default_conversation!r} must be one of "
                f"conversations {self.conversations!r}"
            )
        #: What each conversation's last call left (its tab, page header, interrupted
        #: action, the sessions its client can be asked on): one record each, dropped
        #: with the last live session that acted as it.
        self.conversation_book = ConversationBook()
        #: What each page the server's calls looked at did (console, requests, dialogs).
        self.page_watches = PageWatches()
        #: Where ``browser_file_upload`` and ``browser_drop`` may read files from.
        self.uploads = UploadDirs(upload_dirs)
        self.default_conversation = default_conversation
        self._tools = {t.name: t for t in TOOLS}
        #: Owner asks in flight, by borrow request id (a retried request asks once).
        self._asking: dict[str, asyncio.Task[None]] = {}
        #: Tool calls answered, per conversation (for demos and metrics; at most
        #: ``MAX_COUNTED`` conversations, the least recently counted dropped first).
        self.calls: dict[str, int] = {}
        self.server: Server[Any] = Server(
            name,
            version=package_version(),
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
    ) -> types.CallToolResult:
        spec = self._tools.get(params.name)
        if spec is None:
            return _result(None, ToolOutput(text=f"unknown tool {params.name!r}", is_error=True))
        meta: Mapping[str, Any] = dict(ctx.meta) if ctx.meta else {}
        try:
            conversation = self._conversation(ctx, meta)
        except ToolFailure as exc:
            return _result(None, ToolOutput(text=str(exc), data=exc.data, is_error=True))
        session_id, asker = _session_of(ctx)
        named_turn = meta.get(TURN_META)
        # A turn per call unless the client names one (a sealed request state, echoed
        # by a client continuing a call, carries the turn it began).
        turn = (
            named_turn
            if isinstance(named_turn, str) and named_turn
            else params.request_state or f"call-{uuid.uuid4().hex}"
        )
        state = self.conversation_book.begin_call(conversation, session_id, asker)
        try:
            async with state.lock:
                return await self._serve_call(
                    ctx, spec, params, conversation, turn, state, session_id
                )
        finally:
            self.conversation_book.end_call(conversation)

    async def _serve_call(
        self,
        ctx: ServerRequestContext[Any],
        spec: ToolSpec,
        params: types.CallToolRequestParams,
        conversation: str,
        turn: str,
        state: ConversationState,
        session_id: str | None,
    ) -> types.CallToolResult:
        """One call of ``conversation``, its record's lock held."""
        try:
            turn_facts = await self.keeper.ensure(conversation, turn=turn)
        except SessionKeeperError as exc:
            return _result(None, _error_output(exc))
        page = ConversationPage(
            self.keeper,
            conversation,
            self.page_watches,
            current=state.current,
            interrupted=state.interrupted,
            shown=state.shown,
            action_timeout_ms=self.action_timeout_ms,
            codegen=self.codegen,
            on_watch=self.console_logs.follow,
        )

        def ask_owner(request: BorrowRequest, owner: str) -> bool:
            return self._ask_owner(request, owner, requester_session=session_id)

        tool_ctx = ToolContext(
            conversation=conversation,
            page=page,
            keeper=self.keeper,
            ask_owner=ask_owner,
            sign_in=self.sign_in,
            window_sign_ins=self.window_sign_ins,
            show_url=_url_shower(ctx),
            uploads=self.uploads,
            secrets=self.secrets,
            outputs=self.outputs,
            action_snapshots=self.action_snapshots,
            snapshot_boxes=self.snapshot_boxes,
            image_responses=self.image_responses,
            console_logs=self.console_logs,
            settle_ms=self.settle_ms,
        )
        try:
            output = await run_tool(spec, tool_ctx, params.arguments or {})
        except NavigationBlocked as blocked:
            output = self._blocked(conversation, blocked)
        except ToolFailure as exc:
            output = ToolOutput(text=str(exc), data=exc.data, is_error=True)
        except (BrowserGoneError, PlaywrightError) as exc:
            gone = await self._browser_went_away(exc)
            if gone:
                # The death is accounted for now: this turn's facts name the restart.
                try:
                    turn_facts = await self.keeper.ensure(conversation, turn=turn)
                except SessionKeeperError as again:
                    return _result(None, _error_output(again))
                output = ToolOutput(
                    text=(
                        f"The browser went away during {params.name}; it was replaced "
                        "(see the restart facts above). What the call did before that "
                        "is unknown: check the page, then call again if needed."
                    ),
                    data={"error": "browser_replaced", "next": "check the page, retry"},
                    is_error=True,
                )
            elif isinstance(exc, SessionKeeperError):
                output = _error_output(exc)
            else:
                # The first line is the error; the rest is Playwright's call log.
                text = str(exc).strip()
                first = text.splitlines()[0] if text else "browser error"
                output = ToolOutput(text=first, data={"error": "browser"}, is_error=True)
        except SessionKeeperError as exc:
            output = _error_output(exc)
        state.current = page.current
        state.interrupted = page.interrupted
        state.shown = page.shown
        self._count(conversation)
        if page.code:
            output = attrs.evolve(output, text=_with_code(output.text, page.code, page.language))
        output = await self._with_events(page, output)
        lost_pages = _pages_lost(state, turn, turn_facts)
        if self.keeper.alive:
            state.extra = page.extra_urls()
        return _result(
            turn_facts if worth_telling(turn_facts) else None,
            redact(output, self.secrets),
            lost_pages=lost_pages,
        )

    async def _with_events(self, page: ConversationPage, output: ToolOutput) -> ToolOutput:
        """``output`` with Playwright MCP's ``### Events`` last: what the current tab's
        console said since its last result (nothing when the browser is gone)."""
        try:
            events = self.console_logs.take(await page.watched())
        except (SessionKeeperError, PlaywrightError):
            return output
        if events is None:
            return output
        return attrs.evolve(
            output,
            text=f"{output.text}\n### Events\n{events}",
            data={**output.data, "events": events},
        )

    def _count(self, conversation: str) -> None:
        """One more call of ``conversation`` answered (at most ``MAX_COUNTED`` counted)."""
        self.calls[conversation] = self.calls.pop(conversation, 0) + 1
        while len(self.calls) > MAX_COUNTED:
            del self.calls[next(iter(self.calls))]

    def session_ended(self, session_id: str) -> None:
        """The HTTP session ``session_id`` ended: what it alone held is forgotten."""
        self.conversation_book.session_ended(session_id)

    async def _browser_went_away(self, exc: Exception) -> bool:
        """Whether ``exc`` came from the browser dying under the call.

        A SIGKILLed Chromium can fail a call a moment before its session hears the
        disconnect, so a closed-target error waits briefly for the keeper to notice.
        """
        if isinstance(exc, BrowserGoneError):
            return True
        if not isinstance(exc, PlaywrightError) or "closed" not in str(exc).lower():
            return False
        loop = asyncio.get_running_loop()
        until = loop.time() + BROWSER_DEATH_WAIT_S
        # A bounded poll of a local flag: the keeper offers no event for "heard a death".
        while self.keeper.alive and loop.time() < until:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        return not self.keeper.alive

    # -- conversation and turn -----------------------------------------------------------
    def _conversation(self, ctx: ServerRequestContext[Any], meta: Mapping[str, Any]) -> str:
        named = meta.get(CONVERSATION_META)
        if named is not None and (not isinstance(named, str) or not named):
            raise ToolFailure(f"_meta {CONVERSATION_META!r} must be a non-empty string")
        headers = getattr(ctx.request, "headers", None)
        if headers is None:
            # stdio or in-process: the one client is the application's own.
            if named is None:
                return self.default_conversation
            if self.conversations is not None and named not in self.conversations:
                raise ToolFailure(
                    "forbidden: this server's client may not act as that conversation "
                    f"(it may act as: {', '.join(self.conversations)}; start the server "
                    "with --conversation NAME for each)",
                    {"error": "forbidden"},
                )
            return named
        scope = getattr(ctx.request, "scope", None) or {}
        client = scope.get(CLIENT_SCOPE_KEY)
        if not isinstance(client, McpClient):
            # Served without the door (a hand-built ASGI app): nobody proved who they are.
            raise ToolFailure(
                "this HTTP call is not authenticated: serve the server with "
                "session_keeper.mcp.http_app (bearer tokens)"
            )
        if named is None:
            # The door already checked a header against the token.
            named = headers.get(CONVERSATION_HEADER) or client.conversations[0]
        if named not in client.conversations:
            raise ToolFailure(
                "forbidden: this client's token may not act as that conversation "
                f"(it may act as: {', '.join(client.conversations)})",
                {"error": "forbidden"},
            )
        return str(named)

    # -- asking the login's owner -------------------------------------------------------
    def _ask_owner(
        self, request: BorrowRequest, owner: str, *, requester_session: str | None
    ) -> bool:
        """Ask ``owner``'s client about ``request`` in the background; whether it is asked.

        Never the requester's own client: a session the requester's calls came on is
        skipped even when it also acted as the owner.
        """
        if request.id in self._asking:
            return True
        state = self.conversation_book.get(owner)
        askable = state.askable if state is not None else {}
        sessions = {sid: s for sid, s in askable.items() if sid != requester_session}
        if not sessions:
            return False
        task = asyncio.create_task(self._owner_answers(request, owner, sessions))
        self._asking[request.id] = task
        task.add_done_callback(lambda _t: self._asking.pop(request.id, None))
        return True

    async def _owner_answers(
        self, request: BorrowRequest, owner: str, sessions: dict[str, ServerSession]
    ) -> None:
        reason = f" ({request.reason})" if request.reason else ""
        message = (
            f"Conversation {request.conversation!r} asks to use your {request.site} login "
            f"once, to {request.action}{reason}. Allow it once?"
        )
        for sid, session in sessions.items():
            try:
                async with asyncio.timeout(OWNER_ASK_TIMEOUT_S):
                    result = await session.elicit_form(
                        message=message, requested_schema=_OWNER_SCHEMA
                    )
            except Exception as exc:
                log.info("owner's MCP session could not be asked: %s", type(exc).__name__)
                self.conversation_book.not_askable(owner, sid)
                continue
            if result.action == "cancel":
                return  # the person put it off: it stays pending for the console
            approve = result.action == "accept" and (result.content or {}).get("approve") is True
            try:
                self.keeper.answer_borrow(
                    request.id, approve=approve, by=owner, approver="owner", uses=1
                )
            except UsageError as exc:
                # Answered in the console meanwhile, expired, or the login changed hands.
                log.info("owner's answer to %s not applied: %s", request.id, exc)
            return

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


#: What to do next, by error class, where the message alone does not say.
_NEXT: dict[type[SessionKeeperError], str] = {
    ProfileInUse: (
        "Another process (perhaps a second MCP client's own server) runs a browser on "
        "this profile. To share one browser among several MCP clients, run one server "
        "with --http and --tokens and point every client at it (session-keeper mcp --help)."
    ),
}


def _pages_lost(state: ConversationState, turn: str, facts: TurnFacts) -> list[str]:
    """The conversation's other pages this turn's restart took (its tab is in the facts
    already); the same list again for a retry of the turn that was told."""
    if not facts.restarted:
        return []
    if state.told_lost is not None and state.told_lost[0] == turn:
        return state.told_lost[1]
    lost, state.extra = state.extra, []
    state.told_lost = (turn, lost)
    return lost


def _session_of(ctx: ServerRequestContext[Any]) -> tuple[str | None, ServerSession | None]:
    """The call's HTTP session id (``None`` on stdio and in-process), and the session's
    handle when its client can be asked (only a handshake-era session has a channel for
    a request of our own)."""
    headers = getattr(ctx.request, "headers", None)
    session_id = headers.get("mcp-session-id") if headers is not None else None
    if not session_id:
        return None, None
    caps = ctx.session.client_capabilities
    askable = (
        caps is not None
        and caps.elicitation is not None
        and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
    )
    return str(session_id), ctx.session if askable else None


def _url_shower(ctx: ServerRequestContext[Any]) -> UrlShower | None:
    """Show a URL to the caller's person by URL-mode elicitation, when its client can."""
    caps = ctx.session.client_capabilities
    if caps is None or caps.elicitation is None or caps.elicitation.url is None:
        return None
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return None  # a session-less client has no channel for the server's own request
    session = ctx.session

    async def show(message: str, url: str) -> bool | None:
        try:
            async with asyncio.timeout(OWNER_ASK_TIMEOUT_S):
                result = await session.elicit_url(
                    message=message, url=url, elicitation_id=f"sign-in-{uuid.uuid4().hex}"
                )
        except Exception as exc:
            log.info("the client could not show the sign-in link: %s", type(exc).__name__)
            return None
        return result.action == "accept"

    return show


def _error_output(exc: SessionKeeperError) -> ToolOutput:
    """A library error as a tool error: its class, its message and what to do next."""
    text = f"{type(exc).__name__}: {exc}"
    data: dict[str, Any] = {"error": type(exc).__name__, "message": str(exc)}
    hint = next((h for cls, h in _NEXT.items() if isinstance(exc, cls)), None)
    if hint is not None:
        text += f"\n{hint}"
        data["next"] = hint
    return ToolOutput(text=text, data=data, is_error=True)
