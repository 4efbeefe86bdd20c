"""What the keeper knows now, shared by its collaborators (named, not reached into).

:class:`KeeperLive` is the one mutable state the keeper's parts share: the running
browser and its generation, each conversation's tab and unheard news, the login
ledger, the grants and the spent-use tokens. The facade
(:class:`~session_keeper.SessionKeeper`) creates it and hands it to each collaborator
(tabs, logins, restart accounting, the browser's lifetime, conversations,
persistence); none of them reaches into another's privates.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar, overload

import attrs

from session_keeper._browser.backend import BrowserSession, PageT
from session_keeper._keeper.state import GenerationRecord, SavedTurn
from session_keeper._model.borrows import BorrowBook
from session_keeper._model.changes import Changes
from session_keeper._model.facts import EndCause, Lost
from session_keeper._model.fingerprint import Fingerprinter
from session_keeper._model.grants import GrantBook
from session_keeper._model.ledger import LoginLedger
from session_keeper._model.uses import UseTokens
from session_keeper._telemetry import DEFAULT_INSTRUMENTS, Instruments
from session_keeper._util.clock import Clock
from session_keeper.errors import BrowserGoneError, KeeperClosedError

#: How many generations the keeper remembers (the newest), in memory and as rows: a
#: conversation is told about the generation it last saw by number, never by its record,
#: so older records only grow a long-lived keeper (a pool relaunches often).
GENERATIONS_KEPT = 100

V = TypeVar("V")
T = TypeVar("T")
_MISSING: Any = object()


class Changed:
    """The conversations whose saved row may differ from what was last written.

    Marked by the conversation books (:class:`Conversations`) and by the tabs and
    pending records in them as they change; taken by a save (``RowBook.plan``).
    """

    def __init__(self) -> None:
        self._marked: set[str] = set()

    def mark(self, conversations: Iterable[str]) -> None:
        """These conversations changed."""
        self._marked.update(conversations)

    def add(self, conversation: str) -> None:
        """``conversation`` changed."""
        self._marked.add(conversation)

    def take(self) -> set[str]:
        """Every marked conversation, unmarking them."""
        taken, self._marked = self._marked, set()
        return taken


def _watch(value: object, changed: Changed, conversation: str) -> None:
    # A record changed in place (a tab's URL, a pending loss) marks its conversation.
    if isinstance(value, Tab | Pending):
        value.watcher = (changed, conversation)


def _touched(instance: Tab[Any] | Pending, attribute: Any, value: object) -> object:
    watcher = instance.watcher
    if watcher is not None and attribute.name != "watcher":
        watcher[0].add(watcher[1])
    return value


class Conversations(dict[str, V]):
    """One of the keeper's per-conversation books: a dict that marks what it changes."""

    def __init__(self, changed: Changed, items: Mapping[str, V] | None = None) -> None:
        super().__init__()
        self._changed = changed
        if items:
            self.update(items)

    def __setitem__(self, key: str, value: V) -> None:
        super().__setitem__(key, value)
        self._changed.add(key)
        _watch(value, self._changed, key)

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self._changed.add(key)

    @overload
    def pop(self, key: str, /) -> V: ...
    @overload
    def pop(self, key: str, default: V, /) -> V: ...
    @overload
    def pop(self, key: str, default: T, /) -> V | T: ...
    def pop(self, key: str, default: Any = _MISSING, /) -> Any:
        if key in self:
            self._changed.add(key)
        return super().pop(key) if default is _MISSING else super().pop(key, default)

    def popitem(self) -> tuple[str, V]:
        item = super().popitem()
        self._changed.add(item[0])
        return item

    def setdefault(self, key: str, default: V, /) -> V:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def clear(self) -> None:
        self._changed.mark(self)
        super().clear()

    def __ior__(self, other: Any) -> Conversations[V]:  # type: ignore[override,misc]
        self.update(other)
        return self


@attrs.define(on_setattr=_touched)
class Tab(Generic[PageT]):
    """A conversation's one page, and what the keeper last verified of it."""

    #: ``None`` for a tab remembered from a previous process.
    page: PageT | None
    generation: int
    last_url: str | None
    verified_at: datetime
    #: Monotonic seconds, of this process only: never saved, so setting it (every use of
    #: the tab) marks nothing to write.
    last_used: float = attrs.field(on_setattr=attrs.setters.NO_OP)
    #: The browser's id for the page (a CDP target id), when the backend names pages.
    target_id: str | None = None
    #: The Guard's block count when the page last committed a navigation: a block
    #: recorded since may be the one whose 403 page the next commit shows (never saved).
    block_mark: int = attrs.field(default=0, on_setattr=attrs.setters.NO_OP)
    #: Who to tell when it changes (set by the book that holds it; see :class:`Changed`).
    watcher: tuple[Changed, str] | None = attrs.field(
        default=None, init=False, eq=False, repr=False
    )


