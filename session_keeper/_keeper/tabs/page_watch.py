"""What one conversation's page did that an agent may ask about, and what it waits on.

:meth:`PageWatches.watch` attaches a :class:`PageWatch` to a :class:`ConversationTab`'s
page (once per page and book; the MCP server holds one book): its console messages and
page errors, its network requests with the Guard's verdict on each, and the *modal
state* it is in — a JavaScript dialog or a file chooser waiting for an answer. Only that
page's own events are seen: another conversation's pages have their own watch, or none.

What a request shows is redacted here, before any tool sees it: query values,
fragments and user-info are cut from URLs; cookie, authorization and token-like header
values are replaced; request bodies are never kept (a sign-in form posts the password).

Watching a page's dialogs means Playwright no longer dismisses them by itself: a dialog
waits for :meth:`PageWatch.answer_dialog`, and a caller racing an action against
:attr:`PageWatch.modal_changed` is never left hanging on it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import re
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal
from urllib.parse import SplitResult, parse_qsl, urlsplit

import attrs
from playwright.async_api import Error as PlaywrightError

from session_keeper._keeper.guard_link.navigation_guard import guard_of
from session_keeper._keeper.tabs.conversation_tab import ConversationTab, before_act, raw_page
from session_keeper._leaf.blocks import BlockRecord
from session_keeper.errors import InvalidArgument, UsageError

__all__ = [
    "CONSOLE_KEPT",
    "REDACTED",
    "REQUESTS_KEPT",
    "ConsoleEntry",
    "ModalState",
    "PageWatch",
    "PageWatches",
    "SeenRequest",
    "redact_headers",
    "redact_url",
]

#: How many console messages (and page errors) a page keeps; older ones are dropped.
CONSOLE_KEPT = 500
#: How many requests a page keeps; older ones are dropped (their numbers are not reused).
REQUESTS_KEPT = 500
#: How long reading a response body may take (seconds).
BODY_WAIT_S = 2.0
#: What a redacted value reads as.
REDACTED = "<redacted>"

ConsoleLevel = Literal["error", "warning", "info", "debug"]
_LEVELS: tuple[ConsoleLevel, ...] = ("error", "warning", "info", "debug")
# Playwright MCP's mapping of console message types to levels.
_TYPE_LEVEL: dict[str, ConsoleLevel] = {
    "assert": "error",
    "error": "error",
    "warning": "warning",
    **{t: "debug" for t in ("clear", "debug", "endGroup", "profile", "profileEnd")},
    **{t: "debug" for t in ("startGroup", "startGroupCollapsed", "trace")},
}
#: Header names whose values carry credentials (and the headers that echo a URL).
_SECRET_HEADER = re.compile(
    r"cookie|authori[sz]ation|token|secret|session|password|passwd|api[-_]?key|csrf|xsrf"
    r"|signature|credential|^x-amz-security|^proxy-auth",
    re.IGNORECASE,
)
_URL_HEADERS = frozenset({"referer", "location", "content-location", "origin"})


@attrs.frozen(kw_only=True)
class ConsoleEntry:
    """One console message or uncaught page error of the page."""

    #: The console API's type (``log``, ``error``, ``warning``…; ``pageerror`` for an
    #: uncaught exception).
    type: str
    level: ConsoleLevel
    text: str
    #: Where it was logged from (redacted like a request URL) and its line.
    url: str
    line: int
    #: Which document of the page it came from (0: the first one watched).
    navigation: int
    #: When it was logged (milliseconds since the epoch, the browser's clock).
    at: float = 0.0

    def render(self) -> str:
        """The line Playwright MCP prints for it."""
        if self.type == "pageerror":
            return self.text
        return f"[{self.type.upper()}] {self.text} @ {self.url}:{self.line}"


@attrs.frozen(kw_only=True)
class SeenRequest:
    """A request of the page as a tool may show it (redacted; see the module)."""

    #: 1-based, stable for the page's life.
    number: int
    method: str
    url: str
    resource_type: str
    status: int | None
    status_text: str
    failure: str | None
    #: The Guard's record when it refused this request (its rule and reason).
    blocked: BlockRecord | None
    request_headers: tuple[tuple[str, str], ...]
    response_headers: tuple[tuple[str, str], ...]
    has_body: bool

    @property
    def is_fetch(self) -> bool:
        """Whether the page's script asked for it (``fetch``/XHR)."""
        return self.resource_type in ("fetch", "xhr")

    @property
    def succeeded(self) -> bool:
        """Answered below 400 and not refused."""
        return self.blocked is None and self.status is not None and self.status < 400


