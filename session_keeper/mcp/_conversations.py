"""What the MCP server remembers of each conversation between its calls: one record each,
bounded, and dropped when nothing refers to it any more.

A record is made by a conversation's first call. One made by a call over HTTP lives while
an MCP session that acted as the conversation lives, or a call of it runs: when the last
such session ends (deleted, reaped idle, the server stopped) the record goes, and with it
every handle on that session. A record made on stdio or in-process (no session ids) stays
for the next call, but the book holds at most ``bound`` of those: past it, the one used
least recently and not in a call is dropped (its conversation then starts over as if new
to this server: its first tab current, its page header shown again).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any, Final

import attrs
from mcp.server.session import ServerSession

__all__ = ["DEFAULT_BOUND", "ConversationBook", "ConversationState"]

#: How many conversations without a live HTTP session the book remembers at most.
DEFAULT_BOUND: Final = 1024


@attrs.define(kw_only=True, eq=False)
class ConversationState:
    """One conversation as the server's last call of it left it."""

    #: Calls of one conversation run one at a time.
    lock: asyncio.Lock = attrs.Factory(asyncio.Lock)
    #: The current tab's index (``browser_tabs select``).
    current: int = 0
    #: The other pages as the last call left them (URLs): a restart takes them, and the
    #: first result after it names them.
    extra: list[str] = attrs.Factory(list)
    #: The other pages a restart took, with the turn that was told (a retry of that turn
    #: is told again).
    told_lost: tuple[str, list[str]] | None = None
    #: The action a dialog or file chooser interrupted, if any.
    interrupted: asyncio.Future[Any] | None = None
    #: The page header the last result showed (see ``ConversationPage.page_changed``).
    shown: tuple[object, ...] | None = None
    #: Live handshake-era HTTP sessions of this conversation whose client can be asked
    #: (elicitation): Mcp-Session-Id -> the SDK's session handle.
    askable: dict[str, ServerSession] = attrs.Factory(dict)
    #: Live HTTP sessions that acted as this conversation (Mcp-Session-Id).
    sessions: set[str] = attrs.Factory(set)
    #: Whether an HTTP session ever acted as it (then it lives only as long as one does).
    over_http: bool = False
    #: Calls of it being served now.
    in_call: int = 0


class ConversationBook:
    """The server's records of its conversations, and which live session acted as which."""

    def __init__(self, *, bound: int = DEFAULT_BOUND) -> None:
        self._bound = bound
        # Least recently used first.
        self._records: OrderedDict[str, ConversationState] = OrderedDict()
        self._by_session: dict[str, set[str]] = {}

    def __len__(self) -> int:
        """How many conversations are remembered."""
        return len(self._records)

    @property
    def live_sessions(self) -> int:
        """How many live HTTP sessions the book knows of."""
        return len(self._by_session)

    def get(self, conversation: str) -> ConversationState | None:
        """The record of ``conversation``, if one is kept (none is made)."""
        return self._records.get(conversation)

    def begin_call(
        self, conversation: str, session_id: str | None, asker: ServerSession | None
    ) -> ConversationState:
        """A call of ``conversation`` starts (on ``session_id``, if over HTTP): its record,
        made if need be. ``asker``: the session's handle when its client can be asked."""
        record = self._records.get(conversation)
        if record is None:
            record = self._records[conversation] = ConversationState()
        self._records.move_to_end(conversation)
        record.in_call += 1
        if session_id is not None:
            record.over_http = True
            record.sessions.add(session_id)
            self._by_session.setdefault(session_id, set()).add(conversation)
            if asker is not None:
                record.askable[session_id] = asker
        return record

    def end_call(self, conversation: str) -> None:
        """A call of ``conversation`` ended: its record goes if no live session holds it."""
        record = self._records.get(conversation)
        if record is None:
            return
        record.in_call = max(0, record.in_call - 1)
        self._drop_if_unheld(conversation, record)
        self._trim()

    def not_askable(self, conversation: str, session_id: str) -> None:
        """``session_id``'s client could not be asked: do not try it again."""
        record = self._records.get(conversation)
        if record is not None:
            record.askable.pop(session_id, None)

    def session_ended(self, session_id: str) -> None:
        """The HTTP session ``session_id`` ended: forget it, and every record it alone held."""
        for conversation in self._by_session.pop(session_id, set()):
            record = self._records.get(conversation)
            if record is None:
                continue
            record.sessions.discard(session_id)
            record.askable.pop(session_id, None)
            self._drop_if_unheld(conversation, record)

    def clear(self) -> None:
        """The server stopped: nothing is remembered."""
        self._records.clear()
        self._by_session.clear()

    def _drop_if_unheld(self, conversation: str, record: ConversationState) -> None:
        if record.over_http and not record.sessions and not record.in_call:
            del self._records[conversation]

    def _trim(self) -> None:
        # Only records no session and no call holds are dropped; those that are held are
        # bounded by the live sessions (each token holds at most so many).
        if len(self._records) <= self._bound:
            return
        spare = [c for c, r in self._records.items() if not r.sessions and not r.in_call]
        for conversation in spare[: max(0, len(spare) - self._bound)]:
            del self._records[conversation]