@attrs.define(on_setattr=_touched)
class Pending:
    """What a conversation has not been told yet."""

    since_generation: int | None
    restarted: bool = False
    lost: list[Lost] = attrs.field(factory=list)
    revalidate: list[str] = attrs.field(factory=list)
    restored: list[str] = attrs.field(factory=list)
    renewed: list[str] = attrs.field(factory=list)
    watcher: tuple[Changed, str] | None = attrs.field(
        default=None, init=False, eq=False, repr=False
    )

    def add_loss(self, loss: Lost) -> None:
        # The newest word on a login or tab replaces an older one.
        self.lost = [x for x in self.lost if (x.kind, x.name) != (loss.kind, loss.name)]
        self.lost.append(loss)
        if loss.kind == "login" and loss.name in self.revalidate:
            self.revalidate.remove(loss.name)
        if loss.kind == "login" and loss.name in self.renewed:
            # A renewal not told yet, then a newer loss: the turn tells the loss (a later
            # renewal would add it back, and the turn would tell that instead).
            self.renewed.remove(loss.name)


class KeeperLive(Generic[PageT]):
    """The keeper's live state (see the module): plain fields and the checks over them."""

    def __init__(
        self,
        *,
        clock: Clock,
        idle_timeout: timedelta,
        grants: GrantBook,
        fingerprinter: Fingerprinter,
    ) -> None:
        self.clock = clock
        self.idle_timeout = idle_timeout
        self.grants = grants
        self.fingerprinter = fingerprinter
        self.ledger = LoginLedger()
        # What a spent use admits on the network: armed acts and page loads.
        self.uses = UseTokens()
        self.borrows = BorrowBook()
        self.session: BrowserSession[PageT] | None = None
        self.generation = 0
        self._generations: list[GenerationRecord] = []
        #: The generations whose record changed (started, ended, resumed, dropped)
        #: since the last save took them.
        self.generation_changes: Changes[int] = Changes()
        self.ended: EndCause | None = None
        self.last_used = clock.monotonic()
        # The conversations whose saved row may be out of date (the books mark them).
        self.changed = Changed()
        self._tabs: Conversations[Tab[PageT]] = Conversations(self.changed)
        self._pending: Conversations[Pending] = Conversations(self.changed)
        self._seen: Conversations[int] = Conversations(self.changed)
        # Last ensure() per conversation (monotonic, in memory): retirement's idle clock.
        self.active: dict[str, float] = {}
        self._takeovers: Conversations[datetime] = Conversations(self.changed)
        # Each conversation's current turn and what it was told (ensure(turn=...)).
        self._turns: Conversations[SavedTurn] = Conversations(self.changed)
        # Conversations whose news is held for their next turn (in memory): a turn an
        # earlier process told was told again, without this process's own launch. They
        # called ensure(), so they may act; any newer news ends the hold.
        self.held: set[str] = set()
        self.closed = False
        # The browser a previous process left running (its saved identity): the first
        # ensure() tries to re-bind to it before launching (re-binding).
        self.rebind_to: str | None = None
        # Makes restart single flight; sweep and forget hold it too.
        self.lock = asyncio.Lock()
        # Where every part's spans and metrics go (the keeper's Telemetry settings).
        self.instruments: Instruments = DEFAULT_INSTRUMENTS

    # The saved per-conversation books. Replacing one whole marks every conversation it
    # held or holds (a part that cannot say what it changed).

    def _replace(self, old: Mapping[str, object], new: Mapping[str, V]) -> Conversations[V]:
        self.changed.mark(old)
        return Conversations(self.changed, new)

    @property
    def tabs(self) -> Conversations[Tab[PageT]]:
        """Each conversation's tab."""
        return self._tabs

    @tabs.setter
    def tabs(self, value: Mapping[str, Tab[PageT]]) -> None:
        self._tabs = self._replace(self._tabs, value)

    @property
    def pending(self) -> Conversations[Pending]:
        """What each conversation has not been told yet."""
        return self._pending

    @pending.setter
    def pending(self, value: Mapping[str, Pending]) -> None:
        self._pending = self._replace(self._pending, value)

    @property
    def seen(self) -> Conversations[int]:
        """The generation each conversation last heard of."""
        return self._seen

    @seen.setter
    def seen(self, value: Mapping[str, int]) -> None:
        self._seen = self._replace(self._seen, value)

    @property
    def takeovers(self) -> Conversations[datetime]:
        """Open human takeovers: conversation -> until when."""
        return self._takeovers

    @takeovers.setter
    def takeovers(self, value: Mapping[str, datetime]) -> None:
        self._takeovers = self._replace(self._takeovers, value)

    @property
    def turns(self) -> Conversations[SavedTurn]:
        """Each conversation's current turn and the facts it was told."""
        return self._turns

    @turns.setter
    def turns(self, value: Mapping[str, SavedTurn]) -> None:
        self._turns = self._replace(self._turns, value)

    @property
    def browser_id(self) -> str | None:
        return f"browser-{self.generation}" if self.generation else None

    @property
    def alive(self) -> bool:
        s = self.session
        return s is not None and s.alive and not self.idle_expired()

    def touch(self, conversation: str) -> None:
        """A handle of ``conversation`` was used: the browser and the tab are not idle."""
        mono = self.clock.monotonic()
        self.last_used = mono
        tab = self.tabs.get(conversation)
        if tab is not None:
            tab.last_used = mono

    def is_main_page(self, conversation: str, page: object) -> bool:
        """Whether ``page`` is ``conversation``'s main tab (not one of its popups)."""
        tab = self.tabs.get(conversation)
        return tab is not None and tab.page is page

    def check_open(self) -> None:
        if self.closed:
            raise KeeperClosedError("this SessionKeeper was closed")

    def takeover_active(self) -> bool:
        now = self.clock.now()
        return any(until > now for until in self.takeovers.values())

    def idle_expired(self) -> bool:
        idle = self.clock.monotonic() - self.last_used
        return idle > self.idle_timeout.total_seconds() and not self.takeover_active()

    def session_for(self, conversation: str) -> BrowserSession[PageT]:
        """The live browser for ``conversation``'s call, or :class:`BrowserGoneError`."""
        self.check_open()
        session = self.session
        if session is None or not session.alive or self.idle_expired():
            raise BrowserGoneError(
                f"{self.browser_id or 'the browser'} is gone; call ensure() to learn what was lost"
            )
        if self.restart_unheard(conversation):
            raise BrowserGoneError(
                f"the browser restarted since {conversation}'s last ensure(); call ensure() first"
            )
        return session

    def restart_unheard(self, conversation: str) -> bool:
        """Whether the browser restarted since ``conversation``'s last ``ensure()`` (news
        held for its next turn was heard of: that ``ensure()`` held it)."""
        pending = self.pending.get(conversation)
        return pending is not None and pending.restarted and conversation not in self.held

    def still_current(self, session: BrowserSession[PageT], generation: int) -> None:
        """After an await: the browser may have died or been replaced meanwhile."""
        if self.session is not session or self.generation != generation or not session.alive:
            raise BrowserGoneError(
                f"browser-{generation} went away during the call; "
                "call ensure() to learn what was lost"
            )

    def pending_for(self, conversation: str, *, restarted: bool) -> Pending:
        """The conversation's unheard news (created on first use)."""
        p = self.pending.get(conversation)
        if p is None:
            p = Pending(since_generation=self.seen.get(conversation))
            self.pending[conversation] = p
        # The caller may change its lists in place next.
        self.changed.add(conversation)
        self.held.discard(conversation)  # newer news: told at the next ensure()
        p.restarted = p.restarted or restarted
        return p

    @property
    def generations(self) -> tuple[GenerationRecord, ...]:
        """The browsers the keeper ran (the newest ``GENERATIONS_KEPT``), oldest first."""
        return tuple(self._generations)

    def generation_record(self, generation: int) -> GenerationRecord | None:
        """The kept record of ``generation`` (the newest are at the end)."""
        for record in reversed(self._generations):
            if record.generation == generation:
                return record
        return None

    def load_generations(self, records: Iterable[GenerationRecord]) -> None:
        """The generations a previous process saved (the newest ``GENERATIONS_KEPT``)."""
        self.generation_changes.update(g.generation for g in self._generations)
        self._generations = list(records)[-GENERATIONS_KEPT:]
        self.generation_changes.update(g.generation for g in self._generations)

    def start_generation(self, record: GenerationRecord) -> None:
        """A new browser generation started; only the newest ``GENERATIONS_KEPT`` stay."""
        self._generations.append(record)
        self.generation_changes.add(record.generation)
        self.generation_changes.update(g.generation for g in self._generations[:-GENERATIONS_KEPT])
        del self._generations[:-GENERATIONS_KEPT]

    def end_generation(self, cause: EndCause) -> None:
        """The running browser's generation ended (closed, idle, crashed, our process died)."""
        self.ended = cause
        if self._generations and self._generations[-1].ended_at is None:
            self._set_last(
                attrs.evolve(self._generations[-1], ended_at=self.clock.now(), cause=cause)
            )

    def resume_generation(self) -> None:
        """The browser outlived our process (re-bound to): its generation goes on."""
        if self._generations and self._generations[-1].cause == "process_exit":
            self._set_last(attrs.evolve(self._generations[-1], ended_at=None, cause=None))

    def _set_last(self, record: GenerationRecord) -> None:
        self._generations[-1] = record
        self.generation_changes.add(record.generation)