@attrs.frozen(kw_only=True)
class ModalState:
    """A dialog or file chooser the page waits on; only the tool named can answer it."""

    kind: Literal["dialog", "fileChooser"]
    description: str
    #: The dialog's type (``alert``, ``confirm``, ``prompt``, ``beforeunload``), if one.
    dialog_type: str | None = None


_CHOOSER = ModalState(kind="fileChooser", description="File chooser")


class _Request:
    """A request being watched: the Playwright request and what the Guard said."""

    __slots__ = ("blocked", "mark", "number", "request")

    def __init__(self, number: int, request: Any, mark: int) -> None:
        self.number = number
        self.request = request
        self.mark = mark
        self.blocked: BlockRecord | None = None


class PageWatch:
    """The events of one page of one conversation (see the module docstring)."""

    def __init__(self, tab: ConversationTab) -> None:
        self.conversation = tab.conversation
        self._tab = tab
        self._keeper = tab._keeper
        self._page = raw_page(tab)
        self._console: collections.deque[ConsoleEntry] = collections.deque(maxlen=CONSOLE_KEPT)
        self._console_listeners: list[Callable[[ConsoleEntry], None]] = []
        self._requests: collections.OrderedDict[Any, _Request] = collections.OrderedDict()
        self._numbers = itertools.count(1)
        self._last_number = 0
        self._navigation = 0
        self._claimed: set[int] = set()
        self._modal: list[tuple[ModalState, Any]] = []
        #: Set whenever a modal state appears (a caller clears it before racing).
        self.modal_changed = asyncio.Event()
        page = self._page
        page.on("console", self._on_console)
        page.on("pageerror", self._on_page_error)
        page.on("framenavigated", self._on_navigated)
        page.on("request", self._on_request)
        page.on("response", self._on_answered)
        page.on("requestfailed", self._on_failed)
        page.on("dialog", self._on_dialog)
        page.on("dialogclosed", self._on_dialog_closed)
        page.on("filechooser", self._on_file_chooser)

    # -- console -----------------------------------------------------------------------
    def on_console(self, listener: Callable[[ConsoleEntry], None]) -> None:
        """Call ``listener`` with each console message or page error from now on, as it
        arrives (in order; a listener must not raise)."""
        self._console_listeners.append(listener)

    def _add(self, entry: ConsoleEntry) -> None:
        self._console.append(entry)
        for listener in self._console_listeners:
            listener(entry)

    def _on_console(self, message: Any) -> None:
        location = message.location or {}
        stamp = getattr(message, "timestamp", None)
        self._add(
            ConsoleEntry(
                type=str(message.type),
                level=_TYPE_LEVEL.get(str(message.type), "info"),
                text=str(message.text),
                url=redact_url(str(location.get("url", ""))),
                line=int(location.get("lineNumber", 0)),
                navigation=self._navigation,
                at=float(stamp) if isinstance(stamp, int | float) else time.time() * 1000,
            )
        )

    def _on_page_error(self, error: Any) -> None:
        text = getattr(error, "stack", None) or str(error)
        self._add(
            ConsoleEntry(
                type="pageerror",
                level="error",
                text=str(text),
                url="",
                line=0,
                navigation=self._navigation,
                at=time.time() * 1000,
            )
        )

    def _on_navigated(self, frame: Any) -> None:
        if frame.parent_frame is None:
            self._navigation += 1

    def console(self, level: ConsoleLevel = "info", *, all: bool = False) -> list[ConsoleEntry]:
        """Messages at ``level`` or more severe, of the current document (``all``: of
        every document since the page was first watched, as far as they are kept)."""
        if level not in _LEVELS:
            raise InvalidArgument(f"level must be one of {', '.join(_LEVELS)}")
        rank = _LEVELS.index(level)
        return [
            m
            for m in self._console
            if _LEVELS.index(m.level) <= rank and (all or m.navigation == self._navigation)
        ]

    def console_counts(self, *, all: bool = False) -> tuple[int, int, int]:
        """(total, errors, warnings) among the kept messages (of the current document)."""
        shown = self.console("debug", all=all)
        errors = sum(1 for m in shown if m.level == "error")
        warnings = sum(1 for m in shown if m.level == "warning")
        return len(shown), errors, warnings

    # -- network -----------------------------------------------------------------------
    def _on_request(self, request: Any) -> None:
        guard = guard_of(self._keeper)
        mark = 0 if guard is None else len(guard.blocks)
        self._last_number = next(self._numbers)
        self._requests[request] = _Request(self._last_number, request, mark)
        while len(self._requests) > REQUESTS_KEPT:
            self._requests.popitem(last=False)

    def _on_answered(self, response: Any) -> None:
        # The Guard answers a refusal with a local 403; its record is written first.
        if response.status == 403:
            self._claim(response.request)

    def _on_failed(self, request: Any) -> None:
        # ... or aborts it when the tab keeps its document.
        self._claim(request)

    def _claim(self, request: Any) -> None:
        entry = self._requests.get(request)
        guard = guard_of(self._keeper)
        if entry is None or guard is None:
            return
        parts = urlsplit(str(request.url))
        host = (parts.hostname or "").lower()
        port = f":{parts.port}" if parts.port is not None else ""
        origin, path = f"{parts.scheme.lower()}://{host}{port}", parts.path or "/"
        blocks = guard.blocks
        for i in range(entry.mark, len(blocks)):
            block = blocks[i]
            if (
                i not in self._claimed
                and block.conversation == self.conversation
                and block.method.upper() == str(request.method).upper()
                and block.origin == origin
                and block.path == path
            ):
                self._claimed.add(i)
                entry.blocked = block
                return

    @property
    def last_request(self) -> int:
        """The number of the page's latest request (0: none yet)."""
        return self._last_number

    async def requests_done(
        self, after: int, *, timeout_s: float = 5.0
    ) -> Literal["none", "navigated", "answered"]:
        """Wait, as Playwright MCP does after an act, for the requests the page made
        after request ``after``: ``"navigated"`` at once when one of them loads a new
        document in the page (the caller waits for its load); else each answered (a
        document, style, script or fetch read to its end) or ``timeout_s`` passed, and
        ``"answered"``; ``"none"`` when there were none. Never raises for a request."""
        made = [e.request for e in self._requests.values() if e.number > after]
        if not made:
            return "none"
        main = self._page.main_frame
        if any(_is_navigation(r) and _frame_of(r) is main for r in made):
            return "navigated"
        waits = [asyncio.ensure_future(_answered(r)) for r in made]
        try:
            await asyncio.wait(waits, timeout=timeout_s)
        finally:
            for wait in waits:
                wait.cancel()
        return "answered"

    def requests(self) -> list[SeenRequest]:
        """The page's kept requests, oldest first (redacted)."""
        return [self._seen(entry) for entry in self._requests.values()]

    def _entry(self, number: int) -> _Request:
        entry = next((e for e in self._requests.values() if e.number == number), None)
        if entry is None:
            raise InvalidArgument(f"request #{number} is not kept for this page")
        return entry

    async def request(self, number: int) -> SeenRequest:
        """Request ``number`` with every header the browser sent and received (cookies
        included, redacted like the rest)."""
        entry = self._entry(number)
        seen = self._seen(entry)
        response = _existing_response(entry.request)
        try:
            sent = await asyncio.wait_for(entry.request.all_headers(), BODY_WAIT_S)
            got = (
                None
                if response is None
                else await asyncio.wait_for(response.all_headers(), BODY_WAIT_S)
            )
        except (PlaywrightError, TimeoutError):
            return seen  # what the request event carried is all there is
        return attrs.evolve(
            seen,
            request_headers=redact_headers(sent),
            response_headers=seen.response_headers if got is None else redact_headers(got),
        )

    def _seen(self, entry: _Request) -> SeenRequest:
        request = entry.request
        response = _existing_response(request)
        failure = request.failure
        return SeenRequest(
            number=entry.number,
            method=str(request.method).upper(),
            url=redact_url(str(request.url)),
            resource_type=str(request.resource_type),
            status=None if response is None else int(response.status),
            status_text="" if response is None else str(response.status_text),
            failure=None if failure is None else str(failure),
            blocked=entry.blocked,
            request_headers=redact_headers(request.headers),
            response_headers=() if response is None else redact_headers(response.headers),
            has_body=request.post_data_buffer is not None,
        )

    async def response_text(self, number: int, *, limit: int) -> str | None:
        """The textual body of request ``number``'s response, cut at ``limit`` characters
        (``None`` when it has none, or it is not text)."""
        response = _existing_response(self._entry(number).request)
        if response is None or response.status in (204, 304) or response.status < 200:
            return None
        kind = str(response.headers.get("content-type", "")).split(";")[0].strip().lower()
        if not (kind.startswith("text/") or kind.endswith(("json", "xml", "javascript"))):
            return None
        try:
            # Bounded: a body the browser cannot hand over must not hold the call.
            body = str(await asyncio.wait_for(response.text(), BODY_WAIT_S))
        except (PlaywrightError, TimeoutError):
            return None  # the browser no longer holds it, or never hands it over
        return body if len(body) <= limit else body[:limit] + " …(cut)"

    # -- modal states --------------------------------------------------------------------
    def _on_dialog(self, dialog: Any) -> None:
        kind = str(dialog.type)
        state = ModalState(
            kind="dialog",
            description=f'"{kind}" dialog with message "{dialog.message}"',
            dialog_type=kind,
        )
        self._modal.append((state, dialog))
        self.modal_changed.set()

    def _on_dialog_closed(self, dialog: Any) -> None:
        # Answered by someone else (a person at a headed browser, another CDP client):
        # the page no longer waits on it, so no tool may be refused for it.
        self._modal = [(state, held) for state, held in self._modal if held is not dialog]

    def _on_file_chooser(self, chooser: Any) -> None:
        self._modal.append((_CHOOSER, chooser))
        self.modal_changed.set()

    def modal_states(self) -> list[ModalState]:
        """What the page waits on now, oldest first (none once the page closed)."""
        if self._page.is_closed():
            self._modal.clear()
        return [state for state, _ in self._modal]

    def _take(self, kind: str) -> Any:
        found = next((m for m in self._modal if m[0].kind == kind), None)
        if found is None or self._page.is_closed():
            raise UsageError(f"no {'dialog' if kind == 'dialog' else 'file chooser'} is open")
        self._modal.remove(found)
        return found[1]

    async def answer_dialog(self, *, accept: bool, prompt_text: str | None = None) -> None:
        """Accept (with ``prompt_text`` for a prompt) or dismiss the oldest open dialog."""
        dialog = self._take("dialog")
        await before_act(self._tab)  # the page's script goes on with the answer: an act
        with contextlib.suppress(PlaywrightError):  # closed with its page meanwhile
            if accept:
                await dialog.accept(prompt_text)
            else:
                await dialog.dismiss()

    async def choose_files(self, files: Sequence[Mapping[str, Any]] | None) -> None:
        """Give the open file chooser ``files`` (payloads: name, mimeType, buffer), or
        cancel it (``None``). The caller decides which local files may be read."""
        chooser = self._take("fileChooser")
        if files is not None:
            await before_act(self._tab)
            try:
                await chooser.set_files(list(files))
            except PlaywrightError:
                # Still open: the caller may try other files.
                self._modal.insert(0, (_CHOOSER, chooser))
                raise

    async def emulate_media(self, **features: str) -> None:
        """Playwright's ``page.emulate_media`` for this page only (``"null"`` clears one)."""
        await self._page.emulate_media(**features)


