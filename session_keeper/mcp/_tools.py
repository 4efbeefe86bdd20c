"""The MCP tools: Playwright MCP's names and arguments where the meaning is the same,
plus the keeper's own (status, logins, access requests, recording a login).

A tool gets a :class:`ToolContext` (the conversation, its :class:`ConversationPage`,
the keeper for ledger questions) and returns a :class:`ToolOutput`; the server puts
the restart facts in front of it. Bad arguments raise :class:`ToolFailure`, which the
server turns into an ``isError`` result.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from http import HTTPStatus
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

import attrs
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page

from session_keeper._keeper.facade.keeper import SessionKeeper
from session_keeper._keeper.facade.person_sign_ins import PersonSignIns, web_url
from session_keeper._model.borrows import BorrowRequest
from session_keeper._security.credentials import Secret
from session_keeper.mcp._codegen import Expr, secret, wait_seconds, wait_text
from session_keeper.mcp._console_log import ConsoleLogs
from session_keeper.mcp._outputs import OutputDir
from session_keeper.mcp._outputs import link as _link
from session_keeper.mcp._page import SETTLE_MS, ConversationPage, PageState, ToolFailure
from session_keeper.mcp._secrets import redact_text, typed_value
from session_keeper.mcp._uploads import UploadDirs


@attrs.frozen(kw_only=True)
class ToolOutput:
    """What a tool says: text for the model, JSON for programs, maybe an image."""

    text: str
    data: dict[str, Any] = attrs.field(factory=dict)
    image: tuple[bytes, str] | None = None
    is_error: bool = False


class OwnerAsker(Protocol):
    """Asks the login owner's own MCP client about a request; whether it could be asked."""

    def __call__(self, request: BorrowRequest, owner: str) -> bool: ...


class SignInLinks(Protocol):
    """Makes one-time links that open one conversation's live view to a person, on a
    sign-in page of the keeper's at ``url`` (where the conversation's tab is, without
    one): :meth:`session_keeper.console.Console.sign_in_link` is one."""

    def sign_in_link(
        self, conversation: str, *, user: str | None = None, url: str | None = None
    ) -> str: ...


class UrlShower(Protocol):
    """Shows a URL to the person behind the calling client (MCP URL-mode elicitation),
    past the model: whether the person accepted, or ``None`` when it could not be shown."""

    async def __call__(self, message: str, url: str) -> bool | None: ...


@attrs.frozen(kw_only=True)
class ToolContext:
    """Everything a tool may touch for one call of one conversation."""

    conversation: str
    page: ConversationPage
    keeper: SessionKeeper[Page]
    ask_owner: OwnerAsker
    #: Where a person signs in (the console mounted with the server), if anywhere.
    sign_in: SignInLinks | None = None
    #: With no console, on a headed server: the sign-in pages opened in the browser's
    #: window for the person at the machine.
    window_sign_ins: PersonSignIns | None = None
    #: How to show the person a URL without the model, when the client can.
    show_url: UrlShower | None = None
    #: Where files to upload may come from (none: uploads are off).
    uploads: UploadDirs = attrs.field(factory=UploadDirs)
    #: Where ``filename`` arguments save files (``--output-dir``; none: files are off).
    outputs: OutputDir = attrs.field(factory=OutputDir)
    #: Secrets the model may name in typed values (``--secrets``).
    secrets: Mapping[str, Secret] = attrs.field(factory=dict)
    #: How an action's result carries the page's snapshot: ``"inline"``, ``"file"`` (saved
    #: in ``outputs`` and linked, as Playwright MCP does) or ``"none"``.
    action_snapshots: str = "inline"
    #: Whether snapshots carry each element's box unless a call says (``--snapshot-boxes``).
    snapshot_boxes: bool = False
    #: ``"omit"``: screenshots are never attached to results (``--image-responses``).
    image_responses: str = "allow"
    #: The tabs' console logs (``browser_navigate`` starts a tab's next one).
    console_logs: ConsoleLogs | None = None
    #: How long an act's result waits for what the act set off (``--timeout-settle``).
    settle_ms: float = SETTLE_MS


Run = Callable[[ToolContext, Mapping[str, Any]], Awaitable[ToolOutput]]


