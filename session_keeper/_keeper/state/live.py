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
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any, Final, Generic, TypeVar, cast

import attrs

from session_keeper._browser.backend import BrowserSession, PageT
from session_keeper._keeper.state.saved import GenerationRecord, SavedTurn
from session_keeper._model.borrows import BorrowBook
from session_keeper._model.changes import Changes
from session_keeper._model.facts import EndCause, Lost
from session_keeper._model.fingerprint import Fingerprinter
from session_keeper._model.grants import GrantBook
from session_keeper._model.ledger import LoginLedger
from session_keeper._model.losses import LossCause
from session_keeper._model.uses import UseTokens
from session_keeper._telemetry import DEFAULT_INSTRUMENTS, Instruments
from session_keeper._util.clock import Clock
from session_keeper.errors import BrowserGoneError, KeeperClosedError

#: How many generations the keeper remembers (the newest), in memory and as rows: a
#: conversation is told about the generation it last saw by number, never by its record,
#: so older records only grow a long-lived keeper (a pool relaunches often).
GENERATIONS_KEPT = 100

V = TypeVar("V")


def _touched(instance: Tab[Any] | Pending, attribute: Any, value: object) -> object:
    # A record changed in place (a tab's URL, a pending loss) marks its conversation.
    watcher = instance.watcher
    if watcher is not None and attribute.name != "watcher":
        watcher[0].add(watcher[1])
    return value


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
    #: Who to tell when it changes (set by the :class:`ConversationRecords` that holds it).
    watcher: tuple[Changes[str], str] | None = attrs.field(
        default=None, init=False, eq=False, repr=False
    )

    def as_lost(
        self, conversation: str, cause: LossCause = "gone", *, generation: int | None = None
    ) -> Lost:
        """This tab as ``conversation``'s lost tab: where it last was on the web and when,
        in its generation (``generation``: the one a restart ended, when that is later)."""
        return Lost.tab(
            conversation,
            verified_at=self.verified_at,
            last_url=self.last_url,
            generation=self.generation if generation is None else generation,
            cause=cause,
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
    watcher: tuple[Changes[str], str] | None = attrs.field(
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


@attrs.define(kw_only=True)
class ConversationRecord(Generic[PageT]):
    """One conversation's state: what is saved as its row, and its in-memory clocks.

    Changed only through its :class:`ConversationRecords`; the other parts ask it.
    """

    #: Its one page, and what the keeper last verified of it.
    tab: Tab[PageT] | None = None
    #: What it has not been told yet.
    pending: Pending | None = None
    #: The generation it last heard of.
    seen: int | None = None
    #: Its current turn and the facts it was told (``ensure(turn=...)``).
    turn: SavedTurn | None = None
    #: Until when a person has taken over its tab.
    takeover: datetime | None = None
    #: Monotonic time of its last ``ensure()`` (in memory): retirement's idle clock.
    active: float | None = None
    #: Its news is held for its next turn (in memory): a turn an earlier process told
    #: was told again, without this process's own launch.
    held: bool = False

    def saved(self) -> bool:
        """Whether any part of it is saved (else it has no row)."""
        return (
            self.tab is not None
            or self.pending is not None
            or self.seen is not None
            or self.turn is not None
            or self.takeover is not None
        )


_FIELDS: Final = ("tab", "pending", "seen", "turn", "takeover")


class _View(Mapping[str, V]):
    """One field of every conversation's record, read only (e.g. every tab)."""

    __slots__ = ("_field", "_records")

    def __init__(self, records: dict[str, ConversationRecord[Any]], field: str) -> None:
        self._records = records
        self._field = field

    def __getitem__(self, conversation: str) -> V:
        record = self._records.get(conversation)
        value = None if record is None else getattr(record, self._field)
        if value is None:
            raise KeyError(conversation)
        return cast(V, value)

    def get(self, conversation: str, default: Any = None) -> Any:
        record = self._records.get(conversation)
        value = None if record is None else getattr(record, self._field)
        return default if value is None else value

    def __contains__(self, conversation: object) -> bool:
        record = self._records.get(conversation) if isinstance(conversation, str) else None
        return record is not None and getattr(record, self._field) is not None

    def __iter__(self) -> Iterator[str]:
        field = self._field
        return iter([c for c, r in self._records.items() if getattr(r, field) is not None])

    def __len__(self) -> int:
        field = self._field
        return sum(1 for r in self._records.values() if getattr(r, field) is not None)


class ConversationRecords(Generic[PageT]):
    """Every conversation's :class:`ConversationRecord`, and the only code that changes them.

    Each change marks the conversation in :attr:`changes` (a tab or pending record
    changed in place marks it too, through its watcher): a save writes those rows and
    looks at no other conversation. Forgetting a conversation is one call.
    """

    def __init__(self) -> None:
        self._records: dict[str, ConversationRecord[PageT]] = {}
        # The conversations with an open takeover (few; asked on every idle check).
        self._taken_over: dict[str, datetime] = {}
        #: The conversations whose row may differ from what was written.
        self.changes: Changes[str] = Changes()
        #: Read-only views of one field of every record.
        self.tabs: Mapping[str, Tab[PageT]] = _View(self._records, "tab")
        self.pending: Mapping[str, Pending] = _View(self._records, "pending")
        self.seen: Mapping[str, int] = _View(self._records, "seen")
        self.turns: Mapping[str, SavedTurn] = _View(self._records, "turn")
        self.takeovers: Mapping[str, datetime] = self._taken_over

    # -- reading ----------------------------------------------------------------------
    def get(self, conversation: str) -> ConversationRecord[PageT] | None:
        """``conversation``'s record (read it; change it through the book's methods)."""
        return self._records.get(conversation)

    def known(self, conversation: str) -> bool:
        """Whether the keeper holds anything of ``conversation``."""
        return conversation in self._records

    def told_conversations(self) -> list[str]:
        """Every conversation with a tab, news, or a generation it heard of."""
        return [
            c
            for c, r in self._records.items()
            if r.tab is not None or r.pending is not None or r.seen is not None
        ]

    # -- changing ---------------------------------------------------------------------
    def _record(self, conversation: str) -> ConversationRecord[PageT]:
        record = self._records.get(conversation)
        if record is None:
            record = self._records[conversation] = ConversationRecord()
        return record

    def _set(self, conversation: str, field: str, value: object) -> None:
        record = self._records.get(conversation)
        if record is None:
            if value is None:
                return
            record = self._record(conversation)
        if getattr(record, field) is value:
            return
        setattr(record, field, value)
        self.changes.add(conversation)
        if isinstance(value, Tab | Pending):
            value.watcher = (self.changes, conversation)

    def set_tab(self, conversation: str, tab: Tab[PageT] | None) -> None:
        """``conversation``'s tab is ``tab`` now (``None``: it has none)."""
        self._set(conversation, "tab", tab)

    def drop_all_tabs(self) -> None:
        """The browser went: no conversation has a page in it any more."""
        for conversation, record in self._records.items():
            if record.tab is not None:
                record.tab = None
                self.changes.add(conversation)

    def set_pending(self, conversation: str, pending: Pending | None) -> None:
        """What ``conversation`` has not been told yet (``None``: nothing)."""
        self._set(conversation, "pending", pending)

    def take_pending(self, conversation: str) -> Pending | None:
        """``conversation``'s untold news, now being told (it has none after this)."""
        record = self._records.get(conversation)
        pending = None if record is None else record.pending
        if pending is not None:
            self._set(conversation, "pending", None)
        return pending

    def set_seen(self, conversation: str, generation: int | None) -> None:
        """The generation ``conversation`` last heard of (``None``: never told anything)."""
        record = self._records.get(conversation)
        if record is None or record.seen != generation:
            self._set(conversation, "seen", generation)

    def set_turn(self, conversation: str, turn: SavedTurn | None) -> None:
        """``conversation``'s current turn and what it was told (``None``: no turn)."""
        record = self._records.get(conversation)
        if record is None or record.turn != turn:
            self._set(conversation, "turn", turn)

    def set_takeover(self, conversation: str, until: datetime | None) -> bool:
        """A person has (``None``: no longer has) ``conversation``'s tab; whether it changed."""
        record = self._records.get(conversation)
        if (None if record is None else record.takeover) == until:
            return False
        self._set(conversation, "takeover", until)
        if until is None:
            self._taken_over.pop(conversation, None)
        else:
            self._taken_over[conversation] = until
        return True

    def end_takeovers(self, now: datetime) -> bool:
        """Takeovers past their end are over; whether any was."""
        ended = [c for c, until in self._taken_over.items() if until <= now]
        for conversation in ended:
            self.set_takeover(conversation, None)
        return bool(ended)

    def set_active(self, conversation: str, mono: float) -> None:
        """``conversation`` called ``ensure()`` at ``mono`` (in memory, never saved)."""
        self._record(conversation).active = mono

    def set_held(self, conversation: str, held: bool) -> None:
        """Whether ``conversation``'s news waits for its next turn (in memory)."""
        record = self._records.get(conversation)
        if record is not None:
            record.held = held
        elif held:
            self._record(conversation).held = True

    def load(self, records: Mapping[str, ConversationRecord[PageT]]) -> None:
        """Replace every record with saved ones (a new process picking up)."""
        self.changes.update(self._records)
        self._records.clear()
        self._taken_over.clear()
        for conversation, record in records.items():
            fresh: ConversationRecord[PageT] = ConversationRecord(
                seen=record.seen, turn=record.turn, active=record.active, held=record.held
            )
            self._records[conversation] = fresh
            self.set_tab(conversation, record.tab)
            self.set_pending(conversation, record.pending)
            self.set_takeover(conversation, record.takeover)
            self.changes.add(conversation)

    def forget(self, conversation: str) -> bool:
        """Drop everything of ``conversation``; whether the keeper held anything of it."""
        record = self._records.pop(conversation, None)
        self._taken_over.pop(conversation, None)
        if record is None:
            return False
        if record.saved():
            self.changes.add(conversation)
        return True


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
        #: Every conversation's record (its tab, news, turn...), changed only through it.
        self.conversations: ConversationRecords[PageT] = ConversationRecords()
        self.closed = False
        # The browser a previous process left running (its saved identity): the first
        # ensure() tries to re-bind to it before launching (re-binding).
        self.rebind_to: str | None = None
        # Makes restart single flight; sweep and forget hold it too.
        self.lock = asyncio.Lock()
        # Where every part's spans and metrics go (the keeper's Telemetry settings).
        self.instruments: Instruments = DEFAULT_INSTRUMENTS

    # Readers' views of one field of every conversation (see ConversationRecords).

    @property
    def changed(self) -> Changes[str]:
        """The conversations whose saved row may be out of date."""
        return self.conversations.changes

    @property
    def tabs(self) -> Mapping[str, Tab[PageT]]:
        """Each conversation's tab."""
        return self.conversations.tabs

    @property
    def pending(self) -> Mapping[str, Pending]:
        """What each conversation has not been told yet."""
        return self.conversations.pending

    @property
    def seen(self) -> Mapping[str, int]:
        """The generation each conversation last heard of."""
        return self.conversations.seen

    @property
    def takeovers(self) -> Mapping[str, datetime]:
        """Open human takeovers: conversation -> until when."""
        return self.conversations.takeovers

    @property
    def turns(self) -> Mapping[str, SavedTurn]:
        """Each conversation's current turn and the facts it was told."""
        return self.conversations.turns

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

    def popups(self, conversation: str) -> tuple[Any, ...]:
        """``conversation``'s open pages other than its tab (its popups and theirs), oldest
        first; empty while no browser runs. A look at the live browser: nothing is sent."""
        session = self.session
        if session is None:
            return ()
        return tuple(
            p for p in session.pages(conversation) if not self.is_main_page(conversation, p)
        )

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
        record = self.conversations.get(conversation)
        return (
            record is not None
            and record.pending is not None
            and record.pending.restarted
            and not record.held
        )

    def still_current(self, session: BrowserSession[PageT], generation: int) -> None:
        """After an await: the browser may have died or been replaced meanwhile."""
        if self.session is not session or self.generation != generation or not session.alive:
            raise BrowserGoneError(
                f"browser-{generation} went away during the call; "
                "call ensure() to learn what was lost"
            )

    def pending_for(self, conversation: str, *, restarted: bool) -> Pending:
        """The conversation's unheard news (created on first use)."""
        book = self.conversations
        p = book.pending.get(conversation)
        if p is None:
            p = Pending(since_generation=book.seen.get(conversation))
            book.set_pending(conversation, p)
        # The caller may change its lists in place next.
        book.changes.add(conversation)
        book.set_held(conversation, False)  # newer news: told at the next ensure()
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
