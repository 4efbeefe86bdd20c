"""Watching a conversation's document responses, for login evidence (no cookie values).

:class:`SignInWatch` is attached to every page a :class:`PlaywrightSession` owns; it
keeps, per conversation, the last :data:`KEEP` top-level document responses as
:class:`~session_keeper._model.sign_in.DocumentSeen` (method, status, host, names of
the cookies set). Sessions that offer it satisfy :class:`SignInObserving`.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from itertools import count
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from playwright.async_api import Page, Response

from session_keeper._model.cookies import cookie_applies_to
from session_keeper._model.sign_in import DocumentSeen
from session_keeper._util.redact import scrubbing_logger

log = scrubbing_logger("session_keeper.playwright")

__all__ = ["KEEP", "DocumentObserving", "SignInObserving", "SignInWatch"]

#: Document responses kept per conversation: a sign-in is a few of them.
KEEP = 32

#: A visible password input: the page still asks for the credentials.
_PASSWORD_FORM_JS = """() => [...document.querySelectorAll('input[type=password]')]
    .some(e => e.offsetParent !== null || e.getClientRects().length > 0)"""


@runtime_checkable
class SignInObserving(Protocol):
    """A session that reports its conversations' document responses."""

    async def settle(self) -> None:
        """Wait until every document response already seen is noted."""
        ...

    def documents(self, conversation: str) -> Sequence[DocumentSeen]:
        """The conversation's recent document responses, oldest first (no round trip)."""
        ...

    def document_seq(self) -> int:
        """The ``seq`` the next document response gets (no round trip)."""
        ...

    async def shows_password_form(self, conversation: str, site: str) -> bool:
        """Whether the conversation's page that last answered from ``site`` shows one."""
        ...


@runtime_checkable
class DocumentObserving(Protocol):
    """A session that tells each document response of its conversations' pages as it is
    noted (the same :class:`DocumentSeen` :meth:`SignInObserving.documents` lists)."""

    def on_document(self, callback: Callable[[str, DocumentSeen], None]) -> None:
        """Call ``callback(conversation, seen)`` for each one from now on (must not raise)."""
        ...

    def set_cookies_wanted(self, wanted: Callable[[str], bool]) -> None:
        """From now on, read a document response's ``Set-Cookie`` names (a round trip to
        the driver) only when ``wanted(host)`` says they can matter as it arrives; any
        other response is noted with none (its method, status and host cost nothing)."""
        ...


def _cookie_names(set_cookie: str) -> frozenset[str]:
    # Playwright joins several Set-Cookie headers with newlines; the name ends at "=".
    names = (line.split("=", 1)[0].strip() for line in set_cookie.split("\n") if "=" in line)
    return frozenset(n for n in names if n)


class SignInWatch:
    """Per-conversation document responses of the pages it is attached to."""

    def __init__(self) -> None:
        self._seq = count(1)
        self._next = 1
        self._seen: dict[str, deque[DocumentSeen]] = {}
        self._last_page: dict[tuple[str, str], Page] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._listeners: list[Callable[[str, DocumentSeen], None]] = []
        # None: every response's Set-Cookie names are read (nobody said which matter).
        self._wanted: list[Callable[[str], bool]] | None = None

    def on_document(self, callback: Callable[[str, DocumentSeen], None]) -> None:
        """See :meth:`DocumentObserving.on_document`."""
        self._listeners.append(callback)

    def set_cookies_wanted(self, wanted: Callable[[str], bool]) -> None:
        """See :meth:`DocumentObserving.set_cookies_wanted` (several: any of them)."""
        self._wanted = [*(self._wanted or ()), wanted]

    def _wants(self, host: str) -> bool:
        if self._wanted is None:
            return True
        for wanted in self._wanted:
            try:
                if wanted(host):
                    return True
            except Exception:
                log.exception("set_cookies_wanted callback %r raised", wanted)
                return True  # read it: a lost Set-Cookie could hide a sign-in
        return False

    def attach(self, page: Page, conversation: str) -> None:
        """Watch ``page``'s main-frame document responses for ``conversation``."""
        page.on("response", lambda response: self._on_response(page, conversation, response))

    def forget(self, conversation: str) -> None:
        """Drop what was seen for ``conversation``."""
        self._seen.pop(conversation, None)
        for key in [k for k in self._last_page if k[0] == conversation]:
            del self._last_page[key]

    def _on_response(self, page: Page, conversation: str, response: Response) -> None:
        request = response.request
        if not request.is_navigation_request() or response.frame != page.main_frame:
            return
        # Numbered now, in arrival order, though the headers are read later; whether
        # its Set-Cookie names can matter is decided now too (a sign-in that begins
        # later starts with the responses numbered after it).
        seq = next(self._seq)
        self._next = seq + 1
        host = (urlsplit(response.url).hostname or "").lower()
        wanted = self._wants(host)
        task = asyncio.ensure_future(self._note(page, conversation, response, seq, wanted))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _note(
        self, page: Page, conversation: str, response: Response, seq: int, wanted: bool
    ) -> None:
        set_cookie = ""
        if wanted:
            try:
                set_cookie = await response.header_value("set-cookie") or ""
            except Exception:
                set_cookie = ""  # the browser went away: the status still says something
        host = (urlsplit(response.url).hostname or "").lower()
        seen = self._seen.setdefault(conversation, deque(maxlen=KEEP))
        document = DocumentSeen(
            seq=seq,
            method=response.request.method,
            status=response.status,
            host=host,
            set_cookies=_cookie_names(set_cookie),
        )
        seen.append(document)
        if host:
            self._last_page[(conversation, host)] = page
        for listener in list(self._listeners):
            try:
                listener(conversation, document)
            except Exception:
                log.exception("on_document callback %r raised", listener)

    async def settle(self) -> None:
        """Wait for the responses already seen to be noted."""
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def documents(self, conversation: str) -> Sequence[DocumentSeen]:
        """See :meth:`SignInObserving.documents`."""
        return sorted(self._seen.get(conversation, ()), key=lambda d: d.seq)

    def document_seq(self) -> int:
        """See :meth:`SignInObserving.document_seq`."""
        return self._next

    async def shows_password_form(self, conversation: str, site: str) -> bool:
        """See :meth:`SignInObserving.shows_password_form`."""
        await self.settle()
        latest = max(
            (d for d in self.documents(conversation) if d.host and cookie_applies_to(site, d.host)),
            key=lambda d: d.seq,
            default=None,
        )
        page = self._last_page.get((conversation, latest.host)) if latest else None
        if page is None or page.is_closed():
            return False
        try:
            return bool(await page.evaluate(_PASSWORD_FORM_JS))
        except Exception:
            return False  # navigated away or closed meanwhile: no form to judge