@attrs.frozen(kw_only=True)
class ToolSpec:
    """One tool: its MCP listing and what runs it."""

    name: str
    title: str
    description: str
    schema: dict[str, Any]
    read_only: bool
    run: Run
    #: While the page waits on a dialog or file chooser: ``"clears"`` a tool answers one
    #: (``clears`` names which), ``"free"`` runs anyway (it does not touch the page's
    #: script), ``"refused"`` is told to answer it first.
    under_modal: Literal["refused", "free", "clears"] = "refused"
    clears: Literal["dialog", "fileChooser"] | None = None


# -- arguments -------------------------------------------------------------------------
def _str(args: Mapping[str, Any], name: str, *, required: bool = False) -> str | None:
    value = args.get(name)
    if value is None:
        if required:
            raise ToolFailure(f"argument {name!r} is required")
        return None
    if not isinstance(value, str) or not value:
        raise ToolFailure(f"argument {name!r} must be a non-empty string")
    return value


def _filename(args: Mapping[str, Any]) -> str | None:
    # As Playwright MCP: an empty filename is no filename (the result is not a named file).
    return None if args.get("filename") == "" else _str(args, "filename")


def _bool(args: Mapping[str, Any], name: str) -> bool:
    value = args.get(name, False)
    if not isinstance(value, bool):
        raise ToolFailure(f"argument {name!r} must be a boolean")
    return value


def _seconds(args: Mapping[str, Any], name: str) -> float | None:
    value = args.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 60:
        raise ToolFailure(f"argument {name!r} must be a number of seconds between 0 and 60")
    return float(value)


def _literal(ctx: ToolContext, text: str) -> str | Expr:
    """``text`` for generated code: a secret's name reads from the environment."""
    return secret(ctx.page.language, text) if text in ctx.secrets else text


def _target(args: Mapping[str, Any]) -> str:
    # Playwright MCP calls the snapshot reference ``target`` (formerly ``ref``).
    ref = _str(args, "target") or _str(args, "ref")
    if ref is None:
        raise ToolFailure("argument 'target' (a ref from browser_snapshot, e.g. 'e3') is required")
    return ref


# -- page tools ---------------------------------------------------------------------------
def _page_text(state: PageState, snapshot: str | None = None) -> str:
    text = f"### Page\n- Page URL: {state.url}"
    if state.title:  # Playwright MCP leaves an empty title out
        text += f"\n- Page Title: {state.title}"
    if state.status and not 200 <= state.status < 300:
        # As Playwright MCP: a page that did not come with success says so.
        text += f"\n- HTTP status: {_status_line(state.status)}"
    if snapshot is not None:
        text += f"\n### Snapshot\n```yaml\n{snapshot}\n```"
    return text


def page_if_changed(ctx: ToolContext, state: PageState) -> str:
    """``### Page`` (on a new line) when the current tab changed since a result last
    showed it, as Playwright MCP shows it after an act without a snapshot; else ``""``."""
    return f"\n{_page_text(state)}" if ctx.page.page_changed(state) else ""


def _page_data(state: PageState) -> dict[str, Any]:
    """What ``### Page`` says, for programs: the URL, the title and, as the text does, a
    document's HTTP status when it did not come with success."""
    data: dict[str, Any] = {"url": state.url, "title": state.title}
    if state.status and not 200 <= state.status < 300:
        data["http_status"] = state.status
    return data


def _status_line(status: int) -> str:
    """``402 Payment Required``: the code and its standard reason phrase, when it has one."""
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return str(status)


