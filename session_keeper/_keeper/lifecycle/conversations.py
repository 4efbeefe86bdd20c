"""Conversations: telling each its news once, and ending it (``forget``, retirement).

A conversation's news (restart, losses, logins to re-validate or restored) is handed
over by ``ensure()`` after it is saved, so it is told exactly once. Ending a
conversation drops everything the keeper keeps for it, so the saved document stays
bounded by the live conversations.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Generic

from session_keeper._browser.backend import PageT
from session_keeper._keeper.state.saved import SavedTurn
from session_keeper._model.facts import TurnFacts
from session_keeper._model.grants import check_name
from session_keeper._model.turns import canonical, same_turn
from session_keeper._util.log_fields import log_extra
from session_keeper._util.redact import scrubbing_logger
from session_keeper.errors import InvalidArgument

if TYPE_CHECKING:
    from session_keeper._keeper.saving.persistence import KeeperPersistence
    from session_keeper._keeper.state.live import KeeperLive

log = scrubbing_logger("session_keeper")

#: How many conversations keep their quiet turn's facts for the next quiet turn.
QUIET_KEPT = 1024


class Conversations(Generic[PageT]):
    """Each conversation's told facts and its end (see the module)."""

    def __init__(
        self,
        live: KeeperLive[PageT],
        persist: KeeperPersistence[PageT],
        *,
        conversation_idle_timeout: timedelta | None,
    ) -> None:
        self._live = live
        self._persist = persist
        self._conversation_idle_timeout = conversation_idle_timeout
        #: The facts of a conversation's last quiet turn (nothing to tell, not its first):
        #: the same for every quiet turn of a generation, and frozen, so they are handed
        #: out again rather than built per turn (the turn is the library's hot path).
        self._quiet: dict[str, TurnFacts] = {}
        #: The turn each conversation was told (or told again) in this process. A saved
        #: turn not in here was told by an earlier process (read from the store).
        self._told_here: dict[str, str] = {}

    async def deliver(
        self,
        conversation: str,
        *,
        always_save: bool = False,
        turn: str | None = None,
        defer_quiet_write: bool = False,
    ) -> TurnFacts:
        """Hand the conversation its facts; saved first, so they are told exactly once.

        If the save fails the facts stay pending and the error reaches the caller: a
        later ensure() tells them again rather than never. With ``turn``, every call of
        the same turn gets the same facts (plus what a restart during the turn, in this
        process, added); see ``ensure``. ``defer_quiet_write``: a new turn with nothing
        to tell (nothing pending, not the conversation's first in this browser) is
        recorded unsaved, for the caller's next write to carry (see ``ensure``).
        """
        told = self._live.turns.get(conversation)
        if turn is not None and told is not None and told.turn == turn:
            retold = self._retell(conversation, turn, told.facts)
            if retold is not None:
                if always_save:
                    await self._persist.save()
                return retold
        pending = self._live.pending.get(conversation)
        seen = self._live.seen.get(conversation)
        quiet = pending is None and seen is not None and seen == self._live.generation
        facts = self.facts_for(conversation)
        book = self._live.conversations
        book.set_held(conversation, False)
        if turn is not None:
            self._told_here[conversation] = turn
            # Saved with the same write that clears the pending facts: never told to a
            # turn that cannot be re-told.
            deferred = False
            if told is not None and told.turn == turn:
                facts = same_turn(told.facts, facts)
            else:
                facts = canonical(facts)
                deferred = defer_quiet_write and quiet and not always_save
            book.set_turn(conversation, SavedTurn(turn=turn, facts=facts))
            if deferred:
                # A new turn told nothing, so nothing can be told twice: its record
                # waits, unsaved, for the caller's next write (one write per step).
                self._persist.writes.changed(schedule=False)
                return facts
        if always_save or pending is not None or book.turns.get(conversation) != told:
            try:
                await self._persist.save()
            except BaseException:
                if pending is not None:
                    book.set_pending(conversation, pending)
                book.set_seen(conversation, seen)  # None: still a first turn, next time
                book.set_turn(conversation, told)
                raise
        return facts

    def _retell(self, conversation: str, turn: str, told: TurnFacts) -> TurnFacts | None:
        """Exactly what ``turn`` was told, when nothing new belongs to it; ``None`` when
        a restart during the turn, in this process, is to be added (see ``deliver``).

        A turn an earlier process told (its re-execution in a new process) is told the
        same facts, and this process's own launch, pending now, is the next turn's news:
        it stays pending (saved), held until the next turn or anything newer.
        """
        live = self._live
        book = live.conversations
        if self._told_here.get(conversation) != turn:
            self._told_here[conversation] = turn
            book.set_held(conversation, True)
        else:
            record = book.get(conversation)
            if record is None or not record.held:
                return None  # told here, or news arrived since the hold: the usual re-telling
        book.set_active(conversation, live.clock.monotonic())
        return told

    def quiet(self, conversation: str) -> TurnFacts | None:
        """The facts of this turn (one without a turn id) if it is a quiet one, else
        ``None``: then ``ensure()`` runs its turn and :meth:`deliver` answers.

        Quiet: the browser is alive, no write failed or waits, nothing is pending for
        the conversation and its last quiet turn was in this generation. Such a turn
        logs nothing, awaits nothing and writes nothing (the keeper's hot path).
        """
        live = self._live
        generation = live.generation
        if (
            not self._persist.writes.settled
            or not live.alive
            or conversation in live.pending
            or live.seen.get(conversation) != generation
        ):
            return None
        facts = self._quiet.get(conversation)
        if facts is None or facts.generation != generation:
            return None
        live.last_used = mono = live.clock.monotonic()
        live.conversations.set_active(conversation, mono)
        return facts

    def facts_for(self, conversation: str) -> TurnFacts:
        book = self._live.conversations
        pending = book.take_pending(conversation)
        seen = book.seen.get(conversation)
        first = seen is None
        book.set_seen(conversation, self._live.generation)  # unchanged: nothing to save
        book.set_active(conversation, self._live.clock.monotonic())
        generation = self._live.generation
        if pending is None:  # the common turn: nothing to tell
            facts = TurnFacts(
                restarted=False,
                first_turn=first,
                conversation=conversation,
                browser_id=f"browser-{generation}",
                generation=generation,
            )
            if not first:
                self._keep_quiet(conversation, facts)  # the next quiet turn's (see quiet)
            return facts
        return TurnFacts(
            restarted=pending.restarted,
            lost=tuple(pending.lost),
            revalidate=tuple(pending.revalidate),
            restored=tuple(pending.restored),
            renewed=tuple(pending.renewed),
            previous_generation=pending.since_generation if pending.restarted else None,
            first_turn=first,
            conversation=conversation,
            browser_id=f"browser-{generation}",
            generation=generation,
        )

    def _keep_quiet(self, conversation: str, facts: TurnFacts) -> None:
        quiet = self._quiet
        quiet.pop(conversation, None)
        quiet[conversation] = facts  # the newest last: the oldest goes first
        if len(quiet) > QUIET_KEPT:
            del quiet[next(iter(quiet))]

    async def forget(self, conversation: str) -> bool:
        """See :meth:`SessionKeeper.forget` (the public contract)."""
        self._live.check_open()
        conversation = check_name(conversation, "conversation")
        async with self._live.lock:
            owned = sorted(r.site for r in self._live.ledger.live() if r.owner == conversation)
            if owned:
                raise InvalidArgument(
                    f"{conversation} owns the live login to {', '.join(owned)}; "
                    "it cannot be forgotten while others may rely on it"
                )
            known = await self._drop_conversation(conversation)
        if known:
            await self._persist.save()
            log.info("conversation forgotten", extra=log_extra(conversation=conversation))
        return known

    async def _drop_conversation(self, conversation: str) -> bool:
        record = self._live.conversations.get(conversation)
        known = record is not None and (
            record.tab is not None
            or record.pending is not None
            or record.seen is not None
            or record.active is not None
        )
        session = self._live.session
        if session is not None and session.alive:
            for page in list(session.pages(conversation)):
                known = True
                if session.page_is_open(page):
                    await session.close_page(page)
        self._live.borrows.forget(conversation)
        self._told_here.pop(conversation, None)
        self._live.conversations.forget(conversation)
        self._live.uses.forget(conversation)
        return known

    async def retire_idle(self) -> tuple[str, ...]:
        """Forget conversations idle past ``conversation_idle_timeout`` (under the lock)."""
        limit = self._conversation_idle_timeout
        if limit is None:
            return ()
        mono, now = self._live.clock.monotonic(), self._live.clock.now()
        owners = {r.owner for r in self._live.ledger.live()}
        retired: list[str] = []
        book = self._live.conversations
        for conversation in sorted(book.told_conversations()):
            record = book.get(conversation)
            assert record is not None
            if record.active is None:
                # Known from a saved state or only through news: its idle clock starts now.
                book.set_active(conversation, mono)
            last = record.active if record.active is not None else mono
            if record.tab is not None:
                last = max(last, record.tab.last_used)
            taken_over = record.takeover is not None and record.takeover > now
            if mono - last <= limit.total_seconds() or conversation in owners or taken_over:
                continue
            await self._drop_conversation(conversation)
            retired.append(conversation)
        return tuple(retired)