def _is_navigation(request: Any) -> bool:
    try:
        return bool(request.is_navigation_request())
    except PlaywrightError:
        return False


def _frame_of(request: Any) -> Any:
    try:
        return request.frame
    except PlaywrightError:  # a service worker's request has no frame
        return None


async def _answered(request: Any) -> None:
    """Until ``request`` is answered (and, for what a page is built from, read to its
    end); quietly when it fails or its page goes."""
    with contextlib.suppress(PlaywrightError):
        response = await request.response()
        if response is not None and request.resource_type in _READ_TO_END:
            await response.finished()


#: What Playwright MCP waits to be read to its end after an act, not only answered.
_READ_TO_END = frozenset({"document", "stylesheet", "script", "xhr", "fetch"})


def _existing_response(request: Any) -> Any:
    # A response already received (no round trip, never waits for one).
    return request.existing_response


def redact_url(url: str) -> str:
    """``url`` without user-info, fragment or query values (names are kept)."""
    if not url or url.startswith(("data:", "blob:")):
        return url.split(",", 1)[0] + ("," + REDACTED if "," in url else "")
    try:
        parts = urlsplit(url)
    except ValueError:
        return REDACTED
    netloc = parts.hostname or ""
    if parts.port is not None:
        netloc += f":{parts.port}"
    query = "&".join(
        f"{name}={REDACTED}" for name, _ in parse_qsl(parts.query, keep_blank_values=True)
    )
    return SplitResult(parts.scheme, netloc, parts.path, query, "").geturl()


def redact_headers(headers: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """``headers`` with credential values replaced and URL values redacted."""
    out = []
    for name, value in headers.items():
        lower = name.lower()
        if _SECRET_HEADER.search(lower):
            value = REDACTED
        elif lower in _URL_HEADERS:
            value = redact_url(value)
        out.append((lower, value))
    return tuple(out)


class PageWatches:
    """The watches attached to pages, one per page: a watch lives as long as its page."""

    def __init__(self) -> None:
        self._watches: weakref.WeakKeyDictionary[Any, PageWatch] = weakref.WeakKeyDictionary()

    def __len__(self) -> int:
        return len(self._watches)

    def watch(self, tab: ConversationTab) -> PageWatch:
        """The watch on ``tab``'s page, attached at the first call."""
        page = raw_page(tab)
        watch = self._watches.get(page)
        if watch is None:
            watch = self._watches[page] = PageWatch(tab)
        return watch

    def of(self, tab: ConversationTab) -> PageWatch | None:
        """The watch on ``tab``'s page, if one was attached (none is made)."""
        return self._watches.get(raw_page(tab))