async def _with_snapshot(
    ctx: ToolContext,
    *,
    explicit: bool = False,
    settle: bool = True,
    complete: bool = False,
    snapshot: bool = True,
) -> ToolOutput:
    """The page after a tool: its URL and title, and its snapshot as the server's
    ``action_snapshots`` says (an ``explicit`` browser_snapshot is always inline;
    ``snapshot=False``: none, where Playwright MCP shows none).
    ``settle=False`` after a navigation, which waited for the page itself;
    ``complete``: first wait for what an act set off (:meth:`ConversationPage.complete`)."""
    if complete:
        await ctx.page.complete(ctx.settle_ms)
    mode = "inline" if explicit else ctx.action_snapshots if snapshot else "none"
    state, shot = await ctx.page.read(
        settle=settle, snapshot=mode != "none", boxes=ctx.snapshot_boxes
    )
    data = _page_data(state)
    changed = ctx.page.page_changed(state)
    text = _page_text(state)
    if shot is None and not changed:
        text = ""  # as Playwright MCP: no snapshot, and the page is as last shown
    elif shot is not None:
        if mode == "file":
            # A file is an answer too: no secret value is written to it.
            saved = redact_text(shot, ctx.secrets).encode()
            path = ctx.outputs.save(None, saved, prefix="page", ext="yml")
            text += f"\n### Snapshot\n- [Snapshot]({_link(path)})"
            data["snapshot_file"] = str(path)
        else:
            text = _page_text(state, shot)
            data["snapshot"] = shot
    ctx.page.seen()
    if text and len(ctx.page.extra_urls()) > 0:
        # Several tabs: which is current, as Playwright MCP shows it (no round trip for one).
        lines, _listed = await _tab_listing(ctx)
        text = f"### Open tabs\n{lines}\n{text}"
    return ToolOutput(text=text, data=data)


