"""What a browser session can do beyond :class:`~session_keeper.BrowserSession`, as
capabilities a caller asks for by protocol, never by the session's class.

Each optional capability is a protocol of its own (here and beside the code that
implements it: :class:`WebStorage`, :class:`SignInObserving`, ...). Which of them a
session offers is decided in one place, :func:`capabilities_of`, as one
:class:`SessionCapabilities`; the engine and the Guard ask it, never the session's
class, so a backend of its own gets watched, guarded and re-bound by implementing the
protocols, not by subclassing ours, and one that implements only ``BrowserSession``
works with the defaults.

The Guard needs a session whose network it can intercept (:class:`InterceptableSession`:
Playwright's and CDP's); a session that can lose its connection and re-adopt its pages
(:class:`ReattachingSession`: CDP's) also tells it when to put its interception back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, cast, runtime_checkable

import attrs

from session_keeper._browser.backend import BrowserSession, NavigationObserving, PageT
from session_keeper._browser.page_activity import ActivityObserving, DownloadSeen, InputSeen
from session_keeper._browser.rebind import RebindableSession
from session_keeper._browser.sign_in_watch import DocumentObserving, SignInObserving
from session_keeper._browser.storage_read import WebStorage

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Page

    from session_keeper._model.sign_in import DocumentSeen

__all__ = [
    "InterceptableSession",
    "ReattachingSession",
    "SessionCapabilities",
    "SignInPages",
    "UnattendedSession",
    "capabilities_of",
    "identity_of",
    "target_of",
]


@runtime_checkable
class SignInPages(Protocol):
    """A session that opens pages of their own for a sign-in: a secret is typed where no
    model reaches.

    A sign-in page belongs to a conversation for enforcement (its grants and sign-in
    apply, as on its tab) but is none of its pages: :meth:`BrowserSession.pages` never
    lists it, it has no opener and no window name, so no handle, tool or popup of the
    conversation can reach its document. A popup it opens (a sign-in through an identity
    provider's popup) is a sign-in page too.
    """

    async def open_sign_in_page(self, conversation: str) -> object:
        """Open a blank sign-in page of ``conversation`` (see the class)."""
        ...

    def is_sign_in_page(self, page: object) -> bool:
        """Whether ``page`` is a sign-in page (local state)."""
        ...

    def sign_in_pages(self, conversation: str) -> Sequence[object]:
        """The open sign-in pages of ``conversation`` and their popups, oldest first
        (local state)."""
        ...


@runtime_checkable
class InterceptableSession(Protocol):
    """A session whose pages live in one Playwright context, so that its network can be
    intercepted (context and page routes, a CDP session per page)."""

    @property
    def context(self) -> BrowserContext:
        """The context every owned page lives in."""
        ...

    @property
    def alive(self) -> bool:
        """Whether the browser is running (local state)."""
        ...

    def on_page(self, callback: Callable[[str, Page], Awaitable[None] | None]) -> None:
        """Call ``callback(conversation, page)`` for every owned page opened from now on."""
        ...

    def owner_of(self, page: Page) -> str | None:
        """The conversation that owns ``page`` (a popup is its opener's), if any."""
        ...


@runtime_checkable
class ReattachingSession(InterceptableSession, Protocol):
    """An interceptable session that can lose its connection to a browser that lives on,
    and adopt the pages again (after a dropped socket, or from a previous process)."""

    def on_readopt(self, callback: Callable[[ReattachingSession], Awaitable[None]]) -> None:
        """Run ``await callback(session)`` after a reconnect re-adopted the owned pages
        (before any waiting call goes on)."""
        ...

    def owned_pages(self) -> Sequence[tuple[str, Page]]:
        """``(conversation, page)`` for every owned page (local state)."""
        ...

    def found_at_rebind(self, page: Page) -> bool:
        """Whether ``page`` was opened by a previous keeper process and found again."""
        ...


class _HearsNoNavigation:
    """The navigations of a session that reports none: nobody is ever called."""

    def on_navigated(self, callback: Callable[[str, Any, str], None]) -> None:
        del callback


class _HearsNoDocuments:
    """The document responses of a session that reports none: nobody is ever called, and
    no ``Set-Cookie`` is read for anyone."""

    def on_document(self, callback: Callable[[str, DocumentSeen], None]) -> None:
        del callback

    def set_cookies_wanted(self, wanted: Callable[[str], bool]) -> None:
        del wanted


class _SeesNoActivity:
    """The page activity of a session that observes none: no input or download was seen
    (so a restart names none as taken), none is saved, and no act waits to be counted."""

    def unsubmitted_input(self, conversation: str | None = None) -> Sequence[InputSeen]:
        del conversation
        return ()

    def unsaved_downloads(self, conversation: str | None = None) -> Sequence[DownloadSeen]:
        del conversation
        return ()

    async def save_downloads(self, conversation: str, directory: Path) -> tuple[Path, ...]:
        del conversation, directory
        return ()

    async def input_counted(self, page: object) -> None:
        del page


_NO_NAVIGATION = _HearsNoNavigation()
_NO_DOCUMENTS = _HearsNoDocuments()
_NO_ACTIVITY = _SeesNoActivity()


@runtime_checkable
class UnattendedSession(Protocol):
    """A session that can tell whether only the keeper's handles drive its pages."""

    @property
    def unattended(self) -> bool:
        """Whether no person can act on its pages: a headless browser its backend
        launched (no window, no debugging port). A page's input then comes only through
        the handles the keeper gave out."""
        ...


@attrs.frozen(kw_only=True)
class SessionCapabilities(Generic[PageT]):
    """What one session can do beyond :class:`~session_keeper.BrowserSession`.

    A capability the session offers is the session itself, seen through its protocol.
    One it lacks is one of two defaults, chosen so that a default never turns "cannot
    tell" into "nothing there":

    - An observer (``navigation``, ``documents``, ``activity``) is a null one that hears
      and sees nothing: registering is a no-op, asking gets nothing seen. Only what was
      observed is ever reported, so nothing observed reports nothing.
    - A capability whose absence changes a decision is ``None``, so each caller says
      what "cannot tell" means where it decides: a storage login in a browser that
      cannot read storage is lost, a session the Guard cannot intercept is refused, no
      document evidence means no login-page check.
    """

    #: Committed navigations (where a tab is); hears nothing by default.
    navigation: NavigationObserving[PageT]
    #: Document responses as noted (a login cookie's re-issue); hears nothing by default.
    documents: DocumentObserving
    #: Typed input and downloads a restart would take; sees nothing by default.
    activity: ActivityObserving
    #: The conversations' recent document responses (sign-in evidence), if offered.
    sign_in: SignInObserving | None
    #: Reading and writing web storage, if offered.
    web_storage: WebStorage | None
    #: Sign-in pages no model reaches, if offered.
    sign_in_pages: SignInPages | None
    #: A network the Guard can intercept, if offered.
    interceptable: InterceptableSession | None
    #: Re-adopting pages after a lost connection, if offered.
    reattaching: ReattachingSession | None
    #: Names of the browser and its pages that outlive our process, if offered.
    rebindable: RebindableSession[PageT] | None
    #: Whether only the keeper's handles drive its pages (False: a person may, too).
    unattended: bool = False


@attrs.frozen
class _Offered:
    """Which optional protocols a session class implements (see :func:`capabilities_of`)."""

    navigation: bool
    documents: bool
    activity: bool
    sign_in: bool
    web_storage: bool
    sign_in_pages: bool
    interceptable: bool
    reattaching: bool
    rebindable: bool
    unattended: bool


def _offered(session: object) -> _Offered:
    return _Offered(
        navigation=isinstance(session, NavigationObserving),
        documents=isinstance(session, DocumentObserving),
        activity=isinstance(session, ActivityObserving),
        sign_in=isinstance(session, SignInObserving),
        web_storage=isinstance(session, WebStorage),
        sign_in_pages=isinstance(session, SignInPages),
        interceptable=isinstance(session, InterceptableSession),
        reattaching=isinstance(session, ReattachingSession),
        rebindable=isinstance(session, RebindableSession),
        unattended=isinstance(session, UnattendedSession),
    )


#: What each session class offers, decided once per class: a runtime protocol check
#: walks the protocol's members every time (tens of µs), and hot paths (every save,
#: every typed act) ask. A class that forwards attributes (``__getattr__``) may offer
#: different things per instance, so it is asked each time instead.
_OFFERED: dict[type, _Offered] = {}


def _offered_by(session: object) -> _Offered:
    cls = type(session)
    offered = _OFFERED.get(cls)
    if offered is None:
        offered = _offered(session)
        if not hasattr(cls, "__getattr__"):
            _OFFERED[cls] = offered
    return offered


def capabilities_of(session: BrowserSession[PageT]) -> SessionCapabilities[PageT]:
    """What ``session`` can do beyond the base protocol: the one place that asks (see
    :class:`SessionCapabilities` for what a missing capability answers)."""
    offered = _offered_by(session)
    it: Any = session
    return SessionCapabilities(
        navigation=it if offered.navigation else _NO_NAVIGATION,
        documents=it if offered.documents else _NO_DOCUMENTS,
        activity=it if offered.activity else _NO_ACTIVITY,
        sign_in=it if offered.sign_in else None,
        web_storage=it if offered.web_storage else None,
        sign_in_pages=it if offered.sign_in_pages else None,
        interceptable=it if offered.interceptable else None,
        reattaching=it if offered.reattaching else None,
        rebindable=it if offered.rebindable else None,
        unattended=offered.unattended and bool(it.unattended),
    )


def identity_of(session: BrowserSession[Any] | None) -> str | None:
    """The live browser's saved name, if its backend gives one (from the class's flags
    alone, as :func:`target_of`: every save asks)."""
    if session is None or not session.alive or not _offered_by(session).rebindable:
        return None
    return cast("RebindableSession[Any]", session).identity


def target_of(session: BrowserSession[PageT], page: PageT) -> str | None:
    """The browser's id for ``page``, if its backend names pages."""
    if not _offered_by(session).rebindable:
        return None
    target: str | None = cast("RebindableSession[PageT]", session).target_id(page)
    return target