async def navigate(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    url = _str(args, "url", required=True)
    assert url is not None
    if ctx.console_logs is not None:
        # As Playwright MCP: the new document's messages go to a new log.
        ctx.console_logs.restart(await ctx.page.watch())
    await ctx.page.navigate(url)
    ctx.page.act(None, "goto", url)
    return await _with_snapshot(ctx, settle=False)


async def navigate_back(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    await ctx.page.back()
    ctx.page.act(None, "go_back")
    return await _with_snapshot(ctx, settle=False)


def _depth(args: Mapping[str, Any]) -> int | None:
    value = args.get("depth")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise ToolFailure("argument 'depth' must be a whole number")
    if not 0 <= value <= 1000:
        raise ToolFailure("argument 'depth' must be 0 to 1000")
    return int(value)


async def snapshot(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    depth = _depth(args)
    boxes = _bool(args, "boxes") if "boxes" in args else ctx.snapshot_boxes
    target, filename = _str(args, "target"), _filename(args)
    if target is None and filename is None and depth is None and boxes == ctx.snapshot_boxes:
        return await _with_snapshot(ctx, explicit=True)
    if target is not None:
        element = await ctx.page.element(target)
        shot = await element.aria_snapshot(
            refs=True, depth=depth, boxes=boxes, timeout_ms=ctx.page.action_timeout_ms
        )
    else:
        shot = await ctx.page.snapshot(depth=depth, boxes=boxes)
    state = await ctx.page.state()
    ctx.page.seen()
    ctx.page.page_changed(state)  # shown with its snapshot, whatever changed
    data = _page_data(state)
    if filename is None:
        return ToolOutput(text=_page_text(state, shot), data={**data, "snapshot": shot})
    path = ctx.outputs.save(
        filename, redact_text(shot, ctx.secrets).encode(), prefix="page", ext="yml"
    )
    return ToolOutput(
        text=f"{_page_text(state)}\n### Snapshot\n- [Snapshot]({path})",
        data={**data, "snapshot_file": str(path)},
    )


async def type_text(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    text = args.get("text")
    if not isinstance(text, str):
        raise ToolFailure("argument 'text' must be a string")
    ref = _target(args)
    element = await ctx.page.element(ref)
    shown, text = _literal(ctx, text), typed_value(ctx.secrets, text)
    slowly, submit = _bool(args, "slowly"), _bool(args, "submit")
    if slowly:
        await element.type(text, timeout_ms=ctx.page.action_timeout_ms)
        ctx.page.act(ref, "press_sequentially", shown)
    else:
        await element.fill(text, timeout_ms=ctx.page.action_timeout_ms)
        ctx.page.act(ref, "fill", shown)
    if submit:
        await element.press("Enter", timeout_ms=ctx.page.action_timeout_ms)
        ctx.page.act(ref, "press", "Enter")
    # As Playwright MCP: filling a field sets nothing off and shows no snapshot; typing
    # key by key or submitting may, and shows the page after it.
    keyed = slowly or submit
    return await _with_snapshot(ctx, complete=keyed, snapshot=keyed)


async def wait_for(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    seconds = _seconds(args, "time")
    text, gone = _str(args, "text"), _str(args, "textGone")
    if seconds is None and text is None and gone is None:
        raise ToolFailure("give one of 'time', 'text' or 'textGone'")
    tab = await ctx.page.tab()
    # Playwright MCP allows several at once: wait for each in turn.
    for given in ({"seconds": seconds}, {"text": text}, {"text_gone": gone}):
        if next(iter(given.values())) is not None:
            await tab.wait_for(**given, timeout_ms=ctx.page.action_timeout_ms)
    if seconds is not None:
        ctx.page.ran(wait_seconds(ctx.page.language, seconds))
    if text is not None:
        ctx.page.ran(wait_text(ctx.page.language, text, "visible"))
    if gone is not None:
        ctx.page.ran(wait_text(ctx.page.language, gone, "hidden"))
    waited = await _with_snapshot(ctx)
    # As Playwright MCP: what was waited for, first.
    said = f"Waited for {text or gone}" if text or gone else f"Waited for {seconds:g} seconds"
    return attrs.evolve(waited, text=f"### Result\n{said}\n{waited.text}".rstrip("\n"))


async def _tab_listing(ctx: ToolContext) -> tuple[str, list[dict[str, Any]]]:
    """The conversation's tabs as Playwright MCP lists them, and as JSON."""
    tabs = await ctx.page.tabs()
    listed = [
        {"index": i, "current": i == ctx.page.current, "url": t.url, "title": await t.title()}
        for i, t in enumerate(tabs)
    ]
    lines = [
        f"- {t['index']}:{' (current)' if t['current'] else ''} [{t['title']}]({t['url']})"
        for t in listed
    ]
    return "\n".join(lines), listed


async def _tab_list(ctx: ToolContext) -> ToolOutput:
    lines, listed = await _tab_listing(ctx)
    return ToolOutput(text=f"### Result\n{lines}", data={"tabs": listed})


def _index(args: Mapping[str, Any], count: int) -> int | None:
    index = args.get("index")
    if index is None:
        return None
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
        raise ToolFailure(f"argument 'index' must be a tab index from 0 to {count - 1}")
    return index


async def tabs(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    # Only this conversation's tab and its own popups are listed: never another's.
    action = args.get("action", "list")
    if action == "list":
        return await _tab_list(ctx)
    if action == "new":
        url = _str(args, "url")
        opened = await ctx.page.new_tab()
        if url is not None:
            # Through the tab's own navigation: refused off the web and by the Guard.
            await opened.goto(url)
        return await _tab_list(ctx)
    count = len(await ctx.page.tabs())
    index = _index(args, count)
    if action == "select":
        if index is None:
            raise ToolFailure("argument 'index' is required to select a tab")
        ctx.page.current = index
    elif action == "close":
        current = ctx.page.current
        closing = current if index is None else index
        await (await ctx.page.tabs())[closing].close()
        left = len(await ctx.page.tabs())
        # As Playwright MCP: the current tab stays current; closing it makes the tab that
        # took its place (else the last) current.
        kept = current - 1 if closing < current and left < count else current
        ctx.page.current = max(0, min(kept, left - 1))
    else:
        raise ToolFailure("argument 'action' must be 'list', 'new', 'select' or 'close'")
    return await _tab_list(ctx)


async def close(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    for tab in reversed(await ctx.page.tabs()):
        await tab.close()
    ctx.page.current = 0
    return ToolOutput(text="Closed the page.", data={"closed": True})


# -- keeper tools -------------------------------------------------------------------------
def _logins(ctx: ToolContext) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for rec in ctx.keeper.logins():
        read = ctx.keeper.permits(ctx.conversation, rec.site, "read")
        write = ctx.keeper.permits(ctx.conversation, rec.site, "write")
        rows.append(
            {
                "site": rec.site,
                "owner": rec.owner,
                "account": rec.account,
                "recorded_at": rec.recorded_at.isoformat(),
                "needs_revalidation": rec.needs_revalidation,
                "mine": rec.owner == ctx.conversation,
                "may_read": read.outcome,
                "may_write": write.outcome,
                "reason": read.reason if read.outcome != "act" else write.reason,
            }
        )
    return rows


def _login_lines(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "- nobody is signed in anywhere in this browser"
    out = []
    for r in rows:
        who = "you" if r["mine"] else r["owner"]
        may = f"read: {r['may_read']}, write: {r['may_write']}"
        out.append(f"- {r['site']} (signed in by {who}): {may}")
    return "\n".join(out)


async def status(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    keeper = ctx.keeper
    rows = _logins(ctx)
    pending = [
        _request_dict(r) for r in keeper.borrow_requests() if r.conversation == ctx.conversation
    ]
    data = {
        "conversation": ctx.conversation,
        "browser_id": keeper.browser_id,
        "generation": keeper.generation,
        "tab_url": keeper.current_url(ctx.conversation),
        "logins": rows,
        "pending_requests": pending,
    }
    text = (
        f"### Status\n- Conversation: {ctx.conversation}\n- Browser: {keeper.browser_id}"
        f"\n- Tab: {data['tab_url'] or 'none'}\n### Logins\n{_login_lines(rows)}"
    )
    return ToolOutput(text=text, data=data)


async def logins(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    rows = _logins(ctx)
    lost = [{"site": x.name, "owner": x.owner, "cause": x.cause} for x in ctx.keeper.lost_logins()]
    text = "### Logins\n" + _login_lines(rows)
    if lost:
        text += "\n### Lost logins\n" + "\n".join(
            f"- {x['site']} (was {x['owner']}'s; {x['cause']})" for x in lost
        )
    return ToolOutput(text=text, data={"logins": rows, "lost": lost})


def _said(text: str, data: dict[str, Any]) -> ToolOutput:
    """A keeper tool's answer whose words tell the model what to do next: they are in
    ``message`` too, for clients that hand the model only structuredContent (Pydantic AI's
    MCPToolset does when every content block is text)."""
    return ToolOutput(text=text, data={**data, "message": text})


def _request_dict(r: BorrowRequest) -> dict[str, Any]:
    return dict(r.to_dict())


async def request_access(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    site = _str(args, "site", required=True)
    action = _str(args, "action") or "read"
    reason = _str(args, "reason")
    assert site is not None
    keeper = ctx.keeper
    if keeper.permits(ctx.conversation, site, action).allowed:
        return _said(
            f"You may already {action} {site}; no request needed.",
            {"request": None, "allowed": True},
        )
    # Filed, never answered here: this client is the requester, and nobody approves
    # their own borrow. The owner's own client, a person or the application does.
    request = keeper.request_borrow(ctx.conversation, site, action, reason=reason)
    owner = next((r.owner for r in keeper.logins() if r.site == request.site), None)
    asked = (
        owner is not None
        and owner != ctx.conversation
        and request.status == "pending"
        and ctx.ask_owner(request, owner)
    )
    data = {
        "request": _request_dict(request),
        "allowed": request.status == "approved",
        "owner": owner,
        "owner_asked": asked,
    }
    if request.status == "approved":
        text = f"Approved by {request.decided_by}: you may {action} {request.site} once."
    elif request.status == "denied":
        text = f"Denied by {request.decided_by}: do not {action} {request.site}."
    else:
        who = f"the owner ({owner}) or a person" if owner else "a person"
        where = f" {owner}'s MCP client was asked." if asked else ""
        text = (
            f"Request {request.id} is pending: {who} must approve it before you {action} "
            f"{request.site} (in the session-keeper console, or by the application with "
            f"answer_borrow).{where} Check again with browser_status."
        )
    return _said(text, data)


async def record_login(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    site = _str(args, "site", required=True)
    account = _str(args, "account")
    assert site is not None
    rec = await ctx.keeper.record_login(ctx.conversation, site, account=account)
    kept = f"{len(rec.cookies)} cookies"
    if rec.storage:
        kept += f" and {len(rec.storage)} web storage items"
    text = f"Recorded your login to {rec.site} ({kept} fingerprinted)."
    moved = None
    if ctx.window_sign_ins is not None and ctx.keeper.unguarded_sign_in_pages(ctx.conversation):
        # A person signed in on the window's sign-in page: it closes, and the tab shows
        # where they ended.
        not_moved = await ctx.window_sign_ins.finish(ctx.keeper, ctx.conversation)
        moved = not_moved is None
        text += (
            " The sign-in page closed and your tab is on the page they signed in to."
            if moved
            else f" The sign-in page closed; {not_moved}."
        )
    usable = ctx.keeper.permits(ctx.conversation, rec.site, "read").outcome == "act"
    if not usable:
        # Said now, not at the first refused page: the fix is the server's configuration.
        text += (
            f" Note: this conversation ({ctx.conversation}) has no grant for {rec.site}, so "
            "the Guard will refuse its signed-in pages. Whoever runs the server must grant "
            f"it (session-keeper mcp --grant {rec.site}, or ask with browser_request_access)."
        )
    return _said(
        text,
        {
            "site": rec.site,
            "owner": rec.owner,
            "account": rec.account,
            "generation": rec.generation,
            "usable": usable,
            **({} if moved is None else {"tab_moved": moved}),
        },
    )


async def request_sign_in(ctx: ToolContext, args: Mapping[str, Any]) -> ToolOutput:
    site = _str(args, "site", required=True)
    url = _str(args, "url")
    assert site is not None
    if ctx.sign_in is None and ctx.window_sign_ins is None:
        raise ToolFailure(
            "no person can be handed this browser: the server runs without a console. "
            "Whoever runs it can add --console 127.0.0.1:PORT. Do not ask for a password: "
            "a person signs in themselves, in the browser.",
            {"error": "no_console"},
        )
    if url is not None and urlsplit(url).scheme not in ("http", "https"):
        raise ToolFailure(
            "url must be an http or https address (the sign-in page to open)",
            {"error": "invalid_url"},
        )
    if ctx.sign_in is None:
        assert ctx.window_sign_ins is not None
        return await _sign_in_at_the_window(ctx, ctx.window_sign_ins, site, url)
    # What the site set before now is never evidence of this sign-in.
    await ctx.keeper.begin_login(ctx.conversation, site)
    # The person types into a sign-in page of the keeper's at ``url``, never this
    # conversation's tab: no page the model drives, nor one it opened, reads it.
    link = ctx.sign_in.sign_in_link(ctx.conversation, url=url)
    message = (
        f"Sign in to {site} in this browser page (the agent waits; it never sees what "
        "you type). Press Done there when you are signed in."
    )
    data: dict[str, Any] = {"site": site, "conversation": ctx.conversation}
    answer = None if ctx.show_url is None else await ctx.show_url(message, link)
    if answer is False:
        data["shown"] = False
        return _said(f"The person declined to sign in to {site} now. Ask them later.", data)
    if answer:
        data["shown"] = True
        return _said(
            f"The person was shown a one-time link to sign in to {site} on a sign-in "
            "page of its own (you cannot see or reach it). When they press Done the login "
            "is recorded for you and your tab moves to the page they signed in to; call "
            "browser_status to see it.",
            data,
        )
    data.update(shown=False, link=link)
    return _said(
        f"Give the person this one-time link (it opens only this conversation's live "
        f"view, once, for 15 minutes): {link}\nThey sign in to {site} there, on a page "
        "you cannot see or reach, and press Done; the login is then recorded for you and "
        "your tab moves to the page they signed in to. Never ask them for the password. "
        "Call browser_status to see the login.",
        data,
    )


async def _sign_in_at_the_window(
    ctx: ToolContext, sign_ins: PersonSignIns, site: str, url: str | None
) -> ToolOutput:
    """A headed server with no console: a sign-in page in the browser's window, in front,
    for the person at the machine; ``browser_record_login`` closes it."""
    # What the site set before now is never evidence of this sign-in.
    await ctx.keeper.begin_login(ctx.conversation, site)
    start = url or web_url(ctx.keeper.current_url(ctx.conversation))
    if start is None:
        await sign_ins.page(ctx.keeper, ctx.conversation)
    else:
        await sign_ins.goto(ctx.keeper, ctx.conversation, start)
    pages = ctx.keeper.unguarded_sign_in_pages(ctx.conversation)
    if pages:
        with contextlib.suppress(PlaywrightError):
            await pages[0].bring_to_front()
    return _said(
        f"A sign-in page for {site} is open in front in the browser window, for the person "
        "at this machine (you cannot see or reach it). Ask them to sign in there and to "
        "tell you when they are done; never ask for the password. Then call "
        f"browser_record_login for {site}: the login is recorded for you, the sign-in page "
        "closes and your tab moves to the page they signed in to.",
        {"site": site, "conversation": ctx.conversation, "window": True},
    )
